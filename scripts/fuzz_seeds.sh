#!/usr/bin/env bash
# Writes the fuzz seeds that follow from the code, so that a new schedule or example is a
# new seed without anyone remembering to add it:
#   tests/fuzz/corpus/schedule_file/seed-tiny-NAME.csv  every schedule `bmpipe schedules`
#       lists (the registry), as `simulate tiny.yaml --schedule NAME --export-schedule` writes it;
#   tests/fuzz/corpus/config/seed-EXAMPLE.yaml          every configs/examples/*.yaml;
#   tests/fuzz/corpus/megatron_args/seed-NAME          every Megatron-LM arguments file shipped
#       (configs/examples/*megatron*.txt) or tested (tests/data/megatron/);
#   tests/fuzz/corpus/mindformers/seed-NAME.yaml        every MindFormers YAML shipped
#       (configs/examples/mindformers/) or tested (tests/data/mindformers/).
# Hand-made seeds (seed-small-*) and crash reproducers (crash-*) are left alone.
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
# under the sanitizers: a known finding, not a fuzz input.
for f in configs/examples/*.yaml; do
  [ "$(basename "$f")" = h100_llama31_405b_fp8_cp2.yaml ] && continue
  cp "$f" "$out/config/seed-$(basename "$f")"
done
for f in configs/examples/*megatron*.txt tests/data/megatron/*; do
  cp "$f" "$out/megatron_args/seed-$(basename "$f")"
done
for f in configs/examples/mindformers/*.yaml tests/data/mindformers/*.yaml; do
  cp "$f" "$out/mindformers/seed-$(basename "$f")"
done
