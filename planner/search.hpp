#pragma once
/// \file
/// The planner's search (internal to planner/): simulated annealing with restarts over the
/// space's candidates, then a polish by single-layer shifts. See planner.hpp for the rules.

#include <chrono>
#include <cstdint>
#include <limits>
#include <string>
#include <unordered_map>
#include <vector>

#include "planner/evaluate.hpp"
#include "planner/planner.hpp"
#include "planner/space.hpp"

namespace bmpipe::planner {

/// A polish budget without bound: the polish runs until no single-layer shift helps.
constexpr std::int64_t kNoBudget = std::numeric_limits<std::int64_t>::max();

/// The search state shared by the annealing and the polish.
class Search {
 public:
  using Clock = std::chrono::steady_clock;

  Search(const Space& space, const PlannerOptions& o);

  struct Best {
    Candidate candidate;
    double score = kInfeasible * 4;
    Plan plan;
  };

  /// Scores a batch in order, using the cache, the filters and parallel simulation.
  /// `threshold`: candidates whose lower bound exceeds it are filtered out. `max_evals`:
  /// simulations stop (candidates stay unscored) once stats().evaluations reaches it.
  std::vector<double> score(const std::vector<Candidate>& batch, double threshold,
                            std::int64_t max_evals);

  /// Runs the annealing from `start`, then again from perturbations of the best plan,
  /// until the budget is spent or `kRestartsWithoutGain` runs in a row found nothing better.
  void anneal(const Candidate& start);

  /// One annealing run from `current`, over a fresh temperature schedule. Returns when it
  /// stalls (sets nothing) or when the budget or the time is spent (sets stopped_by).
  void run_once(Candidate current, double current_score);

  /// Every single-layer shift (and choice change) of the best plan, until none helps or
  /// `budget` more simulations are spent. The polish has its own budget, apart from
  /// max_evals: the planner gives it kNoBudget, so a search that spent max_evals is still
  /// polished.
  void polish(std::int64_t budget);

  const Best& best() const { return best_; }
  SearchStats& stats() { return stats_; }
  const Derived& closest_infeasible() const { return closest_; }
  bool timed_out() const;
  double elapsed() const;

  void report(const char* phase);

 private:
  void note_infeasible(const Derived& d);

  /// One move from `c` (planner::propose), counted in the stats.
  Proposal propose(const Candidate& c);

  /// Whether a filter turns `d` away; if so, `score` is what it gives instead (kept in the
  /// cache under `key` when the filter says so) and the filter's count goes up.
  bool reject(const Derived& d, double threshold, const std::string& key, double& score);

  const Space& space_;
  const PlannerOptions o_;
  Evaluator evaluator_;
  Rng rng_;
  Clock::time_point start_;
  SearchStats stats_;
  Best best_;
  Derived closest_;
  std::unordered_map<std::string, double> cache_;
};

}  // namespace bmpipe::planner
