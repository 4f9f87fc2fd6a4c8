#pragma once
/// \file
/// Planning one config for several schedules and ranking them (`plan --schedule auto`):
/// each (schedule, vpp) is planned on its own by plan_pipeline, and the outcomes are
/// ranked by their best plan. The api (api/api.hpp, run_plan) and so the executable and
/// the Python module come through here.

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "planner/planner.hpp"

namespace bmpipe {

/// Called with a schedule's label ("interleaved v2") and the planner's progress.
using SchedulesProgress = std::function<void(const std::string& label, const PlannerProgress&)>;

/// Plans `e` for each (schedule, vpp) of `candidates` with `options` (its schedule and vpp
/// are set per candidate) and returns the outcomes ranked: fastest fitting first, then the
/// rest in the order tried. With `keep_refusals`, a schedule that refuses the config
/// becomes an outcome whose `infeasible` reads "refused: <why>" and the others still run;
/// without, its ConfigError propagates.
/// With several candidates, options.max_evals and options.time_limit_s bound all of them
/// together: each candidate, in order, gets what the ones before it left (search and
/// polish; baselines are not counted), so a candidate late in the list may get nothing
/// beyond its baselines. With --max-evals only, the outcome does not depend on the machine.
std::vector<PlanOutcome> plan_schedules(const Experiment& e,
                                        const std::vector<std::pair<std::string, int>>& candidates,
                                        PlannerOptions options, bool keep_refusals,
                                        const SchedulesProgress& progress = {});

/// What stopped a plan over several candidates: "time limit" if one ran out of time,
/// "evaluation limit" if one ran out of evaluations, else "done".
std::string schedules_stopped_by(const std::vector<PlanOutcome>& outcomes);

}  // namespace bmpipe
