#pragma once
/// \file
/// `bmpipe report`: one self-contained HTML page of a run (and optionally of a comparison,
/// a plan and a search), for a team to open from a file and discuss.
///
/// The page is two things: one JSON object (report_data) and the page around it
/// (report_html), which holds the HTML, CSS and JavaScript of report/report.html, compiled
/// in at build time, so that nothing is looked up at run time and the page loads nothing
/// from the network. The JSON is versioned like every other document ("bmpipe": {version,
/// config}, and "report": kReportVersion for its own shape) and holds:
///   kind      "simulate", or the parts present joined by "+" ("simulate+compare+plan")
///   summary   exactly what `bmpipe simulate --json` prints for the same arguments
///   summary_text  exactly the table `bmpipe simulate` prints (the page shows its cells,
///             so numbers read as the table prints them)
///   timeline  the run, compactly (timeline_data below)
///   compare   with a comparison: what `bmpipe compare --json` prints, rows ranked as
///             compare ranks them (fastest first)
///   plan      with a plan: what `bmpipe plan --json` prints
///   plan_exports  with a plan: {format: text} for megatron and mindformers, what
///             `plan --format FORMAT` prints (or "# cannot export: why")
///   search    with a search: what `bmpipe search --json` prints

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "api/api.hpp"
#include "api/search.hpp"
#include "sim/simulate.hpp"
#include "traces/timeline.hpp"

namespace bmpipe::api {

/// Bytes the report keeps per op of op_bound on top of the simulation's own: the recorded
/// timeline and transfers, their columns, the JSON and the page's text. Measured with
/// /usr/bin/time on tiny.yaml at 1.5 and 3 million ops: 205 (1F1B), 213 (ZB-H1), 244
/// (ZB-V). report_data counts it against the work limit before it runs
/// (experiment/output_work.hpp).
inline constexpr int kReportBytesPerOp = 260;

/// The shape of the report's JSON; raised when a member changes meaning or is removed.
inline constexpr int kReportVersion = 1;

/// What a report's plan will take, said before it starts: every baseline plan and every
/// candidate is one simulation of the run, whose time the report's own run has just
/// measured. The planner runs its baselines (about one simulation each; some run several
/// splits, some are skipped), then its search, up to max_evals candidates over `threads`
/// threads, for each schedule it plans.
struct PlanEstimate {
  double simulation_s = 0;     ///< one simulation of the run (the report's own, measured)
  int baselines = 0;           ///< baseline_names().size()
  std::int64_t max_evals = 0;  ///< PlanRequest::max_evals
  int threads = 1;             ///< threads that simulate (below 1 counts as 1)
  int schedules = 1;           ///< schedules planned (--schedule auto: several)
  /// The baselines, one simulation each: schedules x baselines x simulation_s.
  double baselines_s() const;
  /// With the whole search budget: baselines_s() + schedules x max_evals x simulation_s /
  /// threads.
  double most_s() const;
  /// "planning runs one simulation of this run per candidate plan, about 2.9 s each (as
  /// long as the report's own run): about 29 s for the 10 baselines, then up to 20000
  /// candidates, at most 8.1 h in all on 2 threads (--max-evals and --time-limit-s bound
  /// it)".
  std::string text() const;
};

/// What a report holds: always the simulation; the other parts when asked for.
struct ReportRequest {
  SimulateRequest simulate;
  std::optional<CompareRequest> compare;  ///< its overrides are the simulation's
  std::optional<PlanRequest> plan;        ///< its overrides are the simulation's
  std::optional<SearchRequest> search;
  /// Hears what starts (for a progress line): "making the schedule", run_prepared's phases,
  /// "comparing: <compare's own phase>", "planning", "searching".
  std::function<void(const std::string&)> on_phase;
  /// With a plan: called once, after the report's own run and before the plan starts.
  std::function<void(const PlanEstimate&)> on_plan_estimate;
};

/// Per-stage labels of the run shown on the timeline's hover card.
struct StageLabels {
  std::vector<std::string> layers;     ///< "layers 0-3"; empty: unknown
  std::vector<std::string> recompute;  ///< "none", "selective", "full", "mixed"; empty: unknown
};

/// A column of integers as its shortest JSON form: a plain array; {"r": [value, count,
/// ...]} (runs); {"dr": [...]} (runs of the differences from the previous value, the first
/// from 0); or {"t": [distinct values], "i": indices, plain or {"r": ...}}. The page's
/// JavaScript reads all four; unpack_column is the inverse, for tests.
nlohmann::json pack_column(const std::vector<std::int64_t>& values);
std::vector<std::int64_t> unpack_column(const nlohmann::json& packed);

/// One run in a compact, columnar form (arrays per rank, not an object per op), in ns:
///   ranks, rank_device[rank], stage_rank[stage], stage_chunk[stage], stage_layers[stage],
///   stage_recompute[stage], pipeline_ns, iteration_ns, static_bytes[rank],
///   capacity_bytes[rank], tail_start_ns[rank], tail_ns[rank];
/// Every column below is packed (pack_column), except the op letters.
///   ops[rank] = {k: one letter per op (F, B, I, W, X for F&B), s: stage, m: micro-batch,
///               g: gap since the previous op's end (the first op's: since 0), d: duration,
///               x: for X ops, [index, backward stage, backward micro-batch] flattened}
///               in start order;
///   transfers = {s: source stage, t: destination stage, m: micro-batch, k: 0 activation
///               or 1 gradient, w: wait from the producer's end to the links (ns), d:
///               duration (ns)}, sorted by (s, t, k, m); a transfer's producer is F
///               (activation) or B/I/X (gradient) of (s, m) and it arrives w + d after that
///               op ends;
///   memory[rank] = {g: gap since the previous sample (ns), v: change of activation bytes},
///               the step curve from the static bytes at time 0.
nlohmann::json timeline_data(const Timeline& timeline, const std::vector<TransferRecord>& transfers,
                             const std::vector<int>& stage_rank, const StageLabels& labels);

/// Runs what `request` asks for on `config` and returns the report's JSON (described at the
/// top). Throws what run_simulate, run_compare, run_plan and run_search throw.
nlohmann::json report_data(const Config& config, const ReportRequest& request);

/// The page: report/report.html with `data` embedded as
/// <script type="application/json" id="bmpipe-data">. Every '<' of the JSON is written as
/// \u003c, so no string in it can end the script element.
std::string report_html(const nlohmann::json& data);

}  // namespace bmpipe::api
