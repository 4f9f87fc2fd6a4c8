#pragma once
/// \file
/// The partition and recompute vocabulary of Megatron-LM and MindFormers, in one place: the
/// exporters (frameworks/*/export.cpp) write it and the importers (frameworks/*/import.cpp) read
/// it, so that both follow the same reading of the frameworks' sources. Pure functions; a
/// value a framework refuses is a FormatError whose message says why, and the caller adds
/// the file and the flag or key.
///
/// Stage order is bmpipe's, which is both frameworks' layer order: stage v * pp + r is
/// virtual stage (chunk, interleave) v of pipeline rank r.

#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "sim/recompute.hpp"

namespace bmpipe {

/// A value the framework would refuse, or one bmpipe cannot model.
struct FormatError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

/// "[1, 2, 3]" (the empty list is "[]").
std::string format_int_list(const std::vector<int>& v);

/// Index of the first layer (model order) of every stage, plus one past the last.
std::vector<int> stage_starts(const std::vector<int>& partition);

/// The modes of every layer when stage s recomputes its first `full[s]` layers fully and,
/// of the others, the first `select[s]` counted from the stage's first layer selectively.
/// Counts above a stage's size take the whole stage. This is how both frameworks count:
/// MindFormers' recompute / select_recompute lists, and Megatron-LM's block method.
std::vector<Recompute> modes_from_prefix_counts(const std::vector<int>& partition,
                                                const std::vector<int>& full,
                                                const std::vector<int>& select);

/// The shortest n such that every layer of stage s whose mode is at least `at_least` lies
/// among the stage's first n layers.
int covering_prefix(const std::vector<int>& partition, const std::vector<Recompute>& modes, int s,
                    Recompute at_least);

// ---- Megatron-LM ---------------------------------------------------------------------------

/// --pipeline-model-parallel-layout for `partition` (decoder layers per stage, stage order)
/// with the embedding on the first stage and the loss on the last: "Et*9|t*9|t*8|t*6L".
std::string megatron_layout_string(const std::vector<int>& partition);

/// One stage of a parsed layout.
struct MegatronLayoutStage {
  int decoders = 0;  ///< 't'
  int mtp = 0;       ///< 'm' (multi-token prediction layers)
  bool embedding = false;
  bool loss = false;
};

/// Parses a layout string the way Megatron-LM's PipelineParallelLayerLayout
/// .parse_str_to_list does: commas dropped, "(...)*n" then "x*n" unrolled, '|' splits
/// stages, E/t/L/m the layer kinds. Then checks what validate_layer_layout checks of the
/// kinds: the first layer of all is E and the last L, each exactly once. Throws FormatError
/// (an unknown character, nested parentheses, a repeat count of 0 or past 100000 layers).
std::vector<MegatronLayoutStage> parse_megatron_layout(std::string_view layout);

/// Decoder layers per stage that Megatron builds from --decoder-first-pipeline-num-layers
/// and/or --decoder-last-pipeline-num-layers (`first`, `last`: layers of the whole rank,
/// over its vpp chunks), or nullopt where Megatron refuses them.
std::optional<std::vector<int>> megatron_uneven(int layers, int pp, int vpp,
                                                std::optional<int> first, std::optional<int> last);

/// Decoder layers per stage of Megatron's even split, with the embedding and/or the loss
/// counted as a layer (--account-for-embedding/loss-in-pipeline-split): each rank gets
/// (layers + accounted) / pp over its vpp chunks, minus one on the first (last) chunk of all
/// for an accounted embedding (loss). Throws FormatError where Megatron's asserts would.
std::vector<int> megatron_even(int layers, int pp, int vpp, bool account_embedding,
                               bool account_loss);

// ---- MindFormers ---------------------------------------------------------------------------

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
