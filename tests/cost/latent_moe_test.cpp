// The latent mixture of experts (MoeShape::latent_size; Nemotron 3 Super's LatentMoE, issue
// 40), as Megatron-Core's MoELayer runs it (NVIDIA/Megatron-LM d98e8a64
// megatron/core/transformer/moe/moe_layer.py, experts.py, token_dispatcher.py): its sub-ops,
// FLOPs, parameters and saved bytes on a tiny shape worked out by hand, and every bad input
// refused with exit 2 at FILE:LINE:key. The expected values are worked out in the comments,
// never taken from the code under test.
#include <gtest/gtest.h>

#include <string>

#include "sim/cost/cost_model.hpp"
#include "support/round_device.hpp"
#include "support/sub_op.hpp"
#include "support/support.hpp"
#include "support/tiny_shape.hpp"

namespace bmpipe::latent_moe_test {
namespace {

constexpr double kPs = 1e-12;

using test::op;
using test::unit_device;

/// test::tiny_shape with 4 experts of ffn 4, top-2 (SwiGLU experts: in_factor 2), and a
/// latent of `latent` columns (0: none).
ModelShape tiny(int latent) {
  return test::tiny_shape(4, latent);
}

/// test::tiny_settings: 4 tokens, fused kernels, bf16, overwrite, ep as given.
CostSettings settings(int ep) {
  return test::tiny_settings(ep);
}

// On the unit device a sub-op takes max(FLOPs, bytes) picoseconds. T = 4 tokens, h = 8,
// L = 4, E = 4, top_k = 2: Tk = 8 routed rows, Tg = 12 on the busiest device at
// load_imbalance 1.5; ep 2 holds 2 experts a device; e = 2 bytes.
TEST(LatentMoe, TheProjectionsAndTheLatentWidthByHand) {
  ModelShape m = tiny(4);
  m.moe.load_imbalance = 1.5;
  const LayerCost c = moe_decoder_layer_cost(m, unit_device(), settings(2));
  // fc1_latent_proj, after the router: [T x h] x [h x L], 2 x 4 x 8 x 4 = 256 FLOPs over
  // 2 x (32 + 32 + 16) = 160 bytes; its input-grad and weight-grad GEMMs the same.
  EXPECT_NEAR(op(c, "fc1_latent_proj").forward_s, 256 * kPs, 1e-20);
  EXPECT_NEAR(op(c, "fc1_latent_proj").backward_input_s, 256 * kPs, 1e-20);
  EXPECT_NEAR(op(c, "fc1_latent_proj").backward_weight_s, 256 * kPs, 1e-20);
  // permute moves latent rows: read T x L, write Tk x L, 2 x (16 + 32) = 96 bytes.
  EXPECT_NEAR(op(c, "permute").forward_s, 96 * kPs, 1e-20);
  // The experts run L wide: gate_up [12 x 4] x [4 x 8], 2 x 12 x 4 x 8 = 768 FLOPs (bytes
  // 2 x (48 + 2 experts x 32 + 96) = 416); down [12 x 4] x [4 x 4], 384 FLOPs (bytes
  // 2 x (48 + 2 x 16 + 48) = 256).
  EXPECT_NEAR(op(c, "experts_gate_up").forward_s, 768 * kPs, 1e-20);
  EXPECT_NEAR(op(c, "experts_down").forward_s, 384 * kPs, 1e-20);
  // unpermute sums latent rows: 2 x (32 + 16) = 96 bytes.
  EXPECT_NEAR(op(c, "unpermute").forward_s, 96 * kPs, 1e-20);
  // fc2_latent_proj: [T x L] x [L x h], 2 x 4 x 4 x 8 = 256 FLOPs over 160 bytes.
  EXPECT_NEAR(op(c, "fc2_latent_proj").forward_s, 256 * kPs, 1e-20);
  // In order: router, then fc1_latent_proj before the permute; fc2_latent_proj after the
  // unpermute.
  std::vector<std::string> order;
  for (const SubOpCost& o : c.ops)
    if (o.name == "router" || o.name == "fc1_latent_proj" || o.name == "permute" ||
        o.name == "unpermute" || o.name == "fc2_latent_proj")
      order.push_back(o.name);
  EXPECT_EQ(order, (std::vector<std::string>{"router", "fc1_latent_proj", "permute", "unpermute",
                                             "fc2_latent_proj"}));
  // Both projections belong to the moe recompute module's checkpoint (MoELayer's
  // custom_forward), neither to moe_act's nor to shared_experts'.
  for (const char* name : {"fc1_latent_proj", "fc2_latent_proj"}) {
    EXPECT_TRUE(has_module(op(c, name).modules, RecomputeModule::moe)) << name;
    EXPECT_FALSE(has_module(op(c, name).modules, RecomputeModule::moe_act)) << name;
  }
}

// Forward FLOPs a device counts, T = 4, k = 2, in = 2 (gate and up), balanced rows:
//   attention: qkv 2 x 4 x 8 x 24 = 1536, causal core 2 x 2 x 4 x 4 x 8 / 2 = 256, out 512;
//   MoE, plain:  router 2 T h E + experts 2 T k (in + 1) h ef = 256 + 2 x 8 x 12 x 8 = 1792;
//   MoE, latent: router 2 T h E + projections 4 T h L + experts 2 T k (in + 1) L ef
//              = 256 + 4 x 4 x 8 x 4 + 2 x 8 x 12 x 4 = 256 + 512 + 768 = 1536
// (Megatron-LM's training.py moe_layer_flops writes the same: routed 4 T L ef k x 3/2 and
// 4 T h L for the two projections, forward and backward folded in). Selective recompute of
// the moe module re-runs all of the MoE block's GEMMs: 1536.
TEST(LatentMoe, ForwardFlopsByHand) {
  const LayerCost plain = moe_decoder_layer_cost(tiny(0), unit_device(), settings(2));
  const LayerCost latent = moe_decoder_layer_cost(tiny(4), unit_device(), settings(2));
  EXPECT_DOUBLE_EQ(plain.forward_flops, 2304 + 1792);
  EXPECT_DOUBLE_EQ(latent.forward_flops, 2304 + 1536);
  CostSettings st = settings(2);
  st.recompute_modules = module_bit(RecomputeModule::moe);
  EXPECT_DOUBLE_EQ(
      moe_decoder_layer_cost(tiny(4), unit_device(), st).recompute_flops[Recompute::selective],
      1536);
  // Full recompute re-runs everything under Megatron-Core's fused kernels; under HF's eager
  // ones the early-stopping checkpoint stops at the last op that saves a tensor,
  // fc2_latent_proj here, whose 256 FLOPs it does not re-run.
  EXPECT_DOUBLE_EQ(latent.recompute_flops[Recompute::full], 3840);
  st = settings(2);
  st.kernels = Kernels::eager;
  EXPECT_DOUBLE_EQ(
      moe_decoder_layer_cost(tiny(4), unit_device(), st).recompute_flops[Recompute::full],
      3840 - 256);
}

// Parameters: attention 2 x 64 + 2 x 64 and two norms 16 = 272; router h E = 32; the two
// latent projections 2 h L = 64 (every tp rank holds them, and they are not experts'
// parameters); an expert (in + 1) L ef = 3 x 4 x 4 = 48, against 3 x 8 x 4 = 96 without the
// latent. ep 2: 2 local experts, 96 of the device's 464; active: the top-2, 96 as well.
TEST(LatentMoe, ParametersByHand) {
  const LayerCost c = moe_decoder_layer_cost(tiny(4), unit_device(), settings(2));
  EXPECT_EQ(c.expert_param_count, 96);
  EXPECT_EQ(c.param_count, 272 + 32 + 64 + 96);
  EXPECT_EQ(c.active_param_count, 272 + 32 + 64 + 2 * 48);
  // ep 1 holds all four experts: the layer's count as ModelShape has it, 264 (attention and
  // its norm) + 32 + 64 + 4 x 48 + 8 (the MLP's norm) = 560, active 264 + 32 + 64 + 96 + 8.
  const ModelShape m = tiny(4);
  const LayerCost all = moe_decoder_layer_cost(m, unit_device(), settings(1));
  EXPECT_EQ(m.decoder_layer_params(0, false), 560);
  EXPECT_EQ(m.decoder_layer_params(0, true), 464);
  EXPECT_EQ(all.param_count, 560);
  EXPECT_EQ(all.active_param_count, 464);
  // A hybrid E block is the same MoE block with its own norm.
  ModelShape h = tiny(4);
  h.hybrid_pattern = "E";
  check_shape(h);
  const LayerCost e = hybrid_layer_cost(h, unit_device(), settings(1), HybridKind::moe);
  EXPECT_EQ(e.param_count, h.decoder_layer_params(0, false));
  EXPECT_EQ(e.param_count, 8 + 32 + 64 + 4 * 48);
}

// What autograd keeps (fused kernels, bf16, load_imbalance 1.5, ep 2), in bytes:
//   layer input and the two fused norms 2 x (2 x 32 + 4 x 4 rstd)             160
//   qkv and router inputs 2 x 32 + 2 x 32                                      128
//   fp32 probabilities 4 x 4 x 4, top-k indices and weights 12 x 8             160
//   the experts' input rows gi Tg L = 2 x 12 x 4                                96
//   the SwiGLU's input (2 e) and output (e) over Tg x ef = 6 x 12 x 4          288
//   the router weights the scaled activation keeps, 4 x Tg                      48
//   fc2_latent_proj's input gi Tm L = 2 x 4 x 4                                 32
//   q, k, v 2 x 4 x 24, flash's output 2 x 4 x 8, its logsumexp 4 x 2 x 4      288
//                                                                         = 1200
// (without the latent: rows of h, 2 x 12 x 8 = 192, and no fc2_latent_proj input: 1264).
// Selective of the default core_attn frees the logsumexp, 32; of moe, everything the MoE
// block keeps but its input: 160 + 96 + 288 + 48 + 32 = 624; of moe_act, the experts'
// down input 2 x 12 x 4 = 96. The weight-grad needs the projections' inputs (qkv 64, the
// router's 64, out_proj's 64, the experts' 2 x 12 x (4 + 4) = 192, fc2_latent_proj's 32)
// and the two norms' outputs (128): 544.
TEST(LatentMoe, SavedBytesByHand) {
  ModelShape m = tiny(4);
  m.moe.load_imbalance = 1.5;
  ModelShape p = tiny(0);
  p.moe.load_imbalance = 1.5;
  CostSettings st = settings(2);
  const LayerCost c = moe_decoder_layer_cost(m, unit_device(), st);
  EXPECT_EQ(c.activation_bytes[Recompute::none], 1200);
  EXPECT_EQ(moe_decoder_layer_cost(p, unit_device(), st).activation_bytes[Recompute::none], 1264);
  EXPECT_EQ(c.activation_bytes[Recompute::selective], 1200 - 32);
  EXPECT_EQ(c.activation_bytes[Recompute::full], 64);
  EXPECT_EQ(c.weight_grad_bytes[Recompute::none], 544);
  st.recompute_modules = module_bit(RecomputeModule::moe);
  EXPECT_EQ(moe_decoder_layer_cost(m, unit_device(), st).activation_bytes[Recompute::selective],
            1200 - 624);
  st.recompute_modules = module_bit(RecomputeModule::moe_act);
  EXPECT_EQ(moe_decoder_layer_cost(m, unit_device(), st).activation_bytes[Recompute::selective],
            1200 - 96);
  // A hybrid E block (hybrid_layers.cpp's block_saved) keeps its input and the norm's rstd
  // (2 x 32 + 16), the normalized tensor its first GEMM reads (64) and the router's bf16
  // input (64), then the MoE block's 160 + 96 + 288 + 48 + 32 = 624: 832.
  ModelShape h = m;
  h.hybrid_pattern = "E";
  const LayerCost e = hybrid_layer_cost(h, unit_device(), settings(2), HybridKind::moe);
  EXPECT_EQ(e.activation_bytes[Recompute::none], 80 + 64 + 64 + 624);
}

// Under FP8 (tensorwise, one byte a GEMM input) with L = 2: the experts' input rows shrink
// by 1 x 12 x (8 - 2) = 72 bytes; fc2_latent_proj keeps its FP8 input, 1 x 4 x 2 = 8, and
// fc1_latent_proj its own FP8 cast of the norm's output, 1 x 32 (in bf16 it shares the
// router's): 72 - 40 = 32 bytes less than the plain layer, in what the weight-grad needs too.
TEST(LatentMoe, FpEightKeepsBothProjectionInputs) {
  ModelShape m = tiny(2), p = tiny(0);
  m.moe.load_imbalance = p.moe.load_imbalance = 1.5;
  CostSettings st = settings(2);
  st.fp8 = Fp8::hybrid;
  st.fp8_recipe = Fp8Recipe::tensorwise;
  const LayerCost c = moe_decoder_layer_cost(m, unit_device(), st);
  const LayerCost plain = moe_decoder_layer_cost(p, unit_device(), st);
  EXPECT_EQ(plain.activation_bytes[Recompute::none] - c.activation_bytes[Recompute::none], 32);
  EXPECT_EQ(plain.weight_grad_bytes[Recompute::none] - c.weight_grad_bytes[Recompute::none], 32);
  // The projections are FP8 GEMMs, each with its cast.
  EXPECT_GT(op(c, "fc1_latent_proj_cast").forward_s, 0);
  EXPECT_GT(op(c, "fc2_latent_proj_cast").forward_s, 0);
}

// The all-to-all carries latent rows: on a node of 100 GB/s links and 1 us, ep 2 sends half
// of Tk x L x e = 8 x 4 x 2 = 64 bytes (0.32 ns) after the latency, against 128 (0.64 ns)
// for rows of h.
TEST(LatentMoe, TheAllToAllCarriesLatentRows) {
  const HardwareSpec hw = test::round_device(100, 1);
  const LayerCost c = moe_decoder_layer_cost(tiny(4), hw, settings(2));
  const LayerCost plain = moe_decoder_layer_cost(tiny(0), hw, settings(2));
  EXPECT_NEAR(op(c, "a2a-dispatch").forward_s, 1e-6 + 0.32e-9, 1e-15);
  EXPECT_NEAR(op(plain, "a2a-dispatch").forward_s, 1e-6 + 0.64e-9, 1e-15);
  EXPECT_NEAR(op(c, "a2a-combine").forward_s, 1e-6 + 0.32e-9, 1e-15);
}

// ---- through the config ------------------------------------------------------------------

/// `bmpipe cost` on a small hybrid written as YAML: line 9 is the first of `model_keys`.
test::CliRun cost_of(const test::ScratchDir& dir, const std::string& model_keys) {
  const std::string yaml =
      "cluster: {nodes: 1, devices_per_node: 4, device: {preset: h100-sxm}}\n"   // 1
      "model:\n  num_layers: 4\n  hidden_size: 256\n  num_attention_heads: 4\n"  // 2-5
      "  num_kv_heads: 2\n  ffn_hidden_size: 512\n  vocab_size: 1000\n" +        // 6-8
      model_keys +
      "training:\n  pp: 1\n  seq_length: 1024\n  micro_batch_size: 1\n  global_batch_size: 4\n"
      "  kernels: fused\n";
  return test::run_cli("cost '" + test::write_file(dir.file("latent.yaml"), yaml) + "'");
}

const std::string kHybrid =
    "  hybrid_pattern: \"M*ME\"\n"
    "  mamba: {num_heads: 8, head_dim: 32, state_dim: 16, groups: 2}\n";  // 9, 10

TEST(LatentMoe, AGoodLatentHybridWithAnMtpBlockCosts) {
  test::ScratchDir dir;
  const auto r = cost_of(dir, kHybrid +
                                  "  moe: {num_experts: 16, top_k: 2, expert_ffn_hidden_size: 128, "
                                  "latent_size: 64}\n  mtp_layers: 2\n  mtp_pattern: \"*E\"\n"
                                  "  mtp_shared: true\n");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("mtp            2"), std::string::npos) << r.out;
}

TEST(LatentMoe, BadInputsAreRefusedAtTheirKey) {
  test::ScratchDir dir;
  const std::string moe = "  moe: {num_experts: 16, top_k: 2, expert_ffn_hidden_size: 128, ";
  struct Case {
    std::string model, expect;
  };
  const std::vector<Case> cases{
      // Megatron-LM asserts moe_latent_size > 0.
      {kHybrid + moe + "latent_size: 0}\n", "latent.yaml:11: model.moe.latent_size: "},
      // A latent as wide as the hidden state compresses nothing.
      {kHybrid + moe + "latent_size: 256}\n",
       "latent.yaml:11: model.moe.latent_size: latent_size = 256 is not narrower than "
       "hidden_size = 256"},
      // A latent without experts.
      {"  moe: {latent_size: 64}\n",
       "latent.yaml:9: model.moe.latent_size: model has no experts: a latent projection"},
      // An MTP block belongs to a hybrid model...
      {"  mtp_layers: 1\n  mtp_pattern: \"*-\"\n",
       "latent.yaml:10: model.mtp_pattern: is a hybrid model's MTP block"},
      // ... with MTP depths ...
      {kHybrid + moe + "latent_size: 64}\n  mtp_pattern: \"*E\"\n",
       "latent.yaml:12: model.mtp_pattern: '*E' runs no depth"},
      // ... which a hybrid model's depths need.
      {kHybrid + moe + "latent_size: 64}\n  mtp_layers: 1\n",
       "latent.yaml:12: model.mtp_pattern: a hybrid model's 1 MTP depths need the MTP block's "
       "layers"},
      // Its symbols are the pattern's.
      {kHybrid + moe + "latent_size: 64}\n  mtp_layers: 1\n  mtp_pattern: \"*X\"\n",
       "latent.yaml:13: model.mtp_pattern: mtp_pattern: symbol 'X' at position 1"},
      // Its MoE blocks need experts.
      {"  hybrid_pattern: \"M*M-\"\n  mamba: {num_heads: 8, head_dim: 32, state_dim: 16, "
       "groups: 2}\n  mtp_layers: 1\n  mtp_pattern: \"*E\"\n",
       "latent.yaml:12: model.mtp_pattern: mtp_pattern has MoE layers (E) but the model has no "
       "experts"},
      // Shared weights of no depth.
      {kHybrid + moe + "latent_size: 64}\n  mtp_shared: true\n",
       "latent.yaml:12: model.mtp_shared: shares the MTP depths' weights, but the model has "
       "none"},
  };
  for (const auto& c : cases) {
    const auto r = cost_of(dir, c.model);
    EXPECT_EQ(r.code, 2) << c.model << r.all();
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << c.model << "\n  got: " << r.err;
  }
}

// The HF config's moe_latent_size and MTP block, each bad value refused at the YAML's
// hf_config line with the field's JSON Pointer.
TEST(LatentMoe, BadHfLatentAndMtpFieldsAreRefused) {
  test::ScratchDir dir;
  const std::string super = test::slurp(std::string(BMPIPE_SOURCE_DIR) +
                                        "/configs/presets/hf/nemotron-3-super-120b-a12b.json");
  const auto replaced = [&](std::string text, const std::string& from, const std::string& to) {
    const auto at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) text.replace(at, from.size(), to);
    return text;
  };
  std::string no_experts = super;
  for (char& ch : no_experts)
    if (ch == 'E') ch = '-';  // the patterns' E layers become MLPs (no other 'E' in the file)
  struct Case {
    std::string json, expect;
  };
  const std::vector<Case> cases{
      {replaced(super, "\"moe_latent_size\": 1024", "\"moe_latent_size\": 0"),
       "/moe_latent_size: HF config field 'moe_latent_size' must be a positive integer"},
      {replaced(super, "\"moe_latent_size\": 1024", "\"moe_latent_size\": 4096"),
       "/moe_latent_size: 4096 is not narrower than hidden_size = 4096"},
      {no_experts,
       "/moe_latent_size: a latent projection of the routed experts' tokens, but the "
       "pattern has no MoE layers (E)"},
      {replaced(super, "\"mtp_hybrid_override_pattern\": \"*E\",", ""),
       "/mtp_hybrid_override_pattern: num_nextn_predict_layers = 1 MTP depths need the MTP "
       "block's layer pattern"},
  };
  for (const auto& c : cases) {
    test::write_file(dir.file("config.json"), c.json);
    const std::string yaml =
        "cluster: {nodes: 8, devices_per_node: 8, device: {preset: h100-sxm}}\n"
        "model:\n"
        "  hf_config: config.json\n"
        "training: {pp: 1, ep: 8, kernels: fused, seq_length: 1024, micro_batch_size: 1, "
        "global_batch_size: 64}\n";
    const auto r = test::run_cli("cost '" + test::write_file(dir.file("super.yaml"), yaml) + "'");
    EXPECT_EQ(r.code, 2) << r.all();
    EXPECT_NE(r.err.find("super.yaml:3: model.hf_config: "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << c.expect << "\n  got: " << r.err;
  }
  // Another MoE family's moe_latent_size is refused, not costed as a plain MoE.
  std::string qwen =
      test::slurp(std::string(BMPIPE_SOURCE_DIR) + "/configs/presets/hf/qwen3-30b-a3b.json");
  qwen = replaced(qwen, "{", "{\n  \"moe_latent_size\": 512,");
  test::write_file(dir.file("config.json"), qwen);
  const auto r = test::run_cli(
      "cost '" +
      test::write_file(dir.file("qwen.yaml"),
                       "cluster: {nodes: 1, devices_per_node: 8, device: {preset: h100-sxm}}\n"
                       "model: {hf_config: config.json}\n"
                       "training: {pp: 1, ep: 8, seq_length: 1024, global_batch_size: 8}\n") +
      "'");
  EXPECT_EQ(r.code, 2) << r.all();
  EXPECT_NE(r.err.find("/moe_latent_size: a latent mixture of experts in a 'qwen3_moe' config"),
            std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace bmpipe::latent_moe_test
