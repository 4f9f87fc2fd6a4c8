// Engine throughput: simulated ops per second of CPU time (items_per_second), per schedule.
//
// Rows, for every built-in schedule (registered from the schedule table, so none is left
// out; a schedule that refuses the sizes is skipped with its reason):
//   BM_OnePass_<s>            the reference: a one-pass evaluator (bench/one_pass.hpp)
//   BM_Simulate_<s>           simulate() on a CompiledSchedule compiled once (the planner's path)
//   BM_SimulateOrdered_<s>    the same with an observer that ignores everything, which
//                             forces the ordered (event-queue) engine traces run on
//   BM_SimulateCompiling_<s>  simulate() on a plain Schedule: validates and compiles per call
// events_per_op counts queue events (0 on the data-flow engine). At the end the run prints
// each engine row's time as a multiple of the reference's, from the same run.
#include <benchmark/benchmark.h>

#include <unistd.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "bench/one_pass.hpp"
#include "schedules/registry.hpp"
#include "sim/simulate.hpp"

namespace {

using namespace bmpipe;

constexpr int kConfigVpp = 2;  // what schedules taking vpp from the config get

// Uniform stages with transfers over one node's links, so the transfer path is exercised.
SimInput uniform_input(const Schedule& sch, const Topology& topo) {
  SimInput in;
  in.topology = &topo;
  StageCost c;
  c.forward = 1'000'000;
  c.backward_input = 1'000'000;
  c.backward_weight = 1'000'000;
  c.activation_bytes = 1 << 20;
  c.output_bytes = 1 << 20;
  in.stages.assign(sch.num_stages, c);
  for (int r = 0; r < sch.num_ranks; ++r) in.rank_device.push_back(r);
  return in;
}

enum class Mode { one_pass, compiled, ordered, compiling };

void run(benchmark::State& state, const ScheduleInfo* info, Mode mode) {
  const int p = static_cast<int>(state.range(0));
  const int m = static_cast<int>(state.range(1));
  Schedule sch;
  try {
    sch = info->generate(ScheduleParams{p, m, effective_vpp(*info, kConfigVpp), {}});
  } catch (const ScheduleError& e) {
    state.SkipWithError((std::string("skipped: ") + e.what()).c_str());
    return;
  }
  const Topology topo(ClusterSpec{1, p, LinkSpec{450, 5}, LinkSpec{}});
  const SimInput in = uniform_input(sch, topo);
  const CompiledSchedule compiled(sch);
  NullObserver ignore_all;  // listens to nothing; selects the ordered engine
  std::uint64_t ops = 0, events = 0;

  if (mode == Mode::one_pass) {
    bench::OnePassCosts c;
    for (const StageCost& s : in.stages) {
      c.f.push_back(s.forward);
      c.b.push_back(s.backward_full());
      c.i.push_back(s.backward_input);
      c.w.push_back(s.backward_weight);
    }
    for (auto _ : state) {
      const Time t = bench::one_pass(sch, c, ops);
      benchmark::DoNotOptimize(t);
      if (t == kNever) state.SkipWithError("the one-pass evaluator found a deadlock");
    }
  } else {
    for (auto _ : state) {
      const SimResult r = mode == Mode::compiling ? simulate(in, sch)
                          : mode == Mode::ordered ? simulate(in, compiled, &ignore_all)
                                                  : simulate(in, compiled);
      benchmark::DoNotOptimize(r.pipeline_time);
      if (!r.ok) state.SkipWithError(r.error.c_str());
      ops += r.ops_executed;
      events += r.events;
    }
    state.counters["events_per_op"] =
        ops ? static_cast<double>(events) / static_cast<double>(ops) : 0.0;
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(ops));
}

// Prints, after the usual table, every engine row's CPU time per op as a multiple of its
// reference row's (medians when repetitions are asked for).
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  explicit RatioReporter(OutputOptions options) : ConsoleReporter(options) {}
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& run : runs) {
      const bool single = run.run_type == Run::RT_Iteration && run.repetitions <= 1;
      const bool median = run.run_type == Run::RT_Aggregate && run.aggregate_name == "median";
      if (run.error_occurred || !(single || median)) continue;
      const std::string& fn = run.run_name.function_name;  // BM_<Mode>_<schedule>
      const auto split = fn.find('_', 3);
      const auto it = run.counters.find("items_per_second");
      if (fn.rfind("BM_", 0) != 0 || split == std::string::npos || it == run.counters.end())
        continue;
      const std::string mode = fn.substr(3, split - 3);
      const std::string key = fn.substr(split + 1) + "/" + run.run_name.args;
      if (!rates_.count(key)) order_.push_back(key);
      rates_[key][mode] = it->second.value;
    }
  }
  void Finalize() override {
    ConsoleReporter::Finalize();
    std::printf("\nCPU time per op, as a multiple of the one-pass reference (same run):\n");
    for (const std::string& key : order_) {
      const auto& modes = rates_[key];
      const auto ref = modes.find("OnePass");
      if (ref == modes.end()) continue;
      std::printf("  %-26s", key.c_str());
      for (const char* mode : {"Simulate", "SimulateOrdered", "SimulateCompiling"}) {
        const auto m = modes.find(mode);
        if (m != modes.end() && m->second > 0)
          std::printf("  %s %.2fx", mode, ref->second / m->second);
      }
      std::printf("\n");
    }
  }

 private:
  std::vector<std::string> order_;
  std::map<std::string, std::map<std::string, double>> rates_;
};

void register_all() {
  struct Size {
    int p, m;
  };
  for (const ScheduleInfo& info : builtin_schedules()) {
    std::string name(info.name);
    for (char& ch : name)
      if (ch == '-') ch = '_';
    const bool main_row = info.name == "1f1b";
    const std::vector<Size> sizes =
        main_row ? std::vector<Size>{{8, 64}, {16, 256}, {64, 1024}} : std::vector<Size>{{16, 256}};
    auto add = [&](const char* mode_name, Mode mode) {
      auto* b = benchmark::RegisterBenchmark(
          ("BM_" + std::string(mode_name) + "_" + name).c_str(),
          [info = &info, mode](benchmark::State& state) { run(state, info, mode); });
      for (const Size& s : sizes) b->Args({s.p, s.m});
      b->Unit(benchmark::kMillisecond);
    };
    add("OnePass", Mode::one_pass);
    add("Simulate", Mode::compiled);
    add("SimulateOrdered", Mode::ordered);
    if (main_row) add("SimulateCompiling", Mode::compiling);
  }
}

}  // namespace

int main(int argc, char** argv) {
  // Read before Initialize(), which removes the flags it knows. Another output format asked
  // for: leave the display to the library. Colours follow --benchmark_color as the
  // library's own console reporter would (auto: only on a terminal).
  bool console = true;
  bool color = isatty(STDOUT_FILENO);
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--benchmark_format=", 0) == 0 && arg != "--benchmark_format=console")
      console = false;
    if (arg.rfind("--benchmark_color=", 0) == 0) {
      const std::string v = arg.substr(18);
      color = v == "true" || v == "yes" || v == "1" || (v == "auto" && color);
    }
  }
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  if (console) {
    RatioReporter reporter(color ? benchmark::ConsoleReporter::OO_Defaults
                                 : benchmark::ConsoleReporter::OO_Tabular);
    benchmark::RunSpecifiedBenchmarks(&reporter);
  } else {
    benchmark::RunSpecifiedBenchmarks();
  }
  benchmark::Shutdown();
  return 0;
}
