#include "planner/schedules_plan.hpp"

#include <algorithm>

namespace bmpipe {

std::vector<PlanOutcome> plan_schedules(const Experiment& e,
                                        const std::vector<std::pair<std::string, int>>& candidates,
                                        PlannerOptions options, bool keep_refusals,
                                        const SchedulesProgress& progress) {
  std::vector<PlanOutcome> outcomes;
  for (const auto& [name, vpp] : candidates) {
    options.schedule = name;
    options.vpp = vpp;
    if (progress) {
      const std::string label = name + (vpp > 1 ? " v" + std::to_string(vpp) : "");
      options.progress = [&progress, label](const PlannerProgress& p) { progress(label, p); };
    }
    try {
      outcomes.push_back(plan_pipeline(e, options));
    } catch (const ConfigError& err) {
      if (!keep_refusals) throw;
      PlanOutcome refused;
      refused.schedule = name;
      refused.vpp = vpp;
      refused.infeasible = std::string("refused: ") + err.what();
      outcomes.push_back(std::move(refused));
    }
  }
  // Fastest fitting first; refused and non-fitting after, in the order tried.
  std::stable_sort(outcomes.begin(), outcomes.end(),
                   [](const PlanOutcome& a, const PlanOutcome& b) {
                     const bool fa = a.best.fits(), fb = b.best.fits();
                     if (fa != fb) return fa;
                     return fa && a.best.result.iteration_time < b.best.result.iteration_time;
                   });
  return outcomes;
}

}  // namespace bmpipe
