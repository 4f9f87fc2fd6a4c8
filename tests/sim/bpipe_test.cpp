// BPipe's activation balancing in the engine (sim/simulate.hpp, "BPipe"; Kim et al., ICML
// 2023). Every figure is worked by hand on 1F1B over p = 4 ranks of one node, uniform
// stages: F = 10 ns, B = 20 ns, 100 activation bytes per micro-batch, free pipeline
// transfers (0 output bytes). The plain run, from the 1F1B order and the dependencies
// alone (m = 8):
//   rank 0: F0..F3 [0,40]  B0 [100,120] F4 [120,130] B1 [130,150] F5 [150,160]
//           B2 [160,180] F6 [180,190] B3 [190,210] F7 [210,220] B4 [220,240]
//           B5 [250,270] B6 [280,300] B7 [310,330]
//   rank 3: F_j [30 + 30j, 40 + 30j], B_j right after it, [40 + 30j, 60 + 30j]
// Rank s holds up to p - s micro-batches: peaks 400, 300, 200, 100 bytes.
#include <gtest/gtest.h>

#include "sim/bubbles.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace {

constexpr int kP = 4;

SimInput input(const Schedule& sch, const Topology& topo, bool bpipe) {
  SimInput in = test::uniform_input(sch, topo, test::Costs{10, 20, 0, 100, 0});
  in.bpipe = bpipe;
  return in;
}

// A node whose links move `bytes_per_ns` bytes a ns: a BPipe copy of 100 bytes takes
// 100 / bytes_per_ns ns (no latency). The pipeline's transfers carry 0 bytes: free.
std::unique_ptr<Topology> node(double bytes_per_ns) {
  return test::one_node(kP, 0.0, bytes_per_ns);
}

std::vector<std::int64_t> peaks(const SimResult& r) {
  std::vector<std::int64_t> v;
  for (const DeviceResult& d : r.devices) v.push_back(d.peak_activation_bytes);
  return v;
}

TEST(BPipe, KeepsHalfOfEachPairPlusOne) {
  // ceil((p + 1) / 2): a pair s, p - 1 - s holds (p - s) + (s + 1) = p + 1 under 1F1B.
  EXPECT_EQ(bpipe_keep(2), 2);
  EXPECT_EQ(bpipe_keep(4), 3);
  EXPECT_EQ(bpipe_keep(5), 3);
  EXPECT_EQ(bpipe_keep(8), 5);
}

// Copies of 1 ns (100 GB/s), each hidden beside one op. K = ceil(5 / 2) = 3, so only stage 0
// (4 > 3) evicts, to rank 3. The plan, on rank 0's list (positions 0..15: F0 F1 F2 F3 B0 F4
// B1 F5 B2 F6 B3 F7 B4 B5 B6 B7; micro-batch j can be away from two places after F_j to
// two before B_j): position 3 (F3) holds 0..3 -> evict 1 (away 3..4); position 5 (F4) holds
// 1..4 -> evict 3, the latest (away 5..8); position 9 (F6) holds 3..6 -> evict 5 (9..11);
// position 12 (B4) holds 4..7 -> evict 6 (11..12). So 1, 3, 5, 6 go, out when their F ends,
// back when the op before their B starts:
//   1: out [20,21], back at F4's start [120,121];   3: out [40,41], back at F6's [180,181]
//   5: out [160,161], back at B4's [220,221];        6: out [190,191], back at B5's [250,251]
// All back before their B: no op moves, the iteration stays 330 ns.
// Rank 0 then holds at most 3 (e.g. 120: B0 frees 0, F4 charges 4, 1's copy back charges
// 1: {1, 2, 4}; 20: F2 with 1 still leaving until 21: {0, 1, 2}). Rank 3 holds its own one
// micro-batch from 30 to 270 and from a copy out's start to its copy back's end the evicted
// ones: 1 [20,121], 3 [40,181], 5 [160,221], 6 [190,251] -- two at once at most (40..121,
// 160..181, 190..221), so 1 + 2 = 3. Peaks: 300, 300, 200, 300 against 400, 300, 200, 100.
TEST(BPipe, BalancesTheFourStagePeaks) {
  const Schedule sch = test::generate("1f1b", kP, 8);
  const auto topo = node(100.0);
  const SimResult plain = simulate(input(sch, *topo, false), sch);
  ASSERT_TRUE(plain.ok) << plain.error;
  EXPECT_EQ(peaks(plain), (std::vector<std::int64_t>{400, 300, 200, 100}));
  EXPECT_EQ(plain.iteration_time, 330);

  test::Recorder rec;
  const SimResult r = simulate(input(sch, *topo, true), sch, &rec);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(peaks(r), (std::vector<std::int64_t>{300, 300, 200, 300}));
  EXPECT_EQ(r.iteration_time, 330);
  for (const DeviceResult& d : r.devices) EXPECT_EQ(d.reload_wait, 0) << d.rank;
  ASSERT_EQ(rec.copies.size(), 8u);
  const std::vector<CopyRecord> want = {
      {0, 0, 1, true, 100, 20, 20, 21, 3},     {0, 0, 3, true, 100, 40, 40, 41, 3},
      {0, 0, 1, false, 100, 120, 120, 121, 3}, {0, 0, 5, true, 100, 160, 160, 161, 3},
      {0, 0, 3, false, 100, 180, 180, 181, 3}, {0, 0, 6, true, 100, 190, 190, 191, 3},
      {0, 0, 5, false, 100, 220, 220, 221, 3}, {0, 0, 6, false, 100, 250, 250, 251, 3}};
  for (std::size_t k = 0; k < want.size(); ++k) EXPECT_EQ(rec.copies[k], want[k]) << k;
  // The unobserved run agrees, and both end with every byte freed.
  EXPECT_EQ(simulate(input(sch, *topo, true), sch), r);
  for (int rank : {0, 3}) {
    std::int64_t last = -1;
    for (const auto& m : rec.memory)
      if (m.rank == rank) last = m.bytes;
    EXPECT_EQ(last, 0) << rank;
  }
}

// Copies of 50 ns (2 GB/s), m = 4. Rank 0's list F0 F1 F2 F3 B0 B1 B2 B3: position 3 holds
// 0..3 -> evict 1 (away at 3 only); position 4 (B0) holds 0..3 -> evict 2 (away at 4).
//   1 out [20,70]; 2 out asked at 30, the link 0->3 busy until 70: [70,120].
//   B0 [100,120] (gradient at 100) asks for 1 back at 100: [100,150].
//   B1's gradient lands at 130 but its bytes at 150: B1 [150,170], 20 ns waited.
//   B1's start asks for 2 back: [150,200]; B2 (gradient at 160, device free at 170) waits
//   until 200: B2 [200,220], 30 ns more; B3 [220,240] (gradient at 190).
// So rank 0 waits 50 ns and the iteration ends at 240 instead of 210 (ranks 1..3 are not
// delayed: stage 0's backwards send nothing). The slow copies also keep bytes on both
// sides: at 30 F3 starts while 1 is still leaving (until 70), so rank 0 holds 0..3, 400
// bytes; rank 3 holds its own one plus 1 [20,150] and 2 [70,200]: 300.
TEST(BPipe, ASlowLinkMakesTheBackwardWait) {
  const Schedule sch = test::generate("1f1b", kP, 4);
  const auto topo = node(2.0);
  test::Recorder rec;
  const SimInput in = input(sch, *topo, true);
  const SimResult r = simulate(in, sch, &rec);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.iteration_time, 240);
  EXPECT_EQ(r.devices[0].reload_wait, 50);
  for (int d = 1; d < kP; ++d) EXPECT_EQ(r.devices[d].reload_wait, 0) << d;
  const OpRecord* b1 = rec.find(0, Op::b(0, 1));
  ASSERT_NE(b1, nullptr);
  EXPECT_EQ(b1->start, 150);
  EXPECT_TRUE(b1->binding_reload);
  EXPECT_EQ(b1->binding_stage, 0);
  const OpRecord* b2 = rec.find(0, Op::b(0, 2));
  ASSERT_NE(b2, nullptr);
  EXPECT_EQ(b2->start, 200);
  EXPECT_EQ(b2->device_free, 170);
  EXPECT_EQ(peaks(r), (std::vector<std::int64_t>{400, 300, 200, 300}));
  const CopyRecord out2{0, 0, 2, true, 100, 30, 70, 120, 3};
  ASSERT_EQ(rec.copies.size(), 4u);
  EXPECT_EQ(rec.copies[1], out2);
  // The bubble breakdown counts the wait as communication: with every rank on one device
  // the copies take no time and the run is the plain 210 ns one, so each rank's idle time
  // grows by the 30 ns the iteration grew, all of it in `communication`.
  const BubbleBreakdown b = decompose_bubbles(in, sch, r);
  ASSERT_TRUE(b.ok) << b.error;
  for (int d = 0; d < kP; ++d) {
    EXPECT_EQ(b.devices[d].communication, 30) << d;
    EXPECT_EQ(b.devices[d].total(), r.pipeline_time - r.devices[d].busy) << d;
  }
}

// Fast copies change no op's time on 1F1B of any size, lower no peak but the partners', and
// from p = 4 on an evicting rank holds no more than K micro-batches. (At p = 3, K = 2:
// stage 0's third warm-up forward comes when no micro-batch can be away yet -- 0's backward
// is two places on -- so it keeps its 3 there and evicts in the steady state only.)
TEST(BPipe, FastCopiesKeepTheTimeAndCapTheEvictors) {
  for (int p = 2; p <= 8; ++p)
    for (int m : {p, p + 1, 2 * p + 3}) {
      SCOPED_TRACE(std::to_string(p) + " stages, " + std::to_string(m) + " micro-batches");
      const Schedule sch = test::generate("1f1b", p, m);
      const auto topo = test::one_node(p, 0.0, 100.0);
      SimInput in = test::uniform_input(sch, *topo, test::Costs{10, 20, 0, 100, 0});
      const SimResult plain = simulate(in, sch);
      in.bpipe = true;
      const SimResult r = simulate(in, sch);
      ASSERT_TRUE(r.ok) << r.error;
      EXPECT_EQ(r.iteration_time, plain.iteration_time);
      for (int s = 0; s <= p - 1 - s; ++s) {
        EXPECT_LE(r.devices[s].peak_activation_bytes, plain.devices[s].peak_activation_bytes);
        if (p >= 4 && p - s > bpipe_keep(p)) {
          EXPECT_EQ(r.devices[s].peak_activation_bytes, 100 * bpipe_keep(p)) << s;
        }
      }
    }
}

TEST(BPipe, RefusesSchedulesItDoesNotFit) {
  const auto topo = node(100.0);
  const Schedule gpipe = test::generate("gpipe", kP, 4);
  SimInput in = input(gpipe, *topo, true);
  EXPECT_TRUE(simulate(in, gpipe).ok);  // F and B ops, one stage per rank: it fits
  const Schedule zb = test::generate("zb-h1", kP, 8);
  SimResult r = simulate(input(zb, *topo, true), zb);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("bpipe needs a schedule of F and B ops"), std::string::npos) << r.error;
  const Schedule inter = test::generate("interleaved", kP, 8, 2);
  r = simulate(input(inter, *topo, true), inter);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("one stage per rank"), std::string::npos) << r.error;
  const Schedule f1b1 = test::generate("1f1b", kP, 4);
  in = input(f1b1, *topo, true);
  in.stages[0].offload_bytes = 10;
  r = simulate(in, f1b1);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("offload"), std::string::npos) << r.error;
}

}  // namespace
}  // namespace bmpipe
