#include "planner/layout_bound.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "planner/memory_model.hpp"
#include "schedules/registry.hpp"

namespace bmpipe {

namespace {

/// One piece of a layer's recompute frontier (term 5): `bytes` of activation saved per
/// micro-batch at `slope` ns of recompute per byte.
struct SavePiece {
  double slope = 0;
  double bytes = 0;
  int layer = 0;
};

/// The least bytes a micro-batch of a layer in one mode holds on the device: all it keeps,
/// less what activation offload may move to the host (a bound: the engine keeps some
/// micro-batches' offloaded bytes on the device).
double least_device_bytes(const LayerModeCost& c) {
  return static_cast<double>(c.activation_bytes - c.offload_bytes);
}

/// The lower convex hull of (0, 0) and each mode's (bytes saved, recompute ns) of every
/// layer, as pieces sorted by slope (ties by layer: deterministic).
std::vector<SavePiece> save_pieces(const std::vector<LayerRow>& layers) {
  std::vector<SavePiece> out;
  for (int l = 0; l < static_cast<int>(layers.size()); ++l) {
    const LayerRow& row = layers[l];
    const double a0 = least_device_bytes(*row.modes[Recompute::none]);
    std::vector<std::pair<double, double>> pts;  // (saved, recompute)
    // Offload saves bytes at no recompute: a piece of slope 0 (its copies' time is not
    // charged, so the bound stays below any plan's); selective_offload at selective's.
    for (Recompute r : kAllModes)
      if (r != Recompute::none && row.has(r)) {
        const double saved = a0 - least_device_bytes(*row.modes[r]);
        if (saved > 0) pts.emplace_back(saved, static_cast<double>(row.modes[r]->recompute));
      }
    std::sort(pts.begin(), pts.end());
    double x = 0, y = 0;  // walk the hull from the origin: the least slope each time
    while (true) {
      double best = std::numeric_limits<double>::infinity();
      std::size_t at = pts.size();
      for (std::size_t k = 0; k < pts.size(); ++k)
        if (pts[k].first > x) {
          const double slope = std::max(0.0, pts[k].second - y) / (pts[k].first - x);
          if (slope <= best) best = slope, at = k;  // <=: the farther of equal slopes
        }
      if (at == pts.size()) break;
      out.push_back(SavePiece{best, pts[at].first - x, l});
      y = std::max(y, pts[at].second);
      x = pts[at].first;
    }
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const SavePiece& a, const SavePiece& b) { return a.slope < b.slope; });
  return out;
}

/// The least recompute (ns per micro-batch) of layers [i, j) that saves `need` bytes per
/// micro-batch in the fractional relaxation; infinity when even all of it saves less.
double least_recompute(const std::vector<SavePiece>& pieces, int i, int j, double need) {
  if (need <= 0) return 0;
  double rec = 0;
  for (const SavePiece& piece : pieces) {
    if (piece.layer < i || piece.layer >= j) continue;
    const double take = std::min(need, piece.bytes);
    rec += take * piece.slope;
    need -= take;
    if (need <= 0) return rec;
  }
  return std::numeric_limits<double>::infinity();
}

/// Term 5b: the least recompute per ns of work that saves x bytes per ns of work, over any
/// set of layers. With G(s) = max_l (bytes layer l saves at slopes <= s) / (f_l + b_l),
/// layers of work w save at most w G(s) bytes at slopes <= s, so saving x w bytes costs at
/// least w times the integral of the slopes over [0, x] of G's inverse: `least(x)`,
/// convex, increasing, infinity beyond G's top (no set of layers saves that much).
struct SaveFrontier {
  std::vector<double> slope, top, cost;  // by slope: G at it, the integral up to top
  double least(double x) const {
    if (x <= 0) return 0;
    const auto it = std::lower_bound(top.begin(), top.end(), x);
    if (it == top.end()) return std::numeric_limits<double>::infinity();
    const std::size_t k = static_cast<std::size_t>(it - top.begin());
    const double below = k == 0 ? 0.0 : top[k - 1];
    return (k == 0 ? 0.0 : cost[k - 1]) + slope[k] * (x - below);
  }
};

SaveFrontier save_frontier(const std::vector<SavePiece>& pieces,
                           const std::vector<LayerRow>& layers) {
  SaveFrontier out;
  std::vector<double> saved(layers.size(), 0.0);  // per layer, at slopes so far
  double g = 0;
  for (std::size_t k = 0; k < pieces.size(); ++k) {
    const SavePiece& piece = pieces[k];
    const LayerRow& row = layers[piece.layer];
    const double work = static_cast<double>(row.forward + row.backward_input + row.backward_weight);
    saved[piece.layer] += piece.bytes;
    // A layer of no work that saves bytes: unbounded per ns of work at this slope.
    g = std::max(g, work > 0 ? saved[piece.layer] / work : std::numeric_limits<double>::infinity());
    if (k + 1 < pieces.size() && pieces[k + 1].slope == piece.slope) continue;
    const double below = out.top.empty() ? 0.0 : out.top.back();
    if (g <= below) continue;
    const double cost_below = out.cost.empty() ? 0.0 : out.cost.back();
    out.slope.push_back(piece.slope);
    out.top.push_back(g);
    out.cost.push_back(std::isfinite(g) ? cost_below + piece.slope * (g - below) : cost_below);
    if (!std::isfinite(g)) break;
  }
  return out;
}

/// The least integer T in (lo, hi] with feasible(T), feasible(hi) true and monotone.
template <class F>
double least_feasible(double lo, double hi, F&& feasible) {
  lo = std::floor(lo), hi = std::ceil(hi);
  while (hi - lo > 1) {
    const double mid = std::floor((lo + hi) / 2);
    (feasible(mid) ? hi : lo) = mid;
  }
  return hi;
}

/// Term 6: the schedule's own op order as a graph. Node n is one op; `pred` lists the ops
/// that must end before it starts (fact b, and the op before it on its rank); each node's
/// least duration is linear in the stage costs: `factor` x (F of stage fs + I of stage is
/// + W of stage ws), -1 for a part it does not have.
struct OrderGraph {
  std::vector<int> first, pred;  // node n's predecessors: pred[first[n] .. first[n + 1])
  std::vector<int> fs, is, ws;
  std::vector<double> factor;
  int stages = 0;
};

/// The graph of `shape` in a topological order, or an empty graph when the order cannot
/// complete (then nothing is claimed). `fb_factor` is phi for FB pairs.
OrderGraph order_graph(const Schedule& shape, double fb_factor) {
  const int S = shape.num_stages, M = shape.num_microbatches;
  OrderGraph g;
  g.stages = S;
  // Node ids in rank order first; the node of each F half and backward-input half by (s, k).
  std::vector<int> fnode(static_cast<std::size_t>(S) * M, -1), bnode = fnode;
  std::vector<int> fs, is, ws, rank_prev;
  std::vector<double> factor;
  const auto at = [&](int s, int k) { return static_cast<std::size_t>(s) * M + k; };
  const auto valid = [&](int s, int k) { return s >= 0 && s < S && k >= 0 && k < M; };
  for (const OpList& ops : shape.ops) {
    int prev = -1;
    for (const Op& op : ops) {
      const int n = static_cast<int>(fs.size());
      int f = -1, i = -1, w = -1;
      double fac = 1.0;
      switch (op.kind) {
        case OpKind::F:
          f = op.stage;
          break;
        case OpKind::B:
          i = w = op.stage;
          break;
        case OpKind::I:
          i = op.stage;
          break;
        case OpKind::W:
          w = op.stage;
          break;
        case OpKind::FB:
          f = op.stage, i = w = op.stage2, fac = fb_factor;
          break;
      }
      const int kb = op.kind == OpKind::FB ? op.microbatch2 : op.microbatch;
      if ((f >= 0 && !valid(f, op.microbatch)) || (i >= 0 && !valid(i, kb)) ||
          (w >= 0 && !valid(w, kb)))
        return {};
      if (f >= 0) fnode[at(f, op.microbatch)] = n;
      if (i >= 0) bnode[at(i, kb)] = n;
      fs.push_back(f), is.push_back(i), ws.push_back(w), factor.push_back(fac);
      rank_prev.push_back(prev);
      prev = n;
    }
  }
  const int N = static_cast<int>(fs.size());
  std::vector<std::vector<int>> in(N);
  int n = 0;
  for (const OpList& ops : shape.ops)
    for (const Op& op : ops) {
      std::vector<int>& p = in[n];
      if (rank_prev[n] >= 0) p.push_back(rank_prev[n]);
      const int kb = op.kind == OpKind::FB ? op.microbatch2 : op.microbatch;
      if (fs[n] > 0) p.push_back(fnode[at(fs[n] - 1, op.microbatch)]);  // F(s-1, k)
      if (is[n] >= 0 && op.kind != OpKind::W) {
        p.push_back(fnode[at(is[n], kb)]);                         // its own F
        if (is[n] + 1 < S) p.push_back(bnode[at(is[n] + 1, kb)]);  // B or I(s+1, k)
      }
      if (op.kind == OpKind::W) p.push_back(bnode[at(ws[n], kb)]);  // I(s, k)
      for (int q : p)
        if (q < 0 || q == n) return {};  // an input no op produces: not a schedule
      ++n;
    }
  // Kahn's algorithm; the order is by node id among the ready ones (deterministic).
  std::vector<int> indeg(N, 0);
  std::vector<std::vector<int>> out(N);
  for (int v = 0; v < N; ++v)
    for (int q : in[v]) ++indeg[v], out[q].push_back(v);
  std::vector<int> order, ready;
  for (int v = N - 1; v >= 0; --v)
    if (indeg[v] == 0) ready.push_back(v);
  std::vector<int> id(N, -1);
  while (!ready.empty()) {
    const int v = ready.back();
    ready.pop_back();
    id[v] = static_cast<int>(order.size());
    order.push_back(v);
    for (int u : out[v])
      if (--indeg[u] == 0) ready.push_back(u);
  }
  if (static_cast<int>(order.size()) != N) return {};  // a cycle: the order cannot complete
  g.first.assign(1, 0);
  for (int v : order) {
    for (int q : in[v]) g.pred.push_back(id[q]);
    g.first.push_back(static_cast<int>(g.pred.size()));
    g.fs.push_back(fs[v]), g.is.push_back(is[v]), g.ws.push_back(ws[v]);
    g.factor.push_back(factor[v]);
  }
  return g;
}

/// Per stage: how many times a path counts its F, I and W (each times the op's factor).
struct StageWeights {
  std::vector<double> f, i, w;
  explicit StageWeights(int S = 0) : f(S, 0.0), i(S, 0.0), w(S, 0.0) {}
};

/// The longest path of `g` when the stages cost F, I, W (ns): its length and its weights.
double longest_path(const OrderGraph& g, const std::vector<double>& F, const std::vector<double>& I,
                    const std::vector<double>& W, StageWeights& weights) {
  const int N = static_cast<int>(g.fs.size());
  std::vector<double> end(N);
  std::vector<int> from(N, -1);
  int last = -1;
  for (int v = 0; v < N; ++v) {
    double start = 0;
    for (int k = g.first[v]; k < g.first[v + 1]; ++k)
      if (from[v] < 0 || end[g.pred[k]] > start) start = end[g.pred[k]], from[v] = g.pred[k];
    double d = 0;
    if (g.fs[v] >= 0) d += F[g.fs[v]];
    if (g.is[v] >= 0) d += I[g.is[v]];
    if (g.ws[v] >= 0) d += W[g.ws[v]];
    end[v] = start + g.factor[v] * d;
    if (last < 0 || end[v] > end[last]) last = v;
  }
  weights = StageWeights(g.stages);
  for (int v = last; v >= 0; v = from[v]) {
    if (g.fs[v] >= 0) weights.f[g.fs[v]] += g.factor[v];
    if (g.is[v] >= 0) weights.i[g.is[v]] += g.factor[v];
    if (g.ws[v] >= 0) weights.w[g.ws[v]] += g.factor[v];
  }
  return last < 0 ? 0.0 : end[last];
}

/// Term 6 under a memory limit: rank r's bytes at its allocation moment t are at least
/// sum_{j on r} (static_j + full_t[j] A_j) (term 5's facts), and a plan fits only if that
/// is at most `cap` for every (r, t).
struct OrderMemory {
  double cap = std::numeric_limits<double>::infinity();  ///< M - reserved
  /// Per rank, per moment: (stage, micro-batches holding all of its activations).
  std::vector<std::vector<std::vector<std::pair<int, int>>>> moments;
  bool on() const { return std::isfinite(cap) && !moments.empty(); }
};

/// A layer's modes as the Lagrangian prices them.
struct ModeCosts {
  std::vector<std::vector<double>> rec, act;  // per layer, per mode it has (none first)
};

/// The least of sum_s (a_s F_s + c_s (I_s + Rec_s) + e_s W_s) + sum_{r,t} nu_rt (rank r's
/// bytes at moment t - cap) over every partition of the layers into the stages in order,
/// each stage one layer or more (fact c), and every layer's mode: per stage, a layer's
/// cost is separable, so a dynamic program over (stage, layers so far) finds it exactly.
/// Without a memory part (nu empty) the modes are all none. Returns the least value and,
/// in `counts` and `modes` (a mode index per layer), a plan reaching it.
double least_lagrangian(const StageWeights& wt, const std::vector<LayerRow>& layers,
                        const ModeCosts& mc, const OrderMemory& mem,
                        const std::vector<std::vector<double>>& nu, std::vector<int>& counts,
                        std::vector<int>& modes) {
  const int S = static_cast<int>(wt.f.size());
  const int L = static_cast<int>(layers.size());
  const double inf = std::numeric_limits<double>::infinity();
  // Per stage: the multipliers' weight on its static bytes and on its activations.
  std::vector<double> on_static(S, 0), on_act(S, 0);
  double constant = 0;
  if (!nu.empty())
    for (std::size_t r = 0; r < mem.moments.size(); ++r)
      for (std::size_t t = 0; t < mem.moments[r].size(); ++t) {
        const double v = nu[r][t];
        if (v <= 0) continue;
        constant -= v * mem.cap;
        for (const auto& [stage, full] : mem.moments[r][t])
          on_static[stage] += v, on_act[stage] += v * full;
      }
  // cost[s][l]: layer l in stage s at its best mode there; pick[s][l]: that mode.
  std::vector<double> prefix(static_cast<std::size_t>(S) * (L + 1), 0);
  std::vector<int> pick(static_cast<std::size_t>(S) * L, 0);
  for (int s = 0; s < S; ++s) {
    double* P = &prefix[static_cast<std::size_t>(s) * (L + 1)];
    for (int l = 0; l < L; ++l) {
      const LayerRow& row = layers[l];
      double c = wt.f[s] * static_cast<double>(row.forward) +
                 wt.i[s] * static_cast<double>(row.backward_input) +
                 wt.w[s] * static_cast<double>(row.backward_weight) +
                 on_static[s] * static_cast<double>(row.static_bytes);
      double least = inf;
      int arg = 0;
      const std::size_t n = nu.empty() ? 1 : mc.rec[l].size();
      for (std::size_t k = 0; k < n; ++k) {
        const double v = wt.i[s] * mc.rec[l][k] + on_act[s] * mc.act[l][k];
        if (v < least) least = v, arg = static_cast<int>(k);
      }
      pick[static_cast<std::size_t>(s) * L + l] = arg;
      P[l + 1] = P[l] + c + least;
    }
  }
  std::vector<double> prev(L + 1, inf), cur(L + 1, inf);
  std::vector<int> choice(static_cast<std::size_t>(S) * (L + 1), -1);
  prev[0] = 0;
  for (int s = 0; s < S; ++s) {
    std::fill(cur.begin(), cur.end(), inf);
    const double* P = &prefix[static_cast<std::size_t>(s) * (L + 1)];
    double best = inf;
    int arg = -1;
    for (int l = s + 1; l <= L - (S - 1 - s); ++l) {
      const int j = l - 1;  // stage s takes layers [j, l)
      if (prev[j] < inf && prev[j] - P[j] < best) best = prev[j] - P[j], arg = j;
      if (arg >= 0) cur[l] = best + P[l], choice[static_cast<std::size_t>(s) * (L + 1) + l] = arg;
    }
    std::swap(prev, cur);
  }
  counts.assign(S, 0);
  modes.assign(L, 0);
  for (int s = S - 1, l = L; s >= 0; --s) {
    const int j = choice[static_cast<std::size_t>(s) * (L + 1) + l];
    counts[s] = l - j;
    for (int k = j; k < l; ++k) modes[k] = pick[static_cast<std::size_t>(s) * L + k];
    l = j;
  }
  return prev[L] + constant;
}

/// Term 6's value (ns, before slack and tail): the best Lagrangian bound found in at most
/// `rounds` rounds (see the header's proof); 0 when the graph is empty.
double order_term(const OrderGraph& g, const std::vector<LayerRow>& layers, const OrderMemory& mem,
                  int rounds) {
  const int S = g.stages;
  const int L = static_cast<int>(layers.size());
  if (g.fs.empty() || S < 1 || L < S) return 0;
  ModeCosts mc;
  mc.rec.resize(L), mc.act.resize(L);
  for (int l = 0; l < L; ++l)
    for (Recompute r : kAllModes)
      if (layers[l].has(r)) {
        mc.rec[l].push_back(static_cast<double>(layers[l].modes[r]->recompute));
        mc.act[l].push_back(least_device_bytes(*layers[l].modes[r]));
      }
  // A plan's stage costs: F, I with its recompute, W; and its bytes at each moment.
  const auto stage_costs = [&](const std::vector<int>& counts, const std::vector<int>& modes,
                               std::vector<double>& F, std::vector<double>& I,
                               std::vector<double>& W, std::vector<double>& bytes,
                               std::vector<double>& act) {
    F.assign(S, 0), I.assign(S, 0), W.assign(S, 0), bytes.assign(S, 0), act.assign(S, 0);
    for (int s = 0, l = 0; s < S; ++s)
      for (int k = 0; k < counts[s]; ++k, ++l) {
        const LayerRow& row = layers[l];
        F[s] += static_cast<double>(row.forward);
        I[s] += static_cast<double>(row.backward_input) + mc.rec[l][modes[l]];
        W[s] += static_cast<double>(row.backward_weight);
        bytes[s] += static_cast<double>(row.static_bytes);
        act[s] += mc.act[l][modes[l]];
      }
  };
  std::vector<int> counts(S, L / S);  // the first partition: as even as the layers allow
  for (int s = 0; s < L % S; ++s) ++counts[s];
  std::vector<int> modes(L, 0);
  std::vector<StageWeights> paths;
  std::vector<double> gain;  // each path's length summed over the plans tried
  std::vector<double> F, I, W, bytes, act;
  std::vector<std::vector<double>> nu;
  if (mem.on())
    for (const auto& moments : mem.moments) nu.emplace_back(moments.size(), 0.0);
  // upper: the least longest path seen (Hedge's scale); fitted: of plans that fit, the best
  // plan's time at zero communication, recompute as chosen, and tail when the bound meets it.
  double lower = 0, upper = std::numeric_limits<double>::infinity(), fitted = upper;
  double theta = 1.0;  // the multipliers' step, halved when the bound stalls
  int stalled = 0;
  // Two phases: `rounds` with the multipliers at 0 (recompute none: the bound without a
  // memory limit), then, under a limit, rounds / 2 more that move them. The first phase's
  // bound holds with a limit too (recompute is never negative), so the limit never lowers
  // the term.
  const std::vector<std::vector<double>> unpriced;
  bool priced = false;
  int priced_left = mem.on() ? rounds / 2 : 0;
  for (int iter = 1;; ++iter) {
    if (!priced && iter > rounds) {
      if (priced_left == 0) break;
      priced = true;
    }
    if (priced && priced_left-- == 0) break;
    stage_costs(counts, modes, F, I, W, bytes, act);
    StageWeights path;
    const double longest = longest_path(g, F, I, W, path);
    // The plan's peak bytes against the limit, moment by moment: the multipliers' step.
    double excess_sq = 0;
    bool fits = true;
    std::vector<std::vector<double>> excess(nu.size());
    for (std::size_t r = 0; r < nu.size(); ++r)
      for (const auto& moment : mem.moments[r]) {
        double held = -mem.cap;
        for (const auto& [stage, full] : moment) held += bytes[stage] + full * act[stage];
        excess[r].push_back(held);
        if (held > 0) fits = false;
        excess_sq += held * held;
      }
    upper = std::min(upper, longest);
    if (fits) fitted = std::min(fitted, longest);
    paths.push_back(path);
    gain.push_back(0);
    // Hedge over the paths found: every path's gain grows by its length at this plan (a
    // path found later is charged its gain on the plans before it as well).
    const auto length = [&](const StageWeights& p) {
      double v = 0;
      for (int s = 0; s < S; ++s) v += p.f[s] * F[s] + p.i[s] * I[s] + p.w[s] * W[s];
      return v;
    };
    for (std::size_t k = 0; k < paths.size(); ++k) gain[k] += length(paths[k]);
    const double top = *std::max_element(gain.begin(), gain.end());
    const double eta =
        std::sqrt(8.0 * std::log(std::max<double>(2, paths.size())) / iter) / std::max(1.0, upper);
    StageWeights mix(S);
    double total = 0;
    for (std::size_t k = 0; k < paths.size(); ++k) {
      const double lambda = std::exp(eta * (gain[k] - top));
      total += lambda;
      for (int s = 0; s < S; ++s) {
        mix.f[s] += lambda * paths[k].f[s];
        mix.i[s] += lambda * paths[k].i[s];
        mix.w[s] += lambda * paths[k].w[s];
      }
    }
    for (int s = 0; s < S; ++s) mix.f[s] /= total, mix.i[s] /= total, mix.w[s] /= total;
    // Projected subgradient on the multipliers, toward a target a little above the bound.
    if (priced && excess_sq > 0) {
      const double target = std::max(lower, 1.0) * 1.05;
      const double step = theta * std::max(0.0, target - lower) / excess_sq;
      for (std::size_t r = 0; r < nu.size(); ++r)
        for (std::size_t t = 0; t < nu[r].size(); ++t)
          nu[r][t] = std::max(0.0, nu[r][t] + step * excess[r][t]);
    }
    const double v = least_lagrangian(mix, layers, mc, mem, priced ? nu : unpriced, counts, modes);
    if (v > lower) {
      lower = v;
      stalled = 0;
    } else if (priced && ++stalled >= 4) {
      theta /= 2, stalled = 0;
    }
    if (lower >= fitted * (1 - 1e-4)) break;  // the best plan that fits, at zero cost
    if (!priced && lower >= upper * (1 - 1e-4)) {
      if (priced_left == 0) break;
      priced = true;  // the unpriced bound is met, by a plan that does not fit
    }
  }
  return lower;
}

}  // namespace

Schedule bound_shape(const Experiment& e) {
  const Config& c = e.config;
  const ScheduleInfo* info = find_schedule(c.training.schedule);
  if (!info) c.fail("training.schedule", "unknown schedule '" + c.training.schedule + "'");
  try {
    return info->generate(
        ScheduleParams{c.training.pp, c.training.microbatches, c.training.vpp, {}, {}});
  } catch (const ScheduleError& ex) {
    c.fail("training.schedule", ex.what());
  }
}

LayoutBound layout_lower_bound(const Experiment& e, const Schedule& shape,
                               std::int64_t memory_limit) {
  LayoutBound out;
  const std::vector<LayerRow>& layers = e.layers.layers;
  if (layers.empty() || shape.num_ranks < 1) return out;
  const TrainingConfig& t = e.config.training;
  const ScheduleInfo* info = find_schedule(shape.name);
  // Which op kinds the real schedule may use. Generators that plan with costs or rank
  // candidates may draw another order than `shape`'s: claim nothing of their kinds.
  const bool uncertain = !info || info->needs_costs || info->ranks_candidates;
  bool has_fb = false, only_fb_pairs_free = true;  // only F and B ops
  for (const OpList& ops : shape.ops)
    for (const Op& op : ops) {
      if (op.kind == OpKind::FB) has_fb = true;
      if (op.kind != OpKind::F && op.kind != OpKind::B) only_fb_pairs_free = false;
    }
  // Pairs timed from their parts (analytic MoE layers with an all-to-all: DualPipe's F&B
  // pairs, and 1F1B's or interleaved's under moe_overlap, sim/fb_pair.hpp) take F + B less
  // whatever all-to-all the other half hides, below any fixed fraction of F + B: claim no
  // pair time for them (phi 0, as with overlap_ms), and under moe_overlap treat 1F1B's F and
  // B as possibly paired.
  const bool computed_pairs =
      e.layers.all_to_all && !t.overlap_ms && e.config.lines.count("training.overlap_factor") == 0;
  const bool paired_f_b = computed_pairs && t.moe_overlap;
  const bool only_f_b = only_fb_pairs_free && !uncertain && !paired_f_b;
  const bool maybe_fb = has_fb || uncertain || paired_f_b;
  // phi (fact a): the least fraction of its halves an op may take.
  double phi = 1.0;
  if (maybe_fb) phi = t.overlap_ms || computed_pairs ? 0.0 : std::min(1.0, t.overlap_factor);

  const std::int64_t m = t.microbatches;
  const int p = shape.num_ranks;
  const int S = shape.num_stages;
  Time f_min = std::numeric_limits<Time>::max(), b_min = f_min, s_min = f_min;
  double work = 0, chain = 0;  // sum_l (f + b), sum_l (f + i)
  std::int64_t params_min = std::numeric_limits<std::int64_t>::max();
  // The least bytes a parameter ZeRO-1/2's gather moves (LayerRow::gather_bytes): FP8
  // weights under fp8_param_gather move fewer than dtype_bytes.
  double gather_per_param_min = std::numeric_limits<double>::max();
  bool experts = false;
  for (const LayerRow& row : layers) {
    const Time b = row.backward_input + row.backward_weight;
    f_min = std::min(f_min, row.forward);
    b_min = std::min(b_min, b);
    s_min = std::min(s_min, row.forward + b);
    work += static_cast<double>(row.forward + b);
    chain += static_cast<double>(row.forward + row.backward_input);
    params_min = std::min(params_min, row.param_count);
    if (row.param_count > 0)
      gather_per_param_min =
          std::min(gather_per_param_min, row.gather_bytes / static_cast<double>(row.param_count));
    experts = experts || row.expert_param_count > 0;
  }
  // k_r (lowest stage of rank r) and c_r (its stages), from the placement.
  std::vector<int> lowest(p, S), chunks(p, 0);
  for (int s = 0; s < S; ++s) {
    const int r = shape.stage_rank[s];
    lowest[r] = std::min(lowest[r], s);
    ++chunks[r];
  }
  const double d = phi * static_cast<double>(f_min) + (only_f_b ? static_cast<double>(b_min) : 0);
  double sum_k = 0, per_rank = 0;
  int c_min = std::numeric_limits<int>::max();
  for (int r = 0; r < p; ++r) {
    sum_k += lowest[r];
    c_min = std::min(c_min, chunks[r]);
    per_rank = std::max(per_rank, lowest[r] * d + phi * static_cast<double>(m) * chunks[r] *
                                                      static_cast<double>(s_min));
  }
  double mean = (phi * static_cast<double>(m) * work + d * sum_k) / p;
  // One stage per rank (stage r on rank r): the fill with the stages' own costs (term 2').
  bool one_per_rank = S == p;
  for (int s = 0; s < S && one_per_rank; ++s) one_per_rank = shape.stage_rank[s] == s;
  const double mu = phi * static_cast<double>(m);
  double gamma = 1.0;
  for (const LayerRow& row : layers) {
    const double f = static_cast<double>(row.forward);
    const double b = static_cast<double>(row.backward_input + row.backward_weight);
    if (f + b > 0) gamma = std::min(gamma, (phi * f + (only_f_b ? b : 0.0)) / (f + b));
  }
  if (one_per_rank && mu > 0 && gamma > 0 && gamma <= mu)
    mean = std::max(mean, gamma * work / (1.0 - std::pow(1.0 - gamma / mu, p)));

  // Term 5: memory, and (one stage per rank) the partition in whole layers.
  const int L = static_cast<int>(layers.size());
  const double cap = memory_limit > 0 ? static_cast<double>(memory_limit - e.reserved_bytes)
                                      : std::numeric_limits<double>::infinity();
  std::vector<double> in_flight(p, 0.0);  // n_r
  const std::vector<RankMemory> prof =
      memory_limit > 0 ? memory_profile(shape) : std::vector<RankMemory>{};
  if (memory_limit > 0) {
    for (int r = 0; r < p; ++r) {
      const std::vector<MemoryMoment>& mo = prof[r].moments;
      const auto least = [](const std::vector<double>& v) {
        return v.empty() ? 0.0 : *std::min_element(v.begin(), v.end());
      };
      // Pairs of moments for a few of them (V and interleaved ranks); single ones beyond.
      const bool pairs = mo.size() <= 64;
      for (std::size_t a = 0; a < mo.size(); ++a)
        for (std::size_t b = a; b < (pairs ? mo.size() : a + 1);
             ++b) {  // moment a, and a and b half each
          std::vector<double> mix(mo[a].full.size());
          for (std::size_t j = 0; j < mix.size(); ++j)
            mix[j] = (mo[a].full[j] + mo[b].full[j]) / 2.0;
          in_flight[r] = std::max(in_flight[r], least(mix));
        }
    }
  }
  const std::vector<SavePiece> pieces =
      memory_limit > 0 ? save_pieces(layers) : std::vector<SavePiece>{};
  std::vector<double> pre_work(L + 1, 0), pre_static(L + 1, 0), pre_act(L + 1, 0);
  for (int l = 0; l < L; ++l) {
    const LayerRow& row = layers[l];
    pre_work[l + 1] =
        pre_work[l] + static_cast<double>(row.forward + row.backward_input + row.backward_weight);
    pre_static[l + 1] = pre_static[l] + static_cast<double>(row.static_bytes);
    pre_act[l + 1] = pre_act[l] + least_device_bytes(*row.modes[Recompute::none]);
  }
  // The recompute rank r needs (ns per micro-batch) when it holds layers [i, j).
  const auto rank_recompute = [&](int r, int i, int j) {
    if (memory_limit <= 0 || in_flight[r] <= 0) return 0.0;
    const double held = pre_static[j] - pre_static[i] + in_flight[r] * (pre_act[j] - pre_act[i]);
    return least_recompute(pieces, i, j, (held - cap) / in_flight[r]);
  };
  if (one_per_rank && mu > 0 && gamma <= mu) {
    // 5a: ranks take layers greedily, each the most that ends by T (rank_cost below grows
    // with j and, for a fixed j, falls as i grows, so taking more never hurts a later rank).
    const auto rank_cost = [&](int r, int i, int j) {
      return gamma * pre_work[i] + mu * (pre_work[j] - pre_work[i]) +
             phi * static_cast<double>(m) * rank_recompute(r, i, j);
    };
    const auto feasible = [&](double T) {
      const double limit = T * (1 + 1e-12) + 1e-6;  // rounding may only lower the bound
      int i = 0;
      for (int r = 0; r < p; ++r) {
        const int most = L - (p - 1 - r);
        if (i >= most || rank_cost(r, i, i + 1) > limit) return false;
        int lo = i + 1, hi = most;  // the largest j in [lo, hi] with cost <= limit
        while (lo < hi) {
          const int mid = (lo + hi + 1) / 2;
          if (rank_cost(r, i, mid) <= limit)
            lo = mid;
          else
            hi = mid - 1;
        }
        i = lo;
      }
      return i == L;
    };
    // Every T works when the memory does (about 31 years in ns: beyond any layout).
    const double hi = 1e18;
    if (feasible(hi)) mean = std::max(mean, least_feasible(0, hi, feasible));
  }
  if (memory_limit > 0 && mu > 0) {
    // 5b: any placement. Rank r's layers X_r hold at least sigma_r (bytes per ns of work)
    // x their work w_r, and their recompute saves bytes no cheaper than the frontier
    // `per_work` allows for work w_r.
    const SaveFrontier per_work = save_frontier(pieces, layers);
    std::vector<double> sigma(p, std::numeric_limits<double>::infinity());
    for (int r = 0; r < p; ++r)
      for (int l = 0; l < L; ++l) {
        const double w = pre_work[l + 1] - pre_work[l];
        const double bytes =
            pre_static[l + 1] - pre_static[l] + in_flight[r] * (pre_act[l + 1] - pre_act[l]);
        if (w > 0) sigma[r] = std::min(sigma[r], bytes / w);
      }
    // The least time rank r's work w takes: mu w plus the recompute of the bytes it must
    // save per micro-batch, (sigma_r w - cap) / n_r; increasing in w (the header's proof).
    const auto rank_time = [&](int r, double w) {
      double t_r = mu * w;
      if (in_flight[r] > 0 && sigma[r] * w > cap)
        t_r += phi * static_cast<double>(m) * w *
               per_work.least((sigma[r] * w - cap) / in_flight[r] / w);
      return t_r;
    };
    const auto most_work = [&](int r, double T) {  // the largest w_r that ends by T (or above)
      const double y = T - lowest[r] * d;
      if (y < 0) return -1.0;
      double lo = 0, hi = y / mu;
      if (rank_time(r, hi) <= y) return hi;
      for (int k = 0; k < 100 && lo < hi; ++k) {
        const double mid = (lo + hi) / 2;
        if (mid <= lo || mid >= hi) break;
        (rank_time(r, mid) <= y ? lo : hi) = mid;
      }
      return hi;  // the upper end: rounding may only lower the bound
    };
    const auto feasible = [&](double T) {
      double sum = 0;
      for (int r = 0; r < p; ++r) {
        const double w = most_work(r, T);
        if (w < chunks[r] * static_cast<double>(s_min)) return false;
        sum += w;
      }
      return sum >= pre_work[L] * (1 - 1e-12);
    };
    // Every T works when the memory does (about 31 years in ns: beyond any layout).
    const double hi = 1e18;
    if (feasible(hi)) mean = std::max(mean, least_feasible(0, hi, feasible));
  }
  // llround in the engine's FB durations may shave up to 0.5 ns per op: 1 ns per op slack.
  const double slack = maybe_fb ? 2.0 * static_cast<double>(m) * S : 0.0;
  const auto down = [&](double v) {
    return static_cast<Time>(std::max(0.0, std::floor(v - slack)));
  };
  out.work_fill = down(std::max(per_rank, mean));
  out.chain = down(phi * chain);
  // Term 6: the op order's weighted paths. Not for generators that may draw another order,
  // nor under moe_overlap (make_schedule pairs 1F1B's and interleaved's F and B).
  const bool paired_order = t.moe_overlap && (shape.name == "1f1b" || shape.name == "interleaved");
  if (!uncertain && !paired_order && !paired_f_b) {
    const double fb_factor = t.overlap_ms || computed_pairs ? 0.0 : std::min(1.0, t.overlap_factor);
    // T_pipe is whole ns: it is at least the least integer above v less its rounding error
    // (relative 1e-9 is far above a double's for sums of this size) and the FB slack.
    OrderMemory mem;
    if (memory_limit > 0) {
      mem.cap = cap;
      for (const RankMemory& rank : prof) {
        auto& moments = mem.moments.emplace_back();
        for (const MemoryMoment& mo : rank.moments) {
          auto& held = moments.emplace_back();
          for (std::size_t j = 0; j < rank.stages.size(); ++j)
            held.emplace_back(rank.stages[j], mo.full[j]);
        }
      }
    }
    const double v = order_term(order_graph(shape, fb_factor), layers, mem, 40);
    out.order = static_cast<Time>(std::max(0.0, std::ceil(v - 1e-9 * v - 1e-3 - slack)));
  }

  // Term 4: the tail every rank adds after its last pipeline op.
  if (e.analytic && !experts && c_min > 0 && c_min < std::numeric_limits<int>::max()) {
    const std::int64_t params = params_min * c_min;
    Time g = std::numeric_limits<Time>::max();
    const std::optional<double> gather =
        gather_per_param_min < std::numeric_limits<double>::max()
            ? std::optional<double>(static_cast<double>(params) * gather_per_param_min)
            : std::nullopt;
    for (int r = 0; r < p; ++r) {
      Time t_r = optimizer_tail_time(e, r, params, 0, std::numeric_limits<Time>::max(), gather);
      // Overlapped (grad_reduce_overlapped) the reductions may hide.
      if (!grad_reduce_overlapped(t.optimizer)) t_r += stage_grad_reduce_time(e, r, params, 0);
      g = std::min(g, t_r);
    }
    out.tail = std::max<Time>(0, g);
  }
  return out;
}

}  // namespace bmpipe
