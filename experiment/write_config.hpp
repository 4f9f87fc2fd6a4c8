#pragma once
/// \file
/// Writes a config back out with a plan filled in, so that `bmpipe simulate` and
/// `bmpipe plan` accept the result and reproduce the planner's numbers.

#include <optional>
#include <string>
#include <vector>

#include "sim/recompute.hpp"

namespace bmpipe {

/// The training keys a plan (or a layout search) decides.
struct ConfigEdits {
  std::string schedule;
  int pp = 1;
  int vpp = 1;
  int microbatches = 1;
  std::vector<int> partition;        ///< layers per stage (set_plan_keys: decoder layers)
  std::vector<Recompute> recompute;  ///< per layer, model order (then MTP layers)
  /// A layout search also decides these (written only when given).
  std::optional<int> tp, dp, micro_batch_size;
  /// training.ep, training.etp, training.cp (a layout search over --ep, --etp, --cp).
  std::optional<int> ep = std::nullopt, etp = std::nullopt, cp = std::nullopt;
  /// training.sequence_parallel and tp_comm_overlap where a layout's own config differs from
  /// the source (planner's layout_config: sequence parallelism on for an MoE layout at
  /// tp > 1, the tp overlap off at tp 1), so that the file written is the job ranked.
  std::optional<bool> sequence_parallel = std::nullopt, tp_comm_overlap = std::nullopt;
  /// A plan on a table with separate ends (set_plan_keys in experiment.hpp): the layout
  /// that places every row when `partition` (decoder layers) cannot say it, written as
  /// training.megatron_layout with no partition; else training.separate_ends: true.
  std::string megatron_layout = {};
  bool separate_ends = false;
};

/// `source_text` (the YAML read from `source_path`) with training.schedule, pp, vpp,
/// microbatches, partition and recompute set from `edits` (and tp, dp, micro_batch_size,
/// ep, etp, cp when given), as it should read when written
/// to `out_path`: a relative model.hf_config is re-pointed so that it still names the same
/// file from there. The recompute is written as one mode, or as {default, layers} with the
/// most common mode as the default. Comments of the source are not kept; a header says
/// where the file came from. With `device_memory_GiB` (plan --memory-limit-GiB), it is
/// written as cluster.device.memory_GiB, so that simulate checks against the limit that
/// was planned for. Throws ConfigError if the source does not parse.
std::string config_with_edits(const std::string& source_text, const std::string& source_path,
                              const std::string& out_path, const ConfigEdits& edits,
                              const std::string& header,
                              std::optional<double> device_memory_GiB = std::nullopt);

}  // namespace bmpipe
