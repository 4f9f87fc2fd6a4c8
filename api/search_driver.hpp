#pragma once
/// \file
/// The search's one driver: the bound's screen, the first pass, the screen's second pass and
/// --refine, in that order, written once (drive_search). Where the layouts are evaluated is
/// an executor's business: this process's threads (ThreadExecutor), a journal in front of
/// another executor (api/search_journal.hpp: resume), or processes (api/search_remote.hpp;
/// under mpirun the executable's MPI carries its messages, cli/search_mpi.cpp). An executor
/// only runs the tasks a feed hands out; every decision (order, bound skips, budgets, which
/// layouts are planned again) is the driver's, so every executor gives the same answer.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "api/search.hpp"

namespace bmpipe::api {

/// One pass of a search, as it travels to whoever evaluates its layouts.
struct SearchPass {
  enum class Kind {
    bound,  ///< the bound's screen (screen_layout): a LayoutScreen per layout
    plan,   ///< the first pass: the screen's short plan, or the request's planner
    again,  ///< a layout planned again: the screen's second pass, or --refine
  };
  Kind kind = Kind::plan;
  PlannerEffort effort = PlannerEffort::quick;  ///< again: quick (the screen's) or full (--refine)
  std::optional<std::int64_t> share;            ///< again: evaluations per layout (--max-evals)
  std::size_t layouts = 0;                      ///< again: layouts in the pass
};

/// One layout of a pass: its index in SearchSetup::layouts, and the seconds its planner
/// may take (--time-limit-s less the time gone when it was handed out; none: no bound).
struct SearchTask {
  std::size_t layout = 0;
  std::optional<double> seconds;
};

/// What a task gives: a screen (the bound's pass) or a result (the others).
using TaskOutcome = std::variant<LayoutScreen, LayoutResult>;

/// Runs one task of `pass` here; `threads` is what this process evaluates with (a layout
/// planned again alone gets them all). The outcome depends only on the setup, the pass and
/// the layout, never on the threads or the process.
TaskOutcome run_task(const SearchSetup& s, const SearchPass& pass, const SearchTask& task,
                     int threads);

/// A pass and some of its tasks as text and back, exactly (the MPI transport's messages).
std::string encode_share(const SearchPass& pass, const std::vector<SearchTask>& tasks);
std::pair<SearchPass, std::vector<SearchTask>> decode_share(const std::string& text);
/// One outcome as text and back, exactly (encode_result, or a screen's bound and refusal).
std::string encode_outcome(const TaskOutcome& outcome);
TaskOutcome decode_outcome(const std::string& text);

/// The tasks of one pass, handed out and taken back. Thread-safe: any number of threads
/// (or one thread serving other processes) may take() and put() in any interleaving.
class TaskFeed {
 public:
  virtual ~TaskFeed() = default;
  /// The next task, or none when nothing is left to start (for good: once none, always).
  virtual std::optional<SearchTask> take() = 0;
  /// The outcome of layout `layout`, taken before.
  virtual void put(std::size_t layout, TaskOutcome outcome) = 0;
  /// How many tasks to hand one of `processes` processes at once.
  virtual std::size_t chunk(int processes) = 0;
  /// Nothing more is handed out (an evaluator failed).
  virtual void stop() = 0;
};

/// Where a search's layouts are evaluated.
class SearchExecutor {
 public:
  virtual ~SearchExecutor() = default;
  /// Runs the tasks of `pass` that `feed` hands out until it has none left, putting each
  /// outcome back; returns when every task it took is put. Throws what a task throws.
  virtual void run(const SearchPass& pass, TaskFeed& feed) = 0;
  /// Processes evaluating (the report's count).
  virtual int processes() const { return 1; }
  /// Results of an earlier run by layout index (a journal): taken as they are.
  virtual std::vector<std::optional<LayoutResult>> known() { return {}; }
  /// Each layout's final result of the first pass made by this run, serialised.
  virtual void settled(std::size_t /*layout*/, const LayoutResult& /*result*/) {}
};

/// The cores this process may run on (mpirun may bind it to fewer than the machine has).
int available_cores();

/// This process's threads: each takes a task, runs it (run_task), puts it back.
class ThreadExecutor : public SearchExecutor {
 public:
  /// `threads`: at most that many at once (0: every core; never more than the cores).
  ThreadExecutor(const SearchSetup& s, int threads);
  void run(const SearchPass& pass, TaskFeed& feed) override;
  int threads() const { return threads_; }

 private:
  const SearchSetup& s_;
  int threads_;
};

/// `tasks` of `pass` run here on `threads` threads, their outcomes in the order given (an
/// MPI worker's share).
std::vector<TaskOutcome> run_tasks(const SearchSetup& s, const SearchPass& pass,
                                   const std::vector<SearchTask>& tasks, int threads);

/// How far the first pass has gone, for a progress line.
struct SearchProgress {
  std::size_t done = 0, total = 0;  ///< layouts
  /// With the bound: layouts not done whose bound does not exceed the best so far (the
  /// work that may still be planned); without it, total - done.
  std::size_t may_plan = 0;
  std::size_t skipped = 0;  ///< layouts skipped by the bound so far
  std::int64_t evaluations = 0;
  std::optional<Time> best;  ///< fastest fitting iteration time so far
  double elapsed_s = 0;      ///< since the first pass started
  /// Seconds left: this run's evaluations per planned layout times the layouts that may
  /// still be planned, at this run's rate, capped by what --max-evals and --time-limit-s
  /// leave; 0 when done or when what is left will be skipped; none before a layout was
  /// planned here.
  std::optional<double> eta_s;
};

/// How far a pass after the first has gone.
struct PassProgress {
  std::size_t done = 0, total = 0;  ///< layouts of the pass
  double elapsed_s = 0;             ///< since the pass started
  double eta_s = 0;                 ///< at the pass's own rate of layouts per second
};

/// Hears how a search goes (a progress line). Calls are serialised.
class SearchObserver {
 public:
  virtual ~SearchObserver() = default;
  /// A layout's final result of the first pass (not one read back from a journal).
  virtual void layout(const LayoutResult& /*r*/, const SearchProgress& /*p*/) {}
  /// A pass after the first starts, and each of its layouts is done.
  virtual void pass_started(const SearchPass& /*pass*/) {}
  virtual void pass_progress(const SearchPass& /*pass*/, const PassProgress& /*p*/) {}
};

/// The whole search of `s` on `executor`: with the bound, every layout screened and
/// planned in bound order (a layout whose bound exceeds the best before it is skipped);
/// else planned in enumeration order; under the request's budgets. Then, unless a budget
/// stopped it, the screen's second pass and --refine. Deterministic without
/// --time-limit-s: the answer depends neither on the executor nor on its threads.
SearchRun drive_search(const SearchSetup& s, SearchExecutor& executor,
                       SearchObserver* observer = nullptr);

}  // namespace bmpipe::api
