// The planner's per-layer choice among none, selective, full and offload (issue 43): its
// step against exhaustive enumeration of the modes on small ranks, and `plan --offload`'s
// joint plan against recompute alone and offload alone.
#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <numeric>
#include <random>

#include "planner/stage_options.hpp"
#include "planner_support.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace offload_mode_plan_test {

// Random layers with the five modes: none, selective and full as planner_support's kinds,
// offload keeping none's bytes with 30-90 % of them offloaded, each copy 0-7 us, and
// selective_offload keeping selective's bytes and recompute with 20-80 % of them offloaded,
// each copy 0-7 us. Checked on each rank of 1F1B (pp 4, one stage a rank) and interleaved
// (pp 2, v 2: two stages a rank), 3 layers a stage, offloaded bytes resident for 2
// micro-batches (lead 0): every one of the 5^6 mode assignments of a rank is tried, and the
// step's first choice must have the least total price (recompute + both copies of the
// offload layers' bytes) of those that fit under the memory model (peak_activation with the
// offloaded bytes), and every fitting assignment must be matched or beaten on each stage's
// price by some choice returned.
TEST(OffloadModeStep, MatchesExhaustiveEnumerationOfTheFiveModes) {
  std::mt19937_64 rng(43);
  // Ranks where something fits; layers the best choices offload, in each offload mode.
  int checked = 0, offloading = 0, selective_offloading = 0;
  for (int trial = 0; trial < 12; ++trial) {
    const bool interleaved = trial % 2 == 1;
    const int pp = interleaved ? 2 : 4, v = interleaved ? 2 : 1, m = 8;
    const int per_stage = 3, stages = pp * v, layers = stages * per_stage;
    std::vector<test::LayerKind> kinds;
    for (int k = 0; k < 3; ++k) kinds.push_back(test::random_kind(rng));
    std::vector<int> order;
    for (int l = 0; l < layers; ++l) order.push_back(static_cast<int>(rng() % kinds.size()));
    auto e = std::make_shared<Experiment>(*test::instance(kinds, order, pp, m, 1 << 30));
    for (int l = 0; l < layers; ++l) {
      LayerRow& row = e->layers.layers[l];
      LayerModeCost off = *row.modes[Recompute::none];
      off.offload_bytes = off.activation_bytes * static_cast<std::int64_t>(3 + rng() % 7) / 10;
      off.offload_copy = static_cast<Time>(rng() % 8) * 1000;
      row.modes[Recompute::offload] = off;
      LayerModeCost sel_off = *row.modes[Recompute::selective];
      sel_off.offload_bytes =
          sel_off.activation_bytes * static_cast<std::int64_t>(2 + rng() % 7) / 10;
      sel_off.offload_copy = static_cast<Time>(rng() % 8) * 1000;
      row.modes[Recompute::selective_offload] = sel_off;
    }
    const Schedule sch = test::generate(interleaved ? "interleaved" : "1f1b", pp, m, v);
    const std::vector<RankMemory> memory = memory_profile(sch, 2);
    const StageOptionTable table(*e);
    for (std::size_t r = 0; r < memory.size(); ++r) {
      const RankMemory& mem = memory[r];
      std::vector<const StageOptions*> opts;
      std::vector<int> rank_layers;
      for (int s : mem.stages) {
        opts.push_back(&table.get(s * per_stage, per_stage));
        for (int l = s * per_stage; l < (s + 1) * per_stage; ++l) rank_layers.push_back(l);
      }
      const int n = static_cast<int>(rank_layers.size());
      const std::int64_t budget = 100'000 + static_cast<std::int64_t>(rng() % 900'000);
      std::vector<std::vector<Time>> feasible;  // per fitting assignment, each stage's price
      std::vector<Recompute> modes(n);
      std::function<void(int)> go = [&](int i) {
        if (i == n) {
          std::vector<std::int64_t> a, off;
          std::vector<Time> price;
          for (std::size_t j = 0, at = 0; j < mem.stages.size(); ++j) {
            std::int64_t sa = 0, so = 0;
            Time sp = 0;
            for (int k = 0; k < per_stage; ++k, ++at) {
              const LayerModeCost& c = *e->layers.layers[rank_layers[at]].modes[modes[at]];
              sa += c.activation_bytes;
              so += c.offload_bytes;
              sp += c.recompute + 2 * c.offload_copy;
            }
            a.push_back(sa), off.push_back(so), price.push_back(sp);
          }
          if (peak_activation(mem, a, a, off) <= budget) feasible.push_back(price);
          return;
        }
        for (Recompute mode : kAllModes) modes[i] = mode, go(i + 1);
      };
      go(0);
      const std::string name = "trial " + std::to_string(trial) + ", rank " + std::to_string(r);
      const std::vector<RankChoice> choices = rank_choices(mem, opts, budget, 1000);
      if (feasible.empty()) {
        EXPECT_TRUE(choices.empty()) << name;
        continue;
      }
      ASSERT_FALSE(choices.empty()) << name;
      Time best = std::numeric_limits<Time>::max();
      for (const auto& p : feasible)
        best = std::min(best, std::accumulate(p.begin(), p.end(), Time{0}));
      EXPECT_EQ(choices.front().total_cost(), best) << name;
      for (const auto& p : feasible) {
        bool covered = false;
        for (const RankChoice& c : choices) {
          bool le = true;
          for (std::size_t j = 0; j < p.size(); ++j) le = le && c.cost[j] <= p[j];
          covered = covered || le;
        }
        EXPECT_TRUE(covered) << name;
      }
      // What a choice writes into the plan is what it was priced at.
      std::vector<Recompute> written(layers, Recompute::none);
      for (std::size_t j = 0; j < mem.stages.size(); ++j)
        apply_option(*opts[j], opts[j]->options[choices.front().option[j]],
                     mem.stages[j] * per_stage, written);
      Time priced = 0;
      for (int l : rank_layers) {
        const LayerModeCost& c = *e->layers.layers[l].modes[written[l]];
        priced += c.recompute + 2 * c.offload_copy;
      }
      EXPECT_EQ(priced, best) << name;
      ++checked;
      for (int l : rank_layers) {
        offloading += written[l] == Recompute::offload ? 1 : 0;
        selective_offloading += written[l] == Recompute::selective_offload ? 1 : 0;
      }
    }
  }
  // The cases are not vacuous: many ranks fit, and the best choices offload some layers in
  // each offload mode.
  EXPECT_GE(checked, 10);
  EXPECT_GT(offloading, 0);
  EXPECT_GT(selective_offloading, 0);
}

// A case built so that selective_offload strictly beats the four other modes. One kind of
// layer, 3 a stage, 1F1B at pp 4 and 8 micro-batches, offloaded bytes resident for 2
// micro-batches; rank 0 holds 4 micro-batches in flight, 2 of them with their offloaded
// bytes on the host. Per layer (A: bytes kept, O: of them offloaded, price: recompute + both
// copies):
//   none               A 100 000                       price      0
//   selective          A  60 000                       price  2 000
//   full               A  10 000                       price 10 000
//   offload            A 100 000, O 60 000, copy 1 500 price  3 000
//   selective_offload  A  60 000, O 40 000, copy 1 000 price  4 000 (2 000 + 2 x 1 000)
// A moment of rank 0 holds about 2 A + 2 (A - O) a layer: 400 000, 240 000, 40 000, 280 000
// and 160 000. The budget is rank 0's peak with all three layers in selective_offload
// (12 000 in price), so nothing holding more fits: every other mix without full is cheaper
// but holds more, and one full layer with two selective_offload ones already costs 18 000.
// The test does not rely on this arithmetic: it tries all 5^3 assignments under the memory
// model (peak_activation) and
// requires the least price to be reached by all-selective_offload alone, strictly below
// every assignment that leaves selective_offload out, and the step to pick it.
TEST(OffloadModeStep, PicksSelectiveOffloadWhereItStrictlyBeatsTheOtherFourModes) {
  test::LayerKind k;
  k.f = 10'000, k.i = 10'000, k.w = 5'000;
  k.recompute[Recompute::none] = 0;
  k.recompute[Recompute::selective] = 2'000;
  k.recompute[Recompute::full] = 10'000;
  k.act[Recompute::none] = 100'000;
  k.act[Recompute::selective] = 60'000;
  k.act[Recompute::full] = 10'000;
  k.static_bytes = 10'000;
  const int pp = 4, m = 8, per_stage = 3, layers = pp * per_stage;
  auto e = std::make_shared<Experiment>(
      *test::instance({k}, std::vector<int>(static_cast<std::size_t>(layers), 0), pp, m, 1 << 30));
  for (LayerRow& row : e->layers.layers) {
    row.modes[Recompute::offload] = LayerModeCost{0, 100'000, {}, 60'000, 1'500};
    row.modes[Recompute::selective_offload] = LayerModeCost{2'000, 60'000, {}, 40'000, 1'000};
  }
  const Schedule sch = test::generate("1f1b", pp, m, 1);
  const std::vector<RankMemory> memory = memory_profile(sch, 2);
  const RankMemory& mem = memory[0];
  ASSERT_EQ(mem.stages, std::vector<int>{0});
  const auto price_and_peak = [&](const std::vector<Recompute>& modes) {
    std::int64_t a = 0, off = 0;
    Time price = 0;
    for (Recompute r : modes) {
      const LayerModeCost& c = *e->layers.layers[0].modes[r];
      a += c.activation_bytes, off += c.offload_bytes;
      price += c.recompute + 2 * c.offload_copy;
    }
    return std::make_pair(price, peak_activation(mem, {a}, {a}, {off}));
  };
  const std::int64_t budget =
      price_and_peak(std::vector<Recompute>(3, Recompute::selective_offload)).second;
  // Exhaustive: every assignment of the stage's three layers.
  Time best = std::numeric_limits<Time>::max(), best_without = best;
  int best_count = 0;
  std::vector<Recompute> best_modes;
  for (Recompute a : kAllModes)
    for (Recompute b : kAllModes)
      for (Recompute c : kAllModes) {
        const std::vector<Recompute> modes = {a, b, c};
        const auto [price, peak] = price_and_peak(modes);
        if (peak > budget) continue;
        if (price < best) best = price, best_count = 0, best_modes = modes;
        if (price == best) ++best_count;
        if (std::count(modes.begin(), modes.end(), Recompute::selective_offload) == 0)
          best_without = std::min(best_without, price);
      }
  EXPECT_EQ(best, 12'000);
  EXPECT_EQ(best_count, 1);
  EXPECT_EQ(best_modes, std::vector<Recompute>(3, Recompute::selective_offload));
  EXPECT_GT(best_without, best);  // strictly: no plan of the other four modes comes close
  // The step finds it.
  const StageOptionTable table(*e);
  const StageOptions& opts = table.get(0, per_stage);
  const std::vector<RankChoice> choices = rank_choices(mem, {&opts}, budget);
  ASSERT_FALSE(choices.empty());
  EXPECT_EQ(choices.front().total_cost(), best);
  std::vector<Recompute> written(layers, Recompute::none);
  apply_option(opts, opts.options[choices.front().option[0]], 0, written);
  for (int l = 0; l < per_stage; ++l)
    EXPECT_EQ(written[l], Recompute::selective_offload) << "layer " << l;
}

// Llama-2-7B on 8 GB200, pp 8, 16 micro-batches of 4 096 tokens (offload_plan_test's job):
// rank 0 holds 8 micro-batches in flight, so offload saves memory there. `--offload auto`
// plans the job-wide choices, every layer's mode per layer and offload alone, and keeps the
// fastest: at each limit its plan is never slower than recompute alone (plan without
// --offload) nor than offload alone (--offload only, none or offload per layer), each
// planned by its own command here; and --offload only recomputes no layer.
TEST(OffloadModePlan, TheJointPlanIsNeverSlowerThanEitherAlone) {
  const test::ScratchDir dir;
  const std::string job = test::write_file(
      dir.file("job.yaml"),
      "cluster: {nodes: 1, devices_per_node: 8, device: {preset: gb200}}\n"
      "model: {preset: llama2-7b}\n"
      "training: {schedule: 1f1b, pp: 8, tp: 1, seq_length: 4096, micro_batch_size: 1, "
      "microbatches: 16}\n");
  const auto plan = [&](int limit, const std::string& extra) {
    return test::run_cli("plan " + job + " --quiet --json --threads 2 --max-evals 100 " +
                         "--memory-limit-GiB " + std::to_string(limit) + " " + extra);
  };
  const auto time_of = [](const test::CliRun& r) {
    return nlohmann::json::parse(r.out)["plan"]["iteration_time_ms"].get<double>();
  };
  int only_fitted = 0;
  for (const int limit : {30, 40}) {
    SCOPED_TRACE("limit " + std::to_string(limit) + " GiB");
    const test::CliRun recompute = plan(limit, ""), only = plan(limit, "--offload only"),
                       joint = plan(limit, "--offload auto");
    ASSERT_EQ(recompute.code, 0) << recompute.all();
    ASSERT_EQ(joint.code, 0) << joint.all();
    EXPECT_LE(time_of(joint), time_of(recompute));
    if (only.code == 0) {
      ++only_fitted;
      EXPECT_LE(time_of(joint), time_of(only));
      const nlohmann::json j = nlohmann::json::parse(only.out);
      for (const auto& st : j["plan"]["stages"]) {
        EXPECT_EQ(st["recompute_layers"]["selective"], 0);
        EXPECT_EQ(st["recompute_layers"]["full"], 0);
      }
      EXPECT_EQ(j["offload"]["form"], "only");
    } else {
      EXPECT_EQ(only.code, 2) << only.all();  // nothing fits without recompute
    }
  }
  EXPECT_GE(only_fitted, 1);  // at 40 GiB offload alone fits (646.7 ms when written)
}

}  // namespace offload_mode_plan_test
}  // namespace bmpipe
