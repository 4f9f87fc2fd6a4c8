#!/usr/bin/env bash
# Writes the fuzz seeds that follow from the code, so that a new schedule or example is a
# new seed without anyone remembering to add it:
#   tests/fuzz/corpus/schedule_file/seed-tiny-NAME.csv  every schedule `bmpipe schedules`
#       lists (the registry), as `simulate tiny.yaml --schedule NAME --export-schedule` writes it;
#   tests/fuzz/corpus/config/seed-EXAMPLE.yaml          every configs/examples/*.yaml;
#   tests/fuzz/corpus/megatron_args/seed-NAME          every Megatron-LM arguments file shipped
#       (configs/examples/*megatron*.txt) or tested (tests/data/megatron/);
#   tests/fuzz/corpus/mindformers/seed-NAME.yaml        every MindFormers YAML shipped
#       (configs/examples/mindformers/) or tested (tests/data/mindformers/);
#   tests/fuzz/corpus/torchtitan/seed-NAME.toml         every torchtitan TOML tested
#       (tests/data/torchtitan/: torchtitan's own), and seed-NAME.sh every torchtitan
#       config-registry command line tested (tests/data/torchtitan/registry_*.sh);
#   tests/fuzz/corpus/journal/seed-tiny-*.jsonl         the journals of the search fuzz_journal
#       resumes (tiny.yaml, --pp 2,4, every schedule of the registry) with the planner off and
#       quick: whole, the header alone, cut half way, and torn in its last line.
# Hand-made seeds (seed-small-*, and all of corpus/report/) and crash reproducers (crash-*)
# are left alone.
# tests/cli/fuzz_corpus_test.cpp checks that the corpus equals what this writes.
# Usage: bash scripts/fuzz_seeds.sh [path/to/bmpipe]   (default build/cli/bmpipe)
set -euo pipefail
cd "$(dirname "$0")/.."
bmpipe="${1:-build/cli/bmpipe}"
out=tests/fuzz/corpus
for name in $("$bmpipe" schedules --names); do
  "$bmpipe" simulate configs/examples/tiny.yaml --schedule "$name" \
    --export-schedule "$out/schedule_file/seed-tiny-$name.csv" >/dev/null
done
# Left out: h100_llama31_405b_fp8_cp2.yaml. `plan` spends about 13 s on it before its first
# evaluation (126 layers over 64 interleaved stages), past the corpus test's 20 s promise
# under the sanitizers: a known finding, not a fuzz input. So are h100_nemotron_h_56b_pp4.yaml
# and h100_qwen3_next_80b.yaml: their baselines (118 and 96 unlike layers over 4 stages; the
# exhaustive one simulates Qwen3-Next's 138 415 partitions) take 3.4-3.7 s of
# `plan --max-evals 50` without the sanitizers, and h100_gemma3_27b.yaml (62 layers over 4
# stages: 2.7 s without them, 28.9 s with them on an idle 2-core machine).
for f in configs/examples/*.yaml; do
  [ "$(basename "$f")" = h100_llama31_405b_fp8_cp2.yaml ] && continue
  [ "$(basename "$f")" = h100_nemotron_h_56b_pp4.yaml ] && continue
  [ "$(basename "$f")" = h100_qwen3_next_80b.yaml ] && continue
  [ "$(basename "$f")" = h100_gemma3_27b.yaml ] && continue
  cp "$f" "$out/config/seed-$(basename "$f")"
done
for f in configs/examples/*megatron*.txt tests/data/megatron/*; do
  cp "$f" "$out/megatron_args/seed-$(basename "$f")"
done
for f in configs/examples/mindformers/*.yaml tests/data/mindformers/*.yaml; do
  cp "$f" "$out/mindformers/seed-$(basename "$f")"
done
mkdir -p "$out/torchtitan"
for f in tests/data/torchtitan/*.toml tests/data/torchtitan/registry_*.sh; do
  cp "$f" "$out/torchtitan/seed-$(basename "$f")"
done
# The search of tests/fuzz/fuzz_journal.cpp, which must be this one: same config, same
# dimensions, every schedule `bmpipe schedules --names` lists.
schedules="$("$bmpipe" schedules --names | paste -sd, -)"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
for planner in off quick; do
  journal="$scratch/$planner.jsonl"
  "$bmpipe" search configs/examples/tiny.yaml --pp 2,4 --schedules "$schedules" \
    --planner "$planner" --threads 1 --quiet --journal "$journal" >/dev/null
  lines=$(wc -l <"$journal")
  cp "$journal" "$out/journal/seed-tiny-$planner.jsonl"
  head -n 1 "$journal" >"$out/journal/seed-tiny-$planner-header.jsonl"
  head -n $(((lines + 1) / 2)) "$journal" >"$out/journal/seed-tiny-$planner-half.jsonl"
  # A kill in mid-write: the last line without its end.
  head -c $(($(wc -c <"$journal") - 20)) "$journal" >"$out/journal/seed-tiny-$planner-torn.jsonl"
done
