#include "api/search.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>
#include <utility>

#include "api/api.hpp"
#include "api/contracts.hpp"
#include "api/errors.hpp"
#include "api/search_driver.hpp"
#include "experiment/experiment.hpp"
#include "experiment/suggest.hpp"
#include "frameworks/exporters.hpp"
#include "frameworks/framework_rules.hpp"
#include "sim/time.hpp"
#include "sim/units.hpp"

namespace bmpipe::api {

void rank_for_format(SearchRequest& request, const std::string& format) {
  check_export_request(ExportRequest{format, {}});
  if (request.framework && *request.framework != format)
    throw RequestError("--expressible", "'" + *request.framework + "' beside --format '" + format +
                                            "': --format ranks only the layouts " +
                                            "its framework runs; give one framework");
  request.framework = format;
}

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
  if (r.offload && *r.offload != "auto" && *r.offload != "none" && *r.offload != "only")
    throw RequestError("--offload", "'" + *r.offload +
                                        "' is not a choice (expected auto: every layout under "
                                        "each activation-offload choice; only: under each "
                                        "offload without recompute; or none)");
  if (r.offload == "only" && r.effort == PlannerEffort::off)
    throw RequestError("--offload",
                       "only needs the planner to pick each layer's offload (expected --planner "
                       "quick or full with it)");
  if (r.framework && !find_exporter(*r.framework))
    throw RequestError("--expressible", "unknown framework '" + *r.framework + "'" +
                                            did_you_mean(*r.framework, exporter_names()) + " (" +
                                            comma_list(exporter_names()) + ")");
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
  s.options.report_baselines = false;
  // As plan's: the limit (the device's capacity unless --memory-limit-GiB) less the margin.
  if (request.memory_limit_GiB || request.margin_GiB > 0) {
    const double gib = request.memory_limit_GiB.value_or(config.device.memory_GiB);
    s.options.memory_limit_bytes =
        static_cast<std::int64_t>(std::llround((gib - request.margin_GiB) * 1073741824.0));
    if (s.options.memory_limit_bytes <= 0)
      throw RequestError("--margin-GiB", "leaves no memory below the limit");
  }
  LayoutSpace space = request.space;
  if (request.offload == "auto" || request.offload == "only") {
    require_offload_auto(config);
    // As plan --offload auto: the job-wide form (with "none": recompute alone, once, at the
    // config's lead, since no lead matters when nothing is offloaded), then the per-layer
    // form, where the planner picks each layer's mode (RecomputeSpec::per_layer_offload),
    // then offload alone (none or offload per layer: offload_only). The per-layer forms need
    // the planner: --planner off runs the config's recompute. --offload only: as plan
    // --offload only, the last form alone.
    const bool only = request.offload == "only";
    const std::vector<std::string> choices = offload_choices(config);
    std::vector<OffloadForm> forms;
    if (!only) forms.push_back(OffloadForm::job);
    if (request.effort != PlannerEffort::off)
      for (const OffloadForm f : {OffloadForm::per_layer, OffloadForm::only})
        if (!only || f == OffloadForm::only) forms.push_back(f);
    for (const OffloadForm form : forms)
      for (const std::string& modules : choices) {
        if (modules == "none" && form != OffloadForm::job) continue;
        for (const int lead : modules == "none" ? std::vector<int>{-1} : offload_leads(config))
          space.offload.push_back({modules, lead, form});
      }
  }
  s.layouts = enumerate_layouts(config, space, &s.rejected);
  // --format F (--expressible F): only jobs F's framework runs are ranked, so that the best
  // is one it exports: on a schedule it runs (as plan --expressible plans only those), and
  // by its rules.
  if (const Exporter* x = request.framework ? find_exporter(*request.framework) : nullptr)
    std::erase_if(s.layouts, [&](const Layout& l) {
      LayoutResult r;
      r.layout = l;
      r.filter = "framework";
      if (x->runs && !x->runs(l.schedule)) {
        r.rejected = x->not_run(l.schedule);
        s.rejected.push_back(std::move(r));
        return true;
      }
      std::optional<RuleRefusal> refused;
      try {
        refused = framework_refusal(*x, stated_job(*x, layout_config(config, l)));
      } catch (const ConfigError&) {
        return false;  // the layout's own refusal, reported when it is run
      }
      if (!refused) return false;
      r.rejected = std::string(refused->rule->framework) + " refuses it (" +
                   std::string(refused->rule->id) + "): " + refused->breach.key + ": " +
                   refused->breach.message;
      s.rejected.push_back(std::move(r));
      return true;
    });
  s.topology = std::make_shared<const Topology>(config.cluster);
  s.config = std::move(config);
  return s;
}

bool uses_bound(const SearchRequest& request) {
  return request.bound && request.effort != PlannerEffort::off;
}

bool screens(const SearchRequest& request) {
  return request.effort == PlannerEffort::quick && request.screen_evals > 0;
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
  report.offload = s.request.offload == "auto" || s.request.offload == "only";
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
  r.layout.offload = j.value("offload_modules", std::string());
  r.layout.offload_lead = j.value("offload_lead", -1);
  if (j.contains("offload_form")) {
    const std::optional<OffloadForm> form =
        parse_offload_form(j.at("offload_form").get<std::string>());
    if (!form) throw std::logic_error("decode_result: unknown offload form " + j.dump());
    r.layout.offload_form = *form;
  }
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

std::optional<ConfigEdits> best_layout_edits(const Config& config, const SearchReport& report) {
  const std::vector<LayoutResult>& ranked = report.layouts;
  if (ranked.empty() || !ranked.front().rejected.empty() || !ranked.front().fits)
    return std::nullopt;
  const LayoutResult& best = ranked.front();
  ConfigEdits edits{best.layout.schedule,
                    best.layout.pp,
                    best.layout.vpp,
                    best.microbatches,
                    {},
                    {},
                    best.layout.tp,
                    best.layout.dp,
                    best.layout.micro_batch_size};
  // The plan's rows are those of the layout's own config (separate ends or not).
  const Config own = layout_config(config, best.layout);
  set_plan_keys(edits, own, best.plan);
  // Keys layout_config changes with the layout (sequence parallelism for MoE at tp > 1,
  // the tp overlap at tp 1): the file says them when they differ from the source's.
  if (own.training.sequence_parallel != config.training.sequence_parallel)
    edits.sequence_parallel = own.training.sequence_parallel;
  if (own.training.tp_comm_overlap != config.training.tp_comm_overlap)
    edits.tp_comm_overlap = own.training.tp_comm_overlap;
  // The experts' folding and the context split are the layout's too (layout_config).
  if (report.experts) {
    edits.ep = best.layout.ep;
    edits.etp = best.layout.etp;
  }
  if (report.context || best.layout.cp != config.training.cp) edits.cp = best.layout.cp;
  return edits;
}

std::vector<std::pair<std::string, std::string>> offload_keys(const LayoutResult& best) {
  std::vector<std::pair<std::string, std::string>> out;
  const std::vector<Recompute>& modes = best.plan.recompute;
  const bool moves = best.layout.offload_form == OffloadForm::job ||
                     std::any_of(modes.begin(), modes.end(), is_offload_mode);
  if (!best.layout.offload.empty())
    out.emplace_back("training.offload_modules", moves ? best.layout.offload : "none");
  if (best.layout.offload_lead >= 0 && moves)
    out.emplace_back("training.offload_lead", std::to_string(best.layout.offload_lead));
  return out;
}

std::string encode_result(const LayoutResult& r) {
  nlohmann::json j = layout_json(r);
  j["iteration_time_ns"] = r.iteration_time;
  j["fits"] = r.fits;  // the raw flag (layout_json folds rejection into it)
  j["ep"] = r.layout.ep;
  j["etp"] = r.layout.etp;
  j["cp"] = r.layout.cp;
  if (!r.layout.offload.empty()) j["offload_modules"] = r.layout.offload;
  if (r.layout.offload_lead >= 0) j["offload_lead"] = r.layout.offload_lead;
  if (r.layout.offload_form != OffloadForm::job)
    j["offload_form"] = offload_form_name(r.layout.offload_form);
  if (r.bound > 0) j["bound_ns"] = r.bound;
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

LayoutResult decode_result(const std::string& text) {
  return layout_from_json(nlohmann::json::parse(text));
}

nlohmann::json run_search(const Config& config, const SearchRequest& request) {
  const auto start = std::chrono::steady_clock::now();
  const SearchSetup s = prepare_search(config, request);
  ThreadExecutor threads(s, request.threads);
  SearchRun run = drive_search(s, threads);
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
