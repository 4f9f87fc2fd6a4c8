// Issue 41, "MindFormers' shipped pretraining YAMLs for Llama 2 70B, Qwen2-MoE and
// DeepSeek-V3 import without --allow-unmodelled and simulate": the Qwen2-MoE one,
// research/qwen2/qwen2_57b/pretrain_qwen2_57b.yaml at mindspore-lab/mindformers r1.5.0
// (ece44cc4; tests/data/mindformers/qwen2_57b_pretrain.yaml, with its source).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "support/support.hpp"

namespace bmpipe {
namespace mindformers_stock_yamls_test {

const std::string kQwen2 =
    std::string(BMPIPE_TEST_DATA_DIR) + "/mindformers/qwen2_57b_pretrain.yaml";

/// `text` with the one line `from` replaced by `to` (the line must be there once).
std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const std::size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  EXPECT_EQ(text.find(from, at + 1), std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

// moe_config.shared_expert_num: 8.0 (the copy's line 47). MindFormers keeps the value as
// written (MoEConfig.__init__, mindformers/modules/transformer/moe.py:187 at r1.5.0, no
// check) and builds a shared FFN of int(intermediate_size * shared_expert_num)
// (mindformers/models/llama/llama_layer.py:821): 8.0 is 8 experts of the YAML's
// intermediate_size 2560, 20480 wide, which is Qwen2-57B-A14B's
// shared_expert_intermediate_size in its Hugging Face config.json. It was refused as "expected
// an integer, got '8.0'"; now read. (The YAML's other keys are checked apart; with
// --allow-unmodelled here so that only this key is tested.)
TEST(MindFormersStockYamls, Qwen2SharedExpertNumAsAnIntegralFloatIsThatManyExperts) {
  test::ScratchDir dir;
  const std::string out = dir.file("qwen2.yaml");
  const test::CliRun r =
      test::run_cli("import mindformers '" + kQwen2 +
                    "' --preset ascend-910b --allow-unmodelled --out '" + out + "'");
  ASSERT_EQ(r.code, 0) << r.all();
  const std::string yaml = test::slurp(out);
  EXPECT_NE(yaml.find("shared_expert_ffn_hidden_size: 20480 "), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("expert_ffn_hidden_size: 2560 "), std::string::npos) << yaml;
}

// 8.5 would be int(2560 * 8.5) = 21760 in MindFormers, a width no whole number of experts
// makes, which bmpipe's MindFormers import and export do not state: refused, naming the
// file, line and key; so is a quoted '8.0' (a string: MindFormers' int(2560 * '8.0') fails).
TEST(MindFormersStockYamls, Qwen2SharedExpertNumAsAFractionIsRefusedOnItsLine) {
  const std::string text = test::slurp(kQwen2);
  for (const char* bad : {"8.5", "'8.0'"}) {
    test::ScratchDir dir;
    const std::string yaml = test::write_file(
        dir.file("qwen2.yaml"), replaced(text, "  shared_expert_num: 8.0\n",
                                         std::string("  shared_expert_num: ") + bad + "\n"));
    const test::CliRun r =
        test::run_cli("import mindformers '" + yaml + "' --preset ascend-910b --allow-unmodelled");
    EXPECT_EQ(r.code, 2) << bad << "\n" << r.all();
    EXPECT_NE(r.err.find(yaml + ":47: moe_config.shared_expert_num: expected "), std::string::npos)
        << bad << "\n"
        << r.err;
    EXPECT_EQ(r.out, "");
  }
}

// configs/llama2/pretrain_llama2_70b.yaml at r1.5.0 (tests/data/mindformers/
// llama2_70b_pretrain.yaml, with its source). Of its six keys once refused, two have no
// effect in this YAML, from MindFormers' source at r1.5.0, and are now listed as ignored:
// softmax_compute_type (float16) is the dtype of the softmax of the attention's own score
// path, _attn (mindformers/models/llama/llama_transformer.py:734, llama_interleave.py:538),
// which use_flash_attention: True replaces by FlashAttentionScore (llama_transformer.py:551,
// llama_interleave.py:443); recompute_slice_activation (True) reaches layer.recompute() only
// when recompute is True (mindformers/models/utils.py:403-405), and this YAML recomputes
// nothing. Four still change the job in ways bmpipe does not model, and stay refused:
// context.jit_config (jit_level O1: MindSpore's graph-kernel fusion, other kernels than the
// O0 kernel-by-kernel run), parallel.parallel_optimizer_config (the optimizer's sharding
// threshold and gradient-accumulation sharding), param_init_type float16 (the weights kept in
// float16, not float32) and fine_grain_interleave 2 (LLamaDecodeLayerInterleave, llama.py:193,
// which slices each layer to overlap its model-parallel communication).
const std::string kLlama2 =
    std::string(BMPIPE_TEST_DATA_DIR) + "/mindformers/llama2_70b_pretrain.yaml";

TEST(MindFormersStockYamls, Llama2SeventyBIsRefusedForTheFourKeysThatChangeItsJob) {
  const test::CliRun r = test::run_cli("import mindformers '" + kLlama2 + "' --preset ascend-910b");
  EXPECT_EQ(r.code, 2) << r.all();
  EXPECT_NE(r.err.find(kLlama2 + ":134: context.jit_config: not modelled yet"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("also not modelled: parallel.parallel_optimizer_config (line 92), "
                       "model.model_config.param_init_type (line 160), "
                       "model.model_config.fine_grain_interleave (line 165)."),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("softmax_compute_type"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("recompute_slice_activation"), std::string::npos) << r.err;
}

TEST(MindFormersStockYamls, Llama2SeventyBListsTheKeysWithoutEffectAndSimulates) {
  test::ScratchDir dir;
  const std::string out = dir.file("llama2.yaml");
  const test::CliRun r =
      test::run_cli("import mindformers '" + kLlama2 +
                    "' --preset ascend-910b --allow-unmodelled --out '" + out + "'");
  ASSERT_EQ(r.code, 0) << r.all();
  EXPECT_NE(r.err.find("(no effect: use_flash_attention runs FlashAttentionScore)"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("(no effect: recompute_config.recompute is not True)"), std::string::npos)
      << r.err;
  // The four refused keys above, and nothing else, are warnings.
  int warnings = 0;
  for (std::size_t at = r.err.find("warning:"); at != std::string::npos;
       at = r.err.find("warning:", at + 1))
    ++warnings;
  EXPECT_EQ(warnings, 4) << r.err;
  const nlohmann::json sim = test::run_json("simulate '" + out + "' --json");
  EXPECT_EQ(sim["ok"], true);
  // parallel_config: data_parallel 2, model_parallel 4, pipeline_stage 8.
  EXPECT_EQ(sim["dp"], 2);
  EXPECT_EQ(sim["tp"], 4);
  EXPECT_EQ(sim["pp"], 8);
}

// Where the rest of the YAML gives them an effect, they are refused as before: the softmax
// dtype without flash attention, the slicing under recompute: True.
TEST(MindFormersStockYamls, SoftmaxTypeAndSliceActivationCountWhereTheyTakeEffect) {
  const std::string text = test::slurp(kLlama2);
  const struct {
    const char* from;
    const char* to;
    const char* refused;
  } cases[] = {
      {"    use_flash_attention: True\n", "    use_flash_attention: False\n",
       "model.model_config.softmax_compute_type (line 158)"},
      {"  recompute: False\n", "  recompute: True\n",
       "recompute_config.recompute_slice_activation (line 113)"},
  };
  for (const auto& c : cases) {
    test::ScratchDir dir;
    const std::string yaml =
        test::write_file(dir.file("llama2.yaml"), replaced(text, c.from, c.to));
    const test::CliRun r = test::run_cli("import mindformers '" + yaml + "' --preset ascend-910b");
    EXPECT_EQ(r.code, 2) << r.all();
    EXPECT_NE(r.err.find(c.refused), std::string::npos) << c.to << "\n" << r.err;
  }
}

}  // namespace mindformers_stock_yamls_test
}  // namespace bmpipe
