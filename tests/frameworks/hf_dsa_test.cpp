// DeepSeek-V3.2-Exp's HuggingFace config.json (configs/presets/hf/deepseek-v3.2-exp.json,
// its source in configs/presets/README.md): DeepseekV32ForCausalLM read as DeepSeek-V3 with
// the lightning indexer of DeepSeek sparse attention, its parameters against the model card,
// and the indexer fields it refuses.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "experiment/hf_config.hpp"
#include "support/hf_refusals.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace hf_dsa_test {

const std::string kV32 =
    std::string(BMPIPE_SOURCE_DIR) + "/configs/presets/hf/deepseek-v3.2-exp.json";
const std::string kV3 = std::string(BMPIPE_SOURCE_DIR) + "/configs/presets/hf/deepseek-v3.json";

TEST(HfDsa, DeepSeekV32ReadsTheIndexer) {
  const ModelShape m = read_hf_config(kV32);
  EXPECT_TRUE(m.is_mla());
  EXPECT_TRUE(m.is_dsa());
  EXPECT_EQ(m.dsa.index_heads, 64);
  EXPECT_EQ(m.dsa.index_head_dim, 128);
  EXPECT_EQ(m.dsa.index_topk, 2048);
  EXPECT_TRUE(m.dsa.indexer_loss);
  EXPECT_EQ(m.moe.num_experts, 256);
  EXPECT_EQ(m.mtp_layers, 1);
  EXPECT_FALSE(read_hf_config(kV3).is_dsa());
}

TEST(HfDsa, ParametersAgainstTheModelCard) {
  const ModelShape v32 = read_hf_config(kV32);
  const ModelShape v3 = read_hf_config(kV3);
  // The indexer of one layer: wq_b 1536 x 64 x 128 = 12 582 912, wk 7168 x 128 = 917 504,
  // the key LayerNorm 2 x 128 = 256, weights_proj 7168 x 64 = 458 752: 13 959 424.
  const long long indexer = 1536LL * 64 * 128 + 7168LL * 128 + 2 * 128 + 7168LL * 64;
  EXPECT_EQ(indexer, 13'959'424LL);
  EXPECT_EQ(v32.attention_params() - v3.attention_params(), indexer);
  // 61 layers: DeepSeek-V3's 671 026 419 200 (hf_moe_test) + 61 x 13 959 424.
  EXPECT_EQ(v32.total_params(false), 671'026'419'200LL + 61 * indexer);
  EXPECT_EQ(v32.total_params(false), 671'877'944'064LL);
  // The MTP module carries an indexer too: V3's 11 610 068 224 + 13 959 424.
  EXPECT_EQ(v32.mtp_module_params(false), 11'610'068'224LL + indexer);
  // Model card (deepseek-ai/DeepSeek-V3.2-Exp on HuggingFace): 685B parameters, the
  // checkpoint's count, as DeepSeek-V3's 685B: the main model, the MTP module and the MTP
  // module's own copies of the embedding and the output head (2 x 129280 x 7168).
  // 671 877 944 064 + 11 624 027 648 + 1 853 358 080 = 685 355 329 792, 0.05 % over.
  const double checkpoint = static_cast<double>(v32.total_params(false) +
                                                v32.mtp_module_params(false) + 2LL * 129280 * 7168);
  EXPECT_DOUBLE_EQ(checkpoint, 685'355'329'792.0);
  EXPECT_LE(std::abs(checkpoint / 685e9 - 1.0), 0.01);
}

TEST(HfDsa, BadIndexerFieldsNameTheField) {
  std::ifstream in(kV32);
  const nlohmann::json base = nlohmann::json::parse(in);
  const std::vector<test::HfRefusal> cases = {
      {{{"index_topk", nullptr}}, ": HF config lacks the field 'index_topk'"},
      {{{"index_n_heads", nullptr}}, ": HF config lacks the field 'index_n_heads'"},
      {{{"index_head_dim", "128"}}, ": /index_head_dim: HF config field 'index_head_dim' must be"},
      {{{"index_topk", 0}}, ": /index_topk"},
      // The indexer rotates the first qk_rope_head_dim (64) of each head.
      {{{"index_head_dim", 32}}, ": dsa.index_head_dim = 32 is narrower than qk_rope_head_dim"},
  };
  test::expect_hf_refusals(base, cases);
}

}  // namespace hf_dsa_test
}  // namespace bmpipe
