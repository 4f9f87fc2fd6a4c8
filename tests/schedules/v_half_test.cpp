// V-Half (Qi et al., "Pipeline Parallelism with Controllable Memory", 2024) against the
// validator, the engine and 1F1B's closed forms. Expectations come from p, m and the costs:
// 1F1B (one stage = the device's whole model, i.e. both V chunks) holds min(p, m)
// micro-batches on rank 0 and idles (p-1)(F+B) per device, F and B of the whole device.
#include <gtest/gtest.h>

#include "schedules/validate.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace {

using test::Costs;

SimResult run(const Schedule& s, const Costs& c) {
  const auto topo = test::one_node(s.num_ranks);
  return simulate(test::uniform_input(s, *topo, c), s);
}

Schedule v_half(int p, int m, const Costs* planning = nullptr) {
  ScheduleParams params{p, m, 2, {}};
  if (planning) {
    params.costs.forward.assign(2 * p, planning->f);
    params.costs.backward_input.assign(2 * p, planning->i);
    params.costs.backward_weight.assign(2 * p, planning->w);
  }
  return make_v_half(params);
}

std::int64_t peak_bytes(const SimResult& r) {
  std::int64_t peak = 0;
  for (const auto& d : r.devices) peak = std::max(peak, d.peak_activation_bytes);
  return peak;
}

/// Pipeline time minus the busy time of the busiest device (every device is equally busy
/// here), i.e. the idle time that every device has at least.
Time bubble(const SimResult& r) {
  Time worst = 0;
  for (const auto& d : r.devices) worst = std::max(worst, r.pipeline_time - d.busy);
  return worst;
}

/// 1F1B's bubble on the same model: its stage is two V chunks, F = 2f, B = 2(i + w).
Time one_f_one_b_bubble(int p, const Costs& c) {
  return (p - 1) * (2 * c.f + 2 * (c.i + c.w));
}

std::string where(int p, int m, const Costs& c) {
  return "p=" + std::to_string(p) + " m=" + std::to_string(m) + " F/I/W=" + std::to_string(c.f) +
         "/" + std::to_string(c.i) + "/" + std::to_string(c.w);
}

TEST(VHalf, IsRegisteredRightAfterVMinWithVPlacement) {
  const auto all = builtin_schedules();
  for (std::size_t k = 0; k + 1 < all.size(); ++k)
    if (all[k].name == "v-min") {
      EXPECT_EQ(all[k + 1].name, "v-half");
    }
  const ScheduleInfo* info = find_schedule("v-half");
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->placement, Placement::kV);
  EXPECT_EQ(info->generate, &make_v_half);
}

TEST(VHalf, ValidAndDeadlockFreeForEveryShape) {
  for (const Costs c : {Costs{1, 1, 1, 1}, Costs{2, 2, 1, 1}, Costs{2, 3, 1, 1}, Costs{3, 1, 2, 1}})
    for (int p : {1, 2, 3, 4, 5, 6, 8})
      for (int m : {1, 2, 3, p, p + 1, 2 * p, 4 * p, 3 * p + 1})
        for (int vpp : {1, 2}) {
          SCOPED_TRACE(where(p, m, c) + " vpp=" + std::to_string(vpp));
          const Schedule s = test::generate("v-half", p, m, vpp);
          EXPECT_EQ(s.num_ranks, p);
          EXPECT_EQ(s.num_stages, 2 * p);
          EXPECT_EQ(s.num_microbatches, m);
          const auto issue = validate_schedule(s);
          EXPECT_FALSE(issue.has_value()) << (issue ? issue->message : "");
          const SimResult r = run(s, c);
          ASSERT_TRUE(r.ok) << r.error;
          EXPECT_EQ(r.ops_executed, s.total_ops());
          EXPECT_EQ(r.ops_executed, static_cast<std::uint64_t>(6) * p * m);
        }
}

TEST(VHalf, RefusalsAreClean) {
  EXPECT_THROW(test::generate("v-half", 0, 8, 2), ScheduleError);
  EXPECT_THROW(test::generate("v-half", 4, 0, 2), ScheduleError);
  EXPECT_THROW(test::generate("v-half", 4, 8, 3), ScheduleError);
}

TEST(VHalf, HoldsAboutHalfOfOneFOneB) {
  // Same model both ways: 1F1B stages hold 2 bytes, V-Half's half-size stages 1 byte;
  // 1F1B's rank 0 holds min(p, m) micro-batches = 2 min(p, m) bytes. V-Half's block keeps
  // about p + 1/2 half-stages alive per device (lifespans of its two chunks add up to
  // about 6p + 3 slots of a 6-slot period); counted at op boundaries that is at most
  // p + 2, i.e. (p + 2) / 2p of 1F1B: 0.625 at p = 8, 0.5625 at p = 16. Memory depends only
  // on the order, so it is the same for every cost mix.
  for (const Costs c : {Costs{1, 1, 1, 1}, Costs{2, 2, 1, 1}})
    for (int p : {2, 3, 4, 6, 8, 12, 16})
      for (int m : {1, 2, p, 2 * p, 4 * p, 3 * p + 1}) {
        SCOPED_TRACE(where(p, m, c));
        const SimResult v = run(test::generate("v-half", p, m, 2), c);
        ASSERT_TRUE(v.ok) << v.error;
        const std::int64_t one_f_one_b = 2 * std::min(p, m);
        const std::int64_t peak = peak_bytes(v);
        EXPECT_LE(peak, one_f_one_b);
        EXPECT_LE(peak, p + 2);
        if (p % 2 == 1) {
          EXPECT_LE(peak, p + 1);
        }
        if (p >= 8 && m >= p) {
          EXPECT_LE(static_cast<double>(peak), 0.625 * static_cast<double>(one_f_one_b));
        }
        // And it really is the V-Half point, not V-Min's third: the steady state needs
        // about p per device to keep full speed whatever the costs.
        if (m >= 2 * p) {
          EXPECT_GE(peak, p);
        }
      }
}

TEST(VHalf, HalfOfOneFOneBsBubbleAtEqualCosts) {
  // With F = I = W = c, 1F1B idles (p-1)(2c + 4c) = 6(p-1)c per device. The repeated
  // block leaves only warm-up and cool-down, at most half of that.
  for (Time c : {1, 2, 3})
    for (int p : {2, 3, 4, 6, 8, 12})
      for (int m : {2 * p, 4 * p, 3 * p + 1}) {
        const Costs costs{c, c, c, 1};
        SCOPED_TRACE(where(p, m, costs));
        const SimResult r = run(test::generate("v-half", p, m, 2), costs);
        ASSERT_TRUE(r.ok) << r.error;
        EXPECT_LE(2 * bubble(r), one_f_one_b_bubble(p, costs));
        // No bubble in the steady state: total time is the work plus a constant.
        const SimResult longer = run(test::generate("v-half", p, m + 2 * p, 2), costs);
        EXPECT_EQ(bubble(longer), bubble(r));
      }
}

TEST(VHalf, CheaperWeightGradientsKeepTheSteadyStateFull) {
  // F = I = 2W (the "F=2, I=2, W=1" mix) is inside the tight pattern's range
  // F <= I <= F + W, so the bubble is again a constant, here at most 0.7 of 1F1B's
  // (p-1)(2F + 2(I + W)) = 10(p-1) W. Also F = 3, I = 3, W = 2 and F = 2, I = 3, W = 1.
  struct CostCase {
    Costs c;
    double ratio;
  };
  for (const CostCase k : {CostCase{Costs{2, 2, 1, 1}, 0.7}, CostCase{Costs{4, 4, 2, 1}, 0.7},
                           CostCase{Costs{3, 3, 2, 1}, 0.65}, CostCase{Costs{2, 3, 1, 1}, 0.85}})
    for (int p : {2, 3, 4, 6, 8})
      for (int m : {2 * p, 4 * p, 3 * p + 1}) {
        SCOPED_TRACE(where(p, m, k.c));
        const SimResult r = run(test::generate("v-half", p, m, 2), k.c);
        ASSERT_TRUE(r.ok) << r.error;
        EXPECT_LE(static_cast<double>(bubble(r)),
                  k.ratio * static_cast<double>(one_f_one_b_bubble(p, k.c)));
        const SimResult longer = run(test::generate("v-half", p, m + 2 * p, 2), k.c);
        EXPECT_EQ(bubble(longer), bubble(r));
      }
}

TEST(VHalf, GivenCostsOutsideTheTightRangeItPicksTheBalancedBlock) {
  // With F > I (here F = 2, I = W = 1) the tight block's steady state cannot keep up; when
  // the caller passes those costs the generator uses the balanced block, whose steady
  // state is full for |F - I| <= W: the bubble stays a constant, below 1F1B's 8(p-1), and
  // the memory bound is unchanged.
  for (const Costs c : {Costs{2, 1, 1, 1}, Costs{5, 4, 4, 1}, Costs{3, 2, 1, 1}})
    for (int p : {2, 3, 4, 6, 8})
      for (int m : {2 * p, 4 * p}) {
        SCOPED_TRACE(where(p, m, c));
        const Schedule s = v_half(p, m, &c);
        ASSERT_FALSE(validate_schedule(s).has_value());
        const SimResult r = run(s, c);
        ASSERT_TRUE(r.ok) << r.error;
        EXPECT_LT(bubble(r), one_f_one_b_bubble(p, c));
        const SimResult longer = run(v_half(p, m + 2 * p, &c), c);
        EXPECT_EQ(bubble(longer), bubble(r));
        EXPECT_LE(peak_bytes(r), p + 2);
      }
  // Costs inside the range give the same order as no costs at all.
  const Costs unit{1, 1, 1, 1};
  EXPECT_EQ(v_half(4, 9, &unit).ops, v_half(4, 9).ops);
}

}  // namespace
}  // namespace bmpipe
