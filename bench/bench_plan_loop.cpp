// The planner's inner loop: one candidate plan = assemble (a re-summation of the layer
// table) + simulate. 80 decoder layers, pp 8, m 32 (a Llama-2-70B-sized pipeline).
// items_per_second is candidate plans per second on one core.
#include <benchmark/benchmark.h>

#include <random>

#include "experiment/experiment.hpp"

namespace {

using namespace bmpipe;

// Measured-form layers shaped like Llama-2-70B's on 8 devices of 80 GB (the figures only
// need to be plausible: the loop's cost does not depend on them).
const char* kConfig = R"(
cluster:
  nodes: 1
  devices_per_node: 8
  device: {name: gpu, memory_GiB: 80}
  intra_node: {bandwidth_GBps: 450, latency_us: 5}
model:
  layers:
    - {name: decoder, count: 80, forward_ms: 12, backward_input_ms: 12, backward_weight_ms: 12,
       activation_bytes: 214958080, output_bytes: 33554432, param_bytes: 1711276032}
training:
  schedule: 1f1b
  pp: 8
  microbatches: 32
)";

/// Partitions of 80 layers over 8 stages, each at least 1, drawn once and reused.
std::vector<Plan> plans(int count) {
  std::mt19937 rng(42);
  std::vector<Plan> out;
  for (int k = 0; k < count; ++k) {
    Plan p;
    p.partition.assign(8, 1);
    std::uniform_int_distribution<int> stage(0, 7);
    for (int l = 8; l < 80; ++l) ++p.partition[stage(rng)];
    p.recompute.assign(80, Recompute::none);
    out.push_back(std::move(p));
  }
  return out;
}

void BM_PlanLoop_AssembleSimulate(benchmark::State& state) {
  const auto e = prepare(parse_config(kConfig, "bench.yaml"));
  const Schedule sch = make_schedule(*e);
  const std::vector<Plan> candidates = plans(64);
  SimInput in;
  std::size_t k = 0;
  for (auto _ : state) {
    assemble(*e, candidates[k++ % candidates.size()], sch, in);
    const SimResult r = simulate(in, sch);
    benchmark::DoNotOptimize(r.iteration_time);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

void BM_PlanLoop_AssembleOnly(benchmark::State& state) {
  const auto e = prepare(parse_config(kConfig, "bench.yaml"));
  const Schedule sch = make_schedule(*e);
  const std::vector<Plan> candidates = plans(64);
  SimInput in;
  std::size_t k = 0;
  for (auto _ : state) {
    assemble(*e, candidates[k++ % candidates.size()], sch, in);
    benchmark::DoNotOptimize(in.stages.data());
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

BENCHMARK(BM_PlanLoop_AssembleSimulate)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_PlanLoop_AssembleOnly)->Unit(benchmark::kMicrosecond);

}  // namespace
