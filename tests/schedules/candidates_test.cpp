// Generators that pick among candidates (zb-auto, zb-v) keep what the evaluator they are
// given finds fastest, and call no evaluator when the table says they rank nothing.
#include <gtest/gtest.h>

#include "schedules/validate.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace {

using test::Costs;

ScheduleParams params_for(const char* name, int p, int m, const Costs* c, int limit = 0) {
  const ScheduleInfo& info = *find_schedule(name);
  ScheduleParams params{p, m, effective_vpp(info, 2), {}, {}};
  if (c) {
    const auto stages = static_cast<std::size_t>(p * effective_vpp(info, 2));
    params.costs.forward.assign(stages, c->f);
    params.costs.backward_input.assign(stages, c->i);
    params.costs.backward_weight.assign(stages, c->w);
  }
  if (limit > 0) params.costs.activation_limit = limit;
  return params;
}

/// Every candidate `name` offers its evaluator for these parameters, in order.
std::vector<Schedule> candidates(const char* name, ScheduleParams params) {
  std::vector<Schedule> seen;
  params.evaluate = [&seen](const Schedule& s) -> std::optional<std::int64_t> {
    seen.push_back(s);
    return 1;
  };
  find_schedule(name)->generate(params);
  return seen;
}

struct Case {
  const char* name;
  int p, m;
  bool costed;
  int limit;
};

const Case kCases[] = {
    {"zb-auto", 4, 8, false, 0}, {"zb-auto", 3, 7, true, 4}, {"zb-auto", 2, 5, true, 1},
    {"zb-v", 4, 8, false, 0},    {"zb-v", 3, 9, true, 0},
};

TEST(Candidates, TheEvaluatorDecides) {
  const Costs c{3, 2, 1, 1};
  for (const Case& k : kCases) {
    const ScheduleParams base = params_for(k.name, k.p, k.m, k.costed ? &c : nullptr, k.limit);
    const std::vector<Schedule> all = candidates(k.name, base);
    ASSERT_GT(all.size(), 1u) << k.name;
    // An evaluator that likes candidate `want` best gets exactly that one back, whichever
    // it is (so nothing but the evaluator decides).
    for (std::size_t want = 0; want < all.size(); ++want) {
      SCOPED_TRACE(std::string(k.name) + " p=" + std::to_string(k.p) +
                   " want=" + std::to_string(want));
      ScheduleParams params = base;
      std::size_t call = 0;
      params.evaluate = [&](const Schedule&) -> std::optional<std::int64_t> {
        return call++ == want ? 5 : 9;
      };
      const Schedule got = find_schedule(k.name)->generate(params);
      EXPECT_EQ(call, all.size());
      EXPECT_EQ(got.ops, all[want].ops);
      EXPECT_EQ(got.stage_rank, all[want].stage_rank);
      EXPECT_EQ(got.name, k.name);
    }
  }
}

TEST(Candidates, DeadlockedCandidatesAreSkippedAndTiesKeepTheFirst) {
  for (const Case& k : kCases) {
    SCOPED_TRACE(std::string(k.name) + " p=" + std::to_string(k.p));
    const ScheduleParams base = params_for(k.name, k.p, k.m, nullptr, k.limit);
    const std::vector<Schedule> all = candidates(k.name, base);
    ASSERT_GT(all.size(), 1u);
    ScheduleParams params = base;
    // Everything equal: the first offered is kept.
    params.evaluate = [](const Schedule&) -> std::optional<std::int64_t> { return 7; };
    EXPECT_EQ(find_schedule(k.name)->generate(params).ops, all.front().ops);
    // Only the last one runs: it is kept, whatever the planner thought of it.
    std::size_t call = 0;
    params.evaluate = [&](const Schedule&) -> std::optional<std::int64_t> {
      if (++call == all.size()) return 1000;
      return std::nullopt;
    };
    EXPECT_EQ(find_schedule(k.name)->generate(params).ops, all.back().ops);
    // None runs: a clear refusal, not an arbitrary schedule.
    params.evaluate = [](const Schedule&) -> std::optional<std::int64_t> { return std::nullopt; };
    EXPECT_THROW(find_schedule(k.name)->generate(params), ScheduleError);
  }
}

TEST(Candidates, OnlyRankingSchedulesCallTheEvaluator) {
  for (const auto& info : builtin_schedules()) {
    SCOPED_TRACE(std::string(info.name));
    int calls = 0;
    ScheduleParams params{4, 8, effective_vpp(info, 2), {}, {}};
    params.evaluate = [&calls](const Schedule&) -> std::optional<std::int64_t> {
      ++calls;
      return 1;
    };
    info.generate(params);
    if (info.ranks_candidates) {
      EXPECT_GT(calls, 1);
    } else {
      EXPECT_EQ(calls, 0);
    }
  }
}

TEST(Candidates, ZbAutoWithoutEvaluatorKeepsThePlannersFastest) {
  // At unit costs with free links the planner's makespan is the engine's time, so the
  // schedule a direct call returns is the fastest greedy candidate as the engine times it.
  // The handcrafted ZB-H1 / ZB-H2 are not among the direct call's candidates.
  for (int p : {1, 2, 3, 4, 6})
    for (int m : {p, 2 * p + 1, 4 * p})
      for (int limit : {1, p, 2 * p}) {
        SCOPED_TRACE("p=" + std::to_string(p) + " m=" + std::to_string(m) +
                     " limit=" + std::to_string(limit));
        const ScheduleParams params = params_for("zb-auto", p, m, nullptr, limit);
        const auto engine_time = test::engine_evaluator();
        const Schedule h1 = test::generate("zb-h1", p, m);
        const Schedule h2 = test::generate("zb-h2", p, m);
        std::int64_t best = std::numeric_limits<std::int64_t>::max();
        bool offered = false;
        const Schedule direct = make_zb_auto(params);
        for (const Schedule& s : candidates("zb-auto", params)) {
          offered = offered || s.ops == direct.ops;
          if (s.ops != h1.ops && s.ops != h2.ops) best = std::min(best, *engine_time(s));
        }
        ASSERT_FALSE(validate_schedule(direct).has_value());
        EXPECT_TRUE(offered) << "the direct call returned a schedule it never ranks";
        const auto t = engine_time(direct);
        ASSERT_TRUE(t.has_value());
        // A greedy candidate may coincide with ZB-H1 or ZB-H2; then it may be faster still.
        EXPECT_LE(*t, best);
      }
}

TEST(Candidates, ZbAutoUnderTheEngineIsNeverSlowerThanTheHandcrafted) {
  // ZB-H1 holds p micro-batches, ZB-H2 2p-1: whenever the limit allows one of them,
  // zb-auto ranked by the engine is at least as fast, at any costs.
  for (const Costs c : {Costs{1, 1, 1, 1}, Costs{2, 1, 1, 1}, Costs{1, 3, 1, 1}, Costs{1, 1, 3, 1},
                        Costs{4, 3, 2, 1}, Costs{7, 5, 3, 1}})
    for (int p : {1, 2, 3, 4, 6, 8})
      for (int m : {p, p + 1, 2 * p, 3 * p + 2})
        for (int limit : {p, 2 * p - 1, 2 * p, 3 * p}) {
          SCOPED_TRACE("p=" + std::to_string(p) + " m=" + std::to_string(m) +
                       " limit=" + std::to_string(limit) + " F/I/W=" + std::to_string(c.f) + "/" +
                       std::to_string(c.i) + "/" + std::to_string(c.w));
          const auto engine_time = test::engine_evaluator(c);
          ScheduleParams params = params_for("zb-auto", p, m, &c, limit);
          params.evaluate = engine_time;
          const auto t = engine_time(make_zb_auto(params));
          ASSERT_TRUE(t.has_value());
          EXPECT_LE(*t, *engine_time(make_zb_h1(ScheduleParams{p, m, 1, {}, {}})));
          if (limit >= 2 * p - 1) {
            EXPECT_LE(*t, *engine_time(make_zb_h2(ScheduleParams{p, m, 1, {}, {}})));
          }
        }
}

}  // namespace
}  // namespace bmpipe
