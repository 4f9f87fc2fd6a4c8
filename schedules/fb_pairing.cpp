#include "schedules/fb_pairing.hpp"

#include <algorithm>
#include <utility>

namespace bmpipe {

Schedule pair_steady_state(Schedule schedule) {
  const int p = schedule.num_ranks;
  const bool one_chunk = schedule.chunks_per_device() == 1;
  for (int r = 0; r < p; ++r) {
    auto& ops = schedule.ops[r];
    OpList forwards, backwards;
    int leading = -1;  // forwards before the first backward: warm-up + the first steady one
    for (const Op& op : ops) {
      if (op.kind == OpKind::F) forwards.push_back(op);
      if (op.kind == OpKind::B) {
        if (leading < 0) leading = static_cast<int>(forwards.size());
        backwards.push_back(op);
      }
    }
    if (forwards.size() + backwards.size() != ops.size() || leading < 0) continue;
    const std::size_t warmup =
        static_cast<std::size_t>(std::max(1, one_chunk ? 2 * (p - r - 1) + 1 : leading));
    OpList out;
    out.reserve(ops.size());
    std::size_t f = 0, b = 0;
    for (; f < std::min(warmup, forwards.size()); ++f) out.push_back(forwards[f]);
    for (; f < forwards.size() && b < backwards.size(); ++f, ++b)
      out.push_back(Op::fb(forwards[f].stage, forwards[f].microbatch, backwards[b].stage,
                           backwards[b].microbatch));
    for (; b < backwards.size(); ++b) out.push_back(backwards[b]);
    ops = std::move(out);
  }
  return schedule;
}

}  // namespace bmpipe
