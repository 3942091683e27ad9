#!/usr/bin/env bash
# The quick comparison, now one row of tools/bench/run: established TCP, 1k flows, 64 B, dnat
# (or PROFILE, a pcapgen profile against the harness's topology, whose services include "web"),
# with its same-run dpdk-testpmd io-forward baseline. tools/bench/run runs the whole matrix.
#   tools/bench/quick.sh [SECONDS] [PROFILE]
# Writes JSON to $MG_BENCH_OUT (default $MG_BUILD_DIR/bench, build/bench) as l4-matrix.json.
set -euo pipefail
cd "$(dirname "$0")/../.."
args=(--seconds "${1:-8}" --cpu "${MG_BENCH_CPU:-1}"
      --out "${MG_BENCH_OUT:-${MG_BUILD_DIR:-build}/bench}")
if [[ -n ${2:-} ]]; then args+=(--profile "$2"); else args+=(--rows dnat-1k); fi
exec tools/bench/run "${args[@]}"
