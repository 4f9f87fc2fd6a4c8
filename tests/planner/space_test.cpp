// The planner's search space: candidate keys, the moves table and the filters table.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "planner/space.hpp"
#include "planner_support.hpp"

namespace bmpipe {
namespace {

using planner::Candidate;
using planner::Rng;
using planner::Space;

std::shared_ptr<const Experiment> experiment(int layers, int pp) {
  std::mt19937_64 rng(11);
  const std::vector<test::LayerKind> kinds = {test::random_kind(rng), test::random_kind(rng)};
  std::vector<int> order(layers);
  for (int& k : order) k = static_cast<int>(rng() % 2);
  return test::instance(kinds, order, pp, 8, 1'000'000);
}

Schedule schedule(const Experiment& e, const char* name, int vpp) {
  return make_schedule(e, name, effective_vpp(*find_schedule(name), vpp));
}

TEST(PlannerSpace, KeysOfPartitionsThatDifferBy65536Differ) {
  // The key used to keep two bytes per stage, so these shared a key and the second took
  // the first's cached score.
  const Candidate a{{1, 65537, 2}, {0, 0}}, b{{1, 1, 2}, {0, 0}};
  EXPECT_NE(a.key(), b.key());
  const Candidate c{{256, 3}, {0}}, d{{0x10100, 3}, {0}};
  EXPECT_NE(c.key(), d.key());
}

TEST(PlannerSpace, KeysAreExactUpToAHundredThousandLayers) {
  // Two candidates of one space (same stage and rank counts) share a key only if equal.
  std::mt19937_64 rng(3);
  std::map<std::string, std::pair<std::vector<int>, std::vector<int>>> seen;
  for (int trial = 0; trial < 20'000; ++trial) {
    Candidate c{std::vector<int>(4), std::vector<int>(2)};
    for (int& v : c.partition)
      v = 1 + static_cast<int>(rng() % (trial % 2 ? 100'000 : 300));  // large and small
    for (int& v : c.choice) v = static_cast<int>(rng() % kMaxRankChoices);
    const auto [it, fresh] = seen.emplace(c.key(), std::make_pair(c.partition, c.choice));
    if (!fresh) {
      EXPECT_EQ(it->second.first, c.partition);
      EXPECT_EQ(it->second.second, c.choice);
    }
  }
}

/// The moves as they were written before they became a table: percentage branches.
Candidate old_propose(const Space& space, Rng& rng, const Candidate& c) {
  const int S = space.stages();
  Candidate n = c;
  if (S < 2) {
    if (space.multi()) n.choice[0] = std::max(0, n.choice[0] + (rng.below(2) ? 1 : -1));
    return n;
  }
  for (int attempt = 0; attempt < 16; ++attempt) {
    n = c;
    const int kind = rng.below(100);
    if (kind < 45) {
      const int b = rng.below(S - 1);
      const bool right = rng.below(2);
      const int from = right ? b : b + 1, to = right ? b + 1 : b;
      if (n.partition[from] <= 1) continue;
      --n.partition[from];
      ++n.partition[to];
      return n;
    }
    if (kind < 65) {
      const int avg = std::max(2, space.layers() / S);
      const int k = 2 + rng.below(std::max(1, avg / 2));
      const int b = rng.below(S - 1);
      const bool right = rng.below(2);
      const int from = right ? b : b + 1, to = right ? b + 1 : b;
      if (n.partition[from] <= k) continue;
      n.partition[from] -= k;
      n.partition[to] += k;
      return n;
    }
    if (kind < 85 && S >= 3) {
      const int i = rng.below(S);
      int j = rng.below(S);
      if (std::abs(i - j) < 2) continue;
      if (n.partition[i] <= 1) continue;
      --n.partition[i];
      ++n.partition[j];
      return n;
    }
    if (space.multi()) {
      const int r = rng.below(space.ranks());
      n.choice[r] = std::clamp(n.choice[r] + (rng.below(2) ? 1 : -1), 0, 63);
      if (n.choice[r] == c.choice[r]) continue;
      return n;
    }
  }
  return n;
}

TEST(PlannerMoves, TheTableDrawsWhatThePercentageBranchesDrew) {
  // Same seed, same candidates: plans stay byte-identical across the change. Spaces with
  // and without a third stage and with and without ranks of several stages.
  struct Case {
    int layers, pp;
    const char* schedule;
    int vpp;
  };
  for (const Case& k : {Case{12, 4, "1f1b", 1}, Case{12, 2, "1f1b", 1}, Case{12, 2, "zb-v", 2},
                        Case{12, 1, "zb-v", 2}, Case{16, 2, "interleaved", 3}}) {
    const auto e = experiment(k.layers, k.pp);
    const Space space(*e, schedule(*e, k.schedule, k.vpp), 1'000'000);
    for (std::uint64_t seed = 1; seed <= 5; ++seed) {
      Rng a(seed), b(seed);
      Candidate ca{uniform_partition(k.layers, space.stages()), std::vector<int>(space.ranks(), 0)};
      Candidate cb = ca;
      for (int step = 0; step < 2000; ++step) {
        const planner::Proposal p = planner::propose(space, a, ca);
        const Candidate q = old_propose(space, b, cb);
        ASSERT_EQ(p.candidate.partition, q.partition) << k.schedule << " step " << step;
        ASSERT_EQ(p.candidate.choice, q.choice) << k.schedule << " step " << step;
        ca = p.candidate, cb = q;
      }
      EXPECT_EQ(a.next(), b.next());  // the same number of draws
    }
  }
}

TEST(PlannerMoves, EveryMoveIsNamedAndReportsItself) {
  std::set<std::string> names;
  for (const planner::Move& m : planner::moves()) {
    EXPECT_GT(m.weight, 0) << m.name;
    EXPECT_TRUE(names.insert(m.name).second) << m.name;
  }
  const auto e = experiment(12, 2);
  const Space space(*e, schedule(*e, "zb-v", 2), 1'000'000);
  Rng rng(4);
  Candidate c{uniform_partition(12, space.stages()), std::vector<int>(space.ranks(), 0)};
  std::vector<int> made(planner::moves().size(), 0);
  for (int step = 0; step < 4000; ++step) {
    const planner::Proposal p = planner::propose(space, rng, c);
    if (p.move >= 0) ++made[p.move];
    c = p.candidate;
  }
  for (std::size_t k = 0; k < made.size(); ++k) EXPECT_GT(made[k], 0) << planner::moves()[k].name;
}

TEST(PlannerMoves, ChoiceMovesStayWithinRankChoicesLimit) {
  // The last choice index comes from rank_choices' own limit, not from a copy of it.
  EXPECT_EQ(planner::kLastChoice + 1, static_cast<int>(kMaxRankChoices));
  const auto e = experiment(12, 2);
  const Space space(*e, schedule(*e, "zb-v", 2), 1'000'000);
  ASSERT_TRUE(space.multi());
  Rng rng(9);
  bool reached_last = false;
  for (int start : {planner::kLastChoice - 1, planner::kLastChoice}) {
    const Candidate c{uniform_partition(12, space.stages()),
                      std::vector<int>(space.ranks(), start)};
    for (int step = 0; step < 2000; ++step) {
      const planner::Proposal p = planner::propose(space, rng, c);
      for (int v : p.candidate.choice) {
        EXPECT_GE(v, 0);
        EXPECT_LE(v, planner::kLastChoice);
        reached_last = reached_last || (start < planner::kLastChoice && v == planner::kLastChoice);
      }
    }
  }
  EXPECT_TRUE(reached_last);
}

TEST(PlannerFilters, MemoryThenExpressibleThenLowerBound) {
  const auto all = planner::filters();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_STREQ(all[0].name, "memory");
  EXPECT_STREQ(all[1].name, "expressible");
  EXPECT_STREQ(all[2].name, "lower-bound");
  planner::Derived d;
  d.lower_bound = 100;
  EXPECT_FALSE(all[0].check(d, 50));  // it fits
  EXPECT_FALSE(all[1].check(d, 50));  // every plan is expressible by default
  ASSERT_TRUE(all[2].check(d, 50));
  EXPECT_FALSE(all[2].check(d, 50)->cached);  // depends on the threshold
  EXPECT_FALSE(all[2].check(d, 100));
  d.expressible = false;  // --expressible: the framework cannot state it; never the best
  ASSERT_TRUE(all[1].check(d, 1e9));
  EXPECT_TRUE(all[1].check(d, 1e9)->cached);
  EXPECT_GE(all[1].check(d, 1e9)->score, planner::kInfeasible);
  d.expressible = true;
  d.fits = false;
  d.excess = 7;
  ASSERT_TRUE(all[0].check(d, 50));
  EXPECT_TRUE(all[0].check(d, 50)->cached);
  EXPECT_EQ(all[0].check(d, 50)->score, planner::kInfeasible + 7);
}

}  // namespace
}  // namespace bmpipe
