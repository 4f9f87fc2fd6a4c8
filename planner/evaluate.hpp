#pragma once
/// \file
/// The planner's parallel evaluator (internal to planner/): derives and simulates batches
/// of candidates on a fixed oneTBB arena, and runs a final plan as `bmpipe simulate` would.

#include <memory>
#include <string>
#include <vector>

#include "planner/planner.hpp"
#include "planner/space.hpp"

namespace bmpipe::planner {

/// Evaluates candidates in parallel, in a fixed arena of `threads` workers; results land
/// at their candidate's index, so the order of completion never matters.
class Evaluator {
 public:
  Evaluator(const Space& space, int threads);
  ~Evaluator();
  Evaluator(const Evaluator&) = delete;
  Evaluator& operator=(const Evaluator&) = delete;

  int threads() const;

  /// Simulates `plans[i]` for every i with `todo[i]`, scores into `out[i]`.
  void simulate(const std::vector<Plan>& plans, const std::vector<char>& todo,
                std::vector<double>& out);

  /// Derives candidates in parallel (the recompute step can be the larger part).
  void derive(const std::vector<Candidate>& cands, const std::vector<char>& todo,
              std::vector<Derived>& out);

 private:
  struct Workers;  // the arena and each worker's SimInput (oneTBB stays in evaluate.cpp)
  const Space& space_;
  std::unique_ptr<Workers> workers_;
};

/// `plan` run for the report: a cost-aware order is made again from the plan's own costs,
/// and it is simulated with capacity = the memory limit. `compiled`, when given, is
/// `searched` compiled (Space::compiled()): an order that does not depend on costs is then
/// simulated without compiling and validating it again, which was half the time of a
/// plan's baselines on a long 1F1B run.
PlanRun finish_run(const Experiment& e, const PlannerOptions& o, const Schedule& searched,
                   const Plan& plan, const CompiledSchedule* compiled = nullptr);

/// Tells o.progress (if any) that `phase` starts before the first evaluation or after the
/// last: making a cost-aware schedule, a baseline, the final runs. Each of those makes the
/// schedule again (finish_run), seconds for zb-v at thousands of micro-batches.
void announce(const PlannerOptions& o, const std::string& phase);

}  // namespace bmpipe::planner
