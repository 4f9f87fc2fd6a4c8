// The engine's own guards: a run whose clock or byte counts would pass 2^63 is an error,
// not undefined behaviour, and nonsensical numbers are refused with a message.
#include <gtest/gtest.h>

#include <limits>

#include "support/support.hpp"

namespace bmpipe {
namespace {

constexpr Time kMax = std::numeric_limits<Time>::max();

// One device, one stage, one micro-batch: F then B.
Schedule single() {
  Schedule s;
  s.name = "single";
  s.num_ranks = 1;
  s.num_stages = 1;
  s.num_microbatches = 1;
  s.stage_rank = {0};
  s.ops = {{Op::f(0, 0), Op::b(0, 0)}};
  return s;
}

TEST(Limits, ARunEndingExactlyAtTheLastNanosecondIsFine) {
  const Schedule sch = single();
  const auto topo = test::one_node(1);
  const SimInput in = test::uniform_input(sch, *topo, test::Costs{kMax - 5, 2, 3, 1, 0});
  const SimResult r = simulate(in, sch);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.pipeline_time, kMax);
  EXPECT_EQ(r.devices[0].busy, kMax);
}

TEST(Limits, OneNanosecondMoreIsAnError) {
  const Schedule sch = single();
  const auto topo = test::one_node(1);
  for (const test::Costs& c : {test::Costs{kMax - 4, 2, 3, 1, 0}, test::Costs{1, kMax, 1, 1, 0},
                               test::Costs{kMax, kMax, kMax, 1, 0}}) {
    const SimResult r = simulate(test::uniform_input(sch, *topo, c), sch);
    EXPECT_FALSE(r.ok);
    EXPECT_NE(r.error.find("2^63"), std::string::npos) << r.error;
  }
  SimInput tail = test::uniform_input(sch, *topo, test::Costs{kMax - 5, 2, 3, 1, 0});
  tail.tail_time = {1};  // the pipeline fits, its tail work does not
  EXPECT_FALSE(simulate(tail, sch).ok);
}

TEST(Limits, ManySmallOpsAddUpToo) {
  // 1F1B p = 2, m = 4: each stage runs 4 forwards of 2^60 ns: 8 x 2^60 = 2^63.
  const Schedule sch = make_1f1b(ScheduleParams{2, 4, 1, {}});
  const auto topo = test::one_node(2);
  const SimResult r =
      simulate(test::uniform_input(sch, *topo, test::Costs{Time{1} << 60, 0, 0, 1, 0}), sch);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("2^63"), std::string::npos) << r.error;
  const SimResult fits =
      simulate(test::uniform_input(sch, *topo, test::Costs{Time{1} << 59, 0, 0, 1, 0}), sch);
  ASSERT_TRUE(fits.ok) << fits.error;
  EXPECT_EQ(fits.pipeline_time, (4 + 2 - 1) * (Time{1} << 59));  // (m + p - 1) F
}

TEST(Limits, TransferTimesCount) {
  // 1 GB/s is 1 byte per ns: four transfers of 2^61 bytes hold links for 2^63 ns.
  const Schedule sch = make_1f1b(ScheduleParams{2, 2, 1, {}});
  const auto topo = test::one_node(2, 0, 1.0);
  const SimResult r = simulate(
      test::uniform_input(sch, *topo, test::Costs{1, 1, 1, 1, std::int64_t{1} << 61}), sch);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("2^63"), std::string::npos) << r.error;
}

TEST(Limits, OverlapFactorCannotOverflowTheRounding) {
  const Schedule sch = make_dualpipe_v(ScheduleParams{2, 4, 2, {}});
  const auto topo = test::one_node(2);
  SimInput in = test::uniform_input(sch, *topo, test::Costs{1000, 1000, 1000, 1, 0});
  in.fb_overlap_factor = 1e300;
  const SimResult r = simulate(in, sch);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("2^63"), std::string::npos) << r.error;
}

TEST(Limits, ActivationBytesCannotOverflow) {
  // Each of the 2 x 2 forwards takes 2^62 bytes: 2^64 in all.
  const Schedule sch = make_1f1b(ScheduleParams{2, 2, 1, {}});
  const auto topo = test::one_node(2);
  const SimResult r = simulate(
      test::uniform_input(sch, *topo, test::Costs{1, 1, 1, std::int64_t{1} << 62, 0}), sch);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("bytes"), std::string::npos) << r.error;
}

TEST(Limits, NegativeNumbersAreRefused) {
  const Schedule sch = make_dualpipe_v(ScheduleParams{2, 4, 2, {}});
  const auto topo = test::one_node(2);
  const SimInput good = test::uniform_input(sch, *topo, test::Costs{1, 1, 1, 10, 0});
  ASSERT_TRUE(simulate(good, sch).ok);
  SimInput pair = good;
  pair.fb_pair_time = -1;
  EXPECT_EQ(simulate(pair, sch).error, "fb_pair_time must not be negative");
  SimInput tail = good;
  tail.tail_time = {0, -1};
  EXPECT_EQ(simulate(tail, sch).error, "tail_time must not be negative");
  SimInput retained = good;
  retained.stages[1].weight_grad_retained_bytes = -1;
  EXPECT_EQ(simulate(retained, sch).error, "stage costs must not be negative");
}

}  // namespace
}  // namespace bmpipe
