// Megatron-LM's interleaved 1F1B (Narayanan et al., "Efficient Large-Scale Language Model
// Training on GPU Clusters Using Megatron-LM", SC 2021, section 2.2.2).
#include <algorithm>

#include "schedules/registry.hpp"

namespace bmpipe {

Schedule make_interleaved(const ScheduleParams& params) {
  const int p = params.pp;
  const int m = params.microbatches;
  const int v = params.vpp;
  if (p < 1) throw ScheduleError("interleaved: pp must be at least 1");
  if (m < 1) throw ScheduleError("interleaved: microbatches must be at least 1");
  if (v < 1) throw ScheduleError("interleaved: vpp must be at least 1");
  // Micro-batches run in groups of p. A smaller last group after full ones deadlocks with
  // Megatron's warm-up depth (a rank needs the gradient of a micro-batch whose forward it
  // has not yet sent on), so such m is refused rather than silently reordered. A single
  // group (m <= p) is fine.
  if (m > p && m % p != 0)
    throw ScheduleError(
        "interleaved needs microbatches to be a multiple of pp (or at most pp); got m = " +
        std::to_string(m) + ", pp = " + std::to_string(p) + " (try m = " +
        std::to_string((m / p) * p) + " or " + std::to_string((m / p + 1) * p) + ")");

  Schedule s;
  s.name = "interleaved";
  s.num_ranks = p;
  s.num_stages = p * v;
  s.num_microbatches = m;
  // Loop placement: stage s on rank s mod p, so chunk c of rank r is stage c*p + r.
  s.stage_rank.resize(p * v);
  for (int st = 0; st < p * v; ++st) s.stage_rank[st] = st % p;
  s.ops.resize(p);

  // Micro-batches go in groups of p: every chunk runs the whole group before the next
  // chunk starts, so the group's activations reach the next rank's chunk in one wave.
  const int total = m * v;
  std::vector<Op> forwards;
  std::vector<Op> backwards;
  for (int r = 0; r < p; ++r) {
    forwards.clear();
    backwards.clear();
    for (int g = 0; g * p < m; ++g) {
      const int lo = g * p;
      const int hi = std::min(m, lo + p);
      for (int c = 0; c < v; ++c)
        for (int mb = lo; mb < hi; ++mb) forwards.push_back(Op::f(c * p + r, mb));
      for (int c = v - 1; c >= 0; --c)
        for (int mb = lo; mb < hi; ++mb) backwards.push_back(Op::b(c * p + r, mb));
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
