#include "planner/planner.hpp"

#include <chrono>
#include <string>

#include "planner/baselines.hpp"
#include "planner/evaluate.hpp"
#include "planner/search.hpp"
#include "planner/space.hpp"

// The planner's rooms: space.hpp (candidates, their keys and moves, what a candidate
// derives to), evaluate.hpp (parallel evaluation), search.hpp (annealing, restarts,
// polish), baselines.hpp and export_layout.hpp. This file is the entry point.

namespace bmpipe {

using planner::Candidate;
using planner::Derived;
using planner::Search;
using planner::Space;

std::vector<std::pair<std::string, int>> auto_schedules(const Experiment& e) {
  return auto_candidates(e.pp(), e.config.training.microbatches, e.num_layers());
}

namespace {

Schedule searched_schedule(const Experiment& e, const PlannerOptions& o) {
  const ScheduleInfo& info = require_schedule(e.config, o.schedule, "training.schedule");
  // --expressible: the framework must run the schedule too, or its time is not the plan's.
  if (const Exporter* x = o.expressible; x && !x->runs(info.name))
    e.config.fail("training.schedule",
                  "--expressible " + std::string(x->name) + ": " + x->not_run(o.schedule));
  const int stages = e.pp() * effective_vpp(info, o.vpp);
  if (stages > e.num_layers())
    e.config.fail("training.pp", "pp x vpp = " + std::to_string(stages) +
                                     " stages, more than the model's " +
                                     std::to_string(e.num_layers()) + " layers");
  // Cost-aware orders are made for the uniform plan without recompute first.
  const Plan start{uniform_partition(e.num_layers(), stages),
                   std::vector<Recompute>(e.num_layers(), Recompute::none)};
  return make_schedule(e, o.schedule, o.vpp, &start);
}

/// The first-N form of `best` (first_n_order) when it runs at most as long and fits: among
/// equal-time plans, the one both frameworks' per-stage counts state. All stages at once,
/// else stage by stage (a stage whose layers differ may run slower reordered).
PlanRun prefer_first_n(const Experiment& e, const PlannerOptions& o, const Schedule& sch,
                       PlanRun best) {
  if (!best.fits()) return best;
  const Plan all = first_n_order(e, best.plan);
  if (all.recompute == best.plan.recompute) return best;
  auto no_slower = [&](const PlanRun& r) {
    return r.fits() && r.result.iteration_time <= best.result.iteration_time;
  };
  if (PlanRun r = planner::finish_run(e, o, sch, all); no_slower(r)) return r;
  for (std::size_t s = 0, first = 0; s < best.plan.partition.size();
       first += static_cast<std::size_t>(best.plan.partition[s]), ++s) {
    Plan one = best.plan;
    const auto from = static_cast<std::ptrdiff_t>(first);
    const auto to = from + best.plan.partition[s];
    std::copy(all.recompute.begin() + from, all.recompute.begin() + to,
              one.recompute.begin() + from);
    if (one.recompute == best.plan.recompute) continue;
    if (PlanRun r = planner::finish_run(e, o, sch, one); no_slower(r)) best = std::move(r);
  }
  return best;
}

/// Under a framework whose text states one recompute rule (RecomputeStated::one_rule): the
/// search picked one rule per partition by a bound; on the final partition every rule is
/// run, and the fastest that fits and is stated exactly is kept if it beats `best`.
PlanRun best_rule(const Space& space, const PlannerOptions& o, PlanRun best) {
  for (const Plan& p : space.rule_plans(best.plan.partition, o.expressible->recompute_rules)) {
    if (p.recompute == best.plan.recompute) continue;
    PlanRun r = planner::finish_run(space.experiment(), o, space.schedule(), p, &space.compiled());
    if (r.fits() && planner::score_of(r.result) < planner::score_of(best.result) &&
        expressible_by(space.experiment(), r.plan, r.schedule, o.expressible))
      best = std::move(r);
  }
  return best;
}

}  // namespace

std::vector<BaselineRun> plan_baselines(const Experiment& e, const PlannerOptions& o) {
  const Space space(e, searched_schedule(e, o), o.memory_limit_bytes, o.expressible);
  return planner::run_baselines(space, o);
}

PlanOutcome plan_pipeline(const Experiment& e, const PlannerOptions& o) {
  const auto started = Search::Clock::now();
  PlanOutcome out;
  out.schedule = o.schedule;
  out.memory_limit_bytes = o.memory_limit_bytes;
  // searched_schedule() rejects an unknown name first, so find_schedule() is not null here.
  planner::announce(o, "making the schedule");
  const Schedule sch = searched_schedule(e, o);
  out.vpp = effective_vpp(*find_schedule(o.schedule), o.vpp);
  const Space space(e, sch, o.memory_limit_bytes, o.expressible);
  out.baselines = planner::run_baselines(space, o);
  Search search(space, o);
  search.report("baselines");
  // Start from the fastest baseline that fits (else the one closest to fitting), not
  // counting exhaustive, so that the search stands on its own.
  const BaselineRun* start = nullptr;
  for (std::size_t k = 0; k < out.baselines.size(); ++k) {
    const BaselineRun& b = out.baselines[k];
    if (!b.run || !b.expressible || !planner::starts_search(k)) continue;
    if (!start || planner::score_of(b.run->result) < planner::score_of(start->run->result))
      start = &b;
  }
  Candidate first{
      start ? start->run->plan.partition : uniform_partition(e.num_layers(), space.stages()),
      std::vector<int>(space.ranks(), 0)};
  search.anneal(first);
  search.polish(o.total_evals
                    ? std::max<std::int64_t>(0, *o.total_evals - search.stats().evaluations)
                    : planner::kNoBudget);
  const auto& best = search.best();
  out.stats = search.stats();
  if (out.stats.stopped_by.empty()) out.stats.stopped_by = "converged";
  // The reported plan: the search's best, or a baseline that is faster as run.
  search.report("the final runs");
  out.best = planner::finish_run(
      e, o, sch,
      best.plan.partition.empty()
          ? Plan{first.partition, std::vector<Recompute>(e.num_layers(), Recompute::none)}
          : best.plan);
  if (o.expressible && o.expressible->recompute_stated == RecomputeStated::one_rule &&
      !best.plan.partition.empty())
    out.best = best_rule(space, o, std::move(out.best));
  // Not megatron-offload's: it runs another experiment (the config offloading).
  for (const BaselineRun& b : out.baselines)
    if (b.run && b.expressible && b.offload_modules.empty() &&
        planner::score_of(b.run->result) < planner::score_of(out.best.result))
      out.best = *b.run;
  // Among equal times, the plan that recomputes the first layers of each stage, as the
  // frameworks' flags and keys say it (under --expressible it already does).
  if (!o.expressible) out.best = prefer_first_n(e, o, sch, std::move(out.best));
  if (!out.best.fits()) {
    const Derived& c = search.closest_infeasible();
    if (c.worst_rank >= 0) {
      std::string stages;
      for (int s = 0; s < space.stages(); ++s)
        if (space.schedule().stage_rank[s] == c.worst_rank)
          stages += (stages.empty() ? "" : ", ") + std::to_string(s);
      out.infeasible = "rank " + std::to_string(c.worst_rank) + " (stage " + stages +
                       ") needs at least " + planner::gib(c.worst_peak) + " of " +
                       planner::gib(o.memory_limit_bytes) +
                       " even with every layer at its least-memory recompute mode";
    } else {
      out.infeasible = planner::fit_note(out.best);
    }
  }
  out.stats.wall_s = std::chrono::duration<double>(Search::Clock::now() - started).count();
  return out;
}

}  // namespace bmpipe
