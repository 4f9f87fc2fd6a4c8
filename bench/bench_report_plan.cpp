// `bmpipe report --plan` against the run's size (issue 42: 482 s for a 6-million-op run).
// The planner runs every baseline plan and every candidate as one simulation of the whole
// run, so its time is (simulations) x (one simulation's time), and the latter grows with
// the op count. This sweep shows how: the 70B-shaped measured pipeline (pp 8, 80 layers,
// per-mode recompute costs) at 1000 to 16000 micro-batches (24000 to 384000 ops by the
// bound), planned with a budget of 50 candidates on one thread (the baselines are not
// counted in it). Its time over the micro-batches is the report's per-op cost of
// planning; a step that grows faster than the ops shows as a time per item that rises.
// items_per_second is ops (by op_bound) planned per second.
#include <benchmark/benchmark.h>

#include <string>

#include "api/api.hpp"
#include "experiment/config.hpp"

namespace {

using namespace bmpipe;

void BM_ReportPlan_Microbatches(benchmark::State& state) {
  Overrides o;
  o.microbatches = static_cast<int>(state.range(0));
  const Config config = load_config(
      std::string(BMPIPE_SOURCE_DIR) + "/configs/examples/llama2_70b_measured_pp8.yaml", o);
  api::PlanRequest request;
  request.overrides = o;
  request.threads = 1;
  request.max_evals = 50;
  for (auto _ : state) {
    const api::PlanResults plan = api::run_plan(config, request);
    benchmark::DoNotOptimize(plan.outcomes.size());
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * op_bound(config));
}
BENCHMARK(BM_ReportPlan_Microbatches)
    ->Arg(1000)
    ->Arg(4000)
    ->Arg(16000)
    ->Unit(benchmark::kSecond)
    ->Iterations(1);

}  // namespace
