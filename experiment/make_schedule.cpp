#include <algorithm>

#include "experiment/experiment.hpp"

namespace bmpipe {

namespace {

/// An op-less schedule with the stages and ranks `info` places for `pp` ranks: what
/// assemble needs to give the real stage costs before the real order exists.
Schedule shape_of(const ScheduleInfo& info, int pp, int vpp) {
  Schedule shape;
  shape.name = std::string(info.name);
  shape.num_ranks = pp;
  const int chunks = effective_vpp(info, vpp);
  shape.num_stages = pp * chunks;
  shape.num_microbatches = 1;
  shape.stage_rank.resize(shape.num_stages);
  for (int st = 0; st < shape.num_stages; ++st)
    shape.stage_rank[st] =
        chunks == 2 && info.chunks == 2 ? (st < pp ? st : 2 * pp - 1 - st) : st % pp;
  shape.ops.resize(pp);
  return shape;
}

/// What cost-aware generators plan with: the per-stage F / I / W (I including
/// recomputation), the slowest neighbour-to-neighbour transfer of one stage output, and
/// the memory limit.
ScheduleCosts planning_costs(const Experiment& e, const SimInput& in, const Schedule& shape) {
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
    const Route route = e.topology->route(in.rank_device[from], in.rank_device[to], bytes);
    costs.transfer = std::max(costs.transfer, route.latency + route.serialization(bytes));
  }
  costs.activation_limit = e.config.training.activation_limit_microbatches;
  return costs;
}

}  // namespace

Schedule make_schedule(const Experiment& e, std::string_view name, int vpp, const Plan* plan) {
  const Config& c = e.config;
  const ScheduleInfo* info = find_schedule(name);
  if (!info)
    c.fail("training.schedule",
           "unknown schedule '" + std::string(name) + "' (known: " + schedule_names() + ")");
  try {
    ScheduleParams params{c.training.pp, c.training.microbatches, vpp, {}, {}};
    const bool costed = info->generate == &make_zb_auto || info->generate == &make_zb_v ||
                        info->generate == &make_v_half;
    if (costed) {
      const Schedule shape = shape_of(*info, c.training.pp, vpp);
      const Plan own = plan ? *plan : config_plan(e, shape.num_stages);
      const SimInput in = assemble(e, own, shape);
      params.costs = planning_costs(e, in, shape);
      // Candidates are ranked by the engine itself on the real stage costs: every
      // candidate has the same stages and ranks, so one input serves them all.
      params.evaluate = [in](const Schedule& candidate) -> std::optional<std::int64_t> {
        const SimResult r = simulate(in, candidate);
        if (!r.ok) return std::nullopt;
        return r.iteration_time;
      };
    }
    return info->generate(params);
  } catch (const ScheduleError& ex) {
    c.fail("training.schedule", ex.what());
  }
}

Schedule make_schedule(const Experiment& e) {
  return make_schedule(e, e.config.training.schedule, e.config.training.vpp);
}

}  // namespace bmpipe
