// The planner's quality and speed (the planner issue's targets):
//   BM_PlanSmallInstances     100 seeded small instances against the exhaustive optimum:
//                             counters equal_pct (target >= 95) and median_plan_s (< 1 s)
//   BM_PlanExample/<file>     an example config end to end; counters: plan_ms and the
//                             iteration time of every baseline, speedup over the fastest
//                             fitting megatron-* baseline
//   BM_PlanScaling/L/m        planner wall time and evaluations for L layers, pp 8, m
// Every row runs once (Iterations(1)): these are sweeps with counters, read from the output.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <random>

#include "experiment/experiment.hpp"
#include "planner/planner.hpp"
#include "planner/planner_support.hpp"

namespace {

using namespace bmpipe;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

const BaselineRun* find(const std::vector<BaselineRun>& all, const char* name) {
  for (const BaselineRun& b : all)
    if (b.name == name) return &b;
  return nullptr;
}

/// <= 14 layers: an embedding (none only), 12 decoder layers of two kinds, a head (none only).
std::shared_ptr<Experiment> small_instance(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<test::LayerKind> kinds = {test::random_kind(rng), test::random_kind(rng),
                                        test::random_kind(rng), test::random_kind(rng)};
  std::vector<int> order{2};
  for (int i = 0; i < 12; ++i) order.push_back(static_cast<int>(rng() % 2));
  order.push_back(3);
  auto e = std::make_shared<Experiment>(*test::instance(kinds, order, 4, 8, std::int64_t{1} << 40));
  for (int l : {0, 13})
    for (Recompute r : {Recompute::selective, Recompute::full})
      e->layers.layers[l].modes[r].reset();
  return e;
}

void BM_PlanSmallInstances(benchmark::State& state) {
  int equal = 0, cases = 0, tried = 0, harder = 0;
  std::vector<double> times;
  for (auto _ : state) {
    for (std::uint64_t seed = 1; cases < 100 && tried < 400; ++seed, ++tried) {
      auto e = small_instance(seed);
      PlannerOptions o;
      o.threads = 1;
      o.memory_limit_bytes = e->capacity_bytes;
      // A random limit between what full recompute everywhere and none anywhere need.
      const std::vector<BaselineRun> loose = plan_baselines(*e, o);
      auto peak = [](const BaselineRun* b) {
        std::int64_t p = 0;
        for (const DeviceResult& d : b->run->result.devices) p = std::max(p, d.peak_bytes);
        return p;
      };
      const std::int64_t hi = peak(find(loose, "megatron-no-recompute")),
                         lo = peak(find(loose, "megatron-full-recompute"));
      std::mt19937_64 rng(seed * 7919);
      const double u = 0.1 + 0.8 * static_cast<double>(rng() % 1000) / 1000.0;
      o.memory_limit_bytes = lo + static_cast<std::int64_t>(u * static_cast<double>(hi - lo));
      e->capacity_bytes = o.memory_limit_bytes;
      const BaselineRun* ex = nullptr;
      const std::vector<BaselineRun> all = plan_baselines(*e, o);
      ex = find(all, "exhaustive");
      if (!ex->run || !ex->run->fits()) continue;
      o.exhaustive_limit = 0;  // the search on its own
      const auto start = Clock::now();
      const PlanOutcome out = plan_pipeline(*e, o);
      times.push_back(seconds_since(start));
      ++cases;
      if (out.best.fits() && out.best.result.iteration_time == ex->run->result.iteration_time)
        ++equal;
      // Cases where no baseline but exhaustive reaches the optimum: the search had to find it.
      bool baseline_optimal = false;
      for (const BaselineRun& b : all)
        if (b.name != "exhaustive" && b.run && b.run->fits() &&
            b.run->result.iteration_time == ex->run->result.iteration_time)
          baseline_optimal = true;
      harder += !baseline_optimal;
    }
  }
  std::sort(times.begin(), times.end());
  state.counters["instances"] = cases;
  state.counters["equal_pct"] = cases ? 100.0 * equal / cases : 0;
  state.counters["optimum_beyond_baselines"] = harder;
  state.counters["median_plan_s"] = times.empty() ? 0 : times[times.size() / 2];
  state.counters["max_plan_s"] = times.empty() ? 0 : times.back();
}

void plan_example(benchmark::State& state, const std::string& file, const std::string& schedule,
                  int vpp) {
  const auto e = prepare(load_config(std::string(BMPIPE_SOURCE_DIR) + "/configs/examples/" + file));
  PlannerOptions o;
  o.schedule = schedule;
  o.vpp = vpp;
  o.memory_limit_bytes = e->capacity_bytes;
  PlanOutcome out;
  double wall = 0;
  for (auto _ : state) {
    const auto start = Clock::now();
    out = plan_pipeline(*e, o);
    wall = seconds_since(start);
  }
  state.counters["plan_s"] = wall;
  state.counters["evaluations"] = static_cast<double>(out.stats.evaluations);
  state.counters["plan_ms"] = ns_to_ms(out.best.result.iteration_time);
  for (const BaselineRun& b : out.baselines) {
    if (!b.run) continue;
    state.counters[b.name + (b.run->fits() ? "_ms" : "_ms_NOFIT")] =
        ns_to_ms(b.run->result.iteration_time);
  }
  if (const BaselineRun* m = megatron_reference(out))
    state.counters["speedup_vs_megatron"] = static_cast<double>(m->run->result.iteration_time) /
                                            static_cast<double>(out.best.result.iteration_time);
}

void BM_PlanScaling(benchmark::State& state) {
  const int layers = static_cast<int>(state.range(0)), m = static_cast<int>(state.range(1));
  std::mt19937_64 rng(17);
  const std::vector<test::LayerKind> kinds = {test::random_kind(rng), test::random_kind(rng)};
  std::vector<int> order(layers);
  for (int& k : order) k = static_cast<int>(rng() % 2);
  auto e = std::make_shared<Experiment>(*test::instance(kinds, order, 8, m, std::int64_t{1} << 40));
  PlannerOptions o;
  o.memory_limit_bytes = e->capacity_bytes;
  // Memory-tight: 70% of what megatron-no-recompute needs on its busiest rank.
  const std::vector<BaselineRun> loose = plan_baselines(*e, o);
  std::int64_t need = 0;
  for (const DeviceResult& d : find(loose, "megatron-no-recompute")->run->result.devices)
    need = std::max(need, d.peak_bytes);
  o.memory_limit_bytes = need * 7 / 10;
  e->capacity_bytes = o.memory_limit_bytes;
  PlanOutcome out;
  double wall = 0;
  for (auto _ : state) {
    const auto start = Clock::now();
    out = plan_pipeline(*e, o);
    wall = seconds_since(start);
  }
  state.counters["plan_s"] = wall;
  state.counters["evaluations"] = static_cast<double>(out.stats.evaluations);
  state.counters["fits"] = out.best.fits();
}

BENCHMARK(BM_PlanSmallInstances)->Iterations(1)->Unit(benchmark::kSecond);
BENCHMARK(BM_PlanScaling)
    ->ArgsProduct({{32, 80, 160}, {16, 64, 256}})
    ->Iterations(1)
    ->Unit(benchmark::kSecond);

[[maybe_unused]] const bool kExamples = [] {
  for (const auto& [file, schedule, vpp] : std::vector<std::tuple<std::string, std::string, int>>{
           {"llama2_70b_measured_pp8.yaml", "1f1b", 1},
           {"llama2_70b_measured_pp8.yaml", "interleaved", 2},
           {"ascend910b_llama2_70b_plan.yaml", "1f1b", 1}})
    benchmark::RegisterBenchmark(("BM_PlanExample/" + file + "/" + schedule).c_str(),
                                 [=](benchmark::State& s) { plan_example(s, file, schedule, vpp); })
        ->Iterations(1)
        ->Unit(benchmark::kSecond);
  return true;
}();

}  // namespace
