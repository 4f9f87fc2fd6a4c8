// Issue 41, "MindFormers' shipped pretraining YAMLs for Llama 2 70B, Qwen2-MoE and
// DeepSeek-V3 import without --allow-unmodelled and simulate": the Qwen2-MoE one,
// research/qwen2/qwen2_57b/pretrain_qwen2_57b.yaml at mindspore-lab/mindformers r1.5.0
// (ece44cc4; tests/data/mindformers/qwen2_57b_pretrain.yaml, with its source).
#include <gtest/gtest.h>

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

}  // namespace mindformers_stock_yamls_test
}  // namespace bmpipe
