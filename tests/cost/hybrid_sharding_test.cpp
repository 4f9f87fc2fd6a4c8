// Hybrid sharding (issue 39 item 3: training.fsdp_shard_group, Megatron-LM's
// --num-distributed-optimizer-instances) and FSDP2 without resharding after forward
// (training.fsdp_reshard_after_forward). Volumes on each link, memory and the inputs
// refused, every expected value worked by hand from the shapes below.
#include <gtest/gtest.h>

#include "experiment/config_cases.hpp"
#include "experiment/experiment.hpp"
#include "support/run_config.hpp"
#include "support/sharding_cases.hpp"
#include "support/sub_op.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace hybrid_sharding_test {

using test::llama_dp16;
using test::op;

std::shared_ptr<const Experiment> experiment(const std::string& text) {
  return prepare(parse_config(text, "hsdp.yaml"));
}

constexpr std::int64_t kLayerParams = 202'383'360;

// ZeRO-1, dp 16 = 2 copies x a shard group of the 8 GPUs of a node. 1.6e9 parameters of
// fp32 gradients, S = 6.4e9 bytes:
//   reduce-scatter over the 8 of a node (ring, one domain): S x 7/8 / 100 GB/s = 56 ms;
//   all-reduce of each member's S / 8 = 0.8e9 bytes with its peer in the other node (ring
//   over 2 domains, one member each, on the NIC): 0.8e9 x 2 (2 - 1)/2 / 10 GB/s = 80 ms
//   (the tree would take 0.8e9 / 10 GB/s / 0.92 = 87 ms);
//   together 136 ms.
// The whole dp 16 as one group: a ring through 2 nodes, 8 NICs a node at once (bus
// bandwidth min(8 x 10, 100 x 8/7) = 80 GB/s): 6.4e9 x 15/16 / 80 GB/s = 75 ms.
TEST(HybridSharding, ReductionReduceScattersInsideTheNodeAndAllReducesAcross) {
  const auto hsdp = experiment(llama_dp16("{zero_stage: 1}", "  fsdp_shard_group: 8\n"));
  const auto flat = experiment(llama_dp16("{zero_stage: 1}"));
  EXPECT_EQ(hsdp->analytic->shard_copies, 2);
  EXPECT_EQ(hsdp->analytic->dense_shard(), 8);
  EXPECT_EQ(flat->analytic->shard_copies, 1);
  const std::int64_t params = 1'600'000'000;
  EXPECT_NEAR(static_cast<double>(stage_grad_reduce_time(*hsdp, 0, params)), 136e6, 2);
  EXPECT_NEAR(static_cast<double>(stage_grad_reduce_time(*flat, 0, params)), 75e6, 2);
}

// The same ZeRO-1 tail: the step on the shard, then the all-gather of the updated bf16
// parameters (3.2e9 bytes) over the shard group: 3.2e9 x 7/8 / 100 GB/s = 28 ms inside the
// node, against 3.2e9 x 15/16 / 80 GB/s = 37.5 ms over the whole dp 16. The step runs on
// 1/8 of the parameters instead of 1/16: twice as long. So
//   tail(hsdp) - 28 ms = 2 (tail(flat) - 37.5 ms).
TEST(HybridSharding, TheStepAndTheGatherRunOnTheShardGroup) {
  const auto hsdp = experiment(llama_dp16("{zero_stage: 1}", "  fsdp_shard_group: 8\n"));
  const auto flat = experiment(llama_dp16("{zero_stage: 1}"));
  const std::int64_t params = 1'600'000'000;
  const double step_hsdp = static_cast<double>(optimizer_tail_time(*hsdp, 0, params)) - 28e6;
  const double step_flat = static_cast<double>(optimizer_tail_time(*flat, 0, params)) - 37.5e6;
  EXPECT_GT(step_flat, 0);
  EXPECT_NEAR(step_hsdp, 2 * step_flat, 4);
}

// Memory divides by the shard group, not dp: per parameter, bf16 weights (2), fp32
// gradients (4) and Adam's 12 bytes.
//   ZeRO-1: 2 + 4 + 12/8 = 7.5 bytes (dp 16: 2 + 4 + 12/16 = 6.75)
//   ZeRO-3: 18/8 = 2.25 bytes (dp 16: 18/16 = 1.125)
TEST(HybridSharding, MemoryDividesByTheShardGroup) {
  const auto layer_bytes = [](const std::string& opt, const std::string& extra) {
    return experiment(llama_dp16(opt, extra))->layers.layers[10].static_bytes;
  };
  const std::int64_t P = kLayerParams;
  EXPECT_EQ(layer_bytes("{zero_stage: 1}", "  fsdp_shard_group: 8\n"), P * 15 / 2);
  EXPECT_EQ(layer_bytes("{zero_stage: 1}", ""), P * 27 / 4);
  EXPECT_EQ(layer_bytes("{zero_stage: 3}", "  fsdp_shard_group: 8\n"), P * 9 / 4);
  EXPECT_EQ(layer_bytes("{zero_stage: 3}", ""), P * 9 / 8);
}

// ZeRO-3 over the shard group: a decoder layer all-gathers its bf16 parameters over the
// 8 GPUs of its node, 202,383,360 x 2 x 7/8 / 100 GB/s = 3.5417088 ms, and
// reduce-scatters its fp32 gradients there, x 2 = 7.0834176 ms. The first layer of an op
// shows all of it (the sub-op's exposed part plus first_*). Over the whole dp 16 the
// gather crosses the nodes: 404,766,720 x 15/16 / 80 GB/s = 4.74336 ms.
// The copies then all-reduce the gradient shard once an iteration (the layers' part:
// 1.6e9 parameters as above, 80 ms), which the whole group does not need.
TEST(HybridSharding, StageThreeGathersInsideTheNodeAndAllReducesTheShardAcross) {
  const auto hsdp = experiment(llama_dp16("{zero_stage: 3}", "  fsdp_shard_group: 8\n"));
  const auto flat = experiment(llama_dp16("{zero_stage: 3}"));
  const CostSettings& st = hsdp->analytic->settings;
  EXPECT_EQ(st.param_shard_dp, 8);
  EXPECT_EQ(st.param_shard_dp_per_domain, 8);
  EXPECT_FALSE(st.dp_crosses_nodes);
  const LayerCost& d = hsdp->analytic->decoder;
  EXPECT_NEAR(op(d, "param_all_gather").forward_s + d.first_forward_s, 3.5417088e-3, 1e-12);
  EXPECT_NEAR(op(d, "param_all_gather").backward_input_s +
                  op(d, "grad_reduce_scatter").backward_weight_s + d.first_backward_input_s +
                  d.first_backward_weight_s,
              3.5417088e-3 + 7.0834176e-3, 1e-12);
  const LayerCost& f = flat->analytic->decoder;
  EXPECT_NEAR(op(f, "param_all_gather").forward_s + f.first_forward_s, 4.74336e-3, 1e-12);
  const std::int64_t params = 1'600'000'000;
  EXPECT_NEAR(static_cast<double>(stage_grad_reduce_time(*hsdp, 0, params)), 80e6, 2);
  EXPECT_EQ(stage_grad_reduce_time(*flat, 0, params), 0);
}

// FSDP2's HSDP (training.fsdp_all_reduce_every_microbatch; pytorch/pytorch 62a45b6f,
// torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py: all_reduce_grads True unless
// set_requires_all_reduce(False), and foreach_reduce then all-reduces the reduce-scattered
// shard over the replicate group after every backward; torchtitan b5bcd76c never turns it
// off). 2 copies x a shard group of 8 per node, as above: each decoder layer's backward
// reduce-scatters its fp32 gradients inside the node (7.0834176 ms) and then all-reduces its
// shard, P x 4 / 8 = 101,191,680 bytes, with the peer copy in the other node (a ring of 2
// domains on the 10 GB/s NIC): 101,191,680 x 2 (2 - 1)/2 / 10 GB/s = 10.119168 ms. So every
// micro-batch moves 32 x 101,191,680 = 3,238,133,760 bytes across the nodes a rank, m of
// them an iteration (Megatron-FSDP: once). The first layer of an op shows all of its
// backward traffic: 3.5417088 (gather) + 7.0834176 + 10.119168 = 20.7442944 ms; nothing is
// left for the end of the iteration. Refused below stage 3 (no layer reduces there).
TEST(HybridSharding, Fsdp2AllReducesTheShardAcrossInEveryBackward) {
  const auto every = experiment(llama_dp16("{zero_stage: 3}",
                                           "  fsdp_shard_group: 8\n"
                                           "  fsdp_all_reduce_every_microbatch: true\n"));
  const auto once = experiment(llama_dp16("{zero_stage: 3}", "  fsdp_shard_group: 8\n"));
  const CostSettings& st = every->analytic->settings;
  EXPECT_EQ(st.param_replicas_dp, 2);
  EXPECT_EQ(st.param_replicas_dp_per_domain, 1);
  EXPECT_EQ(once->analytic->settings.param_replicas_dp, 1);
  const auto backward = [](const LayerCost& d) {
    return op(d, "param_all_gather").backward_input_s +
           op(d, "grad_reduce_scatter").backward_weight_s + d.first_backward_input_s +
           d.first_backward_weight_s;
  };
  EXPECT_NEAR(backward(every->analytic->decoder), 20.7442944e-3, 1e-12);
  EXPECT_NEAR(backward(once->analytic->decoder), 3.5417088e-3 + 7.0834176e-3, 1e-12);
  // The forward is untouched.
  EXPECT_NEAR(op(every->analytic->decoder, "param_all_gather").forward_s +
                  every->analytic->decoder.first_forward_s,
              3.5417088e-3, 1e-12);
  const std::int64_t params = 1'600'000'000;
  EXPECT_EQ(stage_grad_reduce_time(*every, 0, params), 0);
  EXPECT_NEAR(static_cast<double>(stage_grad_reduce_time(*once, 0, params)), 80e6, 2);
  const ConfigError e =
      test::config_error(llama_dp16("{zero_stage: 1}",
                                    "  fsdp_shard_group: 8\n"
                                    "  fsdp_all_reduce_every_microbatch: true\n"));
  EXPECT_EQ(e.key(), "training.fsdp_all_reduce_every_microbatch");
  EXPECT_TRUE(test::has(e.message(), "but zero_stage is 1")) << e.message();
}

// FSDP2 without resharding after forward, on the same shard group: the backward finds its
// parameters gathered, so only the reduce-scatter is left, 7.0834176 ms for the first layer
// and none of the gather; the forward keeps its 3.5417088 ms. Memory: the gathered copy
// (2 bytes a parameter) beside the shard's 18/8: 4.25 bytes; no working set of two
// gathered layers on top (it is in the static bytes).
TEST(HybridSharding, WithoutReshardingTheBackwardGatherIsGone) {
  const auto kept = experiment(llama_dp16("{zero_stage: 3}",
                                          "  fsdp_shard_group: 8\n"
                                          "  fsdp_reshard_after_forward: false\n"));
  const auto resharded = experiment(llama_dp16("{zero_stage: 3}", "  fsdp_shard_group: 8\n"));
  const LayerCost& d = kept->analytic->decoder;
  EXPECT_EQ(op(d, "param_all_gather").backward_input_s, 0.0);
  EXPECT_EQ(d.first_backward_input_s, 0.0);
  EXPECT_NEAR(op(d, "grad_reduce_scatter").backward_weight_s + d.first_backward_weight_s,
              7.0834176e-3, 1e-12);
  EXPECT_NEAR(op(d, "param_all_gather").forward_s + d.first_forward_s, 3.5417088e-3, 1e-12);
  EXPECT_EQ(kept->layers.layers[10].static_bytes, kLayerParams * 17 / 4);
  EXPECT_EQ(kept->sharded_working_bytes, 0);
  EXPECT_GT(resharded->sharded_working_bytes, 0);
}

// The inputs refused, each against its key and line (the extra key is on line 13).
TEST(HybridSharding, BadInputsAreRefusedNamingTheKey) {
  struct Case {
    std::string optimizer, extra, key, says;
    int line;
  };
  const Case cases[] = {
      {"{zero_stage: 1}", "  fsdp_shard_group: 3\n", "training.fsdp_shard_group",
       "3 does not divide dp = 16", 13},
      {"{zero_stage: 0}", "  fsdp_shard_group: 8\n", "training.fsdp_shard_group",
       "nothing is sharded", 13},
      {"{zero_stage: 1}", "  fsdp_reshard_after_forward: false\n",
       "training.fsdp_reshard_after_forward", "zero_stage is 1", 13},
  };
  for (const Case& c : cases) {
    const ConfigError e = test::config_error(llama_dp16(c.optimizer, c.extra));
    EXPECT_EQ(e.key(), c.key);
    EXPECT_EQ(e.line(), c.line);
    EXPECT_TRUE(test::has(e.message(), c.says)) << e.message();
  }
}

// Mixtral 8x7B on 64 GPUs, tp 2 cp 2 ep 4 pp 2: dp x cp = 16, edp 8. A shard group of 1
// makes 16 copies, which edp 8 cannot hold; 2 makes 8, one expert member each.
TEST(HybridSharding, TheCopiesMustDivideTheExpertDataParallelGroup) {
  const auto text = [](int shard) {
    return "cluster:\n  nodes: 8\n  devices_per_node: 8\n  device: {preset: h100-sxm}\n"
           "model:\n  hf_config: \"" +
           std::string(BMPIPE_SOURCE_DIR) +
           "/configs/presets/hf/mixtral-8x7b.json\"\n"
           "training:\n  pp: 2\n  tp: 2\n  cp: 2\n  ep: 4\n  sequence_parallel: true\n"
           "  seq_length: 4096\n  microbatches: 4\n  optimizer: {zero_stage: 3}\n"
           "  fsdp_shard_group: " +
           std::to_string(shard) + "\n";
  };
  const ConfigError e = test::config_error(text(1));
  EXPECT_EQ(e.key(), "training.fsdp_shard_group");
  EXPECT_TRUE(test::has(e.message(), "16 copies")) << e.message();
  EXPECT_TRUE(test::has(e.message(), "edp = 8")) << e.message();
  const auto ok = prepare(parse_config(text(2), "mixtral.yaml"));
  EXPECT_EQ(ok->analytic->shard_copies, 8);
  EXPECT_EQ(ok->analytic->edp_shard(), 1);
  EXPECT_EQ(ok->analytic->settings.param_shard_dp, 2);
}

TEST(HybridSharding, TheCliExitsTwoWithFileLineAndKey) {
  test::ScratchDir dir;
  const std::string bad = test::write_file(
      dir.file("hsdp_shard3.yaml"), llama_dp16("{zero_stage: 1}", "  fsdp_shard_group: 3\n"));
  const test::CliRun r = test::run_cli("simulate '" + bad + "'");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(test::has(r.err, bad + ":13")) << r.err;
  EXPECT_TRUE(test::has(r.err, "training.fsdp_shard_group")) << r.err;
}

}  // namespace hybrid_sharding_test
}  // namespace bmpipe
