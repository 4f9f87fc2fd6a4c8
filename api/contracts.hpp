#pragma once
/// \file
/// The documents bmpipe prints, in one place: what each command's --json writes, and the
/// search's CSV. The executable prints them, the Python module returns them, and the tests
/// that compare the two read them from here. Field names and units are the contract; the
/// run summary of one simulation (simulate --json, and each row of compare's) is
/// summary_json in api/summary.hpp, which these documents embed.

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/api.hpp"
#include "api/export.hpp"
#include "api/search.hpp"

namespace bmpipe::api {

/// bmpipe's version, "X.Y.Z": the VERSION of project() in the top-level CMakeLists.
const char* version();

/// {"version": version(), "config": config_file}: the "bmpipe" member of every JSON
/// document a command prints, so a saved document says what made it and from what.
nlohmann::json provenance(const std::string& config_file);

/// The "job" member of `simulate --json`, of each row of `compare --json` and of `cost
/// --json`: which job the numbers belong to, as `config` states it with the command line's
/// overrides, and as `run` ran it (its schedule, pp, vpp and micro-batches: a V schedule
/// holds 2 chunks per device, a schedule file decides all three). {schedule, model, device,
/// tp, cp, ep, etp, pp, vpp, dp (derived when not given), micro_batch_size, microbatches,
/// global_batch_size (micro-batches x micro_batch_size x dp), seq_length (null for measured
/// layers without one), precision {dtype, fp8, fp8_recipe}, moe_dispatcher, recompute
/// {default, per_stage, per_layer}: the mode of every layer not named otherwise, and whether
/// per-stage or per-layer modes were given}.
nlohmann::json job_json(const Config& config, const RunInfo& run);

/// `compare --json`: one summary per schedule in the rows' order (fastest first); a
/// schedule that refused the config is {schedule, ok: false, error}. The document is a list
/// (its contract), so each row carries the "bmpipe" provenance member and the "job"
/// (job_json of `config`, the config every schedule ran on): a row holds what `simulate
/// --json` prints for its schedule, without the bubble breakdown.
nlohmann::json compare_document(const std::vector<CompareRow>& rows, const Config& config);

/// `cost --json [--ops]`: the job (job_json, of the config's own schedule), the model,
/// device and sizes, the embedding, decoder and head
/// layers (times in ms, bytes, parameters, TFLOP, an MoE layer's all_to_all_ms {forward,
/// backward} at ep > 1; with `with_ops` each layer's sub-ops),
/// the whole model's parameters_total and parameters_active (what one token runs through,
/// both embedding matrices counted), static bytes per stage, reserved bytes and the tail
/// per rank in ms.
nlohmann::json cost_document(const Config& config, const CostOutcome& cost, bool with_ops);

/// `plan --json`: the shown plan, the baselines and search statistics of outcomes.front(),
/// `speedup` ({baseline, value}: the fastest fitting megatron-* baseline's time over the
/// shown plan's, or null), and with several outcomes the ranking of the schedules.
nlohmann::json plan_summary(const Experiment& e, const std::vector<PlanOutcome>& outcomes,
                            const PlanRun& shown);

/// `search --json`: {layouts, search}, the layouts ranked. A layout skipped by the bound
/// has filter "bound" and bound_ms; search.bound is true when the bound was used and
/// search.refine is --refine's K when given (both absent otherwise).
nlohmann::json search_document(const SearchReport& report);

/// `search --csv FILE`: a header and one row per layout, ranked.
std::string search_csv(const SearchReport& report);

/// `search`'s table for the config `file`: the `top` fastest fitting layouts, how many fit,
/// the rejections by filter with the first `top` rejected layouts, and the run's counts.
std::string search_table(const SearchReport& report, const std::string& file, int top);

/// One layout as in the search document (also the MPI wire format's body).
nlohmann::json layout_json(const LayoutResult& r);

/// `export --json` (and the `export` member of `plan --json --format` and `search --json
/// --format`): {format, text, schedule, vpp, iteration_time_ms, fits, exact, states_plan,
/// config_schedule, config_vpp, config_iteration_time_ms, notes}; a time is null when its
/// simulation failed.
nlohmann::json export_document(const ExportOutcome& outcome);

}  // namespace bmpipe::api
