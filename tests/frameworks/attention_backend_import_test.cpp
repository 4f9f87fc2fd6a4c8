// Megatron-LM's --attention-backend through `bmpipe import megatron` and `bmpipe export`.
// Megatron-LM d98e8a64, megatron/core/models/common/language_module/language_module.py,
// _set_attention_backend: flash, fused and auto leave TransformerEngine a fused kernel
// (NVTE_FLASH_ATTN or NVTE_FUSED_ATTN 1); unfused turns on NVTE_UNFUSED_ATTN alone
// (TransformerEngine's UnfusedDotProductAttention) and local all three off (Megatron-Core's
// DotProductAttention): both form the s x s scores, which is model.flash_attention false.
// A value AttnBackend does not name (megatron/core/transformer/enums.py) exits 2 naming
// FILE:LINE:flag.
#include <gtest/gtest.h>

#include <string>

#include "experiment/config.hpp"
#include "support/megatron_script.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace {

using test::run_cli;

// The script: test::kSmallMegatronScript (support/megatron_script.hpp), the case's
// flags on line 4.

bool flash_of(const test::ScratchDir& dir, const std::string& name, const std::string& flags) {
  const std::string job = dir.file(name + ".yaml");
  const test::CliRun r = test::import_small_megatron(dir, name, flags, job);
  EXPECT_EQ(r.code, 0) << flags << r.err;
  // Modelled: no "is not modelled" warning, and nothing needs --allow-unmodelled.
  EXPECT_EQ(r.err.find("--attention-backend"), std::string::npos) << r.err;
  return load_config(job).model.shape->flash_attention;
}

TEST(MegatronAttentionBackendImport, EachBackendIsFusedOrUnfusedAttention) {
  test::ScratchDir dir;
  EXPECT_TRUE(flash_of(dir, "absent", "\n"));  // auto, Megatron-LM's default
  EXPECT_TRUE(flash_of(dir, "auto", "  --attention-backend auto\n"));
  EXPECT_TRUE(flash_of(dir, "flash", "  --attention-backend flash\n"));
  EXPECT_TRUE(flash_of(dir, "fused", "  --attention-backend fused\n"));
  EXPECT_FALSE(flash_of(dir, "unfused", "  --attention-backend unfused\n"));
  EXPECT_FALSE(flash_of(dir, "local", "  --attention-backend local\n"));
}

TEST(MegatronAttentionBackendImport, UnknownBackendNamesFileLineAndFlag) {
  test::ScratchDir dir;
  const std::string script = dir.file("bad.txt");
  const test::CliRun r = test::import_small_megatron(dir, "bad", "  --attention-backend cudnn\n",
                                                     dir.file("bad.yaml"));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.err.find(script + ":4: --attention-backend: unknown value 'cudnn' (expected flash, "
                                "fused, unfused, local, auto)"),
            std::string::npos)
      << r.err;
}

// A config costed with the unfused core exports --attention-backend unfused, which imports
// back as the unfused core; a flash-attention config states no backend (auto).
TEST(MegatronAttentionBackendImport, ExportedBackendImportsBack) {
  test::ScratchDir dir;
  for (const bool flash : {false, true}) {
    const std::string yaml = test::write_file(
        dir.file(flash ? "flash.yaml" : "unfused.yaml"),
        "cluster: {nodes: 1, devices_per_node: 8, device: {preset: h100-sxm}}\n"
        "model: {preset: llama3-8b, num_layers: 4, flash_attention: " +
            std::string(flash ? "true" : "false") +
            "}\n"
            "training: {pp: 2, seq_length: 4096, global_batch_size: 16, kernels: fused}\n");
    const test::CliRun x = run_cli("export '" + yaml + "' --format megatron");
    ASSERT_EQ(x.code, 0) << x.err;
    const bool stated = x.out.find("--attention-backend unfused\n") != std::string::npos;
    EXPECT_EQ(stated, !flash) << x.out;
    EXPECT_EQ(x.out.find("--attention-backend"),
              stated ? x.out.find("--attention-backend unfused") : std::string::npos)
        << x.out;
    if (stated) {
      EXPECT_FALSE(flash_of(dir, "back", "  --attention-backend unfused\n"));
    }
  }
}

}  // namespace
}  // namespace bmpipe
