#pragma once
/// \file
/// Every exporter, in one table, as importers.hpp is for the importers: `bmpipe export
/// --format`, `plan --format`, `search --format` and the Python module's export_config
/// (api/export.cpp) take the framework's name, words, schedules and text from here, and
/// `plan --expressible` asks a row whether the framework states a plan. A new exporter is
/// one more row; nothing above this names a framework to export.

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "experiment/config.hpp"
#include "experiment/framework_rules.hpp"
#include "frameworks/common/export_layout.hpp"  // ExportLayout, ExportJob

namespace bmpipe {

/// What a framework's text states of a layout, before it is written out.
struct ExportStatement {
  /// The plan the text describes: the layout itself, or the nearest one the text can state.
  ExportLayout expressed;
  /// Why the text cannot state the layout (a note for when the export is not exact), or none.
  std::optional<std::string> inexact;
  /// What the text cannot say exactly even when its time is the config's (empty if none).
  std::vector<std::string> caveats;
  /// The whole job in the framework's words, for bmpipe's schedule `schedule` (one the
  /// framework runs, as Exporter::runs_as names it).
  std::function<std::string(const ExportJob& job, std::string_view schedule)> write;
};

/// How a framework's text states the recompute of a plan, the form `plan --expressible`
/// searches in.
enum class RecomputeStated {
  one_rule,  ///< one of Exporter::recompute_rules for every stage
  first_n,   ///< per stage, the first n layers in full and the next k selective, any n, k
};

struct Exporter {
  std::string_view name;       ///< --format and --expressible: "megatron"
  std::string_view framework;  ///< the framework in sentences: "Megatron-LM"
  std::string_view words;      ///< what its text is made of, in sentences: "flags"
  /// The `bmpipe import` format that reads the text back (empty: `name`): torchtitan's job
  /// TOML and its registry's command line are both `import torchtitan`'s.
  std::string_view importer = {};
  /// It runs llama-style layers with its fused kernels whatever kernels the config costs
  /// them with (no setting of its states HF's eager ones).
  bool fuses_llama_kernels = false;
  /// Whether it runs bmpipe's schedule `schedule` as bmpipe does.
  bool (*runs)(std::string_view schedule) = nullptr;
  /// bmpipe's name of the schedule it runs a layout of `schedule` with `vpp` chunks per rank
  /// with: "1f1b", "interleaved" or "gpipe".
  std::string_view (*runs_as)(std::string_view schedule, int vpp) = nullptr;
  /// Why it does not run `schedule`, a clause: "Megatron-LM does not run zb-v (...)".
  std::string (*not_run)(std::string_view schedule) = nullptr;
  /// Why its text cannot state the config's job at all (a ConfigError message for
  /// --format), or "" when it can.
  std::string (*refusal)(const Config& config) = nullptr;
  /// What its text states of `layout`.
  ExportStatement (*state)(const ExportLayout& layout) = nullptr;
  /// Whether its text states `layout` exactly (`plan --expressible NAME`).
  bool (*states)(const ExportLayout& layout) = nullptr;
  /// Every per-decoder-layer recompute rule its text states for a partition (decoder layers
  /// per stage), one rule for all stages: what an inexact export tries instead of the plan.
  std::vector<std::vector<Recompute>> (*recompute_rules)(const std::vector<int>& partition) =
      nullptr;
  /// The plans its text states, as the planner searches them.
  RecomputeStated recompute_stated = RecomputeStated::one_rule;
  /// The config as its text states it, where the text cannot say some of the job: those
  /// settings set to what the framework runs instead, one sentence each in `dropped`. The
  /// export then quotes the time of the job its text states (none: the config itself).
  Config (*restated)(const Config& config, std::vector<std::string>& dropped) = nullptr;
  /// The framework's own rules (frameworks/framework_rules.hpp): the job its text states
  /// (`restated`) must pass them, and `refusal` refuses by those it cannot state around.
  std::span<const FrameworkRule> (*rules)() = nullptr;
};

/// The exporters, in the order --help lists them.
std::span<const Exporter> exporters();

/// The exporter called `name`, or nullptr.
const Exporter* find_exporter(std::string_view name);

/// The exporters' names, in table order.
std::vector<std::string> exporter_names();

}  // namespace bmpipe
