#!/usr/bin/env bash
# Live mode on net_null ports with two workers (RSS queues, one per worker): the workers poll,
# SIGINT and SIGTERM each stop the gateway with exit 0, the summary and --stats-json.
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
for sig in INT TERM; do
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
# EAL arguments after `--` replace meshgate's defaults: the EAL gets exactly this memory.
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
echo "PASS"
