#include "planner/planner.hpp"

#include <oneapi/tbb/enumerable_thread_specific.h>
#include <oneapi/tbb/info.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/task_arena.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <mutex>
#include <numeric>
#include <unordered_map>

#include "planner/stage_options.hpp"
#include "sim/compiled_schedule.hpp"

namespace bmpipe {

namespace {

using Clock = std::chrono::steady_clock;

/// Bytes in GiB, or MiB / KiB when smaller, with two decimals.
std::string gib(std::int64_t bytes) {
  char buf[64];
  const double b = static_cast<double>(bytes);
  if (std::abs(b) >= 1073741824.0)
    std::snprintf(buf, sizeof buf, "%.2f GiB", b / 1073741824.0);
  else if (std::abs(b) >= 1048576.0)
    std::snprintf(buf, sizeof buf, "%.2f MiB", b / 1048576.0);
  else
    std::snprintf(buf, sizeof buf, "%.2f KiB", b / 1024.0);
  return buf;
}

constexpr double kInfeasible = 1e30;        // scores at or above this do not fit
constexpr int kBatch = 32;                  // candidates proposed and simulated together
constexpr double kStartTemperature = 0.01;  // relative time difference accepted with 1/e
constexpr double kEndTemperature = 1e-4;
constexpr double kRefuseBeyond = 20;     // uphill moves beyond 20 temperatures: never accepted
constexpr int kRestartsWithoutGain = 8;  // runs in a row that found nothing better: done
constexpr std::int64_t kNoBudget = std::numeric_limits<std::int64_t>::max();  // polish: no bound
/// The largest choice index a rank can have (rank_choices keeps at most kMaxRankChoices).
constexpr int kLastChoice = static_cast<int>(kMaxRankChoices) - 1;

/// A deterministic generator whose draws are the same on every standard library (the
/// std distributions are not), so a seed means the same plan everywhere.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull) {}
  std::uint64_t next() {  // splitmix64
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  int below(int n) { return n <= 1 ? 0 : static_cast<int>(next() % static_cast<std::uint64_t>(n)); }
  double unit() { return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0); }

 private:
  std::uint64_t state_;
};

/// A point of the search: layers per stage, and for ranks with several stages which of
/// their undominated recompute choices to take (0: the least total recompute time).
struct Candidate {
  std::vector<int> partition;
  std::vector<int> choice;  ///< per rank
  std::string key() const {
    std::string k;
    k.reserve((partition.size() + choice.size()) * 2 + 1);
    for (int v : partition)
      k.push_back(static_cast<char>(v & 0xff)), k.push_back(static_cast<char>(v >> 8));
    k.push_back('|');
    for (int v : choice) k.push_back(static_cast<char>(v));
    return k;
  }
};

/// What deriving a candidate's recompute modes gives.
struct Derived {
  Plan plan;
  bool fits = true;             ///< every rank has a choice within its budget
  std::int64_t excess = 0;      ///< when not: the largest least-peak over budget
  int worst_rank = -1;          ///< the rank of that excess
  std::int64_t worst_peak = 0;  ///< its least total peak (static + activations)
  Time lower_bound = 0;         ///< no run of this plan can be faster
};

/// Everything fixed while one schedule is planned.
class Space {
 public:
  Space(const Space&) = delete;
  Space& operator=(const Space&) = delete;
  Space(const Experiment& e, Schedule schedule, std::int64_t limit)
      : e_(e),
        schedule_(std::move(schedule)),
        compiled_(CompiledSchedule::borrowing(schedule_)),
        memory_(memory_profile(schedule_)),
        table_(e),
        limit_(limit) {
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

  int stages() const { return stages_; }
  int ranks() const { return ranks_; }
  int layers() const { return layers_; }
  bool multi() const { return multi_; }
  const Schedule& schedule() const { return schedule_; }
  const Experiment& experiment() const { return e_; }
  std::int64_t limit() const { return limit_; }
  const StageOptionTable& table() const { return table_; }
  const std::vector<RankMemory>& memory() const { return memory_; }

  /// Derives the recompute modes of a candidate (see stage_options.hpp).
  Derived derive(const Candidate& c) const {
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
      if (bound_valid_)
        d.lower_bound = std::max(d.lower_bound, m * (busy + pick.total_recompute()));
    }
    return d;
  }

  /// A rank's undominated recompute choices for its stages' layer ranges, kept: a move
  /// changes one or two boundaries, so most ranks meet the same ranges again and again.
  const std::vector<RankChoice>& choices_of(int r, const std::vector<int>& first,
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

  /// How many undominated recompute choices each rank has on `partition` (at least 1).
  std::vector<int> choice_counts(const std::vector<int>& partition) const {
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
          std::max<int>(1, static_cast<int>(rank_choices(mem, options, limit_ - fixed).size()));
    }
    return out;
  }

  /// Simulates a plan with capacity = the limit.
  SimResult run(const Plan& plan, SimInput& in) const {
    assemble(e_, plan, schedule_, in);
    in.capacity_bytes.assign(ranks_, limit_);
    return simulate(in, compiled_);
  }

 private:
  const Experiment& e_;
  Schedule schedule_;
  CompiledSchedule compiled_;  ///< borrows schedule_: validated once for every candidate
  mutable std::mutex choices_mutex_;
  mutable std::unordered_map<std::string, std::unique_ptr<const std::vector<RankChoice>>> choices_;
  std::vector<RankMemory> memory_;
  StageOptionTable table_;
  std::int64_t limit_;
  int stages_ = 0, ranks_ = 0, layers_ = 0;
  bool multi_ = false;
  bool bound_valid_ = true;
  std::vector<Time> busy_prefix_;
};

double score_of(const SimResult& r) {
  if (!r.ok) return kInfeasible * 2;
  if (!r.fits) {
    std::int64_t over = 0;
    for (const DeviceResult& d : r.devices) over = std::max(over, d.peak_bytes - d.capacity_bytes);
    return kInfeasible + static_cast<double>(over);
  }
  return static_cast<double>(r.iteration_time);
}

std::vector<int> uniform_partition(int layers, int stages) {
  std::vector<int> counts(stages, layers / stages);
  for (int s = 0; s < layers % stages; ++s) ++counts[s];
  return counts;
}

PlanRun finish_run(const Experiment& e, const PlannerOptions& o, const Schedule& searched,
                   const Plan& plan) {
  PlanRun run;
  run.plan = plan;
  const ScheduleInfo* info = find_schedule(searched.name);
  // A cost-aware order is made again from this plan's own costs, as `bmpipe simulate`
  // does with the plan written into the config.
  const bool costed = info && (info->needs_costs || info->ranks_candidates);
  run.schedule = costed ? make_schedule(e, searched.name, o.vpp, &plan) : searched;
  SimInput in = assemble(e, plan, run.schedule);
  in.capacity_bytes.assign(run.schedule.num_ranks, o.memory_limit_bytes);
  run.result = simulate(in, run.schedule);
  return run;
}

/// Evaluates candidates in parallel, in a fixed arena of `threads` workers; results land
/// at their candidate's index, so the order of completion never matters.
class Evaluator {
 public:
  Evaluator(const Space& space, int threads)
      : space_(space), arena_(threads > 0 ? threads : tbb::this_task_arena::max_concurrency()) {}

  int threads() const { return arena_.max_concurrency(); }

  /// Simulates `plans[i]` for every i with `todo[i]`, scores into `out[i]`.
  void simulate(const std::vector<Plan>& plans, const std::vector<char>& todo,
                std::vector<double>& out) {
    arena_.execute([&] {
      tbb::parallel_for(std::size_t{0}, plans.size(), [&](std::size_t i) {
        if (!todo[i]) return;
        SimInput& in = inputs_.local();
        out[i] = score_of(space_.run(plans[i], in));
      });
    });
  }

  /// Derives candidates in parallel (the recompute step can be the larger part).
  void derive(const std::vector<Candidate>& cands, const std::vector<char>& todo,
              std::vector<Derived>& out) {
    arena_.execute([&] {
      tbb::parallel_for(std::size_t{0}, cands.size(), [&](std::size_t i) {
        if (todo[i]) out[i] = space_.derive(cands[i]);
      });
    });
  }

 private:
  const Space& space_;
  tbb::task_arena arena_;
  tbb::enumerable_thread_specific<SimInput> inputs_;
};

/// The search state shared by the annealing and the polish.
class Search {
 public:
  Search(const Space& space, const PlannerOptions& o)
      : space_(space), o_(o), evaluator_(space, o.threads), rng_(o.seed), start_(Clock::now()) {
    stats_.seed = o.seed;
    stats_.threads = evaluator_.threads();
  }

  struct Best {
    Candidate candidate;
    double score = kInfeasible * 4;
    Plan plan;
  };

  /// Scores a batch in order, using the cache, the filters and parallel simulation.
  /// `threshold`: candidates whose lower bound exceeds it are filtered out. `max_evals`:
  /// simulations stop (candidates stay unscored) once stats().evaluations reaches it.
  std::vector<double> score(const std::vector<Candidate>& batch, double threshold,
                            std::int64_t max_evals) {
    const std::size_t n = batch.size();
    std::vector<double> scores(n, kInfeasible * 2);
    std::vector<std::string> keys(n);
    std::vector<char> todo(n, 0);
    std::unordered_map<std::string, std::size_t> first_in_batch;
    for (std::size_t i = 0; i < n; ++i) {
      keys[i] = batch[i].key();
      if (auto it = cache_.find(keys[i]); it != cache_.end()) {
        scores[i] = it->second;
        ++stats_.cache_hits;
      } else if (!first_in_batch.emplace(keys[i], i).second) {
        ++stats_.cache_hits;  // the same candidate twice in one batch: scored once
      } else {
        todo[i] = 1;
      }
    }
    std::vector<Derived> derived(n);
    evaluator_.derive(batch, todo, derived);
    std::vector<Plan> plans(n);
    std::vector<char> run(n, 0);
    for (std::size_t i = 0; i < n; ++i) {
      if (!todo[i]) continue;
      const Derived& d = derived[i];
      if (!d.fits) {
        // Filter: the weights and least activations of a rank exceed the limit.
        scores[i] = kInfeasible + static_cast<double>(d.excess);
        ++stats_.filtered;
        note_infeasible(d);
        cache_.emplace(keys[i], scores[i]);
        continue;
      }
      if (static_cast<double>(d.lower_bound) > threshold) {
        // Filter: even the busiest rank's own work is slower than any plan the acceptance
        // rule would take. Not cached (its exact score is unknown) and never picked.
        scores[i] = std::numeric_limits<double>::infinity();
        ++stats_.filtered;
        continue;
      }
      if (stats_.evaluations + static_cast<std::int64_t>(std::count(run.begin(), run.end(), 1)) >=
          max_evals)
        continue;  // the budget is spent; leave it unscored
      plans[i] = d.plan;
      run[i] = 1;
    }
    evaluator_.simulate(plans, run, scores);
    for (std::size_t i = 0; i < n; ++i) {
      if (!run[i]) continue;
      ++stats_.evaluations;
      cache_.emplace(keys[i], scores[i]);
      if (scores[i] < best_.score) {
        best_.score = scores[i];
        best_.candidate = batch[i];
        best_.plan = plans[i];
      }
    }
    // Repeats inside the batch take their first occurrence's score.
    for (std::size_t i = 0; i < n; ++i) {
      if (todo[i]) continue;
      if (auto it = cache_.find(keys[i]); it != cache_.end())
        scores[i] = it->second;
      else if (auto f = first_in_batch.find(keys[i]); f != first_in_batch.end())
        scores[i] = scores[f->second];
    }
    return scores;
  }

  /// Runs the annealing from `start`, then again from perturbations of the best plan,
  /// until the budget is spent or `kRestartsWithoutGain` runs in a row found nothing better.
  void anneal(const Candidate& start) {
    std::vector<double> s = score({start}, std::numeric_limits<double>::infinity(), o_.max_evals);
    if (s[0] < best_.score) {
      best_.score = s[0];
      best_.candidate = start;
      best_.plan = space_.derive(start).plan;
    }
    int fruitless = 0;
    for (int restart = 0; stats_.stopped_by.empty(); ++restart) {
      Candidate from = restart == 0 ? start : best_.candidate;
      // A perturbation: a few random moves away from the best plan.
      for (int k = 0; restart > 0 && k < 2 + restart % 6; ++k) from = propose(from);
      const double before = best_.score;
      run_once(from, restart == 0
                         ? s[0]
                         : score({from}, std::numeric_limits<double>::infinity(), o_.max_evals)[0]);
      if (best_.score < before)
        fruitless = 0;
      else if (++fruitless >= kRestartsWithoutGain && stats_.stopped_by.empty())
        stats_.stopped_by = "converged";
    }
  }

  /// One annealing run from `current`, over a fresh temperature schedule. Returns when it
  /// stalls (sets nothing) or when the budget or the time is spent (sets stopped_by).
  void run_once(Candidate current, double current_score) {
    const std::int64_t begin = stats_.evaluations;
    const std::int64_t length = std::max<std::int64_t>(o_.stall_evals, 1);
    std::int64_t last_gain = stats_.evaluations;
    double run_best = current_score;
    int idle_batches = 0, dry_batches = 0;
    while (true) {
      if (stats_.evaluations >= o_.max_evals) {
        stats_.stopped_by = "max-evals";
        return;
      }
      if (timed_out()) {
        stats_.stopped_by = "time-limit";
        return;
      }
      if (stats_.evaluations - last_gain >= length) return;  // stalled
      const double progress = std::min(
          1.0, static_cast<double>(stats_.evaluations - begin) / static_cast<double>(length));
      const double t = kStartTemperature * std::pow(kEndTemperature / kStartTemperature, progress);
      std::vector<Candidate> batch;
      for (int k = 0; k < kBatch; ++k) batch.push_back(propose(current));
      const double threshold = current_score < kInfeasible
                                   ? current_score * (1 + kRefuseBeyond * t)
                                   : std::numeric_limits<double>::infinity();
      const std::int64_t before = stats_.evaluations;
      const std::vector<double> scores = score(batch, threshold, o_.max_evals);
      // The best of the batch competes with the current point.
      std::size_t pick = 0;
      for (std::size_t i = 1; i < scores.size(); ++i)
        if (scores[i] < scores[pick]) pick = i;
      const double delta = scores[pick] - current_score;
      bool accept = delta < 0;
      if (!accept && current_score < kInfeasible && scores[pick] < kInfeasible)
        accept = rng_.unit() < std::exp(-(delta / current_score) / t);
      if (accept) {
        current = batch[pick];
        current_score = scores[pick];
        idle_batches = 0;
        if (current_score < run_best) run_best = current_score, last_gain = stats_.evaluations;
      } else if (++idle_batches >= 8) {
        current = best_.candidate;  // back to the best plan
        current_score = best_.score;
        idle_batches = 0;
      }
      report("search");
      // Nothing left to simulate around here (all cached or filtered): this run is over.
      if (stats_.evaluations == before) {
        if (++dry_batches > 16) return;
      } else {
        dry_batches = 0;
      }
    }
  }

  /// Every single-layer shift (and choice change) of the best plan, until none helps or
  /// `budget` more simulations are spent. The polish has its own budget, apart from
  /// max_evals: the planner gives it kNoBudget, so a search that spent max_evals is still
  /// polished.
  void polish(std::int64_t budget) {
    const std::int64_t end = budget >= std::numeric_limits<std::int64_t>::max() - stats_.evaluations
                                 ? std::numeric_limits<std::int64_t>::max()
                                 : stats_.evaluations + budget;
    while (!timed_out() && stats_.evaluations < end) {
      const Candidate base = best_.candidate;
      const double before = best_.score;
      std::vector<Candidate> batch;
      const int S = space_.stages();
      for (int b = 0; b + 1 < S; ++b) {
        for (int dir : {-1, 1}) {
          Candidate c = base;
          const int from = dir > 0 ? b : b + 1, to = dir > 0 ? b + 1 : b;
          if (c.partition[from] <= 1) continue;
          --c.partition[from];
          ++c.partition[to];
          batch.push_back(std::move(c));
        }
      }
      if (space_.multi())
        for (int r = 0; r < space_.ranks(); ++r)
          for (int dir : {-1, 1}) {
            Candidate c = base;
            c.choice[r] += dir;
            if (c.choice[r] < 0 || c.choice[r] > kLastChoice) continue;
            batch.push_back(std::move(c));
          }
      if (batch.empty()) break;
      score(batch,
            best_.score < kInfeasible ? best_.score : std::numeric_limits<double>::infinity(), end);
      report("polish");
      if (!(best_.score < before)) break;
    }
  }

  const Best& best() const { return best_; }
  SearchStats& stats() { return stats_; }
  const Derived& closest_infeasible() const { return closest_; }
  bool timed_out() const {
    return o_.time_limit_s &&
           std::chrono::duration<double>(Clock::now() - start_).count() >= *o_.time_limit_s;
  }
  double elapsed() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

  void report(const char* phase) {
    if (!o_.progress) return;
    PlannerProgress p;
    p.evaluations = stats_.evaluations;
    if (best_.score < kInfeasible) p.best = static_cast<Time>(best_.score);
    p.elapsed_s = elapsed();
    p.phase = phase;
    o_.progress(p);
  }

 private:
  void note_infeasible(const Derived& d) {
    if (closest_.worst_rank < 0 || d.excess < closest_.excess) closest_ = d;
  }

  /// One move from `c` (see planner.hpp). Always returns a valid partition.
  Candidate propose(const Candidate& c) {
    const int S = space_.stages();
    Candidate n = c;
    if (S < 2) {
      if (space_.multi()) n.choice[0] = std::max(0, n.choice[0] + (rng_.below(2) ? 1 : -1));
      return n;
    }
    for (int attempt = 0; attempt < 16; ++attempt) {
      n = c;
      const int kind = rng_.below(100);
      if (kind < 45) {  // one layer across a boundary
        const int b = rng_.below(S - 1);
        const bool right = rng_.below(2);
        const int from = right ? b : b + 1, to = right ? b + 1 : b;
        if (n.partition[from] <= 1) continue;
        --n.partition[from];
        ++n.partition[to];
        return n;
      }
      if (kind < 65) {  // several layers across a boundary
        const int avg = std::max(2, space_.layers() / S);
        const int k = 2 + rng_.below(std::max(1, avg / 2));
        const int b = rng_.below(S - 1);
        const bool right = rng_.below(2);
        const int from = right ? b : b + 1, to = right ? b + 1 : b;
        if (n.partition[from] <= k) continue;
        n.partition[from] -= k;
        n.partition[to] += k;
        return n;
      }
      if (kind < 85 && S >= 3) {  // one layer between two non-adjacent stages
        const int i = rng_.below(S);
        int j = rng_.below(S);
        if (std::abs(i - j) < 2) continue;
        if (n.partition[i] <= 1) continue;
        --n.partition[i];
        ++n.partition[j];
        return n;
      }
      if (space_.multi()) {  // another recompute choice on one rank
        const int r = rng_.below(space_.ranks());
        n.choice[r] = std::clamp(n.choice[r] + (rng_.below(2) ? 1 : -1), 0, kLastChoice);
        if (n.choice[r] == c.choice[r]) continue;
        return n;
      }
    }
    return n;
  }

  const Space& space_;
  const PlannerOptions o_;
  Evaluator evaluator_;
  Rng rng_;
  Clock::time_point start_;
  SearchStats stats_;
  Best best_;
  Derived closest_;
  std::unordered_map<std::string, double> cache_;
};

// ---- baselines -----------------------------------------------------------------------------

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
std::optional<Plan> sapp_plan(const Space& space, StageTimes& times, const Plan& minmax) {
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

}  // namespace

std::vector<int> decoder_layers(const Experiment& e) {
  const int L = e.num_layers();
  auto named = [&](int layer, std::initializer_list<const char*> words) {
    if (e.analytic || L < 2) return false;
    std::string name = e.layers.layers[layer].name;
    for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    for (const char* w : words)
      if (name.find(w) != std::string::npos) return true;
    return false;
  };
  const bool embedding = named(0, {"embed"});
  const bool head = named(L - 1, {"head", "loss"});
  std::vector<int> out;
  for (int l = 0; l < L; ++l)
    if (!(embedding && l == 0) && !(head && l == L - 1)) out.push_back(l);
  return out;
}

ExportLayout export_layout(const Experiment& e, const Plan& plan, const Schedule& schedule) {
  ExportLayout x;
  x.pp = schedule.num_ranks;
  x.vpp = schedule.chunks_per_device();
  x.stage_rank = schedule.stage_rank;
  const std::vector<int> decoders = decoder_layers(e);
  std::size_t next = 0;
  int layer = 0;
  for (int n : plan.partition) {
    int count = 0;
    for (int i = 0; i < n; ++i, ++layer)
      if (next < decoders.size() && decoders[next] == layer) {
        ++count, ++next;
        x.recompute.push_back(plan.recompute[layer]);
      }
    x.partition.push_back(count);
  }
  return x;
}

Plan with_decoder_modes(const Experiment& e, Plan plan, const std::vector<Recompute>& modes) {
  const std::vector<int> decoders = decoder_layers(e);
  for (std::size_t k = 0; k < decoders.size() && k < modes.size(); ++k)
    if (e.layers.layers[decoders[k]].has(modes[k])) plan.recompute[decoders[k]] = modes[k];
  return plan;
}

std::vector<std::pair<std::string, int>> auto_schedules(const Experiment& e) {
  const int p = e.pp(), m = e.config.training.microbatches, L = e.num_layers();
  std::vector<std::pair<std::string, int>> out{{"1f1b", 1}};
  for (int v : {2, 3, 4})
    if (p > 1 && p * v <= L && (m <= p || m % p == 0)) out.emplace_back("interleaved", v);
  out.emplace_back("zb-h1", 1);
  if (2 * p <= L) out.emplace_back("zb-v", 2);
  return out;
}

namespace {

Schedule searched_schedule(const Experiment& e, const PlannerOptions& o) {
  const ScheduleInfo* info = find_schedule(o.schedule);
  if (!info)
    e.config.fail("training.schedule",
                  "unknown schedule '" + o.schedule + "' (known: " + schedule_names() + ")");
  const int stages = e.pp() * effective_vpp(*info, o.vpp);
  if (stages > e.num_layers())
    e.config.fail("training.pp", "pp x vpp = " + std::to_string(stages) +
                                     " stages, more than the model's " +
                                     std::to_string(e.num_layers()) + " layers");
  // Cost-aware orders are made for the uniform plan without recompute first.
  const Plan start{uniform_partition(e.num_layers(), stages),
                   std::vector<Recompute>(e.num_layers(), Recompute::none)};
  return make_schedule(e, o.schedule, o.vpp, &start);
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
    *why = "refused: " + std::to_string(partitions) + " partitions, more than the " +
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

std::vector<BaselineRun> run_baselines(const Space& space, const PlannerOptions& o) {
  const Experiment& e = space.experiment();
  const Schedule& sch = space.schedule();
  const int S = space.stages(), L = space.layers();
  std::vector<BaselineRun> out;
  const std::vector<int> uniform = uniform_partition(L, S);
  auto add = [&](const std::string& name, const Plan& plan) {
    BaselineRun b;
    b.name = name;
    b.run = finish_run(e, o, sch, plan);
    b.error = fit_note(*b.run);
    out.push_back(std::move(b));
  };
  {  // megatron-default: uniform, every layer that can recompute fully does
    Plan p{uniform, std::vector<Recompute>(L)};
    for (int l = 0; l < L; ++l)
      p.recompute[l] = e.layers.layers[l].has(Recompute::full) ? Recompute::full : Recompute::none;
    add("megatron-default", p);
  }
  add("uniform-none", Plan{uniform, std::vector<Recompute>(L, Recompute::none)});
  {  // uniform-min-recompute: the same number of fully recomputed layers on every stage
     // (Megatron-LM's --recompute-method block --recompute-num-layers n), the least that fits
    const int most = *std::max_element(uniform.begin(), uniform.end());
    std::optional<PlanRun> last;
    for (int n = 0; n <= most; ++n) {
      Plan p{uniform, std::vector<Recompute>(L, Recompute::none)};
      for (int s = 0, first = 0; s < S; first += uniform[s], ++s)
        for (int l = first, done = 0; l < first + uniform[s] && done < n; ++l)
          if (e.layers.layers[l].has(Recompute::full)) p.recompute[l] = Recompute::full, ++done;
      last = finish_run(e, o, sch, p);
      if (last->fits()) break;
    }
    out.push_back(BaselineRun{"uniform-min-recompute", last, fit_note(*last)});
  }
  {
    StageTimes times(space);
    std::string why;
    if (std::optional<Plan> p = adapipe_plan(space, times, &why)) {
      add("adapipe-dp", *p);
      if (std::optional<Plan> q = sapp_plan(space, times, *p)) add("sapp-ilp", *q);
    } else {
      out.push_back(BaselineRun{"adapipe-dp", std::nullopt, why});
      out.push_back(BaselineRun{"sapp-ilp", std::nullopt, why});
    }
  }
  {
    std::string why;
    if (std::optional<Plan> p = exhaustive_plan(space, o, &why))
      add("exhaustive", *p);
    else
      out.push_back(BaselineRun{"exhaustive", std::nullopt, why});
  }
  return out;
}

}  // namespace

std::vector<BaselineRun> plan_baselines(const Experiment& e, const PlannerOptions& o) {
  const Space space(e, searched_schedule(e, o), o.memory_limit_bytes);
  return run_baselines(space, o);
}

PlanOutcome plan_pipeline(const Experiment& e, const PlannerOptions& o) {
  const auto started = Clock::now();
  PlanOutcome out;
  out.schedule = o.schedule;
  out.memory_limit_bytes = o.memory_limit_bytes;
  // searched_schedule() rejects an unknown name first, so find_schedule() is not null here.
  const Schedule sch = searched_schedule(e, o);
  out.vpp = effective_vpp(*find_schedule(o.schedule), o.vpp);
  const Space space(e, sch, o.memory_limit_bytes);
  out.baselines = run_baselines(space, o);
  Search search(space, o);
  search.report("baselines");
  // Start from the fastest baseline that fits (else the one closest to fitting), not
  // counting exhaustive, so that the search stands on its own.
  const BaselineRun* start = nullptr;
  for (const BaselineRun& b : out.baselines) {
    if (!b.run || b.name == "exhaustive") continue;
    if (!start || score_of(b.run->result) < score_of(start->run->result)) start = &b;
  }
  Candidate first{
      start ? start->run->plan.partition : uniform_partition(e.num_layers(), space.stages()),
      std::vector<int>(space.ranks(), 0)};
  search.anneal(first);
  search.polish(kNoBudget);
  const auto& best = search.best();
  out.stats = search.stats();
  if (out.stats.stopped_by.empty()) out.stats.stopped_by = "converged";
  // The reported plan: the search's best, or a baseline that is faster as run.
  out.best = finish_run(
      e, o, sch,
      best.plan.partition.empty()
          ? Plan{first.partition, std::vector<Recompute>(e.num_layers(), Recompute::none)}
          : best.plan);
  for (const BaselineRun& b : out.baselines)
    if (b.run && score_of(b.run->result) < score_of(out.best.result)) out.best = *b.run;
  if (!out.best.fits()) {
    const Derived& c = search.closest_infeasible();
    if (c.worst_rank >= 0) {
      std::string stages;
      for (int s = 0; s < space.stages(); ++s)
        if (space.schedule().stage_rank[s] == c.worst_rank)
          stages += (stages.empty() ? "" : ", ") + std::to_string(s);
      out.infeasible = "rank " + std::to_string(c.worst_rank) + " (stage " + stages +
                       ") needs at least " + gib(c.worst_peak) + " of " +
                       gib(o.memory_limit_bytes) +
                       " even with every layer at its least-memory recompute mode";
    } else {
      out.infeasible = fit_note(out.best);
    }
  }
  out.stats.wall_s = std::chrono::duration<double>(Clock::now() - started).count();
  return out;
}

}  // namespace bmpipe
