#pragma once
/// \file
/// Megatron-LM's partition vocabulary: the --pipeline-model-parallel-layout grammar, the
/// first/last-rank split and the even split, read the way Megatron-LM's sources read them
/// (the recompute rules it shares with MindFormers are in frameworks/common/formats.hpp).
/// Pure functions; a value Megatron-LM refuses is a FormatError.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "experiment/layer_layout.hpp"
#include "frameworks/common/formats.hpp"

namespace bmpipe {

/// --pipeline-model-parallel-layout for `partition` (decoder layers per stage, stage order)
/// with the embedding on the first stage and the loss on the last: "Et*9|t*9|t*8|t*6L";
/// `mtp_layers` multi-token prediction layers before the loss ("...|t*6mL"): Megatron-LM
/// refuses a layout whose 'm' count is not --mtp-num-layers ([MG-layout]
/// validate_layer_layout).
/// `mtp_per_stage`, when not empty, gives the 'm' of every stage instead ("...|t*2|m|L").
std::string megatron_layout_string(const std::vector<int>& partition, int mtp_layers = 0,
                                   const std::vector<int>& mtp_per_stage = {});

/// One stage of a parsed layout (experiment/layer_layout.hpp).
using MegatronLayoutStage = LayoutStage;

/// Parses a layout string the way Megatron-LM's PipelineParallelLayerLayout
/// .parse_str_to_list does: commas dropped, "(...)*n" then "x*n" unrolled, '|' splits
/// stages, E/t/L/m the layer kinds. Then checks what validate_layer_layout checks of the
/// kinds: the first layer of all is E and the last L, each exactly once. Throws FormatError
/// (an unknown character, nested parentheses, a repeat count of 0 or past 100000 layers).
std::vector<MegatronLayoutStage> parse_megatron_layout(std::string_view layout);

/// Why a layer table that folds the embedding into the first decoder layer and the MTP
/// modules and the loss into the last cannot run parsed `stages` as written (a stage
/// without decoder layers, MTP layers before the last stage: folded_layout_mismatch), with
/// where it does run: as a config's training.megatron_layout, on a table with separate ends
/// (experiment/layer_table.hpp). Empty when the folded table runs it.
std::string megatron_layout_unsupported(const std::vector<MegatronLayoutStage>& stages);

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

/// --moe-layer-freq (Megatron-LM's moe_freq_type, megatron/training/arguments.py at
/// d98e8a64ddf3): text without '[' is an int N (layer i is MoE when i % N == 0); text with
/// '[' is a Python list expression of the characters `,0-9[]()+*` (which Megatron-LM
/// evaluates with eval), e.g. "([0]*3+[1]*58)", giving 1 (MoE) or 0 (dense) per layer.
/// Returns one entry per layer of `layers`; throws FormatError for anything else (a value
/// other than 0 or 1, a list of another length, a malformed expression).
std::vector<int> megatron_moe_pattern(std::string_view text, int layers);

/// The shortest of the two forms for a 0/1 pattern: "N" when it is i % N == 0, else the
/// run-length list expression "([0]*3+[1]*58)".
std::string megatron_moe_freq_text(const std::vector<int>& pattern);

}  // namespace bmpipe
