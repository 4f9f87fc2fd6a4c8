// The end of the iteration with per-stage gradient reductions (SimInput::grad_buckets,
// overlap_grad_reduce, tied_reduce; sim/simulate.hpp, "End of the iteration"). Expected
// times are worked out by hand on schedules small enough to follow, or come from an
// equivalent input the engine has always run (a reduction after the last op is tail time).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

#include "support/support.hpp"

namespace bmpipe {
namespace {

// The two-chunk run of test::two_chunk_schedule(), worked out by hand in its comment.
const auto two_chunks = test::two_chunk_schedule;

SimInput two_chunk_input(const Topology& topo) {
  SimInput in = test::uniform_input(two_chunks(), topo, test::Costs{1, 1, 1, 0, 0});
  in.grad_buckets = test::whole_stages({3, 1, 5, 6});
  in.tail_time = {1, 2};
  return in;
}

TEST(GradReduce, OverlappedReductionsHideBehindTheRanksOtherStages) {
  const auto topo = test::one_node(2);
  SimInput in = two_chunk_input(*topo);
  in.overlap_grad_reduce = true;
  test::Recorder rec;
  const SimResult r = simulate(in, two_chunks(), &rec);
  ASSERT_TRUE(r.ok) << r.error;
  // Rank 0: stage 2 done at 8 -> [8, 13]; stage 0 done at 12, stream busy -> [13, 16].
  // Rank 1: stage 3 done at 6 -> [6, 12]; stage 1 done at 10 -> [12, 13].
  EXPECT_EQ(r.pipeline_time, 12);
  EXPECT_EQ(r.devices[0].last_end, 12);
  EXPECT_EQ(r.devices[1].last_end, 10);
  EXPECT_EQ(r.devices[0].tail_start, 16);
  EXPECT_EQ(r.devices[1].tail_start, 13);
  EXPECT_EQ(r.iteration_time, std::max(16 + 1, 13 + 2));
  ASSERT_EQ(rec.reductions.size(), 4u);
  const std::vector<std::array<Time, 5>> want = {
      {0, 2, 8, 8, 13}, {0, 0, 12, 13, 16}, {1, 3, 6, 6, 12}, {1, 1, 10, 12, 13}};
  for (std::size_t k = 0; k < want.size(); ++k) {
    const ReductionRecord& g = rec.reductions[k];
    EXPECT_EQ((std::array<Time, 5>{g.rank, g.stage, g.ready, g.start, g.end}), want[k]) << k;
    EXPECT_EQ(g.peer_rank, -1);
  }
}

TEST(GradReduce, WithoutOverlapTheReductionsFollowTheLastOp) {
  const auto topo = test::one_node(2);
  const SimInput in = two_chunk_input(*topo);  // overlap_grad_reduce defaults to false
  const SimResult r = simulate(in, two_chunks());
  ASSERT_TRUE(r.ok) << r.error;
  // Rank 0: 12 + 5 + 3 = 20, tail 1; rank 1: 10 + 6 + 1 = 17, tail 2.
  EXPECT_EQ(r.devices[0].tail_start, 20);
  EXPECT_EQ(r.devices[1].tail_start, 17);
  EXPECT_EQ(r.iteration_time, 21);
  EXPECT_EQ(r.pipeline_time, 12);  // the pipeline itself does not move
}

TEST(GradReduce, TiedAllReduceWaitsForBothRanksAndDelaysBothTails) {
  const auto topo = test::one_node(2);
  SimInput in = two_chunk_input(*topo);
  in.overlap_grad_reduce = true;
  in.tied_reduce = PairReduction{0, 1, 4};
  test::Recorder rec;
  const SimResult r = simulate(in, two_chunks(), &rec);
  ASSERT_TRUE(r.ok) << r.error;
  // Both ranks done with their reductions at max(16, 13) = 16; the all-reduce ends at 20.
  EXPECT_EQ(r.devices[0].tail_start, 20);
  EXPECT_EQ(r.devices[1].tail_start, 20);
  EXPECT_EQ(r.iteration_time, 22);
  ASSERT_EQ(rec.reductions.size(), 6u);
  for (int k : {4, 5}) {
    const ReductionRecord& t = rec.reductions[k];
    EXPECT_EQ(t.stage, -1);
    EXPECT_EQ(t.rank, k - 4);
    EXPECT_EQ(t.peer_rank, 5 - k);
    EXPECT_EQ(t.ready, 16);
    EXPECT_EQ(t.start, 16);
    EXPECT_EQ(t.end, 20);
  }
}

TEST(GradReduce, ZeroTimesAreNoReductions) {
  const auto topo = test::one_node(2);
  SimInput in = two_chunk_input(*topo);
  in.grad_buckets = test::whole_stages({0, 0, 0, 0});
  in.overlap_grad_reduce = true;
  in.tied_reduce = PairReduction{0, 1, 0};
  test::Recorder rec;
  const SimResult r = simulate(in, two_chunks(), &rec);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_TRUE(rec.reductions.empty());
  EXPECT_EQ(r.devices[0].tail_start, 12);
  EXPECT_EQ(r.devices[1].tail_start, 10);
  EXPECT_EQ(r.iteration_time, std::max(12 + 1, 10 + 2));
}

TEST(GradReduce, OneStagePerRankHidesNothing) {
  // A rank's only stage completes its gradients with its last op: overlapped or not, the
  // reduction is all tail. 1F1B, p = 2, m = 2, F = I = W = 1: rank 0 ends at 9, rank 1 at 7.
  const Schedule sch = make_1f1b(ScheduleParams{2, 2, 1});
  const auto topo = test::one_node(2);
  SimInput in = test::uniform_input(sch, *topo, test::Costs{1, 1, 1, 0, 0});
  in.grad_buckets = test::whole_stages({4, 3});
  in.tail_time = {5, 10};
  for (bool overlap : {false, true}) {
    in.overlap_grad_reduce = overlap;
    const SimResult r = simulate(in, sch);
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.iteration_time, std::max(9 + 4 + 5, 7 + 3 + 10)) << overlap;
  }
}

TEST(GradReduce, SplitBackwardReducesAfterTheLastW) {
  // One rank, two stages, split backward with the stage-1 W deferred to the very end:
  //   F0 [0,1] F1 [1,2] I1 [2,3] I0 [3,4] W0 [4,5] W1 [5,6]
  // Stage 0's gradients are done at 5, stage 1's at 6 (its last W, not its I at 3).
  Schedule s;
  s.name = "split";
  s.num_ranks = 1;
  s.num_stages = 2;
  s.num_microbatches = 1;
  s.stage_rank = {0, 0};
  s.ops = {{Op::f(0, 0), Op::f(1, 0), Op::i(1, 0), Op::i(0, 0), Op::w(0, 0), Op::w(1, 0)}};
  const auto topo = test::one_node(1);
  SimInput in = test::uniform_input(s, *topo, test::Costs{1, 1, 1, 0, 0});
  in.grad_buckets = test::whole_stages({10, 2});
  in.overlap_grad_reduce = true;
  test::Recorder rec;
  const SimResult r = simulate(in, s, &rec);
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_EQ(rec.reductions.size(), 2u);
  EXPECT_EQ(rec.reductions[0].stage, 0);
  EXPECT_EQ(rec.reductions[0].start, 5);
  EXPECT_EQ(rec.reductions[0].end, 15);
  EXPECT_EQ(rec.reductions[1].stage, 1);
  EXPECT_EQ(rec.reductions[1].ready, 6);
  EXPECT_EQ(rec.reductions[1].start, 15);
  EXPECT_EQ(r.iteration_time, 17);
}

// For every built-in schedule and random costs: reductions after the last op are exactly
// tail time (the engine's old, independent path), overlap never makes things worse, and
// neither moves a single op.
TEST(GradReduce, NotOverlappedEqualsTailAndOverlapOnlyHelps) {
  std::mt19937 rng(7);
  for (const ScheduleInfo& info : builtin_schedules())
    for (int p : {2, 4}) {
      Schedule sch;
      try {
        sch = info.generate(ScheduleParams{p, 2 * p, effective_vpp(info, 2), {}});
      } catch (const ScheduleError&) {
        continue;
      }
      SCOPED_TRACE(std::string(info.name) + " p=" + std::to_string(p));
      const auto topo = test::one_node(p, 0.5, 1.0);
      SimInput in = test::uniform_input(sch, *topo, test::Costs{});
      for (StageCost& c : in.stages) {
        c.forward = 1 + rng() % 1000;
        c.backward_input = 1 + rng() % 1000;
        c.backward_weight = 1 + rng() % 1000;
        c.output_bytes = rng() % 2000;
      }
      std::vector<Time> tail(p);
      for (Time& t : tail) t = rng() % 3000;
      SimInput plain = in;
      plain.tail_time = tail;
      in.tail_time = tail;
      std::vector<Time> reduce(sch.num_stages);
      for (int s = 0; s < sch.num_stages; ++s) {
        reduce[s] = rng() % 4000;
        plain.tail_time[sch.stage_rank[s]] += reduce[s];
      }
      in.grad_buckets = test::whole_stages(reduce);
      const SimResult base = simulate(plain, sch);
      const SimResult after = simulate(in, sch);
      in.overlap_grad_reduce = true;
      const SimResult overlapped = simulate(in, sch);
      ASSERT_TRUE(base.ok && after.ok && overlapped.ok) << base.error << after.error;
      EXPECT_EQ(after.iteration_time, base.iteration_time);
      EXPECT_LE(overlapped.iteration_time, after.iteration_time);
      EXPECT_GE(overlapped.iteration_time, overlapped.pipeline_time);
      EXPECT_EQ(overlapped.pipeline_time, base.pipeline_time);
      for (int r = 0; r < p; ++r) {
        EXPECT_EQ(overlapped.devices[r].last_end, base.devices[r].last_end);
        EXPECT_EQ(overlapped.devices[r].busy, base.devices[r].busy);
        EXPECT_GE(overlapped.devices[r].tail_start, overlapped.devices[r].last_end);
      }
    }
}

// The overlapped comm stream, recomputed here from the ops the engine reports: a stage's
// gradients are complete at the latest end of its W, B or FB-backward ops; each rank
// reduces in completion order, first come first served.
TEST(GradReduce, OverlappedStreamMatchesTheOpsItFollows) {
  std::mt19937 rng(11);
  for (const char* name : {"interleaved", "zb-h1", "zb-v", "dualpipe-v"}) {
    const ScheduleInfo& info = *find_schedule(name);
    const int p = 4;
    const Schedule sch = info.generate(ScheduleParams{p, 8, effective_vpp(info, 2), {}});
    SCOPED_TRACE(name);
    const auto topo = test::one_node(p);
    SimInput in = test::uniform_input(sch, *topo, test::Costs{});
    for (StageCost& c : in.stages) {
      c.forward = 1 + rng() % 100;
      c.backward_input = 1 + rng() % 100;
      c.backward_weight = 1 + rng() % 100;
    }
    std::vector<Time> reduce(sch.num_stages);
    for (Time& t : reduce) t = 1 + rng() % 300;
    in.grad_buckets = test::whole_stages(reduce);
    in.overlap_grad_reduce = true;
    test::Recorder rec;
    const SimResult r = simulate(in, sch, &rec);
    ASSERT_TRUE(r.ok) << r.error;
    std::map<int, Time> done;  // stage -> gradients complete
    for (const OpRecord& op : rec.ops) {
      int stage = -1;
      if (op.op.kind == OpKind::B || op.op.kind == OpKind::W) stage = op.op.stage;
      if (op.op.kind == OpKind::FB) stage = op.op.stage2;
      if (stage >= 0) done[stage] = std::max(done[stage], op.end);
    }
    ASSERT_EQ(done.size(), static_cast<std::size_t>(sch.num_stages));
    for (int rank = 0; rank < p; ++rank) {
      std::vector<std::pair<Time, int>> order;
      for (const auto& [stage, t] : done)
        if (sch.stage_rank[stage] == rank) order.emplace_back(t, stage);
      std::sort(order.begin(), order.end());
      Time free = 0;
      for (const auto& [t, stage] : order) free = std::max(free, t) + reduce[stage];
      EXPECT_EQ(r.devices[rank].tail_start, std::max(free, r.devices[rank].last_end)) << rank;
    }
  }
}

TEST(GradReduce, BadInputIsAnError) {
  const auto topo = test::one_node(2);
  SimInput in = two_chunk_input(*topo);
  in.grad_buckets = test::whole_stages({1, 2});
  EXPECT_EQ(simulate(in, two_chunks()).error,
            "grad_buckets has 2 entries for 4 stages (give one list per stage, or none)");
  in.grad_buckets = test::whole_stages({1, 2, -3, 4});
  EXPECT_EQ(simulate(in, two_chunks()).error,
            "a gradient bucket needs a time of at least 0 and ready fractions in [0, 1]");
  in.grad_buckets = test::whole_stages({1, 2, 3, 4});
  in.tied_reduce = PairReduction{0, 2, 1};
  EXPECT_EQ(simulate(in, two_chunks()).error,
            "tied_reduce joins ranks 0 and 2, but the schedule has ranks 0 to 1");
  in.tied_reduce = PairReduction{0, 1, -1};
  EXPECT_EQ(simulate(in, two_chunks()).error, "tied_reduce's time must not be negative");
}

TEST(GradReduce, ReductionsCountTowardsTheClockLimit) {
  const auto topo = test::one_node(2);
  SimInput in = two_chunk_input(*topo);
  const Time huge = std::numeric_limits<Time>::max() / 2;
  in.grad_buckets = test::whole_stages({huge, huge, huge, 0});
  const SimResult r = simulate(in, two_chunks());
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("2^63"), std::string::npos) << r.error;
}

TEST(GradBuckets, ABucketStartsPartWayThroughTheLastBackward) {
  // One rank, one stage, one micro-batch: F 0..2, B 2..12 (I 5 + W 5). Bucket 1 (the last
  // layers) is ready half-way through B, at 7, and runs 7..11; bucket 2 at B's end, 12..15;
  // then the tail of 1: 16. Not overlapped, both start at 12: 12..16, 16..19, tail to 20.
  const auto topo = test::one_node(1);
  const Schedule s = test::generate("1f1b", 1, 1);
  SimInput in = test::uniform_input(s, *topo, test::Costs{2, 5, 5, 0, 0});
  in.tail_time = {1};
  in.grad_buckets = {{GradBucket{4, 0.5, 1.0}, GradBucket{3, 1.0, 1.0}}};
  in.overlap_grad_reduce = true;
  test::Recorder rec;
  const SimResult a = simulate(in, s), b = simulate(in, s, &rec);  // both engines
  ASSERT_TRUE(a.ok && b.ok);
  EXPECT_EQ(a.iteration_time, 16);
  EXPECT_EQ(b.iteration_time, 16);
  in.overlap_grad_reduce = false;
  EXPECT_EQ(simulate(in, s).iteration_time, 20);
}

TEST(GradBuckets, AWeightGradientOpUsesItsOwnFraction) {
  // zb-h1 on one rank: F 0..2, I 2..7, W 7..17 (W = 10). The bucket is ready 0.3 into the
  // W (its ready_b of 0.9 does not apply): 10..14; tail 0.
  const auto topo = test::one_node(1);
  const Schedule s = test::generate("zb-h1", 1, 1);
  SimInput in = test::uniform_input(s, *topo, test::Costs{2, 5, 10, 0, 0});
  in.grad_buckets = {{GradBucket{4, 0.9, 0.3}}};
  in.overlap_grad_reduce = true;
  EXPECT_EQ(simulate(in, s).iteration_time, 17);  // 10 + 4 = 14 < 17: hidden
  in.grad_buckets = {{GradBucket{9, 0.9, 0.3}}};
  EXPECT_EQ(simulate(in, s).iteration_time, 19);  // 10 + 9
}

TEST(GradBuckets, BadBucketsAreRefused) {
  const auto topo = test::one_node(1);
  const Schedule s = test::generate("1f1b", 1, 1);
  SimInput in = test::uniform_input(s, *topo, test::Costs{});
  in.grad_buckets = {{GradBucket{1, 1.5, 1.0}}};
  EXPECT_FALSE(simulate(in, s).ok);
  in.grad_buckets = {{}, {}};  // two lists for one stage
  EXPECT_FALSE(simulate(in, s).ok);
}

}  // namespace
}  // namespace bmpipe
