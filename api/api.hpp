#pragma once
/// \file
/// What the commands do, as functions that return values: the `bmpipe` executable prints
/// them, the Python module (python/) hands them back as dicts. Every function follows the
/// one path of experiment/experiment.hpp, parse -> prepare -> run -> summarize, and its
/// `summary` member is exactly what the command prints with --json.
///
/// Nothing here parses a command line or writes to stdout/stderr, and nothing links
/// Boost.Program_options: that stays in the executable. Errors are exceptions:
///   ConfigError        bad input from the config (file, line, key), or an override
///                      that makes it impossible (key "--pp", line 0);
///   ScheduleFileError  a malformed schedule file (simulate's schedule_file);
///   RequestError       an argument of the request itself that makes no sense;
///   NoPlanFits         run_plan found no plan within the memory limit.
/// A simulation that deadlocks is a result (SimResult::ok false), not an exception.

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "api/errors.hpp"
#include "experiment/config.hpp"
#include "experiment/experiment.hpp"
#include "experiment/output_work.hpp"
#include "planner/planner.hpp"
#include "schedules/schedule_file.hpp"  // ScheduleFileError: prepare_simulation throws it
#include "sim/bubbles.hpp"
#include "traces/chrome_trace.hpp"
#include "traces/timeline.hpp"

namespace bmpipe::api {

/// The built-in schedule `name`, or RequestError(key, unknown_schedule_message(name)).
const ScheduleInfo& require_schedule(std::string_view name, const std::string& key);

/// The built-in schedules as `bmpipe schedules` lists them: each name, its placement and
/// what it is (schedules/registry.hpp).
std::string schedule_help_text();

/// The built-in schedules' names, in the registry's order.
std::vector<std::string> schedule_name_list();

/// A config from `source`: the file it names if one exists there, else `source` itself
/// as YAML text (named "<string>" in messages; relative paths in it are relative to the
/// working directory). A single line ending in .yaml or .yml is always taken as a path,
/// so a mistyped file name reads "cannot open the file" rather than a YAML complaint.
/// `overrides` as load_config takes them (Overrides::set goes into the document first).
Config load_config_source(const std::string& source, const Overrides& overrides = {});

/// Whether load_config_source takes `source` as a path (else as YAML text).
bool config_source_is_path(const std::string& source);

// ---- simulate ---------------------------------------------------------------------------

struct SimulateRequest {
  Overrides overrides;  ///< schedule, pp, vpp, micro-batches over the config's
  /// Replay the op order of this schedule file (schedules/schedule_file.hpp); it decides
  /// pp, vpp and the micro-batches, so it excludes every override.
  std::optional<std::string> schedule_file;
  /// Called after each candidate zb-auto or zb-v simulates while the schedule is made.
  std::function<void(int)> on_candidate;
};

/// Everything a run needs, built before it runs, so that observers (trace, timeline) can
/// be set up on the very input and schedule the engine gets.
struct PreparedSimulation {
  std::shared_ptr<const Experiment> experiment;  ///< owns the topology `input` points at
  Schedule schedule;
  Plan plan;
  SimInput input;
};

/// What the outputs of `bmpipe simulate` keep per op while they are made, for the work
/// limit (experiment/output_work.hpp): one timeline for --svg and --memory-svg together
/// (named by the options given), then --trace.
std::vector<OutputWork> simulation_outputs_work(bool trace, bool svg, bool memory_svg);

/// check_output_work of simulation_outputs_work on `config`: before the run allocates,
/// a ConfigError when the outputs would take the run past its work limit.
void check_simulation_outputs(const Config& config, bool trace, bool svg, bool memory_svg);

/// The labels a trace of `run` carries: each stage's layer range, recompute modes and
/// their counts (traces/chrome_trace.hpp).
TraceLabels trace_labels(const PreparedSimulation& run);

/// What one run produced. `bubbles` is set when the run succeeded.
struct SimulationReport {
  SimResult result;
  RunInfo info;
  std::optional<BubbleBreakdown> bubbles;
  nlohmann::json summary;  ///< what `bmpipe simulate --json` prints
};

struct SimulateOutcome {
  PreparedSimulation prepared;
  SimulationReport report;
};

/// The request's own values, checked before any config is read: a schedule file excludes
/// every override. Throws RequestError. prepare_simulation calls it first.
void check_simulate_request(const SimulateRequest& request);

/// Applies the request to `config` and builds the run. Throws RequestError when a schedule
/// file is combined with an override, ScheduleFileError for a bad file, ConfigError.
PreparedSimulation prepare_simulation(Config config, const SimulateRequest& request);

/// Runs `run` once, telling `observer` (may be null) every event, and summarizes it.
/// `on_phase`, when given, hears what starts (for a progress line): "simulating N ops on P
/// pipeline ranks", then "bubble breakdown: 3 more simulations".
SimulationReport run_prepared(const PreparedSimulation& run, Observer* observer = nullptr,
                              const std::function<void(const std::string&)>& on_phase = {});

/// prepare_simulation + run_prepared.
SimulateOutcome run_simulate(const Config& config, const SimulateRequest& request,
                             Observer* observer = nullptr);

// ---- compare ----------------------------------------------------------------------------

struct CompareRequest {
  std::vector<std::string> schedules;  ///< built-in names, in the order asked for
  Overrides overrides;                 ///< pp, vpp, micro-batches (schedule is ignored)
  bool record_timelines = false;       ///< keep each run's Timeline (for an SVG)
  /// Hears what starts, schedule by schedule: "zb-v (2 of 3): making the schedule", then
  /// "zb-v (2 of 3): simulating N ops" (for a progress line).
  std::function<void(const std::string&)> on_phase;
};

struct CompareRow {
  RunInfo info;
  SimResult result;
  std::string refused;  ///< why the schedule cannot run on this config (empty: it ran)
};

struct CompareOutcome {
  /// Fastest first, failed and refused runs last; ties keep the order asked for.
  std::vector<CompareRow> rows;
  /// With record_timelines: one per schedule that ran, in the rows' order (fastest first).
  std::vector<Timeline> timelines;
  nlohmann::json summary;  ///< what `bmpipe compare --json` prints
};

/// The request's own values, checked before any config is read: a non-empty list of
/// built-in names. Throws RequestError naming --schedules (with "did you mean").
void check_compare_request(const CompareRequest& request);

/// Runs every schedule on the same prepared experiment. A schedule that refuses the
/// config becomes a row with `refused` set; the others still run. Throws RequestError for
/// an empty list or an unknown name, ConfigError for the config itself.
CompareOutcome run_compare(const Config& config, const CompareRequest& request);

// ---- cost -------------------------------------------------------------------------------

struct CostOutcome {
  std::shared_ptr<const Experiment> experiment;  ///< experiment->analytic is set
  Schedule schedule;                             ///< the config's
  Plan plan;                                     ///< the config's, for that schedule
  std::vector<std::int64_t> stage_static_bytes;  ///< per stage
  /// Per stage, stage_static_bytes by what it holds: weights, gradients, optimizer state
  /// (static_parts over dp x cp for the dense parameters and edp for the routed experts'),
  /// and the rest (FP8 weight copies; the parts' rounding).
  struct StaticBreakdown {
    std::int64_t weights = 0, grads = 0, optimizer = 0, other = 0;
  };
  std::vector<StaticBreakdown> stage_static_parts;
  std::vector<double> tail_ms;  ///< per rank: dp reduction + optimizer
  nlohmann::json summary;       ///< what `bmpipe cost --json [--ops]` prints
};

/// The analytic cost model's per-layer table of the config's plan (sub-ops too with
/// `with_ops`). Throws ConfigError for a model given as measured layers.
CostOutcome run_cost(const Config& config, bool with_ops);

// ---- plan -------------------------------------------------------------------------------

struct PlanRequest {
  /// schedule: a built-in name or "auto" (plan for auto_schedules and rank them); none:
  /// training.schedule. pp, vpp, micro-batches as for simulate.
  Overrides overrides;
  std::optional<double> memory_limit_GiB;  ///< none: the device's capacity
  double margin_GiB = 0.0;                 ///< kept free below the limit
  int threads = 0;                         ///< 0: every core
  std::uint64_t seed = 1;
  std::int64_t max_evals = 20'000;
  std::optional<double> time_limit_s;
  std::optional<std::string> baseline;  ///< show this baseline's plan instead
  /// "megatron" or "mindformers": plan only what that framework's flags or keys state
  /// exactly, on the schedules it runs (PlannerOptions::expressible); none: every plan.
  std::optional<std::string> expressible;
  /// A Megatron-LM --pipeline-model-parallel-layout for the megatron-layout baseline; none:
  /// the config's training.megatron_layout (set by `bmpipe import megatron` from a script
  /// that had one), else that baseline is skipped.
  std::optional<std::string> baseline_layout;
  /// "auto": plan once for each activation-offload choice the model has (offload_choices)
  /// at each prefetch lead (offload_leads) and keep the fastest fitting, so that recompute,
  /// offload and the lead are chosen together; none: the config's training.offload_modules
  /// and training.offload_lead only.
  std::optional<std::string> offload;
  /// Called from the calling thread during each schedule's search, with the schedule's
  /// label ("interleaved v2").
  std::function<void(const std::string& label, const PlannerProgress&)> progress;
};

struct PlanResults {
  std::shared_ptr<const Experiment> experiment;
  /// One per schedule planned: fastest fitting first, then the rest in the order tried.
  /// Each carries its baselines' runs (PlanOutcome::baselines; megatron_reference() and
  /// find_baseline() in planner.hpp), so an export can fall back to the best plan the
  /// framework states by rule in the same run.
  std::vector<PlanOutcome> outcomes;
  /// The plan shown: outcomes.front().best, or the baseline asked for. Points into
  /// `outcomes` (so a PlanResults is not copied).
  const PlanRun* shown = nullptr;
  /// With PlanRequest::offload: the training.offload_modules of the plan kept ("none" when
  /// recompute alone won); empty otherwise.
  std::string offload_modules;
  /// With PlanRequest::offload: the training.offload_lead of the plan kept (none when
  /// recompute alone won: no lead matters then).
  std::optional<int> offload_lead;
  nlohmann::json summary;  ///< what `bmpipe plan --json` prints
  PlanResults() = default;
  PlanResults(const PlanResults&) = delete;
  PlanResults& operator=(const PlanResults&) = delete;
  PlanResults(PlanResults&&) = default;
  PlanResults& operator=(PlanResults&&) = default;
};

/// The byte limit of a request on `config`: (limit - margin) GiB, rounded. Throws
/// RequestError for values out of range.
std::int64_t plan_memory_limit_bytes(const Config& config, const PlanRequest& request);

/// The job a plan's --out file states over its config: the request's overrides (--set,
/// --global-batch-size, ...) with the offload choice --offload auto kept, and the edits of
/// the plan shown (schedule, pp, vpp, micro-batches, partition, recompute).
struct PlannedJob {
  Overrides overrides;
  ConfigEdits edits;
};
PlannedJob planned_job(const PlanResults& planned, const PlanRequest& request);

/// The request's own values (limits, counts, baseline name, expressible framework), checked
/// before any config is read. Throws RequestError naming the option (with "did you mean",
/// and the new name of a renamed baseline). run_plan calls it first.
void check_plan_request(const PlanRequest& request);

/// The activation-offload choices `plan --offload auto` plans for, cheapest first: none;
/// the attention core's inputs and output (core_attn,attn_proj); those and the qkv input;
/// with experts, the experts' inputs, then everything; with MLA, its input norm too.
std::vector<std::string> offload_choices(const Config& config);

/// Throws RequestError("--offload") unless `config` can offload activations by module: an
/// analytic model on a device with a host link, and no whole-layer offload
/// (training.offload_layers), which Megatron-Core runs alone (what plan and search
/// --offload auto need).
void require_offload_auto(const Config& config);

/// The prefetch leads (training.offload_lead) `plan --offload auto` tries for each offload
/// choice but none: the config's own lead first (it wins ties), then 0, 1 and 2 not yet
/// listed. 0 keeps the fewest micro-batches' offloaded bytes on the device (the planner
/// counts 2 + lead of them, memory_model.hpp) and hides no copy back; 1 is Megatron-Core's
/// (a group reloaded one ahead of its backward; the only lead `export megatron` states);
/// 2 hides a copy back longer than one op, at one more micro-batch's bytes. Larger leads
/// are run when the config asks for one, not tried: each step holds one more micro-batch
/// for a copy longer than two ops, and at 1F1B's min(pp, m) in flight lead pp - 2 offloads
/// nothing from rank 0.
std::vector<int> offload_leads(const Config& config);

/// Plans `config` under the request. Throws RequestError, ConfigError, and NoPlanFits when
/// the best plan found does not fit.
PlanResults run_plan(const Config& config, const PlanRequest& request);

}  // namespace bmpipe::api
