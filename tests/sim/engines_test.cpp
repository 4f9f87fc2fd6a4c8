// simulate() has two engines (sim/simulate.hpp, "Two engines, one result"): the data-flow
// sweep when nothing can tell the event order, the ordered event queue when an observer
// listens or ranks share a link. Whichever runs, the result is the same; this checks it on
// every built-in schedule over topologies that exercise both, and on orders that deadlock,
// with and without gradient reductions at the end of the iteration.
#include <gtest/gtest.h>

#include <random>

#include "support/support.hpp"

namespace bmpipe {
namespace {

// Every field must agree but `events`, which says which engine ran.
SimResult but_events(SimResult r) {
  r.events = 0;
  return r;
}

struct Layout {
  const char* name;
  int nodes_of;     // 0: one node; 1: one device per node; 2: two nodes
  bool one_device;  // every rank on device 0
};

SimInput random_input(const Schedule& sch, const Topology& topo, std::mt19937& rng) {
  SimInput in = test::uniform_input(sch, topo, test::Costs{});
  for (StageCost& c : in.stages) {
    c.forward = 1 + rng() % 4000;
    c.backward_input = 1 + rng() % 4000;
    c.backward_weight = 1 + rng() % 4000;
    c.recompute = rng() % 3 == 0 ? rng() % 2000 : 0;
    c.activation_bytes = 1 + rng() % 1000;
    if (rng() % 2) c.weight_grad_retained_bytes = rng() % 1200;
    c.output_bytes = 1000 + rng() % 4000;  // at 1 byte/ns: transfers queue on busy links
  }
  in.static_bytes.assign(sch.num_ranks, 5000);
  in.capacity_bytes.assign(sch.num_ranks, 9000);
  for (int r = 0; r < sch.num_ranks; ++r) in.tail_time.push_back(rng() % 5000);
  // Gradient reductions in two of three runs, overlapped in half of those, a tied
  // all-reduce between the first and the last stage's ranks in half.
  if (rng() % 3 != 0) {
    // A stage in one piece, or (one in three) in two buckets, the first ready part-way.
    for (int s = 0; s < sch.num_stages; ++s) {
      const Time t = rng() % 4 == 0 ? 0 : rng() % 20000;
      if (rng() % 3 == 0)
        in.grad_buckets.push_back({GradBucket{t / 2, (rng() % 100) / 100.0, (rng() % 100) / 100.0},
                                   GradBucket{t - t / 2, 1.0, 1.0}});
      else
        in.grad_buckets.push_back({GradBucket{t, 1.0, 1.0}});
    }
    in.overlap_grad_reduce = rng() % 2 == 0;
    if (rng() % 2)
      in.tied_reduce =
          PairReduction{sch.stage_rank.front(), sch.stage_rank.back(), Time(rng() % 3000)};
  }
  return in;
}

class Engines : public ::testing::TestWithParam<std::string> {};

TEST_P(Engines, AgreeOnEveryResultField) {
  const ScheduleInfo& info = *find_schedule(GetParam());
  std::mt19937 rng(12345);
  for (int p : {2, 3, 4, 6})
    for (int m : {p, 2 * p, 3 * p + 1}) {
      Schedule sch;
      try {
        sch = info.generate(ScheduleParams{p, m, effective_vpp(info, 2), {}});
      } catch (const ScheduleError&) {
        continue;  // e.g. interleaved wants m a multiple of p
      }
      const CompiledSchedule compiled(sch);
      ASSERT_TRUE(compiled.ok()) << compiled.error();
      for (const Layout& layout : {Layout{"one node", 0, false}, Layout{"1 device/node", 1, false},
                                   Layout{"two nodes", 2, false}, Layout{"one device", 0, true}}) {
        SCOPED_TRACE("p=" + std::to_string(p) + " m=" + std::to_string(m) + " " + layout.name);
        const int nodes = layout.nodes_of == 1 ? p : layout.nodes_of == 2 ? 2 : 1;
        const Topology topo(
            ClusterSpec{nodes, (p + nodes - 1) / nodes, LinkSpec{1.0, 2}, LinkSpec{0.5, 7}});
        SimInput in = random_input(sch, topo, rng);
        if (layout.one_device) std::fill(in.rank_device.begin(), in.rank_device.end(), 0);
        if (rng() % 2) in.fb_overlap_factor = 0.75;

        NullObserver ignore;
        const SimResult plain = simulate(in, compiled);
        const SimResult ordered = simulate(in, compiled, &ignore);
        ASSERT_TRUE(ordered.ok) << ordered.error;
        EXPECT_EQ(but_events(plain), but_events(ordered));
        EXPECT_GT(ordered.events, 0u);
        // With one device per node, rank r >= 1 takes activations from r-1 and gradients from
        // r+1 on its single NIC: a shared link, so the ordered engine runs even unobserved.
        // With one node (or one device) every link has one sender and no event is needed.
        if (layout.nodes_of == 0) {
          EXPECT_EQ(plain.events, 0u);
        }
        if (layout.nodes_of == 1 && p >= 3 && info.placement == Placement::kOnePerRank) {
          EXPECT_GT(plain.events, 0u);
        }

        // Swapped neighbours in a list often deadlock: the reports must agree too.
        Schedule swapped = sch;
        for (int k = 0; k < 3; ++k) {
          auto& list = swapped.ops[rng() % p];
          const std::size_t i = rng() % (list.size() - 1);
          if (list[i + 1].kind == OpKind::W && list[i].kind == OpKind::I) continue;
          std::swap(list[i], list[i + 1]);
        }
        const CompiledSchedule cs(swapped);
        ASSERT_TRUE(cs.ok()) << cs.error();
        EXPECT_EQ(but_events(simulate(in, cs)), but_events(simulate(in, cs, &ignore)));
      }
    }
}

// The comparison is SimResult's operator==, so no field can be left out of it: the
// hand-written description it replaced in the fuzz targets skipped tail_start.
TEST(SimResultEquality, EveryFieldCounts) {
  const Schedule sch = test::generate("1f1b", 2, 2);
  const auto topo = test::one_node(2);
  SimInput in = test::uniform_input(sch, *topo, test::Costs{});
  in.grad_buckets = test::whole_stages({5, 5});
  const SimResult a = simulate(in, sch);
  ASSERT_TRUE(a.ok) << a.error;
  EXPECT_EQ(a, simulate(in, sch));
  SimResult b = a;
  b.devices[1].tail_start += 1;
  EXPECT_NE(a, b);
  b = a;
  b.events += 1;  // which engine ran: the engine checks set it equal first
  EXPECT_NE(a, b);
  EXPECT_EQ(but_events(a), but_events(b));
}

std::vector<std::string> builtin_names() {
  std::vector<std::string> names;
  for (const ScheduleInfo& info : builtin_schedules()) names.emplace_back(info.name);
  return names;
}

INSTANTIATE_TEST_SUITE_P(Builtins, Engines, ::testing::ValuesIn(builtin_names()),
                         [](const ::testing::TestParamInfo<std::string>& param) {
                           std::string name = param.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace
}  // namespace bmpipe
