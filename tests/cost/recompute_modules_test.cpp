// Megatron-Core's recompute modules (training.recompute_modules, CostSettings::
// recompute_modules): what the selective mode frees and re-runs for each module, worked by
// hand on tiny shapes (modules_freed's closed forms in sim/cost/layer_parts.hpp, from
// Megatron-LM d98e8a64: transformer_layer.py, moe/experts.py, moe/moe_layer.py,
// multi_latent_attention.py, tensor_parallel/random.py). Bytes are bf16 (e = 2) without
// sequence parallelism, so gi = e and Hs = T h.
#include <gtest/gtest.h>

#include <string>

#include "sim/cost/cost_model.hpp"
#include "support/round_device.hpp"
#include "support/sub_op.hpp"
#include "support/tiny_shape.hpp"

namespace bmpipe {
namespace recompute_modules_test {

using test::op;

using test::unit_device;

ModelShape tiny(int experts) {
  return test::tiny_shape(experts);
}

/// test::tiny_settings with the modules `modules`.
CostSettings settings(const std::string& modules, int ep = 1) {
  CostSettings st = test::tiny_settings(ep);
  std::string unknown;
  st.recompute_modules = parse_recompute_modules(modules, &unknown);
  EXPECT_EQ(unknown, "") << modules;
  return st;
}

std::int64_t freed(const LayerCost& c) {
  return c.activation_bytes[Recompute::none] - c.activation_bytes[Recompute::selective];
}

TEST(RecomputeModules, TheListParsesAndPrintsInOneOrder) {
  std::string unknown;
  EXPECT_EQ(parse_recompute_modules("moe_act, layernorm", &unknown),
            module_bit(RecomputeModule::layernorm) | module_bit(RecomputeModule::moe_act));
  EXPECT_EQ(recompute_modules_text(parse_recompute_modules("moe_act layernorm", nullptr)),
            "layernorm,moe_act");
  EXPECT_EQ(parse_recompute_modules("none", &unknown), 0);
  EXPECT_EQ(recompute_modules_text(0), "none");
  EXPECT_EQ(unknown, "");
  parse_recompute_modules("core_attn,attn,mlp", &unknown);
  EXPECT_EQ(unknown, "attn");
  EXPECT_EQ(kDefaultRecomputeModules, module_bit(RecomputeModule::core_attn));
}

TEST(RecomputeModules, CoreAttnIsTheDefaultAndNoneReRunsNothing) {
  const ModelShape m = tiny(0);
  // Flash attention's fp32 logsumexp: 4 bytes x micro-batch 1 x 2 heads x 4 tokens = 32.
  const LayerCost core = decoder_layer_cost(m, unit_device(), settings("core_attn"));
  EXPECT_EQ(freed(core), 32);
  EXPECT_EQ(core.recompute_extra_s[Recompute::selective], op(core, "attention").forward_s);
  // Causal core: 2 x 2 x T s q_cols / 2 = 2 x 2 x 4 x 4 x 8 / 2 = 256 FLOPs.
  EXPECT_DOUBLE_EQ(core.recompute_flops[Recompute::selective], 256);
  const LayerCost none = decoder_layer_cost(m, unit_device(), settings("none"));
  EXPECT_EQ(freed(none), 0);
  EXPECT_EQ(none.recompute_extra_s[Recompute::selective], 0);
  EXPECT_EQ(none.recompute_flops[Recompute::selective], 0);
  // The modes' other figures do not depend on the modules.
  EXPECT_EQ(none.activation_bytes[Recompute::none], core.activation_bytes[Recompute::none]);
  EXPECT_EQ(none.recompute_extra_s[Recompute::full], core.recompute_extra_s[Recompute::full]);
}

TEST(RecomputeModules, MlpFreesTheDenseMlpsTensorsAndReRunsIt) {
  // T 4, h 8, f 16: F = T f = 64 elements. The MLP keeps its input (the fused norm's) and
  // frees the norm's fp32 rstd (4 x 4 tokens), fc1's input (e Hs = 64) and SwiGLU's two
  // inputs and its product ((2e + e) F = 384): 464 bytes.
  const LayerCost c = decoder_layer_cost(tiny(0), unit_device(), settings("mlp"));
  EXPECT_EQ(freed(c), 16 + 64 + 384);
  // gate_up 2 x 4 x 8 x 32 = 2048 FLOPs, down 2 x 4 x 16 x 8 = 1024.
  EXPECT_DOUBLE_EQ(c.recompute_flops[Recompute::selective], 3072);
  EXPECT_DOUBLE_EQ(c.recompute_extra_s[Recompute::selective],
                   op(c, "post_norm").forward_s + op(c, "gate_up_proj").forward_s +
                       op(c, "swiglu").forward_s + op(c, "down_proj").forward_s);
  // An MoE layer has no dense MLP: mlp frees and re-runs nothing there.
  const LayerCost moe = moe_decoder_layer_cost(tiny(4), unit_device(), settings("mlp"));
  EXPECT_EQ(freed(moe), 0);
  EXPECT_EQ(moe.recompute_extra_s[Recompute::selective], 0);
}

TEST(RecomputeModules, LayernormAndMoeActAsGptOssRecipesRunThem) {
  // Megatron-Bridge's gpt-oss recipes recompute ["layernorm", "moe_act"]. T 4 tokens, top-2:
  // 8 expert rows (Tg) of ef 4. layernorm frees the pre-MLP norm's output, the router's
  // input: e T h = 64; moe_act frees the activation's output, experts_down's input:
  // e Tg ef = 2 x 8 x 4 = 64. The attention norm is fused into linear_qkv: nothing there.
  const LayerCost c = moe_decoder_layer_cost(tiny(4), unit_device(), settings("layernorm,moe_act"));
  EXPECT_EQ(freed(c), 64 + 64);
  // The fused SwiGLU over 8 x 4 reads gate and up and writes the product: 3 x 2 x 32 = 192
  // bytes at 1e12 bytes/s.
  EXPECT_NEAR(op(c, "experts_swiglu").forward_s, 192e-12, 1e-20);
  EXPECT_DOUBLE_EQ(c.recompute_extra_s[Recompute::selective],
                   op(c, "post_norm").forward_s + op(c, "experts_swiglu").forward_s);
  EXPECT_EQ(c.recompute_flops[Recompute::selective], 0);
}

TEST(RecomputeModules, MoeFreesTheBlockAndReRunsItsExchanges) {
  // Everything the MoE block keeps but its input: fp32 router probabilities 4 T E = 64,
  // top-k indices and weights 12 x 8 = 96, the gathered rows e Tg h = 128, SwiGLU's inputs
  // and product (2e + e) Tg ef = 192, and the fp32 router weights the scaled activation
  // keeps, 4 Tg = 32 (Megatron-Core keeps no expert output): 512.
  const LayerCost c = moe_decoder_layer_cost(tiny(4), unit_device(), settings("moe", 2));
  EXPECT_EQ(freed(c), 64 + 96 + 128 + 192 + 32);
  // router 2 x 4 x 8 x 4 = 256, gate_up 2 x 8 x 8 x 8 = 1024, down 2 x 8 x 4 x 8 = 512.
  EXPECT_DOUBLE_EQ(c.recompute_flops[Recompute::selective], 1792);
  // The whole block runs again, its all-to-alls included (a normal checkpoint).
  EXPECT_GT(op(c, "a2a-dispatch").recompute_s[Recompute::selective], 0);
  EXPECT_EQ(op(c, "a2a-dispatch").recompute_s[Recompute::selective],
            op(c, "a2a-dispatch").forward_s);
  EXPECT_EQ(op(c, "post_norm").recompute_s[Recompute::selective], 0);
  // moe_act beside moe frees nothing more.
  const LayerCost both = moe_decoder_layer_cost(tiny(4), unit_device(), settings("moe,moe_act", 2));
  EXPECT_EQ(freed(both), freed(c));
}

TEST(RecomputeModules, SharedExpertsFreeTheSharedMlp) {
  ModelShape m = tiny(4);
  m.moe.shared_ffn = 8;
  check_shape(m);
  // The shared expert (sf 8 over T 4 tokens): SwiGLU's inputs and product (2e + e) T sf = 192.
  const LayerCost c = moe_decoder_layer_cost(m, unit_device(), settings("shared_experts"));
  EXPECT_EQ(freed(c), 192);
  EXPECT_DOUBLE_EQ(c.recompute_flops[Recompute::selective],
                   2.0 * 4 * 8 * 16 + 2.0 * 4 * 8 * 8);  // shared gate_up and down
}

TEST(RecomputeModules, MlaUpProjAndTheSeparateInputNorm) {
  ModelShape m = tiny(0);
  m.mla = {.q_lora_rank = 4,
           .kv_lora_rank = 4,
           .qk_nope_head_dim = 2,
           .qk_rope_head_dim = 2,
           .v_head_dim = 2};
  check_shape(m);
  // T 4, 2 heads, q/k heads of 4 (nope 2 + rope 2), v heads of 2, latents 4 + 4, rope 2:
  // the up projections' inputs e T (4 + 4) = 64, the latent norms' rstd 4 x 4 x 2 = 32,
  // q, k, v e T heads (2 x 4 + 2) = 160, less k_pe that the checkpoint keeps (e T 2 = 16).
  const LayerCost up = decoder_layer_cost(m, unit_device(), settings("mla_up_proj"));
  EXPECT_EQ(freed(up), 64 + 32 + 160 - 16);
  // q_b_proj 2 x 4 x 4 x 8 = 256 and kv_b_proj 2 x 4 x 4 x (2 x (2 + 2)) = 256.
  EXPECT_DOUBLE_EQ(up.recompute_flops[Recompute::selective], 512);
  EXPECT_GT(op(up, "rope").recompute_s[Recompute::selective], 0);
  EXPECT_EQ(op(up, "kv_a_proj_with_mqa").recompute_s[Recompute::selective], 0);
  // MLA's input norm is a module of its own: layernorm frees its output, the down
  // projections' input e T h = 64, and re-runs it.
  const LayerCost norm = decoder_layer_cost(m, unit_device(), settings("layernorm"));
  EXPECT_EQ(freed(norm), 64);
  EXPECT_DOUBLE_EQ(norm.recompute_extra_s[Recompute::selective], op(norm, "input_norm").forward_s);
  // Without MLA (linear_qkv's fused norm) layernorm does nothing in a dense layer.
  EXPECT_EQ(freed(decoder_layer_cost(tiny(0), unit_device(), settings("layernorm"))), 0);
}

}  // namespace recompute_modules_test
}  // namespace bmpipe
