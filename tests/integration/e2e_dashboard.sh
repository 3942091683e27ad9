#!/usr/bin/env bash
# The Grafana dashboard (tools/grafana/meshgate.json) against a running gateway: one gateway
# with every part a dashboard panel shows (a dnat service and a proxy service with health
# checks through the backend port's kernel twin, a mesh service reached over HBONE, [bgp]
# through BIRD with a peer that never answers, the access log) serves one request of each kind;
# then
#   - `promtool check metrics` accepts /metrics (format and Prometheus' naming rules);
#   - the dashboard is well formed (unique panel ids, a Prometheus target in every panel, the
#     grid within 24 columns) and every metric name it queries has a family with at least one
#     sample in /metrics.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/hbone/common.sh"
require_root
command -v promtool >/dev/null || fail "promtool missing (tools/setup.sh installs prometheus)"
DASHBOARD=$MG_SOURCE_DIR/tools/grafana/meshgate.json
[[ -s $DASHBOARD ]] || fail "no dashboard at $DASHBOARD"

hbone_python
hbone_topology d
# The gateway in a namespace of its own: its kernel twin's addresses stay out of the root
# namespace that parallel tests share.
GW=mgdg$ID HOSTIF=mgdh$ID
ip netns add "$GW"; NETNS+=("$GW")
ip netns exec "$GW" ip link set lo up
for dev in "gdc$ID" "gdb$ID"; do
  ip link set "$dev" netns "$GW"
  ip netns exec "$GW" ip link set "$dev" up
  offloads_off "$dev" "$GW"
done
admin() { ip netns exec "$GW" curl -sf --max-time 5 "http://$MG_ADMIN/$1"; }
ip netns exec "$BE" python3 -m http.server 8080 --bind 198.51.100.11 --directory "$TMP" \
  >"$TMP/http.log" 2>&1 &
PIDS+=($!)
ip netns exec "$BE" $PY "$H/backend.py" echo 7000 --bind 0.0.0.0 2>"$TMP/echo.log" &
PIDS+=($!)
for port in 8080 7000; do
  wait_for 10 ip netns exec "$BE" bash -c "echo >/dev/tcp/198.51.100.11/$port" || fail "backend $port did not start"
done
echo "dashboard $ID" >"$TMP/hello.txt"
echo_mesh >"$TMP/mesh.toml"

cat >"$TMP/gw.toml" <<TOML
[gateway]
workers = 1
[[port]]
name = "client"
device = "net_af_packet_dc$ID,iface=gdc$ID"
addresses = ["192.0.2.1/24"]
[[port]]
name = "backend"
device = "net_af_packet_db$ID,iface=gdb$ID"
addresses = ["198.51.100.1/24"]
host_interface = "$HOSTIF"
[fullnat]
local_addresses = ["198.51.100.2"]
[mesh]
source = "file"
path = "$TMP/mesh.toml"
[hbone]
cert_chain = "$P/demo.server.pem"
private_key = "$P/demo.server-key.pem"
trust_bundle = "$P/root.pem"
[bgp]
local_as = 65001
runtime_dir = "$TMP/bird"
  [[bgp.peer]]
  address = "198.51.100.254"
  remote_as = 65000
[access_log]
path = "$TMP/access.log"
[[service]]
name = "web"
vip = "203.0.113.10"
port = 80
health_check = { type = "tcp", interval_ms = 500, timeout_ms = 200 }
  [[service.backend]]
  address = "198.51.100.11"
  port = 8080
[[service]]
name = "app"
vip = "203.0.113.11"
port = 80
mode = "proxy"
  [[service.backend]]
  address = "198.51.100.11"
  port = 8080
[admin]
listen = "$MG_ADMIN"
TOML
mkdir -p "$TMP/bird"
ip netns exec "$GW" "$MG_BIN" --config "$TMP/gw.toml" >"$TMP/gateway.log" 2>&1 &
GW_PID=$!
PIDS+=("$GW_PID")
wait_for 60 admin ready >/dev/null || fail "gateway not ready"

wait_for 10 bash -c "ip netns exec $GW curl -s http://$MG_ADMIN/metrics | grep -q '^meshgate_backend_up{.*} 1'" \
  || fail "the health check never passed"
note "one request of each kind: dnat, proxy, HBONE"
for vip in 203.0.113.10 203.0.113.11; do
  got=$(ip netns exec "$CLI" curl -s --max-time 5 "http://$vip/hello.txt") || fail "curl $vip"
  [[ $got == "dashboard $ID" ]] || fail "$vip answered \"$got\""
done
ip netns exec "$CLI" timeout 60 $PY "$H/h2client.py" 192.0.2.1 15008 --cert "$P/demo.client.pem" \
  --key "$P/demo.client-key.pem" --bundle "$P/root.pem" --timeout 30 streams --n 1 \
  --authority 203.0.113.30:80 >"$TMP/h2client.log" 2>&1 || fail "HBONE stream: $(cat "$TMP/h2client.log")"
admin metrics >"$TMP/metrics.txt" || fail "GET /metrics"
note "promtool check metrics"
promtool check metrics <"$TMP/metrics.txt" >"$TMP/promtool.log" 2>&1 \
  || fail "promtool check metrics: $(head -20 "$TMP/promtool.log")"

note "every series the dashboard queries"
python3 - "$DASHBOARD" "$TMP/metrics.txt" <<'PY' || fail "dashboard check"
import json, re, sys
dash = json.load(open(sys.argv[1]))
families, sampled = set(), set()
for line in open(sys.argv[2]):
    if line.startswith("# TYPE "):
        families.add(line.split()[2])
    elif line.strip() and not line.startswith("#"):
        sampled.add(re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", line).group(0))
errors, names, ids = [], set(), set()
name_re = re.compile(r"\b((?:meshgate|istio)_[a-z0-9_]+)\b")
for p in dash["panels"]:
    if p["id"] in ids:
        errors.append(f"panel id {p['id']} twice")
    ids.add(p["id"])
    g = p["gridPos"]
    if g["x"] < 0 or g["x"] + g["w"] > 24:
        errors.append(f"panel {p['title']!r} outside the 24 columns")
    if p["type"] == "row":
        continue
    if p.get("datasource", {}).get("type") != "prometheus":
        errors.append(f"panel {p['title']!r} has no Prometheus data source")
    if not p.get("targets"):
        errors.append(f"panel {p['title']!r} has no query")
    for t in p.get("targets", []):
        found = name_re.findall(t["expr"])
        if not found:
            errors.append(f"panel {p['title']!r}: no meshgate or istio series in {t['expr']!r}")
        names.update(found)
for v in dash["templating"]["list"]:
    if v["type"] == "query":
        names.update(name_re.findall(v["definition"]))
for n in sorted(names):
    if n not in families:
        errors.append(f"{n}: no such family in /metrics")
    elif n not in sampled:
        errors.append(f"{n}: the family has no sample")
print(f"{len(names)} series in {len(ids)} panels")
for e in errors:
    print("dashboard:", e, file=sys.stderr)
sys.exit(1 if errors else 0)
PY
kill -TERM "$GW_PID"
wait "$GW_PID" || fail "gateway exited $? after SIGTERM"
echo "PASS"
