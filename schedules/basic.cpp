// GPipe and 1F1B: one stage per device, stage s on rank s.
#include <algorithm>

#include "schedules/registry.hpp"

namespace bmpipe {

Schedule make_gpipe(const ScheduleParams& params) {
  Schedule s = start_schedule("gpipe", params);
  const int m = params.microbatches;
  for (int r = 0; r < params.pp; ++r) {
    auto& list = s.ops[r];
    list.reserve(2 * m);
    // All forwards, then all backwards in the same micro-batch order (as
    // torch.distributed.pipelining's ScheduleGPipe does).
    for (int mb = 0; mb < m; ++mb) list.push_back(Op::f(r, mb));
    for (int mb = 0; mb < m; ++mb) list.push_back(Op::b(r, mb));
  }
  return s;
}

Schedule make_1f1b(const ScheduleParams& params) {
  Schedule s = start_schedule("1f1b", params);
  const int p = params.pp;
  const int m = params.microbatches;
  for (int r = 0; r < p; ++r) {
    auto& list = s.ops[r];
    list.reserve(2 * m);
    // PipeDream-flush order (Narayanan et al., "Memory-Efficient Pipeline-Parallel DNN
    // Training", 2021; Megatron-LM's forward_backward_pipelining_without_interleaving):
    // p-r-1 warm-up forwards, then one forward and one backward alternately, then the
    // remaining backwards.
    const int warmup = std::min(p - r - 1, m);
    int next_f = 0;
    int next_b = 0;
    for (; next_f < warmup; ++next_f) list.push_back(Op::f(r, next_f));
    while (next_f < m) {
      list.push_back(Op::f(r, next_f++));
      list.push_back(Op::b(r, next_b++));
    }
    while (next_b < m) list.push_back(Op::b(r, next_b++));
  }
  return s;
}

}  // namespace bmpipe
