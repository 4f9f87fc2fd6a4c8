// Closed forms for GPipe and 1F1B with uniform stages and free communication
// (Huang et al. 2019; Narayanan et al. 2021): pipeline time (m+p-1)(F+B), bubble ratio
// (p-1)/(m+p-1), 1F1B rank r holds min(p-r, m) micro-batches of activations, GPipe holds m.
#include <gtest/gtest.h>

#include <algorithm>

#include "support/support.hpp"

namespace bmpipe {
namespace {

struct Case {
  int p, m;
};

class ClosedForm : public ::testing::TestWithParam<std::tuple<const char*, Case>> {};

TEST_P(ClosedForm, PipelineTimeBubbleAndInflight) {
  const auto [name, c] = GetParam();
  const Schedule sch = find_schedule(name)->generate(ScheduleParams{c.p, c.m, 1});
  const auto topo = test::one_node(c.p);
  const test::Costs u{3, 2, 5, 7, 0};  // F = 3, B = I + W = 7 (ns)
  const SimResult r = simulate(test::uniform_input(sch, *topo, u), sch);
  ASSERT_TRUE(r.ok) << r.error;
  const Time fb = u.f + u.i + u.w;
  EXPECT_EQ(r.pipeline_time, (c.m + c.p - 1) * fb);
  EXPECT_EQ(r.iteration_time, r.pipeline_time);
  EXPECT_NEAR(r.bubble_ratio, static_cast<double>(c.p - 1) / (c.m + c.p - 1), 1e-12);
  EXPECT_EQ(r.ops_executed, static_cast<std::uint64_t>(2 * c.p * c.m));
  for (const auto& d : r.devices) {
    const int expected = std::string(name) == "gpipe" ? c.m : std::min(c.p - d.rank, c.m);
    EXPECT_EQ(d.peak_inflight, expected) << "rank " << d.rank;
    EXPECT_EQ(d.peak_activation_bytes, expected * u.activation) << "rank " << d.rank;
    EXPECT_EQ(d.busy, c.m * fb);
  }
}

INSTANTIATE_TEST_SUITE_P(Schedules, ClosedForm,
                         ::testing::Combine(::testing::Values("gpipe", "1f1b"),
                                            ::testing::Values(Case{1, 1}, Case{1, 4}, Case{2, 2},
                                                              Case{4, 4}, Case{4, 8}, Case{4, 3},
                                                              Case{8, 32}, Case{5, 7})));

TEST(ClosedForm, OneFOneBOrderIsPipeDreamFlush) {
  // Rank r: p-r-1 warm-up forwards, then F and B alternate, then the remaining B.
  const Schedule s = make_1f1b(ScheduleParams{4, 6, 1});
  const OpList rank1 = {Op::f(1, 0), Op::f(1, 1), Op::f(1, 2), Op::b(1, 0),
                        Op::f(1, 3), Op::b(1, 1), Op::f(1, 4), Op::b(1, 2),
                        Op::f(1, 5), Op::b(1, 3), Op::b(1, 4), Op::b(1, 5)};
  EXPECT_EQ(s.ops[1], rank1);
}

TEST(ClosedForm, StaticMemoryAddsToActivationsAndCapacityDecidesFit) {
  const Schedule sch = make_1f1b(ScheduleParams{2, 4, 1});
  const auto topo = test::one_node(2);
  SimInput in = test::uniform_input(sch, *topo, test::Costs{1, 1, 1, 100, 0});
  in.static_bytes = {1000, 1000};
  in.capacity_bytes = {1150, 1150};  // rank 0 holds 2 x 100, rank 1 holds 1 x 100
  const SimResult r = simulate(in, sch);
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.devices[0].peak_bytes, 1200);
  EXPECT_FALSE(r.devices[0].fits);
  EXPECT_EQ(r.devices[1].peak_bytes, 1100);
  EXPECT_TRUE(r.devices[1].fits);
  EXPECT_FALSE(r.fits);  // a result, not an error
}

// The caching allocator's overhead (SimInput::allocator_overhead f) scales the tensors, not
// what lies outside the allocator: 1F1B p 2, 100 activation bytes a micro-batch, static 1000
// of which 200 outside. Rank 0 holds 2 micro-batches: tensors 800 + 200 = 1000 (allocated),
// reserved 1.25 x 1000 = 1250, peak 200 + 1250 = 1450. Rank 1 holds 1: 900, 1125, 1325.
// Capacity 1450 fits rank 0 exactly; at f = 0 the peaks are 1200 and 1100, as before.
TEST(ClosedForm, TheAllocatorsOverheadScalesTheTensorsPeak) {
  const Schedule sch = make_1f1b(ScheduleParams{2, 4, 1});
  const auto topo = test::one_node(2);
  SimInput in = test::uniform_input(sch, *topo, test::Costs{1, 1, 1, 100, 0});
  in.static_bytes = {1000, 1000};
  in.outside_allocator_bytes = {200, 200};
  in.capacity_bytes = {1450, 1449};
  const SimResult plain = simulate(in, sch);
  ASSERT_TRUE(plain.ok) << plain.error;
  EXPECT_EQ(plain.devices[0].peak_allocated_bytes, 1000);
  EXPECT_EQ(plain.devices[0].peak_reserved_bytes, 1000);
  EXPECT_EQ(plain.devices[0].peak_bytes, 1200);
  EXPECT_EQ(plain.devices[1].peak_bytes, 1100);
  in.allocator_overhead = 0.25;
  const SimResult r = simulate(in, sch);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.devices[0].peak_allocated_bytes, 1000);
  EXPECT_EQ(r.devices[0].peak_reserved_bytes, 1250);
  EXPECT_EQ(r.devices[0].peak_bytes, 1450);
  EXPECT_TRUE(r.devices[0].fits);
  EXPECT_EQ(r.devices[1].peak_allocated_bytes, 900);
  EXPECT_EQ(r.devices[1].peak_reserved_bytes, 1125);
  EXPECT_EQ(r.devices[1].peak_bytes, 1325);
  EXPECT_TRUE(r.devices[1].fits);
  in.capacity_bytes = {1449, 1449};  // a byte short on rank 0
  const SimResult tight = simulate(in, sch);
  EXPECT_FALSE(tight.devices[0].fits);
  EXPECT_FALSE(tight.fits);
  // Outside bytes larger than the static bytes they are part of: refused.
  in.outside_allocator_bytes = {2000, 0};
  EXPECT_FALSE(simulate(in, sch).ok);
}

TEST(ClosedForm, TailWorkExtendsIterationNotPipeline) {
  const Schedule sch = make_1f1b(ScheduleParams{2, 2, 1});
  const auto topo = test::one_node(2);
  SimInput in = test::uniform_input(sch, *topo, test::Costs{1, 1, 1, 0, 0});
  // Rank 1 finishes its last backward at 3 * (F+B) - B = 7; rank 0 at 9.
  in.tail_time = {5, 10};
  const SimResult r = simulate(in, sch);
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.pipeline_time, 9);
  EXPECT_EQ(r.devices[1].last_end, 7);
  EXPECT_EQ(r.iteration_time, std::max<Time>(9 + 5, 7 + 10));
}

}  // namespace
}  // namespace bmpipe
