#include "planner/layout_bound.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

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

/// The lower convex hull of (0, 0) and each mode's (bytes saved, recompute ns) of every
/// layer, as pieces sorted by slope (ties by layer: deterministic).
std::vector<SavePiece> save_pieces(const std::vector<LayerRow>& layers) {
  std::vector<SavePiece> out;
  for (int l = 0; l < static_cast<int>(layers.size()); ++l) {
    const LayerRow& row = layers[l];
    const double a0 = static_cast<double>(row.modes[Recompute::none]->activation_bytes);
    std::vector<std::pair<double, double>> pts;  // (saved, recompute)
    for (Recompute r : kRecomputingModes)
      if (row.has(r)) {
        const double saved = a0 - static_cast<double>(row.modes[r]->activation_bytes);
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
  for (const std::vector<Op>& ops : shape.ops)
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
  bool experts = false;
  for (const LayerRow& row : layers) {
    const Time b = row.backward_input + row.backward_weight;
    f_min = std::min(f_min, row.forward);
    b_min = std::min(b_min, b);
    s_min = std::min(s_min, row.forward + b);
    work += static_cast<double>(row.forward + b);
    chain += static_cast<double>(row.forward + row.backward_input);
    params_min = std::min(params_min, row.param_count);
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
  if (memory_limit > 0) {
    const std::vector<RankMemory> prof = memory_profile(shape);
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
    pre_act[l + 1] = pre_act[l] + static_cast<double>(row.modes[Recompute::none]->activation_bytes);
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
    // x their work w_r, and recompute saves bytes at rho ns per byte at best.
    double rho = std::numeric_limits<double>::infinity();
    for (const SavePiece& piece : pieces) rho = std::min(rho, piece.slope);
    std::vector<double> sigma(p, std::numeric_limits<double>::infinity());
    for (int r = 0; r < p; ++r)
      for (int l = 0; l < L; ++l) {
        const double w = pre_work[l + 1] - pre_work[l];
        const double bytes =
            pre_static[l + 1] - pre_static[l] + in_flight[r] * (pre_act[l + 1] - pre_act[l]);
        if (w > 0) sigma[r] = std::min(sigma[r], bytes / w);
      }
    const auto most_work = [&](int r, double T) {  // the largest w_r that ends by T
      const double y = T - lowest[r] * d;
      if (y < 0) return -1.0;
      double w = y / mu;
      if (std::isfinite(rho) && in_flight[r] > 0 && sigma[r] * w > cap) {
        const double kappa = phi * static_cast<double>(m) * rho / in_flight[r];
        w = std::max(cap / sigma[r], (y + kappa * cap) / (mu + kappa * sigma[r]));
      }
      return w;
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
    double hi = mu * pre_work[L] + d * S;
    if (std::isfinite(rho))
      for (int r = 0; r < p; ++r)
        hi += phi * static_cast<double>(m) * rho *
              std::max(0.0, pre_static[L] + in_flight[r] * pre_act[L]) /
              std::max(1e-9, in_flight[r]);
    if (feasible(hi)) mean = std::max(mean, least_feasible(0, hi, feasible));
  }
  // llround in the engine's FB durations may shave up to 0.5 ns per op: 1 ns per op slack.
  const double slack = maybe_fb ? 2.0 * static_cast<double>(m) * S : 0.0;
  const auto down = [&](double v) {
    return static_cast<Time>(std::max(0.0, std::floor(v - slack)));
  };
  out.work_fill = down(std::max(per_rank, mean));
  out.chain = down(phi * chain);

  // Term 4: the tail every rank adds after its last pipeline op.
  if (e.analytic && !experts && c_min > 0 && c_min < std::numeric_limits<int>::max()) {
    const std::int64_t params = params_min * c_min;
    Time g = std::numeric_limits<Time>::max();
    for (int r = 0; r < p; ++r) {
      Time t_r = optimizer_tail_time(e, r, params, 0);
      if (!t.optimizer.overlap_grad_reduce) t_r += stage_grad_reduce_time(e, r, params, 0);
      g = std::min(g, t_r);
    }
    out.tail = std::max<Time>(0, g);
  }
  return out;
}

}  // namespace bmpipe
