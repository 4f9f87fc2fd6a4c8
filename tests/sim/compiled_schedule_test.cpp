// The compiled form: its layout on a schedule small enough to draw by hand, its errors,
// ownership, and that both simulate() entry points give the same runs.
#include <gtest/gtest.h>

#include <thread>

#include "support/support.hpp"

namespace bmpipe {
namespace {

constexpr std::uint32_t kLocal = CompiledSchedule::kLocal;
constexpr std::uint32_t kNoSlot = CompiledSchedule::kNoSlot;

TEST(CompiledSchedule, LayoutOfTwoRankOneFOneB) {
  // 1F1B, p = 2, m = 2:  rank 0: F0 F1 B0 B1 (flat 0..3)   rank 1: F0 B0 F1 B1 (flat 4..7)
  // Slots are numbered in consumer order from 2: rank 0's B0 and B1 wait for the
  // gradients (slots 2, 3), rank 1's F0 and F1 for the activations (slots 4, 5).
  const Schedule sch = make_1f1b(ScheduleParams{2, 2, 1, {}});
  const CompiledSchedule c(sch);
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c.rank_begin(0), 0u);
  EXPECT_EQ(c.rank_begin(1), 4u);
  EXPECT_EQ(c.rank_begin(2), 8u);
  EXPECT_EQ(c.num_slots(), 6u);
  ASSERT_EQ(sch.ops[1][1], Op::b(1, 0));

  const auto ops = c.ops();
  // Cost rows: F of stage s is s, B is S + s (S = 2).
  EXPECT_EQ(ops[0].cost, 0u);
  EXPECT_EQ(ops[2].cost, 2u);
  EXPECT_EQ(ops[4].cost, 1u);
  EXPECT_EQ(ops[5].cost, 3u);
  // Rank 0's forwards send to rank 1 over hop 0 (stage 0 -> 1), into slots 4 and 5.
  EXPECT_EQ(ops[0].send[0], 4u);
  EXPECT_EQ(ops[1].send[0], 5u);
  EXPECT_EQ(ops[0].hop[0], 0u);
  EXPECT_EQ(ops[0].send[1], kNoSlot);
  // Rank 1's backwards send their gradients over hop S + 1 = 3, into slots 2 and 3.
  EXPECT_EQ(ops[5].send[1], 2u);
  EXPECT_EQ(ops[7].send[1], 3u);
  EXPECT_EQ(ops[5].hop[1], 3u);
  // The last stage's forward feeds only its own backward; stage 0's backward sends nothing.
  EXPECT_EQ(ops[4].send[0], kNoSlot);
  EXPECT_EQ(ops[2].send[0], kNoSlot);
  EXPECT_EQ(ops[2].send[1], kNoSlot);
  // Waits: F0@s0 needs nothing; B0@s0 the gradient in slot 2; F0@s1 the activation in 4;
  // B0@s1 only its own forward (the loss is local), so nothing remote.
  EXPECT_EQ(ops[0].wait[0], CompiledSchedule::kReadySlot);
  EXPECT_EQ(ops[0].wait[1], CompiledSchedule::kReadySlot);
  EXPECT_EQ(ops[2].wait[1], 2u);
  EXPECT_EQ(ops[4].wait[0], 4u);
  EXPECT_EQ(ops[5].wait[0], CompiledSchedule::kReadySlot);
  EXPECT_EQ(ops[5].wait[1], CompiledSchedule::kReadySlot);

  // Inputs in check order: B0@s0 needs F0@s0 here (flat 0), then B0@s1's gradient (flat 5).
  const auto b0 = c.inputs(2);
  ASSERT_EQ(b0.size(), 2u);
  EXPECT_EQ(b0[0].producer, 0u);
  EXPECT_EQ(b0[0].slot, kLocal);
  EXPECT_EQ(b0[0].stage, 0);
  EXPECT_EQ(b0[1].producer, 5u);
  EXPECT_EQ(b0[1].slot, 2u);
  EXPECT_EQ(b0[1].stage, 1);
  EXPECT_TRUE(c.inputs(0).empty());
  ASSERT_EQ(c.inputs(6).size(), 1u);  // F1@s1 <- F1@s0
  EXPECT_EQ(c.inputs(6)[0].producer, 1u);

  EXPECT_EQ(c.forward_op(1, 1), 6u);
  EXPECT_EQ(c.backward_op(0, 1), 3u);
  // Every cost row is used m = 2 times; each of the two crossing hops carries m transfers.
  for (std::uint32_t row : {0u, 1u, 2u, 3u}) EXPECT_EQ(c.cost_uses()[row], 2u);
  EXPECT_EQ(c.hop_uses()[0], 2u);
  EXPECT_EQ(c.hop_uses()[3], 2u);
  EXPECT_EQ(c.hop_uses()[1] + c.hop_uses()[2], 0u);
}

TEST(CompiledSchedule, SameRankInputLaterInTheListCanNeverArrive) {
  // One rank runs B before its own F: the compiled form marks B as waiting on the slot that
  // never fills, and the run reports the deadlock.
  Schedule sch;
  sch.name = "backwards";
  sch.num_ranks = 1;
  sch.num_stages = 1;
  sch.num_microbatches = 1;
  sch.stage_rank = {0};
  sch.ops = {{Op::b(0, 0), Op::f(0, 0)}};
  const CompiledSchedule c(sch);
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c.ops()[0].wait[0], CompiledSchedule::kNeverSlot);
  const auto topo = test::one_node(1);
  const SimResult r = simulate(test::uniform_input(sch, *topo, test::Costs{}), c);
  ASSERT_FALSE(r.ok);
  ASSERT_EQ(r.blocked.size(), 1u);
  EXPECT_EQ(r.blocked[0].waiting_for, "F0@s0 on this device");
}

TEST(CompiledSchedule, InvalidScheduleCarriesTheMessageSimulateGives) {
  Schedule dup = make_1f1b(ScheduleParams{2, 2, 1, {}});
  dup.ops[0].push_back(Op::f(0, 0));  // position 4 on device 0
  const CompiledSchedule c(dup);
  EXPECT_FALSE(c.ok());
  EXPECT_EQ(c.error(), "invalid schedule (device 0, op 4): F0@s0 appears twice");
  const auto topo = test::one_node(2);
  const SimInput in = test::uniform_input(dup, *topo, test::Costs{});
  EXPECT_EQ(simulate(in, c).error, c.error());
  EXPECT_EQ(simulate(in, dup).error, c.error());
  EXPECT_FALSE(simulate(in, dup).ok);
}

TEST(CompiledSchedule, HugeShapesAreRefusedBeforeAnythingIsAllocated) {
  Schedule huge;
  huge.num_ranks = 1;
  huge.num_stages = 1 << 15;
  huge.num_microbatches = 1 << 15;  // 2^30 (stage, micro-batch) pairs
  const CompiledSchedule c(huge);
  EXPECT_FALSE(c.ok());
  EXPECT_EQ(c.error(), "stages x micro-batches must stay below 2^30");
}

TEST(CompiledSchedule, OwnsACopyUnlessBorrowing) {
  auto original = std::make_unique<Schedule>(make_1f1b(ScheduleParams{3, 6, 1, {}}));
  const CompiledSchedule borrowed = CompiledSchedule::borrowing(*original);
  EXPECT_EQ(&borrowed.schedule(), original.get());
  const CompiledSchedule owned(*original);
  EXPECT_NE(&owned.schedule(), original.get());
  const CompiledSchedule copy = owned;  // copies share the one schedule
  EXPECT_EQ(&copy.schedule(), &owned.schedule());

  const auto topo = test::one_node(3);
  const SimInput in = test::uniform_input(*original, *topo, test::Costs{3, 2, 5, 7, 0});
  const Time expected = simulate(in, borrowed).pipeline_time;
  original.reset();  // the owning form outlives the schedule it was made from
  const SimResult r = simulate(in, copy);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.pipeline_time, expected);
  EXPECT_EQ(r.pipeline_time, (6 + 3 - 1) * (3 + 2 + 5));  // (m + p - 1)(F + B)
}

TEST(CompiledSchedule, BothEntryPointsGiveTheSameRunForEveryBuiltin) {
  const auto topo = test::one_node(4, 2.0, 50.0);
  for (const ScheduleInfo& info : builtin_schedules()) {
    SCOPED_TRACE(std::string(info.name));
    const Schedule sch = info.generate(ScheduleParams{4, 8, effective_vpp(info, 2), {}});
    const SimInput in = test::uniform_input(sch, *topo, test::Costs{1000, 1100, 900, 64, 80000});
    const CompiledSchedule c(sch);
    test::Recorder a, b;
    const SimResult ra = simulate(in, c, &a);
    const SimResult rb = simulate(in, sch, &b);
    ASSERT_TRUE(ra.ok && rb.ok) << ra.error << rb.error;
    EXPECT_EQ(ra.pipeline_time, rb.pipeline_time);
    ASSERT_EQ(a.ops.size(), b.ops.size());
    for (std::size_t k = 0; k < a.ops.size(); ++k) {
      EXPECT_EQ(a.ops[k].op, b.ops[k].op);
      EXPECT_EQ(a.ops[k].start, b.ops[k].start);
    }
  }
}

TEST(CompiledSchedule, OneCompiledFormServesManyThreads) {
  const Schedule sch = make_zb_v(ScheduleParams{4, 16, 2, {}});
  const CompiledSchedule c(sch);
  const Topology topo(ClusterSpec{2, 2, LinkSpec{100, 3}, LinkSpec{10, 9}});
  const SimInput in = test::uniform_input(sch, topo, test::Costs{1000, 1100, 900, 64, 99999});
  const SimResult alone = simulate(in, c);
  ASSERT_TRUE(alone.ok) << alone.error;
  std::vector<Time> times(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      NullObserver ignore;  // odd threads take the ordered engine
      times[t] = simulate(in, c, t % 2 ? &ignore : nullptr).pipeline_time;
    });
  for (auto& th : threads) th.join();
  for (Time t : times) EXPECT_EQ(t, alone.pipeline_time);
}

}  // namespace
}  // namespace bmpipe
