#include "planner/search.hpp"

#include <algorithm>
#include <cmath>

namespace bmpipe::planner {

namespace {

constexpr int kBatch = 32;                  // candidates proposed and simulated together
constexpr double kStartTemperature = 0.01;  // relative time difference accepted with 1/e
constexpr double kEndTemperature = 1e-4;
constexpr double kRefuseBeyond = 20;     // uphill moves beyond 20 temperatures: never accepted
constexpr int kRestartsWithoutGain = 8;  // runs in a row that found nothing better: done

}  // namespace

Search::Search(const Space& space, const PlannerOptions& o)
    : space_(space), o_(o), evaluator_(space, o.threads), rng_(o.seed), start_(Clock::now()) {
  stats_.seed = o.seed;
  stats_.threads = evaluator_.threads();
  for (const Move& m : moves()) stats_.moves.push_back(MoveStats{m.name, 0, 0, 0});
  for (const Filter& f : filters()) stats_.filters.push_back(FilterStats{f.name, 0});
}

std::vector<double> Search::score(const std::vector<Candidate>& batch, double threshold,
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
    if (reject(d, threshold, keys[i], scores[i])) continue;
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

void Search::anneal(const Candidate& start) {
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
    for (int k = 0; restart > 0 && k < 2 + restart % 6; ++k) from = propose(from).candidate;
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

void Search::run_once(Candidate current, double current_score) {
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
    std::vector<int> made_by;  // per candidate, its move
    for (int k = 0; k < kBatch; ++k) {
      Proposal p = propose(current);
      batch.push_back(std::move(p.candidate));
      made_by.push_back(p.move);
    }
    const double threshold = current_score < kInfeasible ? current_score * (1 + kRefuseBeyond * t)
                                                         : std::numeric_limits<double>::infinity();
    const std::int64_t before = stats_.evaluations;
    const double best_before = best_.score;
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
      if (made_by[pick] >= 0) {
        MoveStats& m = stats_.moves[made_by[pick]];
        ++m.accepted;
        if (scores[pick] < best_before) ++m.improved;
      }
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

void Search::polish(std::int64_t budget) {
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
    score(batch, best_.score < kInfeasible ? best_.score : std::numeric_limits<double>::infinity(),
          end);
    report("polish");
    if (!(best_.score < before)) break;
  }
}

bool Search::timed_out() const {
  return o_.time_limit_s &&
         std::chrono::duration<double>(Clock::now() - start_).count() >= *o_.time_limit_s;
}
double Search::elapsed() const {
  return std::chrono::duration<double>(Clock::now() - start_).count();
}

void Search::report(const char* phase) {
  if (!o_.progress) return;
  PlannerProgress p;
  p.evaluations = stats_.evaluations;
  if (best_.score < kInfeasible) p.best = static_cast<Time>(best_.score);
  p.elapsed_s = elapsed();
  p.phase = phase;
  o_.progress(p);
}

void Search::note_infeasible(const Derived& d) {
  if (closest_.worst_rank < 0 || d.excess < closest_.excess) closest_ = d;
}

Proposal Search::propose(const Candidate& c) {
  Proposal p = planner::propose(space_, rng_, c);
  if (p.move >= 0) ++stats_.moves[p.move].proposed;
  return p;
}

bool Search::reject(const Derived& d, double threshold, const std::string& key, double& score) {
  const std::span<const Filter> all = filters();
  for (std::size_t f = 0; f < all.size(); ++f) {
    const std::optional<Rejection> r = all[f].check(d, threshold);
    if (!r) continue;
    score = r->score;
    ++stats_.filtered;
    ++stats_.filters[f].rejected;
    if (!d.fits) note_infeasible(d);
    if (r->cached) cache_.emplace(key, score);
    return true;
  }
  return false;
}

}  // namespace bmpipe::planner
