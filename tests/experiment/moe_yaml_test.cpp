// The shape of a mixture-of-experts / multi-latent-attention model from YAML keys
// (model.moe, model.mla, model.mtp_layers): the same ModelShape, and the same parameter
// counts, as the HF config.json that describes the model; keys beside an hf_config or a
// preset override it; every bad value exits 2 naming FILE:LINE:key.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "experiment/config.hpp"
#include "experiment/hf_config.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace {

const std::string kHf = std::string(BMPIPE_TEST_DATA_DIR) + "/hf/";

constexpr const char* kCluster =
    "cluster:\n"                       // 1
    "  nodes: 8\n"                     // 2
    "  devices_per_node: 8\n"          // 3
    "  device: {preset: h100-sxm}\n";  // 4
constexpr const char* kTraining =
    "training:\n"
    "  pp: 4\n"
    "  seq_length: 4096\n"
    "  micro_batch_size: 1\n"
    "  global_batch_size: 256\n";

/// Mixtral-8x7B's config.json (mistralai/Mixtral-8x7B-v0.1) written as shape keys.
const std::string kMixtralModel =
    "model:\n"                     // 5
    "  name: mixtral\n"            // 6
    "  num_layers: 32\n"           // 7
    "  hidden_size: 4096\n"        // 8
    "  num_attention_heads: 32\n"  // 9
    "  num_kv_heads: 8\n"          // 10
    "  ffn_hidden_size: 14336\n"   // 11
    "  vocab_size: 32000\n";       // 12

/// Every member of a ModelShape but the name.
void expect_same_shape(const ModelShape& a, const ModelShape& b) {
  EXPECT_EQ(a.architecture, b.architecture);
  EXPECT_EQ(a.num_layers, b.num_layers);
  EXPECT_EQ(a.hidden_size, b.hidden_size);
  EXPECT_EQ(a.num_attention_heads, b.num_attention_heads);
  EXPECT_EQ(a.num_kv_heads, b.num_kv_heads);
  EXPECT_EQ(a.ffn_hidden_size, b.ffn_hidden_size);
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.tied_embeddings, b.tied_embeddings);
  EXPECT_EQ(a.flash_attention, b.flash_attention);
  EXPECT_EQ(a.dropout, b.dropout);
  EXPECT_EQ(a.explicit_head_dim, b.explicit_head_dim);
  EXPECT_EQ(a.moe.num_experts, b.moe.num_experts);
  EXPECT_EQ(a.moe.top_k, b.moe.top_k);
  EXPECT_EQ(a.moe.expert_ffn, b.moe.expert_ffn);
  EXPECT_EQ(a.moe.shared_ffn, b.moe.shared_ffn);
  EXPECT_EQ(a.moe.shared_gate, b.moe.shared_gate);
  EXPECT_EQ(a.moe.router_bias, b.moe.router_bias);
  EXPECT_EQ(a.moe.expert_bias, b.moe.expert_bias);
  EXPECT_EQ(a.moe.router_score_bias, b.moe.router_score_bias);
  EXPECT_EQ(a.moe.first_dense_layers, b.moe.first_dense_layers);
  EXPECT_EQ(a.moe.load_imbalance, b.moe.load_imbalance);
  for (int i = 0; i < a.num_layers; ++i) EXPECT_EQ(a.is_moe_layer(i), b.is_moe_layer(i)) << i;
  EXPECT_EQ(a.mla.q_lora_rank, b.mla.q_lora_rank);
  EXPECT_EQ(a.mla.kv_lora_rank, b.mla.kv_lora_rank);
  EXPECT_EQ(a.mla.qk_nope_head_dim, b.mla.qk_nope_head_dim);
  EXPECT_EQ(a.mla.qk_rope_head_dim, b.mla.qk_rope_head_dim);
  EXPECT_EQ(a.mla.v_head_dim, b.mla.v_head_dim);
  EXPECT_EQ(a.attention_bias, b.attention_bias);
  EXPECT_EQ(a.qkv_bias, b.qkv_bias);
  EXPECT_EQ(a.qk_norm, b.qk_norm);
  EXPECT_EQ(a.attention_sinks, b.attention_sinks);
  EXPECT_EQ(a.sliding_window, b.sliding_window);
  EXPECT_EQ(a.mtp_layers, b.mtp_layers);
}

nlohmann::json cost_json(const std::string& path) {
  const test::CliRun r = test::run_cli("cost " + path + " --json");
  EXPECT_EQ(r.code, 0) << r.err;
  return r.code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json::object();
}

TEST(MoeYaml, MixtralFromKeysIsTheMixtralOfItsHfConfig) {
  const test::ScratchDir dir;
  const std::string keys = test::write_file(
      dir.file("keys.yaml"),
      std::string(kCluster) + kMixtralModel + "  moe: {num_experts: 8, top_k: 2}\n" + kTraining);
  const std::string hf =
      test::write_file(dir.file("hf.yaml"), std::string(kCluster) + "model:\n  hf_config: \"" +
                                                kHf + "mixtral_8x7b_config.json\"\n" + kTraining);
  const Config from_keys = load_config(keys), from_hf = load_config(hf);
  ASSERT_TRUE(from_keys.model.shape && from_hf.model.shape);
  expect_same_shape(*from_keys.model.shape, *from_hf.model.shape);
  // The model card's 46.7B / 12.9B, as hf_moe_test.cpp counts them by hand.
  const nlohmann::json a = cost_json(keys);
  EXPECT_EQ(a["parameters_total"], 46'702'792'704LL);
  EXPECT_EQ(a["parameters_active"], 12'879'925'248LL);
  const nlohmann::json b = cost_json(hf);
  EXPECT_EQ(b["parameters_total"], a["parameters_total"]);
  EXPECT_EQ(b["layers"], a["layers"]);  // the same layer costs, group by group
}

TEST(MoeYaml, KeysBesideAnHfConfigOverrideIt) {
  const test::ScratchDir dir;
  // 16 experts of half the width, one per token.
  const std::string path = test::write_file(
      dir.file("o.yaml"), std::string(kCluster) + "model:\n  hf_config: \"" + kHf +
                              "mixtral_8x7b_config.json\"\n"
                              "  moe: {num_experts: 16, top_k: 1, expert_ffn_hidden_size: 7168}\n" +
                              kTraining);
  const Config c = load_config(path);
  EXPECT_EQ(c.model.shape->moe.num_experts, 16);
  EXPECT_EQ(c.model.shape->moe.top_k, 1);
  EXPECT_EQ(c.model.shape->moe.expert_ffn, 7168);
  EXPECT_EQ(c.model.shape->ffn_hidden_size, 14336);  // the dense width is the file's
  // By hand from Mixtral's counts: all experts 16 x 3 x 4096 x 7168 = 8 x 3 x 4096 x 14336
  // (unchanged); the router grows by 4096 x 8 a layer: + 32 x 32,768 = 1,048,576. Active: a
  // token runs 1 expert of 88,080,384 instead of 2 of 176,160,768, 264,241,152 fewer a
  // layer: 12,879,925,248 - 32 x 264,241,152 + 1,048,576 = 4,425,256,960.
  const nlohmann::json j = cost_json(path);
  EXPECT_EQ(j["parameters_total"], 46'703'841'280LL);
  EXPECT_EQ(j["parameters_active"], 4'425'256'960LL);
}

TEST(MoeYaml, LayerFreqAndFirstDenseLayersSelectTheMoeLayers) {
  const test::ScratchDir dir;
  const std::string base = std::string(kCluster) + "model:\n  preset: llama3-8b\n";
  // Megatron's int form: layer i is MoE when i % 2 == 0; the first 3 stay dense.
  const Config a = load_config(test::write_file(
      dir.file("int.yaml"),
      base + "  moe: {num_experts: 8, top_k: 2, first_dense_layers: 3, layer_freq: 2}\n" +
          kTraining));
  for (int i = 0; i < 32; ++i) EXPECT_EQ(a.model.shape->is_moe_layer(i), i >= 3 && i % 2 == 0) << i;
  EXPECT_EQ(a.model.shape->moe.expert_ffn, 14336);  // llama3-8b's ffn_hidden_size
  // The list form, Megatron's ([0]*3+[1]*29): DeepSeek-V3's pattern on 32 layers.
  std::string list = "[0, 0, 0";
  for (int i = 3; i < 32; ++i) list += ", 1";
  const Config b = load_config(test::write_file(
      dir.file("list.yaml"),
      base + "  moe: {num_experts: 8, top_k: 2, layer_freq: " + list + "]}\n" + kTraining));
  for (int i = 0; i < 32; ++i) EXPECT_EQ(b.model.shape->is_moe_layer(i), i >= 3) << i;
  // Over Qwen's own pattern ((i + 1) % 2 == 0 in its config), layer_freq 1 makes every
  // layer MoE but its mlp_only_layers are replaced too.
  nlohmann::json q = nlohmann::json::parse(test::slurp(kHf + "qwen3_30b_a3b_config.json"));
  q["decoder_sparse_step"] = 2;
  q["mlp_only_layers"] = {5};
  const std::string qf = test::write_file(dir.file("q.json"), q.dump());
  const Config c = load_config(
      test::write_file(dir.file("q.yaml"), std::string(kCluster) + "model:\n  hf_config: \"" + qf +
                                               "\"\n  moe: {layer_freq: 1}\n" + kTraining));
  for (int i = 0; i < c.model.shape->num_layers; ++i)
    EXPECT_TRUE(c.model.shape->is_moe_layer(i)) << i;
}

TEST(MoeYaml, DeepSeekV3FromKeysIsTheDeepSeekV3OfItsHfConfig) {
  const test::ScratchDir dir;
  // deepseek-ai/DeepSeek-V3 config.json as shape keys.
  const std::string keys =
      test::write_file(dir.file("ds.yaml"),
                       std::string(kCluster) +
                           "model:\n"
                           "  num_layers: 61\n  hidden_size: 7168\n  num_attention_heads: 128\n"
                           "  ffn_hidden_size: 18432\n  vocab_size: 129280\n  mtp_layers: 1\n"
                           "  moe: {num_experts: 256, top_k: 8, expert_ffn_hidden_size: 2048,\n"
                           "        shared_expert_ffn_hidden_size: 2048, first_dense_layers: 3}\n"
                           "  mla: {q_lora_rank: 1536, kv_lora_rank: 512, qk_head_dim: 128,\n"
                           "        qk_pos_emb_head_dim: 64, v_head_dim: 128}\n" +
                           kTraining);
  Config c;
  try {
    c = load_config(keys);
  } catch (const ConfigError& e) {
    // Until the cost model has an MLA layer the loader refuses the shape, after reading it.
    if (std::string(e.what()).find("does not cost that attention yet") != std::string::npos)
      GTEST_SKIP() << e.what();
    throw;
  }
  ModelShape hf = read_hf_config(kHf + "deepseek_v3_config.json");
  // The router's score-correction bias is DeepSeek's (topk_method noaux_tc); no key sets it.
  hf.moe.router_score_bias = false;
  expect_same_shape(*c.model.shape, hf);
}

TEST(MoeYaml, BadValuesNameFileLineAndKey) {
  const test::ScratchDir dir;
  struct BadValue {
    std::string model_extra;  ///< lines 13 on
    std::string expect;
  };
  std::string bad_entry = "[2";  // 32 entries, the first of them not 0 or 1
  for (int i = 1; i < 32; ++i) bad_entry += ", 1";
  const BadValue cases[] = {
      {"  moe: {num_experts: 8, top_k: 9}\n",
       ":13: model.moe.top_k: 9 experts per token, but the model has 8"},
      {"  moe: {top_k: 2}\n", ":13: model.moe: mixtral has no experts"},
      {"  moe: {num_experts: 8}\n", ":13: model.moe.top_k: missing required key"},
      {"  moe: {num_experts: 0, top_k: 0}\n", ":13: model.moe.num_experts: must be at least 1"},
      {"  moe: {num_experts: 8, top_k: 2, layer_freq: [1, 0]}\n",
       ":13: model.moe.layer_freq: a list gives one 0 (dense) or 1 (MoE) per layer: expected 32"},
      {"  moe:\n    num_experts: 8\n    top_k: 2\n    layer_freq: " + bad_entry + "]\n",
       ":16: model.moe.layer_freq[0]: must be at most 1"},
      {"  moe: {num_experts: 8, top_k: 2, layer_freq: 0}\n",
       ":13: model.moe.layer_freq: must be at least 1"},
      {"  moe: {num_experts: 8, top_k: 2, first_dense_layers: 32}\n",
       ":13: model.moe: no decoder layer of the 32 is MoE"},
      {"  moe: {num_experts: 8, top_k: 2, expert_ffn_hidden_size: -1}\n",
       ":13: model.moe.expert_ffn_hidden_size: must be at least 1"},
      {"  moe: {num_experts: 8, top_k: 2, capacity: 1}\n", ":13: model.moe.capacity: unknown key"},
      {"  mla: {kv_lora_rank: 512, qk_head_dim: 128, qk_pos_emb_head_dim: 64}\n",
       ":13: model.mla.v_head_dim: missing required key"},
      {"  mla: {kv_lora_rank: 8192, qk_head_dim: 128, qk_pos_emb_head_dim: 64, "
       "v_head_dim: 128}\n",
       ":13: model.mla.kv_lora_rank: 8192 is wider than hidden_size = 4096"},
      {"  mla:\n    q_lora_rank: 5000\n    kv_lora_rank: 512\n    qk_head_dim: 128\n"
       "    qk_pos_emb_head_dim: 64\n    v_head_dim: 128\n",
       ":14: model.mla.q_lora_rank: 5000 is wider than hidden_size = 4096"},
      {"  mtp_layers: -1\n", ":13: model.mtp_layers: must be at least 0"},
      {"  architecture: gpt\n  moe: {num_experts: 8, top_k: 2}\n",
       ":13: model.architecture: the mixture-of-experts layer is costed for llama only"},
  };
  int n = 0;
  for (const BadValue& c : cases) {
    const std::string& extra = c.model_extra;
    const std::string path =
        test::write_file(dir.file(std::to_string(n++) + ".yaml"),
                         std::string(kCluster) + kMixtralModel + extra + kTraining);
    const test::CliRun r = test::run_cli("cost " + path);
    EXPECT_EQ(r.code, 2) << extra << r.out;
    EXPECT_NE(r.err.find(path + c.expect), std::string::npos) << extra << r.err;
  }
}

}  // namespace
}  // namespace bmpipe
