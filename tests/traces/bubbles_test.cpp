// Where the bubble comes from, on cases whose parts are known in closed form. Expected
// values are worked out by hand in the comments, not taken from the code under test.
#include <gtest/gtest.h>

#include "api/summary.hpp"
#include "sim/bubbles.hpp"
#include "trace_checks.hpp"

namespace bmpipe {
namespace {

using test::kMs;

BubbleBreakdown breakdown(const SimInput& in, const Schedule& sch, SimResult* out = nullptr) {
  const SimResult r = simulate(in, sch);
  EXPECT_TRUE(r.ok) << r.error;
  if (out) *out = r;
  BubbleBreakdown b = decompose_bubbles(in, sch, r);
  EXPECT_TRUE(b.ok) << b.error;
  return b;
}

// Balanced stages, free communication: every idle ns is ideal. 1F1B, p = 4, m = 8,
// F = 1, B = 2 ms: each device idles (p - 1)(F + B) = 9 ms.
TEST(Bubbles, BalancedFreeCommunicationIsAllIdeal) {
  const Schedule sch = make_1f1b(ScheduleParams{4, 8, 1});
  const auto topo = test::node(4);
  const BubbleBreakdown b = breakdown(test::uniform(sch, *topo, 1 * kMs, 1 * kMs, 1 * kMs), sch);
  ASSERT_EQ(b.devices.size(), 4u);
  for (const auto& d : b.devices) {
    EXPECT_EQ(d.ideal, 9 * kMs);
    EXPECT_EQ(d.imbalance, 0);
    EXPECT_EQ(d.communication, 0);
    EXPECT_EQ(d.recompute, 0);
  }
  EXPECT_EQ(b.total.ideal, 36 * kMs);
  EXPECT_EQ(b.total.total(), 36 * kMs);
}

// One stage twice as slow: 1F1B, p = 4, m = 8, stages 0-2 F = 1, B = 2 ms, the last stage
// F = 2, B = 4 ms, free communication. The last stage has no warm-up and is the
// bottleneck: it starts at 3 F = 3 ms and runs its 8 (F + B) = 48 ms without a gap (each
// upstream stage turns a gradient into the next forward in B + F = 3 ms < 6 ms), then the
// last gradient walks back through 3 B = 6 ms: pipeline 57 ms. Busy: 24 ms on stages 0-2,
// 48 ms on the last. Idle: 33, 33, 33, 9 ms.
// Ideal run: mean stage F = 1.25, B = 2.5 ms; idle (p - 1)(F + B) = 11.25 ms per device.
// Imbalance = idle - 11.25: 21.75 ms on stages 0-2, -2.25 ms on the slow stage.
TEST(Bubbles, OneStageTwiceAsSlow) {
  const Schedule sch = make_1f1b(ScheduleParams{4, 8, 1});
  const auto topo = test::node(4);
  SimInput in = test::uniform(sch, *topo, 1 * kMs, 1 * kMs, 1 * kMs);
  in.stages[3].forward = 2 * kMs;
  in.stages[3].backward_input = 2 * kMs;
  in.stages[3].backward_weight = 2 * kMs;
  SimResult r;
  const BubbleBreakdown b = breakdown(in, sch, &r);
  EXPECT_EQ(r.pipeline_time, 57 * kMs);
  const Time idle[] = {33 * kMs, 33 * kMs, 33 * kMs, 9 * kMs};
  for (int rank = 0; rank < 4; ++rank) {
    const BubbleParts& d = b.devices[rank];
    EXPECT_EQ(d.ideal, 11'250'000) << "rank " << rank;
    EXPECT_EQ(d.imbalance, idle[rank] - 11'250'000) << "rank " << rank;
    EXPECT_EQ(d.communication, 0) << "rank " << rank;
    EXPECT_EQ(d.recompute, 0) << "rank " << rank;
    EXPECT_EQ(d.total(), idle[rank]) << "rank " << rank;
  }
  EXPECT_EQ(b.total.ideal, 45 * kMs);
  EXPECT_EQ(b.total.imbalance, 63 * kMs);  // total idle 108 ms - ideal 45 ms
}

// Links with a large latency L = 5 ms (no bytes, so no serialization or queueing):
// 1F1B on p = 2, F = 1, B = 2 ms. Each round trip of a micro-batch pays 2 L, and 1F1B's
// single warm-up forward cannot hide it; by hand (see the trace test for the first steps)
// the pipeline takes 3 (m + 1) + m L. With m = 8: 27 + 40 = 67 ms, busy 24 ms each, idle
// 43 ms = 3 ms ideal ((p - 1)(F + B)) + 40 ms communication.
TEST(Bubbles, LargeLinkLatency) {
  const int m = 8;
  const Schedule sch = make_1f1b(ScheduleParams{2, m, 1});
  const auto topo = test::node(2, /*latency_us=*/5000);
  SimResult r;
  const BubbleBreakdown b =
      breakdown(test::uniform(sch, *topo, 1 * kMs, 1 * kMs, 1 * kMs), sch, &r);
  EXPECT_EQ(r.pipeline_time, (3 * (m + 1) + m * 5) * kMs);
  for (const auto& d : b.devices) {
    EXPECT_EQ(d.ideal, 3 * kMs);
    EXPECT_EQ(d.imbalance, 0);
    EXPECT_EQ(d.communication, m * 5 * kMs);
    EXPECT_EQ(d.recompute, 0);
  }
  EXPECT_EQ(b.total.communication, 2 * m * 5 * kMs);
}

// Recompute R = 0.5 ms on every backward of balanced stages: the whole pipeline runs as if
// B were 2.5 ms, so idle per device is (p - 1)(F + B + R) = 10.5 ms, of which (p - 1) R =
// 1.5 ms is recompute.
TEST(Bubbles, RecomputeOnBalancedStages) {
  const Schedule sch = make_1f1b(ScheduleParams{4, 8, 1});
  const auto topo = test::node(4);
  SimInput in = test::uniform(sch, *topo, 1 * kMs, 1 * kMs, 1 * kMs);
  for (auto& s : in.stages) s.recompute = 500'000;
  const BubbleBreakdown b = breakdown(in, sch);
  for (const auto& d : b.devices) {
    EXPECT_EQ(d.ideal, 9 * kMs);
    EXPECT_EQ(d.imbalance, 0);
    EXPECT_EQ(d.communication, 0);
    EXPECT_EQ(d.recompute, 1'500'000);
  }
}

// Whatever the schedule and input, the parts add up to the measured idle time exactly.
TEST(Bubbles, PartsAddUpToMeasuredIdleOnEverySchedule) {
  for (const auto& info : builtin_schedules()) {
    Schedule sch;
    try {
      sch = test::schedule_named(std::string(info.name), 4, 8, effective_vpp(info, 2));
    } catch (const std::exception&) {
      continue;
    }
    const auto topo = test::node(4, 200, 2);
    SimInput in = test::uniform(sch, *topo, 1 * kMs, 700'000, 500'000, 1000, 400'000);
    for (int s = 0; s < sch.num_stages; ++s) {
      in.stages[s].forward += 150'000 * (s % 3);
      in.stages[s].recompute = 100'000 * (s % 2);
    }
    SimResult r;
    const BubbleBreakdown b = breakdown(in, sch, &r);
    ASSERT_TRUE(b.ok) << info.name << ": " << b.error;
    Time sum = 0;
    for (const auto& d : r.devices) {
      EXPECT_EQ(b.devices[d.rank].total(), r.pipeline_time - d.busy)
          << info.name << " rank " << d.rank;
      sum += r.pipeline_time - d.busy;
    }
    EXPECT_EQ(b.total.total(), sum) << info.name;
  }
}

TEST(Bubbles, SummaryCarriesTheBreakdown) {
  const Schedule sch = make_1f1b(ScheduleParams{4, 8, 1});
  const auto topo = test::node(4);
  SimResult r;
  const BubbleBreakdown b =
      breakdown(test::uniform(sch, *topo, 1 * kMs, 1 * kMs, 1 * kMs), sch, &r);
  RunInfo info;
  info.schedule = "1f1b";
  info.pp = 4;
  info.microbatches = 8;
  const nlohmann::json j = summary_json(info, r, &b);
  EXPECT_DOUBLE_EQ(j["bubble_breakdown_ms"]["ideal"].get<double>(), 36.0);
  EXPECT_DOUBLE_EQ(j["bubble_breakdown_ms"]["idle"].get<double>(), 36.0);
  EXPECT_DOUBLE_EQ(j["devices"][2]["bubble_ms"]["ideal"].get<double>(), 9.0);
  EXPECT_DOUBLE_EQ(j["devices"][2]["bubble_ms"]["communication"].get<double>(), 0.0);
  const std::string text = summary_text(info, r, &b);
  EXPECT_NE(text.find("where the bubble comes from"), std::string::npos);
  EXPECT_NE(text.find("total"), std::string::npos);
  EXPECT_EQ(summary_json(info, r).count("bubble_breakdown_ms"), 0u);  // only when asked
}

}  // namespace
}  // namespace bmpipe
