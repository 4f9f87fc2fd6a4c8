#!/usr/bin/env bash
# Runs the same invocations through two bmpipe binaries and reports, case by case, whether
# stdout, stderr, the exit code and every file the command wrote are byte-identical.
# A refactoring that promises "no output changes" proves it with this:
#
#   git worktree add /tmp/before <old-commit> && cmake -S /tmp/before -B /tmp/before/build \
#     && cmake --build /tmp/before/build --target bmpipe
#   bash scripts/compare_outputs.sh /tmp/before/build/cli/bmpipe build/cli/bmpipe
#
# Exit 0 when every case matches; otherwise 1, after listing each differing case and the
# first lines of its diff. BMPIPE_COMPARE_ONLY=REGEX runs only the cases whose line matches.
set -uo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 2 ] || { echo "usage: $0 BEFORE_BINARY AFTER_BINARY" >&2; exit 2; }
before="$(realpath "$1")"
after="$(realpath "$2")"
repo="$PWD"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# One invocation a line, run from a folder where configs/ is the repository's. Output files
# are written beside it under relative names, so both runs print the same paths.
cases=()
for cfg in configs/examples/*.yaml; do
  cases+=("simulate $cfg"
          "simulate $cfg --json"
          "simulate $cfg --trace t.json --svg t.svg --memory-svg m.svg"
          "simulate $cfg --set training.optimizer.overlap_grad_reduce=true --trace o.json --svg o.svg"
          "compare $cfg --schedules 1f1b,gpipe,interleaved,zb-h1,zb-h2,zb-v,dualpipe-v,v-half --json"
          "compare $cfg --schedules 1f1b,interleaved,zb-h1"
          "cost $cfg"
          "cost $cfg --json --ops"
          "plan $cfg --max-evals 600"
          "plan $cfg --max-evals 600 --json"
          "plan $cfg --max-evals 300 --format megatron"
          "plan $cfg --max-evals 300 --format mindformers"
          "plan $cfg --max-evals 300 --schedule auto --out p.yaml"
          "plan $cfg --max-evals 300 --baseline uniform-min-recompute")
done
cases+=("search configs/examples/tiny.yaml --planner quick --json"
        "search configs/examples/tiny.yaml --planner quick --csv s.csv"
        "search configs/examples/gpt3_175b_a100.yaml --planner quick --tp 8 --pp 8,16 --micro-batch-size 1"
        "search configs/examples/gpt3_175b_a100.yaml --planner quick --tp 8 --pp 16 --micro-batch-size 1 --json"
        "import megatron configs/examples/llama2_13b_megatron_args.txt --preset h200 --devices 16"
        "import megatron configs/examples/llama2_13b_megatron_args.txt --preset a100 --devices 32 --out j.yaml"
        "import mindformers configs/examples/mindformers/llama2_13b.yaml --preset ascend-910b --devices 16"
        "import mindformers configs/calibration/mindformers_llama2_70b_32p.yaml --preset ascend-910b"
        "import profile configs/profiles/h200_llama2_7b.csv --preset h200 --pp 8 --microbatches 32"
        "simulate configs/examples/tiny.yaml --schedule nope"
        "compare configs/examples/tiny.yaml --schedules 1f1b,intreleaved"
        "plan configs/examples/tiny.yaml --schedule zb-hh"
        "plan configs/examples/tiny.yaml --max-evals 0"
        "search configs/examples/tiny.yaml --schedules 1f1b,zb-vv"
        "cost configs/examples/llama2_70b_measured_pp8.yaml"
        "schedules")

pass=0
fail=0
for i in "${!cases[@]}"; do
  c="${cases[$i]}"
  if [ -n "${BMPIPE_COMPARE_ONLY:-}" ] && ! [[ "$c" =~ $BMPIPE_COMPARE_ONLY ]]; then continue; fi
  for side in before after; do
    d="$work/$side/$i"
    mkdir -p "$d"
    ln -s "$repo/configs" "$d/configs"
    bin="$before"
    [ "$side" = after ] && bin="$after"
    # shellcheck disable=SC2086  # the case is a command line to split
    (cd "$d" && "$bin" $c >stdout.txt 2>stderr.txt </dev/null; echo $? >exit_code.txt)
    # Wall-clock seconds are the only thing allowed to differ from run to run: the
    # "0.42 s" of a search line and the wall_s of a JSON document.
    sed -i -E 's/\b[0-9]+\.[0-9]{2} s\b/N s/g; s/"wall_s": [0-9.e+-]+/"wall_s": N/g' \
      "$d/stdout.txt" "$d/stderr.txt"
  done
  if diff -r --no-dereference "$work/before/$i" "$work/after/$i" >"$work/diff-$i.txt" 2>&1; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    echo "DIFFERS: bmpipe $c"
    head -n 12 "$work/diff-$i.txt" | sed 's/^/    /'
  fi
done
echo "compare_outputs: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
