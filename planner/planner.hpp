#pragma once
/// \file
/// bmpipe plan: how many layers each stage should hold and which layers should recompute,
/// so that the iteration is as fast as possible and no device runs out of memory.
///
/// Every candidate is scored by the simulator itself (assemble + simulate), so bubbles,
/// imbalance, transfers and memory peaks all count. The search:
/// - a plan is a partition (layers per stage, at least one each) plus a mode per layer;
/// - for a partition, the recompute modes are derived exactly per rank (stage_options.hpp:
///   the least recompute time that fits, or a small Pareto set of them when a rank holds
///   several stages, among which the search chooses);
/// - moves (operators) propose partitions: shift one layer across a stage boundary, shift
///   several, move a layer between two non-adjacent stages (the stages between shift by
///   one), pick another recompute choice on a rank with several stages;
/// - filters reject candidates before simulating: a rank whose weights and least
///   activations already exceed the limit, or a lower bound on the time (its busiest
///   rank's work) that the acceptance rule would refuse anyway; results are cached by plan;
/// - acceptance is simulated annealing on the relative time, from the best of the
///   baselines (so the plan is never slower than a baseline that fits), ending with a
///   descent over every single-layer shift of the best plan;
/// - candidates are proposed in batches from a seeded generator and simulated in parallel
///   (oneTBB); the batch is then read in its fixed order, so the result depends on the
///   seed and the evaluation budget, never on the thread count.
/// Cost-aware schedules (zb-auto, zb-v, v-half) are searched with the order made for the
/// starting plan; the final plan's order is made again from its own costs, as
/// `bmpipe simulate` would, and that run is what is reported.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "experiment/experiment.hpp"
#include "frameworks/common/export_layout.hpp"

namespace bmpipe {

struct PlannerProgress {
  std::int64_t evaluations = 0;
  std::optional<Time> best;  ///< best fitting iteration time so far
  double elapsed_s = 0;
  std::string phase;  ///< "baselines", "search", "polish"
};

struct PlannerOptions {
  std::string schedule = "1f1b";
  int vpp = 1;
  /// Per device, bytes a plan may use in all (static + activations).
  std::int64_t memory_limit_bytes = 0;
  int threads = 0;  ///< 0: every core
  std::uint64_t seed = 1;
  std::int64_t max_evals = 20'000;     ///< simulations of the search (baselines not counted)
  std::optional<double> time_limit_s;  ///< wall-clock bound; makes results machine-dependent
  /// One annealing run ends when this many evaluations brought it nothing better; the
  /// search restarts from the best plan, perturbed, and stops after 8 runs in a row that
  /// found nothing better (or when the budget or the time is spent).
  std::int64_t stall_evals = 1'500;
  /// The exhaustive baseline refuses above this many plans.
  std::int64_t exhaustive_limit = 200'000;
  /// Called from the calling thread after every batch.
  std::function<void(const PlannerProgress&)> progress;
};

/// One scored plan.
struct PlanRun {
  Plan plan;
  Schedule schedule;  ///< the order that ran (remade from the plan's costs if cost-aware)
  SimResult result;   ///< simulated with capacity = the memory limit
  bool fits() const { return result.ok && result.fits; }
};

struct BaselineRun {
  std::string name;
  std::optional<PlanRun> run;  ///< empty when it could not be built
  std::string error;           ///< why not (or why it does not fit)
};

struct SearchStats {
  std::int64_t evaluations = 0;  ///< simulations run by the search and the polish
  std::int64_t cache_hits = 0;
  std::int64_t filtered = 0;  ///< candidates rejected without simulating
  double wall_s = 0;
  int threads = 1;
  std::uint64_t seed = 1;
  std::string stopped_by;  ///< "max-evals", "time-limit", "converged"
};

struct PlanOutcome {
  std::string schedule;
  int vpp = 1;
  std::int64_t memory_limit_bytes = 0;
  PlanRun best;
  std::vector<BaselineRun> baselines;
  SearchStats stats;
  /// When no plan fits: the rank and stage that came closest, and its least peak.
  std::string infeasible;
};

/// Plans `e` under `options`. Throws ConfigError for what the config makes impossible
/// (more stages than layers, a schedule that refuses the sizes).
PlanOutcome plan_pipeline(const Experiment& e, const PlannerOptions& options);

/// The baseline plans on their own (exposed for tests): megatron-default, uniform-none,
/// uniform-min-recompute, adapipe-dp, sapp-ilp (the exact optimum of MindSpore's pipeline
/// balancer objective), exhaustive.
std::vector<BaselineRun> plan_baselines(const Experiment& e, const PlannerOptions& options);

/// The plan in decoder layers, for the exports. Analytic models fold the embedding and the
/// head into the first and last decoder layer; a measured model whose first layer group is
/// named like an embedding ("embed...") or whose last is named like a head ("...head",
/// "...loss", "lm_head") has those rows taken out of the decoder counts.
ExportLayout export_layout(const Experiment& e, const Plan& plan, const Schedule& schedule);

/// The layers export_layout counts as decoder layers, in model order.
std::vector<int> decoder_layers(const Experiment& e);

/// `plan` with its decoder layers' modes replaced by `modes` (one per decoder layer, as an
/// export gives them back); a mode a layer cannot run leaves that layer as it was.
Plan with_decoder_modes(const Experiment& e, Plan plan, const std::vector<Recompute>& modes);

/// The candidate schedules of `--schedule auto` for `e`: 1f1b; interleaved with v in
/// {2, 3, 4} where the layers and micro-batches allow; zb-h1; zb-v. As (name, vpp).
std::vector<std::pair<std::string, int>> auto_schedules(const Experiment& e);

}  // namespace bmpipe
