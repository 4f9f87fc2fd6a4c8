#!/usr/bin/env bash
# Quick start, command 2: build and run the whole test suite, then the same tests under
# AddressSanitizer + UndefinedBehaviorSanitizer, then each libFuzzer target for a fixed
# number of runs (scripts/fuzz.sh; about 4 minutes with its build).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
jobs="$(nproc)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$jobs"
ctest --test-dir build --output-on-failure -j"$jobs"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DBMPIPE_SANITIZE=ON -DBMPIPE_BUILD_BENCH=OFF
cmake --build build-asan -j"$jobs"
# The browser tests (label browser) run once, above: under the sanitizers they would test
# chromium again, not bmpipe (the report's data is checked in-process by report_data_test).
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp" \
  ctest --test-dir build-asan --output-on-failure -j"$jobs" -LE browser
bash scripts/fuzz.sh
