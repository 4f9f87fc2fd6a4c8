// Megatron-LM's interleaved 1F1B (Narayanan et al., "Efficient Large-Scale Language Model
// Training on GPU Clusters Using Megatron-LM", SC 2021, section 2.2.2).
#include <algorithm>

#include "schedules/registry.hpp"

namespace bmpipe {

Schedule make_interleaved(const ScheduleParams& params) {
  const int p = params.pp;
  const int m = params.microbatches;
  const int v = params.vpp;
  // Loop placement: stage s on rank s mod p, so chunk c of rank r is stage c*p + r. The
  // table's rule keeps m at most p or a multiple of p (see check_params).
  Schedule s = start_schedule("interleaved", params);

  // Micro-batches go in groups of p: every chunk runs the whole group before the next
  // chunk starts, so the group's activations reach the next rank's chunk in one wave.
  const int total = m * v;
  OpList forwards;
  OpList backwards;
  for (int r = 0; r < p; ++r) {
    forwards.clear();
    backwards.clear();
    for (int g = 0; g * p < m; ++g) {
      const int lo = g * p;
      const int hi = std::min(m, lo + p);
      for (int c = 0; c < v; ++c) {
        const int st = chunk_stage(Placement::kLoop, r, c, p);
        for (int mb = lo; mb < hi; ++mb) forwards.push_back(Op::f(st, mb));
      }
      for (int c = v - 1; c >= 0; --c) {
        const int st = chunk_stage(Placement::kLoop, r, c, p);
        for (int mb = lo; mb < hi; ++mb) backwards.push_back(Op::b(st, mb));
      }
    }
    // Warm-up depth from Megatron-LM: 2(p-r-1) + (v-1)p forwards, capped at m*v.
    const int warmup = std::min(2 * (p - r - 1) + (v - 1) * p, total);
    auto& list = s.ops[r];
    list.reserve(2 * total);
    int nf = 0;
    int nb = 0;
    for (; nf < warmup; ++nf) list.push_back(forwards[nf]);
    while (nf < total) {
      list.push_back(forwards[nf++]);
      list.push_back(backwards[nb++]);
    }
    while (nb < total) list.push_back(backwards[nb++]);
  }
  return s;
}

}  // namespace bmpipe
