#include "planner/stage_options.hpp"

#include <algorithm>
#include <limits>
#include <numeric>

#include "planner/export_layout.hpp"

namespace bmpipe {

namespace {

// Beyond this many undominated options a range keeps an evenly spread subset (by recompute
// time, always with both ends). Ranges of one or two layer types stay far below it.
constexpr std::size_t kMaxOptions = 2048;

bool same_modes(const LayerRow& a, const LayerRow& b) {
  for (Recompute r : kAllModes) {
    if (a.modes[r].has_value() != b.modes[r].has_value()) return false;
    if (!a.modes[r]) continue;
    const LayerModeCost &x = *a.modes[r], &y = *b.modes[r];
    if (x.recompute != y.recompute || x.activation_bytes != y.activation_bytes ||
        x.weight_grad_retained_bytes != y.weight_grad_retained_bytes ||
        x.offload_bytes != y.offload_bytes || x.offload_copy != y.offload_copy)
      return false;
  }
  return true;
}

/// Keeps the options no other beats in cost (recompute plus the offload price), A and R at
/// once; sorts by cost. Sorted by cost, an option is beaten exactly when an earlier one has
/// A and R no larger; the earlier ones are kept as a staircase (A increasing, R
/// decreasing), so each test is one lookup. With activation offload A is read as A - O,
/// what stays on the device for most micro-batches in flight (an estimate: every plan is
/// simulated). With `per_layer` (a table with the offload mode) the test is exact for the
/// memory model instead: a moment holds (full - min(full, resident)) (A - O) +
/// min(full, resident) A + retained R (moment_bytes), a sum of A - O, A and R with
/// non-negative weights, so an option is beaten when an earlier one has all three no
/// larger; tested against every option kept (their number stays small).
void prune(std::vector<StageOption>& v, bool per_layer) {
  const auto kept_on_device = [](const StageOption& o) { return o.activation - o.offload; };
  std::sort(v.begin(), v.end(), [&](const StageOption& a, const StageOption& b) {
    if (a.cost() != b.cost()) return a.cost() < b.cost();
    if (kept_on_device(a) != kept_on_device(b)) return kept_on_device(a) < kept_on_device(b);
    if (per_layer && a.activation != b.activation) return a.activation < b.activation;
    return a.retained < b.retained;
  });
  if (per_layer) {
    std::vector<StageOption> kept;
    kept.reserve(v.size());
    for (StageOption& o : v) {
      const bool beaten = std::any_of(kept.begin(), kept.end(), [&](const StageOption& k) {
        return kept_on_device(k) <= kept_on_device(o) && k.activation <= o.activation &&
               k.retained <= o.retained;
      });
      if (!beaten) kept.push_back(std::move(o));
    }
    v = std::move(kept);
    return;
  }
  std::vector<StageOption> kept;
  kept.reserve(v.size());
  std::map<std::int64_t, std::int64_t> stairs;  // A -> least R among kept with that A or less
  for (StageOption& o : v) {
    const std::int64_t a = kept_on_device(o);
    auto it = stairs.upper_bound(a);
    if (it != stairs.begin() && std::prev(it)->second <= o.retained) continue;  // beaten
    // o joins the staircase; steps it now covers (A >= o's and R >= o's) go.
    auto from = stairs.lower_bound(a);
    while (from != stairs.end() && from->second >= o.retained) from = stairs.erase(from);
    stairs[a] = o.retained;
    kept.push_back(std::move(o));
  }
  v = std::move(kept);
}

void thin(std::vector<StageOption>& v) {
  if (v.size() <= kMaxOptions) return;
  std::vector<StageOption> out;
  out.reserve(kMaxOptions);
  for (std::size_t k = 0; k < kMaxOptions; ++k)
    out.push_back(std::move(v[k * (v.size() - 1) / (kMaxOptions - 1)]));
  v = std::move(out);
}

/// The index of the first layer of the range (starting at `first`) with local type `t`.
int type_layer(const StageOptions& so, int t, int first) {
  for (std::size_t i = 0; i < so.type_of.size(); ++i)
    if (so.type_of[i] == t) return first + static_cast<int>(i);
  return first;
}

}  // namespace

StageOptionTable::StageOptionTable(const Experiment& experiment, bool first_n)
    : e_(experiment), first_n_(first_n), per_layer_(experiment.layers.has_offload_mode()) {
  prefix_static_.assign(1, 0);
  for (const LayerRow& row : e_.layers.layers)
    prefix_static_.push_back(prefix_static_.back() + row.static_bytes);

  if (first_n_) {
    decoder_.assign(e_.layers.layers.size(), 0);
    for (int l : decoder_layers(e_)) decoder_[l] = 1;
  }
}

const StageOptions* StageOptionTable::make_first_n(int first, int count) const {
  auto made = std::make_unique<StageOptions>();
  StageOptions& so = *made;
  so.first_n = true;
  so.type_of.assign(count, 0);
  so.decoder.assign(decoder_.begin() + first, decoder_.begin() + first + count);
  std::vector<int> layers;  // the range's decoder layers, in order
  for (int i = 0; i < count; ++i)
    if (decoder_[first + i]) layers.push_back(first + i);
  const int d = static_cast<int>(layers.size());
  // Non-decoder layers stay none: their cost is in every option.
  StageOption base;
  for (int i = 0; i < count; ++i)
    if (!decoder_[first + i]) {
      const LayerModeCost& c = *e_.layers.layers[first + i].modes[Recompute::none];
      base.recompute += c.recompute;
      base.activation += c.activation_bytes;
      base.retained += c.weight_grad_retained_bytes.value_or(c.activation_bytes);
      base.offload += c.offload_bytes;
    }
  // Per mode, prefix sums over the decoder layers (and how many of them lack the mode), so
  // each (f, g) costs O(1).
  struct Sums {
    std::vector<Time> recompute{0};
    std::vector<std::int64_t> activation{0}, retained{0}, offload{0};
    std::vector<int> missing{0};
  };
  PerMode<Sums> sum;
  for (Recompute r : kAllRecompute)
    for (int k = 0; k < d; ++k) {
      const LayerRow& row = e_.layers.layers[layers[k]];
      Sums& x = sum[r];
      const LayerModeCost c = row.has(r) ? *row.modes[r] : LayerModeCost{};
      x.recompute.push_back(x.recompute.back() + c.recompute);
      x.activation.push_back(x.activation.back() + c.activation_bytes);
      x.retained.push_back(x.retained.back() +
                           c.weight_grad_retained_bytes.value_or(c.activation_bytes));
      x.offload.push_back(x.offload.back() + c.offload_bytes);
      x.missing.push_back(x.missing.back() + (row.has(r) ? 0 : 1));
    }
  std::vector<StageOption> all;
  for (int f = 0; f <= d; ++f)
    for (int g = 0; f + g <= d; ++g) {
      // Decoder layers [0, f) full, [f, f + g) selective, [f + g, d) none.
      const std::pair<Recompute, std::pair<int, int>> parts[] = {{Recompute::full, {0, f}},
                                                                 {Recompute::selective, {f, f + g}},
                                                                 {Recompute::none, {f + g, d}}};
      StageOption o = base;
      bool possible = true;
      for (const auto& [r, range] : parts) {
        const Sums& x = sum[r];
        const auto [a, b] = range;
        possible = possible && x.missing[b] == x.missing[a];
        o.recompute += x.recompute[b] - x.recompute[a];
        o.activation += x.activation[b] - x.activation[a];
        o.retained += x.retained[b] - x.retained[a];
        o.offload += x.offload[b] - x.offload[a];
      }
      if (!possible) continue;
      o.first_n_full = f;
      o.first_n_selective = g;
      all.push_back(std::move(o));
    }
  prune(all, false);
  if (all.size() > kMaxOptions) so.thinned = true;
  thin(all);
  so.options = std::move(all);
  const auto key = std::make_pair(first, count);
  std::lock_guard<std::mutex> lock(mutex_);
  auto [it, inserted] = cache_.emplace(key, std::move(made));
  return it->second.get();
}

const StageOptions& StageOptionTable::get(int first, int count) const {
  const auto key = std::make_pair(first, count);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = cache_.find(key); it != cache_.end()) return *it->second;
  }
  if (first_n_) return *make_first_n(first, count);
  // A range is its one-shorter prefix plus one layer: the options are the prefix's options
  // with that layer in each of its modes, pruned. (An option that is beaten in the prefix
  // stays beaten with the same layer added, so pruning the prefix first loses nothing.)
  auto made = std::make_unique<StageOptions>();
  StageOptions& so = *made;
  if (count > 0) {
    const StageOptions& prefix = get(first, count - 1);
    const int l = first + count - 1;
    const LayerRow& row = e_.layers.layers[l];
    so.type_of = prefix.type_of;
    so.thinned = prefix.thinned;
    // The new layer's type: one the prefix already has with the same modes, or a new one.
    int t = 0;
    const int types = prefix.types;
    while (t < types && !same_modes(e_.layers.layers[type_layer(prefix, t, first)], row)) ++t;
    so.type_of.push_back(t);
    so.types = std::max(types, t + 1);
    so.prefix = &prefix;
    std::vector<StageOption> next;
    next.reserve(prefix.options.size() * kLayerModes);
    for (std::size_t k = 0; k < prefix.options.size(); ++k) {
      for (Recompute r : kAllModes) {
        if (!row.has(r)) continue;
        const LayerModeCost& c = *row.modes[r];
        // An offload mode that moves nothing is none (or selective) again.
        if (is_offload_mode(r) && c.offload_bytes == 0) continue;
        StageOption o = prefix.options[k];
        o.base = static_cast<std::uint32_t>(k);
        o.mode = r;
        o.recompute += c.recompute;
        // An offload mode's price: its copy out and its copy back, none hidden.
        if (is_offload_mode(r)) o.copy += 2 * c.offload_copy;
        o.activation += c.activation_bytes;
        o.retained += c.weight_grad_retained_bytes.value_or(c.activation_bytes);
        o.offload += c.offload_bytes;
        next.push_back(o);
      }
    }
    prune(next, per_layer_);
    if (next.size() > kMaxOptions) so.thinned = true;
    thin(next);
    so.options = std::move(next);
  } else {
    so.options.assign(1, StageOption{});
  }
  std::lock_guard<std::mutex> lock(mutex_);
  auto [it, inserted] = cache_.emplace(key, std::move(made));
  return *it->second;
}

Time RankChoice::total_recompute() const {
  return std::accumulate(recompute.begin(), recompute.end(), Time{0});
}

Time RankChoice::total_cost() const {
  return std::accumulate(cost.begin(), cost.end(), Time{0});
}

namespace {

struct Search {
  const RankMemory& memory;
  const std::vector<const StageOptions*>& stages;
  std::int64_t budget;
  std::size_t limit;
  // Per moment: the bytes held so far by the stages already chosen.
  std::vector<std::int64_t> held;
  // Per stage j and moment k: the least bytes stages j, j + 1, ... can add to moment k.
  std::vector<std::vector<std::int64_t>> least_from;
  // Per stage j and moment k: the most bytes stages j, j + 1, ... can add to moment k.
  std::vector<std::vector<std::int64_t>> most_from;
  // Per stage j: the least cost (StageOption::cost) stages j, j + 1, ... can take. The
  // search minimises cost, recompute plus the offload price; below, "recompute" reads as
  // that cost (the same without offload layers).
  std::vector<Time> least_recompute_from;
  Time partial_recompute{0};
  // Branch and bound on total recompute. Only the `limit` choices of least total recompute
  // are returned, and `cutoff` is the limit-th least total among those found so far (no
  // cutoff before `limit` are found). It never grows: a new choice either joins `found` or
  // replaces ones it beats on every stage, whose totals are at least its own. So a branch
  // whose least total exceeds `cutoff` cannot reach the returned choices, and what it would
  // have removed from `found` (choices it beats, hence also above `cutoff`) is cut off at the
  // end anyway: the result is the unbounded search's, only found sooner. Without it a rank
  // holding vpp 8 stages searched every combination of their options (minutes for the
  // Llama-3.1-405B example).
  Time cutoff = std::numeric_limits<Time>::max();
  std::vector<int> chosen;
  std::vector<RankChoice> found;

  void update_cutoff() {
    if (found.size() < limit) return;
    std::vector<Time> totals;
    totals.reserve(found.size());
    for (const RankChoice& f : found) totals.push_back(f.total_cost());
    std::nth_element(totals.begin(), totals.begin() + static_cast<std::ptrdiff_t>(limit - 1),
                     totals.end());
    cutoff = totals[limit - 1];
  }

  std::int64_t add(std::size_t k, std::size_t j, const StageOption& o) const {
    const MemoryMoment& m = memory.moments[k];
    return moment_bytes(m.full[j], m.retained[j], o.activation, o.retained, o.offload,
                        memory.offload_resident);
  }

  void run(std::size_t j) {
    const std::size_t moments = memory.moments.size();
    if (j == stages.size()) {
      RankChoice c;
      c.option = chosen;
      std::int64_t peak = 0;
      for (std::size_t k = 0; k < moments; ++k) peak = std::max(peak, held[k]);
      c.peak = peak;
      for (std::size_t s = 0; s < stages.size(); ++s) {
        c.recompute.push_back(stages[s]->options[chosen[s]].recompute);
        c.cost.push_back(stages[s]->options[chosen[s]].cost());
      }
      // Keep only choices no other found beats on every stage's cost.
      for (const RankChoice& f : found) {
        bool better_or_equal = true;
        for (std::size_t s = 0; s < stages.size(); ++s)
          better_or_equal = better_or_equal && f.cost[s] <= c.cost[s];
        if (better_or_equal) return;
      }
      std::erase_if(found, [&](const RankChoice& f) {
        for (std::size_t s = 0; s < stages.size(); ++s)
          if (c.cost[s] > f.cost[s]) return false;
        return true;
      });
      found.push_back(std::move(c));
      update_cutoff();
      return;
    }
    const std::vector<StageOption>& options = stages[j]->options;
    for (std::size_t i = 0; i < options.size(); ++i) {
      // Options come by increasing cost (prune sorts them, thin keeps the order),
      // so once one is past the cutoff every later one is too.
      if (partial_recompute + options[i].cost() + least_recompute_from[j + 1] > cutoff) break;
      bool fits = true;
      for (std::size_t k = 0; k < moments && fits; ++k)
        fits = held[k] + add(k, j, options[i]) + least_from[j + 1][k] <= budget;
      if (!fits) continue;
      // Dominance: when option i fits under every completion of the later stages, option
      // i' > i with any completion is beaten by option i with the same completion (no less
      // recompute at j, the same elsewhere), so the search ends at j after this option.
      // (At the last stage that is the first option that fits.)
      bool fits_always = true;
      for (std::size_t k = 0; k < moments && fits_always; ++k)
        fits_always = held[k] + add(k, j, options[i]) + most_from[j + 1][k] <= budget;
      for (std::size_t k = 0; k < moments; ++k) held[k] += add(k, j, options[i]);
      chosen[j] = static_cast<int>(i);
      partial_recompute += options[i].cost();
      run(j + 1);
      partial_recompute -= options[i].cost();
      for (std::size_t k = 0; k < moments; ++k) held[k] -= add(k, j, options[i]);
      if (fits_always) break;
    }
  }
};

}  // namespace

std::vector<RankChoice> rank_choices(const RankMemory& memory,
                                     const std::vector<const StageOptions*>& stages,
                                     std::int64_t budget, std::size_t limit) {
  if (budget < 0) return {};
  if (limit == 0) return {};
  Search s{memory, stages, budget, limit, {}, {}, {}, {}, Time{0}, std::numeric_limits<Time>::max(),
           {},     {}};
  const std::size_t moments = memory.moments.size();
  s.held.assign(moments, 0);
  s.chosen.assign(stages.size(), 0);
  s.least_from.assign(stages.size() + 1, std::vector<std::int64_t>(moments, 0));
  s.most_from = s.least_from;
  s.least_recompute_from.assign(stages.size() + 1, Time{0});
  for (std::size_t j = stages.size(); j-- > 0;) {
    for (std::size_t k = 0; k < moments; ++k) {
      std::int64_t best = -1, worst = 0;
      for (const StageOption& o : stages[j]->options) {
        const std::int64_t b = s.add(k, j, o);
        if (best < 0 || b < best) best = b;
        worst = std::max(worst, b);
      }
      s.least_from[j][k] = s.least_from[j + 1][k] + std::max<std::int64_t>(best, 0);
      s.most_from[j][k] = s.most_from[j + 1][k] + worst;
    }
    Time least = std::numeric_limits<Time>::max();
    for (const StageOption& o : stages[j]->options) least = std::min(least, o.cost());
    s.least_recompute_from[j] =
        s.least_recompute_from[j + 1] + (stages[j]->options.empty() ? Time{0} : least);
  }
  s.run(0);
  std::sort(s.found.begin(), s.found.end(), [](const RankChoice& a, const RankChoice& b) {
    const Time ta = a.total_cost(), tb = b.total_cost();
    if (ta != tb) return ta < tb;
    return a.cost < b.cost;
  });
  if (s.found.size() > limit) s.found.resize(limit);
  return s.found;
}

std::int64_t least_peak(const RankMemory& memory, const std::vector<const StageOptions*>& stages) {
  // The least over choices of the max over moments: search with a growing budget would be
  // exact but slow; every stage at its least-memory option is exact when one option has
  // both the least A and the least R, which is the case for recompute modes (full keeps
  // least of both). A counts as A - O, what stays on the device (offload layers).
  std::vector<std::int64_t> a, r, off;
  for (const StageOptions* st : stages) {
    const StageOption* best = &st->options.front();
    const auto kept = [](const StageOption& o) { return o.activation - o.offload; };
    for (const StageOption& o : st->options)
      if (kept(o) < kept(*best) || (kept(o) == kept(*best) && o.retained < best->retained))
        best = &o;
    a.push_back(best->activation);
    r.push_back(best->retained);
    off.push_back(best->offload);
  }
  return peak_activation(memory, a, r, off);
}

void apply_option(const StageOptions& stage, const StageOption& option, int first,
                  std::vector<Recompute>& modes) {
  if (stage.first_n) {
    const int f = option.first_n_full;
    const int g = option.first_n_selective;
    for (int i = 0, k = 0; i < static_cast<int>(stage.decoder.size()); ++i) {
      Recompute mode = Recompute::none;
      if (stage.decoder[i]) {
        mode = k < f ? Recompute::full : k < f + g ? Recompute::selective : Recompute::none;
        ++k;
      }
      modes[first + i] = mode;
    }
    return;
  }
  // The option's layers per type and mode, from its links back to the empty range.
  std::vector<PerMode<int>> counts(stage.types);
  const StageOptions* range = &stage;
  for (const StageOption* o = &option; range->prefix; range = range->prefix) {
    ++counts[range->type_of.back()][o->mode];
    o = &range->prefix->options[o->base];
  }
  std::vector<PerMode<int>> used(counts.size());
  for (std::size_t i = 0; i < stage.type_of.size(); ++i) {
    const int t = stage.type_of[i];
    Recompute mode = Recompute::none;
    for (Recompute r : {Recompute::full, Recompute::selective_offload, Recompute::selective,
                        Recompute::offload, Recompute::none})
      if (used[t][r] < counts[t][r]) {
        mode = r;
        break;
      }
    ++used[t][mode];
    modes[first + static_cast<int>(i)] = mode;
  }
}

}  // namespace bmpipe
