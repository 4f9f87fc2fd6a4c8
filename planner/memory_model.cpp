#include "planner/memory_model.hpp"

#include <algorithm>

namespace bmpipe {

namespace {

/// Memory is sum_j (full_j + retained_j) * R_j + full_j * (A_j - R_j) with R_j <= A_j, so a
/// moment holds at least as much as another, whatever the bytes, when it is at least as
/// large in both of these coefficients for every stage.
bool covers(const MemoryMoment& a, const MemoryMoment& b) {
  for (std::size_t j = 0; j < a.full.size(); ++j) {
    if (a.full[j] < b.full[j]) return false;
    if (a.full[j] + a.retained[j] < b.full[j] + b.retained[j]) return false;
  }
  return true;
}

}  // namespace

std::vector<RankMemory> memory_profile(const Schedule& schedule, int offload_resident) {
  std::vector<RankMemory> out(schedule.num_ranks);
  for (RankMemory& r : out) r.offload_resident = offload_resident;
  std::vector<int> local(schedule.num_stages, -1);
  for (int s = 0; s < schedule.num_stages; ++s) {
    RankMemory& r = out[schedule.stage_rank[s]];
    local[s] = static_cast<int>(r.stages.size());
    r.stages.push_back(s);
  }
  for (int rank = 0; rank < schedule.num_ranks; ++rank) {
    RankMemory& r = out[rank];
    const std::size_t n = r.stages.size();
    MemoryMoment now{std::vector<int>(n, 0), std::vector<int>(n, 0)};
    std::vector<MemoryMoment> moments;
    auto remember = [&] {
      for (const MemoryMoment& m : moments)
        if (covers(m, now)) return;
      std::erase_if(moments, [&](const MemoryMoment& m) { return covers(now, m); });
      moments.push_back(now);
    };
    for (const Op& op : schedule.ops[rank]) {
      switch (op.kind) {
        case OpKind::F:
          ++now.full[local[op.stage]];
          remember();
          break;
        case OpKind::FB:
          ++now.full[local[op.stage]];
          remember();
          --now.full[local[op.stage2]];
          break;
        case OpKind::B:
          --now.full[local[op.stage]];
          break;
        case OpKind::I:
          --now.full[local[op.stage]];
          ++now.retained[local[op.stage]];
          break;
        case OpKind::W:
          --now.retained[local[op.stage]];
          break;
      }
    }
    // Stable, readable order: by the first stage's count, largest first.
    std::sort(moments.begin(), moments.end(), [](const MemoryMoment& a, const MemoryMoment& b) {
      if (a.full != b.full) return a.full > b.full;
      return a.retained > b.retained;
    });
    r.moments = std::move(moments);
  }
  return out;
}

std::int64_t peak_activation(const RankMemory& rank, const std::vector<std::int64_t>& activation,
                             const std::vector<std::int64_t>& retained,
                             const std::vector<std::int64_t>& offload) {
  std::int64_t peak = 0;
  for (const MemoryMoment& m : rank.moments) {
    std::int64_t bytes = 0;
    for (std::size_t j = 0; j < m.full.size(); ++j)
      bytes += moment_bytes(m.full[j], m.retained[j], activation[j], retained[j],
                            offload.empty() ? 0 : offload[j], rank.offload_resident);
    peak = std::max(peak, bytes);
  }
  return peak;
}

}  // namespace bmpipe
