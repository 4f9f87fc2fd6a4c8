// A report's plan says up front what it may take, and shows progress while it runs (issue
// 42: `report --plan` of a 6-million-op run ran 482 s with no estimate). Every candidate
// plan is one simulation of the run, so the estimate is the report's own run time times the
// simulations the planner may run. No test here times anything: the arithmetic is checked
// on given figures, and the progress lines by their presence.
#include <gtest/gtest.h>

#include <string>

#include "api/report.hpp"
#include "experiment/config_cases.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace {

TEST(PlanEstimate, TheBaselinesThenTheWholeBudget) {
  api::PlanEstimate e;
  e.simulation_s = 2.0;
  e.baselines = 10;
  e.max_evals = 20'000;
  e.threads = 4;
  // 10 baselines x 2 s; plus 20000 x 2 s over 4 threads = 10000 s.
  EXPECT_DOUBLE_EQ(e.baselines_s(), 20.0);
  EXPECT_DOUBLE_EQ(e.most_s(), 10'020.0);
  EXPECT_EQ(e.text(),
            "planning runs one simulation of this run per candidate plan, about 2 s each (as "
            "long as the report's own run): about 20 s for the 10 baselines, then up to 20000 "
            "candidates, at most 2.8 h in all on 4 threads (--max-evals and --time-limit-s "
            "bound it)");
  // --schedule auto plans each schedule in turn: 3 x (20 + 10000) s.
  e.schedules = 3;
  EXPECT_DOUBLE_EQ(e.baselines_s(), 60.0);
  EXPECT_DOUBLE_EQ(e.most_s(), 30'060.0);
  EXPECT_TRUE(test::has(
      e.text(),
      "about 60 s for the 10 baselines of each of 3 schedules, then up to 20000 candidates each"));
  // No thread count below one.
  e.schedules = 1;
  e.threads = 0;
  EXPECT_DOUBLE_EQ(e.most_s(), 40'020.0);
  EXPECT_TRUE(test::has(e.text(), "on 1 thread "));
}

TEST(PlanEstimate, DurationsReadAsAPersonReadsThem) {
  api::PlanEstimate e;
  e.baselines = 1;
  e.threads = 1;
  e.simulation_s = 0.35;
  EXPECT_TRUE(test::has(e.text(), "about 0.35 s each"));
  e.simulation_s = 90;  // 90 s each, and two baselines 180 s = 3.0 min
  e.baselines = 2;
  EXPECT_TRUE(test::has(e.text(), "about 90 s each"));
  EXPECT_TRUE(test::has(e.text(), "about 3.0 min for the 2 baselines"));
}

TEST(ReportWork, TheLibraryCountsThePageAgainstTheWorkLimit) {
  // tiny.yaml at 500 micro-batches: 4 x 500 x 3 = 6000 ops; with the page's 260 bytes per
  // op on the simulation's 50, the work of 6000 x 310 / 50 = 37200 ops.
  Overrides o;
  o.microbatches = 500;
  o.limits = WorkLimits{};
  o.limits->max_ops = 37'199;
  try {
    api::report_data(load_config(test::kTiny, o), api::ReportRequest{});
    ADD_FAILURE() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "training.microbatches (from the command line)");
    EXPECT_TRUE(test::has(e.message(), "raise it with --max-ops 37200"));
  }
  o.limits->max_ops = 37'200;
  api::ReportRequest request;
  request.simulate.overrides = o;
  EXPECT_EQ(api::report_data(load_config(test::kTiny, o), request).at("summary").at("microbatches"),
            500);
}

// tiny.yaml: a plan of a few hundred simulations of 96 ops, well under a second.
TEST(PlanEstimate, AReportSaysItUpFrontAndShowsProgressOffATerminal) {
  test::ScratchDir dir;
  // A budget of 10^9 candidates: at most far more than a minute whatever the machine, so
  // the estimate is said (the search itself stops when it stalls).
  const test::CliRun r = test::run_cli(
      "report " + test::kTiny + " --microbatches 2000 --plan --threads 1 " +
      "--max-evals 1000000000 --progress-interval-s 0.05 --out " + dir.file("r.html"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(test::has(r.err,
                        "report: planning runs one simulation of this run per candidate "
                        "plan, about "));
  EXPECT_TRUE(test::has(r.err, "then up to 1000000000 candidates, at most "));
  // The estimate comes before the plan's progress.
  const std::size_t said = r.err.find("report: planning runs");
  const std::size_t planning = r.err.find("report: planning 1f1b: ");
  if (planning != std::string::npos) {
    EXPECT_LT(said, planning);
  }
  // --quiet says nothing at all.
  const test::CliRun quiet = test::run_cli(
      "report " + test::kTiny + " --microbatches 2000 --plan --threads 1 --max-evals 1000000000 " +
      "--quiet --progress-interval-s 0.05 --out " + dir.file("q.html"));
  ASSERT_EQ(quiet.code, 0) << quiet.err;
  EXPECT_EQ(quiet.err, "");
}

TEST(PlanEstimate, ProgressLinesCountTheCandidates) {
  test::ScratchDir dir;
  // The measured 70B example at 2000 micro-batches plans for a few seconds: with a line
  // every 0.05 s the search's lines appear, with the budget they count against.
  const test::CliRun r = test::run_cli(
      "report " + test::examples() + "llama2_70b_measured_pp8.yaml --microbatches 2000 --plan " +
      "--threads 1 --progress-interval-s 0.05 --out " + dir.file("r.html"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(test::has(r.err, "report: planning 1f1b: "));
  EXPECT_TRUE(test::has(r.err, " evaluations of at most 20000"));
}

}  // namespace
}  // namespace bmpipe
