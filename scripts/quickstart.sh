#!/usr/bin/env bash
# Quick start, command 1: install the Debian packages, build, install bmpipe on the PATH
# (/usr/local/bin, the examples in /usr/local/share/bmpipe/configs), then simulate one
# example and plan another.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$(nproc)"
if [ "$(id -u)" -eq 0 ] || [ -w /usr/local/bin ]; then
  cmake --install build --prefix /usr/local >/dev/null
  BMPIPE=bmpipe
  echo "quickstart: installed /usr/local/bin/bmpipe"
else
  BMPIPE=./build/cli/bmpipe
  echo "quickstart: not root: bmpipe is at ./build/cli/bmpipe (sudo cmake --install build installs it)"
fi
"$BMPIPE" simulate configs/examples/h200_llama2_7b.yaml
"$BMPIPE" plan configs/examples/llama2_70b_measured_pp8.yaml --schedule interleaved --vpp 2
