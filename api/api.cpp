#include "api/api.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iterator>
#include <optional>
#include <type_traits>
#include <utility>

#include "api/contracts.hpp"
#include "api/summary.hpp"
#include "experiment/output_work.hpp"
#include "experiment/suggest.hpp"
#include "frameworks/framework_rules.hpp"
#include "frameworks/megatron/formats.hpp"
#include "planner/baselines.hpp"
#include "planner/export_layout.hpp"
#include "planner/layout_search.hpp"
#include "planner/schedules_plan.hpp"
#include "schedules/registry.hpp"
#include "schedules/schedule_file.hpp"
#include "sim/compiled_schedule.hpp"

namespace bmpipe::api {

RequestError::RequestError(std::string key, std::string message)
    : std::invalid_argument(key + ": " + message),
      key_(std::move(key)),
      message_(std::move(message)) {}

std::string schedule_help_text() {
  return schedule_help();
}

std::vector<std::string> schedule_name_list() {
  std::vector<std::string> names;
  for (const ScheduleInfo& info : builtin_schedules()) names.emplace_back(info.name);
  return names;
}

const ScheduleInfo& require_schedule(std::string_view name, const std::string& key) {
  const ScheduleInfo* info = find_schedule(name);
  if (!info) throw RequestError(key, unknown_schedule_message(name));
  return *info;
}

bool config_source_is_path(const std::string& source) {
  const bool one_line = source.find('\n') == std::string::npos;
  auto ends_with = [&](const char* suffix) {
    const std::string s(suffix);
    return source.size() >= s.size() && source.compare(source.size() - s.size(), s.size(), s) == 0;
  };
  std::error_code ec;
  return (one_line && (ends_with(".yaml") || ends_with(".yml"))) ||
         (one_line && std::filesystem::is_regular_file(source, ec));
}

Config load_config_source(const std::string& source, const Overrides& overrides) {
  if (config_source_is_path(source)) return load_config(source, overrides);
  return parse_config(source, "<string>", overrides);
}

// ---- simulate ---------------------------------------------------------------------------

std::vector<OutputWork> simulation_outputs_work(bool trace, bool svg, bool memory_svg) {
  std::vector<OutputWork> outputs;
  if (svg || memory_svg)
    outputs.push_back({svg && memory_svg ? "--svg and --memory-svg"
                       : svg             ? "--svg"
                                         : "--memory-svg",
                       kTimelineBytesPerOp});
  if (trace) outputs.push_back({"--trace", kTraceBytesPerOp});
  return outputs;
}

void check_simulation_outputs(const Config& config, bool trace, bool svg, bool memory_svg) {
  check_output_work(config, simulation_outputs_work(trace, svg, memory_svg));
}

TraceLabels trace_labels(const PreparedSimulation& run) {
  const std::vector<StageInfo> stages = stage_info(*run.experiment, run.plan);
  return TraceLabels{layer_range_labels(run.plan.partition), stage_recompute_labels(stages),
                     stage_recompute_counts(stages)};
}

void check_simulate_request(const SimulateRequest& request) {
  const Overrides& o = request.overrides;
  if (request.schedule_file && (o.schedule || o.pp || o.vpp || o.microbatches))
    throw RequestError("--schedule-file",
                       "sets the schedule, pp, vpp and micro-batches; do not combine it "
                       "with a schedule, pp, vpp or micro-batches override");
}

PreparedSimulation prepare_simulation(Config config, const SimulateRequest& request) {
  check_simulate_request(request);
  Overrides o = request.overrides;
  // A schedule file decides pp (its rows), the chunks per rank and the micro-batches.
  std::optional<Schedule> from_file;
  if (request.schedule_file) {
    from_file = load_schedule_file(*request.schedule_file);
    o.pp = from_file->num_ranks;
    o.vpp = from_file->num_stages % from_file->num_ranks == 0 ? from_file->chunks_per_device() : 1;
    o.microbatches = from_file->num_microbatches;
  }
  apply_overrides(config, o);

  PreparedSimulation run;
  run.experiment = prepare(config);
  run.schedule = from_file ? std::move(*from_file)
                           : make_schedule(*run.experiment, config.training.schedule,
                                           config.training.vpp, nullptr, request.on_candidate);
  run.plan = config_plan(*run.experiment, run.schedule.num_stages);
  run.input = assemble(*run.experiment, run.plan, run.schedule);
  return run;
}

SimulationReport run_prepared(const PreparedSimulation& run, Observer* observer,
                              const std::function<void(const std::string&)>& on_phase) {
  SimulationReport report;
  // Compiled once for the run and the bubble breakdown's three re-runs.
  const CompiledSchedule compiled = CompiledSchedule::borrowing(run.schedule);
  if (on_phase)
    on_phase("simulating " + std::to_string(run.schedule.total_ops()) + " ops on " +
             std::to_string(run.schedule.num_ranks) + " pipeline ranks");
  report.result = simulate(run.input, compiled, observer);
  report.info = make_run_info(*run.experiment, run.plan, run.schedule);
  if (report.result.ok) {
    if (on_phase) on_phase("bubble breakdown: 3 more simulations");
    report.bubbles = decompose_bubbles(run.input, compiled, report.result);
  }
  report.summary =
      summary_json(report.info, report.result, report.bubbles ? &*report.bubbles : nullptr);
  report.summary["job"] = job_json(run.experiment->config, report.info);
  report.summary["bmpipe"] = provenance(run.experiment->config.file);
  return report;
}

SimulateOutcome run_simulate(const Config& config, const SimulateRequest& request,
                             Observer* observer) {
  SimulateOutcome out;
  out.prepared = prepare_simulation(config, request);
  out.report = run_prepared(out.prepared, observer);
  return out;
}

// ---- compare ----------------------------------------------------------------------------

void check_compare_request(const CompareRequest& request) {
  if (request.schedules.empty()) throw RequestError("--schedules", "the list is empty");
  for (const std::string& n : request.schedules) require_schedule(n, "--schedules");
}

CompareOutcome run_compare(const Config& config, const CompareRequest& request) {
  check_compare_request(request);
  Config base = config;
  Overrides o = request.overrides;
  o.schedule.reset();  // each row names its own
  apply_overrides(base, o);

  if (request.record_timelines) {
    // The picture keeps every schedule's timeline until it is drawn: each counts against
    // the work limit at the largest schedule's op bound, before anything is allocated.
    Config worst = base;
    for (const std::string& name : request.schedules) {
      Config c = base;
      c.training.schedule = name;
      c.training.vpp = effective_vpp(require_schedule(name, "--schedules"), base.training.vpp);
      if (op_bound(c) > op_bound(worst)) worst = c;
    }
    check_output_work(
        worst, {{"--svg", kTimelineBytesPerOp * static_cast<int>(request.schedules.size())}});
  }
  CompareOutcome out;
  // Per row, its timeline's index in out.timelines (refused rows have none).
  std::vector<std::optional<std::size_t>> timeline_of;
  // One experiment for every schedule: the layer table does not depend on the schedule.
  const std::shared_ptr<const Experiment> experiment = prepare(base);
  for (std::size_t k = 0; k < request.schedules.size(); ++k) {
    const std::string& name = request.schedules[k];
    const std::string which = name + " (" + std::to_string(k + 1) + " of " +
                              std::to_string(request.schedules.size()) + "): ";
    const int vpp = effective_vpp(require_schedule(name, "--schedules"), base.training.vpp);
    // One schedule refusing this config (DualPipeV with m < 2p, a partition sized for
    // another vpp, ...) does not stop the others from being compared.
    try {
      if (request.on_phase) request.on_phase(which + "making the schedule");
      const Schedule schedule = make_schedule(*experiment, name, vpp);
      if (request.on_phase)
        request.on_phase(which + "simulating " + std::to_string(schedule.total_ops()) + " ops");
      const Plan plan = config_plan(*experiment, schedule.num_stages);
      CompareRow row{make_run_info(*experiment, plan, schedule), {}, {}};
      if (request.record_timelines) {
        timeline_of.push_back(out.timelines.size());
        out.timelines.push_back(record_timeline(assemble(*experiment, plan, schedule), schedule,
                                                schedule.name, &row.result));
      } else {
        timeline_of.emplace_back();
        row.result = run(*experiment, plan, schedule);
      }
      out.rows.push_back(std::move(row));
    } catch (const ConfigError& e) {
      CompareRow row{
          RunInfo{name, base.training.pp, vpp, base.training.microbatches}, {}, e.what()};
      row.result.error = e.what();
      timeline_of.emplace_back();
      out.rows.push_back(std::move(row));
    }
  }
  // Fastest first; the pictures in the table's order, so the SVG reads as the table does.
  std::vector<std::size_t> order(out.rows.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t ia, std::size_t ib) {
    const CompareRow& a = out.rows[ia];
    const CompareRow& b = out.rows[ib];
    if (a.result.ok != b.result.ok) return a.result.ok;
    return a.result.iteration_time < b.result.iteration_time;
  });
  std::vector<CompareRow> rows;
  std::vector<Timeline> timelines;
  for (std::size_t i : order) {
    rows.push_back(std::move(out.rows[i]));
    if (timeline_of[i]) timelines.push_back(std::move(out.timelines[*timeline_of[i]]));
  }
  out.rows = std::move(rows);
  out.timelines = std::move(timelines);
  out.summary = compare_document(out.rows, base);
  return out;
}

// ---- cost -------------------------------------------------------------------------------

CostOutcome run_cost(const Config& config, bool with_ops) {
  if (!config.model.analytic())
    config.fail("model.layers",
                "are measured costs; bmpipe cost needs an analytic model (model.preset, "
                "model.hf_config or shape keys)");
  CostOutcome out;
  out.experiment = prepare(config);
  out.schedule = make_schedule(*out.experiment);
  out.plan = config_plan(*out.experiment, out.schedule.num_stages);
  const SimInput input = assemble(*out.experiment, out.plan, out.schedule);
  const AnalyticCosts& a = *out.experiment->analytic;
  for (const StageInfo& st : stage_info(*out.experiment, out.plan)) {
    out.stage_static_bytes.push_back(st.static_bytes);
    const int e = a.settings.dtype_bytes;
    const StaticParts dense =
        static_parts(st.params - st.expert_params, e, a.optimizer, a.dense_shard());
    const StaticParts experts = static_parts(st.expert_params, e, a.optimizer, a.edp_shard());
    CostOutcome::StaticBreakdown b;
    b.weights = static_cast<std::int64_t>(std::llround(dense.weights + experts.weights));
    b.grads = static_cast<std::int64_t>(std::llround(dense.grads + experts.grads));
    b.optimizer = static_cast<std::int64_t>(std::llround(dense.optimizer + experts.optimizer));
    b.other = st.static_bytes - b.weights - b.grads - b.optimizer;
    out.stage_static_parts.push_back(b);
  }
  // Per rank, the end-of-iteration work: its stages' dp reductions and its optimizer step
  // (however much of the reductions a run hides, this is the work).
  std::vector<Time> tail = input.tail_time;
  for (std::size_t s = 0; s < input.grad_buckets.size(); ++s)
    for (const GradBucket& b : input.grad_buckets[s])
      tail.at(static_cast<std::size_t>(out.schedule.stage_rank[s])) += b.time;
  for (Time t : tail) out.tail_ms.push_back(ns_to_ms(t));

  out.summary = cost_document(config, out, with_ops);
  out.summary["bmpipe"] = provenance(config.file);
  return out;
}

// ---- plan -------------------------------------------------------------------------------

PlannedJob planned_job(const PlanResults& planned, const PlanRequest& request) {
  const PlanRun& shown = *planned.shown;
  PlannedJob job{request.overrides, ConfigEdits{planned.outcomes.front().schedule,
                                                shown.schedule.num_ranks,
                                                shown.schedule.chunks_per_device(),
                                                shown.schedule.num_microbatches,
                                                {},
                                                {},
                                                {},
                                                {},
                                                {}}};
  set_plan_keys(job.edits, planned.experiment->config, shown.plan);
  // --offload auto: the offload choice kept is part of the job written and exported.
  if (!planned.offload_modules.empty())
    job.overrides.set.emplace_back("training.offload_modules", planned.offload_modules);
  if (planned.offload_lead)
    job.overrides.set.emplace_back("training.offload_lead", std::to_string(*planned.offload_lead));
  return job;
}

std::int64_t plan_memory_limit_bytes(const Config& config, const PlanRequest& r) {
  if (!(r.margin_GiB >= 0) || !std::isfinite(r.margin_GiB))
    throw RequestError("--margin-GiB", "must be 0 or more GiB");
  if (r.memory_limit_GiB) {
    const double lim = *r.memory_limit_GiB;
    if (!(lim > 0) || !std::isfinite(lim) || lim > 1e6)
      throw RequestError("--memory-limit-GiB", "must be a positive number of GiB");
  }
  const double limit_gib = r.memory_limit_GiB.value_or(config.device.memory_GiB);
  const auto bytes =
      static_cast<std::int64_t>(std::llround((limit_gib - r.margin_GiB) * 1073741824.0));
  if (bytes <= 0) throw RequestError("--margin-GiB", "leaves no memory below the limit");
  return bytes;
}

namespace {
constexpr const char* kLayoutExpected =
    " (expected Megatron-LM's --pipeline-model-parallel-layout: stages split by '|', E the "
    "embedding, t a decoder layer, m a multi-token prediction layer, L the loss, x*n "
    "repeats, e.g. \"Et*9|t*9|t*8|t*6L\")";
}  // namespace

void check_plan_request(const PlanRequest& r) {
  if (!(r.margin_GiB >= 0) || !std::isfinite(r.margin_GiB))
    throw RequestError("--margin-GiB", "must be 0 or more GiB");
  if (r.memory_limit_GiB && (!(*r.memory_limit_GiB > 0) || !std::isfinite(*r.memory_limit_GiB) ||
                             *r.memory_limit_GiB > 1e6))
    throw RequestError("--memory-limit-GiB", "must be a positive number of GiB");
  if (r.time_limit_s && !(*r.time_limit_s > 0))
    throw RequestError("--time-limit-s", "must be greater than 0 seconds");
  if (r.max_evals < 1) throw RequestError("--max-evals", "must be at least 1");
  if (r.threads < 0) throw RequestError("--threads", "must be 0 or more");
  if (r.baseline && std::find(baseline_names().begin(), baseline_names().end(), *r.baseline) ==
                        baseline_names().end()) {
    // The old names are refused, not aliased: "megatron-default" meant full recompute, while
    // Megatron-LM's default is none, and an alias would keep that reading alive.
    for (const auto& [old_name, new_name] : renamed_baselines())
      if (*r.baseline == old_name)
        throw RequestError("--baseline", "'" + old_name + "' is now called '" + new_name +
                                             "' (Megatron-LM's default is no recompute: "
                                             "megatron-no-recompute) (" +
                                             comma_list(baseline_names()) + ")");
    throw RequestError("--baseline", "unknown baseline '" + *r.baseline + "'" +
                                         did_you_mean(*r.baseline, baseline_names()) + " (" +
                                         comma_list(baseline_names()) + ")");
  }
  if (r.expressible && !find_exporter(*r.expressible))
    throw RequestError("--expressible", "unknown framework '" + *r.expressible + "'" +
                                            did_you_mean(*r.expressible, exporter_names()) + " (" +
                                            comma_list(exporter_names()) + ")");
  if (r.offload && *r.offload != "auto" && *r.offload != "none" && *r.offload != "only")
    throw RequestError("--offload", "'" + *r.offload +
                                        "' is not a choice (expected auto: plan for each "
                                        "activation-offload choice and keep the fastest; only: "
                                        "offload without recompute; or none)");
  if (r.baseline_layout) {
    try {
      parse_megatron_layout(*r.baseline_layout);
    } catch (const FormatError& e) {
      throw RequestError("--baseline-layout",
                         "'" + *r.baseline_layout + "': " + e.what() + kLayoutExpected);
    }
  }
}

std::vector<std::string> offload_choices(const Config& config) {
  std::vector<std::string> out = {"none", "core_attn,attn_proj", "qkv_linear,core_attn,attn_proj"};
  const ModelShape* shape = config.model.shape ? &*config.model.shape : nullptr;
  if (shape && shape->is_moe()) {
    out.push_back("expert_fc1,moe_act");
    out.push_back("core_attn,attn_proj,expert_fc1,moe_act");
    out.push_back("qkv_linear,core_attn,attn_proj,mlp_norm,expert_fc1,moe_act");
  }
  if (shape && shape->is_mla()) out.back() = "attn_norm," + out.back();
  return out;
}

void require_offload_auto(const Config& config) {
  const HardwareSpec* hw = config.device.hardware ? &*config.device.hardware : nullptr;
  if (!config.model.analytic() || !hw || !(hw->host_link_GBps > 0))
    throw RequestError("--offload",
                       "auto needs an analytic model on a device with a host link "
                       "(cluster.device.host_link_GBps)");
  // Megatron-Core refuses fine-grained offload beside whole-layer offload.
  if (config.training.offload_layers > 0)
    throw RequestError("--offload",
                       "auto tries training.offload_modules, which Megatron-Core "
                       "does not run beside the job's whole-layer offload "
                       "(training.offload_layers " +
                           std::to_string(config.training.offload_layers) +
                           "; expected no --offload, or offload_layers 0)");
}

std::vector<int> offload_leads(const Config& config) {
  std::vector<int> out = {config.training.offload_lead};
  for (const int lead : {0, 1, 2})
    if (lead != out.front()) out.push_back(lead);
  return out;
}

namespace {

// How a plan of run_plan treats offload (PlanRequest::offload): OffloadForm
// (planner/layout_search.hpp), as search plans its layouts.
PlanResults plan_one(const Config& config_in, const PlanRequest& r,
                     OffloadForm form = OffloadForm::job);

}  // namespace

PlanResults run_plan(const Config& config_in, const PlanRequest& r) {
  // Every argument is checked before the config is prepared, so a typo fails at once.
  check_plan_request(r);
  if (!r.offload || *r.offload == "none") return plan_one(config_in, r);
  // Recompute and offload chosen together: the search for each offload choice at each lead
  // picks every layer's mode under it, and the fastest fitting of them all is kept. auto
  // plans the job-wide form (with "none": recompute alone), the per-layer form and offload
  // alone, so the plan kept is never slower than recompute alone or offload alone as the
  // planner finds them; only plans offload alone.
  require_offload_auto(config_in);
  const bool only = *r.offload == "only";
  std::vector<OffloadForm> forms = {OffloadForm::only};
  if (!only) forms = {OffloadForm::job, OffloadForm::per_layer, OffloadForm::only};
  std::optional<PlanResults> best;
  OffloadForm best_form = OffloadForm::job;
  nlohmann::json tried = nlohmann::json::array();
  std::string why_not;
  for (const OffloadForm form : forms)
    for (const std::string& modules : offload_choices(config_in)) {
      // "none" is recompute alone: planned once, in the job-wide form.
      if (modules == "none" && form != OffloadForm::job) continue;
      // No lead matters when nothing is offloaded: "none" is planned once.
      const std::vector<int> leads = modules == "none"
                                         ? std::vector<int>{config_in.training.offload_lead}
                                         : offload_leads(config_in);
      for (const int lead : leads) {
        Config c = config_in;
        c.training.offload_modules = modules;
        c.training.offload_lead = lead;
        // The per-layer forms: a table with the offload mode (every layer may take it).
        if (form != OffloadForm::job) c.training.recompute = RecomputeSpec::per_layer_offload();
        nlohmann::json row = {{"offload_modules", modules}};
        if (modules != "none") row["offload_lead"] = lead;
        if (!only) row["form"] = offload_form_name(form);
        // --expressible: an offload choice the framework's text cannot state (Megatron-LM's
        // flags have lead 1 alone; MindFormers and torchtitan no module offload) is not
        // planned, so that the plan kept exports as planned.
        if (r.expressible) {
          const Exporter& x = *find_exporter(*r.expressible);
          Config plain = config_in;
          plain.training.offload_modules = "none";
          if (const std::string why = x.refusal(c); !why.empty() && why != x.refusal(plain)) {
            row["error"] = why;
            tried.push_back(row);
            continue;
          }
        }
        try {
          check_config(c);
          PlanResults one = plan_one(c, r, form);
          const Time t = one.shown->result.iteration_time;
          std::int64_t peak = 0;
          for (const DeviceResult& d : one.shown->result.devices)
            peak = std::max(peak, d.peak_bytes);
          const auto& modes = one.shown->plan.recompute;
          const auto offloaded = std::count_if(modes.begin(), modes.end(), is_offload_mode);
          row["iteration_time_ms"] = ns_to_ms(t);
          row["peak_memory_bytes"] = peak;
          if (form != OffloadForm::job) row["offload_layers"] = offloaded;
          // Strictly faster only: of equal times the first tried is kept (fewer modules, the
          // config's lead, the job-wide form).
          if (!best || t < best->shown->result.iteration_time) {
            if (one.offload_modules.empty()) {  // else --baseline megatron-offload's own
              // A per-layer plan without offload layers offloads nothing: written as none
              // (with the modules and no offload layer it would read as the job-wide form).
              const bool none = modules == "none" || (form != OffloadForm::job && offloaded == 0);
              one.offload_modules = none ? "none" : modules;
              one.offload_lead = none ? std::nullopt : std::optional<int>(lead);
            }
            best = std::move(one);
            best_form = form;
          }
        } catch (const NoPlanFits& x) {
          row["error"] = x.what();
          if (why_not.empty()) why_not = x.what();
        } catch (const ConfigError& x) {
          row["error"] = x.what();
        }
        tried.push_back(row);
      }
    }
  if (!best)
    throw NoPlanFits(why_not.empty() ? config_in.file + ": no offload choice could be planned"
                                     : why_not + " (and with every offload choice)");
  best->summary["offload"] = {
      {"chosen", best->offload_modules},
      {"lead", best->offload_lead ? nlohmann::json(*best->offload_lead) : nlohmann::json(nullptr)},
      {"form", offload_form_name(best_form)},
      {"tried", tried}};
  return std::move(*best);
}

namespace {

PlanResults plan_one(const Config& config_in, const PlanRequest& r, OffloadForm form) {
  Config config = config_in;
  Overrides o = r.overrides;
  const std::string asked = o.schedule.value_or(config.training.schedule);
  o.schedule.reset();
  if (asked != "auto") o.schedule = asked;
  apply_overrides(config, o);
  PlanResults out;
  out.experiment = prepare(config);
  // Offload alone: the table without the recompute modes (as search's offload-only layouts).
  if (form == OffloadForm::only) out.experiment = offload_only(*out.experiment);
  const Experiment& e = *out.experiment;

  PlannerOptions po;
  po.memory_limit_bytes = plan_memory_limit_bytes(config, r);  // the default limit is the device's
  po.threads = r.threads;
  po.seed = r.seed;
  po.max_evals = r.max_evals;
  po.time_limit_s = r.time_limit_s;
  if (r.expressible) po.expressible = find_exporter(*r.expressible);
  // --expressible: every plan is of this job, so it is one the framework runs or none is
  // (frameworks/framework_rules.hpp; the job its text states, as the exporter checks it).
  if (po.expressible)
    if (const auto refused =
            framework_refusal(*po.expressible, stated_job(*po.expressible, config)))
      config.fail(refused->breach.key, refused->breach.message);
  // The megatron-layout baseline's layout: the option's, else the one the config was
  // imported with. One whose decoder or MTP layers are not the model's is refused here
  // (exit 2); one bmpipe cannot run as written (an empty stage, MTP before the last stage),
  // or whose stages are not a schedule's pp x vpp, only skips that baseline.
  const int decoders = static_cast<int>(decoder_layers(e).size());
  const int mtp = config.model.shape ? config.model.shape->mtp_layers : 0;
  if (r.baseline_layout) {
    try {
      planner::megatron_layout_split(*r.baseline_layout, decoders, mtp);
    } catch (const FormatError& x) {
      throw RequestError("--baseline-layout",
                         "'" + *r.baseline_layout + "': " + x.what() + kLayoutExpected);
    }
    po.baseline_layout = *r.baseline_layout;
    po.baseline_layout_source = "--baseline-layout";
  } else if (!config.training.megatron_layout.empty()) {
    try {
      planner::megatron_layout_split(config.training.megatron_layout, decoders, mtp);
    } catch (const FormatError& x) {
      config.fail("training.megatron_layout",
                  "'" + config.training.megatron_layout + "': " + x.what() + kLayoutExpected);
    }
    po.baseline_layout = config.training.megatron_layout;
    po.baseline_layout_source = "training.megatron_layout";
  }

  std::vector<std::pair<std::string, int>> candidates;
  if (asked == "auto") {
    candidates = auto_schedules(e);
    // --expressible: only the schedules the framework runs (plan_pipeline refuses others).
    std::erase_if(candidates, [&](const std::pair<std::string, int>& c) {
      return po.expressible && !po.expressible->runs(c.first);
    });
  } else
    candidates.emplace_back(
        asked,
        effective_vpp(require_schedule(config, asked, "training.schedule"), config.training.vpp));

  out.outcomes = plan_schedules(e, candidates, po, asked == "auto", r.progress);
  const PlanOutcome& top = out.outcomes.front();
  if (!top.best.fits())
    throw NoPlanFits(config.file + ": no plan fits the memory limit of " +
                     format_gib(po.memory_limit_bytes) + " per device: " + top.infeasible);
  out.shown = &top.best;
  if (r.baseline) {
    out.shown = nullptr;
    for (const BaselineRun& b : top.baselines)
      if (b.name == *r.baseline && b.run) {
        out.shown = &*b.run;
        // megatron-offload: its offload is part of the job written and exported.
        if (!b.offload_modules.empty()) {
          out.offload_modules = b.offload_modules;
          out.offload_lead = 1;
        }
      }
    if (!out.shown)
      for (const BaselineRun& b : top.baselines)
        if (b.name == *r.baseline)
          throw ConfigError(config.file, 0, "--baseline", *r.baseline + ": " + b.error);
    if (!out.shown)
      throw ConfigError(config.file, 0, "--baseline", *r.baseline + ": not run by the planner");
  }
  out.summary = plan_summary(e, out.outcomes, *out.shown);
  out.summary["bmpipe"] = provenance(config.file);
  return out;
}

}  // namespace

}  // namespace bmpipe::api
