#!/usr/bin/env bash
# Runs a libFuzzer binary for N seconds on a scratch copy of the committed seed corpus, so the
# run never writes into the source tree. Fails on any crash, leak or sanitizer report.
set -euo pipefail
bin=$1 seeds=$2 seconds=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/corpus" "$work/artifacts"
cp -r "$seeds"/. "$work/corpus/"
# set -e would end the script at a failing pipeline, before the artifacts are shown.
status=0
"$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$work/artifacts/" "$work/corpus" 2>&1 | tail -n 25 || status=${PIPESTATUS[0]}
if ls "$work/artifacts"/* >/dev/null 2>&1; then
  echo "fuzz: crash artifacts:"; ls -l "$work/artifacts"
  for f in "$work/artifacts"/*; do xxd "$f" | head -n 8; done
  exit 1
fi
exit "$status"
