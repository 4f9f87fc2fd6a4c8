#pragma once
/// \file
/// The planner's search space (internal to planner/; the public entry is planner.hpp).
///
/// A point of the search (Candidate) is a partition plus, on ranks with several stages,
/// which of their undominated recompute choices to take. Space holds everything fixed while
/// one schedule is planned and derives a candidate's recompute modes exactly
/// (stage_options.hpp). The moves that go from one candidate to its neighbours and the
/// filters that rule candidates out before simulating are tables, as the schedules are
/// (schedules/registry.cpp): a new move or filter is one row.

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "experiment/experiment.hpp"
#include "planner/planner.hpp"
#include "planner/stage_options.hpp"
#include "sim/compiled_schedule.hpp"

namespace bmpipe::planner {

constexpr double kInfeasible = 1e30;  // scores at or above this do not fit
/// The largest choice index a rank can have (rank_choices keeps at most kMaxRankChoices).
constexpr int kLastChoice = static_cast<int>(kMaxRankChoices) - 1;

/// A deterministic generator whose draws are the same on every standard library (the
/// std distributions are not), so a seed means the same plan everywhere.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull) {}
  std::uint64_t next() {  // splitmix64
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  int below(int n) { return n <= 1 ? 0 : static_cast<int>(next() % static_cast<std::uint64_t>(n)); }
  double unit() { return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0); }

 private:
  std::uint64_t state_;
};

/// A point of the search: layers per stage, and for ranks with several stages which of
/// their undominated recompute choices to take (0: the least total recompute time).
struct Candidate {
  std::vector<int> partition;
  std::vector<int> choice;  ///< per rank
  /// The cache key: equal for two candidates of one space exactly when they are equal.
  std::string key() const;
};

/// What deriving a candidate's recompute modes gives.
struct Derived {
  Plan plan;
  bool fits = true;             ///< every rank has a choice within its budget
  std::int64_t excess = 0;      ///< when not: the largest least-peak over budget
  int worst_rank = -1;          ///< the rank of that excess
  std::int64_t worst_peak = 0;  ///< its least total peak (static + activations)
  Time lower_bound = 0;         ///< no run of this plan can be faster
  /// The space's framework (Space's `expressible`) states the plan exactly.
  bool expressible = true;
};

/// Everything fixed while one schedule is planned.
class Space {
 public:
  Space(const Space&) = delete;
  Space& operator=(const Space&) = delete;
  /// With `expressible` set, derive() gives only plans that framework states, in its
  /// Exporter::recompute_stated form: first-N options (StageOptionTable's first_n) or one of
  /// its recompute rules for every stage, and Derived::expressible says whether the whole
  /// plan is stated exactly.
  Space(const Experiment& e, Schedule schedule, std::int64_t limit,
        const Exporter* expressible = nullptr);

  int stages() const { return stages_; }
  int ranks() const { return ranks_; }
  int layers() const { return layers_; }
  bool multi() const { return multi_; }
  const Schedule& schedule() const { return schedule_; }
  /// schedule(), compiled and validated once (finish_run reuses it).
  const CompiledSchedule& compiled() const { return compiled_; }
  const Experiment& experiment() const { return e_; }
  std::int64_t limit() const { return limit_; }
  const Exporter* expressible() const { return expressible_; }
  const StageOptionTable& table() const { return table_; }
  const std::vector<RankMemory>& memory() const { return memory_; }

  /// Derives the recompute modes of a candidate (see stage_options.hpp).
  Derived derive(const Candidate& c) const;

  /// The rules of recompute a framework's text states for a partition (decoder layers per
  /// stage): Exporter::recompute_rules.
  using RecomputeRules = std::vector<std::vector<Recompute>> (*)(const std::vector<int>&);
  /// Every plan of `partition` under one of `rules` (its decoder layers' modes) whose layers
  /// can all run their mode, in that order.
  std::vector<Plan> rule_plans(const std::vector<int>& partition, RecomputeRules rules) const;

  /// A rank's undominated recompute choices for its stages' layer ranges, kept: a move
  /// changes one or two boundaries, so most ranks meet the same ranges again and again.
  const std::vector<RankChoice>& choices_of(int r, const std::vector<int>& first,
                                            const std::vector<int>& partition,
                                            const std::vector<const StageOptions*>& options,
                                            std::int64_t fixed) const;

  /// How many undominated recompute choices each rank has on `partition` (at least 1).
  std::vector<int> choice_counts(const std::vector<int>& partition) const;

  /// Simulates a plan with capacity = the limit.
  SimResult run(const Plan& plan, SimInput& in) const;

 private:
  /// derive() under a framework that states one rule (RecomputeStated::one_rule): of its
  /// rules that fit (by the memory model), the one with the least lower bound (rank
  /// `choice[0]`'s index in that order when ranks hold several stages, so the search's
  /// recompute-choice move walks the rules).
  void derive_rule(const Candidate& c, Derived& d) const;
  const Experiment& e_;
  Schedule schedule_;
  CompiledSchedule compiled_;  ///< borrows schedule_: validated once for every candidate
  mutable std::mutex choices_mutex_;
  mutable std::unordered_map<std::string, std::unique_ptr<const std::vector<RankChoice>>> choices_;
  std::vector<RankMemory> memory_;
  StageOptionTable table_;
  std::int64_t limit_;
  const Exporter* expressible_ = nullptr;
  int stages_ = 0, ranks_ = 0, layers_ = 0;
  bool multi_ = false;
  bool bound_valid_ = true;
  std::vector<Time> busy_prefix_;
};

/// One move (an operator, in OR-tools' words) of the search: proposes a neighbour.
struct Move {
  const char* name;
  int weight;  ///< how often it is drawn, out of the table's total weight
  /// Whether the move exists on this space (it needs three stages, or a rank with several).
  bool (*applies)(const Space& space);
  /// Turns `n`, a copy of the candidate, into a neighbour with draws from `rng`; false when
  /// the drawn change is impossible (a stage would be left empty, nothing changed).
  bool (*apply)(const Space& space, Rng& rng, Candidate& n);
};

/// The moves, in drawing order. propose() draws a number below the total weight and takes
/// the row where the running sum of weights first exceeds it; a row that does not apply to
/// the space hands the draw to the next row that does (none: the attempt is lost).
std::span<const Move> moves();

/// A candidate and the index in moves() of the move that made it (-1: none did).
struct Proposal {
  Candidate candidate;
  int move = -1;
};

/// One move from `c` (see planner.hpp): up to 16 draws until one is possible. Always
/// returns a valid partition (`c` itself when no draw was possible).
Proposal propose(const Space& space, Rng& rng, const Candidate& c);

/// What a filter gives a candidate it turns away, instead of simulating it.
struct Rejection {
  double score;
  bool cached;  ///< the score belongs to the candidate (not to this batch's threshold)
};

/// A filter: rejects a derived candidate before it is simulated.
struct Filter {
  const char* name;
  /// `threshold`: the acceptance rule refuses anything slower.
  std::optional<Rejection> (*check)(const Derived& d, double threshold);
};

/// The filters, in the order they are tried (the first that rejects counts).
std::span<const Filter> filters();

/// The score of a run: its iteration ns when it fits; at or above kInfeasible otherwise
/// (kInfeasible plus the largest overshoot, so closer to fitting scores lower).
double score_of(const SimResult& r);

}  // namespace bmpipe::planner
