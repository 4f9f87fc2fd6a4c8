#pragma once
/// \file
/// bmpipe search as a library: the request, the layouts it enumerates, their parallel
/// evaluation on this process's cores, the ranking, and the documents it produces (the
/// `--json` document, the `--csv` table, one result on the MPI wire). The executable's
/// single-process path, its MPI driver (cli/search_mpi.cpp, the only MPI user) and the
/// Python module all go through here, so they give one answer.

#include <cstdint>
#include <functional>
#include <map>
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
};

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
  std::int64_t evaluations = 0;
  std::optional<Time> best;  ///< fastest fitting iteration time so far
  double elapsed_s = 0;
};

/// What evaluate_search did: a result for every layout of s.layouts (those the budgets
/// cut carry filter "evaluation limit" or "time limit" and why in `rejected`), and what
/// stopped it: "done", "evaluation limit" or "time limit".
struct SearchRun {
  std::vector<LayoutResult> results;
  std::string stopped_by = "done";
};

/// Evaluates the layouts of `s` on this process's cores under the request's total budgets.
/// `known[i]`, when set, is layout i's result from an earlier run (a journal): it is taken
/// as is, not recomputed, and counts towards the budgets as if it had been. `done` runs
/// after each layout evaluated here, serialised, with its index and result.
SearchRun evaluate_search(
    const SearchSetup& s, const std::vector<std::optional<LayoutResult>>& known = {},
    const std::function<void(std::size_t, const LayoutResult&, const SearchProgress&)>& done = {});

/// Applies --max-evals to results in enumeration order (a layout is kept while the sum of
/// the kept layouts' evaluations, with its own, is within the budget; it and every later
/// one are cut after that) and marks missing results (nullopt: never started) as cut by
/// the time limit. Used by evaluate_search and the MPI driver alike.
SearchRun apply_budgets(const SearchSetup& s, std::vector<std::optional<LayoutResult>> results);

/// Every layout ranked (fitting first, fastest first; then the rest in enumeration order),
/// the rejected ones included, with the counts the reports print.
struct SearchReport {
  std::vector<LayoutResult> layouts;
  std::map<std::string, int> rejected_by;  ///< filter -> layouts it rejected
  std::int64_t evaluations = 0;
  std::string stopped_by = "done";  ///< SearchRun::stopped_by
  int processes = 1;
  double wall_s = 0;
};

/// Ranks `results` (one per s.layouts entry) together with s.rejected.
SearchReport rank_search(const SearchSetup& s, std::vector<LayoutResult> results, int processes,
                         double wall_s, const std::string& stopped_by = "done");

/// One result as text and back, exactly (the MPI driver's messages).
std::string encode_result(const LayoutResult& r);
LayoutResult decode_result(const std::string& text);

/// prepare_search, evaluate_search, rank_search, search_document: the
/// whole search in this process, as the Python module runs it. `done` as above.
nlohmann::json run_search(const Config& config, const SearchRequest& request,
                          const std::function<void()>& done = {});

}  // namespace bmpipe::api
