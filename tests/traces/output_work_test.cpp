// The work limit counts what each output keeps per op (issue 42: an SVG of a run inside the
// work limits ran out of memory while drawing). A run whose outputs would pass the limit is
// refused before anything is allocated: exit 2 naming FILE:LINE:key, the estimate, the
// limit and the --max-ops that admits it; no output file is written.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "api/report.hpp"
#include "experiment/config.hpp"
#include "experiment/config_cases.hpp"
#include "experiment/output_work.hpp"
#include "support/support.hpp"
#include "traces/chrome_trace.hpp"
#include "traces/timeline.hpp"

namespace bmpipe {
namespace {

// 4 unit stages, 500 micro-batches: 4 x 500 x 3 = 6000 ops by the bound. Line 19 holds
// training.microbatches.
const std::string kRun = R"(cluster:
  nodes: 1
  devices_per_node: 4
  device: {name: unit, memory_GiB: 1}
  intra_node: {bandwidth_GBps: 100, latency_us: 0}
model:
  layers:
    - name: unit
      count: 8
      forward_ms: 0.5
      backward_input_ms: 0.5
      backward_weight_ms: 0.5
      activation_bytes: 1048576
      output_bytes: 0
      param_bytes: 1048576
training:
  schedule: 1f1b
  pp: 4
  microbatches: 500
)";

Config with_max_ops(std::int64_t max_ops) {
  Overrides o;
  o.limits = WorkLimits{};
  o.limits->max_ops = max_ops;
  return parse_config(kRun, "run.yaml", o);
}

TEST(OutputWork, TheFiguresAreTheMeasuredOnesWithTheirMargin) {
  // The simulation's 50 bytes per op are what the op limit's message has always counted;
  // the outputs' own figures are measured (traces/timeline.hpp, api/report.hpp) and
  // rounded up.
  EXPECT_EQ(kSimulationBytesPerOp, 50);
  EXPECT_EQ(kTimelineBytesPerOp, 75);
  EXPECT_EQ(kTraceBytesPerOp, 15);
  EXPECT_EQ(api::kReportBytesPerOp, 260);
}

TEST(OutputWork, WeightedOpsCountEachOutputsBytes) {
  const Config c = with_max_ops(100'000'000);
  EXPECT_EQ(op_bound(c), 6000);
  EXPECT_EQ(weighted_op_bound(c, {}), 6000);
  // 6000 x (50 + 75) / 50 = 15000; with a trace too, 6000 x 140 / 50 = 16800.
  EXPECT_EQ(weighted_op_bound(c, {{"--svg", 75}}), 15000);
  EXPECT_EQ(weighted_op_bound(c, {{"--svg", 75}, {"--trace", 15}}), 16800);
  // Rounded up: 6000 x 51 / 50 = 6120, 6000 x 50.001 / 50 is not a whole number.
  EXPECT_EQ(weighted_op_bound(c, {{"x", 1}}), 6120);
  // The report's 260: 6000 x 310 / 50 = 37200.
  EXPECT_EQ(weighted_op_bound(c, {{"the HTML report", 260}}), 37200);
}

TEST(OutputWork, PastTheLimitIsAConfigErrorBeforeTheRun) {
  const Config c = with_max_ops(10'000);
  check_output_work(c, {});                 // 6000: inside
  check_output_work(c, {{"--trace", 15}});  // 7800: inside
  try {
    check_output_work(c, {{"--svg", 75}});  // 15000: past 10000
    ADD_FAILURE() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.file(), "run.yaml");
    EXPECT_EQ(e.line(), 19);
    EXPECT_EQ(e.key(), "training.microbatches");
    EXPECT_EQ(e.message(),
              "this run needs up to 6000 ops (4 stages x 500 micro-batches x 3), and --svg keeps "
              "about 75 bytes per op on top of the simulation's 50: about 1 MiB, the work of "
              "15000 ops; the limit is 10000 ops (about 1 MiB); raise it with --max-ops "
              "15000, or run with fewer micro-batches");
  }
  // Exactly at the limit is inside.
  check_output_work(with_max_ops(15'000), {{"--svg", 75}});
}

TEST(OutputWork, TwoOutputsAreNamedTogether) {
  try {
    check_output_work(with_max_ops(10'000), {{"--svg", 75}, {"--trace", 15}});
    ADD_FAILURE() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(test::has(e.message(), "and --svg and --trace keeps about 90 bytes per op"));
    EXPECT_TRUE(test::has(e.message(), "raise it with --max-ops 16800"));
  }
}

TEST(OutputWork, SimulateRefusesAnSvgPastTheLimitAndWritesNothing) {
  const test::ScratchDir dir;
  const std::string config = test::write_file(dir.file("run.yaml"), kRun);
  const std::string svg = dir.file("t.svg");
  const test::CliRun r =
      test::run_cli("simulate '" + config + "' --max-ops 10000 --svg '" + svg + "' --quiet");
  EXPECT_EQ(r.code, 2) << r.all();
  EXPECT_TRUE(test::has(r.err, config + ":19: training.microbatches: this run needs up to 6000 "
                                        "ops"));
  EXPECT_TRUE(test::has(r.err, "raise it with --max-ops 15000"));
  EXPECT_FALSE(std::filesystem::exists(svg));
  // The memory picture records the same timeline.
  const test::CliRun m = test::run_cli("simulate '" + config + "' --max-ops 10000 --memory-svg '" +
                                       dir.file("m.svg") + "' --quiet");
  EXPECT_EQ(m.code, 2) << m.all();
  EXPECT_TRUE(test::has(m.err, "--memory-svg keeps about 75 bytes per op"));
  // With the limit the message names, it runs; without a picture it always did.
  const test::CliRun ok =
      test::run_cli("simulate '" + config + "' --max-ops 15000 --svg '" + svg + "' --quiet");
  EXPECT_EQ(ok.code, 0) << ok.all();
  EXPECT_TRUE(std::filesystem::exists(svg));
  EXPECT_EQ(test::run_cli("simulate '" + config + "' --max-ops 10000 --quiet").code, 0);
}

// compare --svg keeps every schedule's timeline until it draws them: two schedules of 6000
// ops each count 2 x 75 bytes per op on top of the simulation's 50, (50 + 150) / 50 x 6000
// = 24000 ops.
TEST(OutputWork, CompareCountsEveryScheduleItDraws) {
  const test::ScratchDir dir;
  const std::string config = test::write_file(dir.file("run.yaml"), kRun);
  const std::string svg = dir.file("c.svg");
  const std::string args = "compare '" + config + "' --schedules 1f1b,gpipe --quiet --svg '" + svg;
  const test::CliRun r = test::run_cli(args + "' --max-ops 23999");
  EXPECT_EQ(r.code, 2) << r.all();
  EXPECT_TRUE(test::has(r.err, config + ":19: training.microbatches:")) << r.err;
  EXPECT_TRUE(test::has(r.err, "--svg keeps about 150 bytes per op")) << r.err;
  EXPECT_TRUE(test::has(r.err, "raise it with --max-ops 24000")) << r.err;
  EXPECT_FALSE(std::filesystem::exists(svg));
  const test::CliRun ok = test::run_cli(args + "' --max-ops 24000");
  EXPECT_EQ(ok.code, 0) << ok.all();
  EXPECT_TRUE(std::filesystem::exists(svg));
  // Without the picture the limit is the simulation's alone.
  EXPECT_EQ(
      test::run_cli("compare '" + config + "' --schedules 1f1b,gpipe --quiet --max-ops 6000").code,
      0);
}

TEST(OutputWork, ReportRefusesARunWhosePagePassesTheLimit) {
  const test::ScratchDir dir;
  const std::string config = test::write_file(dir.file("run.yaml"), kRun);
  const std::string page = dir.file("r.html");
  // 37200 weighted ops.
  const test::CliRun r =
      test::run_cli("report '" + config + "' --max-ops 37199 --out '" + page + "' --quiet");
  EXPECT_EQ(r.code, 2) << r.all();
  EXPECT_TRUE(test::has(r.err, config + ":19: training.microbatches: "));
  EXPECT_TRUE(test::has(r.err, "the HTML report keeps about 260 bytes per op"));
  EXPECT_TRUE(test::has(r.err, "raise it with --max-ops 37200"));
  EXPECT_FALSE(std::filesystem::exists(page));
  const test::CliRun ok =
      test::run_cli("report '" + config + "' --max-ops 37200 --out '" + page + "' --quiet");
  EXPECT_EQ(ok.code, 0) << ok.all();
}

}  // namespace
}  // namespace bmpipe
