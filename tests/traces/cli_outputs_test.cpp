// `bmpipe simulate --trace --svg` and `bmpipe compare --svg` end to end: the files the
// executable writes pass the same checks as the library's output.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "experiment/experiment.hpp"
#include "support/run_config.hpp"
#include "support/support.hpp"
#include "trace_checks.hpp"

namespace bmpipe {
namespace {

namespace fs = std::filesystem;

int run(const std::string& args, std::string* out = nullptr) {
  const test::CliRun r = test::run_cli(args);
  if (out) *out = r.out + r.err;
  return r.code;
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

using test::kTiny;

TEST(CliOutputs, SimulateWritesTraceSvgAndBreakdown) {
  const test::ScratchDir dir;
  const fs::path trace = dir.path() / "t.json", svg = dir.path() / "t.svg";
  std::string out;
  ASSERT_EQ(
      run("simulate " + kTiny + " --json --trace " + trace.string() + " --svg " + svg.string(),
          &out),
      0)
      << out;
  const auto summary = nlohmann::json::parse(out);
  // tiny.yaml: balanced 1F1B, p = 4, m = 8, free communication: 9 ms ideal per device.
  EXPECT_DOUBLE_EQ(summary["bubble_breakdown_ms"]["ideal"].get<double>(), 36.0);
  EXPECT_DOUBLE_EQ(summary["bubble_breakdown_ms"]["communication"].get<double>(), 0.0);

  // The same run in-process is the reference for the file's invariants.
  const Config config = load_config(kTiny);
  const test::Prepared run = test::prepare_run(config);
  const Schedule& sch = run.schedule;
  const SimResult r = simulate(run.input, sch);
  const test::ParsedTrace t = test::check_trace_invariants(test::slurp(trace.string()), sch, r);
  // Layer ranges come from the config: 8 layers over 4 stages.
  for (const auto& s : t.threads.at({2, 0}))
    if (s.cat == "op") {
      EXPECT_EQ(s.args["layers"], "layers 4-5");
    }
  const std::string picture = test::slurp(svg.string());
  EXPECT_EQ(count(picture, "<rect class=\"op "), sch.total_ops());
  EXPECT_NE(picture.find("</svg>"), std::string::npos);
}

TEST(CliOutputs, CompareStacksOneTimelinePerSchedule) {
  const test::ScratchDir dir;
  const fs::path svg = dir.path() / "c.svg";
  std::string out;
  ASSERT_EQ(run("compare " + kTiny + " --schedules 1f1b,gpipe --svg " + svg.string(), &out), 0)
      << out;
  const std::string picture = test::slurp(svg.string());
  EXPECT_EQ(count(picture, "<rect class=\"op "), 2u * 64u);  // 2 x p m (F + B)
  EXPECT_EQ(count(picture, "class=\"axis\""), 2u);
}

TEST(CliOutputs, UnwritableTraceIsBadInput) {
  std::string out;
  EXPECT_EQ(run("simulate " + kTiny + " --trace /nonexistent-dir/t.json", &out), 2) << out;
  EXPECT_NE(out.find("--trace"), std::string::npos) << out;
}

TEST(CliOutputs, TraceNamesTheRecomputeModeOfEachStage) {
  // Regression: selective recompute was labelled "full" in the trace.
  const test::ScratchDir dir;
  const std::string config =
      test::write_file(dir.file("selective.yaml"),
                       "cluster: {nodes: 1, devices_per_node: 4, device: {preset: h200}}\n"
                       "model: {preset: llama2-7b}\n"
                       "training: {pp: 4, seq_length: 1024, microbatches: 4,\n"
                       "           recompute: {stages: {0: selective}, layers: {9: full}}}\n");
  const std::string trace = dir.file("t.json");
  std::string out;
  ASSERT_EQ(run("simulate " + config + " --trace " + trace, &out), 0) << out;
  const auto j = nlohmann::json::parse(test::slurp(trace));
  std::map<int, std::set<std::string>> labels;
  std::set<std::string> counts;
  for (const auto& ev : j["traceEvents"])
    if (ev.value("cat", "") == "op") {
      labels[ev["pid"].get<int>()].insert(ev["args"]["recompute"].get<std::string>());
      if (ev["args"].contains("recompute_layers"))
        counts.insert(ev["args"]["recompute_layers"].get<std::string>());
    }
  EXPECT_EQ(labels[0], (std::set<std::string>{"selective"}));
  EXPECT_EQ(labels[1], (std::set<std::string>{"mixed"}));
  EXPECT_EQ(labels[2], (std::set<std::string>{"none"}));
  EXPECT_EQ(counts, (std::set<std::string>{"none 7, full 1"}));
}

TEST(CliOutputs, PicturesAndTracesCanGoToStdout) {
  // '-' writes the picture to stdout; the summary then goes to stderr.
  const test::CliRun svg = test::run_cli("simulate " + kTiny + " --svg - --json");
  ASSERT_EQ(svg.code, 0) << svg.err;
  EXPECT_EQ(svg.out.rfind("<?xml", 0), 0u);
  EXPECT_NE(svg.out.find("</svg>"), std::string::npos);
  EXPECT_NE(svg.err.find("\"iteration_time_ms\": 33.0"), std::string::npos) << svg.err;
  const test::CliRun trace = test::run_cli("simulate " + kTiny + " --trace -");
  ASSERT_EQ(trace.code, 0) << trace.err;
  EXPECT_TRUE(nlohmann::json::parse(trace.out).contains("traceEvents"));
  EXPECT_NE(trace.err.find("iteration time"), std::string::npos);
  // Two outputs cannot share stdout.
  const test::CliRun both = test::run_cli("simulate " + kTiny + " --svg - --trace -");
  EXPECT_EQ(both.code, 2);
  EXPECT_NE(both.err.find("only one"), std::string::npos) << both.err;
}

TEST(CliOutputs, MemorySvgPlotsEveryRank) {
  const test::ScratchDir dir;
  const std::string mem = dir.file("m.svg");
  const test::CliRun r = test::run_cli("simulate " + kTiny + " --memory-svg " + mem);
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string picture = test::slurp(mem);
  EXPECT_NE(picture.find("</svg>"), std::string::npos);
  for (int rank = 0; rank < 4; ++rank)
    EXPECT_NE(picture.find("rank " + std::to_string(rank)), std::string::npos) << rank;
}

TEST(CliOutputs, ARefusedScheduleIsAResultNotBadInput) {
  // dualpipe-v needs m >= 2p = 8: with 4 micro-batches it refuses, 1f1b still runs.
  const test::CliRun r =
      test::run_cli("compare " + kTiny + " --schedules 1f1b,dualpipe-v --microbatches 4");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("dualpipe-v  REFUSED"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1f1b"), std::string::npos);
  const test::CliRun svg = test::run_cli("compare " + kTiny + " --schedules 1f1b,gpipe --svg -");
  ASSERT_EQ(svg.code, 0) << svg.err;
  EXPECT_EQ(svg.out.rfind("<?xml", 0), 0u);
  EXPECT_NE(svg.err.find("gpipe"), std::string::npos) << svg.err;
}

}  // namespace
}  // namespace bmpipe
