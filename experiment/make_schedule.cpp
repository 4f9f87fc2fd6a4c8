#include <algorithm>

#include "experiment/experiment.hpp"
#include "experiment/suggest.hpp"
#include "schedules/fb_pairing.hpp"

namespace bmpipe {

namespace {

/// What cost-aware generators (zb-auto, zb-v, v-half) plan with: the per-stage F / I / W (I
/// including recomputation), the slowest neighbour-to-neighbour transfer of one stage output, and
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

Schedule make_schedule(const Experiment& e, std::string_view name, int vpp, const Plan* plan,
                       const std::function<void(int)>& on_candidate) {
  const Config& c = e.config;
  const ScheduleInfo* info = &require_schedule(c, name, "training.schedule");
  // BPipe (training.bpipe) pairs 1F1B's stages; compare's other schedules refuse it.
  if (c.training.bpipe && info->name != "1f1b")
    c.fail("training.bpipe", "true balances 1F1B's stages, not " + std::string(info->name) +
                                 "'s (expected 1f1b, or bpipe: false)");
  try {
    ScheduleParams params{c.training.pp, c.training.microbatches, vpp, {}, {}};
    if (info->needs_costs || info->ranks_candidates) {
      // An op-less schedule of the right stages and ranks gives the real stage costs
      // before the real order exists.
      const Schedule shape = empty_schedule(std::string(info->name), info->placement, c.training.pp,
                                            effective_vpp(*info, vpp), 1);
      const Plan own = plan ? *plan : config_plan(e, shape.num_stages);
      const SimInput in = assemble(e, own, shape);
      if (info->needs_costs) params.costs = planning_costs(e, in, shape);
      // Candidates are ranked by the engine itself on the real stage costs: every
      // candidate has the same stages and ranks, so one input serves them all.
      if (info->ranks_candidates)
        params.evaluate = [in, on_candidate, count = 0](
                              const Schedule& candidate) mutable -> std::optional<std::int64_t> {
          const SimResult r = simulate(in, candidate);
          if (on_candidate) on_candidate(++count);
          if (!r.ok) return std::nullopt;
          return r.iteration_time;
        };
    }
    // training.moe_overlap (Megatron's --overlap-moe-expert-parallel-comm) pairs 1F1B's and
    // the interleaved schedule's steady-state backward and forward (schedules/fb_pairing.hpp);
    // DualPipe's pairs overlap anyway, and the other schedules have no such mode.
    if (c.training.moe_overlap && (info->name == "1f1b" || info->name == "interleaved"))
      return pair_steady_state(info->generate(params));
    return info->generate(params);
  } catch (const ScheduleError& ex) {
    c.fail("training.schedule", ex.what());
  }
}

Schedule make_schedule(const Experiment& e) {
  return make_schedule(e, e.config.training.schedule, e.config.training.vpp);
}

}  // namespace bmpipe
