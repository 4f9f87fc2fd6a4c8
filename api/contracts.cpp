#include "api/contracts.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <type_traits>

#include "api/summary.hpp"
#include "planner/schedules_plan.hpp"
#include "sim/units.hpp"

namespace bmpipe::api {

const char* version() {
  return BMPIPE_VERSION;
}

nlohmann::json provenance(const std::string& config_file) {
  return {{"version", version()}, {"config", config_file}};
}

namespace {

/// {mode: value} over `modes` (floating values times `scale`).
template <typename T, std::size_t N>
nlohmann::json per_mode_json(const PerMode<T>& v, const std::array<Recompute, N>& modes,
                             double scale = 1) {
  nlohmann::json j;
  for (Recompute r : modes) {
    if constexpr (std::is_integral_v<T>)
      j[std::string(recompute_name(r))] = v[r];  // bytes stay integers
    else
      j[std::string(recompute_name(r))] = v[r] * scale;
  }
  return j;
}

nlohmann::json layer_json(const LayerCost& c, int count, bool with_ops) {
  nlohmann::json j{
      {"name", c.name},
      {"count", count},
      {"forward_ms", c.forward_s * 1e3},
      {"backward_input_ms", c.backward_input_s * 1e3},
      {"backward_weight_ms", c.backward_weight_s * 1e3},
      {"activation_bytes", per_mode_json(c.activation_bytes, kAllRecompute)},
      {"recompute_extra_ms", per_mode_json(c.recompute_extra_s, kRecomputingModes, 1e3)},
      {"output_bytes", c.output_bytes},
      {"param_count", c.param_count},
      {"active_param_count", c.active_param_count},
      {"forward_tflop", c.forward_flops / 1e12}};
  // An MoE layer's expert-parallel all-to-all (its a2a-* sub-ops, the MTP module's too),
  // exposed in the layer's time: what `--ops` would show, summed per pass.
  double a2a_f = 0, a2a_b = 0;
  bool a2a = false;
  for (const auto& op : c.ops)
    if (op.name.find("a2a-") != std::string::npos) {
      a2a = true;
      a2a_f += op.forward_s * 1e3;
      a2a_b += (op.backward_input_s + op.backward_weight_s) * 1e3;
    }
  if (a2a) j["all_to_all_ms"] = {{"forward", a2a_f}, {"backward", a2a_b}};
  if (with_ops) {
    nlohmann::json ops = nlohmann::json::array();
    // The layer's time by kernel class (sim/cost/cost_model.hpp KernelClass), per pass.
    nlohmann::json by_class = nlohmann::json::object();
    for (const auto& op : c.ops) {
      const char* kind = kernel_class_name(op.kind);
      ops.push_back({{"name", op.name},
                     {"kind", kind},
                     {"forward_ms", op.forward_s * 1e3},
                     {"backward_input_ms", op.backward_input_s * 1e3},
                     {"backward_weight_ms", op.backward_weight_s * 1e3}});
      nlohmann::json& k = by_class[kind];
      if (k.is_null())
        k = {{"forward_ms", 0.0}, {"backward_input_ms", 0.0}, {"backward_weight_ms", 0.0}};
      k["forward_ms"] = k["forward_ms"].get<double>() + op.forward_s * 1e3;
      k["backward_input_ms"] = k["backward_input_ms"].get<double>() + op.backward_input_s * 1e3;
      k["backward_weight_ms"] = k["backward_weight_ms"].get<double>() + op.backward_weight_s * 1e3;
    }
    j["ops"] = ops;
    j["by_kernel_class"] = by_class;
  }
  return j;
}

}  // namespace

// ---- compare and cost ---------------------------------------------------------------------

nlohmann::json job_json(const Config& config, const RunInfo& run) {
  const TrainingConfig& t = config.training;
  const int dp = config.mesh().dp();
  return {
      {"schedule", run.schedule},
      {"model", config.model.name},
      {"device", config.device.name},
      {"tp", t.tp},
      {"cp", t.cp},
      {"ep", t.ep},
      {"etp", t.etp},
      {"pp", run.pp},
      {"vpp", run.vpp},
      {"dp", dp},
      {"devices", config.devices()},
      {"cluster_devices", config.cluster_devices()},
      {"micro_batch_size", t.micro_batch_size},
      {"microbatches", run.microbatches},
      {"global_batch_size", static_cast<std::int64_t>(run.microbatches) * t.micro_batch_size * dp},
      {"seq_length", t.seq_length ? nlohmann::json(*t.seq_length) : nlohmann::json(nullptr)},
      {"precision", {{"dtype", t.dtype}, {"fp8", t.fp8}, {"fp8_recipe", t.fp8_recipe}}},
      {"moe_dispatcher", t.moe_dispatcher},
      {"recompute",
       {{"default", std::string(recompute_name(t.recompute.global))},
        {"per_stage", !t.recompute.stages.empty()},
        {"per_layer", !t.recompute.layers.empty()}}}};
}

nlohmann::json compare_document(const std::vector<CompareRow>& rows, const Config& config) {
  nlohmann::json doc = nlohmann::json::array();
  for (const CompareRow& r : rows) {
    nlohmann::json row =
        r.refused.empty()
            ? summary_json(r.info, r.result)
            : nlohmann::json{{"schedule", r.info.schedule}, {"ok", false}, {"error", r.refused}};
    row["job"] = job_json(config, r.info);
    row["bmpipe"] = provenance(config.file);
    doc.push_back(std::move(row));
  }
  return doc;
}

nlohmann::json cost_document(const Config& config, const CostOutcome& out, bool with_ops) {
  const AnalyticCosts& a = *out.experiment->analytic;
  nlohmann::json j;
  j["job"] =
      job_json(config, RunInfo{out.schedule.name, out.schedule.num_ranks,
                               out.schedule.chunks_per_device(), out.schedule.num_microbatches});
  j["model"] = config.model.name;
  j["device"] = a.hardware.name;
  j["seq_length"] = a.settings.seq_length;
  j["micro_batch_size"] = a.settings.micro_batch_size;
  j["tp"] = a.settings.tp;
  j["sequence_parallel"] = a.settings.sequence_parallel;
  j["dp"] = a.dp;
  // One row a kind of decoder layer (dense and MoE, or a hybrid model's kinds), then the MTP
  // modules (model.mtp_layers), which run before the head.
  const ModelShape& shape = *config.model.shape;
  j["layers"] = nlohmann::json::array({layer_json(a.embedding, 1, with_ops)});
  for (const auto& [kind, count] : a.layer_kinds(shape))
    j["layers"].push_back(layer_json(*kind, count, with_ops));
  if (a.mtp) j["layers"].push_back(layer_json(*a.mtp, shape.mtp_layers, with_ops));
  j["layers"].push_back(layer_json(a.head_for(out.schedule.num_stages), 1, with_ops));
  if (shape.is_moe()) {
    j["ep"] = config.training.ep;
    j["etp"] = config.training.etp;
    j["edp"] = a.edp;
    j["moe_dispatcher"] = config.training.moe_dispatcher;
  }
  // The whole model's parameters (not one device's share), as model cards count them:
  // all of them, and what one token runs through (both embedding matrices counted).
  const ModelShape& m = *config.model.shape;
  j["parameters_total"] = m.total_params(false, a.settings.seq_length);
  j["parameters_active"] = m.total_params(true, a.settings.seq_length);
  j["static_bytes_per_stage"] = out.stage_static_bytes;
  nlohmann::json parts = nlohmann::json::array();
  for (const CostOutcome::StaticBreakdown& b : out.stage_static_parts)
    parts.push_back({{"weight_bytes", b.weights},
                     {"grad_bytes", b.grads},
                     {"optimizer_bytes", b.optimizer},
                     {"other_bytes", b.other}});
  j["static_parts_per_stage"] = parts;
  j["reserved_bytes"] = out.experiment->reserved_bytes;
  j["tail_ms_per_rank"] = out.tail_ms;
  return j;
}

// ---- plan -------------------------------------------------------------------------------

namespace {

std::vector<std::string> mode_names(const std::vector<Recompute>& modes) {
  std::vector<std::string> out;
  for (Recompute r : modes) out.emplace_back(recompute_name(r));
  return out;
}

nlohmann::json plan_json(const Experiment& e, const PlanOutcome& o, const PlanRun& run) {
  const std::vector<StageInfo> stages = stage_info(e, run.plan);
  const SimInput in = assemble(e, run.plan, run.schedule);
  nlohmann::json st = nlohmann::json::array();
  for (std::size_t s = 0; s < stages.size(); ++s) {
    const StageCost& c = in.stages[s];
    nlohmann::json modes;
    for (Recompute r : e.layers.modes()) modes[std::string(recompute_name(r))] = stages[s].modes[r];
    st.push_back({{"stage", s},
                  {"rank", run.schedule.stage_rank[s]},
                  {"first_layer", stages[s].first_layer},
                  {"layers", stages[s].num_layers},
                  {"recompute_layers", modes},
                  {"forward_ms", ns_to_ms(c.forward)},
                  {"backward_ms", ns_to_ms(c.backward_full() + c.recompute)},
                  {"static_bytes", stages[s].static_bytes}});
  }
  nlohmann::json peaks = nlohmann::json::array();
  for (const DeviceResult& d : run.result.devices) peaks.push_back(d.peak_bytes);
  return {{"schedule", o.schedule},
          {"pp", run.schedule.num_ranks},
          {"vpp", run.schedule.chunks_per_device()},
          {"microbatches", run.schedule.num_microbatches},
          {"partition", run.plan.partition},
          {"layer_recompute", mode_names(run.plan.recompute)},
          {"stages", st},
          {"iteration_time_ms", ns_to_ms(run.result.iteration_time)},
          {"bubble_ratio", run.result.bubble_ratio},
          {"fits", run.fits()},
          {"memory_limit_bytes", o.memory_limit_bytes},
          {"peak_memory_bytes", peaks}};
}

nlohmann::json baselines_json(const PlanOutcome& o) {
  nlohmann::json list = nlohmann::json::array();
  for (const BaselineRun& b : o.baselines) {
    nlohmann::json j{{"name", b.name}};
    if (b.run) {
      j["iteration_time_ms"] = ns_to_ms(b.run->result.iteration_time);
      j["fits"] = b.run->fits();
      j["partition"] = b.run->plan.partition;
      j["layer_recompute"] = mode_names(b.run->plan.recompute);
      if (!b.error.empty()) j["note"] = b.error;
      if (!b.expressible) j["expressible"] = false;
      if (!b.offload_modules.empty()) {
        j["offload_modules"] = b.offload_modules;
        j["offload_lead"] = 1;
      }
    } else {
      j["fits"] = false;
      j["error"] = b.error;
    }
    list.push_back(j);
  }
  return list;
}

nlohmann::json search_json(const SearchStats& s) {
  return {{"evaluations", s.evaluations}, {"cache_hits", s.cache_hits}, {"filtered", s.filtered},
          {"wall_s", s.wall_s},           {"threads", s.threads},       {"seed", s.seed},
          {"stopped_by", s.stopped_by}};
}

}  // namespace

nlohmann::json plan_summary(const Experiment& e, const std::vector<PlanOutcome>& outcomes,
                            const PlanRun& shown) {
  const PlanOutcome& top = outcomes.front();
  nlohmann::json j;
  j["plan"] = plan_json(e, top, shown);
  j["baselines"] = baselines_json(top);
  // The speedup is quoted against what a Megatron-LM user gets by flags on the even split:
  // the fastest fitting megatron-* baseline (null when none fits).
  if (const BaselineRun* ref = megatron_reference(top);
      ref && shown.result.ok && shown.result.iteration_time > 0)
    j["speedup"] = {{"baseline", ref->name},
                    {"value", static_cast<double>(ref->run->result.iteration_time) /
                                  static_cast<double>(shown.result.iteration_time)}};
  else
    j["speedup"] = nullptr;
  j["search"] = search_json(top.stats);
  if (outcomes.size() > 1) {
    nlohmann::json others = nlohmann::json::array();
    for (const PlanOutcome& oc : outcomes) {
      nlohmann::json r{{"schedule", oc.schedule}, {"vpp", oc.vpp}, {"fits", oc.best.fits()}};
      if (oc.best.result.ok) r["iteration_time_ms"] = ns_to_ms(oc.best.result.iteration_time);
      if (!oc.infeasible.empty()) r["note"] = oc.infeasible;
      r["evaluations"] = oc.stats.evaluations;
      others.push_back(r);
    }
    j["schedules"] = others;
    // --max-evals and --time-limit-s bound all the schedules together (plan_schedules).
    std::int64_t total = 0;
    for (const PlanOutcome& oc : outcomes) total += oc.stats.evaluations;
    j["schedules_search"] = {{"evaluations", total},
                             {"stopped_by", schedules_stopped_by(outcomes)}};
  }
  return j;
}

// ---- search -----------------------------------------------------------------------------

nlohmann::json layout_json(const LayoutResult& r) {
  nlohmann::json j{
      {"tp", r.layout.tp},
      {"pp", r.layout.pp},
      {"dp", r.layout.dp},
      {"vpp", r.layout.vpp},
      {"micro_batch_size", r.layout.micro_batch_size},
      {"schedule", r.layout.schedule},
      {"microbatches", r.microbatches},
      {"fits", r.rejected.empty() && r.fits},
      {"rejected", r.rejected.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.rejected)}};
  if (!r.filter.empty()) j["filter"] = r.filter;
  if (r.filter == "bound") j["bound_ms"] = ns_to_ms(r.bound);
  if (r.iteration_time > 0) {
    j["iteration_time_ms"] = ns_to_ms(r.iteration_time);
    j["tokens_per_s"] = r.tokens_per_s;
    j["mfu"] = r.mfu;
    j["tflops_per_device"] = r.tflops_per_device;
    j["bubble_ratio"] = r.bubble_ratio;
    j["max_peak_memory_bytes"] = r.max_peak_bytes;
    j["capacity_bytes"] = r.capacity_bytes;
    j["partition"] = r.plan.partition;
    std::vector<std::string> modes;
    for (Recompute m : r.plan.recompute) modes.emplace_back(recompute_name(m));
    j["layer_recompute"] = modes;
  } else {
    j["iteration_time_ms"] = nullptr;
    j["tokens_per_s"] = nullptr;
    j["mfu"] = nullptr;
  }
  j["evaluations"] = r.evaluations;
  return j;
}

nlohmann::json search_document(const SearchReport& report) {
  nlohmann::json layouts = nlohmann::json::array();
  for (const LayoutResult& r : report.layouts) {
    layouts.push_back(layout_json(r));
    if (report.experts) {  // issue 18: ep and etp are search dimensions of MoE models
      layouts.back()["ep"] = r.layout.ep;
      layouts.back()["etp"] = r.layout.etp;
    }
    if (report.context) layouts.back()["cp"] = r.layout.cp;  // issue 19: --cp
    if (report.offload) {                                    // issue 43: --offload auto
      layouts.back()["offload_modules"] = r.layout.offload;
      layouts.back()["offload_lead"] = r.layout.offload_lead >= 0
                                           ? nlohmann::json(r.layout.offload_lead)
                                           : nlohmann::json(nullptr);
      layouts.back()["offload_form"] = offload_form_name(r.layout.offload_form);
    }
  }
  nlohmann::json filters;
  for (const auto& [f, n] : report.rejected_by) filters[f] = n;
  nlohmann::json document{{"layouts", layouts},
                          {"search",
                           {{"layouts", report.layouts.size()},
                            {"rejected_by", filters},
                            {"evaluations", report.evaluations},
                            {"stopped_by", report.stopped_by},
                            {"processes", report.processes},
                            {"wall_s", report.wall_s}}}};
  // Added with the bound (issue 20); absent from searches without it, as before.
  if (report.bound) document["search"]["bound"] = true;
  if (report.refine > 0) document["search"]["refine"] = report.refine;
  // Successive halving (issue 20): the screen's budget and the layouts planned again.
  if (report.screen_evals > 0)
    document["search"]["screen"] = {{"evals", report.screen_evals},
                                    {"confirmed", report.confirmed}};
  return document;
}

namespace {

/// The form in the table's offload column: "job", "per layer" or "only".
std::string form_label(OffloadForm f) {
  return f == OffloadForm::per_layer ? "per layer" : std::string(offload_form_name(f));
}

}  // namespace

std::string search_table(const SearchReport& report, const std::string& file, int top) {
  std::string out = "bmpipe search ";
  out.append(file) += '\n';
  char buf[512];
  std::snprintf(buf, sizeof buf, "%4s %4s %4s %4s %4s %4s %-12s %14s %11s %6s %9s %8s %24s", "#",
                "tp", "pp", "dp", "vpp", "mbs", "schedule", "iteration ms", "tokens/s", "MFU %",
                "TFLOP/s", "bubble %", "max peak / capacity");
  out += buf;
  if (report.experts) out += "   ep  etp";
  if (report.context) out += "   cp";
  if (report.offload) out += "  offload (lead, form)";
  out += '\n';
  const std::vector<LayoutResult>& ranked = report.layouts;
  int shown = 0, fitting = 0;
  for (const LayoutResult& r : ranked) {
    if (!r.rejected.empty() || !r.fits) continue;
    ++fitting;
    if (shown >= top) continue;
    ++shown;
    std::snprintf(buf, sizeof buf,
                  "%4d %4d %4d %4d %4d %4d %-12s %14s %11.0f %6.1f %9.1f %8.2f %24s", shown,
                  r.layout.tp, r.layout.pp, r.layout.dp, r.layout.vpp, r.layout.micro_batch_size,
                  r.layout.schedule.c_str(), format_ms(r.iteration_time, 1).c_str(), r.tokens_per_s,
                  100 * r.mfu, r.tflops_per_device, 100 * r.bubble_ratio,
                  (format_gib(r.max_peak_bytes) + " / " + format_gib(r.capacity_bytes)).c_str());
    out += buf;
    if (report.experts) {
      std::snprintf(buf, sizeof buf, " %4d %4d", r.layout.ep, r.layout.etp);
      out += buf;
    }
    if (report.context) {
      std::snprintf(buf, sizeof buf, " %4d", r.layout.cp);
      out += buf;
    }
    if (report.offload)
      out += "  " + r.layout.offload +
             (r.layout.offload_lead >= 0 ? " (" + std::to_string(r.layout.offload_lead) + ", " +
                                               form_label(r.layout.offload_form) + ")"
                                         : "");
    out += "\n";
  }
  std::snprintf(buf, sizeof buf, "\n%d of %zu layouts fit", fitting, ranked.size());
  out += buf;
  if (fitting > shown) {
    std::snprintf(buf, sizeof buf, " (%d shown; --top N for more, --json for all)", shown);
    out += buf;
  }
  out += "\nrejected:";
  if (report.rejected_by.empty()) out += " none";
  for (const auto& [f, n] : report.rejected_by) {
    std::snprintf(buf, sizeof buf, " %d by ", n);
    out.append(buf).append(f);
  }
  out += "\n";
  int listed = 0;
  for (const LayoutResult& r : ranked) {
    if (r.rejected.empty() && r.fits) continue;
    if (listed++ >= top) break;
    out.append("  ").append(to_string(r.layout)).append(": ").append(r.rejected).append("\n");
  }
  std::snprintf(buf, sizeof buf, "\nsearch: %zu layouts, %lld evaluations, %d process%s, %.2f s\n",
                ranked.size(), static_cast<long long>(report.evaluations), report.processes,
                report.processes == 1 ? "" : "es", report.wall_s);
  out += buf;
  if (report.stopped_by != "done") out.append("stopped by the ").append(report.stopped_by) += '\n';
  return out;
}

std::string search_csv(const SearchReport& report) {
  // ep and etp (MoE models) and cp (a search over --cp) as the JSON carries them.
  std::string out = "tp,pp,dp,vpp,micro_batch_size,schedule,";
  if (report.experts) out += "ep,etp,";
  if (report.context) out += "cp,";
  if (report.offload) out += "offload_modules,offload_lead,offload_form,";
  out +=
      "microbatches,fits,iteration_time_ms,tokens_per_s,mfu,tflops_per_device,bubble_ratio,"
      "max_peak_memory_bytes,capacity_bytes,rejected\n";
  for (const LayoutResult& r : report.layouts) {
    char buf[512];
    std::snprintf(buf, sizeof buf, "%d,%d,%d,%d,%d,%s,", r.layout.tp, r.layout.pp, r.layout.dp,
                  r.layout.vpp, r.layout.micro_batch_size, r.layout.schedule.c_str());
    out += buf;
    if (report.experts)
      out += std::to_string(r.layout.ep) + "," + std::to_string(r.layout.etp) + ",";
    if (report.context) out += std::to_string(r.layout.cp) + ",";
    if (report.offload)
      out += '"' + r.layout.offload + "\"," +
             (r.layout.offload_lead >= 0 ? std::to_string(r.layout.offload_lead) : "") + "," +
             std::string(offload_form_name(r.layout.offload_form)) + ",";
    std::snprintf(buf, sizeof buf, "%d,%s,", r.microbatches,
                  r.rejected.empty() && r.fits ? "true" : "false");
    out += buf;
    if (r.iteration_time > 0) {
      std::snprintf(buf, sizeof buf, "%.6f,%.3f,%.6f,%.3f,%.6f,%lld,%lld,",
                    ns_to_ms(r.iteration_time), r.tokens_per_s, r.mfu, r.tflops_per_device,
                    r.bubble_ratio, static_cast<long long>(r.max_peak_bytes),
                    static_cast<long long>(r.capacity_bytes));
      out += buf;
    } else {
      out += ",,,,,,,";
    }
    std::string why = r.rejected;
    std::replace(why.begin(), why.end(), '"', '\'');
    out += '"' + why + "\"\n";
  }
  return out;
}

nlohmann::json export_document(const ExportOutcome& x) {
  auto time = [](const SimResult& r) {
    return r.ok ? nlohmann::json(ns_to_ms(r.iteration_time)) : nlohmann::json(nullptr);
  };
  nlohmann::json j;
  j["format"] = x.format;
  j["text"] = x.text;
  j["schedule"] = x.schedule;
  j["vpp"] = x.vpp;
  j["iteration_time_ms"] = time(x.result);
  j["fits"] = x.result.ok && x.result.fits;
  j["exact"] = x.exact;
  j["states_plan"] = x.states_plan;
  j["config_schedule"] = x.config_schedule;
  j["config_vpp"] = x.config_vpp;
  j["config_iteration_time_ms"] = time(x.config_result);
  j["notes"] = x.notes;
  return j;
}

}  // namespace bmpipe::api
