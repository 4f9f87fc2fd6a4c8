// Optimizer offload (issue 43, item 3): the closed forms of static_bytes, offload_host_bytes
// and optimizer_step_s with OptimizerSettings::offload_fraction, worked by hand, and the
// memory a whole run saves.
#include <gtest/gtest.h>

#include "sim/cost/cost_model.hpp"
#include "support/run_config.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace optimizer_offload_test {

OptimizerSettings distributed(double fraction, int zero_stage = 1) {
  OptimizerSettings o;
  o.zero_stage = zero_stage;
  o.offload_fraction = fraction;
  return o;
}

// A device with round figures: 1000 GB/s of HBM at full efficiency (1e12 bytes/s), a 64 GB/s
// host link of its own, 4 devices a host whose CPUs run Adam at `adam` 1e9 parameters/s.
HardwareSpec round_device(double adam) {
  HardwareSpec h;
  h.name = "round";
  h.hbm_GBps = 1000;
  h.memory_efficiency = 1.0;
  h.host_link = "pcie5_x16";
  h.host_link_GBps = 64;
  h.host_link_devices = 1;
  h.host_memory_GiB = 1024;
  h.host_devices = 4;
  h.host_adam_Gparams_per_s = adam;
  return h;
}

// P = 1e9 parameters, dp 2 under the distributed optimizer: the device's shard S = 5e8.
// bf16 weights (e = 2), fp32 gradients (g = 4), Adam with master weights (K = 12): the device
// step moves b = g + 2K + e = 30 bytes a parameter, at 1e12 bytes/s.
constexpr std::int64_t kParams = 1'000'000'000;
constexpr int kDp = 2;

TEST(OptimizerOffload, OffIsTheDeviceStepUnchanged) {
  // S b / 1e12 = 5e8 x 30 / 1e12 = 0.015 s.
  EXPECT_DOUBLE_EQ(optimizer_step_s(kParams, 2, distributed(0.0), kDp, round_device(1)), 0.015);
}

TEST(OptimizerOffload, HostBoundStepWorkedByHand) {
  // F = 0.25, host CPUs at A = 1e9 parameters/s shared by H = 4 devices:
  //   gradients to the host  F S 4 / L = 1.25e8 x 4 / 64e9 = 0.0078125 s
  //   device Adam            (1 - F) S b / 1e12 = 3.75e8 x 30 / 1e12 = 0.01125 s
  //   host Adam              F S H / A = 1.25e8 x 4 / 1e9 = 0.5 s        <- the max
  //   parameters back        F S e / L = 1.25e8 x 2 / 64e9 = 0.00390625 s
  //   step = 0.0078125 + max(0.01125, 0.5) + 0.00390625 = 0.51171875 s.
  EXPECT_NEAR(optimizer_step_s(kParams, 2, distributed(0.25), kDp, round_device(1)), 0.51171875,
              1e-12);
}

TEST(OptimizerOffload, DeviceBoundStepWorkedByHand) {
  // As above with A = 1000e9 parameters/s: host Adam 1.25e8 x 4 / 1e12 = 0.0005 s hides
  // under the device's 0.01125 s: step = 0.0078125 + 0.01125 + 0.00390625 = 0.02296875 s,
  // more than the 0.015 s of no offload (the copies are not hidden: they run on the
  // compute stream before and after the two steps).
  EXPECT_NEAR(optimizer_step_s(kParams, 2, distributed(0.25), kDp, round_device(1000)), 0.02296875,
              1e-12);
}

TEST(OptimizerOffload, SharedLinkAndEverythingOffloaded) {
  // F = 1, A = 1e9: no device step; host 5e8 x 4 / 1e9 = 2 s; the link shared by 2 devices
  // gives each 32e9 bytes/s: 5e8 x 4 / 32e9 = 0.0625 s out, 5e8 x 2 / 32e9 = 0.03125 s back.
  HardwareSpec h = round_device(1);
  h.host_link_devices = 2;
  EXPECT_NEAR(optimizer_step_s(kParams, 2, distributed(1.0), kDp, h), 2.09375, 1e-12);
}

TEST(OptimizerOffload, DeviceMemoryShrinksByExactlyTheOffloadedState) {
  // 1000 parameters, dp 8, e = 2, g = 4, K = 12 (master weights, m, v):
  //   ZeRO-1: 1000 (2 + 4 + 12/8) = 7500; F = 0.25 leaves K (1 - F) = 9: 1000 (2 + 4 + 9/8)
  //   = 7125, 375 = F x 12 x 1000 / 8 bytes less.
  EXPECT_EQ(static_bytes(1000, 2, distributed(0.0), 8), 7500);
  EXPECT_EQ(static_bytes(1000, 2, distributed(0.25), 8), 7125);
  // F = 1: all 12 x 1000 / 8 = 1500 bytes of state leave.
  EXPECT_EQ(static_bytes(1000, 2, distributed(1.0), 8), 6000);
  // ZeRO-2 and -3 shard the gradients (and weights) too; the state's share is the same.
  EXPECT_EQ(
      static_bytes(1000, 2, distributed(0.0, 2), 8) - static_bytes(1000, 2, distributed(0.5, 2), 8),
      750);  // 0.5 x 12 x 1000 / 8
  EXPECT_EQ(
      static_bytes(1000, 2, distributed(0.0, 3), 8) - static_bytes(1000, 2, distributed(0.5, 3), 8),
      750);
  // Without master weights the state is m and v: K = 8, 0.5 x 8 x 1000 / 8 = 500.
  OptimizerSettings no_master = distributed(0.5);
  no_master.master_weights = false;
  OptimizerSettings no_master_off = no_master;
  no_master_off.offload_fraction = 0;
  EXPECT_EQ(static_bytes(1000, 2, no_master_off, 8) - static_bytes(1000, 2, no_master, 8), 500);
}

TEST(OptimizerOffload, HostHoldsSixteenBytesAnOffloadedParameter) {
  // fp32 master weight, m, v and the gradient's fp32 copy: F x P / dp x 16 =
  // 0.25 x 1000 / 8 x 16 = 500 bytes; none with offload off.
  EXPECT_DOUBLE_EQ(offload_host_bytes(1000, distributed(0.25), 8), 500);
  EXPECT_DOUBLE_EQ(offload_host_bytes(1000, distributed(0.0), 8), 0);
}

// A whole run: llama2-7b on 8 h200 (pp 2, tp 2, dp 2, ZeRO-1), offload off and at F = 0.5.
std::string run_yaml(double fraction) {
  return "cluster:\n  nodes: 1\n  devices_per_node: 8\n  device: {preset: h200}\n"
         "model: {preset: llama2-7b}\n"
         "training:\n  schedule: 1f1b\n  pp: 2\n  tp: 2\n  seq_length: 1024\n"
         "  micro_batch_size: 1\n  microbatches: 4\n"
         "  optimizer: {zero_stage: 1, offload_fraction: " +
         std::to_string(fraction) + "}\n";
}

TEST(OptimizerOffload, ARunsStaticBytesShrinkByTheOffloadedState) {
  const test::Prepared off = test::prepare_run(parse_config(run_yaml(0.0), "off.yaml"));
  const test::Prepared on = test::prepare_run(parse_config(run_yaml(0.5), "on.yaml"));
  ASSERT_EQ(off.input.static_bytes.size(), 2u);
  const int dp = 2;
  const auto& rows = off.experiment->layers.layers;
  for (int rank = 0; rank < 2; ++rank) {
    SCOPED_TRACE(rank);
    // The rank's parameters, as assemble sums them (the tail's slots hold them).
    double params = 0;
    int count = 0;
    for (int l = 0; l < off.plan.partition[rank]; ++l) {
      const int layer = (rank == 0 ? 0 : off.plan.partition[0]) + l;
      params += static_cast<double>(rows[layer].param_count);
      ++count;
    }
    if (rank == 1) params += static_cast<double>(off.experiment->layers.head_copy_params);
    // 0.5 x 12 bytes x params / dp, each row rounded to a byte on its own.
    const double saved = static_cast<double>(off.input.static_bytes[rank]) -
                         static_cast<double>(on.input.static_bytes[rank]);
    EXPECT_NEAR(saved, 0.5 * 12 * params / dp, count + 1);
    EXPECT_GT(saved, 1e9);  // gigabytes, not rounding
  }
}

TEST(OptimizerOffload, ARunsStepGrowsByTheHostsShare) {
  // h200 preset: 64 GB/s, 8 devices a host at 3.89e9 parameters/s: the host's step is
  // far slower than the device's, so the tail grows.
  const test::Prepared off = test::prepare_run(parse_config(run_yaml(0.0), "off.yaml"));
  const test::Prepared on = test::prepare_run(parse_config(run_yaml(0.5), "on.yaml"));
  for (std::size_t r = 0; r < off.input.tail_time.size(); ++r)
    EXPECT_GT(on.input.tail_time[r], off.input.tail_time[r]) << r;
}

}  // namespace optimizer_offload_test
}  // namespace bmpipe
