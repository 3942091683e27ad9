#!/usr/bin/env bash
# Live mode on net_null ports with two workers (RSS queues, one per worker): the workers poll,
# SIGINT, SIGTERM and SIGQUIT each stop the gateway with exit 0, the summary and --stats-json;
# SIGHUP reloads the config live (the same file: nothing changes) and is ignored in a replay;
# it never ends the process.
source "$(dirname "$0")/lib.sh"

cat >"$TMP/gw.toml" <<TOML
[gateway]
workers = 2
[[port]]
name = "null0"
device = "net_null_s$ID"
mac = "02:00:00:00:00:01"
addresses = ["198.51.100.1/24"]
[admin]
listen = "$MG_ADMIN"
TOML
for sig in INT TERM QUIT; do
  start_gateway "$TMP/gw.toml"
  sleep 1
  stop_gateway $sig
  [[ ! -e /var/run/dpdk/meshgate-$GW_PID-0 ]] || fail "SIG$sig: the EAL runtime directory was left behind"
  grep -q "meshgate summary" "$TMP/gateway.log" || fail "no summary after SIG$sig"
  in=$(json "$TMP/stats.json" "d['packets_in']")
  # net_null delivers zero-filled frames: never addressed to us, each one counted as such.
  (( in > 0 )) || fail "workers received nothing"
  [[ $(json "$TMP/stats.json" "d['drops']['l2_not_for_us']") == "$in" ]] || fail "drops do not match"
  [[ $(json "$TMP/stats.json" "len(d['workers'])") == 2 ]] || fail "expected 2 workers"
  [[ $(json "$TMP/stats.json" "all(w['loops'] > 0 and w['packets_in'] > 0 for w in d['workers'])") == True ]] \
    || fail "a worker did not poll its queue"
  rm -f "$TMP/stats.json"
done
# EAL arguments after `--` that name every default: the EAL gets exactly this memory.
"$MG_BIN" --config "$TMP/gw.toml" --stats-json "$TMP/stats.json" --workers 1 -- --no-huge -m 345 \
  --no-pci --no-shconf --no-telemetry --file-prefix "mge2e-eal-$ID" --lcores 0@0,1@0 \
  --log-level=warning >"$TMP/eal.log" 2>&1 &
PIDS+=($!)
wait_for 20 grep -q "event=workers_started" "$TMP/eal.log" || fail "gateway with EAL args did not start"
grep -q "event=eal_ready eal_args=user hugepages=no memory_mb=345 " "$TMP/eal.log" \
  || fail "EAL arguments were not applied: $(grep eal_ready "$TMP/eal.log")"
kill -INT "${PIDS[-1]}"
wait "${PIDS[-1]}" || fail "gateway with EAL args did not exit 0"
[[ ! -e /var/run/dpdk/mge2e-eal-$ID ]] || fail "the EAL runtime directory of --file-prefix was left behind"
# A core list alone replaces only meshgate's core list: the memory defaults (no hugepages are
# reserved here) and "no PCI probing" stay, so the EAL never touches the host's own NIC.
"$MG_BIN" --config "$TMP/gw.toml" --workers 1 -- -l 0-1 >"$TMP/eal-l.log" 2>&1 &
PIDS+=($!)
wait_for 20 grep -q "event=workers_started" "$TMP/eal-l.log" \
  || fail "gateway with -- -l 0-1 did not start: $(grep -E 'level=error|eal_' "$TMP/eal-l.log" | head -5)"
grep -E "event=eal_ready eal_args=user .* defaults_replaced=lcores argv=\"[^\"]*--no-pci[^\"]* -l 0-1\"" \
  "$TMP/eal-l.log" >/dev/null || fail "-- -l 0-1 did not keep the defaults: $(grep eal_ready "$TMP/eal-l.log")"
if grep -qiE "probe pci|Requested device|cannot be used" "$TMP/eal-l.log"; then
  fail "-- -l 0-1 probed PCI devices: $(grep -iE 'pci|device' "$TMP/eal-l.log" | head -3)"
fi
kill -INT "${PIDS[-1]}"
wait "${PIDS[-1]}" || fail "gateway with -- -l 0-1 did not exit 0"

# SIGHUP: the config is reloaded (unchanged here; e2e_reload.sh changes it). The gateway keeps
# running and answering /ready; SIGTERM then still ends it with exit 0, the summary and
# --stats-json.
ready() { [[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://$MG_ADMIN/ready") == 200 ]]; }
start_gateway "$TMP/gw.toml"
wait_for 10 ready || fail "not ready before SIGHUP"
kill -HUP "$GW_PID"
wait_for 5 grep -q "event=config_reload" "$TMP/gateway.log" || fail "SIGHUP did not reload"
grep -q 'level=info event=config_reload result=ok trigger=sighup services_added=0 services_removed=0 services_changed=0 ' \
  "$TMP/gateway.log" || fail "SIGHUP reload log line: $(grep config_reload "$TMP/gateway.log")"
sleep 0.5
kill -0 "$GW_PID" 2>/dev/null || fail "SIGHUP ended the gateway"
ready || fail "/ready does not answer 200 after SIGHUP"
stop_gateway TERM
grep -q "meshgate summary" "$TMP/gateway.log" || fail "no summary after SIGHUP then SIGTERM"
[[ ! -e /var/run/dpdk/meshgate-$GW_PID-0 ]] || fail "SIGHUP: the EAL runtime directory was left behind"
rm -f "$TMP/stats.json"

# A replay: SIGHUPs from its start to its end are ignored; SIGTERM then stops it with exit 0,
# the summary and --stats-json (or it ends by itself, the same way).
PCAPGEN=${MG_PCAPGEN:?MG_PCAPGEN must point at pcapgen}
SRC=${MG_SOURCE_DIR:?}
"$PCAPGEN" --config "$SRC/config/demo.toml" --profile "$SRC/tools/pcapgen/profiles/demo.toml" \
  --out "$TMP/replay.pcap" --packets 200000 >/dev/null
"$MG_BIN" --config "$SRC/config/demo.toml" --pcap-in "$TMP/replay.pcap" --pcap-out "$TMP/out.pcap" \
  --stats-json "$TMP/stats.json" >"$TMP/replay.log" 2>&1 &
RP=$!
PIDS+=("$RP")
wait_for 20 grep -q "event=config_loaded" "$TMP/replay.log" || fail "replay did not start"
for _ in $(seq 1 50); do  # 50 x 20 ms: SIGHUPs through start-up and the replay
  kill -HUP "$RP" 2>/dev/null || break
  sleep 0.02
done
kill -TERM "$RP" 2>/dev/null || true
rc=0; wait "$RP" || rc=$?
[[ $rc -eq 0 ]] || fail "replay exited $rc after SIGHUPs and SIGTERM: $(tail -n 3 "$TMP/replay.log")"
grep -q "event=sighup action=ignored" "$TMP/replay.log" || fail "replay: SIGHUP was not logged"
grep -q "meshgate summary" "$TMP/replay.log" || fail "replay: no summary"
[[ -s $TMP/stats.json ]] || fail "replay: no --stats-json"
echo "PASS"
