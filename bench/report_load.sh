#!/usr/bin/env bash
# How long the pp 64, m 1024 report takes to draw in headless chromium (issue 21's target:
# under 2 s, from navigation start, reading and parsing the page included), and its size
# (target: under 10 MB). Prints each of N loads and their median. A measurement, not a
# test: the load time depends on the machine and what else runs on it.
#   bash bench/report_load.sh [BMPIPE] [N]      (defaults: build/cli/bmpipe, 5)
set -euo pipefail
cd "$(dirname "$0")/.."
bmpipe="${1:-build/cli/bmpipe}"
runs="${2:-5}"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
"$bmpipe" report configs/examples/h200_8x8_pp64.yaml --microbatches 1024 --out "$dir/pp64.html"
echo "page: $(stat -c %s "$dir/pp64.html") bytes"
times=()
for i in $(seq 1 "$runs"); do
  ms="$(timeout 60 chromium --headless --no-sandbox --disable-gpu --no-first-run \
          --user-data-dir="$dir/profile$i" --virtual-time-budget=5000 --dump-dom \
          "file://$dir/pp64.html" 2>/dev/null | grep -o 'data-render-ms="[0-9.]*"' | grep -o '[0-9.]*')"
  echo "load $i: ${ms} ms"
  times+=("$ms")
done
printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {print "median: " a[int((NR+1)/2)] " ms"}'
