// The planner's search: its budgets and the statistics it keeps.
#include <gtest/gtest.h>

#include <random>

#include "planner/search.hpp"
#include "planner_support.hpp"

namespace bmpipe {
namespace {

struct Fixture {
  std::shared_ptr<const Experiment> e;
  PlannerOptions o;
  Fixture() {
    std::mt19937_64 rng(5);
    const std::vector<test::LayerKind> kinds = {test::random_kind(rng), test::random_kind(rng)};
    std::vector<int> order(16);
    for (int& k : order) k = static_cast<int>(rng() % 2);
    e = test::instance(kinds, order, 4, 8, std::int64_t{1} << 40);
    o.memory_limit_bytes = e->capacity_bytes;
    o.threads = 1;
  }
};

TEST(PlannerSearch, StatsCountEveryMoveAndFilter) {
  Fixture f;
  f.o.max_evals = 800;
  f.o.memory_limit_bytes = 1'000'000;  // tight, so the memory filter turns some away
  const PlanOutcome out = plan_pipeline(*f.e, f.o);
  const SearchStats& s = out.stats;
  ASSERT_EQ(s.moves.size(), planner::moves().size());
  std::int64_t proposed = 0;
  for (std::size_t k = 0; k < s.moves.size(); ++k) {
    EXPECT_EQ(s.moves[k].name, planner::moves()[k].name);
    EXPECT_LE(s.moves[k].accepted, s.moves[k].proposed) << s.moves[k].name;
    EXPECT_LE(s.moves[k].improved, s.moves[k].accepted) << s.moves[k].name;
    proposed += s.moves[k].proposed;
  }
  EXPECT_GT(proposed, s.evaluations);  // batches of 32, some cached or filtered
  ASSERT_EQ(s.filters.size(), planner::filters().size());
  std::int64_t rejected = 0;
  for (std::size_t k = 0; k < s.filters.size(); ++k) {
    EXPECT_EQ(s.filters[k].name, planner::filters()[k].name);
    rejected += s.filters[k].rejected;
  }
  EXPECT_EQ(rejected, s.filtered);
}

}  // namespace
}  // namespace bmpipe
