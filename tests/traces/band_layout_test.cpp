// The band layout on hand-worked rows, without drawing: how a dense row of ops is cut into
// runs (by op count, at the widest visible bubbles), and when and how coarsely rows are
// banded at all (band_rule).
#include "traces/band_layout.hpp"

#include <gtest/gtest.h>

#include <random>

namespace bmpipe {
namespace {

using Runs = std::vector<BandRun>;

// 1 px per ns, 3 px visible: a bubble of 3 ns or more splits.
BandRule rule(int max_ops, int max_splits) {
  return BandRule{max_ops, max_splits, 1.0, 3.0};
}

// Ops of the given lengths; gaps[i] ns of idle before op i + 1.
std::vector<BandInterval> row(const std::vector<Time>& lengths, const std::vector<Time>& gaps) {
  std::vector<BandInterval> out;
  Time t = 0;
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    if (i > 0) t += gaps.at(i - 1);
    out.push_back({t, t + lengths[i]});
    t += lengths[i];
  }
  return out;
}

TEST(BandLayout, EmptyRowHasNoBands) {
  EXPECT_EQ(band_runs({}, rule(4, 3)), Runs{});
}

TEST(BandLayout, OneOpIsOneBand) {
  const auto r = row({10}, {});
  EXPECT_EQ(band_runs(r, rule(4, 3)), (Runs{{0, 1}}));
}

// Touching ops leave no bubble: only the op count cuts, every max_ops ops, the rest last.
TEST(BandLayout, TouchingOpsAreCutEveryMaxOps) {
  const auto r = row({5, 5, 5, 5, 5}, {0, 0, 0, 0});
  EXPECT_EQ(band_runs(r, rule(2, 3)), (Runs{{0, 2}, {2, 4}, {4, 5}}));
  EXPECT_EQ(band_runs(r, rule(5, 3)), (Runs{{0, 5}}));
  EXPECT_EQ(band_runs(r, rule(1, 3)), (Runs{{0, 1}, {1, 2}, {2, 3}, {3, 4}, {4, 5}}));
}

// A visible bubble ends a band even when it has room for more ops, and the op count starts
// again after it; a bubble under min_gap_px does not.
TEST(BandLayout, VisibleBubbleSplitsInvisibleDoesNot) {
  //        op: 0   1   2   3   4
  // gap before:  2   3   0   9
  const auto r = row({4, 4, 4, 4, 4}, {2, 3, 0, 9});
  // 2 ns < 3 px: no split before op 1; 3 ns = 3 px splits (the threshold is inclusive).
  EXPECT_EQ(band_runs(r, rule(10, 3)), (Runs{{0, 2}, {2, 4}, {4, 5}}));
  // With max_ops 2 the count restarts at each split: {0,1} | {2,3} | {4}.
  EXPECT_EQ(band_runs(r, rule(2, 3)), (Runs{{0, 2}, {2, 4}, {4, 5}}));
  // Scale matters: at 0.5 px/ns only the 9 ns bubble (4.5 px) is visible.
  EXPECT_EQ(band_runs(r, BandRule{10, 3, 0.5, 3.0}), (Runs{{0, 4}, {4, 5}}));
}

// More visible bubbles than max_splits: the widest split, others are absorbed.
TEST(BandLayout, OnlyTheWidestBubblesSplit) {
  const auto r = row({1, 1, 1, 1, 1}, {4, 8, 5, 6});
  EXPECT_EQ(band_runs(r, rule(10, 2)), (Runs{{0, 2}, {2, 4}, {4, 5}}));  // 8 and 6
  EXPECT_EQ(band_runs(r, rule(10, 1)), (Runs{{0, 2}, {2, 5}}));          // 8
  EXPECT_EQ(band_runs(r, rule(10, 0)), (Runs{{0, 5}}));                  // none
  EXPECT_EQ(band_runs(r, rule(10, 4)), (Runs{{0, 1}, {1, 2}, {2, 3}, {3, 4}, {4, 5}}));
}

// Equal widths: the earliest bubbles win, so the layout never depends on sort stability.
TEST(BandLayout, TiesGoToTheEarliestBubble) {
  const auto r = row({1, 1, 1, 1}, {5, 5, 5});
  EXPECT_EQ(band_runs(r, rule(10, 1)), (Runs{{0, 1}, {1, 4}}));
  EXPECT_EQ(band_runs(r, rule(10, 2)), (Runs{{0, 1}, {1, 2}, {2, 4}}));
}

// Overlapping ops (a hand-made timeline) give a negative gap, never a split; zero-length
// ops still count as ops.
TEST(BandLayout, OverlapAndZeroLengthOps) {
  const std::vector<BandInterval> r = {{0, 10}, {5, 15}, {15, 15}, {15, 15}, {30, 30}};
  EXPECT_EQ(band_runs(r, rule(10, 3)), (Runs{{0, 4}, {4, 5}}));
  EXPECT_EQ(band_runs(r, rule(2, 3)), (Runs{{0, 2}, {2, 4}, {4, 5}}));
}

// On any row the runs cover every op once, in order, never exceed max_ops, and number at
// most ceil(n / max_ops) + max_splits; the same row always gives the same runs.
TEST(BandLayout, RunsPartitionTheRowWithinTheBound) {
  std::mt19937 gen(7);
  for (int trial = 0; trial < 200; ++trial) {
    const int n = 1 + static_cast<int>(gen() % 60);
    std::vector<Time> lengths, gaps;
    for (int i = 0; i < n; ++i) lengths.push_back(static_cast<Time>(gen() % 5));
    for (int i = 1; i < n; ++i) gaps.push_back(gen() % 3 == 0 ? static_cast<Time>(gen() % 9) : 0);
    const auto r = row(lengths, gaps);
    const BandRule ru = rule(1 + static_cast<int>(gen() % 8), static_cast<int>(gen() % 5));
    const Runs runs = band_runs(r, ru);
    ASSERT_FALSE(runs.empty());
    std::size_t at = 0;
    for (const BandRun& run : runs) {
      EXPECT_EQ(run.first, at);
      EXPECT_LT(run.first, run.last);
      EXPECT_LE(run.last - run.first, static_cast<std::size_t>(ru.max_ops));
      at = run.last;
    }
    EXPECT_EQ(at, r.size());
    const std::size_t bound = (r.size() + static_cast<std::size_t>(ru.max_ops) - 1) /
                                  static_cast<std::size_t>(ru.max_ops) +
                              static_cast<std::size_t>(ru.max_splits);
    EXPECT_LE(runs.size(), bound) << "trial " << trial;
    EXPECT_EQ(band_runs(r, ru), runs);
  }
}

// Rows are banded only when an op would get under min_op_px.
TEST(BandRule, NoBandsWhileABoxPerOpFits) {
  EXPECT_FALSE(band_rule(100, 800, 32, 8, 1.0, 3).has_value());  // exactly 8 px per op
  EXPECT_TRUE(band_rule(101, 800, 32, 8, 1.0, 3).has_value());
  EXPECT_FALSE(band_rule(0, 100, 32, 8, 1.0, 3).has_value());
}

// 1000 px at 32 px a band: budget 31 bands, H = 15; 1000 ops -> 67 ops a band, 14 splits.
TEST(BandRule, SizesBandsFromTheWidthBudget) {
  const auto r = band_rule(1000, 1000, 32, 8, 0.25, 3);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->max_ops, 67);
  EXPECT_EQ(r->max_splits, 14);
  EXPECT_EQ(r->px_per_ns, 0.25);
  EXPECT_EQ(r->min_gap_px, 3);
  // A band_px wider than the plot still allows a budget of 2: H = 1, no splits.
  const auto narrow = band_rule(1000, 100, 500, 8, 1.0, 3);
  ASSERT_TRUE(narrow.has_value());
  EXPECT_EQ(narrow->max_ops, 1000);
  EXPECT_EQ(narrow->max_splits, 0);
  // band_px <= 0 counts as 1 px.
  const auto zero = band_rule(1000, 200, 0, 8, 1.0, 3);
  ASSERT_TRUE(zero.has_value());
  EXPECT_EQ(zero->max_ops, 10);  // H = 100
  EXPECT_EQ(zero->max_splits, 99);
}

// The promise of the picture: a banded row of the fullest size holds at most 2 H bands,
// H = max(2, plot / band_px) / 2, whatever its bubbles.
TEST(BandRule, FullestRowStaysWithinTwiceTheHalfBudget) {
  for (std::size_t most : {200u, 1000u, 4097u}) {
    const auto r = band_rule(most, 1130, 32, 8, 1.0, 3);
    ASSERT_TRUE(r.has_value());
    const int h = std::max(2, 1130 / 32) / 2;
    std::vector<Time> lengths(most, 1), gaps(most - 1, 0);
    for (std::size_t i = 0; i < gaps.size(); i += 2) gaps[i] = 3 + static_cast<Time>(i % 7);
    EXPECT_LE(band_runs(row(lengths, gaps), *r).size(), static_cast<std::size_t>(2 * h)) << most;
  }
}

}  // namespace
}  // namespace bmpipe
