// Ops that take 0 ns are legal: every built-in schedule completes when all or some of its
// ops cost nothing, with or without link latency, and so do the bubble breakdown's
// re-simulations. Expected times come from a brute-force longest path through the
// schedule's dependency graph, written here independently of the engine.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "sim/bubbles.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace zero_duration_test {

Time duration(const SimInput& in, const Op& op) {
  const StageCost& c = in.stages[op.stage];
  switch (op.kind) {
    case OpKind::F:
      return c.forward;
    case OpKind::B:
      return c.backward_input + c.backward_weight + c.recompute;
    case OpKind::I:
      return c.backward_input + c.recompute;
    case OpKind::W:
      return c.backward_weight;
    case OpKind::FB: {  // fb_overlap_factor is 1 here: the two halves back to back
      const StageCost& b = in.stages[op.stage2];
      return c.forward + b.backward_input + b.backward_weight + b.recompute;
    }
  }
  return 0;
}

// The pipeline time of `sch` when an op starts as soon as its rank's previous op has ended
// and its inputs are present, an input from another rank arriving `latency` after its
// producer ended. Sweeps the ranks until every op has a time; -1 if some never gets one.
Time longest_path(const Schedule& sch, const SimInput& in, Time latency) {
  std::map<std::tuple<char, int, int>, std::pair<Time, int>> done;  // (end, rank)
  std::vector<std::size_t> next(sch.num_ranks, 0);
  std::vector<Time> free(sch.num_ranks, 0);
  Time first = kNever, last = 0;
  for (bool progress = true; progress;) {
    progress = false;
    for (int r = 0; r < sch.num_ranks; ++r) {
      while (next[r] < sch.ops[r].size()) {
        const Op& op = sch.ops[r][next[r]];
        std::vector<std::tuple<char, int, int>> needs;
        auto forward_half = [&](int s, int mb) {
          if (s > 0) needs.emplace_back('F', s - 1, mb);
        };
        auto backward_half = [&](int s, int mb) {
          needs.emplace_back('F', s, mb);
          if (s + 1 < sch.num_stages) needs.emplace_back('B', s + 1, mb);
        };
        if (op.kind == OpKind::F || op.kind == OpKind::FB) forward_half(op.stage, op.microbatch);
        if (op.kind == OpKind::B || op.kind == OpKind::I) backward_half(op.stage, op.microbatch);
        if (op.kind == OpKind::FB) backward_half(op.stage2, op.microbatch2);
        if (op.kind == OpKind::W) needs.emplace_back('B', op.stage, op.microbatch);
        Time start = free[r];
        bool ready = true;
        for (const auto& n : needs) {
          const auto it = done.find(n);
          if (it == done.end()) {
            ready = false;
            break;
          }
          start = std::max(start, it->second.first + (it->second.second == r ? 0 : latency));
        }
        if (!ready) break;
        const Time end = start + duration(in, op);
        if (op.kind == OpKind::F || op.kind == OpKind::FB)
          done[{'F', op.stage, op.microbatch}] = {end, r};
        if (op.kind == OpKind::B || op.kind == OpKind::I)
          done[{'B', op.stage, op.microbatch}] = {end, r};
        if (op.kind == OpKind::FB) done[{'B', op.stage2, op.microbatch2}] = {end, r};
        first = std::min(first, start);
        last = std::max(last, end);
        free[r] = end;
        ++next[r];
        progress = true;
      }
    }
  }
  for (int r = 0; r < sch.num_ranks; ++r)
    if (next[r] < sch.ops[r].size()) return -1;
  return last - first;
}

enum class Costs { zero, mixed };

SimInput input_for(const Schedule& sch, const Topology& topo, Costs costs) {
  SimInput in = test::uniform_input(sch, topo, test::Costs{0, 0, 0, 1, 0});
  if (costs == Costs::mixed)
    for (int s = 0; s < sch.num_stages; ++s) {  // every kind is 0 ns on some stages, 1 on others
      in.stages[s].forward = s % 2;
      in.stages[s].backward_input = (s / 2) % 2;
      in.stages[s].backward_weight = 1 - s % 2;
    }
  return in;
}

std::vector<std::string> builtin_names() {
  std::vector<std::string> names;
  for (const ScheduleInfo& info : builtin_schedules()) names.emplace_back(info.name);
  return names;
}

std::string test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = info.param;
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

Schedule generate(const std::string& name, int p, int m) {
  const ScheduleInfo& info = *find_schedule(name);
  return info.generate(ScheduleParams{p, m, effective_vpp(info, 2), {}});
}

class ZeroDuration : public ::testing::TestWithParam<std::string> {};

TEST_P(ZeroDuration, EveryScheduleCompletesWithExactTimes) {
  for (int p = 1; p <= 4; ++p) {
    const Schedule sch = generate(GetParam(), p, 2 * p);
    const CompiledSchedule compiled(sch);
    ASSERT_TRUE(compiled.ok()) << compiled.error();
    for (Costs costs : {Costs::zero, Costs::mixed})
      for (double latency_us : {0.0, 1.0}) {
        SCOPED_TRACE("p=" + std::to_string(p) + (costs == Costs::zero ? " zero" : " mixed") +
                     " costs, latency " + std::to_string(latency_us) + " us");
        const auto topo = test::one_node(p, latency_us);
        const SimInput in = input_for(sch, *topo, costs);
        const Time expected = longest_path(sch, in, us_to_ns(latency_us));
        ASSERT_GE(expected, 0) << "the schedule itself deadlocks";
        if (costs == Costs::zero && latency_us == 0) {
          EXPECT_EQ(expected, 0);
        }

        const SimResult r = simulate(in, compiled);
        ASSERT_TRUE(r.ok) << r.error;
        EXPECT_EQ(r.ops_executed, sch.total_ops());
        EXPECT_EQ(r.pipeline_time, expected);

        // The ordered engine (an observer forces it) must agree and report every op once,
        // each starting when both its device and its inputs were ready.
        test::Recorder rec;
        const SimResult traced = simulate(in, compiled, &rec);
        ASSERT_TRUE(traced.ok) << traced.error;
        EXPECT_EQ(traced.pipeline_time, expected);
        EXPECT_EQ(rec.ops.size(), sch.total_ops());
        for (const OpRecord& op : rec.ops)
          EXPECT_EQ(op.start, std::max(op.device_free, op.inputs_ready)) << to_string(op.op);
      }
  }
}

TEST_P(ZeroDuration, BubbleBreakdownRunsAndSplitsLatencyIntoCommunication) {
  // With 0-ns ops a device is never busy, so its idle time is the pipeline time; every
  // counterfactual with free communication lasts 0 ns, so all of it is communication.
  for (int p = 1; p <= 4; ++p) {
    const Schedule sch = generate(GetParam(), p, 2 * p);
    const CompiledSchedule compiled(sch);
    for (double latency_us : {0.0, 1.0}) {
      SCOPED_TRACE("p=" + std::to_string(p) + ", latency " + std::to_string(latency_us) + " us");
      const auto topo = test::one_node(p, latency_us);
      const SimInput in = input_for(sch, *topo, Costs::zero);
      const SimResult measured = simulate(in, compiled);
      ASSERT_TRUE(measured.ok) << measured.error;
      const BubbleBreakdown b = decompose_bubbles(in, compiled, measured);
      ASSERT_TRUE(b.ok) << b.error;
      ASSERT_EQ(b.devices.size(), static_cast<std::size_t>(p));
      for (const BubbleParts& d : b.devices) {
        EXPECT_EQ(d.ideal, 0);
        EXPECT_EQ(d.imbalance, 0);
        EXPECT_EQ(d.recompute, 0);
        EXPECT_EQ(d.communication, measured.pipeline_time);
      }
      if (latency_us > 0 && p > 1) {
        EXPECT_GT(measured.pipeline_time, 0);
      }
      const BubbleBreakdown again = decompose_bubbles(in, sch, measured);
      ASSERT_TRUE(again.ok) << again.error;
      EXPECT_EQ(again.total.communication, b.total.communication);

      const SimInput mixed = input_for(sch, *topo, Costs::mixed);
      const SimResult m = simulate(mixed, compiled);
      ASSERT_TRUE(m.ok) << m.error;
      const BubbleBreakdown bm = decompose_bubbles(mixed, compiled, m);
      ASSERT_TRUE(bm.ok) << bm.error;
      for (std::size_t r = 0; r < bm.devices.size(); ++r)
        EXPECT_EQ(bm.devices[r].total(), m.pipeline_time - m.devices[r].busy);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Builtins, ZeroDuration, ::testing::ValuesIn(builtin_names()), test_name);

TEST(ZeroDuration, SameInstantArrivalsWakeAnIdleRank) {
  // The hostile input that used to "deadlock": F = B = 0 and no latency, so everything
  // happens at t = 0. Device 1 had already taken a wake-up for t = 0 when F2@s0's output
  // landed at t = 0, the duplicate check dropped the new one, and the run ended with
  // device 1 blocked at F2@s1 "waiting for" nothing.
  const Schedule sch = make_1f1b(ScheduleParams{2, 4, 1, {}});
  const auto topo = test::one_node(2);
  const SimInput in = test::uniform_input(sch, *topo, test::Costs{0, 0, 0, 1, 0});
  test::Recorder rec;
  const SimResult r = simulate(in, sch, &rec);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.pipeline_time, 0);
  EXPECT_EQ(rec.ops.size(), 16u);
  EXPECT_EQ(r.devices[0].peak_inflight, 2);  // 1F1B: rank 0 holds min(p - r, m) = 2
  EXPECT_EQ(r.devices[1].peak_inflight, 1);
}

}  // namespace zero_duration_test
}  // namespace bmpipe
