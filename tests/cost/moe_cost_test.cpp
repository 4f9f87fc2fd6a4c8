// The mixture-of-experts decoder layer of the cost model (moe_decoder_layer_cost), pinned
// sub-op by sub-op on a tiny shape whose times are worked out by hand: a device of 1e12
// FLOP/s and 1e12 bytes/s at full efficiency and free kernel launches, so a sub-op takes
// max(FLOPs, bytes) picoseconds.
#include <gtest/gtest.h>

#include <string>

#include "experiment/hf_config.hpp"
#include "sim/cost/cost_model.hpp"
#include "support/round_device.hpp"
#include "support/sub_op.hpp"

namespace bmpipe {
namespace moe_cost_test {

constexpr double kPs = 1e-12;

using test::unit_device;

/// h 8, 2 heads of 4, 4 experts of ffn 4, top-2; 4 tokens (seq 4, micro-batch 1).
ModelShape tiny_moe() {
  ModelShape m;
  m.name = "tiny-moe";
  m.num_layers = 1;
  m.hidden_size = 8;
  m.num_attention_heads = 2;
  m.num_kv_heads = 2;
  m.ffn_hidden_size = 16;
  m.vocab_size = 32;
  m.moe.num_experts = 4;
  m.moe.top_k = 2;
  m.moe.expert_ffn = 4;
  check_shape(m);
  return m;
}

CostSettings settings(int ep) {
  CostSettings st;
  st.seq_length = 4;
  st.micro_batch_size = 1;
  st.ep = ep;
  st.grad_accumulation = GradAccumulation::overwrite;
  return st;
}

using test::op;

TEST(MoeCost, RouterPermuteExpertsAndUnpermuteByHand) {
  ModelShape m = tiny_moe();
  m.moe.load_imbalance = 1.5;
  const LayerCost c = moe_decoder_layer_cost(m, unit_device(), settings(2));
  // T = 4 tokens, h = 8, E = 4, top_k = 2: T x top_k = 8 expert rows, 12 on the busiest
  // device at load_imbalance 1.5; ep 2 leaves 2 experts per device; bf16 (2 bytes).
  // router: 2 x 4 x 8 x 4 = 256 FLOPs over 2 x (32 + 32 + 16) = 160 bytes.
  EXPECT_NEAR(op(c, "router").forward_s, 256 * kPs, 1e-20);
  // top-k: fp32 logits read and written (8 x T x E = 128) + indices and weights (12 x 8).
  EXPECT_NEAR(op(c, "router_topk").forward_s, 224 * kPs, 1e-20);
  // permute: read T x h, write 8 rows of h: 2 x (32 + 64) = 192 bytes; same backward.
  EXPECT_NEAR(op(c, "permute").forward_s, 192 * kPs, 1e-20);
  EXPECT_NEAR(op(c, "permute").backward_input_s, 192 * kPs, 1e-20);
  // gate_up: 12 rows x h 8 x 2 ef = 8: 2 x 12 x 8 x 8 = 1536 FLOPs (bytes: 2 x (96 + 2 x 64
  // + 96) = 640); the same in I and W (overwrite: no accumulation).
  EXPECT_NEAR(op(c, "experts_gate_up").forward_s, 1536 * kPs, 1e-20);
  EXPECT_NEAR(op(c, "experts_gate_up").backward_input_s, 1536 * kPs, 1e-20);
  EXPECT_NEAR(op(c, "experts_gate_up").backward_weight_s, 1536 * kPs, 1e-20);
  // SwiGLU over 12 x 4: 5 x 2 x 48 = 480 bytes forward, 9 x 2 x 48 = 864 backward.
  EXPECT_NEAR(op(c, "experts_swiglu").forward_s, 480 * kPs, 1e-20);
  EXPECT_NEAR(op(c, "experts_swiglu").backward_input_s, 864 * kPs, 1e-20);
  // down: 2 x 12 x 4 x 8 = 768 FLOPs (bytes 2 x (48 + 64 + 96) = 416).
  EXPECT_NEAR(op(c, "experts_down").forward_s, 768 * kPs, 1e-20);
  // unpermute: 2 x (64 + 32) + 4 x 8 = 224 bytes; backward 2 x (32 + 128) + 32 = 352.
  EXPECT_NEAR(op(c, "unpermute").forward_s, 224 * kPs, 1e-20);
  EXPECT_NEAR(op(c, "unpermute").backward_input_s, 352 * kPs, 1e-20);
  // No dense MLP, no shared expert.
  for (const auto& o : c.ops) {
    EXPECT_NE(o.name, "gate_up_proj");
    EXPECT_NE(o.name, "shared_gate_up");
  }
}

TEST(MoeCost, LoadImbalanceScalesTheExpertsNotTheModelFlops) {
  ModelShape m = tiny_moe();
  const LayerCost even = moe_decoder_layer_cost(m, unit_device(), settings(2));
  m.moe.load_imbalance = 1.5;
  const LayerCost skewed = moe_decoder_layer_cost(m, unit_device(), settings(2));
  // Balanced gate_up: 2 x 8 x 8 x 8 = 1024 FLOPs over 2 x (64 + 128 + 64) = 512 bytes.
  EXPECT_NEAR(op(even, "experts_gate_up").forward_s, 1024 * kPs, 1e-20);
  EXPECT_NEAR(op(skewed, "experts_gate_up").forward_s / op(even, "experts_gate_up").forward_s, 1.5,
              1e-12);
  // Model FLOPs: qkv 2 x 4 x 8 x 24 = 1536, causal attention 2 x 2 x 4 x 4 x 8 / 2 = 256,
  // out 512, router 256, experts (balanced) 2 x 8 x 8 x 8 + 2 x 8 x 4 x 8 = 1536.
  EXPECT_DOUBLE_EQ(even.forward_flops, 4096);
  EXPECT_DOUBLE_EQ(skewed.forward_flops, 4096);
}

TEST(MoeCost, ActivationsAndParametersByHand) {
  ModelShape m = tiny_moe();
  m.moe.load_imbalance = 1.5;
  const LayerCost c = moe_decoder_layer_cost(m, unit_device(), settings(2));
  // Layer input 2 x 32 = 64; two RMSNorms 2 x (6 x 32 + 4 x 4) = 416; qkv and router
  // inputs 128; fp32 probabilities 4 x 4 x 4 + indices and weights 12 x 8 = 160; expert
  // input rows 2 x 12 x 8 = 192; SwiGLU 4 x 2 x 12 x 4 = 384; expert outputs 192; q, k, v
  // 2 x 4 x 24 = 192; attention output 64; flash logsumexp 4 x 2 heads x 4 = 32.
  EXPECT_EQ(c.activation_bytes[Recompute::none], 1824);
  EXPECT_EQ(c.activation_bytes[Recompute::selective], 1792);
  EXPECT_EQ(c.activation_bytes[Recompute::full], 64);
  // Attention 2 x 64 + 2 x 64 + two norms 16 = 272; router 32; 2 local experts of
  // 3 x 8 x 4 = 96. Active: the top-2 experts.
  EXPECT_EQ(c.expert_param_count, 192);
  EXPECT_EQ(c.param_count, 272 + 32 + 192);
  EXPECT_EQ(c.active_param_count, 272 + 32 + 2 * 96);
  // ep 1 holds all four experts: the layer's whole count, as ModelShape counts it.
  const LayerCost all = moe_decoder_layer_cost(m, unit_device(), settings(1));
  EXPECT_EQ(all.param_count, m.decoder_layer_params(0, false));
  EXPECT_EQ(all.active_param_count, m.decoder_layer_params(0, true));
}

TEST(MoeCost, SharedExpertIsADenseSwiGluBesideTheExperts) {
  ModelShape m = tiny_moe();
  m.moe.shared_ffn = 4;
  const LayerCost c = moe_decoder_layer_cost(m, unit_device(), settings(1));
  // shared gate_up: 2 x 4 x 8 x 8 = 512 FLOPs (bytes 2 x (32 + 64 + 32) = 256); down
  // 2 x 4 x 4 x 8 = 256 FLOPs (bytes 2 x (16 + 32 + 32) = 160).
  EXPECT_NEAR(op(c, "shared_gate_up").forward_s, 512 * kPs, 1e-20);
  EXPECT_NEAR(op(c, "shared_down").forward_s, 256 * kPs, 1e-20);
  EXPECT_EQ(c.param_count, m.decoder_layer_params(0, false));
  EXPECT_EQ(c.active_param_count, m.decoder_layer_params(0, true));
  // The shared expert's SwiGLU keeps 4 x 2 x 4 x 4 = 128 bytes more.
  const LayerCost without = moe_decoder_layer_cost(tiny_moe(), unit_device(), settings(1));
  EXPECT_EQ(c.activation_bytes[Recompute::none] - without.activation_bytes[Recompute::none], 128);
}

// At tp 2 with sequence parallelism the shared expert reads the gathered sequence (all 4
// tokens) and holds half its columns (shared ffn 8 / 2 = 4): gate_up 2 x 4 x 8 x 8 = 512
// FLOPs, down 2 x 4 x 4 x 8 = 256, the time halved from tp 1's 1024 and 512 (it was cut by
// the tokens too, to a quarter, before). Its output is reduce-scattered back to the
// sequence's halves: a collective that tp 1 does not have. Its SwiGLU keeps all 4 tokens'
// rows of 4 columns: 4 x 2 x 4 x 4 = 128 bytes, half of tp 1's 256.
TEST(MoeCost, TheSharedExpertSeesTheWholeSequenceUnderSequenceParallelism) {
  ModelShape m = tiny_moe();
  m.moe.shared_ffn = 8;
  const LayerCost one = moe_decoder_layer_cost(m, unit_device(), settings(1));
  CostSettings st = settings(1);
  st.tp = 2;
  st.sequence_parallel = true;
  const LayerCost two = moe_decoder_layer_cost(m, unit_device(), st);
  EXPECT_NEAR(op(one, "shared_gate_up").forward_s, 1024 * kPs, 1e-20);
  EXPECT_NEAR(op(two, "shared_gate_up").forward_s, 512 * kPs, 1e-20);
  EXPECT_NEAR(op(one, "shared_down").forward_s, 512 * kPs, 1e-20);
  EXPECT_NEAR(op(two, "shared_down").forward_s, 256 * kPs, 1e-20);
  bool scatters = false;
  for (const SubOpCost& o : two.ops) scatters = scatters || o.name == "shared_reduce_scatter";
  EXPECT_TRUE(scatters);
  for (const SubOpCost& o : one.ops) EXPECT_NE(o.name, "shared_reduce_scatter");
  const LayerCost plain = moe_decoder_layer_cost(tiny_moe(), unit_device(), st);
  EXPECT_EQ(two.activation_bytes[Recompute::none] - plain.activation_bytes[Recompute::none], 128);
}

TEST(MoeCost, MixtralLayerMatchesItsParameterCount) {
  const ModelShape m =
      read_hf_config(std::string(BMPIPE_TEST_DATA_DIR) + "/hf/mixtral_8x7b_config.json");
  CostSettings st;
  st.seq_length = 4096;
  st.ep = 8;
  HardwareSpec hw = unit_device();
  const LayerCost c = moe_decoder_layer_cost(m, hw, st);
  // ep 8: one expert of 3 x 4096 x 14336 per device.
  EXPECT_EQ(c.expert_param_count, 3LL * 4096 * 14336);
  st.ep = 1;
  EXPECT_EQ(moe_decoder_layer_cost(m, hw, st).param_count, m.decoder_layer_params(0, false));
}

// Megatron-Core (kernels: fused) applies the router's weights inside the experts'
// activation (weighted_bias_swiglu_impl, NVIDIA/Megatron-LM d98e8a64
// megatron/core/transformer/moe/experts.py:966), which keeps its input and the weights
// (fused_bias_swiglu.py:270), and unpermutes without them (token_dispatcher.py:891): no
// tensor keeps the experts' output rows. Worked on tiny_moe at ep 2, load_imbalance 1.5
// (T 4 tokens, h 8, 12 rows on the busiest device, ef 4, bf16):
//   layer input 2 x 32 = 64, plus the second fused RMSNorm's input 64 and their fp32
//   rsqrt 2 x 4 x 4 = 32                                                        160
//   qkv and router inputs 2 x 2 x 32                                             128
//   fp32 probabilities 4 x 4 x 4 = 64, indices and weights 12 x 8 = 96            160
//   expert input rows 2 x 12 x 8                                                 192
//   fused SwiGLU's input (gate and up) 2 x 2 x 12 x 4 = 192; experts_down's input
//   2 x 12 x 4 = 96                                                              288
//   the weights the scaled activation keeps, fp32: 4 x 12                         48
//   q, k, v 2 x 4 x 24 = 192; attention output 2 x 4 x 8 = 64                     256
//   flash logsumexp 4 x 2 heads x 4                                               32
// = 1264 (before: 1408, the 12 expert output rows, 2 x 12 x 8 = 192, charged in place of
// the 48 bytes of weights).
TEST(MoeCost, MegatronCoreKeepsTheWeightsNotTheExpertOutputs) {
  ModelShape m = tiny_moe();
  m.moe.load_imbalance = 1.5;
  CostSettings st = settings(2);
  st.kernels = Kernels::fused;
  const LayerCost c = moe_decoder_layer_cost(m, unit_device(), st);
  EXPECT_EQ(c.activation_bytes[Recompute::none], 1264);
  EXPECT_EQ(c.activation_bytes[Recompute::selective], 1264 - 32);
  // HF's eager block multiplies the outputs after the down projection and keeps them
  // (ActivationsAndParametersByHand's 1824 includes those 192 bytes).
  const LayerCost eager = moe_decoder_layer_cost(m, unit_device(), settings(2));
  EXPECT_EQ(eager.activation_bytes[Recompute::none], 1824);
  // Its unpermute is the sum alone: read 8 rows of h, write T x h, 2 x (64 + 32) = 192
  // bytes, and backward the gather of the gradient's rows, 192 again (HF's: 224 and 352,
  // RouterPermuteExpertsAndUnpermuteByHand).
  EXPECT_NEAR(op(c, "unpermute").forward_s, 192 * kPs, 1e-20);
  EXPECT_NEAR(op(c, "unpermute").backward_input_s, 192 * kPs, 1e-20);
}

// On DeepSeek-V3 itself (h 7168, expert ffn 2048, top 8) a routed row costs, under
// Megatron-Core, its input e h, the fused SwiGLU's input 2 e ef, experts_down's input e ef
// and its fp32 weight: 2 x 7168 + 6 x 2048 + 4 = 26628 bytes. Doubling the load on the
// busiest device (load_imbalance 1 -> 2) adds T x top_k = 4096 x 8 = 32768 rows:
// 32768 x 26628 = 872546304 bytes. (Charging the output rows too, 2 x 7168 more a row,
// would add 1342177280.)
TEST(MoeCost, ARoutedRowOfDeepSeekV3CostsItsInputsAndItsWeight) {
  ModelShape m = read_hf_config(std::string(BMPIPE_TEST_DATA_DIR) + "/hf/deepseek_v3_config.json");
  CostSettings st;
  st.seq_length = 4096;
  st.micro_batch_size = 1;
  st.ep = 64;
  st.kernels = Kernels::fused;
  m.moe.load_imbalance = 1;
  const LayerCost one = moe_decoder_layer_cost(m, unit_device(), st);
  m.moe.load_imbalance = 2;
  const LayerCost two = moe_decoder_layer_cost(m, unit_device(), st);
  EXPECT_EQ(two.activation_bytes[Recompute::none] - one.activation_bytes[Recompute::none],
            872546304LL);
}

}  // namespace moe_cost_test
}  // namespace bmpipe
