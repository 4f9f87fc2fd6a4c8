#!/usr/bin/env bash
# Quick start, command 2: build and run the whole test suite, then the same tests under
# AddressSanitizer + UndefinedBehaviorSanitizer, then each libFuzzer target for a fixed
# number of runs (scripts/fuzz.sh: a clang build, then two targets at a time).
set -euo pipefail
cd "$(dirname "$0")/.."
# Each step's end, with the seconds since the start: where the time goes, on any machine.
start=$SECONDS
step() { echo "test.sh: $1 done at $((SECONDS - start)) s"; }
bash scripts/setup.sh
jobs="$(nproc)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$jobs"
step "setup and the Release build"
ctest --test-dir build --output-on-failure -j"$jobs"
step "the Release tests"
# clang-14, which the fuzzers need anyway: on 2 cores this step took 456 s and the next 423 s,
# against GCC 12's 738 s and 553 s (docs/testing.md).
# A build tree keeps its compiler: one GCC configured before is started afresh.
if [ -f build-asan/CMakeCache.txt ] && ! grep -q '^CMAKE_CXX_COMPILER:.*clang++-14$' build-asan/CMakeCache.txt; then
  rm -rf build-asan
fi
cmake -S . -B build-asan -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_BUILD_TYPE=Debug \
  -DBMPIPE_SANITIZE=ON -DBMPIPE_BUILD_BENCH=OFF
cmake --build build-asan -j"$jobs"
step "the sanitizer build"
# The browser tests (label browser) run once, above: under the sanitizers they would test
# chromium again, not bmpipe (the report's data is checked in-process by report_data_test).
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp" \
  ctest --test-dir build-asan --output-on-failure -j"$jobs" -LE browser
step "the sanitizer tests"
bash scripts/fuzz.sh
step "fuzzing"
