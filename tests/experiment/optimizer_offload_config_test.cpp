// training.optimizer.offload_fraction's refusals: each bad input exits 2 naming FILE:LINE:key
// (a fraction outside [0, 1] or not a number, offload without the distributed optimizer, a
// device with no host link, a host whose memory the offloaded state overflows).
#include <gtest/gtest.h>

#include "support/support.hpp"

namespace bmpipe {
namespace optimizer_offload_config_test {

using test::CliRun;
using test::run_cli;
using test::ScratchDir;
using test::write_file;

// llama2-7b on 8 devices of `device`, pp 2, tp 2 (dp 2); the optimizer line is line 15.
std::string yaml(const std::string& device, const std::string& optimizer) {
  return "cluster:\n"               // 1
         "  nodes: 1\n"             // 2
         "  devices_per_node: 8\n"  // 3
         "  device: " +             // 4
         device +
         "\n"
         "model: {preset: llama2-7b}\n"  // 5
         "training:\n"                   // 6
         "  schedule: 1f1b\n"            // 7
         "  pp: 2\n"                     // 8
         "  tp: 2\n"                     // 9
         "  seq_length: 1024\n"          // 10
         "  micro_batch_size: 1\n"       // 11
         "  microbatches: 4\n"           // 12
         "  optimizer:\n"                // 13
         "    zero_stage: 1\n"           // 14
         "    " +
         optimizer + "\n";  // 15
}

CliRun simulate(const ScratchDir& dir, const std::string& text) {
  return run_cli("simulate " + write_file(dir.file("job.yaml"), text));
}

// The message starts FILE:LINE: KEY.
void expect_refused(const CliRun& r, const ScratchDir& dir, int line, const std::string& key) {
  EXPECT_EQ(r.code, 2) << r.all();
  EXPECT_NE(r.err.find(dir.file("job.yaml") + ":" + std::to_string(line) + ": " + key),
            std::string::npos)
      << r.err;
}

TEST(OptimizerOffloadConfig, FractionOutsideZeroToOneOrNotANumber) {
  ScratchDir dir;
  for (const char* bad : {"1.5", "-0.1", "half"}) {
    SCOPED_TRACE(bad);
    const CliRun r = simulate(dir, yaml("{preset: h200}", std::string("offload_fraction: ") + bad));
    expect_refused(r, dir, 15, "training.optimizer.offload_fraction");
  }
}

TEST(OptimizerOffloadConfig, ZeroAndOneAreAccepted) {
  ScratchDir dir;
  for (const char* ok : {"0", "1"}) {
    SCOPED_TRACE(ok);
    const CliRun r = simulate(dir, yaml("{preset: h200}", std::string("offload_fraction: ") + ok));
    EXPECT_EQ(r.code, 0) << r.all();
  }
}

TEST(OptimizerOffloadConfig, NeedsTheDistributedOptimizerAsMegatronDoes) {
  ScratchDir dir;
  std::string text = yaml("{preset: h200}", "offload_fraction: 0.5");
  text.replace(text.find("zero_stage: 1"), 13, "zero_stage: 0");
  const CliRun r = simulate(dir, text);
  expect_refused(r, dir, 15, "training.optimizer.offload_fraction");
  EXPECT_NE(r.err.find("only supported with distributed optimizer"), std::string::npos) << r.err;
}

TEST(OptimizerOffloadConfig, NoHostLinkIsRefused) {
  ScratchDir dir;
  const CliRun r = simulate(dir, yaml("{preset: ascend-910b}", "offload_fraction: 0.5"));
  expect_refused(r, dir, 15, "training.optimizer.offload_fraction");
  EXPECT_NE(r.err.find("host_link_GBps"), std::string::npos) << r.err;
}

TEST(OptimizerOffloadConfig, HostMemoryExceededIsRefused) {
  // llama2-7b's 6.74e9 parameters over tp 2 x pp 2 = 1.68e9 a rank, over dp 2 = 8.4e8 a
  // device; F = 0.5 puts 4.2e8 x 16 bytes = 6.3 GiB on the host per device, 8 devices a
  // host: 50.2 GiB, past a host of 40 GiB and within one of 60.
  ScratchDir dir;
  const CliRun over =
      simulate(dir, yaml("{preset: h200, host_memory_GiB: 40}", "offload_fraction: 0.5"));
  expect_refused(over, dir, 15, "training.optimizer.offload_fraction");
  EXPECT_NE(over.err.find("50.2 GiB"), std::string::npos) << over.err;
  const CliRun fits =
      simulate(dir, yaml("{preset: h200, host_memory_GiB: 60}", "offload_fraction: 0.5"));
  EXPECT_EQ(fits.code, 0) << fits.all();
}

}  // namespace optimizer_offload_config_test
}  // namespace bmpipe
