#include "frameworks/common/formats.hpp"

#include <cstddef>

// Sources (read, not copied), cited below by these short names:
//  [MF]        MindFormers, mindformers/models/utils.py, class LayerSetting, at fd4deebc1
//              (_check_layer_rule, _set_select_recompute: full wins over select).

namespace bmpipe {

std::string format_int_list(const std::vector<int>& v) {
  std::string out = "[";
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(v[i]);
  }
  return out + "]";
}

std::vector<int> stage_starts(const std::vector<int>& partition) {
  std::vector<int> starts(1, 0);
  for (int n : partition) starts.push_back(starts.back() + n);
  return starts;
}

std::vector<Recompute> modes_from_prefix_counts(const std::vector<int>& partition,
                                                const std::vector<int>& full,
                                                const std::vector<int>& select) {
  std::vector<Recompute> modes;
  for (std::size_t s = 0; s < partition.size(); ++s)
    for (int k = 0; k < partition[s]; ++k)
      // Full wins where both counts cover a layer ([MF] sets select recompute only on a
      // layer that is not fully recomputed).
      modes.push_back(k < full[s] ? Recompute::full
                                  : (k < select[s] ? Recompute::selective : Recompute::none));
  return modes;
}

int covering_prefix(const std::vector<int>& partition, const std::vector<Recompute>& modes, int s,
                    Recompute at_least) {
  const std::vector<int> starts = stage_starts(partition);
  int n = 0;
  for (int i = starts[s]; i < starts[s + 1]; ++i)
    if (modes[i] >= at_least) n = i - starts[s] + 1;
  return n;
}

}  // namespace bmpipe
