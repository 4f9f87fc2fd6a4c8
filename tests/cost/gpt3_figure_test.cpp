// The published end-to-end figure: GPT-3 175B on 1024 A100-80GB with Megatron-LM
// (README weak-scaling table; Narayanan et al. 2021): tp 8, pp 16, dp 8, mbs 1, gbs 1536,
// seq 2048, full recompute, 1F1B -> about 138 TFLOP/s per GPU and about 32 s per iteration.
// configs/examples/gpt3_175b_a100.yaml runs through prepare + assemble + simulate with the
// a100-80g preset; both figures must land within 15 %.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>

#include "experiment/experiment.hpp"
#include "support/run_config.hpp"

namespace bmpipe {
namespace {

TEST(Gpt3Figure, MegatronA100WithinFifteenPercent) {
  const auto t0 = std::chrono::steady_clock::now();
  const Config c =
      load_config(std::string(BMPIPE_SOURCE_DIR) + "/configs/examples/gpt3_175b_a100.yaml");
  ASSERT_EQ(c.training.microbatches, 192);

  const test::Prepared run = test::prepare_run(c);
  ASSERT_EQ(run.experiment->topology->num_devices(), 1024);
  const Schedule& schedule = run.schedule;
  const SimInput& input = run.input;
  const SimResult r = simulate(input, schedule);
  ASSERT_TRUE(r.ok) << r.error;
  const RunInfo& info = run.info;
  const double seconds = static_cast<double>(r.iteration_time) * 1e-9;
  const double tflops = info.hardware_flops_per_iteration / (seconds * info.devices) / 1e12;
  const double mfu =
      info.model_flops_per_iteration / (seconds * info.peak_flops_per_device * info.devices);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf(
      "GPT-3 175B / 1024 A100: %.2f s per iteration (target 32), %.1f TFLOP/s per GPU "
      "(target 138), MFU %.1f %%, pipeline %.2f s, tail %.2f s; simulated in %.2f s\n",
      seconds, tflops, 100 * mfu, ns_to_ms(r.pipeline_time) / 1e3,
      ns_to_ms(input.tail_time.empty() ? 0 : input.tail_time[0]) / 1e3, wall);
  EXPECT_NEAR(seconds, 32.0, 0.15 * 32.0);
  EXPECT_NEAR(tflops, 138.0, 0.15 * 138.0);
  // Memory: every rank fits in 80 GB with full recompute.
  EXPECT_TRUE(r.fits);
}

}  // namespace
}  // namespace bmpipe
