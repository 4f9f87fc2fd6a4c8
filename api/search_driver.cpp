#include "api/search_driver.hpp"

#include <oneapi/tbb/task_arena.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <thread>
#include <utility>

#include "sim/time.hpp"
#include "sim/units.hpp"

namespace bmpipe::api {

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

/// Applies --max-evals to results in planning order `order` (a layout is kept while the
/// sum of the kept layouts' evaluations, with its own, is within the budget; it and every
/// later one are cut after that) and marks missing results (nullopt: never started) as cut
/// by the time limit.
SearchRun apply_budgets(const SearchSetup& s, std::vector<std::optional<LayoutResult>> results,
                        const std::vector<std::size_t>& order) {
  SearchRun run;
  std::int64_t spent = 0;
  bool over = false, timed_out = false;
  const std::optional<std::int64_t>& budget = s.request.max_evals;
  const std::size_t n = s.layouts.size();
  for (std::size_t k = 0; k < n; ++k) {
    const std::size_t i = order.at(k);
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

bool fits(const LayoutResult& r) {
  return r.rejected.empty() && r.fits && r.iteration_time > 0;
}

/// The order the layouts are planned in: by lower bound, ties in enumeration order, with
/// their bounds and the refusals the screen found; identity order without the bound.
struct SearchOrder {
  std::vector<std::size_t> order;     ///< layout indices, in planning order
  std::vector<LayoutScreen> screens;  ///< per layout index (empty without the bound)
};

/// Hands out layouts in bound order and decides, position by position, what each one's
/// result is: its refusal, its plan, or filter "bound" when its bound exceeds the best
/// fitting time before it. Thread-safe. Any number of evaluators (threads, or MPI
/// processes served by one thread) may take() and put() in any interleaving: the final
/// results are the same. take() never hands out a layout that is sure to be skipped.
class BoundedQueue {
 public:
  using Done = std::function<void(std::size_t, const LayoutResult&, const SearchProgress&)>;
  BoundedQueue(const SearchSetup& s, SearchOrder order,
               const std::vector<std::optional<LayoutResult>>& known, Done done);
  /// A layout index to plan, or none when nothing is left to start (or a budget stopped).
  std::optional<std::size_t> take();
  /// Layout i's result. Decides the positions it completes (calling `done` for each).
  void put(std::size_t i, LayoutResult r);
  /// Stops handing out layouts (the time limit).
  void stop();
  /// The final results per layout index (nullopt: never started), after the evaluators are
  /// done, and the planning order for apply_budgets.
  std::vector<std::optional<LayoutResult>> results();
  const std::vector<std::size_t>& order() const { return order_.order; }
  /// Layouts not handed out yet.
  std::size_t left() {
    const std::lock_guard<std::mutex> lock(m_);
    return order_.order.size() - next_;
  }

 private:
  void settle();  // under m_
  LayoutResult skipped(std::size_t i, Time best) const;
  const SearchSetup& s_;
  SearchOrder order_;
  Done done_;
  std::mutex m_;
  std::vector<std::optional<LayoutResult>> final_, pending_;
  std::vector<bool> known_;
  std::size_t next_ = 0, prefix_ = 0;
  std::optional<Time> best_;      ///< over the settled prefix
  std::optional<Time> any_best_;  ///< over everything planned so far
  std::int64_t prefix_evals_ = 0;
  bool cut_ = false, stopped_ = false;
  SearchProgress progress_;
  std::chrono::steady_clock::time_point start_;
};

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

/// The tasks `tasks` of one pass in the order given, each outcome kept by its layout.
/// `each` hears how many are done after each put, under the feed's lock. Hands out at most
/// `most` at once: a share of what is left, so the last go out one by one.
class ListFeed : public TaskFeed {
 public:
  using Each = std::function<void(std::size_t done)>;
  ListFeed(std::vector<SearchTask> tasks, std::size_t most, Each each = {})
      : tasks_(std::move(tasks)), most_(most), each_(std::move(each)) {
    for (std::size_t k = 0; k < tasks_.size(); ++k) position_[tasks_[k].layout] = k;
    outcomes_.resize(tasks_.size());
  }
  std::optional<SearchTask> take() override {
    const std::lock_guard<std::mutex> lock(m_);
    if (stopped_ || next_ >= tasks_.size()) return std::nullopt;
    return tasks_[next_++];
  }
  void put(std::size_t layout, TaskOutcome outcome) override {
    const std::lock_guard<std::mutex> lock(m_);
    outcomes_.at(position_.at(layout)) = std::move(outcome);
    ++done_;
    if (each_) each_(done_);
  }
  std::size_t chunk(int processes) override {
    const std::lock_guard<std::mutex> lock(m_);
    const std::size_t left = tasks_.size() - next_;
    return std::clamp<std::size_t>(left / (2 * static_cast<std::size_t>(processes)), 1, most_);
  }
  void stop() override {
    const std::lock_guard<std::mutex> lock(m_);
    stopped_ = true;
  }
  /// Task k's outcome, after the executor returned.
  TaskOutcome& outcome(std::size_t k) {
    if (!outcomes_.at(k)) throw std::logic_error("search: a task of a pass was never done");
    return *outcomes_[k];
  }

 private:
  std::mutex m_;
  std::vector<SearchTask> tasks_;
  std::size_t most_;
  Each each_;
  std::map<std::size_t, std::size_t> position_;
  std::vector<std::optional<TaskOutcome>> outcomes_;
  std::size_t next_ = 0, done_ = 0;
  bool stopped_ = false;
};

/// The first pass's tasks from the BoundedQueue, each with the seconds --time-limit-s
/// leaves when it is handed out (none left: nothing more starts, and apply_budgets marks
/// what never started).
class FirstFeed : public TaskFeed {
 public:
  using Clock = std::chrono::steady_clock;
  FirstFeed(const SearchSetup& s, BoundedQueue& queue, Clock::time_point start)
      : s_(s), queue_(queue), start_(start) {}
  std::optional<SearchTask> take() override {
    const std::optional<std::size_t> i = queue_.take();
    if (!i) return std::nullopt;
    SearchTask task{*i, std::nullopt};
    if (s_.request.time_limit_s) {
      task.seconds =
          *s_.request.time_limit_s - std::chrono::duration<double>(Clock::now() - start_).count();
      if (*task.seconds <= 0) {
        queue_.stop();  // never started: apply_budgets marks it
        return std::nullopt;
      }
    }
    return task;
  }
  void put(std::size_t layout, TaskOutcome outcome) override {
    queue_.put(layout, std::get<LayoutResult>(std::move(outcome)));
  }
  // With the bound, one layout at a time: a layout handed out early is planned even if a
  // result that arrives meanwhile would have skipped it. Without it, guided chunks: a
  // share of what is left, so no process sits on a chunk of slow layouts while the
  // others are done (layouts differ in cost by two orders of magnitude; fixed chunks of 16
  // left one of 2 MPI processes working alone for a third of a GPT-3 175B search).
  std::size_t chunk(int processes) override {
    if (uses_bound(s_.request)) return 1;
    return std::clamp<std::size_t>(queue_.left() / (2 * static_cast<std::size_t>(processes)), 1,
                                   16);
  }
  void stop() override { queue_.stop(); }

 private:
  const SearchSetup& s_;
  BoundedQueue& queue_;
  Clock::time_point start_;
};

/// What the passes after the first may still spend: evaluations (--max-evals less what
/// was spent) and seconds (--time-limit-s less the time gone).
struct Leftover {
  std::optional<std::int64_t> evals;
  std::optional<double> seconds;
};

/// One run of drive_search: the passes in order, on one executor.
class Driver {
 public:
  using Clock = std::chrono::steady_clock;
  Driver(const SearchSetup& s, SearchExecutor& executor, SearchObserver* observer)
      : s_(s), executor_(executor), observer_(observer), start_(Clock::now()) {}

  SearchRun run() {
    BoundedQueue queue(s_, order(), executor_.known(),
                       [&](std::size_t i, const LayoutResult& r, const SearchProgress& p) {
                         executor_.settled(i, r);
                         if (observer_) observer_->layout(r, with_eta(r, p));
                       });
    FirstFeed feed(s_, queue, start_);
    executor_.run(SearchPass{}, feed);
    SearchRun run = apply_budgets(s_, queue.results(), queue.order());
    Leftover left;
    if (s_.request.max_evals) {
      left.evals = *s_.request.max_evals;
      for (const LayoutResult& r : run.results) *left.evals -= r.evaluations;
    }
    if (s_.request.time_limit_s) left.seconds = *s_.request.time_limit_s - elapsed();
    confirm_screen(run, left);
    refine(run, left);
    return run;
  }

 private:
  double elapsed() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

  /// The planning order: with the bound, every layout screened (its bound, or its
  /// refusal), refused layouts first (they cost nothing), then by bound, ties in
  /// enumeration order; without it, enumeration order.
  SearchOrder order() {
    const std::size_t n = s_.layouts.size();
    SearchOrder o;
    o.order.resize(n);
    for (std::size_t i = 0; i < n; ++i) o.order[i] = i;
    if (!uses_bound(s_.request)) return o;
    std::vector<SearchTask> all(n);
    for (std::size_t i = 0; i < n; ++i) all[i].layout = i;
    ListFeed feed(std::move(all), 16);
    executor_.run(SearchPass{SearchPass::Kind::bound, PlannerEffort::quick, {}, n}, feed);
    for (std::size_t i = 0; i < n; ++i)
      o.screens.push_back(std::get<LayoutScreen>(std::move(feed.outcome(i))));
    const auto key = [&](std::size_t i) {
      return o.screens[i].refused ? Time{-1} : o.screens[i].bound;
    };
    std::stable_sort(o.order.begin(), o.order.end(),
                     [&](std::size_t a, std::size_t b) { return key(a) < key(b); });
    return o;
  }

  /// `p` with its ETA: this run's evaluations per planned layout times the layouts that
  /// may still be planned, at this run's rate, capped by what the budgets leave.
  SearchProgress with_eta(const LayoutResult& r, SearchProgress p) {
    if (r.evaluations > 0) ++planned_;  // planned here (not refused or skipped)
    spent_ += r.evaluations;
    const SearchRequest& rq = s_.request;
    const std::size_t left = std::min(p.total - std::min(p.total, p.done), p.may_plan);
    if (p.done >= p.total || left == 0) {
      p.eta_s = 0.0;
    } else if (planned_ > 0 && p.elapsed_s > 0) {
      double evals_left =
          static_cast<double>(spent_) / static_cast<double>(planned_) * static_cast<double>(left);
      if (rq.max_evals)
        evals_left =
            std::min(evals_left,
                     static_cast<double>(std::max<std::int64_t>(0, *rq.max_evals - p.evaluations)));
      double eta = spent_ > 0
                       ? evals_left / (static_cast<double>(spent_) / p.elapsed_s)
                       : p.elapsed_s / static_cast<double>(planned_) * static_cast<double>(left);
      if (rq.time_limit_s) eta = std::min(eta, std::max(0.0, *rq.time_limit_s - p.elapsed_s));
      p.eta_s = eta;
    }
    return p;
  }

  /// Plans the layouts `which` again with `effort`, each keeping the better of its two
  /// plans and the evaluations of both. Under --max-evals each gets an equal share of
  /// what is left, so the whole search stays within it whatever the threads or processes;
  /// when nothing is left, nothing runs and the run says which budget stopped it.
  bool again(SearchRun& run, const std::vector<std::size_t>& which, PlannerEffort effort,
             Leftover& left) {
    if (which.empty()) return false;
    SearchPass pass{SearchPass::Kind::again, effort, std::nullopt, which.size()};
    if (left.evals) pass.share = *left.evals / static_cast<std::int64_t>(which.size());
    if (pass.share && *pass.share < 1) {
      run.stopped_by = "evaluation limit";
      return false;
    }
    if (left.seconds && *left.seconds <= 0) {
      run.stopped_by = "time limit";
      return false;
    }
    if (observer_) observer_->pass_started(pass);
    // Longest first, so the last to start are short: by the ops one simulation of the
    // layout runs, stages x micro-batches, micro-batches being the global batch /
    // (micro-batch size x dp). A result does not depend on who plans it, or when.
    const auto ops = [&](std::size_t i) {
      const Layout& l = s_.layouts[i];
      return static_cast<double>(l.pp) * std::max(1, l.vpp) /
             (static_cast<double>(l.micro_batch_size) * std::max(1, l.dp));
    };
    std::vector<std::size_t> longest(which.size());
    for (std::size_t k = 0; k < which.size(); ++k) longest[k] = k;
    std::stable_sort(longest.begin(), longest.end(),
                     [&](std::size_t a, std::size_t b) { return ops(which[a]) > ops(which[b]); });
    std::vector<SearchTask> tasks;
    for (const std::size_t k : longest) tasks.push_back(SearchTask{which[k], left.seconds});
    const Clock::time_point started = Clock::now();
    ListFeed feed(std::move(tasks), 1, [&](std::size_t done) {
      if (!observer_) return;
      PassProgress p{done, which.size(),
                     std::chrono::duration<double>(Clock::now() - started).count(), 0.0};
      if (done < p.total)
        p.eta_s = p.elapsed_s / static_cast<double>(done) * static_cast<double>(p.total - done);
      observer_->pass_progress(pass, p);
    });
    executor_.run(pass, feed);
    for (std::size_t k = 0; k < longest.size(); ++k) {
      LayoutResult& got = std::get<LayoutResult>(feed.outcome(k));
      LayoutResult& old = run.results[which[longest[k]]];
      if (left.evals) *left.evals -= got.evaluations;
      if (pass.share && got.evaluations >= *pass.share) run.stopped_by = "evaluation limit";
      const std::int64_t spent = old.evaluations + got.evaluations;
      if (fits(got) && got.iteration_time < old.iteration_time) old = std::move(got);
      old.evaluations = spent;
    }
    return true;
  }

  /// The screen's second pass: the layouts within the margin of the fastest, with the
  /// whole quick budget. A layout the bound skipped has a bound above a screened time, so
  /// no plan of it can beat the fastest: it is never missed here.
  void confirm_screen(SearchRun& run, Leftover& left) {
    if (!screens(s_.request) || run.stopped_by != "done") return;
    std::optional<Time> best;
    for (const LayoutResult& r : run.results)
      if (fits(r) && (!best || r.iteration_time < *best)) best = r.iteration_time;
    if (!best) return;
    const double within = static_cast<double>(*best) * (1 + s_.request.screen_margin);
    std::vector<std::size_t> which;
    for (std::size_t i = 0; i < run.results.size(); ++i)
      if (fits(run.results[i]) && static_cast<double>(run.results[i].iteration_time) <= within)
        which.push_back(i);
    if (again(run, which, PlannerEffort::quick, left)) run.confirmed = which.size();
  }

  /// --refine K: the full planner on the best K fitting layouts.
  void refine(SearchRun& run, Leftover& left) {
    const int k = s_.request.refine;
    if (k <= 0 || run.stopped_by != "done") return;
    std::vector<std::size_t> best;
    for (std::size_t i = 0; i < run.results.size(); ++i)
      if (fits(run.results[i])) best.push_back(i);
    std::stable_sort(best.begin(), best.end(), [&](std::size_t a, std::size_t b) {
      return run.results[a].iteration_time < run.results[b].iteration_time;
    });
    if (best.size() > static_cast<std::size_t>(k)) best.resize(static_cast<std::size_t>(k));
    again(run, best, PlannerEffort::full, left);
  }

  const SearchSetup& s_;
  SearchExecutor& executor_;
  SearchObserver* observer_;
  Clock::time_point start_;
  std::size_t planned_ = 0;  ///< first-pass layouts planned by this run (with_eta)
  std::int64_t spent_ = 0;   ///< their evaluations
};

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

}  // namespace

int available_cores() {
  return tbb::this_task_arena::max_concurrency();
}

TaskOutcome run_task(const SearchSetup& s, const SearchPass& pass, const SearchTask& task,
                     int threads) {
  const Layout& layout = s.layouts.at(task.layout);
  PlannerOptions o = s.options;
  if (pass.kind == SearchPass::Kind::bound) return screen_layout(s.config, layout, o, s.topology);
  o.time_limit_s = task.seconds;
  const SearchRequest& r = s.request;
  if (pass.kind == SearchPass::Kind::plan) {
    if (screens(r))
      return evaluate_layout(s.config, layout, PlannerEffort::quick, o, r.screen_evals,
                             r.screen_evals + r.screen_evals / 2, s.topology);
    return evaluate_layout(s.config, layout, r.effort, o, kQuickEvals, std::nullopt, s.topology);
  }
  // Planned again: the planners share the threads when the pass has fewer layouts than
  // threads (a plan does not depend on its threads).
  const std::size_t t = static_cast<std::size_t>(std::max(1, threads));
  o.threads = static_cast<int>(t / std::clamp<std::size_t>(pass.layouts, 1, t));
  std::int64_t quick = kQuickEvals;
  std::optional<std::int64_t> quick_total;
  if (pass.share) {
    o.max_evals = std::min(o.max_evals, *pass.share);
    o.total_evals = *pass.share;
    quick = std::min(quick, *pass.share), quick_total = *pass.share;
  }
  return evaluate_layout(s.config, layout, pass.effort, o, quick, quick_total, s.topology);
}

std::string encode_share(const SearchPass& pass, const std::vector<SearchTask>& tasks) {
  nlohmann::json t = nlohmann::json::array();
  for (const SearchTask& task : tasks)
    t.push_back({task.layout, task.seconds ? nlohmann::json(*task.seconds) : nlohmann::json()});
  const nlohmann::json j{{"kind", static_cast<int>(pass.kind)},
                         {"effort", static_cast<int>(pass.effort)},
                         {"share", pass.share ? nlohmann::json(*pass.share) : nlohmann::json()},
                         {"layouts", pass.layouts},
                         {"tasks", t}};
  return j.dump();
}

std::pair<SearchPass, std::vector<SearchTask>> decode_share(const std::string& text) {
  const nlohmann::json j = nlohmann::json::parse(text);
  SearchPass pass;
  pass.kind = static_cast<SearchPass::Kind>(j.at("kind").get<int>());
  pass.effort = static_cast<PlannerEffort>(j.at("effort").get<int>());
  if (!j.at("share").is_null()) pass.share = j.at("share").get<std::int64_t>();
  pass.layouts = j.at("layouts").get<std::size_t>();
  std::vector<SearchTask> tasks;
  for (const auto& t : j.at("tasks")) {
    SearchTask task{t.at(0).get<std::size_t>(), std::nullopt};
    if (!t.at(1).is_null()) task.seconds = t.at(1).get<double>();
    tasks.push_back(task);
  }
  return {pass, tasks};
}

std::string encode_outcome(const TaskOutcome& outcome) {
  if (const auto* screen = std::get_if<LayoutScreen>(&outcome)) return "s" + encode_screen(*screen);
  return "r" + encode_result(std::get<LayoutResult>(outcome));
}

TaskOutcome decode_outcome(const std::string& text) {
  if (text.empty() || (text[0] != 's' && text[0] != 'r'))
    throw std::logic_error("decode_outcome: not an outcome");
  if (text[0] == 's') return decode_screen(text.substr(1));
  return decode_result(text.substr(1));
}

ThreadExecutor::ThreadExecutor(const SearchSetup& s, int threads)
    : s_(s), threads_(threads > 0 ? std::min(threads, available_cores()) : available_cores()) {}

void ThreadExecutor::run(const SearchPass& pass, TaskFeed& feed) {
  std::mutex m;
  std::exception_ptr error;  // guarded by m
  const auto work = [&] {
    try {
      while (const std::optional<SearchTask> task = feed.take())
        feed.put(task->layout, run_task(s_, pass, *task, threads_));
    } catch (...) {
      feed.stop();
      const std::lock_guard<std::mutex> lock(m);
      if (!error) error = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads_; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

std::vector<TaskOutcome> run_tasks(const SearchSetup& s, const SearchPass& pass,
                                   const std::vector<SearchTask>& tasks, int threads) {
  ListFeed feed(tasks, 1);
  ThreadExecutor(s, threads).run(pass, feed);
  std::vector<TaskOutcome> out;
  for (std::size_t k = 0; k < tasks.size(); ++k) out.push_back(std::move(feed.outcome(k)));
  return out;
}

SearchRun drive_search(const SearchSetup& s, SearchExecutor& executor, SearchObserver* observer) {
  return Driver(s, executor, observer).run();
}

}  // namespace bmpipe::api
