#pragma once
/// \file
/// A small Megatron-LM launch script the import tests add one case's flags to
/// (tests/frameworks/window_import_test.cpp, attention_backend_import_test.cpp).

#include <string>

#include "support/support.hpp"

namespace bmpipe::test {

/// Lines 1-3 of the script: a 4-layer, 1024-wide model at pp 2; the case's flags go on
/// line 4.
inline const std::string kSmallMegatronScript =
    "--num-layers 4 --hidden-size 1024 --num-attention-heads 8 --swiglu \\\n"  // 1
    "  --seq-length 1024 --vocab-size 32000 --micro-batch-size 1 --bf16 \\\n"  // 2
    "  --pipeline-model-parallel-size 2 --global-batch-size 16 \\\n";          // 3

/// `bmpipe import megatron` of the small script with `flags` on 8 H100s, written to `job`
/// (the script is DIR/NAME.txt).
inline CliRun import_small_megatron(const ScratchDir& dir, const std::string& name,
                                    const std::string& flags, const std::string& job) {
  const std::string script = write_file(dir.file(name + ".txt"), kSmallMegatronScript + flags);
  return run_cli("import megatron '" + script + "' --preset h100-sxm --devices 8 --out '" + job +
                 "'");
}

}  // namespace bmpipe::test
