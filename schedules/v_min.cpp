// V-Min (Qi et al., "Pipeline Parallelism with Controllable Memory", 2024): the
// V-shaped schedule built by repeating one building block.
//
// The paper's view: a schedule that repeats the same block of ops for every micro-batch,
// shifted by a fixed period, holds on each device (lifespan of a micro-batch) / period
// micro-batches, so memory is decided by how tightly one block is drawn. V-Min draws it
// as tightly as dependencies allow. With unit costs each rank runs six ops per
// micro-batch (F, I, W of two chunks), so the period is 6 slots and a block is valid when
// every rank's six ops fall in six different slots modulo 6. We place the forward chain
// down the V, then the input-gradient chain back up it, then the weight gradients, each
// op at its earliest slot whose residue is still free on its rank. The lifespan of rank
// r's two chunks is then about (4p - 2r) + (2r) slots, i.e. about 2p/3 stage-activations
// per device: a third of 1F1B's (2p of these half-size stages). The warm-up and
// cool-down of the repeated block idle for about 4p slots against 1F1B's 6(p-1), about
// 2/3 of its bubble, matching the paper's trade-off.
#include <algorithm>
#include <array>
#include <tuple>

#include "schedules/registry.hpp"
#include "schedules/repeated_block.hpp"

namespace bmpipe {

Schedule make_v_min(const ScheduleParams& params) {
  const int p = params.pp;
  Schedule s = start_schedule("v-min", params);
  constexpr int kPeriod = 6;
  const int stages = s.num_stages;

  // The block: slot of F, I and W of every stage for micro-batch 0.
  std::vector<std::array<bool, kPeriod>> used(p, std::array<bool, kPeriod>{});
  auto place = [&](int stage, int earliest) {
    std::array<bool, kPeriod>& u = used[s.stage_rank[stage]];
    int t = earliest;
    while (u[t % kPeriod]) ++t;  // at most 5 steps: a rank has exactly 6 ops per block
    u[t % kPeriod] = true;
    return t;
  };
  std::vector<int> tf(stages), ti(stages), tw(stages);
  for (int st = 0; st < stages; ++st) tf[st] = place(st, st == 0 ? 0 : tf[st - 1] + 1);
  for (int st = stages - 1; st >= 0; --st)
    ti[st] = place(st, std::max(tf[st] + 1, st == stages - 1 ? 0 : ti[st + 1] + 1));
  for (int st = stages - 1; st >= 0; --st) tw[st] = place(st, ti[st] + 1);

  // Repeat the block every period and read each rank's order off the timeline.
  detail::fill_from_repeated_block(s, std::vector<long>(tf.begin(), tf.end()),
                                   std::vector<long>(ti.begin(), ti.end()),
                                   std::vector<long>(tw.begin(), tw.end()), kPeriod);
  return s;
}

}  // namespace bmpipe
