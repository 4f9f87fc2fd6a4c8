#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz) with clang-14 and runs each over its corpus.
#
# CI (no arguments): a fixed number of runs per target from a fixed seed, so a run is
# reproducible and short (docs/testing.md, "Fuzzing"); as many targets run at once as there
# are cores. New inputs go to a scratch folder; the corpus in the tree only changes by hand.
#
# Longer sessions: BMPIPE_FUZZ_SECONDS=1200 bash scripts/fuzz.sh [TARGET...] fuzzes each
# target for that long, keeping what it learns in build-fuzz/work/TARGET between sessions.
# BMPIPE_FUZZ_RUNS changes the CI run count; BMPIPE_FUZZ_BUILD=0 runs the targets as last
# built, without building them again. Needs clang-14 and libclang-rt-14-dev
# (scripts/setup.sh installs them). Exits non-zero when a target finds a crash, leak, UB report
# or timeout (the other targets still run); the input is written to build-fuzz/crash-TARGET-*
# (replay: the target binary with that file as its argument).
set -euo pipefail
cd "$(dirname "$0")/.."
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(config plan hf_config schedule_file megatron_args mindformers torchtitan report journal)

if [ "${BMPIPE_FUZZ_BUILD:-1}" != 0 ]; then
  # Line tables only (-gline-tables-only): a crash's stack trace keeps file and line, and the
  # build skips the full debug information, a sixth of its compile time.
  cmake -S . -B build-fuzz -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -gline-tables-only -DNDEBUG" \
    -DBMPIPE_FUZZ=ON -DBMPIPE_BUILD_TESTS=OFF -DBMPIPE_BUILD_BENCH=OFF -DBMPIPE_MPI=OFF >/dev/null
  cmake --build build-fuzz -j"$(nproc)" --target "${targets[@]/#/fuzz_}" >/dev/null
fi

# -timeout: one input past 10 s is a hang; -max_len: configs, schedule files and imports of
# a few KiB reach every code path the limits allow (fuzz_run.hpp's small_limits); a journal
# of the fuzz_journal search is 10 KiB whole.
common=(-timeout=10 -rss_limit_mb=2048 -print_final_stats=1)
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
# One target a core at a time (each libFuzzer process is single-threaded); the verdicts are
# printed in the targets' order once all have run, so the output does not depend on timing.
fuzz_one() {
  local t="$1" work mode seeds dict max_len log
  if [ -n "${BMPIPE_FUZZ_SECONDS:-}" ]; then
    work="build-fuzz/work/$t"
    mode=(-max_total_time="$BMPIPE_FUZZ_SECONDS")
  else
    work="$scratch/$t"
    mode=(-runs="${BMPIPE_FUZZ_RUNS:-20000}" -seed=1)
  fi
  # The planner reads the same YAML as the config target: same corpus, same dictionary. The
  # report target reads that YAML too, with seeds and words of its own for the user strings.
  seeds=("tests/fuzz/corpus/$t")
  dict="tests/fuzz/$t.dict"
  case "$t" in
    plan)
      seeds=(tests/fuzz/corpus/config)
      dict=tests/fuzz/config.dict
      ;;
    report)
      seeds=(tests/fuzz/corpus/config tests/fuzz/corpus/report)
      dict="$scratch/report.dict"
      cat tests/fuzz/config.dict tests/fuzz/report.dict >"$dict"
      ;;
  esac
  max_len=4096
  [ "$t" != journal ] || max_len=16384
  mkdir -p "$work"
  # libFuzzer prints a line per new input; that goes to a log, and only its verdict to the
  # terminal (the whole log on failure).
  log="build-fuzz/fuzz-$t.log"
  if "build-fuzz/tests/fuzz/fuzz_$t" "${common[@]}" -max_len="$max_len" "${mode[@]}" -dict="$dict" \
    -artifact_prefix="build-fuzz/crash-$t-" "$work" "${seeds[@]}" >"$log" 2>&1; then
    echo ok >"$scratch/$t.verdict"
  else
    echo failed >"$scratch/$t.verdict"
  fi
}

running=0
for t in "${targets[@]}"; do
  echo "fuzz: $t"
  fuzz_one "$t" &
  running=$((running + 1))
  if [ "$running" -ge "$(nproc)" ]; then
    wait -n
    running=$((running - 1))
  fi
done
wait
status=0
for t in "${targets[@]}"; do
  log="build-fuzz/fuzz-$t.log"
  if [ "$(cat "$scratch/$t.verdict" 2>/dev/null)" != ok ]; then
    { grep -v -e '^#[0-9]' -e 'NEW_FUNC' "$log" || true; } | tail -n 80 >&2
    echo "fuzz: $t FAILED (whole log: $log; the input: build-fuzz/crash-$t-*)" >&2
    status=1
    continue
  fi
  grep -E '^(Done|stat::number_of_executed_units|stat::peak_rss_mb)' "$log" | sed "s/^/fuzz: $t: /"
done
exit "$status"
