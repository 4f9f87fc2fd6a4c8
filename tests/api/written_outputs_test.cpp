// What `plan --out`, `search --out` and `search --format` write, as library calls
// (api::planned_config, api::best_layout_config, api::export_best_layout; issue 38), and
// plan --format's check (api::check_plan_format), a trace's labels (api::trace_labels) and
// what simulate's outputs count against the work limit (api::simulation_outputs_work). On
// tiny.yaml, whose time is worked out by hand in the file: 1F1B with p = 4, m = 8, F = 1 ms
// and B = 2 ms per stage is (m + p - 1)(F + B) = 11 x 3 ms = 33 ms per iteration. Each
// written config must simulate to that time, which its header states.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "api/api.hpp"
#include "api/errors.hpp"
#include "api/export.hpp"
#include "api/search.hpp"
#include "api/search_driver.hpp"
#include "api/simulation_outputs.hpp"
#include "support/support.hpp"

namespace bmpipe::written_outputs_test {
namespace {

using test::kTiny;

constexpr Time k33ms = 33 * kNsPerMs;

/// The iteration time `bmpipe simulate` gives the config text `yaml`.
Time simulated(const std::string& yaml) {
  return api::run_simulate(parse_config(yaml, "<written>"), api::SimulateRequest{})
      .report.result.iteration_time;
}

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

/// The search of tiny.yaml's one layout of pp 4 (4 devices, tp 1, dp 1), ranked.
struct TinySearch {
  api::SearchSetup setup;
  api::SearchReport report;
  explicit TinySearch(std::optional<double> memory_limit_GiB = std::nullopt) {
    api::SearchRequest r;
    r.space.tp = {1};
    r.space.pp = {4};
    r.space.vpp = {1};
    r.space.micro_batch_size = {1};
    r.space.schedules = {"1f1b"};
    r.memory_limit_GiB = memory_limit_GiB;
    r.threads = 1;
    setup = api::prepare_search(load_config(kTiny), r);
    api::ThreadExecutor threads(setup, 1);
    api::SearchRun run = api::drive_search(setup, threads);
    report = api::rank_search(setup, std::move(run.results), 1, 0, run.stopped_by, run.confirmed);
  }
};

/// The ConfigError `f` throws as "key|message"; "none" when it throws nothing.
template <class F>
std::string config_error(F f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.key() + "|" + e.message();
  }
  return "none";
}

TEST(WrittenOutputs, APlansConfigStatesItsTimeAndSimulatesToIt) {
  api::PlanRequest request;
  request.threads = 1;
  const api::PlanResults planned = api::run_plan(load_config(kTiny), request);
  const std::string text = api::planned_config(kTiny, "out.yaml", planned, request);
  EXPECT_TRUE(starts_with(text, "# Written by bmpipe plan from " + kTiny +
                                    ": the plan found for 1f1b, 33.000 ms per iteration as "
                                    "simulated.\n# `bmpipe simulate` on this file reproduces "
                                    "it.\n"))
      << text;
  EXPECT_EQ(simulated(text), k33ms);
}

TEST(WrittenOutputs, APlanUnderAMemoryLimitWritesTheLimitAsTheDevicesMemory) {
  api::PlanRequest request;
  request.threads = 1;
  request.memory_limit_GiB = 0.5;  // tiny's peak is about 0.01 GiB: the same plan fits
  const api::PlanResults planned = api::run_plan(load_config(kTiny), request);
  const std::string text = api::planned_config(kTiny, "out.yaml", planned, request);
  EXPECT_NE(text.find("\n# cluster.device.memory_GiB is --memory-limit-GiB, the limit it was "
                      "planned for.\n"),
            std::string::npos)
      << text;
  const Config written = parse_config(text, "<written>");
  EXPECT_EQ(written.device.memory_GiB, 0.5);
  EXPECT_EQ(simulated(text), k33ms);
}

TEST(WrittenOutputs, TheFastestLayoutsConfigStatesItAndSimulatesToIt) {
  const TinySearch s;
  const std::string text = api::best_layout_config(s.setup, s.report, "out.yaml");
  EXPECT_TRUE(starts_with(text, "# Written by bmpipe search from " + kTiny +
                                    ": the fastest layout, tp 1 pp 4 dp 1 vpp 1 mbs 1 1f1b, "
                                    "33.0 ms per iteration as simulated.\n# `bmpipe simulate` "
                                    "on this file reproduces it.\n"))
      << text;
  EXPECT_EQ(simulated(text), k33ms);
}

TEST(WrittenOutputs, TheFastestLayoutExportsWithTheFrameworksTime) {
  const TinySearch s;
  // Megatron-LM's 1F1B on the same job: the same 33 ms, stated exactly.
  const api::ExportOutcome x = api::export_best_layout(s.setup, s.report, "megatron");
  EXPECT_EQ(x.summary["format"], "megatron");
  EXPECT_DOUBLE_EQ(x.summary["iteration_time_ms"].get<double>(), 33.0);
  EXPECT_TRUE(x.summary["exact"].get<bool>());
}

TEST(WrittenOutputs, WhenNoLayoutFitsNothingIsWrittenOrExported) {
  // 1 MiB of weights per layer, two layers a stage, plus their gradients and optimizer
  // state: more than 0.001 GiB (about 1 MiB) on every device.
  const TinySearch s(0.001);
  EXPECT_EQ(config_error([&] { api::best_layout_config(s.setup, s.report, "out.yaml"); }),
            "--out|no layout fits: nothing to write");
  EXPECT_EQ(config_error([&] { api::export_best_layout(s.setup, s.report, "megatron"); }),
            "--format|no layout fits: nothing to export");
}

TEST(WrittenOutputs, PlanFormatIsTheTableOrAnExportersName) {
  auto refusal = [](const std::string& format) -> std::string {
    try {
      api::check_plan_format(format);
    } catch (const api::RequestError& e) {
      return e.key() + "|" + e.message();
    }
    return "none";
  };
  EXPECT_EQ(refusal("table"), "none");
  EXPECT_EQ(refusal("torchtitan-registry"), "none");
  EXPECT_EQ(refusal("megatrn"),
            "--format|unknown format 'megatrn' (did you mean 'megatron'?) (table, megatron, "
            "mindformers, torchtitan, torchtitan-registry)");
  EXPECT_EQ(refusal("json"),
            "--format|unknown format 'json' (table, megatron, mindformers, torchtitan, "
            "torchtitan-registry)");
}

TEST(WrittenOutputs, ATracesLabelsAreThePlansStages) {
  // tiny.yaml: 8 layers on pp 4, two a stage, no recompute (its layers define none);
  // --partition 3,1,2,2 moves them (a stage of one layer reads "layer N").
  Overrides o;
  o.set = {{"training.partition", "[3, 1, 2, 2]"}};
  const Config config = load_config(kTiny, o);
  const TraceLabels labels =
      api::trace_labels(api::prepare_simulation(config, api::SimulateRequest{}));
  EXPECT_EQ(labels.stage_layers,
            (std::vector<std::string>{"layers 0-2", "layer 3", "layers 4-5", "layers 6-7"}));
  EXPECT_EQ(labels.stage_recompute, (std::vector<std::string>(4, "none")));
  EXPECT_EQ(labels.stage_recompute_layers,
            (std::vector<std::string>{"none 3", "none 1", "none 2", "none 2"}));
}

TEST(WrittenOutputs, SimulateWritesItsScheduleTraceAndPicturesAroundTheRun) {
  // api::run_with_outputs, as `bmpipe simulate --export-schedule --trace --svg
  // --memory-svg` calls it: the run is tiny.yaml's 33 ms, and the schedule file is 1F1B's,
  // whose last of 4 ranks alternates from the first micro-batch (F0 B0 F1 B1 ... F7 B7).
  test::ScratchDir dir;
  const api::PreparedSimulation run =
      api::prepare_simulation(load_config(kTiny), api::SimulateRequest{});
  api::SimulationOutputs outputs;
  outputs.schedule_csv = dir.file("s.csv");
  outputs.trace = dir.file("t.json");
  outputs.svg = dir.file("t.svg");
  outputs.memory_svg = dir.file("m.svg");
  std::vector<std::string> phases;
  const api::SimulationReport report = api::run_with_outputs(
      run, outputs, [&phases](const std::string& what) { phases.push_back(what); });
  EXPECT_EQ(report.result.iteration_time, k33ms);
  const std::string csv = test::slurp(dir.file("s.csv"));
  EXPECT_NE(csv.find("\n3F0,3B0,3F1,3B1,3F2,3B2,3F3,3B3,3F4,3B4,3F5,3B5,3F6,3B6,3F7,3B7"),
            std::string::npos)
      << csv;
  EXPECT_TRUE(starts_with(test::slurp(dir.file("t.json")), "{\"displayTimeUnit\""));
  EXPECT_TRUE(starts_with(test::slurp(dir.file("t.svg")), "<?xml"));
  EXPECT_TRUE(starts_with(test::slurp(dir.file("m.svg")), "<?xml"));
  ASSERT_GE(phases.size(), 3u);
  EXPECT_EQ(phases.front(), "writing the schedule");
  EXPECT_EQ(phases.back(), "writing the outputs");
  // Standard output takes one of them at most: refused before the run, as the command says.
  api::SimulationOutputs both;
  both.trace = "-";
  both.svg = "-";
  EXPECT_EQ(both.to_stdout(), 2);
  try {
    api::run_with_outputs(run, both);
    ADD_FAILURE() << "two outputs on stdout were taken";
  } catch (const api::RequestError& e) {
    EXPECT_EQ(std::string(e.what()),
              "--trace/--svg/--memory-svg: only one of them can be '-' (stdout)");
  }
}

TEST(WrittenOutputs, SimulatesOutputsCountOneTimelineAndTheTrace) {
  // The figures each output declares beside its code: 75 bytes per op for a timeline
  // (traces/timeline.hpp kTimelineBytesPerOp), 15 for a trace (traces/chrome_trace.hpp).
  auto listed = [](bool trace, bool svg, bool memory_svg) {
    std::string out;
    for (const OutputWork& w : api::simulation_outputs_work(trace, svg, memory_svg))
      out += w.option + "=" + std::to_string(w.bytes_per_op) + ";";
    return out;
  };
  EXPECT_EQ(listed(false, false, false), "");
  EXPECT_EQ(listed(false, true, false), "--svg=75;");
  EXPECT_EQ(listed(false, false, true), "--memory-svg=75;");
  EXPECT_EQ(listed(false, true, true), "--svg and --memory-svg=75;");  // one timeline
  EXPECT_EQ(listed(true, true, false), "--svg=75;--trace=15;");
  EXPECT_EQ(listed(true, false, false), "--trace=15;");
  // tiny.yaml with its limit at the simulation's own ops: admitted without outputs, and
  // refused with a trace (15 more bytes on each op's 50), which the message names.
  Config config = load_config(kTiny);
  config.limits.max_ops = weighted_op_bound(config, {});
  EXPECT_NO_THROW(api::check_simulation_outputs(config, false, false, false));
  try {
    api::check_simulation_outputs(config, true, false, false);
    ADD_FAILURE() << "a trace past the work limit was admitted";
  } catch (const ConfigError& e) {
    EXPECT_NE(e.message().find("--trace"), std::string::npos) << e.message();
  }
}

}  // namespace
}  // namespace bmpipe::written_outputs_test
