// HuggingFace config.json files of mixture-of-experts models (tests/data/hf, sources in its
// README): what read_hf_config takes from them, and the parameter counts, total and active,
// against closed forms worked out by hand (in the comments) and against the model cards.
// The cards count active parameters differently; bmpipe counts both embedding matrices
// (the input lookup and the output head) in the active figure, and each test states the
// card's own convention beside its check.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "experiment/hf_config.hpp"
#include "support/hf_refusals.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace hf_moe_test {

std::string hf(const char* file) {
  return std::string(BMPIPE_TEST_DATA_DIR) + "/hf/" + file;
}

/// |value / card - 1| <= 1 %.
void expect_within_one_percent(double value, double card, const char* what) {
  EXPECT_LE(std::abs(value / card - 1.0), 0.01) << what << ": " << value << " vs card " << card;
}

TEST(HfMoe, MixtralEightExpertsTopTwo) {
  const ModelShape m = read_hf_config(hf("mixtral_8x7b_config.json"));
  EXPECT_TRUE(m.is_moe());
  EXPECT_FALSE(m.is_mla());
  EXPECT_EQ(m.moe.num_experts, 8);
  EXPECT_EQ(m.moe.top_k, 2);
  EXPECT_EQ(m.moe.expert_ffn, 14336);
  EXPECT_EQ(m.moe.shared_ffn, 0);
  for (int i = 0; i < m.num_layers; ++i) EXPECT_TRUE(m.is_moe_layer(i)) << i;
  // Per layer: attention 2 x 4096 x 4096 (q, o) + 2 x 4096 x 1024 (k, v) + norm 4096;
  // MoE: router 4096 x 8, experts n x 3 x 4096 x 14336, norm 4096. Embedding and head
  // 32000 x 4096 each, final norm 4096.
  EXPECT_EQ(m.total_params(false), 46'702'792'704LL);
  EXPECT_EQ(m.total_params(true), 12'879'925'248LL);
  // Mixtral of Experts (arXiv:2401.04088) and the model card: 46.7B total, 12.9B active
  // ("13B active"); both embedding matrices counted, as bmpipe does.
  expect_within_one_percent(static_cast<double>(m.total_params(false)), 46.7e9, "total");
  expect_within_one_percent(static_cast<double>(m.total_params(true)), 12.9e9, "active");
}

TEST(HfMoe, QwenThreeThirtyBillionAThreeB) {
  const ModelShape m = read_hf_config(hf("qwen3_30b_a3b_config.json"));
  EXPECT_EQ(m.moe.num_experts, 128);
  EXPECT_EQ(m.moe.top_k, 8);
  EXPECT_EQ(m.moe.expert_ffn, 768);
  EXPECT_EQ(m.head_dim(), 128);
  EXPECT_TRUE(m.qk_norm);
  EXPECT_TRUE(m.moe.dense_layers.empty());
  for (int i = 0; i < m.num_layers; ++i) EXPECT_TRUE(m.is_moe_layer(i)) << i;
  // Per layer: q, o 2048 x 4096 each; k, v 2048 x 512 each; q_norm, k_norm 128 each; input
  // norm 2048; router 2048 x 128; experts n x 3 x 2048 x 768; post norm 2048. Embedding
  // and head 151936 x 2048 each (untied), final norm 2048.
  EXPECT_EQ(m.total_params(false), 30'532'122'624LL);
  EXPECT_EQ(m.total_params(true), 3'353'032'704LL);
  // Model card (Qwen/Qwen3-30B-A3B): 30.5B total, 3.3B activated, both embedding matrices
  // counted. The total agrees within 0.1 %; the active count with both matrices is
  // 3.353B, 1.6 % above the card's 3.3, which is the figure truncated to one decimal
  // (one matrix would give 3.04B, none 2.73B: no convention lands within 1 %).
  expect_within_one_percent(static_cast<double>(m.total_params(false)), 30.5e9, "total");
  EXPECT_EQ(std::floor(static_cast<double>(m.total_params(true)) / 1e8), 33.0);
}

TEST(HfMoe, QwenOneFiveMoeHasASharedExpertWithAGate) {
  const ModelShape m = read_hf_config(hf("qwen1.5_moe_a2.7b_config.json"));
  EXPECT_EQ(m.moe.num_experts, 60);
  EXPECT_EQ(m.moe.top_k, 4);
  EXPECT_EQ(m.moe.expert_ffn, 1408);
  EXPECT_EQ(m.moe.shared_ffn, 5632);
  EXPECT_TRUE(m.moe.shared_gate);
  EXPECT_TRUE(m.qkv_bias);
  // Per layer: attention 4 x 2048^2 + q/k/v biases 3 x 2048 + norm 2048; router
  // 2048 x 60; experts n x 3 x 2048 x 1408; shared 3 x 2048 x 5632 + gate 2048; norm 2048.
  EXPECT_EQ(m.total_params(false), 14'315'784'192LL);
  EXPECT_EQ(m.total_params(true), 2'689'173'504LL);
  // Model card (Qwen/Qwen1.5-MoE-A2.7B): 14.3B total, 2.7B activated (both embeddings).
  expect_within_one_percent(static_cast<double>(m.total_params(false)), 14.3e9, "total");
  expect_within_one_percent(static_cast<double>(m.total_params(true)), 2.7e9, "active");
}

TEST(HfMoe, QwenSparseStepAndMlpOnlyLayersPickTheDenseLayers) {
  const test::ScratchDir dir;
  nlohmann::json j = nlohmann::json::parse(test::slurp(hf("qwen1.5_moe_a2.7b_config.json")));
  j["decoder_sparse_step"] = 2;
  j["mlp_only_layers"] = {5};
  const ModelShape m = read_hf_config(test::write_file(dir.file("step.json"), j.dump()));
  // HF Qwen2MoeDecoderLayer: sparse when (i + 1) % step == 0 and i not in mlp_only_layers.
  EXPECT_FALSE(m.is_moe_layer(0));
  EXPECT_TRUE(m.is_moe_layer(1));
  EXPECT_FALSE(m.is_moe_layer(2));
  EXPECT_TRUE(m.is_moe_layer(3));
  EXPECT_FALSE(m.is_moe_layer(5));  // listed as dense
  EXPECT_TRUE(m.is_moe_layer(7));
  // 11 sparse layers (1, 3, 7, 9, ..., 23) and 13 dense ones of intermediate_size 5632:
  // the dense MLP is 3 x 2048 x 5632 + norm.
  const long long dense_mlp = 3LL * 2048 * 5632 + 2048;
  EXPECT_EQ(m.dense_mlp_params(), dense_mlp);
  const long long att = 4LL * 2048 * 2048 + 3 * 2048 + 2048;
  const long long moe_all = 2048LL * 60 + 60LL * 3 * 2048 * 1408 + 3LL * 2048 * 5632 + 2048 + 2048;
  EXPECT_EQ(m.total_params(false),
            24 * att + 13 * dense_mlp + 11 * moe_all + 2LL * 151936 * 2048 + 2048);
}

TEST(HfMoe, DeepSeekVThreeLatentAttentionDenseLayersAndMtp) {
  const ModelShape m = read_hf_config(hf("deepseek_v3_config.json"));
  EXPECT_TRUE(m.is_mla());
  EXPECT_EQ(m.mla.q_lora_rank, 1536);
  EXPECT_EQ(m.mla.kv_lora_rank, 512);
  EXPECT_EQ(m.mla.qk_nope_head_dim, 128);
  EXPECT_EQ(m.mla.qk_rope_head_dim, 64);
  EXPECT_EQ(m.mla.v_head_dim, 128);
  EXPECT_EQ(m.moe.num_experts, 256);
  EXPECT_EQ(m.moe.top_k, 8);
  EXPECT_EQ(m.moe.shared_ffn, 2048);  // one shared expert of moe_intermediate_size
  EXPECT_EQ(m.moe.first_dense_layers, 3);
  EXPECT_TRUE(m.moe.router_score_bias);
  EXPECT_EQ(m.mtp_layers, 1);
  EXPECT_FALSE(m.is_moe_layer(2));
  EXPECT_TRUE(m.is_moe_layer(3));
  EXPECT_TRUE(m.is_moe_layer(60));
  // MLA: q_a 7168 x 1536 + norm 1536 + q_b 1536 x 128 x 192; kv_a 7168 x (512 + 64) +
  // norm 512 + kv_b 512 x 128 x (128 + 128); o 128 x 128 x 7168; input norm 7168.
  const long long att = 7168LL * 1536 + 1536 + 1536LL * 128 * 192 + 7168LL * 576 + 512 +
                        512LL * 128 * 256 + 128LL * 128 * 7168 + 7168;
  EXPECT_EQ(att, 187'114'496LL);
  EXPECT_EQ(m.attention_params(), att);
  // 3 dense layers (MLP 3 x 7168 x 18432), 58 MoE layers (router 7168 x 256 + 256
  // correction biases, 256 routed + 1 shared experts of 3 x 7168 x 2048), embedding and
  // head 129280 x 7168 each, final norm.
  EXPECT_EQ(m.total_params(false), 671'026'419'200LL);
  EXPECT_EQ(m.total_params(true), 37'552'297'472LL);
  // DeepSeek-V3 technical report (arXiv:2412.19437) and model card: 671B total, 37B
  // activated. The total agrees within 0.01 %. The active figure is rounded to the
  // billion: with both matrices bmpipe's count is 37.55B (1.5 % over, rounds to 38); with
  // the input embedding lookup left out it is 36.63B (1.01 % under, rounds to 37), the
  // convention the card's figure fits.
  expect_within_one_percent(static_cast<double>(m.total_params(false)), 671e9, "total");
  EXPECT_EQ(std::round(static_cast<double>(m.total_params(true) - 129280LL * 7168) / 1e9), 37.0);
  // The MTP module, counted apart from parameters_total: an MoE decoder layer, enorm,
  // hnorm and shared_head.norm (3 x 7168) and eh_proj 14336 x 7168; it shares the
  // embedding and the output head. The card's 685B = 671B + 14B of MTP weights counts the
  // module with its own copies of both matrices in the checkpoint.
  const long long mtp = m.mtp_module_params(false);
  EXPECT_EQ(mtp, 11'610'068'224LL);
  expect_within_one_percent(static_cast<double>(m.total_params(false) + mtp + 2LL * 129280 * 7168),
                            685e9, "with the MTP module");
}

TEST(HfMoe, GptOssBiasesSinksAndSlidingWindow) {
  const ModelShape m = read_hf_config(hf("gpt_oss_120b_config.json"));
  EXPECT_EQ(m.moe.num_experts, 128);
  EXPECT_EQ(m.moe.top_k, 4);
  EXPECT_EQ(m.moe.expert_ffn, 2880);
  EXPECT_EQ(m.head_dim(), 64);
  EXPECT_TRUE(m.attention_bias);
  EXPECT_TRUE(m.attention_sinks);
  EXPECT_TRUE(m.moe.router_bias);
  EXPECT_TRUE(m.moe.expert_bias);
  EXPECT_EQ(m.sliding_window, 128);
  EXPECT_EQ(m.sliding_every, 2);
  // Per layer: q, o 2880 x 4096; k, v 2880 x 512; biases 4096 + 2 x 512 + 2880; 64 sinks;
  // input norm; router 2880 x 128 + 128; experts n x (3 x 2880 x 2880 + 2 x 2880 + 2880);
  // post norm. Embedding and unembedding 201088 x 2880 each, final norm.
  EXPECT_EQ(m.total_params(false), 116'829'156'672LL);
  EXPECT_EQ(m.total_params(true), 5'711'982'912LL);
  // gpt-oss model card (arXiv:2508.10925, table 1): 116.83B total, 5.13B active; its
  // active count leaves out the input embedding lookup (the unembedding is counted).
  expect_within_one_percent(static_cast<double>(m.total_params(false)), 116.8e9, "total");
  expect_within_one_percent(static_cast<double>(m.total_params(true) - 201088LL * 2880), 5.13e9,
                            "active without the input embedding");
}

TEST(HfMoe, LlamaFourScoutEveryLayerSixteenExpertsAndASharedOne) {
  // The language model of a Llama4ForConditionalGeneration config: its text_config.
  const ModelShape m = read_hf_config(hf("llama4_scout_17b_16e_config.json"));
  EXPECT_EQ(m.num_layers, 48);
  EXPECT_EQ(m.moe.num_experts, 16);
  EXPECT_EQ(m.moe.top_k, 1);
  EXPECT_EQ(m.moe.expert_ffn, 8192);
  EXPECT_EQ(m.moe.shared_ffn, 8192);
  EXPECT_FALSE(m.moe.shared_gate);
  EXPECT_FALSE(m.tied_embeddings);
  for (int i = 0; i < m.num_layers; ++i) EXPECT_TRUE(m.is_moe_layer(i)) << i;
  // Per layer: q, o 5120 x 5120; k, v 5120 x 1024 (8 kv heads of 128); two norms 5120;
  // router 5120 x 16; experts 16 x 3 x 5120 x 8192; shared expert 3 x 5120 x 8192:
  // 2 202 101 760. x 48, + embedding and head 202048 x 5120 each + final norm 5120.
  EXPECT_EQ(m.total_params(false), 107'769'861'120LL);
  // Active: one routed expert and the shared one: 314 664 960 per layer.
  EXPECT_EQ(m.total_params(true), 17'172'894'720LL);
  // Meta's model card: 17B active, 109B total. "17B" is the count to whole billions: with
  // both embedding matrices 17.17B rounds to it (1.0 % above; without the input lookup,
  // 16.14B, it would not). The card's total is the whole multimodal checkpoint (its
  // vision encoder and projector too), which the language model here is 1.1 % below.
  EXPECT_EQ(std::lround(static_cast<double>(m.total_params(true)) / 1e9), 17);
  EXPECT_LT(static_cast<double>(m.total_params(false)), 109e9);
  EXPECT_GT(static_cast<double>(m.total_params(false)), 0.98 * 109e9);
}

TEST(HfMoe, LlamaFourMaverickAlternatesDenseAndMoeLayers) {
  const ModelShape m = read_hf_config(hf("llama4_maverick_17b_128e_config.json"));
  EXPECT_EQ(m.moe.num_experts, 128);
  EXPECT_EQ(m.ffn_hidden_size, 16384);  // intermediate_size_mlp, the dense layers' MLP
  // interleave_moe_layer_step 2: moe_layers = range(1, 48, 2), the odd layers.
  for (int i = 0; i < m.num_layers; ++i) EXPECT_EQ(m.is_moe_layer(i), i % 2 == 1) << i;
  // MoE layer: attention 62 914 560 + norms 10 240 + router 5120 x 128 + 128 experts and
  // the shared one of 125 829 120 each = 16 295 536 640; dense layer: attention, norms and
  // 3 x 5120 x 16384 = 314 583 040. 24 of each, + 2 x 202048 x 5120 + 5120.
  EXPECT_EQ(m.total_params(false), 400'711'848'960LL);
  // Active: 24 x 315 238 400 (one routed expert and the shared one) + 24 dense layers.
  EXPECT_EQ(m.total_params(true), 17'184'691'200LL);
  // Model card: 17B active, 400B total. The total agrees within 0.2 %; the active count,
  // both embedding matrices counted, is 17.18B, which the card rounds to whole billions.
  expect_within_one_percent(static_cast<double>(m.total_params(false)), 400e9, "total");
  EXPECT_EQ(std::lround(static_cast<double>(m.total_params(true)) / 1e9), 17);
  // An explicit moe_layers list is read as given.
  const test::ScratchDir dir;
  nlohmann::json j = nlohmann::json::parse(test::slurp(hf("llama4_maverick_17b_128e_config.json")));
  j["text_config"]["moe_layers"] = {0, 47};
  const ModelShape two = read_hf_config(test::write_file(dir.file("two.json"), j.dump()));
  for (int i = 0; i < two.num_layers; ++i) EXPECT_EQ(two.is_moe_layer(i), i == 0 || i == 47) << i;
}

TEST(HfMoe, LlamaFourBadFieldsNameTheirPointerInsideTextConfig) {
  const nlohmann::json scout =
      nlohmann::json::parse(test::slurp(hf("llama4_scout_17b_16e_config.json")));
  const std::vector<test::HfRefusal> cases = {
      {{{"text_config", nullptr}}, ": /text_config: a llama4 config needs"},
      {{{"text_config", {{"num_local_experts", 0}}}},
       "#/text_config/num_local_experts: HF config field 'num_local_experts' must be a positive"},
      {{{"text_config", {{"moe_layers", {3, 48}}}}},
       "#/text_config/moe_layers: expected layer indices from 0 to num_hidden_layers - 1 = 47, "
       "got 48"},
      {{{"text_config", {{"interleave_moe_layer_step", 2}, {"intermediate_size_mlp", nullptr}}}},
       "#/text_config: HF config lacks the field 'intermediate_size_mlp'"},
      {{{"text_config", {{"model_type", "llama4_vision_model"}}}},
       "#/text_config/model_type: expected 'llama4_text'"},
  };
  test::expect_hf_refusals(scout, cases);
}

TEST(HfMoe, BadExpertAndLatentFieldsNameTheField) {
  const test::ScratchDir dir;
  const nlohmann::json mixtral = nlohmann::json::parse(test::slurp(hf("mixtral_8x7b_config.json")));
  const nlohmann::json ds = nlohmann::json::parse(test::slurp(hf("deepseek_v3_config.json")));
  struct Case {
    const nlohmann::json* base;
    const char* field;
    nlohmann::json value;
    const char* expect;
  };
  const Case cases[] = {
      {&mixtral, "num_experts_per_tok", 9,
       "/num_experts_per_tok: 9 experts per token, but the model has 8"},
      {&mixtral, "num_local_experts", nullptr, "lacks the field 'num_local_experts'"},
      {&ds, "kv_lora_rank", 8192, "/kv_lora_rank: 8192 is wider than hidden_size = 7168"},
      {&ds, "q_lora_rank", 10000, "/q_lora_rank: 10000 is wider than hidden_size = 7168"},
      {&ds, "qk_rope_head_dim", nullptr, "lacks the field 'qk_rope_head_dim'"},
      {&ds, "v_head_dim", 0, "/v_head_dim: HF config field 'v_head_dim' must be a positive"},
  };
  int n = 0;
  for (const Case& c : cases) {
    nlohmann::json j = *c.base;
    j[c.field] = c.value;
    const std::string path = test::write_file(dir.file(std::to_string(n++) + ".json"), j.dump());
    try {
      read_hf_config(path);
      ADD_FAILURE() << "accepted " << c.field << " = " << c.value.dump();
    } catch (const ShapeError& e) {
      EXPECT_NE(std::string(e.what()).find(c.expect), std::string::npos) << e.what();
    }
  }
}

TEST(HfMoe, OtherMixtureOfExpertsFamiliesStayRefused) {
  const test::ScratchDir dir;
  nlohmann::json j = nlohmann::json::parse(test::slurp(hf("deepseek_v3_config.json")));
  j["model_type"] = "deepseek_v2";
  const std::string path = test::write_file(dir.file("v2.json"), j.dump());
  try {
    read_hf_config(path);
    ADD_FAILURE() << "accepted deepseek_v2";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find(path + ": /n_routed_experts"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("mixture-of-experts"), std::string::npos) << e.what();
  }
}

}  // namespace hf_moe_test
}  // namespace bmpipe
