#pragma once
/// \file
/// bmpipe search as a library: the request, the layouts it enumerates, their parallel
/// evaluation on this process's cores, the ranking, and the documents it produces (the
/// `--json` document, the `--csv` table, one result on the MPI wire). The executable's
/// single-process path, its MPI driver (cli/search_mpi.cpp, the only MPI user) and the
/// Python module all go through here, so they give one answer.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "experiment/config.hpp"
#include "planner/layout_search.hpp"

namespace bmpipe::api {

struct SearchRequest {
  LayoutSpace space;  ///< empty lists: the defaults (enumerate_layouts)
  PlannerEffort effort = PlannerEffort::quick;
  std::int64_t layout_evals = 20'000;  ///< planner budget per layout with effort full
  /// Evaluations of the whole search (--max-evals; none: no bound). Layouts are admitted
  /// in enumeration order while their evaluations fit in it, so the answer does not depend
  /// on the threads or the machine.
  std::optional<std::int64_t> max_evals;
  /// Wall-clock seconds of the whole search (--time-limit-s; none: no bound). No layout
  /// starts after it, and a layout's planner gets what is left: machine-dependent.
  std::optional<double> time_limit_s;
  std::optional<double> memory_limit_GiB;  ///< none: the device's capacity
  double margin_GiB = 0;                   ///< GiB kept free below the limit (--margin-GiB)
  std::uint64_t seed = 1;
  int threads = 0;  ///< layouts evaluated at once by this process (0: every core)
  /// Branch and bound (planner/layout_bound.hpp; not with effort off, where a layout costs
  /// one simulation): layouts are planned in the order of their lower bounds (ties in
  /// enumeration order), and one whose bound exceeds the best fitting time of the layouts
  /// before it in that order is not planned: filter "bound". The decision depends only on
  /// the layouts before it, so the answer does not depend on threads or processes (work
  /// planned ahead of a decision is discarded), and the best layout is the one an
  /// exhaustive search finds (a skipped layout's every plan is slower than a found one).
  bool bound = true;
  /// After the search: the full planner (layout_evals) on the best `refine` fitting
  /// layouts, each keeping the better of its two plans (--refine K; 0: none). Not run
  /// when a budget stopped the search.
  int refine = 0;
  /// Successive halving with effort quick (--screen-evals N; 0: off): every layout is
  /// first planned with N evaluations (and at most N / 2 more polishing), then the ones
  /// within `screen_margin` of the fastest (a fraction: 0.05 is 5 %) are planned again
  /// with the whole quick budget (300 and its polish), each keeping the better of its two
  /// plans. Not run when a budget stopped the search.
  std::int64_t screen_evals = 64;
  double screen_margin = 0.05;
};

/// Whether `request` screens with a short plan first (SearchRequest::screen_evals).
bool screens(const SearchRequest& request);

/// Whether `request` searches with the bound (SearchRequest::bound).
bool uses_bound(const SearchRequest& request);

/// The request's own values, checked before any config is read. Throws RequestError
/// naming the option ("--max-evals", "--layout-evals", "--time-limit-s", "--threads",
/// "--memory-limit-GiB", "--margin-GiB").
void check_search_request(const SearchRequest& request);

/// "off", "quick" or "full"; throws RequestError("--planner") for anything else.
PlannerEffort planner_effort(const std::string& name);

/// A search ready to evaluate: the config, the planner options every layout gets, and the
/// layouts in enumeration order.
struct SearchSetup {
  Config config;
  SearchRequest request;
  PlannerOptions options;              ///< one planner thread: parallelism is across layouts
  std::vector<Layout> layouts;         ///< to evaluate, in enumeration order
  std::vector<LayoutResult> rejected;  ///< refused by a divisibility rule while enumerating
};

/// Checks the request and enumerates the layouts of `config`. Throws RequestError and
/// ConfigError.
SearchSetup prepare_search(Config config, const SearchRequest& request);

/// Evaluates layouts [begin, end) of `s` on this process's cores (at most
/// request.threads at once), writing out[i] for each; `done` runs after each one,
/// serialised. Every result depends only on its layout, so any split of the range over
/// threads or processes gives the same results.
void evaluate_layouts(const SearchSetup& s, std::size_t begin, std::size_t end,
                      std::vector<LayoutResult>& out, const std::function<void()>& done = {});

/// How far a search has gone, for a progress line.
struct SearchProgress {
  std::size_t done = 0, total = 0;  ///< layouts
  /// With the bound: layouts not done whose bound does not exceed the best so far (the
  /// work that may still be planned); without it, total - done.
  std::size_t may_plan = 0;
  std::size_t skipped = 0;  ///< layouts skipped by the bound so far
  std::int64_t evaluations = 0;
  std::optional<Time> best;  ///< fastest fitting iteration time so far
  double elapsed_s = 0;
  /// Counts one layout's final result: done, its evaluations and, when it fits, the best.
  void count(const LayoutResult& r);
};

/// What evaluate_search did: a result for every layout of s.layouts (those the budgets
/// cut carry filter "evaluation limit" or "time limit" and why in `rejected`), and what
/// stopped it: "done", "evaluation limit" or "time limit".
struct SearchRun {
  std::vector<LayoutResult> results;
  std::string stopped_by = "done";
  std::size_t confirmed = 0;  ///< layouts planned again after the screen
};

/// Plans layout i of `s` as the search's first pass does (the screen's short budget when
/// the request screens), with `options` (s.options, or a copy with less time left).
LayoutResult plan_layout(const SearchSetup& s, std::size_t i, const PlannerOptions& options);

/// A pass after the first: layouts planned again (the screen's second pass with the quick
/// planner, or --refine's with the full one), each within `share` evaluations (under
/// --max-evals: an equal share of what is left) and `seconds` (under --time-limit-s).
struct AgainPass {
  std::vector<std::size_t> which;
  PlannerEffort effort = PlannerEffort::quick;
  std::optional<std::int64_t> share;
  std::optional<double> seconds;
};

/// The layouts `which` (of pass.which) planned as `pass` says, on this process's cores
/// (planners share the spare threads when there are fewer layouts than threads: a plan does
/// not depend on its threads). Any process gives the same results. `finished`, when set,
/// runs after each layout, serialised, with how many of `which` are done.
std::vector<LayoutResult> plan_again_here(
    const SearchSetup& s, const AgainPass& pass, const std::vector<std::size_t>& which,
    const std::function<void(std::size_t done)>& finished = {});

/// How the passes after the first run: `run` plans a pass (one result per pass.which
/// entry, in order; empty: on this process's cores), `started` hears of each before it
/// runs (for a progress line), and `finished`, when the pass runs here, after each of its
/// layouts (serialised; `done` of pass.which.size()).
struct PassHooks {
  std::function<std::vector<LayoutResult>(const AgainPass&)> run;
  std::function<void(const AgainPass&)> started;
  std::function<void(const AgainPass&, std::size_t done)> finished;
};

/// After the first pass, when the search was not stopped by a budget: the screen's second
/// pass (SearchRequest::screen_evals), then --refine, within what --max-evals and
/// --time-limit-s leave (`elapsed_s`: seconds since the search started), each pass run as
/// `hooks` say. Deterministic without --time-limit-s: it
/// depends only on run.results.
void finish_search(const SearchSetup& s, SearchRun& run, double elapsed_s,
                   const PassHooks& hooks = {});

/// Evaluates the layouts of `s` on this process's cores under the request's total budgets.
/// `known[i]`, when set, is layout i's result from an earlier run (a journal): it is taken
/// as is, not recomputed, and counts towards the budgets as if it had been. `done` runs
/// after each layout evaluated here, serialised, with its index and result; `passes` runs
/// the passes after the first (finish_search).
SearchRun evaluate_search(
    const SearchSetup& s, const std::vector<std::optional<LayoutResult>>& known = {},
    const std::function<void(std::size_t, const LayoutResult&, const SearchProgress&)>& done = {},
    const PassHooks& passes = {});

/// The order the layouts are planned in: by lower bound, ties in enumeration order, with
/// their bounds and the refusals the screen found; identity order without the bound.
struct SearchOrder {
  std::vector<std::size_t> order;     ///< layout indices, in planning order
  std::vector<LayoutScreen> screens;  ///< per layout index (empty without the bound)
};
SearchOrder order_search(const SearchSetup& s);

/// The screens (screen_layout) of the layouts `which` of `s`, on this process's cores: a
/// share of order_search's work, for the MPI driver to spread over its processes.
std::vector<LayoutScreen> screen_layouts(const SearchSetup& s,
                                         const std::vector<std::size_t>& which);
/// order_search from every layout's screen, made here or gathered from other processes.
SearchOrder order_from_screens(const SearchSetup& s, std::vector<LayoutScreen> screens);
/// One screen as text and back, exactly (the MPI driver's messages).
std::string encode_screen(const LayoutScreen& screen);
LayoutScreen decode_screen(const std::string& text);

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

/// Applies --max-evals to results in enumeration order (a layout is kept while the sum of
/// the kept layouts' evaluations, with its own, is within the budget; it and every later
/// one are cut after that) and marks missing results (nullopt: never started) as cut by
/// the time limit. Used by evaluate_search and the MPI driver alike.
/// With `order` (the bound's planning order), in that order instead.
SearchRun apply_budgets(const SearchSetup& s, std::vector<std::optional<LayoutResult>> results,
                        const std::vector<std::size_t>& order = {});

/// Every layout ranked (fitting first, fastest first; then the rest in enumeration order),
/// the rejected ones included, with the counts the reports print.
struct SearchReport {
  std::vector<LayoutResult> layouts;
  std::map<std::string, int> rejected_by;  ///< filter -> layouts it rejected
  std::int64_t evaluations = 0;
  std::string stopped_by = "done";  ///< SearchRun::stopped_by
  int processes = 1;
  double wall_s = 0;
  bool bound = false;  ///< searched with the bound (uses_bound)
  int refine = 0;      ///< SearchRequest::refine
  /// SearchRequest::screen_evals when the request screens (else 0), and how many layouts
  /// its second pass planned again (SearchRun::confirmed).
  std::int64_t screen_evals = 0;
  std::size_t confirmed = 0;
  /// A mixture-of-experts model: every layout carries ep and etp (in the JSON, the table).
  bool experts = false;
  /// Some layout of the search has cp other than 1 (--cp): every layout carries cp.
  bool context = false;
};

/// Ranks `results` (one per s.layouts entry) together with s.rejected.
SearchReport rank_search(const SearchSetup& s, std::vector<LayoutResult> results, int processes,
                         double wall_s, const std::string& stopped_by = "done",
                         std::size_t confirmed = 0);

/// One result as text and back, exactly (the MPI driver's messages).
std::string encode_result(const LayoutResult& r);
LayoutResult decode_result(const std::string& text);

/// The document of a finished run of `s` that started at `start`: rank_search with the wall
/// time since, search_document, and the config's provenance (both run_search overloads).
nlohmann::json finished_search_document(const Config& config, const SearchSetup& s, SearchRun run,
                                        std::chrono::steady_clock::time_point start);

/// prepare_search, evaluate_search, rank_search, search_document: the
/// whole search in this process, as the Python module runs it. `done` as above.
nlohmann::json run_search(const Config& config, const SearchRequest& request,
                          const std::function<void()>& done = {});

}  // namespace bmpipe::api
