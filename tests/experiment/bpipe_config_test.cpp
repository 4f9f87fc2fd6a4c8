// training.bpipe end to end: a schedule or mesh BPipe does not fit exits 2 naming
// FILE:LINE:key, and a 1F1B job that sets it balances its first and last devices' peaks as
// the engine's hand-worked case (tests/sim/bpipe_test.cpp) does.
#include <gtest/gtest.h>

#include "support/support.hpp"

namespace bmpipe {
namespace bpipe_config_test {

using test::CliRun;
using test::run_cli;
using test::ScratchDir;
using test::write_file;

// llama2-7b on 8 H200 of one node, tp 2, 8 micro-batches of 1 x 1024 tokens; the
// schedule on line 7, pp on line 8, `line` on line 13.
std::string yaml(const std::string& schedule, int pp, const std::string& line) {
  return "cluster:\n"                    // 1
         "  nodes: 1\n"                  // 2
         "  devices_per_node: 8\n"       // 3
         "  device: {preset: h200}\n"    // 4
         "model: {preset: llama2-7b}\n"  // 5
         "training:\n"                   // 6
         "  schedule: " +
         schedule + "\n" +                       // 7
         "  pp: " + std::to_string(pp) + "\n" +  // 8
         "  tp: 2\n"                             // 9
         "  seq_length: 1024\n"                  // 10
         "  micro_batch_size: 1\n"               // 11
         "  microbatches: 8\n"                   // 12
         "  " +
         line + "\n";  // 13
}

// `command` (simulate, compare, export) on `text` written to job.yaml.
CliRun cli(const ScratchDir& dir, const std::string& command, const std::string& text,
           const std::string& args = "") {
  return run_cli(command + " " + write_file(dir.file("job.yaml"), text) + args);
}

CliRun simulate(const ScratchDir& dir, const std::string& text, const std::string& args = "") {
  return cli(dir, "simulate", text, args);
}

void expect_refused(const CliRun& r, const ScratchDir& dir, const std::string& says) {
  EXPECT_EQ(r.code, 2) << r.all();
  EXPECT_NE(r.err.find(dir.file("job.yaml") + ":13: training.bpipe"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
}

TEST(BPipeConfig, WrongScheduleIsRefused) {
  ScratchDir dir;
  expect_refused(simulate(dir, yaml("gpipe", 4, "bpipe: true")), dir,
                 "training.schedule is gpipe (expected 1f1b");
  expect_refused(simulate(dir, yaml("zb-h1", 4, "bpipe: true")), dir, "(expected 1f1b");
}

TEST(BPipeConfig, TwoStagesHaveNothingToBalance) {
  ScratchDir dir;
  expect_refused(simulate(dir, yaml("1f1b", 2, "bpipe: true")), dir, "needs pp >= 3");
}

TEST(BPipeConfig, NotWithActivationOffload) {
  ScratchDir dir;
  const std::string text = yaml("1f1b", 4, "bpipe: true") + "  offload_modules: core_attn\n";
  expect_refused(simulate(dir, text), dir, "cannot be combined with training.offload_modules");
}

TEST(BPipeConfig, NotABoolean) {
  ScratchDir dir;
  const CliRun r = simulate(dir, yaml("1f1b", 4, "bpipe: sometimes"));
  EXPECT_EQ(r.code, 2) << r.all();
  EXPECT_NE(r.err.find(dir.file("job.yaml") + ":13"), std::string::npos) << r.err;
}

// pp 4, 8 micro-batches: rank 0 holds 4 micro-batches' activations of its stage without
// BPipe and K = ceil(5 / 2) = 3 with it (NVLink copies of a stage's activations take far
// less than an op, so the plan of the hand-worked case holds: micro-batches 1, 3, 5 and 6
// go to rank 3 and come back in time). So rank 0's activation peak is exactly 3/4 of the
// plain one, rank 3's grows (its own one plus up to two of rank 0's), ranks 1 and 2 keep
// theirs, and nothing waits.
TEST(BPipeConfig, BalancesTheFirstAndLastDevices) {
  ScratchDir dir;
  const CliRun plain = simulate(dir, yaml("1f1b", 4, "bpipe: false"), " --json");
  ASSERT_EQ(plain.code, 0) << plain.all();
  const CliRun balanced = simulate(dir, yaml("1f1b", 4, "bpipe: true"), " --json");
  ASSERT_EQ(balanced.code, 0) << balanced.all();
  const auto p = nlohmann::json::parse(plain.out)["devices"];
  const auto b = nlohmann::json::parse(balanced.out)["devices"];
  auto act = [](const nlohmann::json& d, int r) {
    return d[r]["peak_activation_bytes"].get<std::int64_t>();
  };
  EXPECT_EQ(4 * act(b, 0), 3 * act(p, 0));
  EXPECT_EQ(act(b, 1), act(p, 1));
  EXPECT_EQ(act(b, 2), act(p, 2));
  EXPECT_GT(act(b, 3), act(p, 3));
  EXPECT_LT(b[0]["peak_memory_bytes"].get<std::int64_t>(),
            p[0]["peak_memory_bytes"].get<std::int64_t>());
  for (int r = 0; r < 4; ++r) EXPECT_EQ(b[r]["reload_wait_ms"], 0.0) << r;
}

// compare runs the config's BPipe under 1F1B and refuses it, row by row, under the others.
TEST(BPipeConfig, CompareRefusesItForOtherSchedules) {
  ScratchDir dir;
  const CliRun r =
      cli(dir, "compare", yaml("1f1b", 4, "bpipe: true"), " --schedules 1f1b,zb-h1 --json");
  ASSERT_EQ(r.code, 0) << r.all();
  const auto rows = nlohmann::json::parse(r.out);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0]["schedule"], "1f1b");
  EXPECT_EQ(rows[1]["schedule"], "zb-h1");
  EXPECT_EQ(rows[1]["ok"], false);
  EXPECT_NE(rows[1]["error"].get<std::string>().find("training.bpipe"), std::string::npos)
      << rows[1];
}

// Megatron-LM has no BPipe: the export states plain 1F1B and says it dropped the key.
TEST(BPipeConfig, ExportsDropItWithANote) {
  ScratchDir dir;
  const CliRun r = cli(dir, "export", yaml("1f1b", 4, "bpipe: true"), " --format megatron");
  ASSERT_EQ(r.code, 0) << r.all();
  EXPECT_NE(r.out.find("# Not stated: training.bpipe: Megatron-LM has no BPipe"), std::string::npos)
      << r.out;
}

}  // namespace bpipe_config_test
}  // namespace bmpipe
