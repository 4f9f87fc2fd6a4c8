#include "planner/schedules_plan.hpp"

#include <algorithm>
#include <chrono>

namespace bmpipe {

std::vector<PlanOutcome> plan_schedules(const Experiment& e,
                                        const std::vector<std::pair<std::string, int>>& candidates,
                                        PlannerOptions options, bool keep_refusals,
                                        const SchedulesProgress& progress) {
  std::vector<PlanOutcome> outcomes;
  const bool shared = candidates.size() > 1;
  const std::int64_t budget = options.max_evals;
  const std::optional<double> time_limit = options.time_limit_s;
  const auto started = std::chrono::steady_clock::now();
  std::int64_t spent = 0;
  for (const auto& [name, vpp] : candidates) {
    options.schedule = name;
    options.vpp = vpp;
    if (shared) {  // the budgets are the command's, not each schedule's
      options.max_evals = std::max<std::int64_t>(0, budget - spent);
      options.total_evals = options.max_evals;
      if (time_limit) {
        const double used =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        options.time_limit_s = std::max(1e-9, *time_limit - used);
      }
    }
    if (progress) {
      const std::string label = name + (vpp > 1 ? " v" + std::to_string(vpp) : "");
      options.progress = [&progress, label](const PlannerProgress& p) { progress(label, p); };
    }
    try {
      outcomes.push_back(plan_pipeline(e, options));
      spent += outcomes.back().stats.evaluations;
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

std::string schedules_stopped_by(const std::vector<PlanOutcome>& outcomes) {
  bool evals = false;
  for (const PlanOutcome& o : outcomes) {
    if (o.stats.stopped_by == "time-limit") return "time limit";
    evals = evals || o.stats.stopped_by == "max-evals";
  }
  return evals ? "evaluation limit" : "done";
}

}  // namespace bmpipe
