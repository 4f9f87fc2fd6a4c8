// Issue 41, "public launch scripts import without --allow-unmodelled and simulate": Megatron-LM's
// own GPT and Mixtral examples. The GPT one, examples/gpt3/train_gpt3_175b_distributed.sh at
// NVIDIA/Megatron-LM d98e8a64ddf3 (tests/data/megatron/gpt3_175b_args.txt, with its source). As
// shipped there it gives --step-batch-size-schedule beside --global-batch-size, which Megatron-LM's
// validate_args refuses (megatron/training/arguments.py:698-701: "Cannot specify both
// --step-batch-size-schedule and --global-batch-size"), so the import refuses it too, with
// that message; without the schedule line it imports with no --allow-unmodelled and
// simulates on the 8 x 16 = 128 GPUs its tp and pp ask for.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "support/support.hpp"

namespace bmpipe {
namespace megatron_stock_scripts_test {

const std::string kGpt3 = std::string(BMPIPE_TEST_DATA_DIR) + "/megatron/gpt3_175b_args.txt";

TEST(MegatronStockScripts, Gpt3AsShippedIsRefusedAsMegatronLmRefusesIt) {
  const test::CliRun r =
      test::run_cli("import megatron '" + kGpt3 + "' --preset h100-sxm --devices 128");
  EXPECT_EQ(r.code, 2) << r.all();
  // The schedule is on line 20 of the copy, the global batch on line 19.
  EXPECT_NE(
      r.err.find(kGpt3 + ":20: --step-batch-size-schedule: given beside --global-batch-size (line "
                         "19), which Megatron-LM refuses (\"Cannot specify both "
                         "--step-batch-size-schedule and --global-batch-size\")"),
      std::string::npos)
      << r.err;
  EXPECT_EQ(r.out, "");
}

TEST(MegatronStockScripts, Gpt3WithoutItsScheduleImportsAsItIsAndSimulates) {
  std::stringstream in(test::slurp(kGpt3));
  std::string text;
  int dropped = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.find("    --step-batch-size-schedule ") == 0) {
      ++dropped;
      continue;
    }
    text += line + "\n";
  }
  ASSERT_EQ(dropped, 1);
  test::ScratchDir dir;
  const std::string script = test::write_file(dir.file("gpt3.txt"), text);
  const std::string out = dir.file("gpt3.yaml");
  const test::CliRun imported = test::run_cli(
      "import megatron '" + script + "' --preset h100-sxm --devices 128 --out '" + out + "'");
  ASSERT_EQ(imported.code, 0) << imported.all();
  EXPECT_EQ(imported.err.find("warning:"), std::string::npos) << imported.err;
  const nlohmann::json sim = test::run_json("simulate '" + out + "' --json");
  EXPECT_EQ(sim["ok"], true);
  // The script's layout: tp 8, pp 16 on 128 GPUs leave dp 1.
  EXPECT_EQ(sim["tp"], 8);
  EXPECT_EQ(sim["pp"], 16);
  EXPECT_EQ(sim["dp"], 1);
  EXPECT_GT(sim["iteration_time_ms"].get<double>(), 0.0);
}

// examples/mixtral/train_mixtral_8x7b_distributed.sh at d98e8a64
// (tests/data/megatron/mixtral_8x7b_shipped_args.txt, with its source): its one flag that
// was refused, --no-masked-softmax-fusion, is read by Megatron-Core's own DotProductAttention
// alone (megatron/core/transformer/dot_product_attention.py:104), never by
// TransformerEngine's, which the script runs (the default --transformer-impl). So it imports
// with no --allow-unmodelled and simulates on 64 GPUs: tp 1, pp 4, ep 8, dp 16.
const std::string kMixtral =
    std::string(BMPIPE_TEST_DATA_DIR) + "/megatron/mixtral_8x7b_shipped_args.txt";

TEST(MegatronStockScripts, MixtralAsShippedImportsAsItIsAndSimulates) {
  test::ScratchDir dir;
  const std::string out = dir.file("mixtral.yaml");
  const test::CliRun imported = test::run_cli(
      "import megatron '" + kMixtral + "' --preset h100-sxm --devices 64 --out '" + out + "'");
  ASSERT_EQ(imported.code, 0) << imported.all();
  EXPECT_EQ(imported.err.find("warning:"), std::string::npos) << imported.err;
  EXPECT_NE(imported.err.find("ignored: --no-masked-softmax-fusion (no effect: "
                              "TransformerEngine's attention does not read it)"),
            std::string::npos)
      << imported.err;
  const nlohmann::json sim = test::run_json("simulate '" + out + "' --json");
  EXPECT_EQ(sim["ok"], true);
  EXPECT_EQ(sim["tp"], 1);
  EXPECT_EQ(sim["pp"], 4);
  EXPECT_EQ(sim["dp"], 16);
  EXPECT_EQ(sim["job"]["ep"], 8);
}

// Where Megatron-Core's own attention runs, the flag is its fused softmax switched off, which
// bmpipe does not cost: refused as before.
TEST(MegatronStockScripts, MaskedSoftmaxFusionCountsUnderMegatronCoresOwnAttention) {
  std::string text = test::slurp(kMixtral);
  const std::string last = "--vocab-size 32000\n";
  ASSERT_EQ(text.substr(text.size() - last.size()), last);
  text.insert(text.size() - 1, " \\\n    --transformer-impl local");
  test::ScratchDir dir;
  const std::string script = test::write_file(dir.file("mixtral_local.txt"), text);
  const test::CliRun r =
      test::run_cli("import megatron '" + script + "' --preset h100-sxm --devices 64");
  EXPECT_EQ(r.code, 2) << r.all();
  EXPECT_NE(r.err.find(script + ":27: --no-masked-softmax-fusion: not modelled yet"),
            std::string::npos)
      << r.err;
}

// examples/llama/train_llama3_8b_h100_fp8.sh at d98e8a64
// (tests/data/megatron/llama3_8b_h100_fp8_args.txt, with its source). Of its four flags once
// refused, three are inert with their reason in frameworks/megatron/flags.tsv:
// --fp8-amax-history-len 1024 and --fp8-amax-compute-algo max, read by the delayed-scaling
// recipe alone (megatron/core/extensions/transformer_engine.py:3360-3361), a history of a few
// KiB a GEMM reduced once a step, and --empty-unused-memory-level 1,
// torch.cuda.empty_cache() once a step (megatron/training/training.py:3149-3150). The
// fourth, --cross-entropy-loss-fusion, swaps the vocab-parallel cross-entropy for its
// jit-fused form (megatron/core/models/common/language_module/language_module.py:173-196), a
// change of kernels bmpipe does not cost: its unfused cross-entropy is 13.3 + 9.1 ms a
// micro-batch here, 3.6 % of the iteration, so a fusion is no negligible change. It stays
// the one refusal; without it the script imports as it is and simulates on its 8 GPUs.
const std::string kLlama3 =
    std::string(BMPIPE_TEST_DATA_DIR) + "/megatron/llama3_8b_h100_fp8_args.txt";

TEST(MegatronStockScripts, Llama3Fp8AsShippedIsRefusedOnlyForItsCrossEntropyFusion) {
  const test::CliRun r =
      test::run_cli("import megatron '" + kLlama3 + "' --preset h100-sxm --devices 8");
  EXPECT_EQ(r.code, 2) << r.all();
  EXPECT_NE(r.err.find(kLlama3 + ":48: --cross-entropy-loss-fusion: not modelled yet"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("also not modelled"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
}

TEST(MegatronStockScripts, Llama3Fp8WithoutItsCrossEntropyFusionImportsAndSimulates) {
  std::stringstream in(test::slurp(kLlama3));
  std::string text;
  int dropped = 0;
  for (std::string line; std::getline(in, line);) {
    if (line == "    --cross-entropy-loss-fusion \\") {
      ++dropped;
      continue;
    }
    text += line + "\n";
  }
  ASSERT_EQ(dropped, 1);
  test::ScratchDir dir;
  const std::string script = test::write_file(dir.file("llama3.txt"), text);
  const std::string out = dir.file("llama3.yaml");
  const test::CliRun imported = test::run_cli(
      "import megatron '" + script + "' --preset h100-sxm --devices 8 --out '" + out + "'");
  ASSERT_EQ(imported.code, 0) << imported.all();
  EXPECT_EQ(imported.err.find("warning:"), std::string::npos) << imported.err;
  for (const char* flag :
       {"--fp8-amax-history-len", "--fp8-amax-compute-algo", "--empty-unused-memory-level"})
    EXPECT_NE(imported.err.find(std::string("ignored: ") + flag + " (not modelled)"),
              std::string::npos)
        << flag << "\n"
        << imported.err;
  const nlohmann::json sim = test::run_json("simulate '" + out + "' --json");
  EXPECT_EQ(sim["ok"], true);
  // The script's layout: tp 1, pp 1 (its --pipeline-model-parallel-size is commented out),
  // so its one node of 8 GPUs is dp 8; 128 samples of micro-batch 1 are 16 micro-batches.
  EXPECT_EQ(sim["tp"], 1);
  EXPECT_EQ(sim["pp"], 1);
  EXPECT_EQ(sim["dp"], 8);
  EXPECT_EQ(sim["microbatches"], 16);
  EXPECT_EQ(sim["gemm_precision"], "FP8");
  EXPECT_GT(sim["iteration_time_ms"].get<double>(), 0.0);
}

}  // namespace megatron_stock_scripts_test
}  // namespace bmpipe
