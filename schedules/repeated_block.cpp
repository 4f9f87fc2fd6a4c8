#include "schedules/repeated_block.hpp"

#include <algorithm>
#include <utility>

namespace bmpipe::detail {

void fill_from_repeated_block(Schedule& s, const std::vector<long>& tf, const std::vector<long>& ti,
                              const std::vector<long>& tw, long period) {
  const int m = s.num_microbatches;
  std::vector<std::vector<std::pair<long, Op>>> timeline(s.num_ranks);
  for (int st = 0; st < s.num_stages; ++st) {
    auto& line = timeline[s.stage_rank[st]];
    line.reserve(line.size() + static_cast<std::size_t>(3) * m);
    for (int k = 0; k < m; ++k) {
      const long shift = static_cast<long>(k) * period;
      line.emplace_back(tf[st] + shift, Op::f(st, k));
      line.emplace_back(ti[st] + shift, Op::i(st, k));
      line.emplace_back(tw[st] + shift, Op::w(st, k));
    }
  }
  for (int r = 0; r < s.num_ranks; ++r) {
    auto& line = timeline[r];
    std::sort(line.begin(), line.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    s.ops[r].clear();
    s.ops[r].reserve(line.size());
    for (const auto& entry : line) s.ops[r].push_back(entry.second);
  }
}

}  // namespace bmpipe::detail
