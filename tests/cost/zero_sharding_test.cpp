// Sharded data parallelism (issue 19 item 3): optimizer.zero_stage 2 and 3, training.fsdp.
// ZeRO-3's per-layer all-gathers and reduce-scatters (volumes, overlap, the first layer
// exposed), the static memory of stages 0-3, the tail model, and the inputs refused.
// Expected values are worked by hand from the shapes below, never read off the code.
#include <gtest/gtest.h>

#include "experiment/config_cases.hpp"
#include "experiment/experiment.hpp"
#include "support/run_config.hpp"
#include "support/sharding_cases.hpp"
#include "support/sub_op.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace zero_sharding_test {

using test::op;
using test::round_links;

// 1e9 parameters of bf16 over dp 4: the all-gather moves (4-1)/4 x 2e9 = 1.5e9 bytes per
// device, 15 ms at 100 GB/s; the reduce-scatter of fp32 gradients 3e9 bytes, 30 ms.
TEST(ZeroSharding, AllGatherAndReduceScatterVolumesOnAHandLayer) {
  CostSettings st;
  st.param_shard_dp = 4;
  LayerCost free_compute;
  free_compute.param_count = 1'000'000'000;
  add_param_sharding_comm(free_compute, round_links(), st);
  // Nothing to hide behind: all of the gather shows in forward and in the input-grad, the
  // reduce-scatter in the weight-grad.
  EXPECT_NEAR(op(free_compute, "param_all_gather").forward_s, 0.015, 1e-15);
  EXPECT_NEAR(op(free_compute, "param_all_gather").backward_input_s, 0.015, 1e-15);
  EXPECT_NEAR(op(free_compute, "grad_reduce_scatter").backward_weight_s, 0.030, 1e-15);

  // With compute: F = 10 ms, B = 10 + 10 ms. Forward: 15 - 10 = 5 ms exposed; the first
  // layer of an op adds the 10 ms hidden (min(15, 10)) so that it shows all 15.
  LayerCost c;
  c.param_count = 1'000'000'000;
  c.forward_s = 0.010;
  c.backward_input_s = 0.010;
  c.backward_weight_s = 0.010;
  add_param_sharding_comm(c, round_links(), st);
  EXPECT_NEAR(op(c, "param_all_gather").forward_s, 0.005, 1e-15);
  EXPECT_NEAR(c.forward_s, 0.015, 1e-15);
  EXPECT_NEAR(c.first_forward_s, 0.010, 1e-15);
  // Backward: 15 + 30 = 45 ms of traffic under 20 ms of compute: 25 exposed, none of it
  // the gather's (15 < 20); the first layer adds min(45, 20) = 20, 15 of it the gather's.
  EXPECT_NEAR(op(c, "param_all_gather").backward_input_s, 0.0, 1e-15);
  EXPECT_NEAR(op(c, "grad_reduce_scatter").backward_weight_s, 0.025, 1e-15);
  EXPECT_NEAR(c.first_backward_input_s, 0.015, 1e-15);
  EXPECT_NEAR(c.first_backward_weight_s, 0.005, 1e-15);
}

TEST(ZeroSharding, ExpertsGatherOverTheExpertDataParallelGroup) {
  // 1e9 dense over dp 4 (15 ms) plus 1e9 experts' over edp 2: (2-1)/2 x 2e9 = 1e9 bytes,
  // 10 ms.
  CostSettings st;
  st.param_shard_dp = 4;
  st.param_shard_edp = 2;
  LayerCost c;
  c.param_count = 2'000'000'000;
  c.expert_param_count = 1'000'000'000;
  add_param_sharding_comm(c, round_links(), st);
  EXPECT_NEAR(op(c, "param_all_gather").forward_s, 0.025, 1e-15);
}

// Llama-2-7B's layer at tp 1: 4 x 4096^2 + 3 x 4096 x 11008 + 2 x 4096 = 202,383,360
// parameters. Over dp 8 on 100 GB/s: 7/8 x 404,766,720 bytes = 3.54170880 ms.
TEST(ZeroSharding, TheDecoderLayerCarriesItsGatherAsASubOp) {
  const ModelShape& m = *find_model_preset("llama2-7b");
  HardwareSpec hw = *find_hardware_preset("h200");
  hw.intra_node = {100, 0};
  hw.collective_efficiency = 1.0;
  CostSettings plain;
  plain.seq_length = 4096;
  CostSettings sharded = plain;
  sharded.param_shard_dp = 8;
  const LayerCost a = decoder_layer_cost(m, hw, plain);
  const LayerCost b = decoder_layer_cost(m, hw, sharded);
  ASSERT_EQ(a.param_count, 202'383'360);
  const double ag = 7.0 / 8 * 202'383'360 * 2 / 100e9;
  EXPECT_NEAR(ag, 3.5417088e-3, 1e-15);
  EXPECT_NEAR(op(b, "param_all_gather").forward_s, std::max(0.0, ag - a.forward_s), 1e-12);
  EXPECT_NEAR(b.first_forward_s, std::min(ag, a.forward_s), 1e-12);
  EXPECT_EQ(b.ops.size(), a.ops.size() + 2);
  // The FLOPs are the same: communication is no model FLOP.
  EXPECT_DOUBLE_EQ(b.forward_flops, a.forward_flops);
}

TEST(ZeroSharding, StaticBytesOfStagesZeroToThree) {
  // Per parameter, bf16 weights, fp32 gradients and 12 bytes of Adam state, dp 8:
  OptimizerSettings adam;
  EXPECT_EQ(static_bytes(1000, 2, adam, 8), 18000);  // 2 + 4 + 12
  adam.zero_stage = 1;
  EXPECT_EQ(static_bytes(1000, 2, adam, 8), 7500);  // 2 + 4 + 12/8
  adam.zero_stage = 2;
  EXPECT_EQ(static_bytes(1000, 2, adam, 8), 4000);  // 2 + (4 + 12)/8
  adam.zero_stage = 3;
  EXPECT_EQ(static_bytes(1000, 2, adam, 8), 2250);  // (2 + 4 + 12)/8
}

/// Llama-2-7B, pp 4 (8 layers a stage) x dp 4 on one node of 16, 4 micro-batches.
std::string llama_pp4_dp4(const std::string& optimizer, double link_GBps = 1.0) {
  return "cluster:\n"
         "  nodes: 1\n"
         "  devices_per_node: 16\n"
         "  device: {preset: h200, reserved_GiB: 0, collective_efficiency: 1}\n"
         "  intra_node: {bandwidth_GBps: " +
         std::to_string(link_GBps) +
         ", latency_us: 0}\n"
         "model: {preset: llama2-7b}\n"
         "training:\n"
         "  pp: 4\n"
         "  seq_length: 4096\n"
         "  global_batch_size: 16\n"
         "  optimizer: " +
         optimizer + "\n";
}

TEST(ZeroSharding, StageStaticMemoryFollowsTheClosedForms) {
  // Stage 1 holds layers 8-15 only: 8 x P x bytes per parameter, P = 202,383,360, dp 4.
  const std::int64_t P = 202'383'360;
  const auto stage1 = [](const std::string& opt) {
    return test::prepare_run(parse_config(llama_pp4_dp4(opt), "z.yaml")).input.static_bytes[1];
  };
  EXPECT_EQ(stage1("{zero_stage: 0}"), 8 * 18 * P);
  EXPECT_EQ(stage1("{zero_stage: 1}"), 8 * 9 * P);  // 2 + 4 + 12/4
  EXPECT_EQ(stage1("{zero_stage: 2}"), 8 * 6 * P);  // 2 + 16/4
  // Stage 3: 18/4 a parameter, plus the gathered working set: the largest unit (a decoder
  // layer; the 32000 x 4096 embedding is smaller) and the prefetched next, bf16.
  EXPECT_EQ(stage1("{zero_stage: 3}"), 8 * 18 * P / 4 + 2 * P * 2);
}

TEST(ZeroSharding, WithFreeLinksStageThreeRunsAsStageZero) {
  // Links of 1e18 GB/s and no latency (beyond what a file may say; set here): a layer's
  // gather takes 4e-19 s, far below the engine's 1 ns, so every gather and reduce-scatter
  // rounds to 0, the pipeline is stage 0's, and the iteration ZeRO-1's (both step on a
  // shard).
  const auto run = [](int stage) {
    Config c = parse_config(llama_pp4_dp4("{zero_stage: " + std::to_string(stage) + "}"), "z.yaml");
    c.cluster.intra_node.bandwidth_GBps = 1e18;
    const test::Prepared p = test::prepare_run(c);
    return simulate(p.input, p.schedule);
  };
  const SimResult zero0 = run(0), zero1 = run(1), zero3 = run(3);
  ASSERT_TRUE(zero3.ok);
  EXPECT_EQ(zero3.pipeline_time, zero0.pipeline_time);
  EXPECT_EQ(zero3.iteration_time, zero1.iteration_time);
  EXPECT_LT(zero3.iteration_time, zero0.iteration_time);  // a quarter of the Adam step
}

TEST(ZeroSharding, WithSlowLinksTheExposedGatherIsTheHandComputedAmount) {
  // 1 GB/s: a layer's gather over dp 4 is 3/4 x 404,766,720 bytes = 303,575,040 ns and its
  // reduce-scatter (fp32) 607,150,080 ns, far above its compute. A stage op of 8 layers
  // then exposes its first gather whole and the 7 others less the compute before each:
  //   forward  = 8 F + AG + 7 (AG - F) = 8 AG + F
  //   backward = 8 B + (AG + RS) + 7 (AG + RS - B) = 8 (AG + RS) + B
  const Time ag = 303'575'040, rs = 607'150'080;
  const test::Prepared base =
      test::prepare_run(parse_config(llama_pp4_dp4("{zero_stage: 0}"), "z.yaml"));
  const test::Prepared fsdp =
      test::prepare_run(parse_config(llama_pp4_dp4("{zero_stage: 3}"), "z.yaml"));
  const LayerRow& layer = base.experiment->layers.layers[10];  // stage 1's, without comm
  const Time f = layer.forward, b = layer.backward_input + layer.backward_weight;
  const StageCost& s1 = fsdp.input.stages[1];
  EXPECT_NEAR(static_cast<double>(s1.forward), static_cast<double>(8 * ag + f), 10);
  EXPECT_NEAR(static_cast<double>(s1.backward_input + s1.backward_weight),
              static_cast<double>(8 * (ag + rs) + b), 10);
  // The tail has no gradient reduction left (the backward did it) and no gather.
  for (const auto& buckets : fsdp.input.grad_buckets)
    for (const GradBucket& g : buckets) EXPECT_EQ(g.time, 0);
}

TEST(ZeroSharding, OverlapParamGatherHidesTheGatherBehindTheFirstForward) {
  // ZeRO-1 over dp 4 at 1 GB/s: stage 1's 8 layers gather 3/4 x 8 x 404,766,720 bytes =
  // 2,428,600,320 ns after the step; overlapped, only what its forward op (8 F) leaves.
  const auto tail = [](const std::string& opt) {
    return test::prepare_run(parse_config(llama_pp4_dp4(opt), "z.yaml"));
  };
  // (Megatron-LM's --overlap-param-gather needs --overlap-grad-reduce: both have it.)
  const test::Prepared plain = tail("{zero_stage: 1, overlap_grad_reduce: true}");
  const test::Prepared over =
      tail("{zero_stage: 1, overlap_grad_reduce: true, overlap_param_gather: true}");
  const Time gather = 2'428'600'320;
  const Time f = plain.input.stages[1].forward;
  EXPECT_NEAR(static_cast<double>(plain.input.tail_time[1] - over.input.tail_time[1]),
              static_cast<double>(std::min(gather, f)), 2);
}

TEST(ZeroSharding, FsdpImpliesStageThreeAndMayNameTwo) {
  const auto stage = [](const std::string& training_extra, const std::string& opt) {
    std::string text = llama_pp4_dp4(opt);
    text += training_extra;
    return parse_config(text, "z.yaml").training.optimizer.zero_stage;
  };
  EXPECT_EQ(stage("  fsdp: true\n", "{master_weights: true}"), 3);
  EXPECT_EQ(stage("  fsdp: true\n", "{zero_stage: 2}"), 2);
  EXPECT_EQ(stage("  fsdp: false\n", "{zero_stage: 1}"), 1);
}

TEST(ZeroSharding, FsdpWithStageZeroOrOneIsRefusedNamingTheKey) {
  // The optimizer is on line 11, training.fsdp on line 12.
  const std::string text = llama_pp4_dp4("{zero_stage: 0}") + "  fsdp: true\n";
  const ConfigError e = test::config_error(text);
  EXPECT_EQ(e.key(), "training.optimizer.zero_stage");
  EXPECT_EQ(e.line(), 11);
  EXPECT_TRUE(test::has(e.message(), "fsdp"));
  const ConfigError four = test::config_error(llama_pp4_dp4("{zero_stage: 4}"));
  EXPECT_EQ(four.key(), "training.optimizer.zero_stage");
  EXPECT_EQ(four.line(), 11);
}

TEST(ZeroSharding, TheCliExitsTwoWithFileLineAndKey) {
  test::ScratchDir dir;
  const std::string bad = test::write_file(dir.file("fsdp_zero1.yaml"),
                                           llama_pp4_dp4("{zero_stage: 1}") + "  fsdp: true\n");
  const test::CliRun r = test::run_cli("simulate '" + bad + "'");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(test::has(r.err, bad + ":11")) << r.err;
  EXPECT_TRUE(test::has(r.err, "training.optimizer.zero_stage")) << r.err;
  const std::string four =
      test::write_file(dir.file("zero4.yaml"), llama_pp4_dp4("{zero_stage: 4}"));
  const test::CliRun r4 = test::run_cli("simulate '" + four + "'");
  EXPECT_EQ(r4.code, 2);
  EXPECT_TRUE(test::has(r4.err, four + ":11")) << r4.err;
  EXPECT_TRUE(test::has(r4.err, "training.optimizer.zero_stage")) << r4.err;
}

}  // namespace zero_sharding_test
}  // namespace bmpipe
