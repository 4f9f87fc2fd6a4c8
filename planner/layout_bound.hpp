#pragma once
/// \file
/// A lower bound on the iteration time of every plan of one layout, without simulating.
///
/// The layout fixes the schedule, pp, vpp, the micro-batch count m and every layer's
/// costs (the prepared Experiment); the planner chooses the partition (contiguous layers
/// per stage, at least one each: planner/planner.hpp) and a recompute mode per layer. The
/// bound holds for every such plan, so a layout whose bound exceeds a time some other
/// layout reaches cannot win, whatever the planner would find for it.
///
/// Notation (integer ns, per micro-batch, recompute none): layer l costs f_l (F), i_l (I),
/// w_l (W), b_l = i_l + w_l (a full B). S stages, p ranks, rank r holds c_r stages, the
/// lowest of which is stage k_r. f_min = min_l f_l, b_min = min_l b_l, s_min = min_l
/// (f_l + b_l).
///
/// Facts used (sim/simulate.hpp states the engine; experiment.cpp's assemble the costs):
///  (a) A stage's F costs the sum of its layers' f, its I their i, its W their w, its B
///      i + w, plus, for I, B and an FB's backward half, the recompute time of the layers'
///      modes, which is never negative. So recompute none is the cheapest: every term below
///      uses it. An FB pair takes overlap_factor x (F + B + recompute) of its halves, or
///      the fixed overlap_ms; let phi = min(1, overlap_factor) when the schedule has FB ops
///      and no overlap_ms (phi = 0 with overlap_ms: no work term is claimed), else 1. A pair
///      timed from its parts (analytic MoE with an all-to-all, sim/fb_pair.hpp: DualPipe's
///      pairs, and 1F1B's or interleaved's F and B under moe_overlap) takes F + B less the
///      all-to-all its other half hides, below any fixed fraction: phi = 0 then too. Every
///      op then takes at least phi x (the sum of its halves' f and b).
///  (b) A rank runs its ops one at a time. F(s, k) starts after F(s-1, k) ends; B or I(s, k)
///      after B or I(s+1, k) ends; transfers take >= 0 ns.
///  (c) Every stage holds at least one layer.
///
/// Terms:
///  1. Work. Rank r runs m F and m B (or I + W, or their halves in FB pairs) of each of its
///     stages, so it is busy for W_r >= phi m sum_{l on r} (f_l + b_l) (a, and the ops are
///     sequential by b). Summed over ranks: sum_r W_r >= phi m sum_l (f_l + b_l) =: W.
///     And W_r >= phi m c_r s_min (c).
///  2. Fill (and drain). The first op of rank r is an F of its lowest stage k_r (an F of a
///     higher stage of r needs F(k_r, .) on r first; a backward needs its own F first).
///     Its chain F(0, k) .. F(k_r - 1, k) runs on other ranks (the stages below k_r are
///     not on r) and ends no earlier than sum_{s<k_r} F_s >= k_r f_min (b, c); under FB
///     pairs each link of the chain is an op of at least phi f_min. With only F and B
///     ops, rank r's last op is a B of a stage j >= k_r, and B(k_r - 1, k) .. B(0, k)
///     must follow it: another k_r b_min. So rank r's ops lie in [k_r d, T - k_r e] with
///     d = f_min (phi f_min with FB ops) and e = b_min with only F and B ops, else 0.
///     Hence T_pipe >= max_r (k_r (d + e) + W_r). Minimised over every split of W with
///     W_r >= phi m c_r s_min, the max is at least both max_r (k_r (d+e) + phi m c_r
///     s_min) and the mean (W + (d+e) sum_r k_r) / p (a max is at least a mean). For 1F1B
///     with equal stages this is the (p-1)/2 of the classic (p-1)(F+B) bubble that an
///     adversarial partition cannot avoid; for interleaved and V schedules the fill uses
///     single layers only (their first chunks may be one layer each), an honest weak term.
///  2'. One stage per rank (stage r on rank r): the fill counted with the stages' own
///     costs c_s = f_s + b_s instead of single layers. By 2, rank r's ops lie in
///     [sum_{s<r} F_s, T - sum_{s<r} B_s] (the B part with only F and B ops), and
///     sum_{s<r} (phi F_s + [F and B only] B_s) >= gamma P_r with P_r = sum_{s<r} c_s and
///     gamma = min_l (phi f_l + [F and B only] b_l) / (f_l + b_l) (a sum of ratios at
///     least gamma is at least gamma); its work is at least mu c_r, mu = phi m. So
///     T_pipe >= gamma P_r + mu c_r for every r. The least such T over all c >= 0 with
///     sum c = C = sum_l (f_l + b_l) is T* = gamma C / (1 - (1 - gamma/mu)^p) (0 < gamma
///     <= mu): with every rank at T*, P_{r+1} = P_r (1 - gamma/mu) + T*/mu gives P_p = C;
///     if some c had max_r < T*, induction on r gives P_r < P*_r (as 1 - gamma/mu >= 0),
///     so sum c = P_p < C, a contradiction. 1F1B with m >> p: about half the classic
///     (p-1)(F+B) bubble of equal stages, which an adversarial partition cannot beat.
///  3. One micro-batch's chain: F(0..S-1, k) then B or I(S-1..0, k), each op at least phi
///     times its half: T_pipe >= phi sum_l (f_l + i_l).
///  4. The tail. A rank's optimizer step (tail_time) follows its last pipeline op and its
///     gradient reductions; without overlap_grad_reduce the reductions start after the
///     last pipeline op. Both are collective or memory times increasing in the rank's
///     parameters (cost_model.cpp: latency + bytes / bandwidth, 0 at 0 bytes; the step is
///     linear), and a rank holds at least c_min layers' parameters (c). So every rank
///     adds at least g = min_r (reduce(r, P_min) if not overlapped + step(r, P_min)),
///     P_min = c_min x min_l params_l, after its last pipeline op; terms 2 and 3 end at
///     some rank's last pipeline op, so g adds to both. Models with routed experts (a
///     different formula) and measured layers (no tail) take g = 0.
///  5. Memory, and whole layers (with a memory limit M; none: the recompute terms are 0).
///     Only plans that fit are claimed: every device's peak <= M. Facts (planner/
///     memory_model.hpp, experiment.cpp's assemble): rank r's peak is reserved + the static
///     bytes of its layers (+ the tied head copy, dropped here: >= 0) + its activation
///     peak, which is at least sum_j full_t[j] A_j at every allocation moment t of its op
///     order (retained bytes >= 0), A_j = sum of its layers' activation bytes in their
///     modes. For any weights lambda_t >= 0 summing to 1, the max over t is at least the
///     lambda-mix, hence at least n_r sum_j A_j with n_r = min_j sum_t lambda_t full_t[j];
///     n_r is taken as the best over single moments and equal pairs (one stage per rank:
///     n_r = the most micro-batches it holds). With a_l^0 the bytes of layer l in mode
///     none and s_l = a_l^0 - a_l the bytes its mode saves, a rank holding layers X fits
///     only if sum_X s_l >= N(X) := (sum_X static_l + n_r sum_X a_l^0 - (M - reserved)) /
///     n_r. Its modes add rec(X) = sum_X rec_l to every backward (fact a), at least
///     R(X, N), the least of sum_X rec_l over the fractional relaxation: each layer on the
///     lower convex hull of (0, 0) and its modes' (saved, recompute) points (a mode choice
///     is a point of the hull's epigraph), its pieces taken cheapest first (a fractional
///     knapsack: optimal for the relaxation); infinity when even all of X saves less. So
///     W_r >= phi m (sum_X (f_l + b_l) + R(X_r, N(X_r))).
///     5a. One stage per rank: rank r holds a range [i, j) and, as in 2', its ops lie in
///     [gamma P(i), T - ...]: T >= gamma P(i) + mu (P(j) - P(i)) + phi m R([i, j), N) with P
///     the prefix sums of f + b. This cost grows with j (one more layer l adds N >= its own
///     a_l^0 >= what it can save, so R cannot fall) and, for a fixed j, does not grow with
///     i (mu >= gamma; fewer layers). So whether some partition meets T is decided by
///     giving each rank, in order, the most layers that end by T (leaving one per later
///     rank): an exchange argument (a later start is never worse for the next rank). The
///     least such integer T, by bisection, is a bound; without a memory limit it is term
///     2' in whole layers. When no partition fits at any T (no plan fits) nothing is
///     claimed.
///     5b. Any placement: with sigma_r = min_l (static_l + n_r a_l^0) / (f_l + b_l), rank
///     r's layers X of work w hold >= sigma_r w bytes and must save N >= (sigma_r w - (M -
///     reserved)) / n_r per micro-batch. Let G(s) = max_l (bytes of layer l's hull pieces
///     of slope <= s) / (f_l + b_l): X saves at most w G(s) bytes at slopes <= s, so the
///     fractional knapsack over X (pieces cheapest first) pays at least what it pays when
///     w G(s) bytes are on offer at every slope s: w R1(N / w), R1(x) = the integral over
///     [0, x] of G's inverse (convex, increasing; infinite beyond G's top). So W_r >= mu w
///     + phi m w R1(N / w) =: g_r(w), increasing in w (N / w grows with w), and T >= k_r d +
///     g_r(w_r) (term 2's start) with sum_r w_r = sum_l (f_l + b_l) and w_r >= c_r s_min.
///     The least integer T for which the largest w_r each rank allows sum to the total is a
///     bound (term 2's mean, with memory).
///  6. The op order (issue 20: interleaved and V schedules, whose fill term 2 counts in
///     single layers). Generators that do not read costs or rank candidates draw the same
///     order for every plan (`shape`; not under moe_overlap, whose pairing make_schedule
///     adds). Make each op a node of a graph with an edge from every op that must end
///     before it starts: the op before it on its rank (b), F(s-1, k) for F(s, k), F(s, k)
///     and B or I(s+1, k) for B or I(s, k), I(s, k) for W(s, k) (sim/simulate.hpp: an FB
///     node has both halves' inputs). A node's duration is at least its least duration
///     with recompute none (a): F_s, B_s = I_s + W_s, I_s, W_s for F, B, I, W, and for
///     an FB pair phi (F_a + B_b) (phi as in (a); 0 with overlap_ms or pairs timed from
///     their parts). Along any path P the ops run one after another, so for every plan x,
///     T_pipe(x) >= len_P(x) := sum over P's nodes of those durations = sum_s (a_s F_s(x)
///     + c_s I_s(x) + e_s W_s(x)), with a, c, e how often P counts each stage's part. For
///     weights lambda >= 0 summing to 1 over a set of paths, T_pipe(x) >= max_P len_P(x)
///     >= sum_P lambda_P len_P(x) >= min_y sum_P lambda_P len_P(y) over every partition y
///     (each stage one layer or more, c); that minimum is linear in the layers' costs, so
///     a dynamic program over (stage, layers so far) finds it exactly. Any lambda gives a
///     bound; the paths and weights are only a search for a good one: the longest path
///     at the partition the previous weights chose (starting from the even split) joins
///     the set, and the weights follow Hedge (exp of each path's total length over the
///     partitions tried), at most 40 rounds, stopping once the bound meets the least
///     longest path seen (then it equals the best plan's time at zero communication,
///     recompute and tail). For interleaved schedules the paths cross every chunk, so the
///     fill is counted in whole stages of every chunk, not single layers of the first.
///     With a memory limit M (term 5's facts): a plan x fits only if, at every allocation
///     moment t of every rank r, h_rt(x) := sum_{j on r} (static_j + full_t[j] A_j(x)) -
///     (M - reserved) <= 0, and its B, I and FB nodes also take the recompute of their
///     layers' modes (fact a). For multipliers nu >= 0, every plan x that fits has
///     T_pipe(x) >= sum_P lambda_P len_P(x) >= sum_P lambda_P len_P(x) + sum nu_rt h_rt(x)
///     >= the least of that sum over every partition and every mode of every layer (weak
///     duality). A layer's part of the sum depends only on its own stage and mode, so the
///     same dynamic program finds it, each layer at its cheapest mode for its stage. The
///     first 40 rounds keep nu = 0 (recompute none: the bound without a limit); 20 more move
///     nu by projected subgradient steps (the excess h of the plan the weights chose), so
///     the limit never lowers the term.
/// Bound = max(term 2, term 3, term 5, term 6) + g, rounded down.

#include <algorithm>

#include "experiment/experiment.hpp"
#include "schedules/op.hpp"

namespace bmpipe {

/// What the bound is made of, for tests and reports (ns).
struct LayoutBound {
  Time work_fill = 0;  ///< terms 2 and 5
  Time chain = 0;      ///< term 3
  Time tail = 0;       ///< term 4
  Time order = 0;      ///< term 6
  Time total() const { return std::max({work_fill, chain, order}) + tail; }
};

/// The bound of every plan of `e` (its config's schedule, pp, vpp, micro-batches) run under
/// a schedule of `shape`'s placement and op kinds (without a memory limit any m: only its
/// stage_rank and which op kinds it uses are read; with one, its op order at the config's
/// m, for the micro-batches in flight). `memory_limit` > 0 (bytes per device): the bound
/// of every plan whose peak stays within it (term 5); 0: of every plan.
LayoutBound layout_lower_bound(const Experiment& e, const Schedule& shape,
                               std::int64_t memory_limit = 0);

/// The schedule of `e`'s config as the bound reads it: its generator at the config's pp,
/// vpp and m without costs or candidate ranking (cheap; the ops' kinds and placement are
/// those of the real one). Throws ConfigError as make_schedule does.
Schedule bound_shape(const Experiment& e);

}  // namespace bmpipe
