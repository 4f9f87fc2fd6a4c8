// Megatron-Core's fine-grained activation offload through the Megatron-LM importer and
// exporter (issue 43, item 6): --fine-grained-activation-offloading with --offload-modules is
// training.offload_modules, checked as Megatron-Core's TransformerConfig checks it
// (NVIDIA/Megatron-LM d98e8a64, megatron/core/transformer/transformer_config.py).
#include <gtest/gtest.h>

#include <string>

#include "frameworks/megatron/import.hpp"
#include "support/megatron_round_trip.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace activation_offload_interop_test {

using test::run_cli;
using test::ScratchDir;

// Line 1: the model; line 2: the flags under test.
const std::string kModel =
    "--num-layers 8 --hidden-size 1024 --ffn-hidden-size 4096 --num-attention-heads 16 "
    "--seq-length 2048 --vocab-size 32000 --swiglu --micro-batch-size 1 "
    "--global-batch-size 8 --bf16 --pipeline-model-parallel-size 2\n";

ImportedJob import(const std::string& flags) {
  return read_megatron_args(kModel + flags + "\n", "offload.sh");
}

std::string refusal(const std::string& flags) {
  try {
    import(flags);
  } catch (const ImportError& e) {
    return e.what();
  }
  return "<accepted>";
}

TEST(ActivationOffloadImport, TheModulesAreReadAsGiven) {
  const ImportedJob job = import(
      "--fine-grained-activation-offloading --offload-modules qkv_linear core_attn attn_proj "
      "core_attn");
  EXPECT_EQ(job.offload_modules.value_or("<none>"), "qkv_linear,core_attn,attn_proj");
  EXPECT_EQ(job.origin.at("training.offload_modules").key, "--offload-modules");
  EXPECT_EQ(job.origin.at("training.offload_modules").line, 2);
  // Without the switch Megatron reads no list: nothing is offloaded.
  EXPECT_FALSE(import("--offload-modules core_attn").offload_modules.has_value());
  EXPECT_FALSE(import("").offload_modules.has_value());
}

TEST(ActivationOffloadImport, MegatronsRefusalsWithFileLineFlag) {
  std::string e = refusal("--fine-grained-activation-offloading");
  EXPECT_EQ(e.rfind("offload.sh:2: --fine-grained-activation-offloading:", 0), 0u) << e;
  EXPECT_NE(e.find("non-empty offload_modules"), std::string::npos) << e;
  e = refusal("--fine-grained-activation-offloading --offload-modules attn_proj");
  EXPECT_EQ(e.rfind("offload.sh:2: --offload-modules:", 0), 0u) << e;
  EXPECT_NE(e.find("attn_proj cannot be set to offload_modules alone without core_attn"),
            std::string::npos)
      << e;
  e = refusal("--fine-grained-activation-offloading --offload-modules core_attn mlp");
  EXPECT_NE(e.find("unknown module"), std::string::npos) << e;
  // Megatron's fused grouped MLP offload is real but not modelled: listed as such.
  const ImportedJob fused =
      import("--fine-grained-activation-offloading --offload-modules core_attn fused_group_mlp");
  ASSERT_EQ(fused.unmodelled.size(), 1u);
  EXPECT_EQ(fused.unmodelled[0].given, "--offload-modules fused_group_mlp");
  EXPECT_EQ(fused.offload_modules.value_or("<none>"), "core_attn");
}

// Import -> simulate -> export -> import -> simulate: the same time, and the flags written.
TEST(ActivationOffloadInterop, ExportImportRoundTrip) {
  ScratchDir dir;
  const test::MegatronRoundTrip trip = test::megatron_round_trip(
      dir, kModel,
      "--tensor-model-parallel-size 2 --fine-grained-activation-offloading "
      "--offload-modules core_attn attn_proj\n",
      "h200", 8);
  const std::string& yaml = trip.yaml;
  EXPECT_NE(trip.exported.find("--fine-grained-activation-offloading\n--offload-modules core_attn "
                               "attn_proj\n"),
            std::string::npos)
      << trip.exported;
  EXPECT_EQ(trip.first["iteration_time_ms"], trip.second["iteration_time_ms"]);
  EXPECT_GT(trip.second["devices"][0]["peak_host_bytes"].get<std::int64_t>(), 0);
  // MindFormers and torchtitan have no such keys: refused, not dropped.
  for (const char* format : {"mindformers", "torchtitan"}) {
    const auto r = run_cli("export " + yaml + " --format " + format);
    EXPECT_EQ(r.code, 2) << format << r.all();
    EXPECT_NE(r.err.find("cannot state training.offload_modules"), std::string::npos) << r.err;
  }
}

}  // namespace activation_offload_interop_test
}  // namespace bmpipe
