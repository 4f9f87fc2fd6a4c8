// Activation offload in the engine (sim/simulate.hpp, "Activation offload"): copies out after
// F, copies back at the chosen lead, memory charged while a copy is in flight. Every figure
// below is worked out by hand on one rank with one stage, where the only waits are the
// copies: F = 10 ns, B = 20 ns, 100 activation bytes per micro-batch of which 60 go to the
// host, each copy taking T ns.
#include <gtest/gtest.h>

#include <limits>

#include "support/support.hpp"

namespace bmpipe {
namespace {

Schedule one_rank(std::vector<Op> ops, int microbatches) {
  Schedule s;
  s.name = "one-rank";
  s.num_ranks = 1;
  s.num_stages = 1;
  s.num_microbatches = microbatches;
  s.stage_rank = {0};
  s.ops.resize(1);
  s.ops[0].assign(ops.begin(), ops.end());
  return s;
}

// F0 F1 B0 B1: two forwards, then their backwards.
Schedule two_then_two() {
  return one_rank({Op::f(0, 0), Op::f(0, 1), Op::b(0, 0), Op::b(0, 1)}, 2);
}

SimInput input(Time copy, int lead) {
  SimInput in;
  StageCost c;
  c.forward = 10;
  c.backward_input = 20;
  c.activation_bytes = 100;
  c.offload_bytes = 60;
  c.offload_time = copy;
  in.stages = {c};
  in.rank_device = {0};
  in.offload_lead = lead;
  return in;
}

const OpRecord& op(const test::Recorder& rec, const Op& o) {
  const OpRecord* r = rec.find(0, o);
  EXPECT_NE(r, nullptr);
  return *r;
}

// T = 5, lead 1. F0 [0,10]; its copy out [10,15]. F1 [10,20] starts, so B0's copy back is
// asked for at 10 and runs [15,20] once the copy out is done. B0 [20,40] on time. F1's copy
// out [20,25]; B0's start asks for B1's, [25,30]. B1 [40,60]. No wait: 2 F + 2 B = 60.
TEST(Offload, HiddenBehindTheNextOps) {
  test::Recorder rec;
  const SimResult r = simulate(input(5, 1), two_then_two(), &rec);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.iteration_time, 60);
  EXPECT_EQ(r.devices[0].reload_wait, 0);
  EXPECT_EQ(op(rec, Op::b(0, 0)).start, 20);
  ASSERT_EQ(rec.copies.size(), 4u);
  const CopyRecord out0{0, 0, 0, true, 60, 10, 10, 15};
  const CopyRecord back0{0, 0, 0, false, 60, 10, 15, 20};
  const CopyRecord out1{0, 0, 1, true, 60, 20, 20, 25};
  const CopyRecord back1{0, 0, 1, false, 60, 20, 25, 30};
  EXPECT_EQ(rec.copies[0], out0);
  EXPECT_EQ(rec.copies[1], back0);
  EXPECT_EQ(rec.copies[2], out1);
  EXPECT_EQ(rec.copies[3], back1);
  // The same run unobserved gives the same result.
  EXPECT_EQ(simulate(input(5, 1), two_then_two()).iteration_time, 60);
}

// T = 10 (a link half as fast): F0's copy out [10,20], its copy back [20,30], so B0 waits
// from 20 to 30. F1's copy out [20,30]; B0 starts at 30 and asks for B1's, [30,40]: on time
// for B1 at 50. B0 [30,50], B1 [50,70]: 10 ns exposed.
TEST(Offload, ExposedWhenTheLinkIsSlow) {
  test::Recorder rec;
  const SimResult r = simulate(input(10, 1), two_then_two(), &rec);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.iteration_time, 70);
  EXPECT_EQ(r.devices[0].reload_wait, 10);
  const OpRecord& b0 = op(rec, Op::b(0, 0));
  EXPECT_EQ(b0.start, 30);
  EXPECT_EQ(b0.device_free, 20);
  EXPECT_TRUE(b0.binding_reload);
  EXPECT_EQ(b0.binding_stage, 0);
  // B1's copy back (ending at 40) is its last input, but B0 holds the device until 50: no
  // wait of its own, so reload_wait stays at B0's 10.
  const OpRecord& b1 = op(rec, Op::b(0, 1));
  EXPECT_TRUE(b1.binding_reload);
  EXPECT_EQ(b1.inputs_ready, 40);
  EXPECT_EQ(b1.start, 50);
}

// Lead 0 asks for a copy back only when the op before the backward ends. T = 5: B0's copy
// back [20,25], B0 [25,45]; B1's asked for at 45, [45,50], B1 [50,70]: 10 ns late in all.
// Lead 1 (HiddenBehindTheNextOps) brings both back on time.
TEST(Offload, PrefetchTooLateAndOnTime) {
  const SimResult late = simulate(input(5, 0), two_then_two());
  ASSERT_TRUE(late.ok) << late.error;
  EXPECT_EQ(late.iteration_time, 70);
  EXPECT_EQ(late.devices[0].reload_wait, 10);
  const SimResult on_time = simulate(input(5, 1), two_then_two());
  EXPECT_EQ(on_time.iteration_time, 60);
  EXPECT_EQ(on_time.devices[0].reload_wait, 0);
  // A lead past the forward keeps the bytes on the device (nothing would leave before the
  // copy back is asked for): no copies, no wait.
  test::Recorder rec;
  const SimResult kept = simulate(input(5, 9), two_then_two(), &rec);
  EXPECT_EQ(kept.iteration_time, 60);
  EXPECT_TRUE(rec.copies.empty());
  EXPECT_EQ(kept.devices[0].peak_activation_bytes, 200);
  EXPECT_EQ(kept.devices[0].peak_host_bytes, 0);
  // The largest lead the config allows does not wrap round to an earlier op.
  EXPECT_EQ(simulate(input(5, std::numeric_limits<int>::max()), two_then_two()).iteration_time, 60);
}

// The last stage of 1F1B runs each backward right after its forward: its bytes stay on the
// device, so offloading costs it nothing (it would otherwise wait two copies per
// micro-batch). F0 B0 F1 B1 on one rank with T = 10: 2 F + 2 B = 60, no copy.
TEST(Offload, ABackwardRightAfterItsForwardKeepsItsBytes) {
  test::Recorder rec;
  const SimResult r = simulate(
      input(10, 1), one_rank({Op::f(0, 0), Op::b(0, 0), Op::f(0, 1), Op::b(0, 1)}, 2), &rec);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.iteration_time, 60);
  EXPECT_EQ(r.devices[0].reload_wait, 0);
  EXPECT_TRUE(rec.copies.empty());
  EXPECT_EQ(r.devices[0].peak_activation_bytes, 100);
}

// GPipe on one rank, four micro-batches, T = 1, lead 1: F_k [10k, 10k+10], copy out k
// [10k+10, 10k+11]. At 30 F3 starts (+100) and asks for B0's copy back, which starts at once
// (+60): F0 and F1 are away (-120), F2's copy out runs until 31, so the device holds
// 4 x 100 - 120 + 60 = 340 bytes, the peak (without offload: 400). In flight counts: F2's
// bytes stay charged during its copy out, B0's from the start of its copy back.
TEST(Offload, MemoryChargedWhileCopiesAreInFlight) {
  const Schedule gpipe = one_rank({Op::f(0, 0), Op::f(0, 1), Op::f(0, 2), Op::f(0, 3), Op::b(0, 0),
                                   Op::b(0, 1), Op::b(0, 2), Op::b(0, 3)},
                                  4);
  test::Recorder rec;
  const SimResult r = simulate(input(1, 1), gpipe, &rec);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.devices[0].peak_activation_bytes, 340);
  EXPECT_EQ(r.iteration_time, 4 * 10 + 4 * 20);
  // The memory curve, change by change up to the peak:
  //   0: F0 +100; 10: F1 +100; 11: F0's copy out ends -60; 20: F2 +100; 21: -60;
  //   30: F3 +100, then B0's copy back +60; 31: F2's copy out ends -60.
  const std::vector<std::pair<Time, std::int64_t>> want = {
      {0, 100}, {10, 200}, {11, 140}, {20, 240}, {21, 180}, {30, 280}, {30, 340}, {31, 280}};
  ASSERT_GE(rec.memory.size(), want.size());
  for (std::size_t k = 0; k < want.size(); ++k) {
    EXPECT_EQ(rec.memory[k].time, want[k].first) << k;
    EXPECT_EQ(rec.memory[k].bytes, want[k].second) << k;
  }
  // Every byte comes back and goes: the curve ends at 0.
  EXPECT_EQ(rec.memory.back().bytes, 0);
  // Host memory: each copy out is counted from its issue to its backward's start, and all
  // four are issued (by 40) before B0 starts (at 40, after F3's end issues the fourth).
  EXPECT_EQ(r.devices[0].peak_host_bytes, 4 * 60);
  SimInput plain = input(1, 1);
  plain.stages[0].offload_bytes = 0;
  EXPECT_EQ(simulate(plain, gpipe).devices[0].peak_activation_bytes, 400);
}

// Free copies change no op's time on any built-in schedule, and can only lower a peak: the
// bytes are away from their forward's end until their copy back is asked for.
TEST(Offload, FreeCopiesKeepEveryScheduleTimeAndLowerNoPeakAbove) {
  for (const ScheduleInfo& info : builtin_schedules()) {
    SCOPED_TRACE(std::string(info.name));
    Schedule sch;
    try {
      sch = info.generate(ScheduleParams{4, 8, effective_vpp(info, 2), {}});
    } catch (const ScheduleError&) {
      continue;
    }
    const auto topo = test::one_node(4);
    SimInput in = test::uniform_input(sch, *topo, test::Costs{});
    for (StageCost& c : in.stages) c.activation_bytes = 1000;
    const SimResult base = simulate(in, sch);
    ASSERT_TRUE(base.ok) << base.error;
    for (StageCost& c : in.stages) c.offload_bytes = 400;
    for (int lead : {0, 1, 3}) {
      in.offload_lead = lead;
      const SimResult off = simulate(in, sch);
      ASSERT_TRUE(off.ok) << off.error;
      EXPECT_EQ(off.iteration_time, base.iteration_time) << lead;
      for (std::size_t d = 0; d < base.devices.size(); ++d) {
        EXPECT_LE(off.devices[d].peak_activation_bytes, base.devices[d].peak_activation_bytes);
        EXPECT_EQ(off.devices[d].reload_wait, 0);
      }
    }
  }
}

TEST(Offload, RefusesBadInput) {
  SimInput in = input(5, 1);
  in.stages[0].offload_bytes = 101;
  SimResult r = simulate(in, two_then_two());
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("offloads 101 bytes of its 100"), std::string::npos) << r.error;
  in = input(5, -1);
  r = simulate(in, two_then_two());
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("offload_lead"), std::string::npos) << r.error;
  in = input(-1, 1);
  EXPECT_FALSE(simulate(in, two_then_two()).ok);
}

}  // namespace
}  // namespace bmpipe
