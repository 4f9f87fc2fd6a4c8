// Unit checks of the analytic model's parts: preset shapes and parameter counts, how tensor
// and sequence parallelism divide the work, collectives, static bytes and the dp tail.
#include <gtest/gtest.h>

#include <cmath>

#include "experiment/experiment.hpp"

namespace bmpipe {
namespace {

long long total_params(const ModelShape& m, int seq) {
  long long p = m.num_layers * m.layer_params() + m.embedding_params(seq) + m.hidden_size;
  if (!m.tied_embeddings) p += static_cast<long long>(m.vocab_size) * m.hidden_size;
  return p;
}

TEST(Presets, ParameterCountsMatchThePublishedSizes) {
  // Published totals: Llama 2 7B 6.74e9, 13B 13.02e9, 70B 68.98e9; Llama 3 8B 8.03e9,
  // 70B 70.55e9 (HF model cards); GPT-3 175B 174.6e9 (Brown et al. 2020).
  const std::pair<const char*, double> expected[] = {
      {"llama2-7b", 6.738e9}, {"llama2-13b", 13.016e9}, {"llama2-70b", 68.977e9},
      {"llama3-8b", 8.030e9}, {"llama3-70b", 70.554e9}, {"gpt3-175b", 174.6e9}};
  for (const auto& [name, params] : expected) {
    const ModelShape* m = find_model_preset(name);
    ASSERT_NE(m, nullptr) << name;
    EXPECT_NEAR(static_cast<double>(total_params(*m, 2048)), params, 0.005 * params) << name;
  }
  EXPECT_EQ(find_model_preset("gpt-5"), nullptr);
  EXPECT_EQ(model_preset_names(),
            "llama2-7b, llama2-13b, llama2-70b, llama3-8b, llama3-70b, gpt3-175b");
}

TEST(Presets, HardwareFigures) {
  EXPECT_EQ(hardware_preset_names(), "ascend-910b, a100-80g, h100-sxm, h200");
  EXPECT_DOUBLE_EQ(find_hardware_preset("ascend-910b")->memory_GiB, 64);
  EXPECT_TRUE(find_hardware_preset("ascend-910b")->intra_node_mesh);
  EXPECT_DOUBLE_EQ(find_hardware_preset("a100-80g")->peak_tflops, 312);
  EXPECT_DOUBLE_EQ(find_hardware_preset("h100-sxm")->peak_tflops, 989);
  EXPECT_DOUBLE_EQ(find_hardware_preset("h200")->hbm_GBps, 4800);
  EXPECT_EQ(find_hardware_preset("b200"), nullptr);
}

CostSettings settings(int tp, bool sp) {
  CostSettings st;
  st.seq_length = 4096;
  st.micro_batch_size = 1;
  st.tp = tp;
  st.sequence_parallel = sp;
  return st;
}

TEST(CostModel, TensorParallelismSplitsWorkAndAddsCollectives) {
  const ModelShape& m = *find_model_preset("llama2-13b");
  const HardwareSpec& hw = *find_hardware_preset("h200");
  const LayerCost one = decoder_layer_cost(m, hw, settings(1, false));
  const LayerCost four = decoder_layer_cost(m, hw, settings(4, false));
  EXPECT_NEAR(four.forward_flops, one.forward_flops / 4, 1e-6 * one.forward_flops);
  EXPECT_EQ(four.param_count, (one.param_count - 2 * 5120) / 4 + 2 * 5120);  // norms replicated
  // The matmul part shrinks 4x; norms stay replicated and two all-reduces appear.
  EXPECT_LT(four.forward_s, one.forward_s / 2);
  EXPECT_GT(four.forward_s, one.forward_s / 4);
  int collectives = 0;
  for (const auto& op : four.ops) collectives += op.name.find("all_reduce") != std::string::npos;
  EXPECT_EQ(collectives, 2);
  // Sequence parallelism shards the replicated norms: fewer activation bytes, same flops.
  const LayerCost sp = decoder_layer_cost(m, hw, settings(4, true));
  EXPECT_LT(sp.activation_bytes[Recompute::none], four.activation_bytes[Recompute::none]);
  EXPECT_EQ(sp.activation_bytes[Recompute::full] * 4, four.activation_bytes[Recompute::full]);
  EXPECT_DOUBLE_EQ(sp.forward_flops, four.forward_flops);
  EXPECT_LT(sp.forward_s, four.forward_s);
}

TEST(CostModel, RecomputeModesOrderAndCost) {
  const ModelShape& m = *find_model_preset("gpt3-175b");
  const LayerCost c = decoder_layer_cost(m, *find_hardware_preset("a100-80g"), settings(8, false));
  EXPECT_GT(c.activation_bytes[Recompute::none], c.activation_bytes[Recompute::selective]);
  EXPECT_GT(c.activation_bytes[Recompute::selective], c.activation_bytes[Recompute::full]);
  EXPECT_EQ(c.recompute_extra_s[Recompute::none], 0.0);
  EXPECT_GT(c.recompute_extra_s[Recompute::selective], 0.0);
  EXPECT_DOUBLE_EQ(c.recompute_extra_s[Recompute::full],
                   c.forward_s);  // full: the whole forward again
  EXPECT_LT(c.recompute_extra_s[Recompute::selective], 0.2 * c.forward_s);  // selective is cheap
}

TEST(CostModel, CollectiveTimes) {
  HardwareSpec hw;
  hw.collective_efficiency = 1.0;
  hw.intra_node = {100, 0};
  hw.inter_node = {10, 0};
  // Ring all-reduce: 2 (k-1)/k of the buffer per device.
  EXPECT_DOUBLE_EQ(collective_time_s(hw, Collective::all_reduce, 4, 4e9, false),
                   2 * 0.75 * 4e9 / 100e9);
  EXPECT_DOUBLE_EQ(collective_time_s(hw, Collective::all_gather, 4, 4e9, true), 0.75 * 4e9 / 10e9);
  EXPECT_DOUBLE_EQ(collective_time_s(hw, Collective::all_reduce, 1, 4e9, false), 0.0);
  // A full-mesh node (HCCS) drives k-1 links at once.
  hw.intra_node_mesh = true;
  EXPECT_DOUBLE_EQ(collective_time_s(hw, Collective::all_reduce, 4, 4e9, false),
                   2 * 0.75 * 4e9 / 300e9);
}

TEST(CostModel, StaticBytesWithZero1) {
  OptimizerSettings adam;  // fp32 grads, master weights, zero 0: 2 + 4 + 12 = 18 bytes/param
  EXPECT_EQ(static_bytes(1000, 2, adam, 8), 18000);
  adam.zero_stage = 1;  // optimizer state over dp 8: 2 + 4 + 12/8
  EXPECT_EQ(static_bytes(1000, 2, adam, 8), 7500);
  adam.grad_bytes = 2;
  adam.master_weights = false;  // 2 + 2 + 8/8
  EXPECT_EQ(static_bytes(1000, 2, adam, 8), 5000);
}

TEST(CostModel, DpTailCrossesNodesOnlyWhenTheGroupDoes) {
  // pp 2 x dp 8 on two nodes of 8: each pipeline rank's dp group is one node (NVLink).
  const Config c = parse_config(
      "cluster: {nodes: 2, devices_per_node: 8, device: {preset: h200}}\n"
      "model: {preset: llama2-7b}\n"
      "training: {pp: 2, seq_length: 4096, global_batch_size: 64}\n",
      "t.yaml");
  const Time in_node = tail_time(*prepare(c), 0, 1'000'000'000);
  Config wide = c;
  wide.cluster.devices_per_node = 4;  // now the dp group of 8 spans two nodes (NICs)
  wide.cluster.nodes = 4;
  const Time across = tail_time(*prepare(wide), 0, 1'000'000'000);
  EXPECT_GT(across, 5 * in_node);
  Config zero = c;
  zero.training.optimizer.zero_stage = 1;
  EXPECT_LT(tail_time(*prepare(zero), 0, 1'000'000'000), in_node);
}

}  // namespace
}  // namespace bmpipe
