// Issue 17: the honest baselines (megatron-no-recompute, megatron-full-recompute,
// megatron-best-rule), the first-N order both frameworks recompute in, and
// `plan --expressible`: the search keeps to what a framework states exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <random>

#include "api/api.hpp"
#include "frameworks/megatron/export.hpp"
#include "planner/planner.hpp"
#include "planner_support.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace {

PlannerOptions options(const Experiment& e, const Exporter* x = nullptr) {
  PlannerOptions o;
  o.memory_limit_bytes = e.capacity_bytes;
  o.threads = 1;
  o.max_evals = 2000;
  o.expressible = x;
  return o;
}

const BaselineRun& baseline(const PlanOutcome& o, const std::string& name) {
  const BaselineRun* b = find_baseline(o, name);
  if (!b) throw std::runtime_error("no baseline " + name);
  return *b;
}

/// Every composition of `layers` into `stages` parts of at least one.
std::vector<std::vector<int>> partitions(int layers, int stages) {
  std::vector<std::vector<int>> out;
  std::vector<int> part(stages);
  std::function<void(int, int)> go = [&](int s, int left) {
    if (s == stages - 1) {
      part[s] = left;
      out.push_back(part);
      return;
    }
    for (int n = 1; n <= left - (stages - 1 - s); ++n) part[s] = n, go(s + 1, left - n);
  };
  go(0, layers);
  return out;
}

/// The fastest fitting run of `plans` under 1F1B, simulated here (not by the planner).
std::optional<Time> fastest(const Experiment& e, const std::vector<Plan>& plans) {
  const Schedule sch = make_schedule(e);
  std::optional<Time> best;
  for (const Plan& p : plans) {
    const SimResult r = run(e, p, sch, RunOptions{e.capacity_bytes, nullptr});
    if (r.ok && r.fits && (!best || r.iteration_time < *best)) best = r.iteration_time;
  }
  return best;
}

/// Hand-built: the modes of a plan as a string, one letter per layer (n, s, f).
std::vector<Recompute> modes(const std::string& letters) {
  std::vector<Recompute> out;
  for (char c : letters)
    out.push_back(c == 'f' ? Recompute::full : c == 's' ? Recompute::selective : Recompute::none);
  return out;
}

TEST(Baselines, TheThreeMegatronBaselinesAreWhatTheirNamesSay) {
  std::mt19937_64 rng(11);
  const std::vector<test::LayerKind> kinds = {test::random_kind(rng)};
  // 8 identical layers, pp 2: even split [4, 4]; memory for everything.
  const auto e = test::instance(kinds, std::vector<int>(8, 0), 2, 4, std::int64_t{1} << 40);
  const PlanOutcome out = plan_pipeline(*e, options(*e));
  const BaselineRun& none = baseline(out, "megatron-no-recompute");
  const BaselineRun& full = baseline(out, "megatron-full-recompute");
  const BaselineRun& rule = baseline(out, "megatron-best-rule");
  EXPECT_EQ(none.run->plan.partition, (std::vector<int>{4, 4}));
  EXPECT_EQ(none.run->plan.recompute, modes("nnnnnnnn"));
  EXPECT_EQ(full.run->plan.partition, (std::vector<int>{4, 4}));
  EXPECT_EQ(full.run->plan.recompute, modes("ffffffff"));
  // Memory to spare: no recompute is the fastest rule.
  EXPECT_EQ(rule.run->plan.recompute, modes("nnnnnnnn"));
  // Ties go to the first of the three: megatron-no-recompute.
  ASSERT_NE(megatron_reference(out), nullptr);
  EXPECT_EQ(megatron_reference(out)->name, "megatron-no-recompute");
}

TEST(Baselines, MegatronBestRuleIsTheFastestRuleOnTheEvenSplit) {
  // Every rule the flags state on [3, 3] (none, selective, block 1, block 2, uniform),
  // simulated here; the baseline is the fastest that fits.
  std::mt19937_64 rng(12);
  int tight = 0;
  for (int trial = 0; trial < 12; ++trial) {
    const std::vector<test::LayerKind> kinds = {test::random_kind(rng), test::random_kind(rng)};
    std::vector<int> order(6);
    for (int& k : order) k = static_cast<int>(rng() % 2);
    const std::int64_t cap = 150'000 + static_cast<std::int64_t>(rng() % 600'000);
    const auto e = test::instance(kinds, order, 2, 4, cap);
    const std::vector<Plan> rules = {{{3, 3}, modes("nnnnnn")},
                                     {{3, 3}, modes("ssssss")},
                                     {{3, 3}, modes("fnnfnn")},
                                     {{3, 3}, modes("ffnffn")},
                                     {{3, 3}, modes("ffffff")}};
    const std::optional<Time> truth = fastest(*e, rules);
    const std::vector<BaselineRun> b = plan_baselines(*e, options(*e));
    const BaselineRun& rule = *std::find_if(
        b.begin(), b.end(), [](const BaselineRun& x) { return x.name == "megatron-best-rule"; });
    ASSERT_TRUE(rule.run);
    if (!truth) {
      EXPECT_FALSE(rule.run->fits()) << "trial " << trial;
      continue;
    }
    ++tight;
    EXPECT_TRUE(rule.run->fits()) << "trial " << trial;
    EXPECT_EQ(rule.run->result.iteration_time, *truth) << "trial " << trial;
  }
  EXPECT_GE(tight, 4);
}

TEST(FirstN, EachStageRecomputesItsFirstLayersFullThenSelective) {
  std::mt19937_64 rng(13);
  const auto e = test::instance({test::random_kind(rng)}, std::vector<int>(7, 0), 2, 4, 1 << 30);
  // Stage 0 [none, full, selective, full], stage 1 [none, selective, none].
  const Plan plan{{4, 3}, modes("nfsfnsn")};
  EXPECT_EQ(first_n_order(*e, plan).recompute, modes("ffsnsnn"));
  EXPECT_EQ(first_n_order(*e, plan).partition, plan.partition);
}

TEST(FirstN, TheDefaultPlannerPrefersTheFirstLayersAtEqualTime) {
  // Identical layers: which layer of a stage recomputes changes neither its time nor its
  // memory, so the plan must recompute the first ones of every stage.
  std::mt19937_64 rng(14);
  int recomputing = 0;
  for (int trial = 0; trial < 8; ++trial) {
    const std::vector<test::LayerKind> kinds = {test::random_kind(rng)};
    const std::int64_t cap = 300'000 + static_cast<std::int64_t>(rng() % 900'000);
    const auto e = test::instance(kinds, std::vector<int>(12, 0), 4, 8, cap);
    const PlanOutcome out = plan_pipeline(*e, options(*e));
    if (!out.best.fits()) continue;
    recomputing += std::count_if(out.best.plan.recompute.begin(), out.best.plan.recompute.end(),
                                 [](Recompute r) { return r != Recompute::none; }) > 0;
    EXPECT_EQ(out.best.plan.recompute, first_n_order(*e, out.best.plan).recompute)
        << "trial " << trial;
    EXPECT_TRUE(expressible_by(*e, out.best.plan, out.best.schedule, find_exporter("mindformers")));
  }
  EXPECT_GE(recomputing, 3);
}

TEST(Expressible, MegatronPlansAreExactAndBetweenTheOptimumAndTheBestRule) {
  // Small cases: the optimum over every plan Megatron-LM's flags state (every partition
  // times every rule), simulated here, against plan --expressible megatron.
  std::mt19937_64 rng(15);
  int cases = 0;
  for (int trial = 0; trial < 8; ++trial) {
    const std::vector<test::LayerKind> kinds = {test::random_kind(rng), test::random_kind(rng)};
    std::vector<int> order(8);
    for (int& k : order) k = static_cast<int>(rng() % 2);
    const std::int64_t cap = 300'000 + static_cast<std::int64_t>(rng() % 900'000);
    const auto e = test::instance(kinds, order, 2, 4, cap);
    std::vector<Plan> stated;
    for (const std::vector<int>& part : partitions(8, 2))
      for (const std::vector<Recompute>& m : megatron_recompute_choices(part))
        stated.push_back(Plan{part, m});
    const std::optional<Time> truth = fastest(*e, stated);
    if (!truth) continue;
    ++cases;
    const PlanOutcome any = plan_pipeline(*e, options(*e));
    const PlanOutcome out = plan_pipeline(*e, options(*e, find_exporter("megatron")));
    ASSERT_TRUE(out.best.fits()) << "trial " << trial;
    const MegatronExport x = export_megatron(export_layout(*e, out.best.plan, out.best.schedule));
    EXPECT_TRUE(x.exact) << x.note;
    EXPECT_EQ(out.best.result.iteration_time, *truth) << "trial " << trial;
    const BaselineRun& exhaustive = baseline(any, "exhaustive");
    ASSERT_TRUE(exhaustive.run && exhaustive.run->fits());
    EXPECT_GE(out.best.result.iteration_time, exhaustive.run->result.iteration_time);
    const BaselineRun& rule = baseline(out, "megatron-best-rule");
    if (rule.run->fits()) {
      EXPECT_LE(out.best.result.iteration_time, rule.run->result.iteration_time);
    }
    // Baselines the flags cannot state are reported as such.
    for (const BaselineRun& b : out.baselines) {
      if (!b.run) continue;
      EXPECT_EQ(b.expressible,
                export_megatron(export_layout(*e, b.run->plan, b.run->schedule)).exact)
          << b.name;
    }
  }
  EXPECT_GE(cases, 4);
}

TEST(Expressible, MindFormersPlansAreFirstNAndTheOptimumOfThem) {
  // pp 2, 6 layers: every partition times every (full, selective) prefix of each stage.
  std::mt19937_64 rng(16);
  int cases = 0;
  for (int trial = 0; trial < 6; ++trial) {
    const std::vector<test::LayerKind> kinds = {test::random_kind(rng), test::random_kind(rng)};
    std::vector<int> order(6);
    for (int& k : order) k = static_cast<int>(rng() % 2);
    const std::int64_t cap = 200'000 + static_cast<std::int64_t>(rng() % 700'000);
    const auto e = test::instance(kinds, order, 2, 4, cap);
    std::vector<Plan> stated;
    for (const std::vector<int>& part : partitions(6, 2))
      for (int f0 = 0; f0 <= part[0]; ++f0)
        for (int s0 = 0; f0 + s0 <= part[0]; ++s0)
          for (int f1 = 0; f1 <= part[1]; ++f1)
            for (int s1 = 0; f1 + s1 <= part[1]; ++s1) {
              std::string m = std::string(f0, 'f') + std::string(s0, 's') +
                              std::string(part[0] - f0 - s0, 'n') + std::string(f1, 'f') +
                              std::string(s1, 's') + std::string(part[1] - f1 - s1, 'n');
              stated.push_back(Plan{part, modes(m)});
            }
    const std::optional<Time> truth = fastest(*e, stated);
    if (!truth) continue;
    ++cases;
    const PlanOutcome out = plan_pipeline(*e, options(*e, find_exporter("mindformers")));
    ASSERT_TRUE(out.best.fits()) << "trial " << trial;
    EXPECT_EQ(out.best.plan.recompute, first_n_order(*e, out.best.plan).recompute);
    EXPECT_TRUE(expressible_by(*e, out.best.plan, out.best.schedule, find_exporter("mindformers")));
    EXPECT_EQ(out.best.result.iteration_time, *truth) << "trial " << trial;
  }
  EXPECT_GE(cases, 3);
}

TEST(Expressible, TheBestExpressibleBaselineIsTheFastestTheFlagsState) {
  // 6 identical layers, pp 2, a limit where no recompute does not fit: every baseline that
  // fits is checked by hand against export_megatron.
  std::mt19937_64 rng(18);
  for (int trial = 0; trial < 6; ++trial) {
    const std::vector<test::LayerKind> kinds = {test::random_kind(rng), test::random_kind(rng)};
    const std::int64_t cap = 150'000 + static_cast<std::int64_t>(rng() % 600'000);
    const auto e = test::instance(kinds, {0, 1, 1, 0, 1, 0}, 2, 4, cap);
    const PlanOutcome out = plan_pipeline(*e, options(*e));
    const BaselineRun* got = best_expressible_baseline(*e, out, find_exporter("megatron"));
    const BaselineRun* want = nullptr;
    for (const BaselineRun& b : out.baselines) {
      if (!b.run || !b.run->fits()) continue;
      if (!export_megatron(export_layout(*e, b.run->plan, b.run->schedule)).exact) continue;
      if (!want || b.run->result.iteration_time < want->run->result.iteration_time) want = &b;
    }
    EXPECT_EQ(got, want) << "trial " << trial;
    // megatron-best-rule is stated exactly, so whenever it fits there is one, no slower.
    const BaselineRun& rule = baseline(out, "megatron-best-rule");
    if (rule.run->fits()) {
      ASSERT_NE(got, nullptr);
      EXPECT_LE(got->run->result.iteration_time, rule.run->result.iteration_time);
    }
  }
}

TEST(Expressible, AScheduleTheFrameworkDoesNotRunIsRefused) {
  std::mt19937_64 rng(17);
  const auto e = test::instance({test::random_kind(rng)}, std::vector<int>(8, 0), 2, 4, 1 << 30);
  PlannerOptions o = options(*e, find_exporter("megatron"));
  o.schedule = "zb-h2";
  try {
    plan_pipeline(*e, o);
    ADD_FAILURE() << "zb-h2 planned under --expressible megatron";
  } catch (const ConfigError& err) {
    EXPECT_NE(
        std::string(err.what()).find("--expressible megatron: Megatron-LM does not run zb-h2"),
        std::string::npos)
        << err.what();
  }
  o.expressible = find_exporter("mindformers");
  o.schedule = "zb-v";
  EXPECT_THROW(plan_pipeline(*e, o), ConfigError);
}

TEST(Expressible, RequestErrorsNameTheOptionAndTheClosestName) {
  api::PlanRequest r;
  r.expressible = "megatorn";
  try {
    api::check_plan_request(r);
    ADD_FAILURE() << "accepted";
  } catch (const api::RequestError& err) {
    EXPECT_STREQ(err.what(),
                 "--expressible: unknown framework 'megatorn' (did you mean 'megatron'?) "
                 "(megatron, mindformers, torchtitan, torchtitan-registry)");
  }
  r.expressible = "mindformers";
  EXPECT_NO_THROW(api::check_plan_request(r));
}

TEST(Baselines, OldNamesAreRefusedWithTheirNewNames) {
  for (const auto& [old_name, new_name] :
       {std::pair<std::string, std::string>{"megatron-default", "megatron-full-recompute"},
        {"uniform-none", "megatron-no-recompute"}}) {
    api::PlanRequest r;
    r.baseline = old_name;
    try {
      api::check_plan_request(r);
      ADD_FAILURE() << old_name << " accepted";
    } catch (const api::RequestError& err) {
      EXPECT_NE(std::string(err.what())
                    .find("--baseline: '" + old_name + "' is now called '" + new_name + "'"),
                std::string::npos)
          << err.what();
    }
  }
  api::PlanRequest typo;
  typo.baseline = "megatron-best-rul";
  try {
    api::check_plan_request(typo);
    ADD_FAILURE() << "accepted";
  } catch (const api::RequestError& err) {
    EXPECT_NE(std::string(err.what()).find("did you mean 'megatron-best-rule'?"), std::string::npos)
        << err.what();
  }
}

}  // namespace
}  // namespace bmpipe
