#include "planner/layout_bound.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "schedules/registry.hpp"

namespace bmpipe {

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

LayoutBound layout_lower_bound(const Experiment& e, const Schedule& shape) {
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
  const bool only_f_b = only_fb_pairs_free && !uncertain;
  const bool maybe_fb = has_fb || uncertain;
  // phi (fact a): the least fraction of its halves an op may take.
  double phi = 1.0;
  if (maybe_fb) phi = t.overlap_ms ? 0.0 : std::min(1.0, t.overlap_factor);

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
  if (one_per_rank && mu > 0) {
    double gamma = 1.0;
    for (const LayerRow& row : layers) {
      const double f = static_cast<double>(row.forward);
      const double b = static_cast<double>(row.backward_input + row.backward_weight);
      if (f + b > 0) gamma = std::min(gamma, (phi * f + (only_f_b ? b : 0.0)) / (f + b));
    }
    if (gamma > 0 && gamma <= mu)
      mean = std::max(mean, gamma * work / (1.0 - std::pow(1.0 - gamma / mu, p)));
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
