#pragma once
/// \file
/// MindFormers' partition and recompute vocabulary: offsets, the per-rank recompute counts
/// it deals over the interleaves, and its per-stage lists, read the way LayerSetting reads
/// them. Pure functions; a value MindFormers refuses is a FormatError.

#include <string>
#include <vector>

#include "frameworks/common/formats.hpp"

namespace bmpipe {

/// model_config.offset of `partition`: each stage's layers minus layers // (pp * vpp).
std::vector<int> mindformers_offsets(const std::vector<int>& partition);

/// Layers per stage from an offset per stage (stage order, already one per stage):
/// layers // (pp * vpp) + offset[s] ([MF] LayerSetting). Throws FormatError when a stage
/// would hold fewer than 0 layers or the stages do not add up to `layers`.
std::vector<int> mindformers_partition(int layers, int pp, int vpp, const std::vector<int>& offset);

/// Per-stage counts from one count per pipeline rank, as MindFormers spreads a flat
/// recompute list over the interleaves (LayerSetting._alloc_recompute_layer): a rank's count,
/// capped at the layers it holds, is dealt one layer at a time to its interleaves in turn,
/// skipping an interleave whose stage is full.
std::vector<int> mindformers_spread_counts(const std::vector<int>& partition, int pp, int vpp,
                                           const std::vector<int>& per_rank);

/// A per-stage list as MindFormers takes it: flat when vpp is 1, else one inner list per
/// interleave, each over the pp stages: "[[4, 5], [5, 4]]".
std::string mindformers_stage_list(const std::vector<int>& per_stage, int pp, int vpp);

}  // namespace bmpipe
