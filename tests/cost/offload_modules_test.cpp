// Megatron-Core's activation offload modules (training.offload_modules, CostSettings::
// offload_modules, sim/offload.hpp): the bytes each module moves to the host, worked by hand
// on tiny shapes from what cost_model.cpp's saved_activations counts for each module's
// input (Megatron-LM d98e8a64, transformer_config.py offload_modules: "offload the input of
// ..."). Bytes are bf16 (e = 2) without sequence parallelism, so the GEMM input bytes gi = e
// and Hs = T h.
#include <gtest/gtest.h>

#include <string>

#include "sim/cost/cost_model.hpp"
#include "support/round_device.hpp"
#include "support/tiny_shape.hpp"

namespace bmpipe {
namespace offload_modules_test {

using test::unit_device;

ModelShape tiny(int experts) {
  return test::tiny_shape(experts);
}

/// test::tiny_settings with recompute modules `recompute` and offload modules `offload`.
CostSettings settings(const std::string& offload, const std::string& recompute = "core_attn") {
  CostSettings st = test::tiny_settings();
  std::string unknown;
  st.offload_modules = parse_offload_modules(offload, &unknown);
  EXPECT_EQ(unknown, "") << offload;
  st.recompute_modules = parse_recompute_modules(recompute, &unknown);
  return st;
}

std::int64_t dense(const std::string& offload, Recompute mode = Recompute::none) {
  return decoder_layer_cost(tiny(0), unit_device(), settings(offload)).offload_bytes[mode];
}

std::int64_t moe(const std::string& offload, Recompute mode = Recompute::none,
                 const std::string& recompute = "core_attn") {
  return moe_decoder_layer_cost(tiny(4), unit_device(), settings(offload, recompute))
      .offload_bytes[mode];
}

TEST(OffloadModules, TheListParsesAndPrintsInOneOrder) {
  std::string unknown;
  EXPECT_EQ(parse_offload_modules("attn_proj, core_attn", &unknown),
            offload_bit(OffloadModule::core_attn) | offload_bit(OffloadModule::attn_proj));
  EXPECT_EQ(offload_modules_text(parse_offload_modules("moe_act qkv_linear", nullptr)),
            "qkv_linear,moe_act");
  EXPECT_EQ(parse_offload_modules("none", &unknown), 0);
  EXPECT_EQ(offload_modules_text(0), "none");
  EXPECT_EQ(unknown, "");
  parse_offload_modules("core_attn,fused_group_mlp", &unknown);
  EXPECT_EQ(unknown, "fused_group_mlp");
}

TEST(OffloadModules, AttentionInputsOfADenseLayer) {
  // T 4 tokens. qkv_linear: the projection's input, e T h = 2 x 4 x 8 = 64. core_attn: q, k
  // and v, e T (q_cols + 2 kv_cols) = 2 x 4 x 24 = 192. attn_proj: flash attention's
  // output, out_proj's input, e T q_cols = 2 x 4 x 8 = 64.
  EXPECT_EQ(dense("none"), 0);
  EXPECT_EQ(dense("qkv_linear"), 64);
  EXPECT_EQ(dense("core_attn"), 192);
  EXPECT_EQ(dense("core_attn,attn_proj"), 192 + 64);
  EXPECT_EQ(dense("qkv_linear,core_attn,attn_proj"), 64 + 192 + 64);
  // Selective recompute of the core keeps its inputs as the checkpoint's, outside the
  // core_attn offload context: Megatron-Core enters that context only when the core is not
  // checkpointed (Attention.forward, megatron/core/transformer/attention.py:1552-1606 at
  // NVIDIA/Megatron-LM d98e8a64ddf3), so q, k and v stay and qkv_linear and attn_proj move.
  EXPECT_EQ(dense("qkv_linear,core_attn,attn_proj", Recompute::selective), 64 + 0 + 64);
  // Without core_attn among the recompute modules the core is not checkpointed: all move.
  EXPECT_EQ(
      decoder_layer_cost(tiny(0), unit_device(), settings("qkv_linear,core_attn,attn_proj", "none"))
          .offload_bytes[Recompute::selective],
      64 + 192 + 64);
  // Full recompute keeps the layer input alone: nothing of a module's to move.
  EXPECT_EQ(dense("qkv_linear,core_attn,attn_proj", Recompute::full), 0);
  // A dense layer has no pre-MLP norm of its own and no experts.
  EXPECT_EQ(dense("mlp_norm,expert_fc1,moe_act"), 0);
}

TEST(OffloadModules, ExpertInputsOfAnMoeLayer) {
  // 4 tokens, top-2: 8 expert rows (Tg) of ef 4. mlp_norm: the router norm's input and its
  // fp32 rsqrt, e T h + 4 T = 64 + 16 = 80. expert_fc1: the gathered rows, e Tg h =
  // 2 x 8 x 8 = 128. moe_act: gate and up, 2e Tg ef = 4 x 32 = 128, and the router weight
  // the scaled activation keeps per row, 4 Tg = 32.
  EXPECT_EQ(moe("mlp_norm"), 80);
  EXPECT_EQ(moe("expert_fc1"), 128);
  EXPECT_EQ(moe("moe_act"), 128 + 32);
  EXPECT_EQ(moe("mlp_norm,expert_fc1,moe_act"), 80 + 128 + 160);
  // moe_act's recompute discards the activation's output, not its input: still offloaded.
  EXPECT_EQ(moe("moe_act", Recompute::selective, "moe_act"), 160);
  EXPECT_EQ(moe("mlp_norm,expert_fc1,moe_act", Recompute::full), 0);
}

TEST(OffloadModules, NeverMoreThanTheLayerKeeps) {
  const LayerCost c = moe_decoder_layer_cost(
      tiny(4), unit_device(),
      settings("qkv_linear,core_attn,attn_proj,mlp_norm,expert_fc1,moe_act"));
  for (Recompute r : kAllRecompute) EXPECT_LE(c.offload_bytes[r], c.activation_bytes[r]);
  EXPECT_EQ(c.offload_bytes[Recompute::none], 64 + 192 + 64 + 80 + 128 + 160);
}

}  // namespace offload_modules_test
}  // namespace bmpipe
