#pragma once
/// \file
/// `bmpipe export`: any config (an example, a `plan --out` or a `search --out` file) as
/// the settings of the framework that will run it, Megatron-LM's flags or MindFormers'
/// YAML keys, with no planning. `plan --format` and `search --format` call the same
/// function on the plan or layout they found, and the Python module's export_config too.
///
/// The time an export quotes is bmpipe's simulation of the exported text as the framework
/// runs it: Megatron-LM runs 1F1B (vpp 1) or interleaved 1F1B (vpp > 1), MindFormers its
/// pipeline_scheduler (1f1b, interleaved with pp_interleave_num, or gpipe), and both
/// recompute the FIRST n layers of a stage. So the plan the text states (the config's
/// partition, on interleaved placement, with first-n recompute per stage) is run under
/// that schedule, and `exact` says whether that equals the config's own simulated time.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "experiment/config.hpp"
#include "experiment/write_config.hpp"
#include "sim/simulate.hpp"

namespace bmpipe::api {

struct ExportRequest {
  std::string format;                      ///< "megatron" or "mindformers"
  std::optional<double> memory_limit_GiB;  ///< none: the device's capacity
};

/// The formats export_config writes, in the order --help lists them.
const std::vector<std::string>& export_formats();

/// export_formats as messages list them: "megatron, mindformers, ...".
std::string export_format_names();

/// The request's own values, checked before any config is read: a known format (did you
/// mean), a positive memory limit. Throws RequestError naming --format or
/// --memory-limit-GiB.
void check_export_request(const ExportRequest& request);

/// `plan --format`'s value: "table", or one of export_formats (the plan exported). Throws
/// RequestError("--format", "unknown format 'x' (did you mean ...) (table, megatron, ...)").
void check_plan_format(const std::string& format);

struct ExportOutcome {
  std::string format;
  /// The flags (one per line) or the YAML fragment, after `#` lines that say what the
  /// framework runs, the time, what to remove from the user's script and why the text is
  /// not exact. Every line is a flag, a key or a comment, so the whole text can be
  /// appended to a launch script (argparse keeps a flag's last value) or merged into a
  /// MindFormers YAML.
  std::string text;
  std::string schedule;  ///< the framework's schedule as bmpipe names it: 1f1b, interleaved, gpipe
  int vpp = 1;
  SimResult result;  ///< the text's plan under `schedule`
  /// result's time equals the config's own simulated time (its schedule, its plan).
  bool exact = false;
  /// The text states the config's partition and per-layer recompute as they are (the
  /// schedule may still differ).
  bool states_plan = false;
  std::string config_schedule;
  int config_vpp = 1;
  SimResult config_result;         ///< the config as it is (what `bmpipe simulate` gives)
  std::vector<std::string> notes;  ///< why not exact, in sentences (empty when exact)
  nlohmann::json summary;          ///< what `bmpipe export --json` prints (export_document)
};

/// Exports `config` (checked, with its overrides applied) as `request.format`. Throws
/// RequestError for the request, ConfigError for a config the framework cannot run (its
/// interleaved schedule refusing the micro-batches, a measured layer without the mode the
/// text states), naming --format.
ExportOutcome export_config(const Config& config, const ExportRequest& request);

struct PlanResults;
struct PlanRequest;
struct SearchSetup;
struct SearchReport;

/// `plan --format`: the shown plan (PlanResults::shown) as `--out` would write it, exported
/// by export_config. When that export is not exact, every baseline of the same run that fits
/// is exported too, and the fastest fitting export is given, with a note naming the
/// baseline: an inexact export is never slower than a baseline the framework can run
/// (issue 17). A baseline asked for (--baseline) is exported as it is.
ExportOutcome export_plan(const Config& config, const PlanResults& planned,
                          const ExportRequest& request);

/// `config` with the keys a plan or a layout search decides replaced by `edits`, checked
/// again: what `plan --out` / `search --out` write, in memory (the command line's other
/// overrides stay). Throws ConfigError.
Config config_with_plan(Config config, const ConfigEdits& edits);

/// What `plan --out` and `search --out` write: the YAML of `config_path` as the job the
/// command computed on, under `header`. First the command line's overrides go in as loading
/// put them in: `overrides.set` (--set, --global-batch-size, --tp, ...) written at their key
/// paths, and under a micro-batches override (which won over the file's global batch) the
/// global batch dropped; then the key paths `dropped` (what the job no longer has: a
/// searched layout has no training.megatron_layout) are removed; then config_with_edits
/// writes `edits` (and `device_memory_GiB`) for `out_path`. So that the file simulates to
/// the time the command printed. Throws ConfigError for a file that cannot be read.
std::string written_config(const std::string& config_path, const std::string& out_path,
                           const Overrides& overrides, const std::vector<std::string>& dropped,
                           const ConfigEdits& edits, const std::string& header,
                           std::optional<double> device_memory_GiB = std::nullopt);

/// What `plan --out FILE` writes: written_config of `config_path` as the job planned
/// (planned_job: the request's overrides and the shown plan's edits), under a header naming
/// the plan (the one found, or the --baseline's), its schedule and its simulated time in
/// ms, and --memory-limit-GiB as the device's memory when given. Throws ConfigError.
std::string planned_config(const std::string& config_path, const std::string& out_path,
                           const PlanResults& planned, const PlanRequest& request);

/// What `search --out FILE` writes: written_config of the searched config file
/// (setup.config.file) as the fastest layout of `report` states it (best_layout_edits),
/// with the request's overrides and the layout's offload keys, without
/// training.megatron_layout (it fixed another pp x vpp, and with the layout's partition
/// would be a second one), under a header naming the layout and its time. Throws
/// ConfigError(file, 0, "--out", "no layout fits: nothing to write") when none fits.
std::string best_layout_config(const SearchSetup& setup, const SearchReport& report,
                               const std::string& out_path);

/// `search --format`: the fastest layout of `report` as best_layout_config states it,
/// exported by export_config under the search's memory limit. Throws ConfigError(file, 0,
/// "--format", "no layout fits: nothing to export") when none fits, and what export_config
/// throws.
ExportOutcome export_best_layout(const SearchSetup& setup, const SearchReport& report,
                                 const std::string& format);

}  // namespace bmpipe::api
