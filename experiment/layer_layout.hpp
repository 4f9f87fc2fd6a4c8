#pragma once
/// \file
/// Where every kind of layer runs: Megatron-LM's --pipeline-model-parallel-layout grammar
/// ("Et*3|(tt|)*29,m|L"), which is also bmpipe's `training.megatron_layout`. The experiment
/// reads it to run a layout as written when it puts the embedding, an MTP layer or the loss
/// on a stage of its own (the layer table then gives each its own row: layer_table.hpp);
/// frameworks/megatron/formats.hpp adds Megatron-LM's own checks around it.
///
/// Source (read, not copied): Megatron-LM at d98e8a64ddf3,
/// megatron/core/transformer/pipeline_parallel_layer_layout.py (parse_str_to_list,
/// validate_layer_layout) and docs/user-guide/features/pipeline_parallel_layout.md.

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace bmpipe {

/// A layout the grammar refuses; the message says where and why.
struct LayoutError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

/// No model has more layers; it also keeps an unrolled layout small.
constexpr long long kMaxLayoutLayers = 100'000;

/// Reads the digits at `i` (none: 0) as a repeat count, advancing `i`. Throws LayoutError
/// past kMaxLayoutLayers.
long long read_repeat_count(std::string_view s, std::size_t& i);

/// One stage of a parsed layout.
struct LayoutStage {
  int decoders = 0;  ///< 't'
  int mtp = 0;       ///< 'm' (multi-token prediction layers)
  bool embedding = false;
  bool loss = false;
  /// Its rows in a table with separate ends: E, its t, its m, L.
  int rows() const { return decoders + mtp + (embedding ? 1 : 0) + (loss ? 1 : 0); }
};

/// Parses a layout the way Megatron-LM's PipelineParallelLayerLayout.parse_str_to_list does:
/// commas dropped, "(...)*n" then "x*n" unrolled, '|' splits stages, E/t/L/m the layer
/// kinds; then validate_layer_layout's checks of the kinds: the first layer of all is E and
/// the last L, each exactly once; and bmpipe's own, that no t follows an m (the MTP
/// layers run on the last decoder layer's output). Throws LayoutError (an unknown character, nested
/// parentheses, a repeat count past 100000 layers, E or L missing, misplaced or repeated).
std::vector<LayoutStage> parse_layer_layout(std::string_view layout);

/// `stages` in the grammar, shortest repeats per kind: "Et*3|t*2|m|L" (no (...)*n groups).
/// parse_layer_layout reads it back to `stages`.
std::string layout_string(const std::vector<LayoutStage>& stages);

/// Why the layer table that folds the embedding into the first decoder layer and the MTP
/// modules and the loss into the last cannot run `stages` as written (a stage without
/// decoder layers, MTP layers before the last stage), naming the first such stage; empty
/// when it can. A layout with a reason runs on a table with separate ends.
std::string folded_layout_mismatch(const std::vector<LayoutStage>& stages);

}  // namespace bmpipe
