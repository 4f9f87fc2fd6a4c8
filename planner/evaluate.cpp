#include "planner/evaluate.hpp"

#include <oneapi/tbb/enumerable_thread_specific.h>
#include <oneapi/tbb/info.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/task_arena.h>

namespace bmpipe::planner {

struct Evaluator::Workers {
  explicit Workers(int threads)
      : arena(threads > 0 ? threads : tbb::this_task_arena::max_concurrency()) {}
  tbb::task_arena arena;
  tbb::enumerable_thread_specific<SimInput> inputs;
};

Evaluator::Evaluator(const Space& space, int threads)
    : space_(space), workers_(std::make_unique<Workers>(threads)) {}

Evaluator::~Evaluator() = default;

int Evaluator::threads() const {
  return workers_->arena.max_concurrency();
}

void Evaluator::simulate(const std::vector<Plan>& plans, const std::vector<char>& todo,
                         std::vector<double>& out) {
  workers_->arena.execute([&] {
    tbb::parallel_for(std::size_t{0}, plans.size(), [&](std::size_t i) {
      if (!todo[i]) return;
      SimInput& in = workers_->inputs.local();
      out[i] = score_of(space_.run(plans[i], in));
    });
  });
}

void Evaluator::derive(const std::vector<Candidate>& cands, const std::vector<char>& todo,
                       std::vector<Derived>& out) {
  workers_->arena.execute([&] {
    tbb::parallel_for(std::size_t{0}, cands.size(), [&](std::size_t i) {
      if (todo[i]) out[i] = space_.derive(cands[i]);
    });
  });
}

PlanRun finish_run(const Experiment& e, const PlannerOptions& o, const Schedule& searched,
                   const Plan& plan, const CompiledSchedule* compiled) {
  PlanRun run;
  run.plan = plan;
  const ScheduleInfo* info = find_schedule(searched.name);
  // A cost-aware order is made again from this plan's own costs, as `bmpipe simulate`
  // does with the plan written into the config.
  const bool costed = info && (info->needs_costs || info->ranks_candidates);
  run.schedule = costed ? make_schedule(e, searched.name, o.vpp, &plan) : searched;
  run.result = !costed && compiled != nullptr
                   ? bmpipe::run(e, plan, *compiled, {o.memory_limit_bytes, nullptr})
                   : bmpipe::run(e, plan, run.schedule, {o.memory_limit_bytes, nullptr});
  return run;
}

void announce(const PlannerOptions& o, const std::string& phase) {
  if (!o.progress) return;
  PlannerProgress p;
  p.phase = phase;
  o.progress(p);
}

}  // namespace bmpipe::planner
