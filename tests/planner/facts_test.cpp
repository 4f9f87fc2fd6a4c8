// The two facts the planner stands on, checked against the engine on random cases with
// free communication:
// 1. a rank's peak activation memory depends only on its op order, and is the maximum over
//    its allocation moments of sums linear in its stages' bytes (planner/memory_model.hpp);
// 2. with the op orders fixed, the iteration time never decreases when a stage's backward
//    gets longer (start times are max-plus expressions of durations).
#include <gtest/gtest.h>

#include <random>

#include "planner/memory_model.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace {

struct Shape {
  const char* name;
  int p, m, v;
};

std::vector<Shape> shapes() {
  std::vector<Shape> out;
  for (const ScheduleInfo& info : builtin_schedules())
    for (int p : {1, 2, 3, 4})
      for (int m : {p, 2 * p, 2 * p + 1}) {
        const int v = effective_vpp(info, info.name == std::string_view("interleaved") ? 2 : 1);
        out.push_back({info.name.data(), p, m, v});
      }
  return out;
}

/// Random per-stage costs (ns and bytes), free communication.
SimInput random_input(const Schedule& s, const Topology& topo, std::mt19937_64& rng) {
  SimInput in = test::uniform_input(s, topo, test::Costs{1, 1, 1, 0, 0});
  std::uniform_int_distribution<Time> time(1, 50);
  std::uniform_int_distribution<std::int64_t> bytes(1, 1000);
  for (StageCost& c : in.stages) {
    c.forward = time(rng);
    c.backward_input = time(rng);
    c.backward_weight = time(rng);
    c.recompute = time(rng) / 3;
    c.activation_bytes = bytes(rng);
    c.weight_grad_retained_bytes = bytes(rng) % (c.activation_bytes + 1);
  }
  return in;
}

Schedule build(const Shape& sh) {
  ScheduleParams params{sh.p, sh.m, sh.v, {}, {}};
  return find_schedule(sh.name)->generate(params);
}

TEST(PlannerFacts, PeaksDependOnlyOnTheOrderAndMatchTheMemoryModel) {
  std::mt19937_64 rng(7);
  int checked = 0;
  for (const Shape& sh : shapes()) {
    Schedule s;
    try {
      s = build(sh);
    } catch (const ScheduleError&) {
      continue;  // the schedule refuses these sizes (e.g. dualpipe-v with m < 2p)
    }
    const auto topo = test::one_node(sh.p);
    const std::vector<RankMemory> model = memory_profile(s);
    for (int trial = 0; trial < 4; ++trial) {
      const SimInput in = random_input(s, *topo, rng);
      const SimResult r = simulate(in, s);
      ASSERT_TRUE(r.ok) << sh.name << " " << r.error;
      for (int rank = 0; rank < s.num_ranks; ++rank) {
        std::vector<std::int64_t> a, ret;
        for (int st : model[rank].stages) {
          a.push_back(in.stages[st].activation_bytes);
          ret.push_back(*in.stages[st].weight_grad_retained_bytes);
        }
        EXPECT_EQ(peak_activation(model[rank], a, ret), r.devices[rank].peak_activation_bytes)
            << sh.name << " p=" << sh.p << " m=" << sh.m << " rank " << rank;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 300);
}

TEST(PlannerFacts, OneFOneBHoldsPMinusRMicrobatches) {
  // Closed form: 1F1B's rank r holds min(p - r, m) micro-batches at its peak.
  for (int p : {2, 4, 8})
    for (int m : {1, p - 1, p, 3 * p}) {
      const Schedule s = test::generate("1f1b", p, m);
      const std::vector<RankMemory> model = memory_profile(s);
      for (int r = 0; r < p; ++r) {
        ASSERT_EQ(model[r].moments.size(), 1u);
        EXPECT_EQ(model[r].moments[0].full[0], std::min(p - r, m));
        EXPECT_EQ(model[r].moments[0].retained[0], 0);
      }
    }
}

TEST(PlannerFacts, LongerBackwardsNeverShortenTheIteration) {
  std::mt19937_64 rng(11);
  int checked = 0;
  for (const Shape& sh : shapes()) {
    Schedule s;
    try {
      s = build(sh);
    } catch (const ScheduleError&) {
      continue;
    }
    const auto topo = test::one_node(sh.p);
    for (int trial = 0; trial < 3; ++trial) {
      SimInput in = random_input(s, *topo, rng);
      const Time before = simulate(in, s).iteration_time;
      const int stage = static_cast<int>(rng() % s.num_stages);
      in.stages[stage].recompute += 1 + static_cast<Time>(rng() % 40);
      const SimResult after = simulate(in, s);
      ASSERT_TRUE(after.ok);
      EXPECT_GE(after.iteration_time, before) << sh.name << " p=" << sh.p << " stage " << stage;
      ++checked;
    }
  }
  EXPECT_GT(checked, 200);
}

}  // namespace
}  // namespace bmpipe
