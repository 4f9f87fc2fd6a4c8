// The planner against brute force, the exhaustive baseline and its own promises.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>

#include "planner/planner.hpp"
#include "planner/stage_options.hpp"
#include "planner_support.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace planner_test {

PlannerOptions options(const Experiment& e, const char* schedule = "1f1b", int vpp = 1) {
  PlannerOptions o;
  o.schedule = schedule;
  o.vpp = vpp;
  o.memory_limit_bytes = e.capacity_bytes;
  o.threads = 1;
  o.max_evals = 3000;
  return o;
}

/// Every plan: every partition times every mode of every layer, simulated.
std::optional<Time> brute_force(const Experiment& e, const Schedule& sch, std::int64_t limit) {
  const int L = e.num_layers(), S = sch.num_stages;
  std::optional<Time> best;
  std::vector<int> cut(S - 1);
  std::function<void(int, int, std::vector<int>&)> parts = [&](int s, int left,
                                                               std::vector<int>& part) {
    if (s == S - 1) {
      part[s] = left;
      std::vector<Recompute> modes(L, Recompute::none);
      std::function<void(int)> assign = [&](int l) {
        if (l == L) {
          SimInput in = assemble(e, Plan{part, modes}, sch);
          in.capacity_bytes.assign(sch.num_ranks, limit);
          const SimResult r = simulate(in, sch);
          if (r.ok && r.fits && (!best || r.iteration_time < *best)) best = r.iteration_time;
          return;
        }
        for (Recompute m : kAllRecompute)
          if (e.layers.layers[l].has(m)) modes[l] = m, assign(l + 1);
      };
      assign(0);
      return;
    }
    for (int n = 1; n <= left - (S - 1 - s); ++n) {
      part[s] = n;
      parts(s + 1, left - n, part);
    }
  };
  std::vector<int> part(S);
  parts(0, L, part);
  return best;
}

const BaselineRun& baseline(const std::vector<BaselineRun>& all, const std::string& name) {
  for (const BaselineRun& b : all)
    if (b.name == name) return b;
  throw std::runtime_error("no baseline " + name);
}

TEST(RecomputeStep, LeastRecomputeThatFitsEqualsBruteForce) {
  // One rank's stage(s) against every per-layer mode assignment.
  std::mt19937_64 rng(3);
  for (const char* name : {"1f1b", "zb-h1", "zb-v"}) {
    for (int trial = 0; trial < 30; ++trial) {
      const std::vector<test::LayerKind> kinds = {test::random_kind(rng), test::random_kind(rng)};
      const int L = 8;
      std::vector<int> order(L);
      for (int& k : order) k = static_cast<int>(rng() % 2);
      const auto e = test::instance(kinds, order, 2, 4, 1 << 30);
      const Schedule sch = make_schedule(*e, name, effective_vpp(*find_schedule(name), 1));
      const std::vector<RankMemory> memory = memory_profile(sch);
      const StageOptionTable table(*e);
      // A partition with every stage non-empty.
      std::vector<int> part(sch.num_stages, L / sch.num_stages);
      part.back() += L % sch.num_stages;
      std::vector<int> first(sch.num_stages + 1, 0);
      for (int s = 0; s < sch.num_stages; ++s) first[s + 1] = first[s] + part[s];
      const RankMemory& mem = memory[0];
      std::vector<const StageOptions*> opts;
      int layers = 0;
      for (int s : mem.stages) opts.push_back(&table.get(first[s], part[s])), layers += part[s];
      // Brute force over the rank's layers: every assignment, its per-stage recompute time
      // and peak.
      const std::int64_t budget = 200'000 + static_cast<std::int64_t>(rng() % 1'500'000);
      std::vector<std::vector<Time>> feasible;
      std::vector<Recompute> modes(layers);
      std::function<void(int)> go = [&](int i) {
        if (i == layers) {
          std::vector<std::int64_t> a, ret;
          std::vector<Time> rc;
          int at = 0;
          for (int s : mem.stages) {
            std::int64_t sa = 0;
            Time srt = 0;
            for (int l = first[s]; l < first[s + 1]; ++l, ++at) {
              const LayerModeCost& c = *e->layers.layers[l].modes[modes[at]];
              sa += c.activation_bytes;
              srt += c.recompute;
            }
            a.push_back(sa);
            ret.push_back(sa);
            rc.push_back(srt);
          }
          if (peak_activation(mem, a, ret) <= budget) feasible.push_back(rc);
          return;
        }
        for (Recompute m : kAllRecompute) modes[i] = m, go(i + 1);
      };
      go(0);
      const std::vector<RankChoice> choices = rank_choices(mem, opts, budget, 1000);
      if (feasible.empty()) {
        EXPECT_TRUE(choices.empty()) << name;
        continue;
      }
      ASSERT_FALSE(choices.empty()) << name;
      // The best total equals brute force's, and every brute-force point is matched or beaten
      // on every stage by some returned choice.
      Time best_total = std::numeric_limits<Time>::max();
      for (const auto& rc : feasible)
        best_total = std::min(best_total, std::accumulate(rc.begin(), rc.end(), Time{0}));
      EXPECT_EQ(choices.front().total_recompute(), best_total) << name;
      for (const auto& rc : feasible) {
        bool covered = false;
        for (const RankChoice& c : choices) {
          bool le = true;
          for (std::size_t j = 0; j < rc.size(); ++j) le = le && c.recompute[j] <= rc[j];
          covered = covered || le;
        }
        EXPECT_TRUE(covered) << name;
      }
      for (const RankChoice& c : choices) EXPECT_LE(c.peak, budget);
    }
  }
}

TEST(RecomputeStep, FewChoicesAreTheLeastTotalsOfTheParetoSetOfBruteForce) {
  // A rank holding four interleaved stages, asked for only a few choices: the answer is the
  // brute force's Pareto set of per-stage recompute vectors (no feasible vector is beaten on
  // every stage by another), ordered by total then vector, cut to the limit. This pins both of
  // rank_choices' cuts: the cutoff on total recompute and the end of a stage's options once
  // one fits whatever the later stages choose.
  std::mt19937_64 rng(11);
  int cut_short = 0;
  for (int trial = 0; trial < 12; ++trial) {
    const std::vector<test::LayerKind> kinds = {test::random_kind(rng), test::random_kind(rng)};
    const int L = 16;
    std::vector<int> order(L);
    for (int& k : order) k = static_cast<int>(rng() % 2);
    const auto e = test::instance(kinds, order, 2, 8, 1 << 30);
    const Schedule sch = make_schedule(*e, "interleaved", 4);
    ASSERT_EQ(sch.num_stages, 8);
    const std::vector<RankMemory> memory = memory_profile(sch);
    const StageOptionTable table(*e);
    const RankMemory& mem = memory[0];
    ASSERT_EQ(mem.stages.size(), 4u);
    std::vector<const StageOptions*> opts;
    std::vector<int> layer_of;  // the rank's layers, stage by stage
    for (int s : mem.stages) {
      opts.push_back(&table.get(2 * s, 2));
      layer_of.push_back(2 * s), layer_of.push_back(2 * s + 1);
    }
    // A budget between the rank's all-full and all-none peaks.
    const auto peak_all = [&](Recompute m) {
      std::vector<std::int64_t> a(4, 0);
      for (std::size_t k = 0; k < layer_of.size(); ++k)
        a[k / 2] += e->layers.layers[layer_of[k]].modes[m]->activation_bytes;
      return peak_activation(mem, a, a);
    };
    const std::int64_t lo = peak_all(Recompute::full), hi = peak_all(Recompute::none);
    const std::int64_t budget =
        lo + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(hi - lo));
    std::set<std::vector<Time>> feasible;
    std::vector<Recompute> modes(layer_of.size());
    std::function<void(std::size_t)> go = [&](std::size_t i) {
      if (i == layer_of.size()) {
        std::vector<std::int64_t> a(4, 0);
        std::vector<Time> rc(4, 0);
        for (std::size_t k = 0; k < layer_of.size(); ++k) {
          const LayerModeCost& c = *e->layers.layers[layer_of[k]].modes[modes[k]];
          a[k / 2] += c.activation_bytes;
          rc[k / 2] += c.recompute;
        }
        if (peak_activation(mem, a, a) <= budget) feasible.insert(rc);
        return;
      }
      for (Recompute m : kAllRecompute) modes[i] = m, go(i + 1);
    };
    go(0);
    std::vector<std::vector<Time>> pareto;
    for (const auto& v : feasible) {
      bool beaten = false;
      for (const auto& w : feasible) {
        bool le = w != v;
        for (std::size_t j = 0; j < v.size() && le; ++j) le = w[j] <= v[j];
        beaten = beaten || le;
      }
      if (!beaten) pareto.push_back(v);
    }
    const auto total = [](const std::vector<Time>& v) {
      return std::accumulate(v.begin(), v.end(), Time{0});
    };
    std::sort(pareto.begin(), pareto.end(), [&](const auto& x, const auto& y) {
      return total(x) != total(y) ? total(x) < total(y) : x < y;
    });
    const std::size_t limit = 3;
    if (pareto.size() > limit) ++cut_short, pareto.resize(limit);
    const std::vector<RankChoice> choices = rank_choices(mem, opts, budget, limit);
    std::vector<std::vector<Time>> got;
    for (const RankChoice& c : choices) {
      got.push_back(c.recompute);
      EXPECT_LE(c.peak, budget) << "trial " << trial;
    }
    EXPECT_EQ(got, pareto) << "trial " << trial;
  }
  // Most trials have more Pareto points than the limit, so the cutoff is exercised.
  EXPECT_GE(cut_short, 6);
}

TEST(Planner, ExhaustiveBaselineEqualsBruteForceOnTinyCases) {
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 6; ++trial) {
    const std::vector<test::LayerKind> kinds = {test::random_kind(rng), test::random_kind(rng)};
    const std::vector<int> order = {0, 1, 0, 1, 1, 0};
    const int pp = 2 + trial % 2;
    // A limit between the all-full and the all-none needs of the first rank.
    const std::int64_t cap = 150'000 + static_cast<std::int64_t>(rng() % 600'000);
    const auto e = test::instance(kinds, order, pp, 4, cap);
    const PlannerOptions o = options(*e);
    const std::vector<BaselineRun> b = plan_baselines(*e, o);
    const BaselineRun& ex = baseline(b, "exhaustive");
    const std::optional<Time> truth = brute_force(*e, make_schedule(*e), cap);
    if (!truth) {
      EXPECT_FALSE(ex.run && ex.run->fits()) << "trial " << trial;
      continue;
    }
    ASSERT_TRUE(ex.run) << ex.error;
    EXPECT_EQ(ex.run->result.iteration_time, *truth) << "trial " << trial;
    const PlanOutcome out = plan_pipeline(*e, o);
    ASSERT_TRUE(out.best.fits());
    EXPECT_EQ(out.best.result.iteration_time, *truth) << "trial " << trial;
  }
}

TEST(Planner, SearchAloneFindsTheExhaustiveOptimumOnSmallCases) {
  // 12 layers of two kinds, pp 4, m 8: the search (exhaustive switched off) against the
  // exhaustive baseline.
  std::mt19937_64 rng(9);
  int equal = 0, cases = 0;
  for (int trial = 0; trial < 8; ++trial) {
    const std::vector<test::LayerKind> kinds = {test::random_kind(rng), test::random_kind(rng)};
    std::vector<int> order(12);
    for (int& k : order) k = static_cast<int>(rng() % 2);
    const std::int64_t cap = 600'000 + static_cast<std::int64_t>(rng() % 1'200'000);
    const auto e = test::instance(kinds, order, 4, 8, cap);
    PlannerOptions o = options(*e);
    const BaselineRun ex = baseline(plan_baselines(*e, o), "exhaustive");
    if (!ex.run || !ex.run->fits()) continue;
    o.exhaustive_limit = 0;  // the search must find it on its own
    const PlanOutcome out = plan_pipeline(*e, o);
    ++cases;
    ASSERT_TRUE(out.best.fits());
    EXPECT_GE(out.best.result.iteration_time, ex.run->result.iteration_time);
    if (out.best.result.iteration_time == ex.run->result.iteration_time) ++equal;
  }
  ASSERT_GE(cases, 4);
  EXPECT_EQ(equal, cases);
}

TEST(Planner, UnlimitedMemoryAndIdenticalLayersGiveUniformNone) {
  std::mt19937_64 rng(1);
  const std::vector<test::LayerKind> kinds = {test::random_kind(rng)};
  const auto e = test::instance(kinds, std::vector<int>(16, 0), 4, 8, std::int64_t{1} << 40);
  const PlanOutcome out = plan_pipeline(*e, options(*e));
  EXPECT_EQ(out.best.plan.partition, (std::vector<int>{4, 4, 4, 4}));
  EXPECT_EQ(out.best.plan.recompute, std::vector<Recompute>(16, Recompute::none));
}

TEST(Planner, PlansFitReproduceAndAreDeterministic) {
  std::mt19937_64 rng(21);
  const std::vector<test::LayerKind> kinds = {test::random_kind(rng), test::random_kind(rng)};
  std::vector<int> order(20);
  for (int& k : order) k = static_cast<int>(rng() % 2);
  for (const auto& [name, vpp] : std::vector<std::pair<const char*, int>>{
           {"1f1b", 1}, {"interleaved", 2}, {"zb-h1", 1}, {"zb-v", 2}}) {
    const auto e = test::instance(kinds, order, 4, 8, 1'100'000);
    PlannerOptions o = options(*e, name, vpp);
    o.max_evals = 1500;
    const PlanOutcome a = plan_pipeline(*e, o);
    o.threads = 2;
    const PlanOutcome b = plan_pipeline(*e, o);
    EXPECT_EQ(a.best.plan, b.best.plan) << name;  // thread count does not matter
    o.seed = 2;
    const PlanOutcome c = plan_pipeline(*e, o);  // another seed: maybe another plan, same rules
    for (const PlanOutcome* out : {&a, &b, &c}) {
      ASSERT_TRUE(out->best.fits()) << name << ": " << out->infeasible;
      for (const DeviceResult& d : out->best.result.devices)
        EXPECT_LE(d.peak_bytes, o.memory_limit_bytes) << name;
      // Re-simulating the plan as `bmpipe simulate` would gives the reported numbers.
      const Schedule sch = make_schedule(*e, name, vpp, &out->best.plan);
      SimInput in = assemble(*e, out->best.plan, sch);
      const SimResult again = simulate(in, sch);
      EXPECT_EQ(again.iteration_time, out->best.result.iteration_time) << name;
      // Never slower than a baseline that fits.
      for (const BaselineRun& base : out->baselines) {
        if (!base.run || !base.run->fits()) continue;
        EXPECT_LE(out->best.result.iteration_time, base.run->result.iteration_time)
            << name << " vs " << base.name;
      }
    }
  }
}

TEST(Planner, ALimitNoPlanMeetsNamesTheRankAndItsLeastPeak) {
  std::mt19937_64 rng(4);
  const std::vector<test::LayerKind> kinds = {test::random_kind(rng)};
  const auto e = test::instance(kinds, std::vector<int>(8, 0), 2, 4, 1000);
  const PlanOutcome out = plan_pipeline(*e, options(*e));
  EXPECT_FALSE(out.best.fits());
  EXPECT_NE(out.infeasible.find("rank "), std::string::npos) << out.infeasible;
  EXPECT_NE(out.infeasible.find("needs at least"), std::string::npos) << out.infeasible;
}

TEST(Planner, AnUnknownScheduleIsAConfigErrorNotACrash) {
  // plan_pipeline used to dereference find_schedule() before any check.
  std::mt19937_64 rng(2);
  const auto e = test::instance({test::random_kind(rng)}, std::vector<int>(8, 0), 2, 4, 1 << 30);
  const PlannerOptions o = options(*e, "no-such-schedule");
  EXPECT_THROW(plan_pipeline(*e, o), ConfigError);
  EXPECT_THROW(plan_baselines(*e, o), ConfigError);
}

TEST(Planner, BaselineNamesAreTheBaselinesRunInOrder) {
  std::mt19937_64 rng(6);
  const auto e = test::instance({test::random_kind(rng)}, std::vector<int>(8, 0), 2, 4, 1 << 30);
  const PlannerOptions o = options(*e);
  std::vector<std::string> ran;
  for (const BaselineRun& b : plan_baselines(*e, o)) ran.push_back(b.name);
  EXPECT_EQ(ran, baseline_names());
  std::vector<std::string> reported;
  for (const BaselineRun& b : plan_pipeline(*e, o).baselines) reported.push_back(b.name);
  EXPECT_EQ(reported, baseline_names());
  EXPECT_EQ(std::set<std::string>(ran.begin(), ran.end()).size(), ran.size());
  for (const char* name : {"megatron-no-recompute", "megatron-full-recompute", "megatron-best-rule",
                           "adapipe-dp", "sapp-ilp", "exhaustive"})
    EXPECT_NE(std::find(ran.begin(), ran.end(), name), ran.end()) << name;
}

}  // namespace planner_test
}  // namespace bmpipe
