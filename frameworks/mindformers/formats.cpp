#include "frameworks/mindformers/formats.hpp"

#include <algorithm>
#include <cstddef>

// Sources (read, not copied), cited below by these short names:
//  [MF]        MindFormers, mindformers/models/utils.py, class LayerSetting, at fd4deebc1
//              (__init__, _check_inputs, _alloc_recompute_layer, _check_layer_rule).
//  [MF-card]   MindFormers, docs/feature_cards/Offset_Recompute.md, at f1e33c5629d5.

namespace bmpipe {

std::vector<int> mindformers_offsets(const std::vector<int>& partition) {
  // [MF] LayerSetting: layers of (mini) stage = num_layers // (pipeline_stage *
  // pp_interleave_num) + offset.
  int layers = 0;
  for (int n : partition) layers += n;
  const int average = partition.empty() ? 0 : layers / static_cast<int>(partition.size());
  std::vector<int> offset;
  for (int n : partition) offset.push_back(n - average);
  return offset;
}

std::vector<int> mindformers_partition(int layers, int pp, int vpp,
                                       const std::vector<int>& offset) {
  const int stages = pp * vpp;
  if (static_cast<int>(offset.size()) != stages)
    throw FormatError("expected " + std::to_string(stages) + " offsets, got " +
                      std::to_string(offset.size()));
  const int average = layers / stages;
  std::vector<int> partition;
  long long total = 0;
  for (int s = 0; s < stages; ++s) {
    const long long n = static_cast<long long>(average) + offset[s];
    if (n < 0)
      throw FormatError("stage " + std::to_string(s) + " would hold " + std::to_string(n) +
                        " layers (" + std::to_string(average) + " + offset " +
                        std::to_string(offset[s]) + ")");
    partition.push_back(static_cast<int>(n));
    total += n;
  }
  if (total != layers)
    throw FormatError("the stages hold " + std::to_string(total) + " layers (" +
                      std::to_string(average) +
                      " per stage + the offsets), not num_layers = " + std::to_string(layers));
  return partition;
}

std::vector<int> mindformers_spread_counts(const std::vector<int>& partition, int pp, int vpp,
                                           const std::vector<int>& per_rank) {
  // [MF] _alloc_recompute_layer: for each rank j, num = min(num, layers of rank j); then
  // one layer per interleave in turn (i = 0 .. vpp-1), skipping full stages, until none is
  // left.
  std::vector<int> counts(partition.size(), 0);
  for (int j = 0; j < pp && j < static_cast<int>(per_rank.size()); ++j) {
    int held = 0;
    for (int v = 0; v < vpp; ++v) held += partition[static_cast<std::size_t>(v) * pp + j];
    int num = std::min(std::max(per_rank[j], 0), held);
    while (num > 0)
      for (int v = 0; v < vpp && num > 0; ++v) {
        const std::size_t s = static_cast<std::size_t>(v) * pp + j;
        if (counts[s] < partition[s]) ++counts[s], --num;
      }
  }
  return counts;
}

std::string mindformers_stage_list(const std::vector<int>& per_stage, int pp, int vpp) {
  // [MF-card]: "外层list的元素个数应等于pp_interleave_num，内层list的元素个数应等于
  // pipeline_stage" (one inner list per interleave, each over the pipeline stages); [MF]
  // _check_inputs checks offset.shape == (pp_interleave_num, pipeline_stage).
  if (vpp == 1) return format_int_list(per_stage);
  std::string out = "[";
  for (int v = 0; v < vpp; ++v) {
    if (v > 0) out += ", ";
    out += format_int_list(
        std::vector<int>(per_stage.begin() + static_cast<std::ptrdiff_t>(v) * pp,
                         per_stage.begin() + static_cast<std::ptrdiff_t>(v + 1) * pp));
  }
  return out + "]";
}

}  // namespace bmpipe
