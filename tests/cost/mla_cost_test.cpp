// Multi-latent attention in the cost model's decoder layers: sub-ops worked out by hand on
// a tiny shape (a device of 1e12 FLOP/s and 1e12 bytes/s at full efficiency, free kernel
// launches: a sub-op takes max(FLOPs, bytes) picoseconds), its activations, tp's split of
// the heads, and DeepSeek-V3's parameter counts against ModelShape's (the model card's).
#include <gtest/gtest.h>

#include <string>

#include "experiment/hf_config.hpp"
#include "sim/cost/cost_model.hpp"
#include "support/round_device.hpp"

namespace bmpipe {
namespace mla_cost_test {

constexpr double kPs = 1e-12;

using test::unit_device;

/// h 8, 2 heads; q_lora_rank 4, kv_lora_rank 4, qk_nope 2, qk_rope 2, v 2; dense ffn 16.
ModelShape tiny_mla() {
  ModelShape m;
  m.name = "tiny-mla";
  m.num_layers = 1;
  m.hidden_size = 8;
  m.num_attention_heads = 2;
  m.num_kv_heads = 2;
  m.ffn_hidden_size = 16;
  m.vocab_size = 32;
  m.mla = {.q_lora_rank = 4,
           .kv_lora_rank = 4,
           .qk_nope_head_dim = 2,
           .qk_rope_head_dim = 2,
           .v_head_dim = 2};
  check_shape(m);
  return m;
}

CostSettings settings(int tp = 1) {
  CostSettings st;
  st.seq_length = 4;
  st.micro_batch_size = 1;
  st.tp = tp;
  st.grad_accumulation = GradAccumulation::overwrite;
  return st;
}

const SubOpCost& op(const LayerCost& c, const std::string& name) {
  for (const auto& o : c.ops)
    if (o.name == name) return o;
  throw std::runtime_error("no sub-op " + name);
}

bool has(const LayerCost& c, const std::string& name) {
  for (const auto& o : c.ops)
    if (o.name == name) return true;
  return false;
}

TEST(MlaCost, ProjectionsAndCoreByHand) {
  const LayerCost c = decoder_layer_cost(tiny_mla(), unit_device(), settings());
  // T = 4 tokens, bf16. q_a_proj 8 -> 4: 2 x 4 x 8 x 4 = 256 FLOPs (bytes 2 x (32 + 32 +
  // 16) = 160).
  EXPECT_NEAR(op(c, "q_a_proj").forward_s, 256 * kPs, 1e-20);
  // q_b_proj 4 -> 2 heads x 4: 2 x 4 x 4 x 8 = 256 FLOPs (bytes 2 x (16 + 32 + 32) = 160).
  EXPECT_NEAR(op(c, "q_b_proj").forward_s, 256 * kPs, 1e-20);
  // kv_a_proj_with_mqa 8 -> 4 + 2: 2 x 4 x 8 x 6 = 384 FLOPs (bytes 2 x (32 + 48 + 24)).
  EXPECT_NEAR(op(c, "kv_a_proj_with_mqa").forward_s, 384 * kPs, 1e-20);
  // kv_b_proj 4 -> 2 heads x (2 + 2): 256 FLOPs.
  EXPECT_NEAR(op(c, "kv_b_proj").forward_s, 256 * kPs, 1e-20);
  // Causal flash core: 2 x 4 x 4 x 2 heads x (qk 4 + v 2) x 0.5 = 192 FLOPs; q, k, v,
  // output 2 x 4 x 2 x (2 x 4 + 2 x 2) = 192 bytes. Backward 2.5 x 192 = 480 FLOPs.
  EXPECT_NEAR(op(c, "attention").forward_s, 192 * kPs, 1e-20);
  EXPECT_NEAR(op(c, "attention").backward_input_s, 480 * kPs, 1e-20);
  // o_proj: heads x v = 4 -> 8: 2 x 4 x 4 x 8 = 256 FLOPs.
  EXPECT_NEAR(op(c, "out_proj").forward_s, 256 * kPs, 1e-20);
  // RoPE over q_pe (2 heads x 2) and the shared k_pe (2): 4 x 6 = 24 elements, 10 x 2
  // bytes each forward = 480.
  EXPECT_NEAR(op(c, "rope").forward_s, 480 * kPs, 1e-20);
  // The latents' RMSNorms over 4 tokens x 4 columns: 18 x 2 bytes x 16 = 576.
  EXPECT_NEAR(op(c, "q_a_layernorm").forward_s, 576 * kPs, 1e-20);
  EXPECT_NEAR(op(c, "kv_a_layernorm").forward_s, 576 * kPs, 1e-20);
  EXPECT_FALSE(has(c, "qkv_proj"));
  // Model FLOPs: q_a 256, kv_a 384, q_b 256, kv_b 256, core 192, o 256, MLP gate/up
  // 2 x 4 x 8 x 32 = 2048 and down 1024.
  EXPECT_DOUBLE_EQ(c.forward_flops, 256 + 384 + 256 + 256 + 192 + 256 + 2048 + 1024);
  EXPECT_DOUBLE_EQ(c.recompute_flops[Recompute::selective], 192);
}

TEST(MlaCost, ActivationsByHand) {
  const LayerCost c = decoder_layer_cost(tiny_mla(), unit_device(), settings());
  // The llama layer's: input 64, two RMSNorms 2 x (6 x 32 + 16) = 416, the inputs of the
  // down projections and gate/up 128, SwiGLU 4 x 2 x 64 = 512: 1120. MLA's: the latents'
  // norms 6 x 4 x 8 + 2 x 16 = 224, the up projections' inputs 2 x 4 x 8 = 64, q and k
  // 2 x 4 x 2 x 4 each and v 2 x 4 x 2 x 2 = 160, the core output 32: 480. Flash's fp32
  // logsumexp 4 x 2 heads x 4 = 32 (what selective recompute drops).
  EXPECT_EQ(c.activation_bytes[Recompute::none], 1120 + 480 + 32);
  EXPECT_EQ(c.activation_bytes[Recompute::selective], 1120 + 480);
  EXPECT_EQ(c.activation_bytes[Recompute::full], 64);
}

TEST(MlaCost, TpSplitsTheHeadsNotTheDownProjections) {
  const LayerCost one = decoder_layer_cost(tiny_mla(), unit_device(), settings(1));
  const LayerCost two = decoder_layer_cost(tiny_mla(), unit_device(), settings(2));
  EXPECT_EQ(op(two, "q_a_proj").forward_s, op(one, "q_a_proj").forward_s);
  EXPECT_EQ(op(two, "kv_a_proj_with_mqa").forward_s, op(one, "kv_a_proj_with_mqa").forward_s);
  // One head of 4 columns: 2 x 4 x 4 x 4 = 128 FLOPs (bytes 2 x (16 + 16 + 16) = 96).
  EXPECT_NEAR(op(two, "q_b_proj").forward_s, 128 * kPs, 1e-20);
  // Parameters on one device of tp 2: q_a 32 + 4, q_b 4 x 4 = 16, kv_a 48 + 4, kv_b
  // 4 x 4 = 16, o 2 x 8 = 16; MLP 3 x 8 x 8 = 192; two norms 16.
  EXPECT_EQ(two.param_count, 36 + 16 + 52 + 16 + 16 + 192 + 16);
  // tp 1 holds the layer as ModelShape counts it.
  EXPECT_EQ(one.param_count, tiny_mla().decoder_layer_params(0, false));
}

TEST(MlaCost, DeepSeekV3LayersSumToTheModelsParameters) {
  const ModelShape m =
      read_hf_config(std::string(BMPIPE_SOURCE_DIR) + "/configs/presets/hf/deepseek-v3.json");
  ASSERT_TRUE(m.is_mla());
  CostSettings st;
  st.seq_length = 4096;
  const HardwareSpec hw = unit_device();
  const LayerCost dense = decoder_layer_cost(m, hw, st);
  const LayerCost moe = moe_decoder_layer_cost(m, hw, st);
  EXPECT_EQ(dense.param_count, m.decoder_layer_params(0, false));
  EXPECT_EQ(moe.param_count, m.decoder_layer_params(3, false));
  EXPECT_EQ(moe.active_param_count, m.decoder_layer_params(3, true));
  // 3 dense layers, 58 MoE ones, the embedding and the (untied) head: the 671B of the
  // model card without the MTP module (ModelShape::total_params).
  long long sum = embedding_cost(m, hw, st).param_count + head_cost(m, hw, st, true).param_count;
  for (int i = 0; i < m.num_layers; ++i)
    sum += m.is_moe_layer(i) ? moe.param_count : dense.param_count;
  EXPECT_EQ(m.num_layers, 61);
  EXPECT_EQ(sum, m.total_params(false));
}

}  // namespace mla_cost_test
}  // namespace bmpipe
