// Megatron-Core's recompute modules through the Megatron-LM importer and exporter
// (issue 41: "--recompute-modules mla_up_proj layernorm moe_act is read as core_attn").
// --recompute-modules is training.recompute_modules; the allowed set is Megatron-Core's
// (NVIDIA/Megatron-LM d98e8a64, megatron/core/transformer/transformer_config.py).
#include <gtest/gtest.h>

#include <string>

#include "frameworks/megatron/import.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace recompute_modules_interop_test {

// Line 1: the model; line 2: the flags under test.
const std::string kModel =
    "--num-layers 8 --hidden-size 1024 --ffn-hidden-size 4096 --num-attention-heads 16 "
    "--seq-length 2048 --vocab-size 32000 --swiglu --micro-batch-size 1 "
    "--global-batch-size 8 --bf16\n";

ImportedJob import(const std::string& flags) {
  return read_megatron_args(kModel + flags + "\n", "recompute.sh");
}

/// The refusal of `flags`: "recompute.sh:2: FLAG: ..." or "<accepted>".
std::string refusal(const std::string& flags) {
  try {
    import(flags);
  } catch (const ImportError& e) {
    return e.what();
  }
  return "<accepted>";
}

TEST(RecomputeModulesImport, TheModulesAreReadAsGiven) {
  const ImportedJob job = import(
      "--recompute-granularity selective --recompute-modules mlp "
      "layernorm mlp");
  EXPECT_EQ(job.recompute_modules.value_or("<none>"), "mlp,layernorm");
  // A module whose name is part of another's is its own (moe inside moe_act).
  EXPECT_EQ(import("--recompute-granularity selective --recompute-modules moe_act moe")
                .recompute_modules.value_or("<none>"),
            "moe_act,moe");
  EXPECT_EQ(job.origin.at("training.recompute_modules").key, "--recompute-modules");
  EXPECT_EQ(job.origin.at("training.recompute_modules").line, 2);
  // No longer a note saying they are modelled as core_attn.
  for (const std::string& note : job.notes) EXPECT_EQ(note.find("core_attn"), std::string::npos);
  // Not given: Megatron's default (core_attn), the key left out.
  EXPECT_FALSE(import("--recompute-granularity selective").recompute_modules.has_value());
  // Beside full recompute the modules do nothing (Megatron reads them only for selective).
  const ImportedJob full = import(
      "--recompute-granularity full --recompute-method uniform "
      "--recompute-num-layers 1 --recompute-modules mlp");
  EXPECT_FALSE(full.recompute_modules.has_value());
}

TEST(RecomputeModulesImport, UnknownAndUnmodelledModules) {
  const std::string e =
      refusal("--recompute-granularity selective --recompute-modules core_attn attn");
  EXPECT_EQ(e.rfind("recompute.sh:2: --recompute-modules:", 0), 0u) << e;
  EXPECT_NE(e.find("unknown module 'attn'"), std::string::npos) << e;
  // Megatron-Core's Gated DeltaNet module is a real one bmpipe does not cost: unmodelled.
  const ImportedJob job =
      import("--recompute-granularity selective --recompute-modules core_attn gdn_norm_out");
  ASSERT_EQ(job.unmodelled.size(), 1u);
  EXPECT_EQ(job.unmodelled[0].given, "--recompute-modules gdn_norm_out");
  EXPECT_EQ(job.recompute_modules.value_or("<none>"), "core_attn");
}

/// `bmpipe export --format megatron` of a llama3-8b config recomputing selectively with
/// `modules`.
test::CliRun export_with(const test::ScratchDir& dir, const std::string& modules) {
  const std::string config = test::write_file(
      dir.file("r.yaml"),
      "cluster:\n  nodes: 1\n  device:\n    preset: h100-sxm\nmodel:\n  preset: llama3-8b\n"
      "training:\n  pp: 2\n  seq_length: 4096\n  micro_batch_size: 1\n"
      "  global_batch_size: 16\n  kernels: fused\n  recompute: selective\n"
      "  recompute_modules: " +
          modules + "\n");
  return test::run_cli("export '" + config + "' --format megatron");
}

TEST(RecomputeModulesExport, RoundTripsThroughMegatronFlags) {
  const test::ScratchDir dir;
  const test::CliRun out = export_with(dir, "mlp, core_attn");
  ASSERT_EQ(out.code, 0) << out.err;
  EXPECT_NE(out.out.find("--recompute-granularity selective\n"), std::string::npos) << out.out;
  EXPECT_NE(out.out.find("--recompute-modules core_attn mlp\n"), std::string::npos) << out.out;
  EXPECT_EQ(import("--recompute-granularity selective --recompute-modules core_attn mlp")
                .recompute_modules.value_or("<none>"),
            "core_attn,mlp");
  // The default needs no flag.
  const test::CliRun plain = export_with(dir, "core_attn");
  ASSERT_EQ(plain.code, 0) << plain.err;
  EXPECT_NE(plain.out.find("--recompute-granularity selective\n"), std::string::npos);
  EXPECT_EQ(plain.out.find("--recompute-modules "), std::string::npos) << plain.out;
  // No module: Megatron-LM's flag takes one or more, so the job is stated without
  // recompute, which costs the same.
  const test::CliRun none = export_with(dir, "none");
  ASSERT_EQ(none.code, 0) << none.err;
  EXPECT_EQ(none.out.find("--recompute-granularity selective"), std::string::npos) << none.out;
  EXPECT_NE(none.out.find("#   --recompute-granularity\n"), std::string::npos) << none.out;
}

// torchtitan's selective checkpointing is per op or per layer, not Megatron's modules: its
// export states the attention core and says so.
TEST(RecomputeModulesExport, TorchtitanStatesTheAttentionCoreAndSaysSo) {
  const test::ScratchDir dir;
  const std::string config = test::write_file(
      dir.file("r.yaml"),
      "cluster:\n  nodes: 1\n  device:\n    preset: h100-sxm\nmodel:\n  preset: llama3-8b\n"
      "training:\n  pp: 2\n  seq_length: 4096\n  micro_batch_size: 1\n"
      "  global_batch_size: 16\n  kernels: fused\n  recompute: selective\n"
      "  recompute_modules: mlp\n");
  const test::CliRun out = test::run_cli("export '" + config + "' --format torchtitan");
  ASSERT_EQ(out.code, 0) << out.err;
  EXPECT_NE(out.out.find("# Not stated: training.recompute_modules mlp:"), std::string::npos)
      << out.out;
}

}  // namespace recompute_modules_interop_test
}  // namespace bmpipe
