// Schedule generation time: every schedule of the table (registered from it, so a new
// schedule is benchmarked without an edit here), and zb-auto at deep pipelines with its
// candidates ranked by the engine, as `bmpipe simulate` does. items_per_second is ops of
// the generated schedule per second.
#include <benchmark/benchmark.h>

#include <memory>
#include <string>

#include "schedules/registry.hpp"
#include "sim/simulate.hpp"

namespace {

using namespace bmpipe;

// The pp-64 example's measured H200 layer (sequence 4096, micro-batch 1), two layers per
// stage: F, I, W in ns; one activation of 32 MiB crosses each boundary.
constexpr std::int64_t kF = 2 * 3'499'040, kI = 2 * 5'250'144, kW = 2 * 2'667'872;
constexpr std::int64_t kOutput = 33'554'432;

/// ScheduleParams for `info` at p, m with the stage costs above and, when `engine`, an
/// evaluator that runs the engine on them over one node of NVLink-class links.
ScheduleParams params_for(const ScheduleInfo& info, int p, int m, bool engine,
                          std::shared_ptr<const Topology>& topo) {
  ScheduleParams params{p, m, effective_vpp(info, 2), {}, {}};
  const auto stages = static_cast<std::size_t>(p * effective_vpp(info, 2));
  params.costs.forward.assign(stages, kF);
  params.costs.backward_input.assign(stages, kI);
  params.costs.backward_weight.assign(stages, kW);
  params.costs.transfer = 5'000 + kOutput / 450;  // 5 us + 32 MiB at 450 GB/s
  if (!engine) return params;
  topo = std::make_shared<const Topology>(ClusterSpec{1, p, LinkSpec{450, 5}, LinkSpec{}});
  params.evaluate = [topo](const Schedule& s) -> std::optional<std::int64_t> {
    SimInput in;
    in.topology = topo.get();
    StageCost c;
    c.forward = kF;
    c.backward_input = kI;
    c.backward_weight = kW;
    c.activation_bytes = 1 << 30;
    c.output_bytes = kOutput;
    in.stages.assign(s.num_stages, c);
    for (int r = 0; r < s.num_ranks; ++r) in.rank_device.push_back(r);
    const SimResult r = simulate(in, s);
    if (!r.ok) return std::nullopt;
    return r.iteration_time;
  };
  return params;
}

void generate(benchmark::State& state, const ScheduleInfo* info, bool engine) {
  const int p = static_cast<int>(state.range(0));
  const int m = static_cast<int>(state.range(1));
  std::shared_ptr<const Topology> topo;
  const ScheduleParams params = params_for(*info, p, m, engine, topo);
  std::int64_t ops = 0;
  for (auto _ : state) {
    Schedule s = info->generate(params);
    benchmark::DoNotOptimize(s.ops.data());
    ops += static_cast<std::int64_t>(s.total_ops());
  }
  state.SetItemsProcessed(ops);
}

// BM_Generate_<schedule>/p/m: candidates (if any) ranked by the planner alone, no
// evaluator. BM_GenerateRanked_<schedule>/p/m: ranked by the engine. zb-auto also at the
// deep pipelines where its candidate count used to make it quadratic.
const bool kRegistered = [] {
  for (const ScheduleInfo& info : builtin_schedules()) {
    const bool deep = info.name == "zb-auto";
    for (bool engine : {false, true}) {
      if (engine && !info.ranks_candidates) continue;
      const std::string name =
          std::string(engine ? "BM_GenerateRanked_" : "BM_Generate_") + std::string(info.name);
      auto* bench = benchmark::RegisterBenchmark(name.c_str(), generate, &info, engine);
      bench->Args({16, 256})->Unit(benchmark::kMillisecond);
      if (deep) bench->Args({64, 256})->Args({128, 512});
      // zb-v ranked by the engine at the pp-64 example's depth and 8192 micro-batches:
      // past 8p its candidates are ranked on a prefix of 8p (issue 20, item 7).
      if (engine && info.name == "zb-v") bench->Args({64, 8192});
    }
  }
  return true;
}();

}  // namespace
