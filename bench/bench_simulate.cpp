// Engine throughput: simulated ops per second (items_per_second) for each schedule.
#include <benchmark/benchmark.h>

#include "schedules/registry.hpp"
#include "sim/simulate.hpp"

namespace {

using namespace bmpipe;

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

void run_schedule(benchmark::State& state, const char* name, int vpp) {
  const int p = static_cast<int>(state.range(0));
  const int m = static_cast<int>(state.range(1));
  const Schedule sch = find_schedule(name)->generate(ScheduleParams{p, m, vpp});
  const Topology topo(ClusterSpec{1, p, LinkSpec{450, 5}, LinkSpec{}});
  const SimInput in = uniform_input(sch, topo);
  std::uint64_t ops = 0;
  for (auto _ : state) {
    SimResult r = simulate(in, sch);
    benchmark::DoNotOptimize(r.pipeline_time);
    if (!r.ok) state.SkipWithError(r.error.c_str());
    ops += r.ops_executed;
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(ops));
}

void BM_Simulate_1f1b(benchmark::State& state) {
  run_schedule(state, "1f1b", 1);
}
void BM_Simulate_gpipe(benchmark::State& state) {
  run_schedule(state, "gpipe", 1);
}
void BM_Simulate_interleaved(benchmark::State& state) {
  run_schedule(state, "interleaved", 2);
}
void BM_Simulate_zb_h1(benchmark::State& state) {
  run_schedule(state, "zb-h1", 1);
}
void BM_Simulate_zb_h2(benchmark::State& state) {
  run_schedule(state, "zb-h2", 1);
}
void BM_Simulate_zb_v(benchmark::State& state) {
  run_schedule(state, "zb-v", 2);
}
void BM_Simulate_v_min(benchmark::State& state) {
  run_schedule(state, "v-min", 2);
}
void BM_Simulate_zb_auto(benchmark::State& state) {
  run_schedule(state, "zb-auto", 1);
}
void BM_Simulate_dualpipe_v(benchmark::State& state) {
  run_schedule(state, "dualpipe-v", 2);
}

BENCHMARK(BM_Simulate_1f1b)
    ->Args({8, 64})
    ->Args({16, 256})
    ->Args({64, 1024})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Simulate_gpipe)->Args({16, 256})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Simulate_interleaved)->Args({16, 256})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Simulate_zb_h1)->Args({16, 256})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Simulate_zb_h2)->Args({16, 256})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Simulate_zb_v)->Args({16, 256})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Simulate_v_min)->Args({16, 256})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Simulate_zb_auto)->Args({16, 256})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Simulate_dualpipe_v)->Args({16, 256})->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
