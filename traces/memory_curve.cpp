#include "traces/memory_curve.hpp"

#include <algorithm>

namespace bmpipe::svg {

std::int64_t rank_peak(const Timeline& t, int r) {
  const std::int64_t stat = at_or<std::int64_t>(t.static_bytes, r, 0);
  std::int64_t peak = stat;
  if (r >= 0 && static_cast<std::size_t>(r) < t.memory.size())
    for (const auto& s : t.memory[r]) peak = std::max(peak, stat + s.activation_bytes);
  return peak;
}

MemoryScale memory_scale(std::span<const Timeline> timelines) {
  MemoryScale m;
  for (const auto& t : timelines) {
    if (!t.ok) continue;
    for (int r = 0; r < t.num_ranks; ++r) {
      m.peak = std::max(m.peak, rank_peak(t, r));
      m.capacity = std::max(m.capacity, at_or<std::int64_t>(t.capacity_bytes, r, 0));
    }
  }
  m.off_scale = m.capacity > 0 && m.peak * 4 < m.capacity;
  m.full = m.off_scale
               ? static_cast<double>(std::max<std::int64_t>(m.peak, 1)) * 1.15
               : static_cast<double>(std::max<std::int64_t>({m.capacity, m.peak, 1})) * 1.08;
  return m;
}

}  // namespace bmpipe::svg
