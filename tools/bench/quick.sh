#!/usr/bin/env bash
# Quick same-run comparison on one core: dpdk-testpmd io-forward and meshgate (one worker, dnat
# to config/demo.toml's "web" service), both reading the same pcap with net_pcap infinite_rx
# and dropping what they send (testpmd to net_null, meshgate through net_pcap's TX drop).
#   tools/bench/quick.sh [SECONDS] [PROFILE]
# Prints one line per run and the ratio; writes JSON to $MG_BENCH_OUT (default build/bench).
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-10}
profile=${2:-tools/bench/profiles/established-1k-64.toml}
build=${MG_BUILD_DIR:-build}
out=${MG_BENCH_OUT:-$build/bench}
mkdir -p "$out"
cpu=${MG_BENCH_CPU:-1}
name=$(basename "$profile" .toml)
pcap="$out/$name.pcap"

"$build/tools/pcapgen/pcapgen" --config config/demo.toml --profile "$profile" --out "$pcap" >/dev/null

# Baseline: testpmd io forward, main lcore on cpu 0, forwarding lcore on $cpu.
timeout -s INT $((secs + 5)) dpdk-testpmd --no-huge -m 1024 --no-pci --no-shconf --no-telemetry \
  --file-prefix "mgbench-tp-$$" --lcores "0@0,1@$cpu" --log-level=warning \
  --vdev "net_pcap0,rx_pcap=$pcap,infinite_rx=1" --vdev net_null0 -- \
  --forward-mode=io --stats-period 1 --total-num-mbufs 65536 --no-lsc-interrupt \
  >"$out/testpmd.log" 2>&1 || true
# Steady state: the median of the per-second Rx-pps samples on port 0, skipping the first two.
tp_pps=$(grep -A12 "NIC statistics for port 0" "$out/testpmd.log" | grep -o "Rx-pps: *[0-9]*" | awk '{print $2}' \
  | tail -n +3 | sort -n | awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]; else print 0}')

cfg="$out/bench.toml"
sed -e "s|^device = .*|device = \"net_pcap_bench0,rx_pcap=$pcap,infinite_rx=1\"|" config/demo.toml >"$cfg"
timeout -s INT "$secs" "$build/apps/meshgate" --config "$cfg" --stats-json "$out/meshgate.json" \
  --log-level warn -- --no-huge -m 1024 --no-pci --no-shconf --no-telemetry \
  --file-prefix "mgbench-mg-$$" --lcores "0@0,1@$cpu" --log-level=warning >"$out/meshgate.log" 2>&1 || true
read -r mg_mpps mg_cpp <<<"$(python3 -c "
import json; d=json.load(open('$out/meshgate.json')); w=d['workers'][0]
print(w['mpps'], w['cycles_per_packet'])")"
python3 - "$tp_pps" "$mg_mpps" "$mg_cpp" "$name" "$out/result.json" <<'PY'
import json, sys
tp = float(sys.argv[1]) / 1e6; mg = float(sys.argv[2]); cpp = float(sys.argv[3])
ratio = mg / tp if tp else 0.0
print(f"{sys.argv[4]}: testpmd io-fwd {tp:.2f} Mpps | meshgate dnat {mg:.2f} Mpps "
      f"({cpp:.0f} cycles/packet) | ratio {ratio:.2f}")
json.dump({"profile": sys.argv[4], "testpmd_mpps": tp, "meshgate_mpps": mg,
           "meshgate_cycles_per_packet": cpp, "ratio": ratio}, open(sys.argv[5], "w"), indent=2)
PY
