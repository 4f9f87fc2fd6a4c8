// ZeRO-3 / FSDP communication as Megatron-FSDP and torch FSDP2 overlap it (issue 39 item 3):
// the prefetched all-gather hidden exactly when the compute before it is longer and exposed
// by the difference when not; FSDP2's HSDP all-reduce on a stream of its own beside the
// gather and reduce-scatter; Megatron-FSDP's HSDP all-reduce in the last backward, per unit.
// Every expected value is worked by hand from the links and sizes below.
#include <gtest/gtest.h>

#include <algorithm>

#include "experiment/config_cases.hpp"
#include "experiment/experiment.hpp"
#include "support/run_config.hpp"
#include "support/sharding_cases.hpp"
#include "support/sub_op.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace fsdp_overlap_test {

using test::op;
using test::round_links;

// 1e9 parameters, bf16 weights and bf16 gradients, sharded over the 4 of a node:
//   AG = 3/4 x 2e9 bytes / 100 GB/s = 15 ms, RS the same 15 ms.
LayerCost layer(double f, double b) {
  LayerCost c;
  c.param_count = 1'000'000'000;
  c.forward_s = f;
  c.backward_input_s = b / 2;
  c.backward_weight_s = b / 2;
  return c;
}
CostSettings sharded() {
  CostSettings st;
  st.param_shard_dp = 4;
  st.dtype_bytes = 2;
  st.grad_bytes = 2;
  return st;
}

// The frameworks gather layer i+1 while layer i computes (Megatron-FSDP's
// all_gather_params prefetch in FORWARD_PASS_ORDER / BACKWARD_PASS_ORDER, NVIDIA/Megatron-LM
// d98e8a64 megatron/core/distributed/fsdp/src/megatron_fsdp/param_and_grad_buffer.py;
// FSDP2's forward and backward prefetch). A layer exposes max(0, AG - F) in forward, and
// in backward max(0, AG + RS - B) on the one chain the gather and the reduce-scatter share.
TEST(FsdpOverlap, TheGatherHidesExactlyWhenTheComputeIsLonger) {
  struct Case {
    double f, b;      // compute, s
    double fwd, bwd;  // exposed by the layer's sub-ops, s
  };
  // AG = 15 ms, AG + RS = 30 ms.
  const Case cases[] = {
      {0.020, 0.040, 0.0, 0.0},      // longer compute: hidden
      {0.015, 0.030, 0.0, 0.0},      // equal: hidden, nothing left
      {0.010, 0.020, 0.005, 0.010},  // shorter: the difference shows
      {0.0, 0.0, 0.015, 0.030},      // none: all of it
  };
  for (const Case& k : cases) {
    LayerCost c = layer(k.f, k.b);
    add_param_sharding_comm(c, round_links(), sharded());
    EXPECT_NEAR(op(c, "param_all_gather").forward_s, k.fwd, 1e-15) << k.f;
    EXPECT_NEAR(
        op(c, "param_all_gather").backward_input_s + op(c, "grad_reduce_scatter").backward_weight_s,
        k.bwd, 1e-15)
        << k.b;
    EXPECT_NEAR(c.forward_s, k.f + k.fwd, 1e-15);
    // The op's first layer has nothing before it: it shows its gather whole (15 ms), and
    // in backward its gather and the op's last reduce-scatter (30 ms).
    EXPECT_NEAR(op(c, "param_all_gather").forward_s + c.first_forward_s, 0.015, 1e-15);
    EXPECT_NEAR(op(c, "param_all_gather").backward_input_s +
                    op(c, "grad_reduce_scatter").backward_weight_s + c.first_backward_input_s +
                    c.first_backward_weight_s,
                0.030, 1e-15);
  }
}

// FSDP2's HSDP (CostSettings::param_replicas_dp): 2 copies of the shard group of 4, the
// replica pair in two nodes. Each layer all-reduces its reduce-scattered shard, 1e9 x 2 / 4
// = 5e8 bytes, with its peer over the NIC: 2 (2-1)/2 x 5e8 / 10 GB/s = 50 ms (a ring of two
// domains, one member each; the tree would be slower). That all-reduce runs on FSDP2's
// all_reduce_stream, which waits for the reduce-scatter stream only (pytorch/pytorch
// 010ae4a8 torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py, foreach_reduce), so in
// a run of alike layers the backward traffic paces at C = max(AG + RS, AR) = max(30, 50) =
// 50 ms a layer, not 80 ms. An op of n such layers under B of compute each exposes in
// backward X + (n-1) max(0, C - B), X = AG + RS + AR = 80 ms (the first gather and the last
// reduce-scatter and all-reduce, nothing to hide them).
TEST(FsdpOverlap, Fsdp2AllReducesOnItsOwnStreamBesideTheReduceScatter) {
  CostSettings st = sharded();
  st.param_replicas_dp = 2;
  st.param_replicas_dp_per_domain = 1;
  const auto backward = [&](double b) {
    LayerCost c = layer(0.010, b);
    add_param_sharding_comm(c, round_links(), st);
    return c;
  };
  // B = 40 ms: 50 - 40 = 10 ms a layer (it was 30 + 50 - 40 = 40 ms with the all-reduce on
  // the reduce-scatter's chain), none of it the gather's (15 < 40).
  LayerCost slow = backward(0.040);
  EXPECT_NEAR(op(slow, "param_all_gather").backward_input_s, 0.0, 1e-15);
  EXPECT_NEAR(op(slow, "grad_reduce_scatter").backward_weight_s, 0.010, 1e-15);
  // First layer: 80 ms in all, 15 of it before the backward (the gather), 80 - 10 - 15 =
  // 55 after.
  EXPECT_NEAR(slow.first_backward_input_s, 0.015, 1e-15);
  EXPECT_NEAR(slow.first_backward_weight_s, 0.055, 1e-15);
  // B = 50 ms: the all-reduce hides exactly; B = 60 ms: with room to spare.
  for (const double b : {0.050, 0.060}) {
    LayerCost c = backward(b);
    EXPECT_NEAR(op(c, "grad_reduce_scatter").backward_weight_s, 0.0, 1e-15) << b;
    EXPECT_NEAR(c.first_backward_input_s + c.first_backward_weight_s, 0.080, 1e-15) << b;
  }
  // The forward is untouched: 15 - 10 = 5 ms.
  EXPECT_NEAR(op(slow, "param_all_gather").forward_s, 0.005, 1e-15);
  // Without the replicas the same layer is the one-chain case: 30 - 40 < 0, hidden.
  LayerCost one = layer(0.010, 0.040);
  add_param_sharding_comm(one, round_links(), sharded());
  EXPECT_NEAR(op(one, "grad_reduce_scatter").backward_weight_s, 0.0, 1e-15);
  EXPECT_NEAR(one.first_backward_input_s + one.first_backward_weight_s, 0.030, 1e-15);
}

// test::llama_dp16 as 2 copies of a shard group of the 8 of a node, at ZeRO-3.
std::string llama_hsdp(const std::string& extra = "") {
  return test::llama_dp16("{zero_stage: 3}", "  fsdp_shard_group: 8\n" + extra);
}

// Megatron-FSDP's HSDP all-reduces across the copies once an iteration, in the last
// micro-batch's backward, each FSDP unit's gradient shard as its backward ends, on a stream
// of its own (Megatron-LM d98e8a64, megatron_fsdp.py _process_post_backward_gradients:
// outer_fsdp_group_grad_reduce on is_last_microbatch; param_and_grad_buffer.py
// _bucket_group_gradient_reduce: outer_fsdp_group_grad_reduce_stream), and it refuses ZeRO-3
// without overlap_grad_reduce (synchronize_gradient_reduce). So stage 3's reductions are
// buckets that start as the last backward reaches them, whatever overlap_grad_reduce says:
// before this they all waited for the last pipeline op, in series.
TEST(FsdpOverlap, MegatronFsdpAllReducesAcrossTheCopiesDuringTheLastBackward) {
  const test::Prepared p = test::prepare_run(parse_config(llama_hsdp(), "hsdp.yaml"));
  EXPECT_TRUE(p.input.overlap_grad_reduce);
  // A decoder layer (202,383,360 > the 40M bucket) is a bucket of its own: its shard,
  // P x 4 bytes (fp32 gradients) / 8 = 101,191,680 bytes, all-reduced with the peer copy
  // over the NIC: 101,191,680 / 10 GB/s = 10,119,168 ns.
  const std::vector<GradBucket>& buckets = p.input.grad_buckets.at(0);
  ASSERT_GE(buckets.size(), 3u);
  EXPECT_NEAR(static_cast<double>(buckets[1].time), 10'119'168.0, 1.0);
  EXPECT_LT(buckets[1].ready_b, 1.0);  // part-way through the last backward
  EXPECT_EQ(buckets.back().ready_b, 1.0);
  Time sum = 0;
  for (const GradBucket& g : buckets) sum += g.time;
  // The whole model's shard in one: 6,738,415,616 parameters x 4 / 8 / 10 GB/s.
  EXPECT_NEAR(static_cast<double>(sum), 6'738'415'616.0 * 4 / 8 / 10e9 * 1e9, 40.0);
  const SimResult r = simulate(p.input, p.schedule);
  ASSERT_TRUE(r.ok);
  const DeviceResult& d = r.devices.at(0);
  // Some of it hides under the last backward; the bucket that closes with it cannot.
  EXPECT_LT(d.tail_start - d.last_end, sum);
  EXPECT_GE(d.tail_start - d.last_end, buckets.back().time);
  // FSDP2's every-micro-batch all-reduce leaves nothing for the end (its layers hold it).
  const test::Prepared every = test::prepare_run(
      parse_config(llama_hsdp("  fsdp_all_reduce_every_microbatch: true\n"), "hsdp.yaml"));
  for (const GradBucket& g : every.input.grad_buckets.at(0)) EXPECT_EQ(g.time, 0);
}

}  // namespace fsdp_overlap_test
}  // namespace bmpipe
