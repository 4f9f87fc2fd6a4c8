// The planner's search: its budgets and the statistics it keeps.
#include <gtest/gtest.h>

#include <limits>
#include <random>

#include "planner/search.hpp"
#include "planner_support.hpp"

namespace bmpipe {
namespace {

using planner::Candidate;
using planner::Search;
using planner::Space;

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

TEST(PlannerSearch, ThePolishSpendsAtMostItsOwnBudget) {
  // The polish used to borrow the search's budget by rewriting max_evals; now it has its
  // own, and the options stay as given.
  Fixture f;
  f.o.max_evals = 1;  // spent by the first score(): the polish does not depend on it
  const Space space(*f.e, make_schedule(*f.e), f.o.memory_limit_bytes);
  Search search(space, f.o);
  // A start far from balanced, so that single-layer shifts help for a while.
  const Candidate start{{13, 1, 1, 1}, std::vector<int>(space.ranks(), 0)};
  const double first =
      search.score({start}, std::numeric_limits<double>::infinity(), f.o.max_evals)[0];
  ASSERT_EQ(search.stats().evaluations, 1);
  search.polish(0);
  EXPECT_EQ(search.stats().evaluations, 1);
  search.polish(2);
  EXPECT_EQ(search.stats().evaluations, 3);
  search.polish(planner::kNoBudget);
  EXPECT_GT(search.stats().evaluations, 3);
  EXPECT_LT(search.best().score, first);
}

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
