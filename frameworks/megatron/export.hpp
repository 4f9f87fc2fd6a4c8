#pragma once
/// \file
/// A plan in Megatron-LM's words: its command-line flags. Pure functions of the layout;
/// nothing here simulates.

#include <string>
#include <vector>

#include "frameworks/common/export_layout.hpp"

namespace bmpipe {

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
