// V-Half (Qi et al., "Pipeline Parallelism with Controllable Memory", 2024): the V-shaped
// schedule at about half of 1F1B's activation memory, built by repeating one block.
//
// Same framework as V-Min (v_min.cpp): one block of ops per micro-batch, repeated every
// period of 6 slots (F, I, W of the rank's two chunks). A rank holds about
// (lifespan of its two chunks) / period micro-batches, and both chunks' lifespans add up
// to the micro-batch's round trip down and back up the V. What sets the memory is how long
// that round trip is.
//
// Why half: the round trip on rank 0 has 2p forwards and 2p input gradients; if it spans L
// periods, the cycle "F(0,k) .. down and up .. I(0,k), then rank 0's next F(0,k+L)" must
// fit in L periods for every mix of costs, i.e. 2p F <= L * 2(F + I + W) and the same for
// I. With F = I = W, L = 2p/3 is enough (V-Min); for the steady state to keep full speed
// whatever F, I and W are, L must be about p, and the block must hold no more than 2L of
// each kind on that cycle. That is V-Half: p micro-batch-halves per device, half of 1F1B's
// 2p. The waits that stretch the round trip from 4p to about 6p slots are filled with the
// rank's weight gradients (W), so they cost no time in the steady state.
//
// The block. Every rank runs the same 6-slot pattern of kinds (which slot holds an F, an I
// or a W), shifted in time by its pair index (ranks 2j and 2j+1 share a shift). Inside a
// pair, the even rank takes the first F slot for chunk 0 and the odd rank the second, so a
// forward passes from rank 2j to 2j+1 (and an input gradient from 2j+1 to 2j on the way
// back) without waiting; the hops between pairs wait a few slots, which is the stretch
// above. Each op of micro-batch 0 is placed at the first slot of its kind on its rank
// after its inputs; micro-batch k is shifted by 6k. Every rank's six ops land on six
// different slots mod 6 and every dependency goes strictly forward in time, so each
// rank's order (its ops sorted by time) can never deadlock, for any m.
//
// Because every rank uses the same kind pattern, the block remains a valid periodic
// schedule when the slots are given the real durations, as long as the costs stay in the
// pattern's range; then the steady state has no bubble and only warm-up and cool-down
// cost time. Two patterns:
//   tight    F W F I I W : bubble = 1/2 of 1F1B's at F = I = W; keeps full speed for
//                          F <= I <= F + W.
//   balanced F F I I W W : bubble about 0.6 of 1F1B's at F = I = W; keeps full speed
//                          whenever |F - I| <= W.
// Without costs we use the tight one (unit costs are in its range). When the caller gives
// per-stage costs whose totals fall outside F <= I <= F + W, the balanced one. Outside
// both ranges the order still runs (no deadlock), but the bubble grows with m.
//
// Measured with the engine (half-size stages, 1F1B with the device's whole model):
// peak activations p + 2 of 1F1B's 2p for even p (p + 1 for odd p), e.g. 0.625 at p = 8;
// bubble (tight) 0.50 of 1F1B's at F = I = W, about 0.70 at F = I = 2W.
#include <algorithm>
#include <array>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "schedules/registry.hpp"
#include "schedules/repeated_block.hpp"

namespace bmpipe {

namespace {

constexpr int kPeriod = 6;

struct Pattern {
  std::array<char, kPeriod> kinds;  // 'F', 'I' or 'W' for each slot of the period
  int pair_shift;                   // slots by which pair j's pattern is delayed, per j
};

// See the file comment. The shifts are the ones that make the hops inside a pair free.
constexpr Pattern kTight{{'F', 'W', 'F', 'I', 'I', 'W'}, 3};
constexpr Pattern kBalanced{{'F', 'F', 'I', 'I', 'W', 'W'}, 2};

/// The tight pattern needs F <= I <= F + W (totals over the stages); without costs, unit.
bool tight_fits(const ScheduleCosts& c) {
  const std::size_t n = c.forward.size();
  if (n == 0 || c.backward_input.size() != n || c.backward_weight.size() != n) return true;
  const std::int64_t f = std::accumulate(c.forward.begin(), c.forward.end(), std::int64_t{0});
  const std::int64_t i =
      std::accumulate(c.backward_input.begin(), c.backward_input.end(), std::int64_t{0});
  const std::int64_t w =
      std::accumulate(c.backward_weight.begin(), c.backward_weight.end(), std::int64_t{0});
  return f <= i && i <= f + w;
}

}  // namespace

Schedule make_v_half(const ScheduleParams& params) {
  const int p = params.pp;
  Schedule s = start_schedule("v-half", params);
  const Pattern& pattern = tight_fits(params.costs) ? kTight : kBalanced;
  const int stages = s.num_stages;

  // The two slots of each kind in the pattern, in order.
  auto slots_of = [&](char kind) {
    std::array<int, 2> out{};
    int n = 0;
    for (int x = 0; x < kPeriod; ++x)
      if (pattern.kinds[x] == kind) out[n++] = x;
    return out;
  };
  const std::array<int, 2> f_slots = slots_of('F');
  const std::array<int, 2> i_slots = slots_of('I');
  const std::array<int, 2> w_slots = slots_of('W');

  // Residue (slot mod 6) of a stage's op of the given kind. Even ranks: chunk 0 takes the
  // first F slot, chunk 1 the first I slot, chunk 0 the first W slot; odd ranks the other.
  auto residue = [&](int stage, char kind) {
    const int rank = s.stage_rank[stage];
    const bool chunk0 = stage < p;
    const bool even = rank % 2 == 0;
    int x = 0;
    if (kind == 'F')
      x = f_slots[chunk0 == even ? 0 : 1];
    else if (kind == 'I')
      x = i_slots[chunk0 != even ? 0 : 1];
    else
      x = w_slots[chunk0 == even ? 0 : 1];
    return (pattern.pair_shift * (rank / 2) + x) % kPeriod;
  };
  // First slot at or after `earliest` with the residue of (stage, kind).
  auto place = [&](int stage, char kind, long earliest) {
    const long r = residue(stage, kind);
    return earliest + ((r - earliest % kPeriod) % kPeriod + kPeriod) % kPeriod;
  };

  // The block: slots of F, I and W of every stage for micro-batch 0.
  std::vector<long> tf(stages), ti(stages), tw(stages);
  for (int st = 0; st < stages; ++st) tf[st] = place(st, 'F', st == 0 ? 0 : tf[st - 1] + 1);
  for (int st = stages - 1; st >= 0; --st)
    ti[st] = place(st, 'I', std::max(tf[st] + 1, st == stages - 1 ? 0L : ti[st + 1] + 1));
  for (int st = stages - 1; st >= 0; --st) tw[st] = place(st, 'W', ti[st] + 1);

  // Repeat the block every period and read each rank's order off the timeline.
  detail::fill_from_repeated_block(s, tf, ti, tw, kPeriod);
  return s;
}

}  // namespace bmpipe
