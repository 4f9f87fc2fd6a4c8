// zb-v and zb-auto at large micro-batch counts (issue 20, item 7): past 16p micro-batches their
// candidates are ranked by the evaluator on a prefix of 8p and only the winner is drawn at
// full length. Pinned: the evaluator never sees a whole-length candidate there, the result
// is a whole schedule, and on the pp-64 example at 8192 micro-batches it is the schedule
// the whole-length ranking chose (189394.350 ms, printed by the binary before the change
// in 91.6 s, under load, against 6.9 s now on this 2-core machine).
#include <gtest/gtest.h>

#include <vector>

#include "schedules/registry.hpp"
#include "support/support.hpp"

namespace {

using bmpipe::test::run_cli;

TEST(ZbVScale, CandidatesAreRankedOnAPrefixPastSixteenP) {
  const int p = 4, m = 72;  // 72 > 16p = 64
  int longest = 0;
  std::vector<bmpipe::Schedule> shown;
  bmpipe::ScheduleParams params{p, m, 2, {}, {}};
  params.evaluate = [&](const bmpipe::Schedule& s) -> std::optional<std::int64_t> {
    longest = std::max(longest, s.num_microbatches);
    shown.push_back(s);
    return static_cast<std::int64_t>(s.total_ops());  // any consistent score
  };
  const bmpipe::Schedule s = bmpipe::make_zb_v(params);
  // The four variants (W before F or not, Is always first or not), unit costs (no costs
  // given): four calls, each a different schedule.
  EXPECT_EQ(shown.size(), 4u);
  for (std::size_t a = 0; a < shown.size(); ++a)
    for (std::size_t b = a + 1; b < shown.size(); ++b)
      EXPECT_NE(shown[a].ops, shown[b].ops) << a << " " << b;
  EXPECT_EQ(longest, 8 * p);
  EXPECT_EQ(s.num_microbatches, m);
  EXPECT_EQ(s.name, "zb-v");
  // Every rank runs F, I and W of both its stages for every micro-batch.
  EXPECT_EQ(s.total_ops(), static_cast<std::size_t>(3 * 2 * p * m));
}

TEST(ZbVScale, ZbAutoChoosesOnAPrefixPastSixteenP) {
  const int p = 4, m = 72;
  int longest = 0;
  bmpipe::ScheduleParams params{p, m, 1, {}, {}};
  params.evaluate = [&](const bmpipe::Schedule& s) -> std::optional<std::int64_t> {
    longest = std::max(longest, s.num_microbatches);
    return static_cast<std::int64_t>(s.total_ops());
  };
  const bmpipe::Schedule s = bmpipe::make_zb_auto(params);
  EXPECT_EQ(longest, 8 * p);
  EXPECT_EQ(s.num_microbatches, m);
  EXPECT_EQ(s.name, "zb-auto");
  EXPECT_EQ(s.total_ops(), static_cast<std::size_t>(3 * p * m));
}

TEST(ZbVScale, Pp64ExampleAt8192MicroBatchesKeepsTheWholeRankingsChoice) {
  // Off a terminal, with a progress line every 0.05 s: the run takes over half a second
  // even in Release, most of it making the schedule and simulating it, so both phases
  // are named; stdout is the same report.
  const auto r = run_cli("simulate " + bmpipe::test::examples() +
                         "h200_8x8_pp64.yaml --schedule zb-v --microbatches 8192 "
                         "--progress-interval-s 0.05");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("iteration time   189394.350 ms"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("simulate: making the zb-v schedule"), std::string::npos) << r.err;
  // 2 chunks x (F, I, W) x 8192 micro-batches x 64 ranks.
  EXPECT_NE(r.err.find("simulate: simulating 3145728 ops on 64 pipeline ranks, "),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find('\r'), std::string::npos) << "off a terminal, lines are not redrawn";
}

TEST(ZbVScale, CompareSaysWhichScheduleRunsAndWhatItDoes) {
  const auto r = run_cli("compare " + bmpipe::test::examples() +
                         "h200_8x8_pp64.yaml --schedules 1f1b,zb-v --microbatches 4096 "
                         "--progress-interval-s 0.05");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("zb-v "), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("compare: zb-v (2 of 2): making the schedule, "), std::string::npos)
      << r.err;
  // 2 chunks x (F, I, W) x 4096 micro-batches x 64 ranks; each phase lasts about 0.3 s
  // in Release, six lines at 0.05 s.
  EXPECT_NE(r.err.find("compare: zb-v (2 of 2): simulating 1572864 ops, "), std::string::npos)
      << r.err;
  const auto quiet = run_cli("compare " + bmpipe::test::examples() +
                             "h200_8x8_pp64.yaml --schedules 1f1b,zb-v --quiet "
                             "--progress-interval-s 0");
  ASSERT_EQ(quiet.code, 0) << quiet.err;
  EXPECT_EQ(quiet.err, "");
}

TEST(ZbVScale, AQuickOrQuietRunPrintsNoProgress) {
  const std::string run = "simulate " + bmpipe::test::examples() + "h200_8x8_pp64.yaml";
  // The example runs in well under the default 5 s.
  const auto quick = run_cli(run);
  ASSERT_EQ(quick.code, 0) << quick.err;
  EXPECT_EQ(quick.err, "");
  const auto quiet = run_cli(run + " --quiet --progress-interval-s 0");
  ASSERT_EQ(quiet.code, 0) << quiet.err;
  EXPECT_EQ(quiet.err, "");
  const auto bad = run_cli(run + " --progress-interval-s -1");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("--progress-interval-s"), std::string::npos) << bad.err;
}

}  // namespace
