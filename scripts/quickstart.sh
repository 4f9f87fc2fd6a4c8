#!/usr/bin/env bash
# Quick start, command 1: install dependencies, build, and simulate an example.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$(nproc)"
./build/cli/bmpipe simulate configs/examples/h200_llama2_7b.yaml
