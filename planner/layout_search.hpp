#pragma once
/// \file
/// bmpipe search: the best parallel layout (tp x pp x dp, virtual stages, micro-batch size,
/// schedule) for a model on a cluster, each layout with its own planned partition and
/// recompute.
///
/// The search is a list of independent layouts: enumerate_layouts() applies the divisibility
/// rules, a static-memory lower bound rejects layouts that cannot fit before anything is
/// simulated, and evaluate_layout() plans (or simulates) each survivor. Every layout's
/// result depends only on the layout and the options, so the work can be split over threads
/// or processes (cli/search_mpi) in any way and ranked afterwards with the same answer.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "experiment/config.hpp"
#include "planner/planner.hpp"

namespace bmpipe {

/// How an activation-offload choice is planned (plan --offload's forms, api/api.cpp):
///   job        the job-wide form: the layout's recompute as planned, and every none and
///              selective layer moves the modules (Megatron-Core's --offload-modules)
///   per_layer  the per-layer form (RecomputeSpec::per_layer_offload): the planner picks none,
///              selective, full, offload or selective_offload for each layer, and only the
///              offload layers move the modules
///   only       offload alone: the per-layer form without the recompute modes, so each layer
///              is none or offload (offload_only)
enum class OffloadForm { job, per_layer, only };

/// "job", "per_layer" or "only": the form's name in JSON, CSV, journals and plan's summary.
constexpr std::string_view offload_form_name(OffloadForm f) {
  return f == OffloadForm::job ? "job" : f == OffloadForm::per_layer ? "per_layer" : "only";
}

/// The form called `text`, or nullopt.
constexpr std::optional<OffloadForm> parse_offload_form(std::string_view text) {
  for (const OffloadForm f : {OffloadForm::job, OffloadForm::per_layer, OffloadForm::only})
    if (offload_form_name(f) == text) return f;
  return std::nullopt;
}

/// Offload alone (OffloadForm::only): `e` with every layer's modes but none and offload
/// removed, so that a planner's search, its starting points and its baselines run none or
/// offload only. `e` is prepared from a config whose training.recompute names offload
/// (RecomputeSpec::per_layer_offload), so each row has both. What plan --offload only and
/// search's offload-only layouts plan.
std::shared_ptr<const Experiment> offload_only(const Experiment& e);

/// What to try; an empty list means the default range (see enumerate_layouts).
struct LayoutSpace {
  std::vector<int> tp, pp, vpp, micro_batch_size;
  /// Expert parallel and expert tensor parallel sizes (mixture-of-experts models only).
  std::vector<int> ep, etp;
  /// Context-parallel sizes (training.cp; empty: 1 only).
  std::vector<int> cp;
  std::vector<std::string> schedules;
  /// Activation-offload choices (Layout::offload, offload_lead, offload_form), each layout
  /// tried under each, in this order (search --offload auto: api::offload_choices at
  /// api::offload_leads, job-wide, then per layer, then offload alone; --offload only: the
  /// last). Empty: the config's own only.
  struct OffloadChoice {
    std::string modules;
    int lead = -1;
    OffloadForm form = OffloadForm::job;
  };
  std::vector<OffloadChoice> offload;
};

struct Layout {
  int tp = 1, pp = 1, dp = 1, vpp = 1, micro_batch_size = 1;
  std::string schedule;
  int ep = 1, etp = 1;  ///< training.ep, training.etp (1 for dense models)
  /// training.cp: the sequence split over cp ranks placed after tp; dp = devices / (tp pp cp).
  int cp = 1;
  /// LayoutSpace::offload's choice: training.offload_modules (empty: the config's own) and
  /// training.offload_lead (below 0: the config's own).
  std::string offload = "";
  int offload_lead = -1;
  /// How the choice is planned (OffloadForm): job-wide, per layer, or offload alone.
  OffloadForm offload_form = OffloadForm::job;
  friend bool operator==(const Layout&, const Layout&) = default;
};

/// "tp 8 pp 16 dp 8 vpp 1 mbs 1 1f1b", " ep 8 etp 1" after it when ep or etp is not 1,
/// " cp 2" when cp is not 1, and " offload core_attn,attn_proj lead 1" with an offload choice
/// (" per layer" after it in the per-layer form, " only" in the offload-only form)
std::string to_string(const Layout& l);

enum class PlannerEffort { off, quick, full };

struct LayoutResult {
  Layout layout;
  int microbatches = 0;
  /// Empty when the layout ran; else why it was rejected (by a filter or as run).
  std::string rejected;
  std::string filter;  ///< which filter rejected it: "divisibility", "static-memory", "memory", ...
  bool fits = false;
  Time iteration_time = 0;
  double bubble_ratio = 0;
  double tokens_per_s = 0;
  double mfu = 0;
  double tflops_per_device = 0;
  std::int64_t max_peak_bytes = 0;
  std::int64_t capacity_bytes = 0;
  Plan plan;
  std::int64_t evaluations = 0;  ///< simulations spent on this layout
  /// Filter "bound": the layout's lower bound (ns), above the best time found before it.
  Time bound = 0;
};

/// The layouts of `space` for `config`, and (in `rejected`) those a divisibility rule or
/// the static-memory bound refuses, each with its reason. Defaults: tp a power of two up to
/// devices_per_node that divides the attention heads and the FFN size; pp dividing
/// devices / tp and at most the layers; cp 1 (measured layers: the config's cp, where
/// their costs were measured); dp = devices / (tp pp cp), with micro_batch_size x dp
/// dividing the global batch; vpp 1 for 1f1b, zb-h1, zb-h2, {2, 3, 4} for interleaved where
/// pp x vpp divides the layers, 2 for V schedules; micro_batch_size {1, 2, 4}; schedules
/// 1f1b and interleaved; for mixture-of-experts models ep every divisor of the routed
/// experts and etp 1 (dense models: 1 and 1, and --ep or --etp above 1 is an error). A
/// layout whose ep and etp break Megatron-Core's folding (ep divides the experts, etp the
/// experts' FFN, etp x ep divides the stage's tp x dp devices: the rules of
/// experiment/field_checks.cpp, which decide) is rejected by filter "experts". A cp for
/// which tp x pp x cp does not divide the devices, or seq_length is not a multiple of
/// 2 cp (the load-balanced causal split's chunks), or (cp_comm_type a2a) cp does not
/// divide a tp rank's heads (a2a+p2p: cp_hierarchy's a2a level; a hierarchical cp is
/// searched at its config's cp alone), is rejected by filter "divisibility" with the
/// reason. Throws
/// ConfigError for impossible requests (an empty list, a tp that divides nothing, a global
/// batch no layout divides).
std::vector<Layout> enumerate_layouts(const Config& config, const LayoutSpace& space,
                                      std::vector<LayoutResult>* rejected);

/// The config of one layout: the base with tp, pp, dp, vpp, micro-batch size, schedule, ep,
/// etp, cp
/// (and the micro-batches they imply) set, partition and recompute left to the planner.
/// What Megatron-LM requires of the layout is set too: tp_comm_overlap off at tp 1, and
/// sequence_parallel on for a mixture-of-experts model at tp > 1.
Config layout_config(const Config& base, const Layout& layout);

/// The quick planner's evaluations per layout (`bmpipe search --planner quick`).
inline constexpr std::int64_t kQuickEvals = 300;

/// Plans one layout. `effort` off: the uniform partition with the config's recompute;
/// quick: the planner with `quick_evals` evaluations (and, when `quick_total` is set, at
/// most that many with its final polish; unset, the polish has no budget of its own);
/// full: with options.max_evals.
/// `topology`, when given, is a Topology of base.cluster the layouts share (prepare).
LayoutResult evaluate_layout(const Config& base, const Layout& layout, PlannerEffort effort,
                             const PlannerOptions& options, std::int64_t quick_evals = kQuickEvals,
                             std::optional<std::int64_t> quick_total = std::nullopt,
                             const std::shared_ptr<const Topology>& topology = nullptr);

/// What is known of a layout before it is planned: its refusal, exactly as
/// evaluate_layout would report it, by the config or the static-memory filter; else a
/// lower bound on the iteration time of every plan of it (planner/layout_bound.hpp; 0 when
/// the bound's own schedule could not be drawn: evaluate_layout reports why).
struct LayoutScreen {
  std::optional<LayoutResult> refused;
  Time bound = 0;
  int microbatches = 0;
};
LayoutScreen screen_layout(const Config& base, const Layout& layout, const PlannerOptions& options,
                           const std::shared_ptr<const Topology>& topology = nullptr);

/// Ranks results: layouts that fit, fastest first; then the rest in enumeration order.
void rank_layouts(std::vector<LayoutResult>& results);

}  // namespace bmpipe
