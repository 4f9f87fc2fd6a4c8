#pragma once
/// \file
/// bmpipe search as a library: the request, the layouts it enumerates, the ranking, and
/// the documents it produces (the `--json` document, the `--csv` table, one result as
/// text). The passes that evaluate the layouts are api/search_driver.hpp's. The executable
/// (on one process or, as a transport, under mpirun) and the Python module all go through
/// here, so they give one answer.

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "experiment/config.hpp"
#include "experiment/write_config.hpp"
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
  /// "auto": every layout under each activation-offload choice at each lead, as `plan
  /// --offload auto` tries them (offload_choices, offload_leads in api/api.hpp), in the
  /// job-wide form and (with the planner) the per-layer form, ranked with the rest; the
  /// config needs an analytic model and a host link. None or "none": the config's own
  /// offload.
  std::optional<std::string> offload;
  /// An exporter's name (search --format or --expressible, Python's expressible=): a layout
  /// its framework refuses to run (its rule table, frameworks/framework_rules.hpp) is
  /// rejected by filter "framework", not ranked. check_search_request refuses an unknown
  /// name ("--expressible", with did-you-mean).
  std::optional<std::string> framework;
  /// --global-batch-size, --seq-length and --set, in that order (Overrides::set; the rest
  /// of it is unused): the config is read with them, and --out writes them in.
  Overrides overrides;
};

/// Whether `request` screens with a short plan first (SearchRequest::screen_evals).
bool screens(const SearchRequest& request);

/// Whether `request` searches with the bound (SearchRequest::bound).
bool uses_bound(const SearchRequest& request);

/// The request's own values, checked before any config is read. Throws RequestError
/// naming the option ("--max-evals", "--layout-evals", "--time-limit-s", "--threads",
/// "--memory-limit-GiB", "--margin-GiB").
void check_search_request(const SearchRequest& request);

/// `search --format FORMAT` (an exporter's name, checked as check_export_request does): only
/// the layouts its framework runs are ranked, so `request.framework` becomes FORMAT. Throws
/// RequestError("--expressible") when the request names another framework already: the
/// format would silently overrule it.
void rank_for_format(SearchRequest& request, const std::string& format);

/// "off", "quick" or "full"; throws RequestError("--planner") for anything else.
PlannerEffort planner_effort(const std::string& name);

/// A search ready to evaluate: the config, the planner options every layout gets, and the
/// layouts in enumeration order.
struct SearchSetup {
  Config config;
  SearchRequest request;
  /// One planner thread: parallelism is across layouts. report_baselines false: a layout
  /// keeps only its plan, so the baselines that cannot be it are not run.
  PlannerOptions options;
  /// The cluster's Topology, shared by every layout's Experiment (its routes are found
  /// once); nullptr: each layout builds its own (the same routes, found again).
  std::shared_ptr<const Topology> topology;
  std::vector<Layout> layouts;         ///< to evaluate, in enumeration order
  std::vector<LayoutResult> rejected;  ///< refused by a divisibility rule while enumerating
};

/// Checks the request and enumerates the layouts of `config`. Throws RequestError and
/// ConfigError.
SearchSetup prepare_search(Config config, const SearchRequest& request);

/// What a search did (drive_search, api/search_driver.hpp): a result for every layout of
/// s.layouts (those the budgets cut carry filter "evaluation limit" or "time limit" and why
/// in `rejected`), and what stopped it: "done", "evaluation limit" or "time limit".
struct SearchRun {
  std::vector<LayoutResult> results;
  std::string stopped_by = "done";
  std::size_t confirmed = 0;  ///< layouts planned again after the screen
};

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
  /// The search tried offload choices (--offload auto): every layout carries its
  /// offload_modules, offload_lead (null for none) and offload_form (job or per_layer).
  bool offload = false;
};

/// Ranks `results` (one per s.layouts entry) together with s.rejected.
SearchReport rank_search(const SearchSetup& s, std::vector<LayoutResult> results, int processes,
                         double wall_s, const std::string& stopped_by = "done",
                         std::size_t confirmed = 0);

/// One result as text and back, exactly (a journal's lines, the MPI transport's messages).
/// The offload keys a layout's --out file states (search --offload auto), as --set pairs:
/// training.offload_modules and training.offload_lead of its choice; in the per-layer form
/// a plan with no offload layer offloads nothing, so "none" and no lead (as plan --offload
/// auto writes it); the layers' modes themselves are the plan's (set_plan_keys). Empty
/// without an offload choice.
std::vector<std::pair<std::string, std::string>> offload_keys(const LayoutResult& best);

/// What a --out file of the fastest layout of `report` (searched on `config`) states over
/// the config: the layout, its micro-batches and its plan (the rows of the layout's own
/// config), the keys layout_config changes with the layout when they differ from the
/// config's, and the experts' folding and cp when the search varied them. None when no
/// layout fits.
std::optional<ConfigEdits> best_layout_edits(const Config& config, const SearchReport& report);

std::string encode_result(const LayoutResult& r);
LayoutResult decode_result(const std::string& text);

/// The document of a finished run of `s` that started at `start`: rank_search with the wall
/// time since, search_document, and the config's provenance (both run_search overloads).
nlohmann::json finished_search_document(const Config& config, const SearchSetup& s, SearchRun run,
                                        std::chrono::steady_clock::time_point start);

/// prepare_search, drive_search on this process's threads, rank_search, search_document:
/// the whole search in this process, as the Python module runs it.
nlohmann::json run_search(const Config& config, const SearchRequest& request);

}  // namespace bmpipe::api
