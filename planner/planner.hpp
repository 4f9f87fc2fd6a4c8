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
#include <string_view>
#include <utility>
#include <vector>

#include "experiment/experiment.hpp"
#include "frameworks/exporters.hpp"
#include "planner/export_layout.hpp"  // export_layout, decoder_layers, with_decoder_modes

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
  /// When set, the search and the polish together spend at most this many evaluations
  /// (plan_schedules' share of a total budget); unset, the polish has a budget of its own.
  std::optional<std::int64_t> total_evals;
  /// One annealing run ends when this many evaluations brought it nothing better; the
  /// search restarts from the best plan, perturbed, and stops after 8 runs in a row that
  /// found nothing better (or when the budget or the time is spent).
  std::int64_t stall_evals = 1'500;
  /// The exhaustive baseline refuses above this many plans.
  std::int64_t exhaustive_limit = 200'000;
  /// `plan --expressible NAME`: the exporter row (frameworks/exporters.hpp) whose text must
  /// state a plan exactly; nullptr: every plan (the default). Plans it cannot state are not
  /// searched, started from or reported: the search keeps its Exporter::recompute_stated
  /// form (one of its recompute rules for every stage, or first-n per stage) and asks
  /// Exporter::states of each plan. The schedule must be one the framework runs
  /// (Exporter::runs), else plan_pipeline refuses it (ConfigError).
  const Exporter* expressible = nullptr;
  /// A Megatron-LM --pipeline-model-parallel-layout the megatron-layout baseline runs
  /// (empty: that baseline is skipped), and where it came from, for its messages
  /// ("--baseline-layout", or the config's training.megatron_layout).
  std::string baseline_layout;
  std::string baseline_layout_source;
  /// False: the baselines that can neither start the search nor be its answer
  /// (megatron-offload, which runs another experiment) are not run; they are reported as
  /// not run. The plan is the same (bmpipe search, where only the plan is
  /// kept: megatron-offload was an eighth of a DeepSeek-V3 search's time).
  bool report_baselines = true;
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
  /// False when PlannerOptions::expressible's framework cannot state the run's plan: it is
  /// still reported, but the search neither starts from it nor reports it as the plan.
  bool expressible = true;
  /// Non-empty: the run offloads these modules' activations (training.offload_modules, at
  /// training.offload_lead 1) where the experiment planned need not (megatron-offload).
  std::string offload_modules;
};

/// How one move of the search fared (its name is its row in the moves table).
struct MoveStats {
  std::string name;
  std::int64_t proposed = 0;  ///< candidates it made (restarts' perturbations included)
  std::int64_t accepted = 0;  ///< batch winners it made that the annealing took
  std::int64_t improved = 0;  ///< of those, the ones better than the best plan so far
};

/// How often one filter turned a candidate away without simulating it.
struct FilterStats {
  std::string name;
  std::int64_t rejected = 0;
};

struct SearchStats {
  std::int64_t evaluations = 0;  ///< simulations run by the search and the polish
  std::int64_t cache_hits = 0;
  std::int64_t filtered = 0;         ///< candidates rejected without simulating
  std::vector<MoveStats> moves;      ///< per move, in table order (not printed)
  std::vector<FilterStats> filters;  ///< per filter, in table order; the sum is `filtered`
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
  /// Every baseline of baseline_names(), in that order, with its run (plan, schedule as
  /// run, result): an export that cannot state `best` exactly can fall back to one of them,
  /// e.g. megatron_reference() or baseline(o, "megatron-best-rule"), so it is never slower
  /// than the best plan the framework can state by rule in the same run.
  std::vector<BaselineRun> baselines;
  SearchStats stats;
  /// When no plan fits: the rank and stage that came closest, and its least peak.
  std::string infeasible;
};

/// Plans `e` under `options`. Throws ConfigError for what the config makes impossible
/// (more stages than layers, a schedule that refuses the sizes).
PlanOutcome plan_pipeline(const Experiment& e, const PlannerOptions& options);

/// The baseline plans on their own (exposed for tests), one per baseline_names() entry.
std::vector<BaselineRun> plan_baselines(const Experiment& e, const PlannerOptions& options);

/// The baselines' names, in the order plan_pipeline and plan_baselines report them: the one
/// list of them (planner/baselines.cpp). megatron-no-recompute (Megatron-LM's default: even
/// split, no recompute), megatron-full-recompute (even split, every layer in full),
/// megatron-best-rule (even split, the fastest fitting recompute rule Megatron-LM's flags
/// state), megatron-first-last and megatron-embedding-loss (Megatron-LM's uneven
/// splits by --decoder-first/last-pipeline-num-layers and
/// --account-for-embedding/loss-in-pipeline-split, each under its fastest fitting rule),
/// megatron-layout (PlannerOptions::baseline_layout's split under its fastest fitting
/// rule; skipped without one), uniform-min-recompute, adapipe-dp, sapp-ilp (the exact optimum of
/// MindSpore's pipeline balancer objective), exhaustive.
const std::vector<std::string>& baseline_names();

/// The names baselines had before (megatron-default, uniform-none) and what they are now
/// called, for the message that refuses them.
const std::vector<std::pair<std::string, std::string>>& renamed_baselines();

/// The baseline called `name` in `o`, or nullptr.
const BaselineRun* find_baseline(const PlanOutcome& o, std::string_view name);

/// What a speedup is quoted against: the fastest fitting of the megatron-* baselines
/// (what a Megatron-LM user gets by its flags on Megatron's even split), or nullptr when
/// none fits. Not megatron-offload: the plan it is quoted for was searched under the
/// config's own offload, so like is compared with like; its row gives its own speedup.
const BaselineRun* megatron_reference(const PlanOutcome& o);

/// The fastest fitting baseline of `o` whose plan `x`'s framework states exactly
/// (expressible_by), or nullptr: what an export that cannot state `o.best` falls back to
/// when it is faster than the nearest plan the framework states, so an inexact export is
/// never slower than the best expressible baseline of the same run. A baseline that
/// offloads (megatron-offload) is not one: its plan is of another experiment.
const BaselineRun* best_expressible_baseline(const Experiment& e, const PlanOutcome& o,
                                             const Exporter* x);

/// `plan` with the modes of each stage's decoder layers (export_layout's) reordered so the
/// stage recomputes its first layers: full first, then selective, then none, as both
/// Megatron-LM (--recompute-method block) and MindFormers (recompute lists) recompute.
/// A stage where some layer cannot run its new mode is left as it was.
Plan first_n_order(const Experiment& e, const Plan& plan);

/// Whether `x`'s framework states `plan` (run under `schedule`) exactly:
/// x->states(export_layout(...)). Always true for nullptr (every plan).
bool expressible_by(const Experiment& e, const Plan& plan, const Schedule& schedule,
                    const Exporter* x);

/// The candidate schedules of `--schedule auto` for `e`: 1f1b; interleaved with v in
/// {2, 3, 4} where the layers and micro-batches allow; zb-h1; zb-v. As (name, vpp).
std::vector<std::pair<std::string, int>> auto_schedules(const Experiment& e);

}  // namespace bmpipe
