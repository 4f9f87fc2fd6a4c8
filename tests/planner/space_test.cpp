// The planner's search space.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "planner/space.hpp"

namespace bmpipe {
namespace {

using planner::Candidate;

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

}  // namespace
}  // namespace bmpipe
