// Communication, memory over time, determinism and deadlock reports.
#include <gtest/gtest.h>

#include <thread>

#include "api/summary.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace {

TEST(Communication, EachCrossDeviceDependencyAddsLatency) {
  // m = 1: the only path is F through p stages and B back, with p-1 hops each way.
  for (int p : {2, 3, 5}) {
    const Schedule sch = make_gpipe(ScheduleParams{p, 1, 1});
    const double lambda_us = 7;
    const auto topo = test::one_node(p, lambda_us);
    const test::Costs u{1000, 2000, 3000, 0, 0};
    const SimResult r = simulate(test::uniform_input(sch, *topo, u), sch);
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.pipeline_time, p * (u.f + u.i + u.w) + 2 * (p - 1) * 7000) << "p=" << p;
  }
}

TEST(Communication, LatencyAddsPerHopInOneFOneB) {
  // Uniform 1F1B: the critical path of the last micro-batch crosses 2(p-1) links, and with
  // latency smaller than an op every steady-state dependency is also delayed; check against
  // the zero-latency run plus 2(p-1) * lambda for m = 1, where the path is unique.
  const int p = 4;
  const Schedule sch = make_1f1b(ScheduleParams{p, 1, 1});
  const auto free = test::one_node(p, 0);
  const auto slow = test::one_node(p, 3);
  const test::Costs u{100, 100, 100, 0, 0};
  const SimResult a = simulate(test::uniform_input(sch, *free, u), sch);
  const SimResult b = simulate(test::uniform_input(sch, *slow, u), sch);
  ASSERT_TRUE(a.ok && b.ok);
  EXPECT_EQ(b.pipeline_time - a.pipeline_time, 2 * (p - 1) * 3000);
}

TEST(Communication, TransfersSharingALinkQueueUp) {
  // p = 2, GPipe: rank 0's three forwards end at 1, 2, 3 ms, and each output needs 10 ms
  // on the single 1 GB/s link (1 byte per ns). They leave back to back: arrivals at 11,
  // 21, 31 ms, so rank 1's forwards start then.
  const Schedule sch = make_gpipe(ScheduleParams{2, 3, 1});
  const auto topo = test::one_node(2, 0, 1.0);
  const test::Costs u{1'000'000, 500'000, 500'000, 0, 10'000'000};
  test::Recorder rec;
  const SimResult r = simulate(test::uniform_input(sch, *topo, u), sch, &rec);
  ASSERT_TRUE(r.ok) << r.error;
  for (int mb = 0; mb < 3; ++mb) {
    const OpRecord* f = rec.find(1, Op::f(1, mb));
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->start, (11 + 10 * mb) * kNsPerMs) << "mb " << mb;
    EXPECT_GE(f->binding_transfer, 0);
    EXPECT_EQ(f->binding_stage, 0);
  }
  ASSERT_GE(rec.transfers.size(), 3u);
  EXPECT_EQ(rec.transfers[1].requested, 2 * kNsPerMs);
  EXPECT_EQ(rec.transfers[1].start, 11 * kNsPerMs);  // waited for the link
}

TEST(Communication, GradientsAndActivationsUseSeparateLinkDirections) {
  // Opposite directions of a link are different resources: a gradient going back does not
  // wait for an activation going forward.
  const auto topo = test::one_node(2, 0, 1.0);
  const Route fwd = topo->route(0, 1, 100);
  const Route bwd = topo->route(1, 0, 100);
  ASSERT_EQ(fwd.links.size(), 1u);
  ASSERT_EQ(bwd.links.size(), 1u);
  EXPECT_NE(fwd.links[0], bwd.links[0]);
}

TEST(Topology, CrossNodePathPaysInterNodeLatencyOnceAndSlowestBandwidth) {
  const Topology topo(ClusterSpec{2, 2, LinkSpec{400, 2}, LinkSpec{25, 10}});
  EXPECT_EQ(topo.num_devices(), 4);
  const Route inside = topo.route(0, 1, 1'000'000);
  EXPECT_EQ(inside.links.size(), 1u);
  EXPECT_EQ(inside.latency, 2000);
  EXPECT_EQ(inside.serialization(1'000'000), 2500);  // 1 MB at 400 B/ns
  const Route across = topo.route(1, 2, 1'000'000);
  EXPECT_EQ(across.links.size(), 2u);  // NIC out, NIC in
  EXPECT_EQ(across.latency, 10'000);
  EXPECT_EQ(across.serialization(1'000'000), 40'000);  // 1 MB at 25 B/ns
  EXPECT_TRUE(topo.route(3, 3, 5).links.empty());
}

TEST(Memory, SplitBackwardFreesInTwoSteps) {
  // One device, one micro-batch, F then I then W: 100 bytes at F, 30 kept until W.
  Schedule sch;
  sch.name = "handmade";
  sch.num_ranks = 1;
  sch.num_stages = 1;
  sch.num_microbatches = 1;
  sch.stage_rank = {0};
  sch.ops = {{Op::f(0, 0), Op::i(0, 0), Op::w(0, 0)}};
  const auto topo = test::one_node(1);
  SimInput in = test::uniform_input(sch, *topo, test::Costs{1, 2, 3, 100, 0});
  in.stages[0].weight_grad_retained_bytes = 30;
  test::Recorder rec;
  const SimResult r = simulate(in, sch, &rec);
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_EQ(rec.memory.size(), 3u);
  EXPECT_EQ(rec.memory[0].time, 0);
  EXPECT_EQ(rec.memory[0].bytes, 100);
  EXPECT_EQ(rec.memory[1].time, 3);  // end of I
  EXPECT_EQ(rec.memory[1].bytes, 30);
  EXPECT_EQ(rec.memory[2].time, 6);  // end of W
  EXPECT_EQ(rec.memory[2].bytes, 0);
  EXPECT_EQ(r.pipeline_time, 6);
}

TEST(Determinism, SameInputGivesByteIdenticalJson) {
  const Schedule sch = make_1f1b(ScheduleParams{4, 16, 1});
  const Topology topo(ClusterSpec{2, 2, LinkSpec{100, 3}, LinkSpec{10, 9}});
  SimInput in = test::uniform_input(sch, topo, test::Costs{1000, 1100, 900, 64, 123456});
  in.rank_device = {0, 1, 2, 3};
  const RunInfo info{"1f1b", 4, 1, 16};
  const std::string a = summary_json(info, simulate(in, sch)).dump();
  const std::string b = summary_json(info, simulate(in, sch)).dump();
  EXPECT_EQ(a, b);
  EXPECT_NE(a.find("\"pipeline_time_ms\""), std::string::npos);
}

TEST(Deadlock, CyclicOrderIsReportedWithBlockedOps) {
  // Rank 1 runs micro-batch 1 first, but rank 0 only sends it after B0@s0, which needs
  // the gradient of B0@s1, which rank 1 runs after F1@s1: a cycle.
  Schedule sch;
  sch.name = "cyclic";
  sch.num_ranks = 2;
  sch.num_stages = 2;
  sch.num_microbatches = 2;
  sch.stage_rank = {0, 1};
  sch.ops = {{Op::f(0, 0), Op::b(0, 0), Op::f(0, 1), Op::b(0, 1)},
             {Op::f(1, 1), Op::f(1, 0), Op::b(1, 0), Op::b(1, 1)}};
  const auto topo = test::one_node(2);
  const SimResult r = simulate(test::uniform_input(sch, *topo, test::Costs{1, 1, 1, 0, 0}), sch);
  ASSERT_FALSE(r.ok);
  ASSERT_EQ(r.blocked.size(), 2u);
  EXPECT_EQ(r.blocked[0].rank, 0);
  EXPECT_EQ(r.blocked[0].position, 1);
  EXPECT_EQ(r.blocked[0].op, Op::b(0, 0));
  EXPECT_NE(r.blocked[0].waiting_for.find("device 1"), std::string::npos);
  EXPECT_EQ(r.blocked[1].rank, 1);
  EXPECT_EQ(r.blocked[1].position, 0);
  EXPECT_EQ(r.blocked[1].op, Op::f(1, 1));
  EXPECT_NE(r.error.find("deadlock"), std::string::npos);
  EXPECT_NE(r.error.find("B0@s0"), std::string::npos);
  EXPECT_NE(r.error.find("F1@s1"), std::string::npos);
  const auto j = summary_json(RunInfo{"cyclic", 2, 1, 2}, r);
  EXPECT_EQ(j.at("blocked").size(), 2u);
  EXPECT_TRUE(j.contains("error"));
}

TEST(Validation, MalformedSchedulesAreErrorsNotCrashes) {
  const auto topo = test::one_node(2);
  Schedule sch = make_1f1b(ScheduleParams{2, 2, 1});
  const SimInput in = test::uniform_input(sch, *topo, test::Costs{1, 1, 1, 0, 0});
  Schedule dup = sch;
  dup.ops[0].push_back(Op::f(0, 0));
  EXPECT_NE(simulate(in, dup).error.find("twice"), std::string::npos);
  Schedule wrong_rank = sch;
  wrong_rank.ops[0][0] = Op::f(1, 0);
  EXPECT_NE(simulate(in, wrong_rank).error.find("held by device 1"), std::string::npos);
  Schedule missing = sch;
  missing.ops[1].pop_back();
  EXPECT_NE(simulate(in, missing).error.find("never run"), std::string::npos);
  Schedule out_of_range = sch;
  out_of_range.ops[1][0] = Op::f(1, 9);
  EXPECT_FALSE(simulate(in, out_of_range).ok);
  SimInput short_costs = in;
  short_costs.stages.pop_back();
  EXPECT_NE(simulate(short_costs, sch).error.find("stages"), std::string::npos);
}

}  // namespace
}  // namespace bmpipe

namespace bmpipe {
namespace {

TEST(Reentrancy, ConcurrentRunsOnSharedInputsAgree) {
  // The planner calls simulate() from several threads with one Topology: results must be
  // the same as a lone run (routes are memoized under a lock, nothing else is shared).
  const Schedule sch = make_1f1b(ScheduleParams{8, 32, 1});
  const Topology topo(ClusterSpec{2, 4, LinkSpec{100, 3}, LinkSpec{10, 9}});
  SimInput in = test::uniform_input(sch, topo, test::Costs{1000, 1100, 900, 64, 99999});
  const SimResult alone = simulate(in, sch);
  std::vector<Time> times(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] { times[t] = simulate(in, sch).pipeline_time; });
  for (auto& th : threads) th.join();
  for (Time t : times) EXPECT_EQ(t, alone.pipeline_time);
}

}  // namespace
}  // namespace bmpipe
