#include "planner/space.hpp"

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <limits>

#include "frameworks/exporters.hpp"
#include "planner/planner.hpp"

namespace bmpipe::planner {

std::string Candidate::key() const {
  // Every entry as a base-128 varint: exact for any layer count (a config may have 100 000
  // layers; two bytes per entry made partitions 65536 apart share a key, and so a cached
  // score), and one byte for entries below 128, so most keys fit the short-string buffer.
  // The entry counts are fixed within a space, so the concatenation decodes one way.
  std::string k;
  k.reserve(partition.size() + choice.size());
  const auto put = [&k](int v) {
    auto u = static_cast<std::uint32_t>(v);
    for (; u >= 0x80; u >>= 7) k.push_back(static_cast<char>((u & 0x7f) | 0x80));
    k.push_back(static_cast<char>(u));
  };
  for (int v : partition) put(v);
  for (int v : choice) put(v);
  return k;
}

namespace {

/// RankMemory::offload_resident for `e`: 2 + training.offload_lead when some layer offloads
/// activations, else every micro-batch (no offload).
int offload_resident(const Experiment& e) {
  for (const LayerRow& row : e.layers.layers)
    for (Recompute r : kAllModes)
      if (row.modes[r] && row.modes[r]->offload_bytes > 0)
        return 2 + std::min(e.config.training.offload_lead, 1 << 20);
  return std::numeric_limits<int>::max();
}

}  // namespace

Space::Space(const Experiment& e, Schedule schedule, std::int64_t limit,
             const Exporter* expressible)
    : e_(e),
      schedule_(std::move(schedule)),
      compiled_(CompiledSchedule::borrowing(schedule_)),
      memory_(memory_profile(schedule_, offload_resident(e))),
      table_(e, expressible && expressible->recompute_stated == RecomputeStated::first_n),
      limit_(limit),
      expressible_(expressible) {
  stages_ = schedule_.num_stages;
  ranks_ = schedule_.num_ranks;
  layers_ = e.num_layers();
  busy_prefix_.assign(1, 0);
  for (const LayerRow& row : e.layers.layers)
    busy_prefix_.push_back(busy_prefix_.back() + row.forward + row.backward_input +
                           row.backward_weight);
  for (const RankMemory& r : memory_) multi_ = multi_ || r.stages.size() > 1;
  // An overlapped F&B pair may take less than its halves, so busy time is no bound then.
  for (const auto& list : schedule_.ops)
    for (const Op& op : list) bound_valid_ = bound_valid_ && op.kind != OpKind::FB;
}

Derived Space::derive(const Candidate& c) const {
  Derived d;
  d.plan.partition = c.partition;
  d.plan.recompute.assign(layers_, Recompute::none);
  std::vector<int> first(stages_ + 1, 0);
  for (int s = 0; s < stages_; ++s) first[s + 1] = first[s] + c.partition[s];
  const std::int64_t m = schedule_.num_microbatches;
  for (int r = 0; r < ranks_; ++r) {
    const RankMemory& mem = memory_[r];
    std::vector<const StageOptions*> options;
    std::int64_t fixed = e_.reserved_bytes;
    Time busy = 0;
    for (int s : mem.stages) {
      options.push_back(&table_.get(first[s], c.partition[s]));
      fixed += table_.static_bytes(first[s], c.partition[s]);
      if (stages_ > 1 && first[s + 1] == layers_) fixed += e_.layers.head_copy_static_bytes;
      busy += busy_prefix_[first[s + 1]] - busy_prefix_[first[s]];
    }
    const std::vector<RankChoice>& choices = choices_of(r, first, c.partition, options, fixed);
    if (choices.empty()) {
      const std::int64_t least = fixed + least_peak(mem, options);
      if (d.fits || least - limit_ > d.excess) {
        d.excess = least - limit_;
        d.worst_rank = r;
        d.worst_peak = least;
      }
      d.fits = false;
      continue;
    }
    const RankChoice& pick = choices[std::min<std::size_t>(c.choice[r], choices.size() - 1)];
    for (std::size_t j = 0; j < mem.stages.size(); ++j) {
      const int s = mem.stages[j];
      const StageOptions& so = *options[j];
      apply_option(so, so.options[pick.option[j]], first[s], d.plan.recompute);
    }
    if (bound_valid_) d.lower_bound = std::max(d.lower_bound, m * (busy + pick.total_recompute()));
  }
  if (expressible_ && expressible_->recompute_stated == RecomputeStated::one_rule && d.fits)
    derive_rule(c, d);
  if (expressible_ && d.fits) d.expressible = expressible_by(e_, d.plan, schedule_, expressible_);
  return d;
}

std::vector<Plan> Space::rule_plans(const std::vector<int>& partition, RecomputeRules rules) const {
  const Plan base{partition, std::vector<Recompute>(layers_, Recompute::none)};
  const ExportLayout layout = export_layout(e_, base, schedule_);
  std::vector<Plan> out;
  for (const std::vector<Recompute>& modes : rules(layout.partition)) {
    Plan p = with_decoder_modes(e_, base, modes);
    // A layer without the mode (a measured model may have no selective form) would run
    // something the flags do not say.
    if (export_layout(e_, p, schedule_).recompute != modes) continue;
    out.push_back(std::move(p));
  }
  return out;
}

void Space::derive_rule(const Candidate& c, Derived& d) const {
  std::vector<int> first(stages_ + 1, 0);
  for (int s = 0; s < stages_; ++s) first[s + 1] = first[s] + c.partition[s];
  const std::int64_t m = schedule_.num_microbatches;
  struct Fitting {
    Plan plan;
    Time bound;
  };
  std::vector<Fitting> fitting;
  std::int64_t least_excess = std::numeric_limits<std::int64_t>::max();
  int least_rank = -1;
  std::int64_t least_peak_bytes = 0;
  for (Plan& p : rule_plans(c.partition, expressible_->recompute_rules)) {
    Time bound = 0;
    std::int64_t excess = std::numeric_limits<std::int64_t>::min();
    int worst = -1;
    std::int64_t worst_peak = 0;
    for (int r = 0; r < ranks_; ++r) {
      const RankMemory& mem = memory_[r];
      std::int64_t fixed = e_.reserved_bytes;
      std::vector<std::int64_t> a, kept, off;
      Time busy = 0;
      for (int s : mem.stages) {
        fixed += table_.static_bytes(first[s], c.partition[s]);
        if (stages_ > 1 && first[s + 1] == layers_) fixed += e_.layers.head_copy_static_bytes;
        busy += busy_prefix_[first[s + 1]] - busy_prefix_[first[s]];
        std::int64_t sa = 0, sr = 0, so = 0;
        for (int l = first[s]; l < first[s + 1]; ++l) {
          const LayerModeCost& cost = *e_.layers.layers[l].modes[p.recompute[l]];
          sa += cost.activation_bytes;
          sr += cost.weight_grad_retained_bytes.value_or(cost.activation_bytes);
          so += cost.offload_bytes;
          busy += cost.recompute;
        }
        a.push_back(sa);
        kept.push_back(sr);
        off.push_back(so);
      }
      const std::int64_t peak = fixed + peak_activation(mem, a, kept, off);
      if (peak - limit_ > excess) excess = peak - limit_, worst = r, worst_peak = peak;
      bound = std::max(bound, m * busy);
    }
    if (excess <= 0)
      fitting.push_back(Fitting{std::move(p), bound});
    else if (excess < least_excess)
      least_excess = excess, least_rank = worst, least_peak_bytes = worst_peak;
  }
  if (fitting.empty()) {
    d.fits = false;
    d.excess = least_excess;
    d.worst_rank = least_rank;
    d.worst_peak = least_peak_bytes;
    return;
  }
  std::stable_sort(fitting.begin(), fitting.end(),
                   [](const Fitting& x, const Fitting& y) { return x.bound < y.bound; });
  const std::size_t k =
      multi_ ? std::min<std::size_t>(static_cast<std::size_t>(c.choice[0]), fitting.size() - 1) : 0;
  d.plan = std::move(fitting[k].plan);
  d.lower_bound = bound_valid_ ? fitting[k].bound : 0;
}

const std::vector<RankChoice>& Space::choices_of(int r, const std::vector<int>& first,
                                                 const std::vector<int>& partition,
                                                 const std::vector<const StageOptions*>& options,
                                                 std::int64_t fixed) const {
  std::string key(reinterpret_cast<const char*>(&r), sizeof r);
  for (int s : memory_[r].stages) {
    key.append(reinterpret_cast<const char*>(&first[s]), sizeof(int));
    key.append(reinterpret_cast<const char*>(&partition[s]), sizeof(int));
  }
  {
    std::lock_guard<std::mutex> lock(choices_mutex_);
    if (auto it = choices_.find(key); it != choices_.end()) return *it->second;
  }
  auto made = std::make_unique<const std::vector<RankChoice>>(
      rank_choices(memory_[r], options, limit_ - fixed));
  std::lock_guard<std::mutex> lock(choices_mutex_);
  return *choices_.emplace(std::move(key), std::move(made)).first->second;
}

std::vector<int> Space::choice_counts(const std::vector<int>& partition) const {
  std::vector<int> first(stages_ + 1, 0);
  for (int s = 0; s < stages_; ++s) first[s + 1] = first[s] + partition[s];
  std::vector<int> out(ranks_, 1);
  for (int r = 0; r < ranks_; ++r) {
    const RankMemory& mem = memory_[r];
    if (mem.stages.size() < 2) continue;
    std::vector<const StageOptions*> options;
    std::int64_t fixed = e_.reserved_bytes;
    for (int s : mem.stages) {
      options.push_back(&table_.get(first[s], partition[s]));
      fixed += table_.static_bytes(first[s], partition[s]);
      if (stages_ > 1 && first[s + 1] == layers_) fixed += e_.layers.head_copy_static_bytes;
    }
    out[r] =
        std::max<int>(1, static_cast<int>(choices_of(r, first, partition, options, fixed).size()));
  }
  return out;
}

SimResult Space::run(const Plan& plan, SimInput& in) const {
  assemble(e_, plan, schedule_, in);
  in.capacity_bytes.assign(ranks_, limit_);
  return simulate(in, compiled_);
}

namespace {

/// Stage `from` gives `k` layers to stage `to`, unless it would be left empty.
bool shift(Candidate& n, int from, int to, int k) {
  if (n.partition[from] <= k) return false;
  n.partition[from] -= k;
  n.partition[to] += k;
  return true;
}

bool one_layer_across_a_boundary(const Space& space, Rng& rng, Candidate& n) {
  const int b = rng.below(space.stages() - 1);
  const bool right = rng.below(2);
  return right ? shift(n, b, b + 1, 1) : shift(n, b + 1, b, 1);
}

bool several_layers_across_a_boundary(const Space& space, Rng& rng, Candidate& n) {
  const int avg = std::max(2, space.layers() / space.stages());
  const int k = 2 + rng.below(std::max(1, avg / 2));
  const int b = rng.below(space.stages() - 1);
  const bool right = rng.below(2);
  return right ? shift(n, b, b + 1, k) : shift(n, b + 1, b, k);
}

/// The stages between the two shift by one layer, in effect.
bool one_layer_between_distant_stages(const Space& space, Rng& rng, Candidate& n) {
  const int i = rng.below(space.stages());
  const int j = rng.below(space.stages());
  if (std::abs(i - j) < 2) return false;
  return shift(n, i, j, 1);
}

bool another_recompute_choice(const Space& space, Rng& rng, Candidate& n) {
  const int r = rng.below(space.ranks());
  const int was = n.choice[r];
  n.choice[r] = std::clamp(was + (rng.below(2) ? 1 : -1), 0, kLastChoice);
  return n.choice[r] != was;
}

// The weights are the old percentages (45 / 20 / 20 / 15): with the draw rule of moves(),
// a seed proposes exactly the candidates it proposed before the moves became a table.
constexpr Move kMoves[] = {
    {"one-layer", 45, [](const Space& s) { return s.stages() >= 2; }, one_layer_across_a_boundary},
    {"several-layers", 20, [](const Space& s) { return s.stages() >= 2; },
     several_layers_across_a_boundary},
    {"distant-stages", 20, [](const Space& s) { return s.stages() >= 3; },
     one_layer_between_distant_stages},
    {"recompute-choice", 15, [](const Space& s) { return s.multi(); }, another_recompute_choice},
};

constexpr int kTotalWeight = [] {
  int total = 0;
  for (const Move& m : kMoves) total += m.weight;
  return total;
}();

constexpr Filter kFilters[] = {
    // The weights and least activations of a rank exceed the limit.
    {"memory",
     [](const Derived& d, double) -> std::optional<Rejection> {
       if (d.fits) return std::nullopt;
       return Rejection{kInfeasible + static_cast<double>(d.excess), true};
     }},
    // plan --expressible: the framework cannot state the plan (a layout its flags or keys
    // cannot say). Scored as a failed run, so it is never the search's best.
    {"expressible",
     [](const Derived& d, double) -> std::optional<Rejection> {
       if (d.expressible) return std::nullopt;
       return Rejection{kInfeasible * 2, true};
     }},
    // Even the busiest rank's own work is slower than any plan the acceptance rule would
    // take. Not cached (its exact score is unknown) and never picked.
    {"lower-bound",
     [](const Derived& d, double threshold) -> std::optional<Rejection> {
       if (!(static_cast<double>(d.lower_bound) > threshold)) return std::nullopt;
       return Rejection{std::numeric_limits<double>::infinity(), false};
     }},
};

}  // namespace

std::span<const Move> moves() {
  return kMoves;
}

std::span<const Filter> filters() {
  return kFilters;
}

Proposal propose(const Space& space, Rng& rng, const Candidate& c) {
  Candidate n = c;
  if (space.stages() < 2) {  // no boundary to move
    if (space.multi()) n.choice[0] = std::max(0, n.choice[0] + (rng.below(2) ? 1 : -1));
    return {n, -1};
  }
  for (int attempt = 0; attempt < 16; ++attempt) {
    n = c;
    const int draw = rng.below(kTotalWeight);
    std::size_t k = 0;
    for (int sum = kMoves[0].weight; draw >= sum;) sum += kMoves[++k].weight;
    while (k < std::size(kMoves) && !kMoves[k].applies(space)) ++k;
    if (k == std::size(kMoves)) continue;
    if (kMoves[k].apply(space, rng, n)) return {n, static_cast<int>(k)};
  }
  return {n, -1};
}

double score_of(const SimResult& r) {
  if (!r.ok) return kInfeasible * 2;
  if (!r.fits) {
    std::int64_t over = 0;
    for (const DeviceResult& d : r.devices) over = std::max(over, d.peak_bytes - d.capacity_bytes);
    return kInfeasible + static_cast<double>(over);
  }
  return static_cast<double>(r.iteration_time);
}

}  // namespace bmpipe::planner
