#pragma once
// The reference row of the engine benchmarks: the least work any evaluator of a schedule
// can do. Zero communication, no memory, no observer, no validation: sweep the ranks,
// running each as far as its next op's inputs are done, an op starting when its rank is
// free and its inputs are done. Same op order as the engine, so the two count the same ops
// and the ratio of their times is the engine's overhead.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "schedules/op.hpp"
#include "sim/time.hpp"

namespace bmpipe::bench {

struct OnePassCosts {
  std::vector<Time> f, b, i, w;  // per stage; B is the full backward
};

/// The makespan of `sch` under `c`, or kNever if it cannot complete.
inline Time one_pass(const Schedule& sch, const OnePassCosts& c, std::uint64_t& ops) {
  const int p = sch.num_ranks, S = sch.num_stages, M = sch.num_microbatches;
  // fwd[s*M+m]: end of F(s, m); bwd[s*M+m]: end of the backward (B or I) of (s, m).
  std::vector<Time> fwd(static_cast<std::size_t>(S) * M, kNever);
  std::vector<Time> bwd(static_cast<std::size_t>(S) * M, kNever);
  std::vector<std::size_t> next(p, 0);
  std::vector<Time> free(p, 0);
  auto at = [M](int s, int m) { return static_cast<std::size_t>(s) * M + m; };
  Time makespan = 0;
  for (bool progress = true; progress;) {
    progress = false;
    for (int r = 0; r < p; ++r) {
      const OpList& list = sch.ops[r];
      std::size_t k = next[r];
      Time t = free[r];
      for (; k < list.size(); ++k) {
        const Op& op = list[k];
        Time ready = 0, d = 0;
        switch (op.kind) {
          case OpKind::F:
            if (op.stage > 0) ready = fwd[at(op.stage - 1, op.microbatch)];
            d = c.f[op.stage];
            break;
          case OpKind::B:
          case OpKind::I:
            ready = fwd[at(op.stage, op.microbatch)];
            if (op.stage + 1 < S) ready = std::max(ready, bwd[at(op.stage + 1, op.microbatch)]);
            d = op.kind == OpKind::B ? c.b[op.stage] : c.i[op.stage];
            break;
          case OpKind::W:
            ready = bwd[at(op.stage, op.microbatch)];
            d = c.w[op.stage];
            break;
          case OpKind::FB:
            if (op.stage > 0) ready = fwd[at(op.stage - 1, op.microbatch)];
            ready = std::max(ready, fwd[at(op.stage2, op.microbatch2)]);
            if (op.stage2 + 1 < S) ready = std::max(ready, bwd[at(op.stage2 + 1, op.microbatch2)]);
            d = c.f[op.stage] + c.b[op.stage2];
            break;
        }
        if (ready == kNever) break;
        t = std::max(t, ready) + d;
        if (op.kind == OpKind::F || op.kind == OpKind::FB) fwd[at(op.stage, op.microbatch)] = t;
        if (op.kind == OpKind::B || op.kind == OpKind::I) bwd[at(op.stage, op.microbatch)] = t;
        if (op.kind == OpKind::FB) bwd[at(op.stage2, op.microbatch2)] = t;
      }
      if (k == next[r]) continue;
      progress = true;
      ops += k - next[r];
      next[r] = k;
      free[r] = t;
      makespan = std::max(makespan, t);
    }
  }
  for (int r = 0; r < p; ++r)
    if (next[r] < sch.ops[r].size()) return kNever;
  return makespan;
}

}  // namespace bmpipe::bench
