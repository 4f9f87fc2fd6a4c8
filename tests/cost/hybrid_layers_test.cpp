// Hybrid models (issue 40): a Mamba-2 block's FLOPs, bytes, saved activations and parameters
// on a small shape worked by hand; the pattern's layers as the layer table and `bmpipe cost`
// list them; Nemotron 3 Nano's parameters against its model card; and every bad input
// refused with exit 2 at its key. Expected values are worked out in the comments, never taken
// from the code under test.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "sim/cost/cost_model.hpp"
#include "sim/cost/hardware.hpp"
#include "support/round_device.hpp"
#include "support/support.hpp"

namespace bmpipe::hybrid_layers_test {
namespace {

using test::round_device;
using test::run_cli;
using test::ScratchDir;
using test::write_file;

// h 256; 8 SSM heads of 32 (d_inner 256), 2 groups of state 16, conv 4 taps, chunks of 64;
// attention 4 heads of 64 (2 kv), squared-ReLU MLP of 512, 16 experts of 128 top 2.
ModelShape small_hybrid(const std::string& pattern) {
  ModelShape m;
  m.name = "small-hybrid";
  m.num_layers = static_cast<int>(pattern.size());
  m.hidden_size = 256;
  m.num_attention_heads = 4;
  m.num_kv_heads = 2;
  m.ffn_hidden_size = 512;
  m.vocab_size = 1000;
  m.hybrid_pattern = pattern;
  m.mlp_activation = MlpActivation::relu2;
  m.mamba = MambaShape{.num_heads = 8,
                       .head_dim = 32,
                       .state_dim = 16,
                       .groups = 2,
                       .conv_kernel = 4,
                       .chunk_size = 64};
  m.moe.num_experts = 16;
  m.moe.top_k = 2;
  m.moe.expert_ffn = 128;
  return m;
}

CostSettings settings() {
  CostSettings st;
  st.seq_length = 1024;
  st.micro_batch_size = 1;
  st.kernels = Kernels::fused;
  st.grad_accumulation = GradAccumulation::overwrite;
  return st;
}

const SubOpCost* find_op(const LayerCost& c, const std::string& name) {
  for (const auto& o : c.ops)
    if (o.name == name) return &o;
  return nullptr;
}

// in_proj's columns: z, x (256 each), B, C (2 x 16 each), dt (8): 584; conv channels
// x, B, C: 256 + 64 = 320. Parameters: norm 256 + in_proj 256 x 584 = 149 504 + conv
// 320 x (4 + 1) = 1 600 + dt_bias, A_log, D 3 x 8 = 24 + gated norm 256 + out_proj
// 256 x 256 = 65 536: 217 176.
TEST(HybridLayers, MambaBlockParametersAreWorkedByHand) {
  const ModelShape m = small_hybrid("M");
  EXPECT_EQ(m.mamba.in_proj_cols(), 584);
  EXPECT_EQ(m.mamba.conv_channels(), 320);
  EXPECT_EQ(m.mamba_layer_params(), 217'176);
  const LayerCost c = hybrid_layer_cost(m, round_device(100, 0), settings(), HybridKind::mamba);
  EXPECT_EQ(c.param_count, 217'176);
  EXPECT_EQ(c.active_param_count, 217'176);
  EXPECT_EQ(c.expert_param_count, 0);
}

// T = 1024 tokens. in_proj 2 T 256 x 584 = 306 184 192; conv1d 2 x 4 taps x T x 320 =
// 2 621 440; the SSD scan per token: groups 2 x 2 Q N (2 x 64 x 16) = 4 096 plus heads
// 8 x (2 Q P + 4 N P) = 8 x (4 096 + 2 048) = 49 152, so 53 248 a token, 54 525 952; out_proj
// 2 T 256 x 256 = 134 217 728. Sum 497 549 312.
TEST(HybridLayers, MambaBlockForwardFlopsAreWorkedByHand) {
  const ModelShape m = small_hybrid("M");
  const LayerCost c = hybrid_layer_cost(m, round_device(100, 0), settings(), HybridKind::mamba);
  EXPECT_DOUBLE_EQ(c.forward_flops, 497'549'312.0);
  EXPECT_DOUBLE_EQ(c.recompute_flops[Recompute::full], 497'549'312.0);
  EXPECT_DOUBLE_EQ(c.recompute_flops[Recompute::selective], 0.0);
}

// The scan on the round device (1000 GB/s, 500 TFLOPS at 0.5) is memory-bound. Forward
// bytes: x, B, C and dt read twice and y written, 2 x T x (2 x 320 + 2 x 8 + 256) =
// 1 867 776; the fp32 states (8 heads x 32 x 16 a chunk of 64: 4 x T x 64 = 262 144 a pass)
// four times, 1 048 576; C B^T in fp32 (4 x T x 2 groups x 64 = 524 288) twice, 1 048 576.
// 3 964 928 bytes: 3.964928 us against 54 525 952 / 5e14 = 0.109 us of FLOPs. Backward:
// twice the bytes, 7.929856 us, against (2 x 54 525 952 + 2 x 8 x 16 x 32 x T) / 5e14 =
// 0.235 us.
TEST(HybridLayers, TheScanIsARooflineOverItsFiveKernelsBytes) {
  const ModelShape m = small_hybrid("M");
  const LayerCost c = hybrid_layer_cost(m, round_device(100, 0), settings(), HybridKind::mamba);
  const SubOpCost* scan = find_op(c, "ssd_scan");
  ASSERT_NE(scan, nullptr);
  EXPECT_NEAR(scan->forward_s, 3.964928e-6, 1e-15);
  EXPECT_NEAR(scan->backward_input_s, 7.929856e-6, 1e-15);
  EXPECT_EQ(scan->kind, KernelClass::attention);
}

// Saved for backward (bf16): the norm's input 2 x 262 144 and its fp32 rstd 4 x 1024;
// in_proj's input 2 x 262 144; in_proj's output z x B C dt 2 x T x 584 = 1 196 032; the
// scan's output 2 x T x 256 = 524 288 and the gated norm's rstd 4 x T x 2 groups = 8 192;
// out_proj's input 2 x T x 256 = 524 288. Sum 3 305 472; no attention core to drop;
// full recompute keeps the block's input, 524 288.
TEST(HybridLayers, MambaBlockSavedActivationsAreWorkedByHand) {
  const ModelShape m = small_hybrid("M");
  const LayerCost c = hybrid_layer_cost(m, round_device(100, 0), settings(), HybridKind::mamba);
  EXPECT_EQ(c.activation_bytes[Recompute::none], 3'305'472);
  EXPECT_EQ(c.activation_bytes[Recompute::selective], 3'305'472);
  EXPECT_EQ(c.activation_bytes[Recompute::full], 524'288);
}

// tp 2 halves the heads and the groups (Megatron's MambaMixer): in_proj 292 columns, conv
// 160 channels, and the parameters one device holds: 256 + 256 x 292 + 160 x 5 + 3 x 4 + 128
// + 128 x 256 = 256 + 74 752 + 800 + 12 + 128 + 32 768 = 108 716 (the pre-norm's scale
// replicated).
TEST(HybridLayers, TensorParallelismSplitsTheMixersHeadsAndGroups) {
  const ModelShape m = small_hybrid("M");
  CostSettings st = settings();
  st.tp = 2;
  const LayerCost c = hybrid_layer_cost(m, round_device(100, 0), st, HybridKind::mamba);
  EXPECT_EQ(c.param_count, 108'716);
  EXPECT_NE(find_op(c, "out_all_reduce"), nullptr);
}

// A squared-ReLU MLP has no gate: fc1 h -> ffn. Parameters of a - layer: norm 256 + 2 x 256
// x 512 = 262 400; of an E layer: norm 256 + router 256 x 16 = 4 096 + 16 experts x 2 x 256
// x 128 = 1 048 576, of which a token runs 2 x 65 536.
TEST(HybridLayers, SquaredReluBlocksHaveNoGate) {
  const ModelShape m = small_hybrid("-E");
  EXPECT_EQ(m.decoder_layer_params(0, false), 262'400);
  EXPECT_EQ(m.decoder_layer_params(1, false), 256 + 4'096 + 1'048'576);
  EXPECT_EQ(m.decoder_layer_params(1, true), 256 + 4'096 + 131'072);
  const LayerCost mlp = hybrid_layer_cost(m, round_device(100, 0), settings(), HybridKind::mlp);
  EXPECT_EQ(mlp.param_count, 262'400);
  EXPECT_NE(find_op(mlp, "fc1"), nullptr);
  EXPECT_NE(find_op(mlp, "relu2"), nullptr);
  EXPECT_EQ(find_op(mlp, "gate_up_proj"), nullptr);
  const LayerCost moe = hybrid_layer_cost(m, round_device(100, 0), settings(), HybridKind::moe);
  EXPECT_EQ(moe.param_count, 256 + 4'096 + 1'048'576);
  EXPECT_EQ(moe.expert_param_count, 1'048'576);
  EXPECT_NE(find_op(moe, "experts_fc1"), nullptr);
}

// An attention layer of a hybrid is the attention block alone: selective recompute re-runs
// its core, and it has no MLP.
TEST(HybridLayers, AnAttentionLayerIsTheAttentionBlockAlone) {
  const ModelShape m = small_hybrid("*");
  const LayerCost c = hybrid_layer_cost(m, round_device(100, 0), settings(), HybridKind::attention);
  EXPECT_NE(find_op(c, "attention"), nullptr);
  EXPECT_EQ(find_op(c, "fc1"), nullptr);
  EXPECT_GT(c.recompute_extra_s[Recompute::selective], 0.0);
  // q, o 256 x 256 each; k, v 256 x 128 each; the norm 256.
  EXPECT_EQ(c.param_count, 2 * 256 * 256 + 2 * 256 * 128 + 256);
}

// A small Gated DeltaNet: h 256, 2 key heads and 4 value heads of 32, conv 4, chunks of 16.
// in_proj: q, k (64 each), v, z (128 each), beta and decay (4 each): 392 columns; conv over
// q, k, v: 256 channels. Parameters: norm 256 + 256 x 392 = 100 352 + conv 256 x 4 = 1 024
// (no bias) + dt_bias, A_log 2 x 4 + the gated norm 32 + out_proj 128 x 256 = 32 768:
// 134 440. Forward FLOPs at T = 1024: in_proj 2 T 256 x 392 = 205 520 896; conv 2 x 4 x T x
// 256 = 2 097 152; the delta rule a value head 6 C dk + 4 C dv + 6 dk dv = 3 072 + 2 048 +
// 6 144 = 11 264, x 4 heads x T = 46 137 344; out_proj 2 T 128 x 256 = 67 108 864. Sum
// 320 864 256.
TEST(HybridLayers, GatedDeltaNetBlockIsWorkedByHand) {
  ModelShape m = small_hybrid("G");
  m.gdn = GdnShape{.key_heads = 2,
                   .key_head_dim = 32,
                   .value_heads = 4,
                   .value_head_dim = 32,
                   .conv_kernel = 4,
                   .chunk_size = 16};
  EXPECT_EQ(m.gdn_layer_params(), 134'440);
  const LayerCost c = hybrid_layer_cost(m, round_device(100, 0), settings(), HybridKind::gdn);
  EXPECT_EQ(c.param_count, 134'440);
  EXPECT_DOUBLE_EQ(c.forward_flops, 320'864'256.0);
  EXPECT_NE(find_op(c, "gdn_scan"), nullptr);
}

// Qwen3-Next's output gate doubles q_proj: 256 x 256 more parameters on the small shape.
TEST(HybridLayers, TheAttentionOutputGateWidensQ) {
  ModelShape m = small_hybrid("*");
  const long long plain = m.attention_params();
  m.attention_output_gate = true;
  EXPECT_EQ(m.attention_params(), plain + 256 * 256);
  const LayerCost c = hybrid_layer_cost(m, round_device(100, 0), settings(), HybridKind::attention);
  EXPECT_EQ(c.param_count, plain + 256 * 256);
  EXPECT_NE(find_op(c, "output_gate"), nullptr);
}

TEST(HybridLayers, EagerKernelsAreRefused) {
  CostSettings st = settings();
  st.kernels = Kernels::eager;
  EXPECT_THROW(hybrid_layer_cost(small_hybrid("M"), round_device(100, 0), st, HybridKind::mamba),
               ShapeError);
}

const std::string kExample =
    std::string(BMPIPE_SOURCE_DIR) + "/configs/examples/h100_nemotron3_nano.yaml";

// nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B's model card and technical report: 31.6B parameters
// in all, 3.6B active a token counting both embedding matrices (3.2B without the input
// embedding). The pattern "MEMEM*EMEMEM*..." of 52: 23 M, 6 *, 23 E.
TEST(HybridLayers, NemotronThreeNanoMatchesItsModelCard) {
  const auto r = run_cli("cost '" + kExample + "' --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_NEAR(j["parameters_total"].get<double>() / 31.6e9, 1.0, 0.01);
  EXPECT_NEAR(j["parameters_active"].get<double>() / 3.6e9, 1.0, 0.01);
  std::vector<std::pair<std::string, int>> rows;
  for (const auto& l : j["layers"]) rows.emplace_back(l["name"], l["count"]);
  const std::vector<std::pair<std::string, int>> expected{
      {"embedding", 1}, {"mamba", 23}, {"attention", 6}, {"moe", 23}, {"lm_head", 1}};
  EXPECT_EQ(rows, expected);
}

// The example runs end to end: simulate fits, and plan and search take the hybrid model.
TEST(HybridLayers, TheExampleSimulatesAndPlans) {
  const auto sim = run_cli("simulate '" + kExample + "' --json");
  ASSERT_EQ(sim.code, 0) << sim.err;
  EXPECT_TRUE(nlohmann::json::parse(sim.out)["fits"].get<bool>());
  const auto plan = run_cli("plan '" + kExample + "' --max-evals 20 --json");
  EXPECT_EQ(plan.code, 0) << plan.err;
}

const std::string kNemotronH56b =
    std::string(BMPIPE_SOURCE_DIR) + "/configs/examples/h100_nemotron_h_56b_pp4.yaml";

// Nemotron-H 56B (Megatron-LM's own arguments for it, cited in the example): 54 M, 10 * and 54
// - layers. Its parameters by hand: a Mamba layer 8192 (norm) + 8192 x 37 120 (in_proj: 2 x
// 16 384 + 2 x 8 x 256 + 256) + 20 480 x 5 (conv) + 3 x 256 + 16 384 + 16 384 x 8192 =
// 438 432 512; an attention layer 8192 + 2 x 8192 x 8192 + 2 x 1024 x 8192 = 151 003 136;
// an MLP layer 8192 + 2 x 8192 x 32 768 = 536 879 104; embeddings 2 x 131 072 x 8192 and the
// final norm 8192. 54 x 438 432 512 + 10 x 151 003 136 + 54 x 536 879 104 + 2 147 483 648 +
// 8192 = 56 324 350 464, the "56B" of the model's name.
TEST(HybridLayers, NemotronH56bIsCountedByHand) {
  const auto r = run_cli("cost '" + kNemotronH56b + "' --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["parameters_total"].get<long long>(), 56'324'350'464LL);
  std::vector<std::pair<std::string, int>> rows;
  for (const auto& l : j["layers"]) rows.emplace_back(l["name"], l["count"]);
  const std::vector<std::pair<std::string, int>> expected{
      {"embedding", 1}, {"mamba", 54}, {"attention", 10}, {"mlp", 54}, {"lm_head", 1}};
  EXPECT_EQ(rows, expected);
}

const std::string kQwen3Next =
    std::string(BMPIPE_SOURCE_DIR) + "/configs/examples/h100_qwen3_next_80b.yaml";

// Qwen3-Next-80B-A3B from its config.json, counted by hand a layer of HF's modules: a Gated
// DeltaNet 2048 x 12 288 (qkvz) + 2048 x 64 (ba) + 8192 x 4 (conv) + 64 + 128 + 4096 x 2048
// = 33 718 464; gated attention 2048 x 8192 + 2 x 2048 x 512 + 4096 x 2048 + 2 x 256 (q, k
// norms) = 27 263 488; the MoE block 512 x 2048 (router) + 512 x 3 x 2048 x 512 + 3 x 2048 x
// 512 + 2048 (shared gate) = 1 614 809 088, of which a token runs 10 experts: 35 653 632;
// two norms a layer. 36 x 33 718 464 + 12 x 27 263 488 + 48 x 1 614 809 088 + 48 x 4096 +
// 2 x 151 936 x 2048 + 2048 = 79 674 391 296, the safetensors count of Qwen/Qwen3-Coder-Next
// (the same shape) as published; active 3 874 929 408.
TEST(HybridLayers, QwenThreeNextIsCountedToThePublishedParameter) {
  const auto r = run_cli("cost '" + kQwen3Next + "' --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["parameters_total"].get<long long>(), 79'674'391'296LL);
  EXPECT_EQ(j["parameters_active"].get<long long>(), 3'874'929'408LL);
  std::vector<std::pair<std::string, int>> rows;
  for (const auto& l : j["layers"]) rows.emplace_back(l["name"], l["count"]);
  const std::vector<std::pair<std::string, int>> expected{
      {"embedding", 1}, {"attention", 12}, {"moe", 48}, {"gdn", 36}, {"lm_head", 1}};
  EXPECT_EQ(rows, expected);
}

/// `bmpipe cost` on a small hybrid written as YAML with `extra` appended under model: and
/// `training` as given.
test::CliRun cost_of(const ScratchDir& dir, const std::string& model_keys,
                     const std::string& training_keys = "") {
  const std::string yaml =
      "cluster: {nodes: 1, devices_per_node: 4, device: {preset: h100-sxm}}\n"
      "model:\n  num_layers: 4\n  hidden_size: 256\n  num_attention_heads: 4\n"
      "  num_kv_heads: 2\n  ffn_hidden_size: 512\n  vocab_size: 1000\n" +
      model_keys +
      "training:\n  pp: 1\n  seq_length: 1024\n  micro_batch_size: 1\n  global_batch_size: 4\n" +
      training_keys;
  return run_cli("cost '" + write_file(dir.file("hybrid.yaml"), yaml) + "'");
}

const std::string kMamba = "  mamba: {num_heads: 8, head_dim: 32, state_dim: 16, groups: 2}\n";

TEST(HybridLayers, AGoodSmallHybridCosts) {
  ScratchDir dir;
  const auto r = cost_of(dir, "  hybrid_pattern: \"M*M-\"\n" + kMamba, "  kernels: fused\n");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("mamba          2"), std::string::npos) << r.out;
}

TEST(HybridLayers, BadInputsAreRefusedAtTheirKey) {
  ScratchDir dir;
  struct Case {
    std::string model, training, expect;
  };
  const std::vector<Case> cases{
      // An unknown symbol, named with its position.
      {"  hybrid_pattern: \"MXM-\"\n" + kMamba, "  kernels: fused\n",
       "hybrid.yaml:9: model.hybrid_pattern: hybrid_pattern: symbol 'X' at position 1"},
      // Megatron's D (DeepSeek sparse attention), said to be not modelled yet.
      {"  hybrid_pattern: \"MDM-\"\n" + kMamba, "  kernels: fused\n", "DeepSeek sparse attention"},
      // Gated DeltaNet layers without the mixer's sizes.
      {"  hybrid_pattern: \"MGM-\"\n" + kMamba, "  kernels: fused\n", "model.gdn needs key_heads"},
      // A hybrid is costed llama-style.
      {"  architecture: gpt\n  hybrid_pattern: \"M*M-\"\n" + kMamba, "  kernels: fused\n",
       "model.architecture: a hybrid model's layers are costed llama-style"},
      // One symbol a layer.
      {"  hybrid_pattern: \"M*M\"\n" + kMamba, "  kernels: fused\n",
       "hybrid_pattern has 3 symbols but num_layers = 4"},
      // Mamba layers without the mixer's sizes.
      {"  hybrid_pattern: \"M*M-\"\n", "  kernels: fused\n", "model.mamba needs num_heads"},
      // model.mamba without a hybrid pattern.
      {kMamba, "  kernels: fused\n", "hybrid.yaml:9: model.mamba: is for a hybrid model"},
      // E layers without experts.
      {"  hybrid_pattern: \"M*ME\"\n" + kMamba, "  kernels: fused\n",
       "MoE layers (E) but the model has no experts"},
      // Heads that do not divide over tp (3 does not divide 8 SSM heads; 4 attention heads
      // do not divide either, so use tp that divides the attention heads but not groups).
      {"  hybrid_pattern: \"M*M-\"\n  mamba: {num_heads: 8, head_dim: 32, state_dim: 16, "
       "groups: 1}\n",
       "  kernels: fused\n  tp: 2\n", "training.tp: tp = 2 does not divide the Mamba mixer's"},
      // Eager kernels.
      {"  hybrid_pattern: \"M*M-\"\n" + kMamba, "", "training.kernels"},
      // Context parallelism of Mamba layers.
      {"  hybrid_pattern: \"M*M-\"\n" + kMamba, "  kernels: fused\n  cp: 2\n", "training.cp"},
  };
  for (const auto& c : cases) {
    const auto r = cost_of(dir, c.model, c.training);
    EXPECT_EQ(r.code, 2) << c.model << c.training << r.all();
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << r.err;
  }
}

// An HF nemotron_h config with another MLP activation is refused, not costed as relu2.
TEST(HybridLayers, AnHfNemotronHWithAnotherActivationIsRefused) {
  ScratchDir dir;
  std::string text = test::slurp(std::string(BMPIPE_SOURCE_DIR) +
                                 "/configs/presets/hf/nemotron-3-nano-30b-a3b.json");
  const auto at = text.find("\"relu2\"");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 7, "\"silu\"");
  write_file(dir.file("config.json"), text);
  const std::string yaml =
      "cluster: {nodes: 1, devices_per_node: 8, device: {preset: h100-sxm}}\n"
      "model: {hf_config: config.json}\n"
      "training: {pp: 1, ep: 8, kernels: fused, seq_length: 1024, micro_batch_size: 1, "
      "global_batch_size: 8}\n";
  const auto r = run_cli("cost '" + write_file(dir.file("nemotron.yaml"), yaml) + "'");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("mlp_hidden_act"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace bmpipe::hybrid_layers_test
