#include "api/search.hpp"

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/partitioner.h>
#include <oneapi/tbb/task_arena.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>

#include "api/contracts.hpp"
#include "api/errors.hpp"
#include "sim/time.hpp"
#include "sim/units.hpp"

namespace bmpipe::api {

void check_search_request(const SearchRequest& r) {
  if (r.layout_evals < 1) throw RequestError("--layout-evals", "must be at least 1");
  if (r.max_evals && *r.max_evals < 1) throw RequestError("--max-evals", "must be at least 1");
  if (r.time_limit_s && !(*r.time_limit_s > 0 && std::isfinite(*r.time_limit_s)))
    throw RequestError("--time-limit-s", "must be greater than 0 seconds");
  if (!(r.margin_GiB >= 0) || !std::isfinite(r.margin_GiB))
    throw RequestError("--margin-GiB", "must be 0 or more GiB");
  if (r.threads < 0) throw RequestError("--threads", "must be 0 or more");
  if (r.refine < 0) throw RequestError("--refine", "must be 0 or more layouts");
  if (r.screen_evals < 0 || r.screen_evals >= kQuickEvals)
    throw RequestError("--screen-evals", "must be 0 (off) or below the quick planner's " +
                                             std::to_string(kQuickEvals) + " evaluations (got " +
                                             std::to_string(r.screen_evals) + ")");
  if (!(r.screen_margin >= 0) || !std::isfinite(r.screen_margin) || r.screen_margin > 10)
    throw RequestError("--screen-margin-pct", "must be between 0 and 1000 %");
  if (r.memory_limit_GiB && (!(*r.memory_limit_GiB > 0) || !std::isfinite(*r.memory_limit_GiB) ||
                             *r.memory_limit_GiB > 1e6))
    throw RequestError("--memory-limit-GiB", "must be a positive number of GiB");
}

PlannerEffort planner_effort(const std::string& name) {
  if (name == "off") return PlannerEffort::off;
  if (name == "quick") return PlannerEffort::quick;
  if (name == "full") return PlannerEffort::full;
  throw RequestError("--planner", "unknown value '" + name + "' (off, quick, full)");
}

SearchSetup prepare_search(Config config, const SearchRequest& request) {
  check_search_request(request);
  SearchSetup s;
  s.request = request;
  s.options.seed = request.seed;
  s.options.max_evals = request.layout_evals;
  s.options.threads = 1;  // parallelism is across layouts
  // As plan's: the limit (the device's capacity unless --memory-limit-GiB) less the margin.
  if (request.memory_limit_GiB || request.margin_GiB > 0) {
    const double gib = request.memory_limit_GiB.value_or(config.device.memory_GiB);
    s.options.memory_limit_bytes =
        static_cast<std::int64_t>(std::llround((gib - request.margin_GiB) * 1073741824.0));
    if (s.options.memory_limit_bytes <= 0)
      throw RequestError("--margin-GiB", "leaves no memory below the limit");
  }
  s.layouts = enumerate_layouts(config, request.space, &s.rejected);
  s.config = std::move(config);
  return s;
}

void evaluate_layouts(const SearchSetup& s, std::size_t begin, std::size_t end,
                      std::vector<LayoutResult>& out, const std::function<void()>& done) {
  // Never more threads than the process may run (mpirun may bind it to fewer cores).
  const int cores = tbb::this_task_arena::max_concurrency();
  const int threads = s.request.threads;
  tbb::task_arena arena(threads > 0 ? std::min(threads, cores) : cores);
  std::mutex m;
  arena.execute([&] {
    tbb::parallel_for(begin, end, [&](std::size_t i) {
      LayoutResult r = plan_layout(s, i, s.options);
      const std::lock_guard<std::mutex> lock(m);
      out[i] = std::move(r);
      if (done) done();
    });
  });
}

namespace {

LayoutResult cut(const Layout& l, const std::string& filter, const std::string& why) {
  LayoutResult r;
  r.layout = l;
  r.filter = filter;
  r.rejected = why;
  return r;
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace

SearchRun apply_budgets(const SearchSetup& s, std::vector<std::optional<LayoutResult>> results,
                        const std::vector<std::size_t>& order) {
  SearchRun run;
  std::int64_t spent = 0;
  bool over = false, timed_out = false;
  const std::optional<std::int64_t>& budget = s.request.max_evals;
  const std::size_t n = s.layouts.size();
  for (std::size_t k = 0; k < n; ++k) {
    const std::size_t i = order.empty() ? k : order.at(k);
    std::optional<LayoutResult>& r = results.at(i);
    if (budget && !over && r && spent + r->evaluations > *budget) over = true;
    if (budget && over) {
      r = cut(s.layouts[i], "evaluation limit",
              "not planned: --max-evals " + std::to_string(*budget) + " spent (" +
                  std::to_string(spent) + " evaluations before it)");
    } else if (!r) {
      timed_out = true;
      r = cut(
          s.layouts[i], "time limit",
          "not planned: --time-limit-s " + number(s.request.time_limit_s.value_or(0)) + " spent");
    } else {
      spent += r->evaluations;
    }
  }
  for (std::size_t i = 0; i < n; ++i) run.results.push_back(std::move(*results[i]));
  run.stopped_by = timed_out ? "time limit" : over ? "evaluation limit" : "done";
  return run;
}

bool uses_bound(const SearchRequest& request) {
  return request.bound && request.effort != PlannerEffort::off;
}

std::vector<LayoutScreen> screen_layouts(const SearchSetup& s,
                                         const std::vector<std::size_t>& which) {
  std::vector<LayoutScreen> out(which.size());
  const int cores = tbb::this_task_arena::max_concurrency();
  const int threads = s.request.threads;
  tbb::task_arena arena(threads > 0 ? std::min(threads, cores) : cores);
  arena.execute([&] {
    tbb::parallel_for(std::size_t{0}, which.size(), [&](std::size_t k) {
      out[k] = screen_layout(s.config, s.layouts[which[k]], s.options);
    });
  });
  return out;
}

SearchOrder order_from_screens(const SearchSetup& s, std::vector<LayoutScreen> screens) {
  SearchOrder o;
  const std::size_t n = s.layouts.size();
  o.order.resize(n);
  for (std::size_t i = 0; i < n; ++i) o.order[i] = i;
  o.screens = std::move(screens);
  // Refused layouts first (they cost nothing), then by bound; ties in enumeration order.
  const auto key = [&](std::size_t i) {
    return o.screens[i].refused ? Time{-1} : o.screens[i].bound;
  };
  std::stable_sort(o.order.begin(), o.order.end(),
                   [&](std::size_t a, std::size_t b) { return key(a) < key(b); });
  return o;
}

SearchOrder order_search(const SearchSetup& s) {
  if (!uses_bound(s.request)) {
    SearchOrder o;
    o.order.resize(s.layouts.size());
    for (std::size_t i = 0; i < o.order.size(); ++i) o.order[i] = i;
    return o;
  }
  std::vector<std::size_t> all(s.layouts.size());
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
  return order_from_screens(s, screen_layouts(s, all));
}

std::string encode_screen(const LayoutScreen& screen) {
  nlohmann::json j{{"bound_ns", screen.bound}, {"microbatches", screen.microbatches}};
  if (screen.refused) j["refused"] = encode_result(*screen.refused);
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

LayoutScreen decode_screen(const std::string& text) {
  const nlohmann::json j = nlohmann::json::parse(text);
  LayoutScreen screen;
  screen.bound = j.at("bound_ns").get<Time>();
  screen.microbatches = j.at("microbatches").get<int>();
  if (j.contains("refused")) screen.refused = decode_result(j.at("refused").get<std::string>());
  return screen;
}

namespace {

bool fits(const LayoutResult& r) {
  return r.rejected.empty() && r.fits && r.iteration_time > 0;
}

}  // namespace

void SearchProgress::count(const LayoutResult& r) {
  ++done;
  evaluations += r.evaluations;
  if (fits(r) && (!best || r.iteration_time < *best)) best = r.iteration_time;
}

BoundedQueue::BoundedQueue(const SearchSetup& s, SearchOrder order,
                           const std::vector<std::optional<LayoutResult>>& known, Done done)
    : s_(s), order_(std::move(order)), done_(std::move(done)) {
  const std::size_t n = s.layouts.size();
  final_.resize(n);
  pending_.resize(n);
  known_.assign(n, false);
  for (std::size_t i = 0; i < std::min(n, known.size()); ++i)
    if (known[i]) pending_[i] = known[i], known_[i] = true;
  if (!order_.screens.empty())
    for (std::size_t i = 0; i < n; ++i)
      if (order_.screens[i].refused && !pending_[i]) pending_[i] = order_.screens[i].refused;
  progress_.total = n;
  progress_.may_plan = n;
  start_ = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < n; ++i)
    if (pending_[i] && fits(*pending_[i]) &&
        (!any_best_ || pending_[i]->iteration_time < *any_best_))
      any_best_ = pending_[i]->iteration_time;
  const std::lock_guard<std::mutex> lock(m_);
  settle();
}

LayoutResult BoundedQueue::skipped(std::size_t i, Time best) const {
  LayoutResult r;
  r.layout = s_.layouts[i];
  r.microbatches = order_.screens.empty() ? 0 : order_.screens[i].microbatches;
  r.bound = order_.screens.empty() ? 0 : order_.screens[i].bound;
  r.filter = "bound";
  r.rejected = "not planned: its lower bound " + format_ms(r.bound, 1) + " ms exceeds " +
               format_ms(best, 1) + " ms, the best layout planned before it";
  return r;
}

void BoundedQueue::settle() {
  const std::size_t n = order_.order.size();
  const bool bounded = !order_.screens.empty();
  while (prefix_ < n && !cut_) {
    const std::size_t i = order_.order[prefix_];
    std::optional<LayoutResult> r;
    if (known_[i])
      r = pending_[i];  // an earlier run's final word
    else if (bounded && !order_.screens[i].refused && best_ && order_.screens[i].bound > *best_)
      r = skipped(i, *best_);
    else if (pending_[i])
      r = pending_[i];
    else
      break;  // not planned yet
    pending_[i].reset();
    if (s_.request.max_evals && prefix_evals_ + r->evaluations > *s_.request.max_evals) {
      final_[i] = std::move(r);  // apply_budgets cuts it and every later one
      cut_ = true;
      break;
    }
    prefix_evals_ += r->evaluations;
    if (fits(*r) && (!best_ || r->iteration_time < *best_)) best_ = r->iteration_time;
    if (fits(*r) && (!any_best_ || r->iteration_time < *any_best_)) any_best_ = r->iteration_time;
    final_[i] = std::move(r);
    ++prefix_;
    const LayoutResult& got = *final_[i];
    ++progress_.done;
    progress_.evaluations += got.evaluations;
    if (got.filter == "bound") ++progress_.skipped;
    progress_.best = best_;
    progress_.elapsed_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    std::size_t may = 0;
    for (std::size_t k = prefix_; k < n; ++k) {
      const std::size_t j = order_.order[k];
      if (!bounded || (!order_.screens[j].refused && !(best_ && order_.screens[j].bound > *best_)))
        ++may;
    }
    progress_.may_plan = may;
    if (done_ && !known_[i]) done_(i, got, progress_);
  }
}

std::optional<std::size_t> BoundedQueue::take() {
  const std::lock_guard<std::mutex> lock(m_);
  const std::size_t n = order_.order.size();
  while (next_ < n && !cut_ && !stopped_) {
    const std::size_t i = order_.order[next_++];
    if (final_[i] || pending_[i]) continue;
    // Sure to be skipped: a layout already planned before it in the order (or any
    // planned one: a later one's time is at least its own bound, at least this one's)
    // is faster than this layout's bound.
    if (!order_.screens.empty() && any_best_ && order_.screens[i].bound > *any_best_) continue;
    return i;
  }
  return std::nullopt;
}

void BoundedQueue::put(std::size_t i, LayoutResult r) {
  const std::lock_guard<std::mutex> lock(m_);
  if (fits(r) && (!any_best_ || r.iteration_time < *any_best_)) any_best_ = r.iteration_time;
  pending_[i] = std::move(r);
  settle();
}

void BoundedQueue::stop() {
  const std::lock_guard<std::mutex> lock(m_);
  stopped_ = true;
}

std::vector<std::optional<LayoutResult>> BoundedQueue::results() {
  const std::lock_guard<std::mutex> lock(m_);
  settle();
  std::vector<std::optional<LayoutResult>> out = final_;
  if (cut_) return out;  // apply_budgets cuts the rest
  // A time limit left holes: what was planned after one still counts, skipped against the
  // best before it (the answer depends on the machine then anyway).
  const bool bounded = !order_.screens.empty();
  std::optional<Time> best = best_;
  for (std::size_t k = prefix_; k < order_.order.size(); ++k) {
    const std::size_t i = order_.order[k];
    if (bounded && !known_[i] && !order_.screens[i].refused && best &&
        order_.screens[i].bound > *best)
      out[i] = skipped(i, *best);
    else if (pending_[i])
      out[i] = pending_[i];
    if (out[i] && fits(*out[i]) && (!best || out[i]->iteration_time < *best))
      best = out[i]->iteration_time;
  }
  return out;
}

bool screens(const SearchRequest& request) {
  return request.effort == PlannerEffort::quick && request.screen_evals > 0;
}

LayoutResult plan_layout(const SearchSetup& s, std::size_t i, const PlannerOptions& options) {
  const SearchRequest& r = s.request;
  if (screens(r))
    return evaluate_layout(s.config, s.layouts[i], PlannerEffort::quick, options, r.screen_evals,
                           r.screen_evals + r.screen_evals / 2);
  return evaluate_layout(s.config, s.layouts[i], r.effort, options);
}

std::vector<LayoutResult> plan_again_here(const SearchSetup& s, const AgainPass& pass,
                                          const std::vector<std::size_t>& which,
                                          const std::function<void(std::size_t done)>& finished) {
  std::vector<LayoutResult> out(which.size());
  if (which.empty()) return out;
  const int cores = tbb::this_task_arena::max_concurrency();
  const int threads = s.request.threads > 0 ? std::min(s.request.threads, cores) : cores;
  PlannerOptions o = s.options;
  o.threads = std::max<int>(1, threads / static_cast<int>(std::min<std::size_t>(
                                             which.size(), static_cast<std::size_t>(threads))));
  o.time_limit_s = pass.seconds;
  std::int64_t quick = kQuickEvals;
  std::optional<std::int64_t> quick_total;
  if (pass.share) {
    o.max_evals = std::min(o.max_evals, *pass.share);
    o.total_evals = *pass.share;
    quick = std::min(quick, *pass.share), quick_total = *pass.share;
  }
  std::mutex m;
  std::size_t done = 0;  // guarded by m
  tbb::task_arena arena(threads);
  arena.execute([&] {
    tbb::parallel_for(std::size_t{0}, which.size(), [&](std::size_t j) {
      out[j] = evaluate_layout(s.config, s.layouts[which[j]], pass.effort, o, quick, quick_total);
      if (!finished) return;
      const std::lock_guard<std::mutex> lock(m);
      finished(++done);
    });
  });
  return out;
}

namespace {

/// What the passes after the first may still spend: evaluations (--max-evals less what
/// was spent) and seconds (--time-limit-s less the time gone).
struct Leftover {
  std::optional<std::int64_t> evals;
  std::optional<double> seconds;
};

/// Plans the layouts `which` of `s` again with `effort`, each keeping the better of its two
/// plans and the evaluations of both. Under --max-evals each gets an equal share of what is
/// left, so the whole search stays within it whatever the threads or processes; when
/// nothing is left, nothing runs and the run says which budget stopped it.
bool again(const SearchSetup& s, SearchRun& run, std::vector<std::size_t> which,
           PlannerEffort effort, Leftover& left, const PassHooks& hooks) {
  if (which.empty()) return false;
  AgainPass pass;
  pass.which = std::move(which);
  pass.effort = effort;
  pass.seconds = left.seconds;
  if (left.evals) pass.share = *left.evals / static_cast<std::int64_t>(pass.which.size());
  if (pass.share && *pass.share < 1) {
    run.stopped_by = "evaluation limit";
    return false;
  }
  if (pass.seconds && *pass.seconds <= 0) {
    run.stopped_by = "time limit";
    return false;
  }
  if (hooks.started) hooks.started(pass);
  std::vector<LayoutResult> got =
      hooks.run ? hooks.run(pass) : plan_again_here(s, pass, pass.which, [&](std::size_t done) {
        if (hooks.finished) hooks.finished(pass, done);
      });
  for (std::size_t j = 0; j < pass.which.size(); ++j) {
    LayoutResult& old = run.results[pass.which[j]];
    if (left.evals) *left.evals -= got[j].evaluations;
    if (pass.share && got[j].evaluations >= *pass.share) run.stopped_by = "evaluation limit";
    const std::int64_t spent = old.evaluations + got[j].evaluations;
    if (fits(got[j]) && got[j].iteration_time < old.iteration_time) old = std::move(got[j]);
    old.evaluations = spent;
  }
  return true;
}

/// The screen's second pass: the layouts within the margin of the fastest, with the whole
/// quick budget. A layout the bound skipped has a bound above a screened time, so no plan
/// of it can beat the fastest: it is never missed here.
void confirm_screen(const SearchSetup& s, SearchRun& run, Leftover& left, const PassHooks& hooks) {
  if (!screens(s.request) || run.stopped_by != "done") return;
  std::optional<Time> best;
  for (const LayoutResult& r : run.results)
    if (fits(r) && (!best || r.iteration_time < *best)) best = r.iteration_time;
  if (!best) return;
  const double within = static_cast<double>(*best) * (1 + s.request.screen_margin);
  std::vector<std::size_t> which;
  for (std::size_t i = 0; i < run.results.size(); ++i)
    if (fits(run.results[i]) && static_cast<double>(run.results[i].iteration_time) <= within)
      which.push_back(i);
  const std::size_t count = which.size();
  if (again(s, run, std::move(which), PlannerEffort::quick, left, hooks)) run.confirmed = count;
}

/// --refine K: the full planner on the best K fitting layouts.
void refine_search(const SearchSetup& s, SearchRun& run, Leftover& left, const PassHooks& hooks) {
  const int k = s.request.refine;
  if (k <= 0 || run.stopped_by != "done") return;
  std::vector<std::size_t> best;
  for (std::size_t i = 0; i < run.results.size(); ++i)
    if (fits(run.results[i])) best.push_back(i);
  std::stable_sort(best.begin(), best.end(), [&](std::size_t a, std::size_t b) {
    return run.results[a].iteration_time < run.results[b].iteration_time;
  });
  if (best.size() > static_cast<std::size_t>(k)) best.resize(static_cast<std::size_t>(k));
  again(s, run, std::move(best), PlannerEffort::full, left, hooks);
}

}  // namespace

void finish_search(const SearchSetup& s, SearchRun& run, double elapsed_s, const PassHooks& hooks) {
  Leftover left;
  if (s.request.max_evals) {
    left.evals = *s.request.max_evals;
    for (const LayoutResult& r : run.results) *left.evals -= r.evaluations;
  }
  if (s.request.time_limit_s) left.seconds = *s.request.time_limit_s - elapsed_s;
  confirm_screen(s, run, left, hooks);
  refine_search(s, run, left, hooks);
}

namespace {

/// evaluate_search with the bound: this process's threads take layouts from one
/// BoundedQueue.
SearchRun evaluate_bounded(
    const SearchSetup& s, const std::vector<std::optional<LayoutResult>>& known,
    const std::function<void(std::size_t, const LayoutResult&, const SearchProgress&)>& done) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  BoundedQueue queue(s, order_search(s), known, done);
  const int cores = tbb::this_task_arena::max_concurrency();
  const int threads = s.request.threads > 0 ? std::min(s.request.threads, cores) : cores;
  std::mutex error_m;
  std::exception_ptr error;
  const auto work = [&] {
    try {
      while (const std::optional<std::size_t> i = queue.take()) {
        PlannerOptions o = s.options;
        if (s.request.time_limit_s) {
          const double left = *s.request.time_limit_s - elapsed();
          if (left <= 0) {
            queue.stop();  // never started: apply_budgets marks it
            break;
          }
          o.time_limit_s = left;
        }
        queue.put(*i, plan_layout(s, *i, o));
      }
    } catch (...) {
      queue.stop();
      const std::lock_guard<std::mutex> lock(error_m);
      if (!error) error = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  if (error) std::rethrow_exception(error);
  return apply_budgets(s, queue.results(), queue.order());
}

}  // namespace

SearchRun evaluate_search(
    const SearchSetup& s, const std::vector<std::optional<LayoutResult>>& known,
    const std::function<void(std::size_t, const LayoutResult&, const SearchProgress&)>& done,
    const PassHooks& passes) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  if (uses_bound(s.request)) {
    SearchRun run = evaluate_bounded(s, known, done);
    finish_search(s, run, elapsed(), passes);
    return run;
  }
  const std::size_t n = s.layouts.size();
  std::vector<std::optional<LayoutResult>> results(n);
  for (std::size_t i = 0; i < std::min(n, known.size()); ++i) results[i] = known[i];
  // Under --max-evals: the first layout (in enumeration order) that the budget cuts; no
  // later layout need start. Found by walking the finished prefix as results come in.
  std::atomic<std::size_t> cut_from{n};
  std::size_t prefix = 0;
  std::int64_t prefix_evals = 0;
  SearchProgress progress;
  progress.total = n;
  std::mutex m;
  const auto account = [&] {  // under m
    while (prefix < n && results[prefix] && cut_from.load() == n) {
      prefix_evals += results[prefix]->evaluations;
      if (s.request.max_evals && prefix_evals > *s.request.max_evals) cut_from = prefix;
      ++prefix;
    }
  };
  for (std::size_t i = 0; i < n; ++i)
    if (results[i]) progress.count(*results[i]);
  account();
  // Never more threads than the process may run (mpirun may bind it to fewer cores).
  const int cores = tbb::this_task_arena::max_concurrency();
  const int threads = s.request.threads;
  tbb::task_arena arena(threads > 0 ? std::min(threads, cores) : cores);
  arena.execute([&] {
    // One layout per task, taken in enumeration order as far as the scheduler allows, so
    // the budget's prefix fills early.
    tbb::parallel_for(
        tbb::blocked_range<std::size_t>(0, n, 1),
        [&](const tbb::blocked_range<std::size_t>& range) {
          for (std::size_t i = range.begin(); i != range.end(); ++i) {
            {
              const std::lock_guard<std::mutex> lock(m);
              if (results[i] || i >= cut_from.load()) continue;
            }
            PlannerOptions o = s.options;
            if (s.request.time_limit_s) {
              const double left = *s.request.time_limit_s - elapsed();
              if (left <= 0) continue;  // never started: apply_budgets marks it
              o.time_limit_s = left;
            }
            LayoutResult r = plan_layout(s, i, o);
            const std::lock_guard<std::mutex> lock(m);
            results[i] = std::move(r);
            const LayoutResult& got = *results[i];
            progress.count(got);
            progress.elapsed_s = elapsed();
            progress.may_plan = n - progress.done;
            account();
            if (done) done(i, got, progress);
          }
        },
        tbb::simple_partitioner());
  });
  SearchRun run = apply_budgets(s, std::move(results));
  finish_search(s, run, elapsed(), passes);
  return run;
}

SearchReport rank_search(const SearchSetup& s, std::vector<LayoutResult> results, int processes,
                         double wall_s, const std::string& stopped_by, std::size_t confirmed) {
  SearchReport report;
  if (screens(s.request)) report.screen_evals = s.request.screen_evals;
  report.confirmed = confirmed;
  report.stopped_by = stopped_by;
  report.processes = processes;
  report.wall_s = wall_s;
  report.bound = uses_bound(s.request);
  report.refine = s.request.refine;
  report.experts = s.config.model.analytic() && s.config.model.shape->is_moe();
  for (const LayoutResult& r : results) report.context = report.context || r.layout.cp != 1;
  for (const LayoutResult& r : s.rejected) report.context = report.context || r.layout.cp != 1;
  for (const LayoutResult& r : results) report.evaluations += r.evaluations;
  for (const LayoutResult& r : s.rejected) results.push_back(r);
  for (const LayoutResult& r : results)
    if (!r.rejected.empty()) ++report.rejected_by[r.filter];
  rank_layouts(results);
  report.layouts = std::move(results);
  return report;
}

namespace {

LayoutResult layout_from_json(const nlohmann::json& j) {
  LayoutResult r;
  r.layout = Layout{j.at("tp"),      j.at("pp"), j.at("dp"), j.at("vpp"), j.at("micro_batch_size"),
                    j.at("schedule")};
  r.layout.ep = j.value("ep", 1);
  r.layout.etp = j.value("etp", 1);
  r.layout.cp = j.value("cp", 1);
  r.microbatches = j.at("microbatches");
  r.fits = j.at("fits");
  if (!j.at("rejected").is_null()) r.rejected = j.at("rejected");
  if (j.contains("filter")) r.filter = j.at("filter");
  if (!j.at("iteration_time_ms").is_null()) {
    // The exact ns travel as an integer beside the ms for the round trip.
    r.iteration_time = j.at("iteration_time_ns");
    r.tokens_per_s = j.at("tokens_per_s");
    r.mfu = j.at("mfu");
    r.tflops_per_device = j.at("tflops_per_device");
    r.bubble_ratio = j.at("bubble_ratio");
    r.max_peak_bytes = j.at("max_peak_memory_bytes");
    r.capacity_bytes = j.at("capacity_bytes");
    r.plan.partition = j.at("partition").get<std::vector<int>>();
    for (const auto& m : j.at("layer_recompute")) {
      // The wire is this program's own (the MPI driver's messages; a journal is read with
      // its checks, api/search_journal.cpp): an unknown mode is a bug, never UB.
      const std::optional<Recompute> mode = parse_recompute(m.get<std::string>());
      if (!mode) throw std::logic_error("decode_result: unknown recompute mode " + m.dump());
      r.plan.recompute.push_back(*mode);
    }
  }
  r.evaluations = j.at("evaluations");
  if (j.contains("bound_ns")) r.bound = j.at("bound_ns");
  return r;
}

}  // namespace

std::string encode_result(const LayoutResult& r) {
  nlohmann::json j = layout_json(r);
  j["iteration_time_ns"] = r.iteration_time;
  j["fits"] = r.fits;  // the raw flag (layout_json folds rejection into it)
  j["ep"] = r.layout.ep;
  j["etp"] = r.layout.etp;
  j["cp"] = r.layout.cp;
  if (r.bound > 0) j["bound_ns"] = r.bound;
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

LayoutResult decode_result(const std::string& text) {
  return layout_from_json(nlohmann::json::parse(text));
}

nlohmann::json run_search(const Config& config, const SearchRequest& request,
                          const std::function<void()>& done) {
  const auto start = std::chrono::steady_clock::now();
  const SearchSetup s = prepare_search(config, request);
  SearchRun run =
      evaluate_search(s, {}, [&](std::size_t, const LayoutResult&, const SearchProgress&) {
        if (done) done();
      });
  return finished_search_document(config, s, std::move(run), start);
}

nlohmann::json finished_search_document(const Config& config, const SearchSetup& s, SearchRun run,
                                        std::chrono::steady_clock::time_point start) {
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  nlohmann::json document = search_document(
      rank_search(s, std::move(run.results), 1, wall, run.stopped_by, run.confirmed));
  document["bmpipe"] = provenance(config.file);
  return document;
}

}  // namespace bmpipe::api
