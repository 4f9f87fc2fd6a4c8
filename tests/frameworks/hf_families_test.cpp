// HuggingFace config.json files of the Qwen2, Mistral and Gemma families (tests/data/hf,
// sources in its README): what read_hf_config takes from them, checked against the figures
// the model authors published, the explicit head dimension carried into the cost model,
// and mixture-of-experts configs of other families refused.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "experiment/hf_config.hpp"
#include "sim/cost/cost_model.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace {

std::string hf(const char* file) {
  return std::string(BMPIPE_TEST_DATA_DIR) + "/hf/" + file;
}

/// Decoder layers and the final norm: what papers call the non-embedding parameters.
long long non_embedding(const ModelShape& m) {
  return m.num_layers * m.layer_params() + m.hidden_size;
}

TEST(HfFamilies, GemmaHasTwoHundredFiftySixWideHeadsAndTiedEmbeddings) {
  const ModelShape m = read_hf_config(hf("gemma_7b_config.json"));
  EXPECT_EQ(m.architecture, Architecture::llama);  // gated MLP, RMSNorm, RoPE
  EXPECT_EQ(m.num_layers, 28);
  EXPECT_EQ(m.hidden_size, 3072);
  EXPECT_EQ(m.num_attention_heads, 16);
  EXPECT_EQ(m.num_kv_heads, 16);
  EXPECT_EQ(m.head_dim(), 256);  // not 3072 / 16 = 192
  EXPECT_EQ(m.ffn_hidden_size, 24576);
  EXPECT_EQ(m.vocab_size, 256000);
  // The published config has no tie_word_embeddings; GemmaConfig ties by default.
  EXPECT_TRUE(m.tied_embeddings);
  // arXiv:2403.08295, table 2: 7,751,248,896 non-embedding parameters. With a head
  // dimension of 192 the count would be 28 x 4 x 3072 x 1024 = 352,321,536 short.
  EXPECT_EQ(non_embedding(m), 7'751'248'896LL);
}

TEST(HfFamilies, QwenTwoMatchesItsPublishedParameterCounts) {
  const ModelShape m = read_hf_config(hf("qwen2_7b_config.json"));
  EXPECT_EQ(m.num_layers, 28);
  EXPECT_EQ(m.hidden_size, 3584);
  EXPECT_EQ(m.num_attention_heads, 28);
  EXPECT_EQ(m.num_kv_heads, 4);
  EXPECT_EQ(m.head_dim(), 128);
  EXPECT_EQ(m.explicit_head_dim, 0);  // hidden / heads already gives it
  EXPECT_EQ(m.ffn_hidden_size, 18944);
  EXPECT_EQ(m.vocab_size, 152064);
  EXPECT_FALSE(m.tied_embeddings);
  // Qwen2.5-7B model card (Qwen2-7B's shape): 7.61 B parameters, 6.53 B non-embedding,
  // rounded to 10 M. The q/k/v biases bmpipe leaves out are 129,024 of them.
  const double rest = static_cast<double>(non_embedding(m));
  const double total = rest + 2.0 * m.vocab_size * m.hidden_size;
  EXPECT_NEAR(rest, 6.53e9, 0.005e9);
  EXPECT_NEAR(total, 7.61e9, 0.01e9);
}

TEST(HfFamilies, MistralMatchesItsArchitectureTable) {
  // Jiang et al. 2023, table 1: dim 4096, n_layers 32, head_dim 128, hidden_dim 14336,
  // n_heads 32, n_kv_heads 8, vocab_size 32000.
  const ModelShape m = read_hf_config(hf("mistral_7b_v0.1_config.json"));
  EXPECT_EQ(m.hidden_size, 4096);
  EXPECT_EQ(m.num_layers, 32);
  EXPECT_EQ(m.head_dim(), 128);
  EXPECT_EQ(m.ffn_hidden_size, 14336);
  EXPECT_EQ(m.num_attention_heads, 32);
  EXPECT_EQ(m.num_kv_heads, 8);
  EXPECT_EQ(m.vocab_size, 32000);
  EXPECT_FALSE(m.tied_embeddings);
}

// The cost model sizes q, the attention core and the output projection by the head
// dimension: one Gemma 7B layer's forward FLOPs in closed form, tp 1, flash attention.
TEST(HfFamilies, CostModelUsesTheExplicitHeadDimension) {
  const ModelShape m = read_hf_config(hf("gemma_7b_config.json"));
  CostSettings st;
  st.seq_length = 4096;
  const LayerCost c = decoder_layer_cost(m, *find_hardware_preset("h200"), st);
  const double T = 4096, s = 4096, h = 3072, q = 16 * 256, kv = 16 * 256, f = 24576;
  const double projections =
      2 * T * h * (q + 2 * kv) + 2 * T * q * h + 2 * T * h * 2 * f + 2 * T * f * h;
  const double causal_core = 2 * 2 * T * s * q * 0.5;  // QK^T and xV, half the scores
  EXPECT_DOUBLE_EQ(c.forward_flops, projections + causal_core);
  // q, k, v, o at 3072 x 4096, gate, up, down, two norm scales: the layer of table 2.
  EXPECT_EQ(c.param_count, static_cast<std::int64_t>(4 * h * q + 3 * h * f + 2 * h));
}

TEST(HfFamilies, AHeadDimensionThatAgreesStaysImplicit) {
  const test::ScratchDir dir;
  nlohmann::json j = nlohmann::json::parse(test::slurp(hf("qwen2_7b_config.json")));
  j["head_dim"] = 128;
  const ModelShape same = read_hf_config(test::write_file(dir.file("same.json"), j.dump()));
  EXPECT_EQ(same.explicit_head_dim, 0);
  j["head_dim"] = 64;
  const ModelShape other = read_hf_config(test::write_file(dir.file("other.json"), j.dump()));
  EXPECT_EQ(other.head_dim(), 64);
  // hidden 3584 = 28 x 128: with 64-wide heads q is 1792 wide, a quarter of the layer's
  // attention weights fewer than with 128.
  EXPECT_EQ(same.layer_params() - other.layer_params(),
            2LL * 3584 * (28 * 64) + 2LL * 3584 * (4 * 64));
  // A head dimension that makes q absurdly wide is refused, like an absurd hidden size.
  j["head_dim"] = 100000;
  try {
    read_hf_config(test::write_file(dir.file("wide.json"), j.dump()));
    ADD_FAILURE() << "accepted 28 heads of 100000";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("num_attention_heads x head_dim = 2800000"),
              std::string::npos)
        << e.what();
  }
  // A bad head_dim is named by its JSON Pointer, like every other field.
  j["head_dim"] = "wide";
  try {
    read_hf_config(test::write_file(dir.file("bad.json"), j.dump()));
    ADD_FAILURE() << "accepted head_dim \"wide\"";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("/head_dim"), std::string::npos) << e.what();
  }
}

TEST(HfFamilies, MixtureOfExpertsConfigsAreRefused) {
  const test::ScratchDir dir;
  const nlohmann::json dense =
      nlohmann::json::parse(test::slurp(hf("mistral_7b_v0.1_config.json")));
  struct Case {
    const char* field;
    nlohmann::json value;
    const char* model_type;
  };
  const Case cases[] = {
      // Expert fields on a dense family, and MoE families bmpipe does not read (mixtral,
      // qwen2_moe, qwen3_moe, deepseek_v3 and gpt_oss it reads: hf_moe_test.cpp).
      {"num_local_experts", 8, "phimoe"},       {"num_experts", 64, "olmoe"},
      {"n_routed_experts", 160, "deepseek_v2"}, {"moe_num_experts", 16, "llama"},
      {"num_experts_per_tok", 2, "llama"},
  };
  int n = 0;
  for (const Case& c : cases) {
    nlohmann::json j = dense;
    j[c.field] = c.value;
    const std::string path = test::write_file(dir.file(std::to_string(n++) + ".json"), j.dump());
    try {
      read_hf_config(path);
      ADD_FAILURE() << "accepted " << c.field;
    } catch (const ShapeError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(path + ": /" + c.field), std::string::npos) << what;
      EXPECT_NE(what.find("mixture-of-experts"), std::string::npos) << what;
    }
    // The family's model_type alone is refused too.
    nlohmann::json typed = dense;
    typed["model_type"] = c.model_type;
    if (std::string(c.model_type) == "llama") continue;
    try {
      read_hf_config(test::write_file(dir.file(std::to_string(n++) + ".json"), typed.dump()));
      ADD_FAILURE() << "accepted model_type " << c.model_type;
    } catch (const ShapeError& e) {
      EXPECT_NE(std::string(e.what()).find("/model_type"), std::string::npos) << e.what();
    }
  }
  // A dense config that spells out one expert, or none, reads.
  nlohmann::json one = dense;
  one["num_experts"] = 1;
  one["num_experts_per_tok"] = nullptr;
  EXPECT_EQ(read_hf_config(test::write_file(dir.file("one.json"), one.dump())).num_layers, 32);
  nlohmann::json odd = dense;
  odd["num_local_experts"] = "eight";
  try {
    read_hf_config(test::write_file(dir.file("odd.json"), odd.dump()));
    ADD_FAILURE() << "accepted a string expert count";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("/num_local_experts: expected an integer"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace bmpipe
