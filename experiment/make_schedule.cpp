#include <algorithm>

#include "experiment/experiment.hpp"

namespace bmpipe {

namespace {

/// What cost-aware generators (zb-auto, zb-v) plan with: the config's per-stage F / I / W
/// (I including recomputation), the slowest neighbour-to-neighbour transfer of one stage
/// output, and the memory limit. `v_shape`: two stages per rank in a V, else one.
ScheduleCosts planning_costs(const Config& c, bool v_shape) {
  const int p = c.training.pp;
  // make_sim_input only needs the shape of the schedule (stages and their ranks), so an
  // empty schedule of that shape gives exactly the stage costs the real one will get.
  Schedule shape;
  shape.num_ranks = p;
  shape.num_stages = v_shape ? 2 * p : p;
  shape.num_microbatches = 1;
  shape.stage_rank.resize(shape.num_stages);
  for (int st = 0; st < shape.num_stages; ++st)
    shape.stage_rank[st] = st < p ? st : 2 * p - 1 - st;
  shape.ops.resize(p);
  const Topology topology(c.cluster);
  const SimInput in = make_sim_input(c, topology, shape);
  ScheduleCosts costs;
  for (const StageCost& st : in.stages) {
    costs.forward.push_back(st.forward);
    costs.backward_input.push_back(st.backward_input + st.recompute);
    costs.backward_weight.push_back(st.backward_weight);
  }
  for (int st = 0; st + 1 < shape.num_stages; ++st) {
    const std::int64_t bytes = in.stages[st].output_bytes;
    const int from = shape.stage_rank[st], to = shape.stage_rank[st + 1];
    if (bytes <= 0 || from == to) continue;
    const Route route = topology.route(in.rank_device[from], in.rank_device[to], bytes);
    costs.transfer = std::max(costs.transfer, route.latency + route.serialization(bytes));
  }
  costs.activation_limit = c.training.activation_limit_microbatches;
  return costs;
}

}  // namespace

Schedule make_schedule(const Config& c) {
  const ScheduleInfo* info = find_schedule(c.training.schedule);
  if (!info)
    c.fail("training.schedule",
           "unknown schedule '" + c.training.schedule + "' (known: " + schedule_names() + ")");
  try {
    ScheduleParams params{c.training.pp, c.training.microbatches, c.training.vpp, {}};
    if (info->generate == &make_zb_auto) params.costs = planning_costs(c, false);
    if (info->generate == &make_zb_v || info->generate == &make_v_half)
      params.costs = planning_costs(c, true);
    return info->generate(params);
  } catch (const ScheduleError& e) {
    c.fail("training.schedule", e.what());
  }
}

}  // namespace bmpipe
