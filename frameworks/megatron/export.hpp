#pragma once
/// \file
/// A plan in the words of the frameworks that will run it: MindFormers' YAML keys and
/// Megatron-LM's command-line flags. Pure functions of the layout; nothing here simulates.

#include <string>
#include <vector>

#include "sim/recompute.hpp"

namespace bmpipe {

/// What an export needs to know of a plan, counted in decoder (transformer) layers.
struct ExportLayout {
  int pp = 1;   ///< pipeline ranks
  int vpp = 1;  ///< stages (chunks) per rank
  /// Rank of each stage, in stage order (forward order): s % pp for one stage per rank and
  /// interleaved, the V (r, then 2pp-1-r) for V schedules.
  std::vector<int> stage_rank;
  /// Decoder layers of each stage, in stage order; they add up to recompute.size().
  std::vector<int> partition;
  /// The mode of every decoder layer, in model order.
  std::vector<Recompute> recompute;
  /// The embedding runs on the first stage and the loss (LM head) on the last, as they do
  /// in bmpipe's cost model and in both frameworks by default.
  bool embedding_on_first = true;
  bool loss_on_last = true;
};

/// MindFormers keys (a YAML fragment): model.model_config.offset and pp_interleave_num,
/// recompute_config.recompute and select_recompute, as lists per stage (2-D when vpp > 1).
/// `notes` gets one line per thing MindFormers cannot express exactly (empty if none).
std::string export_mindformers(const ExportLayout& layout, std::vector<std::string>* notes);

/// Megatron-LM flags, one per line.
struct MegatronExport {
  bool exact = true;       ///< false: Megatron cannot express the plan; see `note`
  std::string note;        ///< why not, in one or two sentences (empty when exact)
  ExportLayout expressed;  ///< the plan the flags describe (the nearest one when !exact)
  std::string flags;       ///< e.g. "--pipeline-model-parallel-size 8\n..."
};
MegatronExport export_megatron(const ExportLayout& layout);

/// Every per-layer recompute choice Megatron-LM's flags can state for a partition (decoder
/// layers per stage): none; selective everywhere; full for the first N layers of every
/// stage (`--recompute-method block`, N = 1 .. largest stage - 1); full everywhere
/// (`uniform`). For a plan it cannot express, the caller simulates these and keeps the
/// fastest that fits (`bmpipe plan --format megatron`).
std::vector<std::vector<Recompute>> megatron_recompute_choices(const std::vector<int>& partition);

}  // namespace bmpipe
