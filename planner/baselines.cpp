#include "planner/baselines.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <limits>
#include <optional>

#include "experiment/experiment.hpp"
#include "frameworks/megatron/export.hpp"
#include "frameworks/megatron/formats.hpp"
#include "planner/evaluate.hpp"
#include "planner/export_layout.hpp"
#include "sim/units.hpp"

namespace bmpipe {
namespace planner {

std::string gib(std::int64_t bytes) {
  return format_bytes(bytes, 2, ByteUnit::KiB);
}

std::string fit_note(const PlanRun& run) {
  if (!run.result.ok) return run.result.error;
  if (run.result.fits) return {};
  std::string worst;
  std::int64_t over = std::numeric_limits<std::int64_t>::min();
  for (const DeviceResult& d : run.result.devices)
    if (d.peak_bytes - d.capacity_bytes > over) {
      over = d.peak_bytes - d.capacity_bytes;
      worst = "rank " + std::to_string(d.rank) + " needs " + gib(d.peak_bytes) + " of " +
              gib(d.capacity_bytes);
    }
  return "does not fit: " + worst;
}

std::vector<std::vector<int>> megatron_first_last_splits(int layers, int pp, int vpp) {
  std::vector<std::vector<int>> out;
  if (pp < 2) return out;
  const int share = (layers + pp - 1) / pp;
  std::vector<std::optional<int>> counts{std::nullopt};
  for (int n = 1; n <= share; ++n) counts.emplace_back(n);
  for (const std::optional<int>& first : counts)
    for (const std::optional<int>& last : counts) {
      if (!first && !last) continue;
      std::optional<std::vector<int>> split = megatron_uneven(layers, pp, vpp, first, last);
      if (split && std::find(out.begin(), out.end(), *split) == out.end())
        out.push_back(std::move(*split));
    }
  return out;
}

std::vector<AccountedSplit> megatron_accounted_splits(int layers, int pp, int vpp) {
  std::vector<AccountedSplit> out;
  for (const auto& [embedding, loss] : {std::pair{true, false}, {false, true}, {true, true}}) {
    try {
      out.push_back({embedding, loss, megatron_even(layers, pp, vpp, embedding, loss)});
    } catch (const FormatError&) {
      // Megatron-LM refuses this one (the total does not divide): not a baseline.
    }
  }
  return out;
}

LayoutSplit megatron_layout_split(std::string_view layout, int decoders, int mtp_layers) {
  const std::vector<MegatronLayoutStage> stages = parse_megatron_layout(layout);
  LayoutSplit out;
  int total = 0, mtp = 0;
  for (std::size_t s = 0; s < stages.size(); ++s) {
    total += stages[s].decoders;
    mtp += stages[s].mtp;
    out.decoders.push_back(stages[s].decoders);
    out.rows.push_back(stages[s].rows());
  }
  if (total != decoders)
    throw FormatError("holds " + std::to_string(total) + " decoder layers (t), but the model has " +
                      std::to_string(decoders));
  if (mtp != mtp_layers)
    throw FormatError("holds " + std::to_string(mtp) +
                      " multi-token prediction layers (m), but the model has " +
                      std::to_string(mtp_layers) + " (model.mtp_layers)");
  out.unsupported = megatron_layout_unsupported(stages);
  return out;
}

namespace {

/// Per stage position and layer range, the least stage time (F + I + W + recompute per
/// micro-batch) whose recompute mix fits that stage's memory, and the option that does it.
/// A rank with several stages gives each an equal share of its memory. Stages longer than
/// twice the mean (plus two layers) are not considered: both DPs below balance stage
/// times, and the cut keeps their tables at O(S L^2 / S) entries.
class StageTimes {
 public:
  static constexpr Time kNo = std::numeric_limits<Time>::max();

  explicit StageTimes(const Space& space) : space_(space) {
    const int S = space.stages(), L = space.layers();
    longest_ = std::min(L - (S - 1), std::max(2 * ((L + S - 1) / S) + 2, 8));
    alone_.resize(S);
    share_.assign(S, 1);
    for (int r = 0; r < space.ranks(); ++r) {
      const RankMemory& mem = space.memory()[r];
      for (std::size_t j = 0; j < mem.stages.size(); ++j) {
        RankMemory& a = alone_[mem.stages[j]];
        a.stages = {mem.stages[j]};
        for (const MemoryMoment& m : mem.moments)
          a.moments.push_back(MemoryMoment{{m.full[j]}, {m.retained[j]}});
        share_[mem.stages[j]] = static_cast<int>(mem.stages.size());
      }
    }
    busy_.assign(1, 0);
    for (const LayerRow& row : space.experiment().layers.layers)
      busy_.push_back(busy_.back() + row.forward + row.backward_input + row.backward_weight);
    time_.assign(static_cast<std::size_t>(S) * L * (longest_ + 1), kNo - 1);  // kNo - 1: unknown
    option_.assign(time_.size(), -1);
  }

  int longest() const { return longest_; }

  /// Stage `s` holding layers [i, i + n): kNo if no mix fits.
  Time time(int s, int i, int n) {
    const std::size_t k = index(s, i, n);
    if (time_[k] != kNo - 1) return time_[k];
    const Experiment& e = space_.experiment();
    const StageOptions& so = space_.table().get(i, n);
    std::int64_t fixed = space_.table().static_bytes(i, n);
    if (space_.stages() > 1 && i + n == space_.layers()) fixed += e.layers.head_copy_static_bytes;
    const std::int64_t budget = (space_.limit() - e.reserved_bytes) / share_[s] - fixed;
    const std::vector<RankChoice> c = rank_choices(alone_[s], {&so}, budget, 1);
    if (c.empty()) return time_[k] = kNo;
    option_[k] = c[0].option[0];
    return time_[k] = busy_[i + n] - busy_[i] + so.options[option_[k]].recompute;
  }

  /// Writes the modes of stage s's layers [i, i + n) into `modes`.
  void apply(int s, int i, int n, std::vector<Recompute>& modes) {
    time(s, i, n);
    const StageOptions& so = space_.table().get(i, n);
    apply_option(so, so.options[option_[index(s, i, n)]], i, modes);
  }

 private:
  std::size_t index(int s, int i, int n) const {
    return (static_cast<std::size_t>(s) * space_.layers() + i) * (longest_ + 1) + n;
  }
  const Space& space_;
  int longest_ = 1;
  std::vector<RankMemory> alone_;
  std::vector<int> share_;
  std::vector<Time> busy_;
  std::vector<Time> time_;
  std::vector<int> option_;
};

/// The plan of a partition whose stages take StageTimes' options.
Plan plan_of(StageTimes& times, const std::vector<int>& partition, int layers) {
  Plan plan{partition, std::vector<Recompute>(layers, Recompute::none)};
  for (int s = 0, i = 0; s < static_cast<int>(partition.size()); i += partition[s], ++s)
    times.apply(s, i, partition[s], plan.recompute);
  return plan;
}

/// AdaPipe-style exact dynamic program (Sun et al., "AdaPipe: Optimizing Pipeline
/// Parallelism with Adaptive Recomputation and Partitioning", ASPLOS 2024): for every stage
/// position and layer range, the recompute mix with the least stage time that fits the
/// stage's memory; then the partition that minimises the slowest stage. A rank with several
/// stages gives each an equal share of its memory (AdaPipe plans one stage per rank).
std::optional<Plan> adapipe_plan(const Space& space, StageTimes& times, std::string* why) {
  const int S = space.stages(), L = space.layers();
  constexpr Time kNo = StageTimes::kNo;
  // best[s][j]: the least max stage time of stages 0..s-1 over layers [0, j).
  std::vector<std::vector<Time>> best(S + 1, std::vector<Time>(L + 1, kNo));
  std::vector<std::vector<int>> from(S + 1, std::vector<int>(L + 1, -1));
  best[0][0] = 0;
  for (int s = 0; s < S; ++s)
    for (int j = s + 1; j <= L - (S - 1 - s); ++j)
      for (int i = std::max(s, j - times.longest()); i < j; ++i) {
        if (best[s][i] == kNo) continue;
        const Time t = times.time(s, i, j - i);
        if (t == kNo) continue;
        const Time worst = std::max(best[s][i], t);
        if (worst < best[s + 1][j]) best[s + 1][j] = worst, from[s + 1][j] = i;
      }
  if (best[S][L] == kNo) {
    *why = "no partition fits the memory limit with AdaPipe's per-stage recompute";
    return std::nullopt;
  }
  std::vector<int> partition(S);
  for (int s = S, j = L; s > 0; --s) partition[s - 1] = j - from[s][j], j = from[s][j];
  return plan_of(times, partition, L);
}

/// The exact optimum of the objective that MindSpore's pipeline balancer (SAPP, in
/// MindFormers' toolkit/pipeline_balance, sapp_solver.py) gives its ILP for 1F1B:
///   T = sum_s t_s + (m - 2) max_s t_s,
/// with every stage's time and memory as above. Solved exactly here instead of with CBC:
/// for each bound tau on the slowest stage, a dynamic program finds the least sum with
/// every t_s <= tau; only bounds between the min-max value and where (m - 2) tau alone
/// exceeds the best T can win.
Plan sapp_plan(const Space& space, StageTimes& times, const Plan& minmax) {
  const int S = space.stages(), L = space.layers();
  const std::int64_t m = space.schedule().num_microbatches;
  constexpr Time kNo = StageTimes::kNo;
  std::vector<Time> candidates;
  for (int s = 0; s < S; ++s)
    for (int i = s; i < L; ++i)
      for (int n = 1; n <= times.longest() && i + n <= L - (S - 1 - s); ++n)
        if (Time t = times.time(s, i, n); t != kNo) candidates.push_back(t);
  std::sort(candidates.begin(), candidates.end());
  candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
  auto objective = [&](const std::vector<int>& part) {
    Time sum = 0, worst = 0;
    for (int s = 0, i = 0; s < S; i += part[s], ++s) {
      const Time t = times.time(s, i, part[s]);
      sum += t, worst = std::max(worst, t);
    }
    return static_cast<double>(sum) + static_cast<double>(m - 2) * static_cast<double>(worst);
  };
  std::vector<int> best_part = minmax.partition;
  double best_value = objective(best_part);
  Time tau_min = 0;
  for (int s = 0, i = 0; s < S; i += best_part[s], ++s)
    tau_min = std::max(tau_min, times.time(s, i, best_part[s]));
  std::vector<std::vector<Time>> sum(S + 1, std::vector<Time>(L + 1));
  std::vector<std::vector<int>> from(S + 1, std::vector<int>(L + 1));
  for (Time tau : candidates) {
    if (tau < tau_min) continue;
    if (static_cast<double>(m - 2) * static_cast<double>(tau) >= best_value) break;
    for (auto& row : sum) std::fill(row.begin(), row.end(), kNo);
    sum[0][0] = 0;
    for (int s = 0; s < S; ++s)
      for (int j = s + 1; j <= L - (S - 1 - s); ++j)
        for (int i = std::max(s, j - times.longest()); i < j; ++i) {
          if (sum[s][i] == kNo) continue;
          const Time t = times.time(s, i, j - i);
          if (t == kNo || t > tau) continue;
          if (sum[s][i] + t < sum[s + 1][j]) sum[s + 1][j] = sum[s][i] + t, from[s + 1][j] = i;
        }
    if (sum[S][L] == kNo) continue;
    std::vector<int> part(S);
    for (int s = S, j = L; s > 0; --s) part[s - 1] = j - from[s][j], j = from[s][j];
    const double value = objective(part);
    if (value < best_value) best_value = value, best_part = part;
  }
  return plan_of(times, best_part, L);
}

/// Counts compositions of `layers` into `stages` parts of at least one, saturating.
std::int64_t compositions(int layers, int stages) {
  // C(layers - 1, stages - 1)
  const int n = layers - 1, k = stages - 1;
  if (k < 0 || k > n) return 0;
  double c = 1;
  for (int i = 1; i <= k; ++i) c = c * (n - k + i) / i;
  return c > 9e18 ? std::numeric_limits<std::int64_t>::max() : static_cast<std::int64_t>(c + 0.5);
}

/// Calls `visit` with every composition of `layers` into `stages` parts of at least one, in
/// lexicographic order; stops when it returns false.
template <typename Visit>
void for_each_partition(int layers, int stages, Visit visit) {
  // Cut positions 1 <= c_1 < ... < c_{S-1} <= layers - 1.
  std::vector<int> cut(stages - 1);
  for (int i = 0; i < stages - 1; ++i) cut[i] = i + 1;
  std::vector<int> part(stages);
  while (true) {
    int prev = 0;
    for (int i = 0; i < stages - 1; ++i) part[i] = cut[i] - prev, prev = cut[i];
    part[stages - 1] = layers - prev;
    if (!visit(part)) return;
    int i = stages - 2;
    while (i >= 0 && cut[i] == layers - (stages - 1 - i)) --i;
    if (i < 0) return;
    ++cut[i];
    for (int k = i + 1; k < stages - 1; ++k) cut[k] = cut[k - 1] + 1;
  }
}

/// Every plan: every partition and, on ranks with several stages, every undominated
/// recompute choice; the fastest that fits, or nullopt with `why`.
std::optional<Plan> exhaustive_plan(const Space& space, const PlannerOptions& o, std::string* why) {
  const int S = space.stages(), L = space.layers(), R = space.ranks();
  const std::int64_t partitions = compositions(L, S);
  if (partitions > o.exhaustive_limit) {
    // compositions() saturates past 9e18: a count that large reads as its order of magnitude.
    const std::string count = partitions == std::numeric_limits<std::int64_t>::max()
                                  ? "more than 10^18"
                                  : std::to_string(partitions);
    *why = "refused: " + count + " partitions, more than the " +
           std::to_string(o.exhaustive_limit) +
           " plans it simulates in about a minute (small instances only)";
    return std::nullopt;
  }
  // Count first (choices per rank per partition), so a refusal costs no simulation.
  std::int64_t plans = 0;
  if (space.multi()) {
    bool over = false;
    for_each_partition(L, S, [&](const std::vector<int>& part) {
      std::int64_t product = 1;
      for (int n : space.choice_counts(part)) product *= n;
      plans += product;
      over = plans > o.exhaustive_limit;
      return !over;
    });
    if (over) {
      *why = "refused: more than " + std::to_string(o.exhaustive_limit) +
             " plans (partitions x recompute choices), more than it simulates in about a "
             "minute (small instances only)";
      return std::nullopt;
    }
  }
  std::optional<Plan> best;
  double best_score = kInfeasible;
  SimInput in;
  for_each_partition(L, S, [&](const std::vector<int>& part) {
    Candidate c{part, std::vector<int>(R, 0)};
    const std::vector<int> sizes = space.choice_counts(part);
    std::vector<int> idx(R, 0);
    while (true) {
      c.choice = idx;
      const Derived d = space.derive(c);
      if (d.fits) {
        const double score = score_of(space.run(d.plan, in));
        if (score < best_score) best_score = score, best = d.plan;
      }
      int r = 0;
      while (r < R && ++idx[r] == sizes[r]) idx[r++] = 0;
      if (r == R) break;
    }
    return true;
  });
  if (!best) *why = "no plan fits the memory limit";
  return best;
}

/// What the baselines share while one schedule is planned.
struct Context {
  const Space& space;
  const PlannerOptions& o;
  std::vector<int> uniform;
  std::optional<StageTimes> times;  ///< made on first use
  std::optional<Plan> adapipe;      ///< adapipe-dp's plan, sapp-ilp's starting point
  std::string adapipe_why;          ///< why there is none
  std::string offload_modules;      ///< what the baseline just made offloads (BaselineRun)
  StageTimes& stage_times() {
    if (!times) times.emplace(space);
    return *times;
  }
  PlanRun run(const Plan& plan) const {
    return finish_run(space.experiment(), o, space.schedule(), plan, &space.compiled());
  }
};

// megatron-no-recompute: Megatron-LM's default, the even split and no recompute.
std::optional<PlanRun> megatron_no_recompute(Context& c, std::string*) {
  return c.run(Plan{c.uniform, std::vector<Recompute>(c.space.layers(), Recompute::none)});
}

// megatron-full-recompute: the even split, every layer that can recompute fully does
// (--recompute-granularity full --recompute-method uniform --recompute-num-layers 1).
std::optional<PlanRun> megatron_full_recompute(Context& c, std::string*) {
  const Experiment& e = c.space.experiment();
  const int L = c.space.layers();
  Plan p{c.uniform, std::vector<Recompute>(L)};
  for (int l = 0; l < L; ++l)
    p.recompute[l] = e.layers.layers[l].has(Recompute::full) ? Recompute::full : Recompute::none;
  return c.run(p);
}

// megatron-best-rule: the even split under every recompute rule Megatron-LM's flags state
// (none, selective everywhere, block N for every N, uniform full:
// megatron_recompute_choices); the fastest that fits, else the one closest to fitting.
/// Of `rows` (layer-table rows per stage) under every recompute rule Megatron-LM's flags
/// state, the fastest run that fits, else the one closest to fitting; nullopt when no rule
/// runs on these layers.
std::optional<PlanRun> best_rule_on(Context& c, const std::vector<int>& rows) {
  std::optional<PlanRun> best;
  for (const Plan& p : c.space.rule_plans(rows, megatron_recompute_choices)) {
    PlanRun r = c.run(p);
    if (!best || score_of(r.result) < score_of(best->result)) best = std::move(r);
  }
  return best;
}

std::optional<PlanRun> megatron_best_rule(Context& c, std::string* why) {
  std::optional<PlanRun> best = best_rule_on(c, c.uniform);
  if (!best) *why = "no recompute rule of Megatron-LM's flags can run on these layers";
  return best;
}

/// The module sets megatron-offload tries, as Megatron-Bridge's performance recipes set
/// offload_modules when they offload (NVIDIA-NeMo/Megatron-Bridge 067f987d): the
/// attention's core, ["core_attn", "attn_proj"] (perf_recipes/deepseek/common.py:115-116,
/// perf_recipes/deepseek/gb300/deepseek_v4.py:109-110), and, on a model with experts, the
/// experts' inputs, ["expert_fc1"] (perf_recipes/deepseek/gb200/deepseek_v3.py:281-282,
/// perf_recipes/nemotronh/h100/nemotronh.py:240-241). Their other choice,
/// ["fused_group_mlp"] (Nemotron-H on GB200 and GB300), is not modelled.
std::vector<std::string> megatron_offload_module_sets(const Experiment& e) {
  std::vector<std::string> out = {"core_attn,attn_proj"};
  if (e.config.model.shape && e.config.model.shape->is_moe()) out.push_back("expert_fc1");
  return out;
}

// megatron-offload: Megatron's own offload rule. The even split, each module set
// megatron_offload_module_sets lists offloaded at Megatron-Core's lead (1: a group reloaded
// one ahead of its backward), under every recompute rule of megatron-best-rule; the fastest
// that fits, else the one closest to fitting. Its runs are of another experiment (the
// config with those modules offloaded), so the search does not start from it.
std::optional<PlanRun> megatron_offload(Context& c, std::string* why) {
  const Experiment& e = c.space.experiment();
  const HardwareSpec* hw = e.config.device.hardware ? &*e.config.device.hardware : nullptr;
  if (!e.config.model.analytic() || !hw || !(hw->host_link_GBps > 0)) {
    *why = "needs an analytic model on a device with a host link (cluster.device.host_link_GBps)";
    return std::nullopt;
  }
  std::optional<PlanRun> best;
  for (const std::string& set : megatron_offload_module_sets(e)) {
    Config config = e.config;
    config.training.offload_modules = set;
    config.training.offload_lead = 1;
    std::shared_ptr<const Experiment> offloaded;
    try {
      check_config(config);
      offloaded = prepare(config);
    } catch (const ConfigError& x) {
      if (why->empty()) *why = set + ": " + x.what();
      continue;
    }
    const Space space(*offloaded, c.space.schedule(), c.space.limit(), c.space.expressible());
    Context there{space, c.o, c.uniform, {}, {}, {}, {}};
    std::optional<PlanRun> r = best_rule_on(there, c.uniform);
    if (r && (!best || score_of(r->result) < score_of(best->result))) {
      best = std::move(r);
      c.offload_modules = set;
    }
  }
  if (best) why->clear();
  if (!best && why->empty())
    *why = "no recompute rule of Megatron-LM's flags can run on these layers";
  return best;
}

// uniform-min-recompute: the same number of fully recomputed layers on every stage
// (Megatron-LM's --recompute-method block --recompute-num-layers n), the least that fits.
// The last one tried when none fits.
std::optional<PlanRun> uniform_min_recompute(Context& c, std::string*) {
  const Experiment& e = c.space.experiment();
  const int S = c.space.stages(), L = c.space.layers();
  const std::vector<int>& uniform = c.uniform;
  const int most = *std::max_element(uniform.begin(), uniform.end());
  std::optional<PlanRun> last;
  for (int n = 0; n <= most; ++n) {
    Plan p{uniform, std::vector<Recompute>(L, Recompute::none)};
    for (int s = 0, first = 0; s < S; first += uniform[s], ++s)
      for (int l = first, done = 0; l < first + uniform[s] && done < n; ++l)
        if (e.layers.layers[l].has(Recompute::full)) p.recompute[l] = Recompute::full, ++done;
    last = c.run(p);
    if (last->fits()) break;
  }
  return last;
}

/// The plan partition (layer-table rows per stage) of a split in decoder layers: the rows
/// before the first decoder layer (a measured model's embedding, a separate-ends table's E)
/// go to the first stage and those after the last (its head; the MTP layers and L) to the
/// last stage, as Megatron-LM builds them by default. nullopt when a stage would be empty.
std::optional<std::vector<int>> rows_of_split(const Experiment& e, std::vector<int> split) {
  const std::vector<int> decoders = decoder_layers(e);
  if (!decoders.empty()) {
    split.front() += decoders.front();
    split.back() += e.num_layers() - 1 - decoders.back();
  }
  if (std::find(split.begin(), split.end(), 0) != split.end()) return std::nullopt;
  return split;
}

/// Of every split, under every recompute rule Megatron-LM's flags state on it, the fastest
/// run that fits, else the one closest to fitting.
std::optional<PlanRun> best_rule_over(Context& c, const std::vector<std::vector<int>>& splits,
                                      std::string* why) {
  const Experiment& e = c.space.experiment();
  std::optional<PlanRun> best;
  for (const std::vector<int>& split : splits) {
    const std::optional<std::vector<int>> rows = rows_of_split(e, split);
    if (!rows) continue;
    std::optional<PlanRun> r = best_rule_on(c, *rows);
    if (r && (!best || score_of(r->result) < score_of(best->result))) best = std::move(r);
  }
  if (!best && why->empty()) *why = "no split of these flags runs on these layers";
  return best;
}

int decoder_count(const Context& c) {
  return static_cast<int>(decoder_layers(c.space.experiment()).size());
}

int mtp_count(const Context& c) {
  const Config& config = c.space.experiment().config;
  return config.model.shape ? config.model.shape->mtp_layers : 0;
}

// megatron-first-last: --decoder-first-pipeline-num-layers and/or
// --decoder-last-pipeline-num-layers, the splits megatron_first_last_splits lists (the
// first and last rank 0 to share - 1 layers lighter, the middle ranks even), each under
// the fastest fitting recompute rule of megatron-best-rule.
std::optional<PlanRun> megatron_first_last(Context& c, std::string* why) {
  const int pp = c.space.ranks(), vpp = c.space.stages() / c.space.ranks();
  if (pp < 2) {
    *why = "needs more than one pipeline rank";
    return std::nullopt;
  }
  const std::vector<std::vector<int>> splits =
      megatron_first_last_splits(decoder_count(c), pp, vpp);
  if (splits.empty()) {
    *why = "Megatron-LM accepts no first/last count up to the even share here";
    return std::nullopt;
  }
  return best_rule_over(c, splits, why);
}

// megatron-embedding-loss: the even split with the embedding and/or the loss
// counted as a layer (--account-for-embedding-in-pipeline-split,
// --account-for-loss-in-pipeline-split; Megatron-LM at d98e8a64ddf3,
// megatron/core/transformer/transformer_block.py get_num_layers_to_build and
// transformer_layer.py get_transformer_layer_offset), each combination Megatron-LM accepts,
// under the fastest fitting recompute rule.
std::optional<PlanRun> megatron_account_embedding_loss(Context& c, std::string* why) {
  const int pp = c.space.ranks(), vpp = c.space.stages() / c.space.ranks();
  std::vector<std::vector<int>> splits;
  for (const AccountedSplit& a : megatron_accounted_splits(decoder_count(c), pp, vpp))
    splits.push_back(a.partition);
  if (splits.empty()) {
    *why =
        "Megatron-LM refuses it here: the layers plus the embedding and/or the loss do "
        "not split evenly over the pipeline ranks";
    return std::nullopt;
  }
  return best_rule_over(c, splits, why);
}

// megatron-layout: a --pipeline-model-parallel-layout (PlannerOptions::baseline_layout:
// --baseline-layout, or the config's training.megatron_layout, which `bmpipe import
// megatron` writes from the script's flag), its split under the fastest fitting recompute
// rule of megatron-best-rule. Skipped without one, or when its stages are not this
// schedule's pp x vpp (--schedule auto plans several vpp; the layout fixes one).
std::optional<PlanRun> megatron_layout(Context& c, std::string* why) {
  const std::string& layout = c.o.baseline_layout;
  const std::string source =
      c.o.baseline_layout_source.empty() ? "the layout" : c.o.baseline_layout_source;
  if (layout.empty()) {
    *why =
        "no layout: give --baseline-layout STRING (Megatron-LM's "
        "--pipeline-model-parallel-layout)";
    return std::nullopt;
  }
  LayoutSplit read;
  try {
    read = megatron_layout_split(layout, decoder_count(c), mtp_count(c));
  } catch (const FormatError& e) {
    *why = source + " " + e.what();
    return std::nullopt;
  }
  const bool separate = c.space.experiment().layers.separate_ends;
  if (!read.unsupported.empty() && !separate) {
    *why = source + " " + read.unsupported;
    return std::nullopt;
  }
  const std::vector<int>& split = read.decoders;
  if (static_cast<int>(split.size()) != c.space.stages()) {
    *why = source + " has " + std::to_string(split.size()) + " stages, this schedule " +
           std::to_string(c.space.stages()) + " (pp x vpp)";
    return std::nullopt;
  }
  if (!separate) return best_rule_over(c, {split}, why);
  // Every row where the layout puts it, under the fastest fitting recompute rule.
  std::optional<PlanRun> best = best_rule_on(c, read.rows);
  if (!best) *why = "no recompute rule of Megatron-LM's flags can run on these layers";
  return best;
}

std::optional<PlanRun> adapipe_dp(Context& c, std::string* why) {
  c.adapipe = adapipe_plan(c.space, c.stage_times(), &c.adapipe_why);
  if (!c.adapipe) {
    *why = c.adapipe_why;
    return std::nullopt;
  }
  return c.run(*c.adapipe);
}

std::optional<PlanRun> sapp_ilp(Context& c, std::string* why) {
  if (!c.adapipe) {  // same stage table, so the same reason
    *why = c.adapipe_why;
    return std::nullopt;
  }
  return c.run(sapp_plan(c.space, c.stage_times(), *c.adapipe));
}

std::optional<PlanRun> exhaustive(Context& c, std::string* why) {
  std::optional<Plan> p = exhaustive_plan(c.space, c.o, why);
  if (!p) return std::nullopt;
  return c.run(*p);
}

/// One baseline: its name, whether the search may start from its plan, and how it is made
/// (its run, or nullopt and why not).
struct Baseline {
  const char* name;
  bool starts_search;
  /// Whether its run may be the plan (plan_pipeline keeps a faster baseline): not
  /// megatron-offload's, whose runs are of another experiment.
  bool may_answer;
  std::optional<PlanRun> (*make)(Context& c, std::string* why);
};

// The baselines, in the order they run and are reported. sapp-ilp reads adapipe-dp's plan,
// so it comes after it. exhaustive is the reference, so the search does not start from it;
// nor from megatron-offload, whose runs are of another experiment (the config offloading).
constexpr Baseline kBaselines[] = {
    {"megatron-no-recompute", true, true, megatron_no_recompute},
    {"megatron-full-recompute", true, true, megatron_full_recompute},
    {"megatron-best-rule", true, true, megatron_best_rule},
    {"megatron-first-last", true, true, megatron_first_last},
    {"megatron-embedding-loss", true, true, megatron_account_embedding_loss},
    {"megatron-layout", true, true, megatron_layout},
    {"megatron-offload", false, false, megatron_offload},
    {"uniform-min-recompute", true, true, uniform_min_recompute},
    {"adapipe-dp", true, true, adapipe_dp},
    {"sapp-ilp", true, true, sapp_ilp},
    {"exhaustive", false, true, exhaustive},
};

}  // namespace

std::vector<BaselineRun> run_baselines(const Space& space, const PlannerOptions& o) {
  // Megatron-LM's even split is of the decoder layers; with separate ends the embedding row
  // joins the first stage and the MTP and loss rows the last, as Megatron-LM builds them.
  // A vision model's rows (the encoder blocks and the projector) join the first stage:
  // Megatron-LM's pretrain_vlm.py builds the vision model on the first pipeline stage only
  // (NVIDIA/Megatron-LM d98e8a64, pretrain_vlm.py:226, add_encoder =
  // parallel_state.is_pipeline_first_stage()), as Megatron-Bridge's Qwen2.5-VL does
  // (modeling_qwen25_vl.py at 067f987d: the HF tower only where pre_process).
  const Experiment& e = space.experiment();
  std::vector<int> even = uniform_partition(space.layers(), space.stages());
  const bool vision = !e.layers.layers.empty() && e.layers.layers.front().kind == LayerKind::vision;
  if (e.layers.separate_ends || vision)
    if (const auto rows = rows_of_split(
            e, uniform_partition(static_cast<int>(decoder_layers(e).size()), space.stages())))
      even = *rows;
  Context c{space, o, even, {}, {}, {}, {}};
  std::vector<BaselineRun> out;
  const std::size_t count = std::size(kBaselines);
  for (const Baseline& b : kBaselines) {
    announce(o, "baseline " + std::string(b.name) + " (" + std::to_string(out.size() + 1) + " of " +
                    std::to_string(count) + ")");
    BaselineRun r;
    r.name = b.name;
    c.offload_modules.clear();
    if (!o.report_baselines && !b.starts_search && !b.may_answer) {
      r.error = "not run: it can neither start the search nor be its plan";
      out.push_back(std::move(r));
      continue;
    }
    r.run = b.make(c, &r.error);
    if (r.run) r.offload_modules = c.offload_modules;
    if (r.run) r.error = fit_note(*r.run);
    if (r.run)
      r.expressible =
          expressible_by(space.experiment(), r.run->plan, r.run->schedule, o.expressible);
    out.push_back(std::move(r));
  }
  return out;
}

bool starts_search(std::size_t index) {
  return kBaselines[index].starts_search;
}

}  // namespace planner

const std::vector<std::pair<std::string, std::string>>& renamed_baselines() {
  static const std::vector<std::pair<std::string, std::string>> renamed{
      {"megatron-default", "megatron-full-recompute"}, {"uniform-none", "megatron-no-recompute"}};
  return renamed;
}

const BaselineRun* find_baseline(const PlanOutcome& o, std::string_view name) {
  for (const BaselineRun& b : o.baselines)
    if (b.name == name) return &b;
  return nullptr;
}

const BaselineRun* megatron_reference(const PlanOutcome& o) {
  const BaselineRun* best = nullptr;
  for (const BaselineRun& b : o.baselines)
    if (b.name.rfind("megatron-", 0) == 0 && b.run && b.run->fits() && b.offload_modules.empty() &&
        (!best || b.run->result.iteration_time < best->run->result.iteration_time))
      best = &b;
  return best;
}

const BaselineRun* best_expressible_baseline(const Experiment& e, const PlanOutcome& o,
                                             const Exporter* x) {
  const BaselineRun* best = nullptr;
  for (const BaselineRun& b : o.baselines)
    if (b.run && b.run->fits() &&
        (!best || b.run->result.iteration_time < best->run->result.iteration_time) &&
        b.offload_modules.empty() && expressible_by(e, b.run->plan, b.run->schedule, x))
      best = &b;
  return best;
}

const std::vector<std::string>& baseline_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const planner::Baseline& b : planner::kBaselines) out.emplace_back(b.name);
    return out;
  }();
  return names;
}

}  // namespace bmpipe
