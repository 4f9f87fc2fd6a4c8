#include "api/export.hpp"
#include "io/read_file.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <sstream>

#include "api/api.hpp"
#include "api/contracts.hpp"
#include "api/search.hpp"
#include "api/summary.hpp"
#include "experiment/experiment.hpp"
#include "experiment/suggest.hpp"
#include "frameworks/exporters.hpp"
#include "frameworks/framework_rules.hpp"
#include "planner/export_layout.hpp"
#include "schedules/registry.hpp"
#include "sim/units.hpp"

namespace bmpipe::api {

namespace {

std::string ms(Time t) {
  return format_ms(t, 3);
}

/// "7444.298 ms per iteration" or what went wrong, and whether it fits.
std::string said(const SimResult& r) {
  if (!r.ok) return "the simulation fails (" + r.error + ")";
  return ms(r.iteration_time) + " ms per iteration" + (r.fits ? "" : " (does not fit)");
}

/// How bmpipe's schedule names read in a sentence.
std::string schedule_words(const std::string& name, int vpp) {
  if (name == "1f1b") return "1F1B";
  if (name == "interleaved") return "interleaved 1F1B (vpp " + std::to_string(vpp) + ")";
  if (name == "gpipe") return "GPipe";
  return name;
}

/// The layout's recompute with each stage's counts per mode kept and moved to its first
/// layers: full, then selective, then none.
std::vector<Recompute> first_layers_first(const ExportLayout& layout) {
  std::vector<Recompute> modes;
  std::size_t next = 0;
  for (int count : layout.partition) {
    int full = 0, selective = 0;
    for (int k = 0; k < count; ++k) {
      full += layout.recompute[next + k] == Recompute::full;
      selective += layout.recompute[next + k] == Recompute::selective;
    }
    for (int k = 0; k < count; ++k)
      modes.push_back(k < full               ? Recompute::full
                      : k < full + selective ? Recompute::selective
                                             : Recompute::none);
    next += static_cast<std::size_t>(count);
  }
  return modes;
}

}  // namespace

const std::vector<std::string>& export_formats() {
  static const std::vector<std::string> formats = exporter_names();
  return formats;
}

std::string export_format_names() {
  return comma_list(export_formats());
}

void check_export_request(const ExportRequest& r) {
  const std::vector<std::string>& formats = export_formats();
  if (std::find(formats.begin(), formats.end(), r.format) == formats.end())
    throw RequestError("--format", "unknown format '" + r.format + "'" +
                                       did_you_mean(r.format, formats) + " (" +
                                       comma_list(formats) + ")");
  if (r.memory_limit_GiB && (!(*r.memory_limit_GiB > 0) || !std::isfinite(*r.memory_limit_GiB) ||
                             *r.memory_limit_GiB > 1e6))
    throw RequestError("--memory-limit-GiB", "must be a positive number of GiB");
}

void check_plan_format(const std::string& format) {
  std::vector<std::string> formats = {"table"};
  for (const std::string& f : export_formats()) formats.push_back(f);
  if (std::find(formats.begin(), formats.end(), format) == formats.end())
    throw RequestError("--format", "unknown format '" + format + "'" +
                                       did_you_mean(format, formats) + " (" + comma_list(formats) +
                                       ")");
}

Config config_with_plan(Config c, const ConfigEdits& edits) {
  TrainingConfig& t = c.training;
  t.schedule = edits.schedule;
  t.pp = edits.pp;
  t.vpp = edits.vpp;
  if (edits.tp) t.tp = *edits.tp;
  if (edits.dp) t.dp = *edits.dp;
  if (edits.micro_batch_size) t.micro_batch_size = *edits.micro_batch_size;
  if (edits.ep) t.ep = *edits.ep;
  if (edits.etp) t.etp = *edits.etp;
  if (edits.cp) t.cp = *edits.cp;
  t.microbatches = edits.microbatches;
  t.microbatches_given = true;
  t.partition = edits.partition;
  // set_plan_keys: a layout that places every row, or separate ends with a partition.
  if (!edits.megatron_layout.empty()) t.megatron_layout = edits.megatron_layout;
  if (edits.separate_ends) {
    t.separate_ends = true;
    t.megatron_layout.clear();
  }
  t.recompute = RecomputeSpec{};
  for (std::size_t l = 0; l < edits.recompute.size(); ++l)
    t.recompute.layers[static_cast<int>(l)] = edits.recompute[l];
  apply_overrides(c, {});
  return c;
}

namespace {

/// The mappings from `root` down to the parent of the last key of `path` ("training.tp":
/// root, training), made where missing when `make`; empty when one is missing or not a
/// mapping. yaml-cpp nodes are handles, so each step is kept rather than reassigned.
std::vector<YAML::Node> key_chain(YAML::Node root, const std::vector<std::string>& keys,
                                  bool make) {
  std::vector<YAML::Node> chain{root};
  for (std::size_t i = 0; i + 1 < keys.size(); ++i) {
    YAML::Node next = chain.back()[keys[i]];
    if (make && (!next.IsDefined() || next.IsNull())) {
      chain.back()[keys[i]] = YAML::Node(YAML::NodeType::Map);
      next = chain.back()[keys[i]];
    }
    if (!next.IsDefined() || !next.IsMap()) return {};
    chain.push_back(next);
  }
  return chain;
}

std::vector<std::string> key_path(const std::string& path) {
  std::vector<std::string> keys;
  std::stringstream in(path);
  for (std::string key; std::getline(in, key, '.');) keys.push_back(key);
  return keys;
}

}  // namespace

std::string written_config(const std::string& config_path, const std::string& out_path,
                           const Overrides& overrides, const std::vector<std::string>& dropped,
                           const ConfigEdits& edits, const std::string& header,
                           std::optional<double> device_memory_GiB) {
  std::string text;
  try {
    text = read_untrusted_file(config_path, std::size_t{16} << 20, "config");
  } catch (const ReadFileError& e) {
    throw ConfigError(config_path, 0, "", e.what());
  }
  // The file as the command read it (load_config with the overrides): each key path set
  // from the command line written in, as yaml-cpp values. The command loaded the config with
  // them, so every path walks through mappings and every value parses.
  std::vector<std::string> drop = dropped;
  if (overrides.microbatches) drop.push_back("training.global_batch_size");
  if (!overrides.set.empty() || !drop.empty()) {
    YAML::Node root;
    try {
      root = YAML::Load(text);
    } catch (const YAML::Exception& e) {
      throw ConfigError(config_path, e.mark.line + 1, "", "malformed YAML: " + e.msg);
    }
    for (const auto& [path, value] : overrides.set) {
      const std::vector<std::string> keys = key_path(path);
      const std::vector<YAML::Node> chain = key_chain(root, keys, true);
      if (keys.empty() || chain.empty())
        throw ConfigError(config_path, 0, "--set " + path, "cannot be written into the file");
      YAML::Node parent = chain.back();
      parent[keys.back()] = YAML::Load(value);
    }
    for (const std::string& path : drop) {
      const std::vector<std::string> keys = key_path(path);
      const std::vector<YAML::Node> chain = key_chain(root, keys, false);
      if (keys.empty() || chain.empty()) continue;
      YAML::Node parent = chain.back();
      parent.remove(keys.back());
    }
    YAML::Emitter out;
    out << root;
    text = std::string(out.c_str()) + "\n";
  }
  std::string comment = header;
  if (!overrides.set.empty()) {
    comment += "\nFrom the command line:";
    for (const auto& [path, value] : overrides.set) comment += " " + path + "=" + value;
  }
  return config_with_edits(text, config_path, out_path, edits, comment, device_memory_GiB);
}

ExportOutcome export_config(const Config& config, const ExportRequest& request) {
  check_export_request(request);
  const std::string& format = request.format;
  const Exporter& exporter = *find_exporter(format);
  const std::string framework(exporter.framework);
  const std::string words(exporter.words);
  // An export that cannot state the job would hand the user another job (issue 17: never a
  // different job than the one they wrote).
  if (const std::string why = exporter.refusal(config); !why.empty())
    throw ConfigError(config.file, 0, "--format", why);
  // Nor is an export ever a job its framework refuses (frameworks/framework_rules.hpp): the
  // job its text states passes the framework's own rules, else the config is refused
  // against the key the rule blames.
  if (const auto refused = framework_refusal(exporter, stated_job(exporter, config)))
    config.fail(refused->breach.key, refused->breach.message);
  const std::shared_ptr<const Experiment> experiment = prepare(config);
  const Experiment& e = *experiment;
  RunOptions limited;
  if (request.memory_limit_GiB)
    limited.capacity_bytes =
        static_cast<std::int64_t>(std::llround(*request.memory_limit_GiB * 1073741824.0));

  // The config as it is: what `bmpipe simulate` runs.
  const Schedule own = make_schedule(e);
  const Plan plan = config_plan(e, own.num_stages);
  ExportOutcome out;
  out.format = format;
  out.config_schedule = config.training.schedule;
  out.config_vpp = own.chunks_per_device();
  out.config_result = run(e, plan, own, limited);
  const ExportLayout layout = export_layout(e, plan, own);
  // A layout no framework states is the config's doing: refused against its key, exit 2.
  if (const ExportRefusal why = export_layout_refusal(layout, framework); !why.key.empty())
    config.fail(why.key, why.message);
  // Megatron-LM runs llama-style layers with its fused kernels whatever the config costs
  // them with (no flag states HF's eager ones), and `bmpipe import megatron` reads them so:
  // the framework's runs below are costed that way, so that the time stated is the job the
  // flags make (issue 17: never a different job than the one written).
  const bool refits_kernels = exporter.fuses_llama_kernels && config.model.shape &&
                              config.model.shape->architecture == Architecture::llama &&
                              config.training.kernel_set() == Kernels::eager;
  std::shared_ptr<const Experiment> framework_experiment = experiment;
  // What the text cannot say of the job (Exporter::restated): the framework runs the job its
  // text states, and that is the time quoted.
  std::vector<std::string> dropped;
  Config stated = exporter.restated ? exporter.restated(config, dropped) : config;
  // BPipe (training.bpipe) is a research system's (Kim et al., ICML 2023), not a flag of any
  // framework bmpipe writes for: the framework runs plain 1F1B.
  if (stated.training.bpipe) {
    stated.training.bpipe = false;
    dropped.push_back("training.bpipe: " + framework +
                      " has no BPipe activation balancing; stated as plain 1F1B.");
  }
  if (refits_kernels || !dropped.empty()) {
    Config fused = stated;
    if (refits_kernels) fused.training.kernels = "fused";
    framework_experiment = prepare(fused);
  }
  const ScheduleInfo& info =
      require_schedule(config, config.training.schedule, "training.schedule");

  // The framework's schedule for this layout (Exporter::runs_as). Megatron-LM: 1F1B, or
  // interleaved 1F1B with virtual stages. MindFormers: its pipeline_scheduler for the
  // schedules it has, else 1f1b, interleaved with pp_interleave_num.
  out.vpp = layout.vpp;
  out.schedule = std::string(exporter.runs_as(info.name, layout.vpp));
  const bool runs_own = exporter.runs(info.name);
  std::vector<std::string> notes;
  if (refits_kernels)
    notes.push_back(framework +
                    " runs llama-style layers with its fused kernels; the config costs them "
                    "as HF's eager ones (training.kernels: eager), and the time below is the "
                    "fused one. Set training.kernels: fused to simulate and plan the job these " +
                    words + " make.");
  if (!runs_own || out.schedule != config.training.schedule)
    notes.push_back(framework + " has no " + config.training.schedule + " schedule: it runs " +
                    schedule_words(out.schedule, out.vpp) + ", and the time below is that.");
  Schedule framework_schedule;
  try {
    framework_schedule = make_schedule(e, out.schedule, out.vpp, &plan);
  } catch (const ConfigError& x) {
    throw ConfigError(config.file, 0, "--format",
                      framework + " would run this layout with " +
                          schedule_words(out.schedule, out.vpp) +
                          ", which refuses it: " + x.message());
  }

  // Runs what a text states, or nothing when a layer cannot run the mode it states (a
  // measured model without a selective form): that would simulate something else.
  auto run_stated = [&](const ExportStatement& s) -> std::optional<SimResult> {
    const Plan p = with_decoder_modes(e, plan, s.expressed.recompute);
    if (export_layout(e, p, framework_schedule).recompute != s.expressed.recompute)
      return std::nullopt;
    return run(*framework_experiment, p, framework_schedule, limited);
  };

  ExportStatement chosen = exporter.state(layout);
  // A text that cannot state the plan's split (torchtitan's registry command line) refuses
  // it: every time below is of the plan's own partition.
  if (chosen.expressed.partition != layout.partition)
    config.fail("training.partition", "is split " + stages_in_words(layout.partition) + "; " +
                                          framework + "'s " + words +
                                          " cannot state it: " + chosen.inexact.value_or(""));
  const bool states_plan = chosen.expressed.recompute == layout.recompute &&
                           chosen.expressed.partition == layout.partition;
  if (chosen.inexact) notes.push_back(*chosen.inexact);
  std::optional<SimResult> result = run_stated(chosen);
  if (!result)
    throw ConfigError(config.file, 0, "--format",
                      "the " + framework +
                          " text states a recompute mode that some layer of this model does "
                          "not have, so bmpipe cannot simulate what the framework would run");
  const bool same_run = runs_own && out.schedule == config.training.schedule &&
                        out.vpp == out.config_vpp && states_plan &&
                        layout.stage_rank == chosen.expressed.stage_rank;
  if (!same_run) {
    // Not the config's own run: of every recompute rule the text can state on this
    // partition (Exporter::recompute_rules), the fastest that fits under the framework's
    // schedule, if it beats what the text would state of the plan.
    const SimResult nearest = *result;
    bool replaced = false;
    // First, the plan's own counts per stage moved to the stage's first layers (full, then
    // selective): both frameworks recompute the first n layers, the planner any of them, and
    // a stage's layers cost alike but for the first and last (issue 17: MindFormers [3, 2,
    // 0, 0] gives the plan's time where the covering [4, 2, 0, 0] does not).
    std::vector<std::vector<Recompute>> choices = {first_layers_first(layout)};
    for (std::vector<Recompute>& modes : exporter.recompute_rules(layout.partition))
      choices.push_back(std::move(modes));
    for (const std::vector<Recompute>& modes : choices) {
      ExportLayout other = layout;
      other.recompute = modes;
      ExportStatement s = exporter.state(other);
      const std::optional<SimResult> r = run_stated(s);
      if (!r || !r->ok || !r->fits) continue;
      if (!(result->ok && result->fits) || r->iteration_time < result->iteration_time) {
        chosen = std::move(s);
        result = r;
        replaced = true;
      }
    }
    if (replaced)
      notes.push_back("The plan as the " + words + " state it takes " + said(nearest) + " under " +
                      schedule_words(out.schedule, out.vpp) +
                      "; these state the fastest recompute rule that fits on its partition "
                      "(its per-stage counts on the first layers, or one rule for every stage).");
    else if (!(result->ok && result->fits))
      notes.push_back("No recompute rule the " + words +
                      " can state fits the memory limit on this partition; this is the "
                      "nearest to the plan.");
  }
  out.result = *result;
  out.states_plan = states_plan && chosen.expressed.recompute == layout.recompute;
  out.exact = out.result.ok && out.config_result.ok &&
              out.result.iteration_time == out.config_result.iteration_time;
  if (out.exact) notes.clear();
  // The text's own caveats (MindFormers' selective operators, stages without layers) hold
  // even when the time is the config's.
  for (const std::string& n : chosen.caveats) notes.push_back(n);
  // What the text drops is said whether or not it changes the time.
  for (const std::string& d : dropped) notes.push_back("Not stated: " + d);
  out.notes = notes;

  const RunInfo run_info = make_run_info(e, plan, own);
  // The mesh's sizes as one (ParallelMesh): dp and the devices derived once.
  const ParallelMesh mesh = stated.mesh();
  ExportJob job;
  job.tp = mesh.tp();
  job.dp = mesh.dp();
  job.micro_batch_size = run_info.micro_batch_size;
  job.microbatches = own.num_microbatches;
  job.sequence_parallel = stated.training.sequence_parallel;
  job.tp_comm_overlap = stated.training.tp_comm_overlap;
  job.devices = mesh.devices();
  job.shape = stated.model.shape;
  job.ep = mesh.ep();
  job.etp = mesh.etp();
  job.zero_stage = stated.training.optimizer.zero_stage;
  job.overlap_param_gather = stated.training.optimizer.overlap_param_gather;
  if (const int shard = stated.training.fsdp_shard_group; shard > 0 && job.zero_stage >= 1)
    job.shard_copies = mesh.size(MeshGroup::dp_cp) / shard;
  job.reshard_after_forward = stated.training.fsdp_reshard_after_forward;
  job.offload_fraction = stated.training.optimizer.offload_fraction;
  job.overlap_grad_reduce = stated.training.optimizer.overlap_grad_reduce;
  job.moe_overlap = stated.training.moe_overlap;
  job.deepep = stated.training.dispatcher() == MoeDispatcher::deepep;
  job.moe_capacity_factor = stated.training.moe_capacity_factor;
  job.vocab_parallel = stated.training.vocab_parallel;
  job.cp = mesh.cp();
  job.cp_comm_type = stated.training.cp_comm_type;
  job.cp_hierarchy = stated.training.cp_hierarchy;
  job.fp8 = stated.training.fp8;
  job.fp8_recipe = stated.training.fp8_recipe;
  job.fp8_param_gather = stated.training.fp8_param_gather;
  job.cuda_graphs = stated.training.cuda_graphs;
  job.seq_length = stated.training.seq_length.value_or(0);
  job.fused_kernels = stated.training.kernel_set() == Kernels::fused;
  job.recompute_modules = stated.training.recompute_modules;
  job.offload_modules = stated.training.offload_modules;
  job.offload_lead = stated.training.offload_lead;
  job.offload_layers = stated.training.offload_layers;

  std::string text = "# bmpipe export " + format + " of " + config.file + "\n";
  text += "# " + framework + " runs this with " + schedule_words(out.schedule, out.vpp) + ": " +
          said(out.result) + ", as bmpipe simulates it.\n";
  text += "# The config (" + out.config_schedule + "): " + said(out.config_result) +
          (out.exact ? ". Exact." : ". Not exact:") + "\n";
  for (const std::string& n : out.notes) text += "# " + n + "\n";
  text += chosen.write(job, out.schedule);
  out.text = std::move(text);
  out.summary = export_document(out);
  out.summary["bmpipe"] = provenance(config.file);
  return out;
}

ExportOutcome export_plan(const Config& config_in, const PlanResults& planned,
                          const ExportRequest& request) {
  const PlanOutcome& top = planned.outcomes.front();
  // plan --offload auto (and --baseline megatron-offload): the offload choice kept is part
  // of the job planned, as `plan --out` writes it (training.offload_modules and
  // offload_lead), so the text states it or the exporter refuses it (Exporter::refusal).
  Config config = config_in;
  if (!planned.offload_modules.empty()) {
    config.training.offload_modules = planned.offload_modules;
    if (planned.offload_lead) config.training.offload_lead = *planned.offload_lead;
  }
  auto edits_of = [&](const PlanRun& r) {
    ConfigEdits edits{top.schedule,
                      r.schedule.num_ranks,
                      r.schedule.chunks_per_device(),
                      r.schedule.num_microbatches,
                      {},
                      {},
                      {},
                      {},
                      {}};
    set_plan_keys(edits, planned.experiment->config, r.plan);
    return edits;
  };
  const bool offloads = !planned.offload_modules.empty() && planned.offload_modules != "none";
  ExportOutcome out;
  try {
    out = export_config(config_with_plan(config, edits_of(*planned.shown)), request);
  } catch (const ConfigError& x) {
    // An offload choice the text cannot state (a lead Megatron-LM's flags do not have, a
    // framework without the keys): refused, with how to plan one it states.
    if (!offloads || x.key() != "--format") throw;
    throw ConfigError(x.file(), x.line(), x.key(),
                      x.message() + " (the plan kept offloads " + planned.offload_modules +
                          "; bmpipe plan --expressible " + request.format +
                          " plans only the offload choices the " +
                          std::string(find_exporter(request.format)->words) + " state)");
  }
  if (out.exact || planned.shown != &top.best) return out;
  // Where the planner's plan is more than the framework states, the planner can be asked
  // for what it states instead.
  const Exporter& exporter = *find_exporter(request.format);
  const bool runs = exporter.runs(top.schedule);
  const std::string framework(exporter.framework);
  const std::string hint =
      "bmpipe plan --expressible " + request.format + (runs ? "" : " --schedule auto") +
      " plans only what the " + std::string(exporter.words) + " state" +
      (runs ? "" : ", on the schedules " + framework + " runs") + ", so that the export is exact.";
  // The text is three header lines, then a `#` line per note: the hint goes after them.
  auto after_lines = [](const std::string& text, std::size_t lines) {
    std::size_t at = 0;
    for (std::size_t i = 0; i < lines && at < text.size(); ++i) at = text.find('\n', at) + 1;
    return at;
  };
  auto with_hint = [&](ExportOutcome& x) {
    x.text.insert(after_lines(x.text, 3 + x.notes.size()), "# " + hint + "\n");
    x.notes.push_back(hint);
    x.summary = export_document(x);
    x.summary["bmpipe"] = provenance(config.file);
  };
  auto fits = [](const SimResult& r) { return r.ok && r.fits; };
  std::optional<ExportOutcome> better;
  std::string by;
  for (const BaselineRun& b : top.baselines) {
    if (!b.run || !b.run->fits()) continue;
    std::optional<ExportOutcome> x;
    try {
      // megatron-offload ran with its offload (at Megatron-Core's lead 1): stated with it.
      Config own = config;
      if (!b.offload_modules.empty()) {
        own.training.offload_modules = b.offload_modules;
        own.training.offload_lead = 1;
      }
      x = export_config(config_with_plan(own, edits_of(*b.run)), request);
    } catch (const ConfigError&) {
      continue;  // the framework's schedule refuses this layout: nothing to offer
    }
    const ExportOutcome& best = better ? *better : out;
    if (fits(x->result) &&
        (!fits(best.result) || x->result.iteration_time < best.result.iteration_time)) {
      better = std::move(x);
      by = b.name;
    }
  }
  if (!better) {
    with_hint(out);
    return out;
  }
  // The baseline's text, said as the plan's export: the config it stands for is the plan.
  const std::string words(exporter.words);
  const std::string note = "The plan's own " + words + " take " + said(out.result) + " under " +
                           schedule_words(out.schedule, out.vpp) + "; the " + by + " baseline's " +
                           words + " take less, so these are its.";
  ExportOutcome& x = *better;
  x.exact = false;
  x.states_plan = false;
  x.config_schedule = out.config_schedule;
  x.config_vpp = out.config_vpp;
  x.config_result = out.config_result;
  x.notes.insert(x.notes.begin(), note);
  // Its header, but for the config's line (the plan's), then the note.
  x.text = x.text.substr(0, after_lines(x.text, 2)) + "# The config (" + out.config_schedule +
           "): " + said(out.config_result) + ". Not exact:\n# " + note + "\n" +
           x.text.substr(after_lines(x.text, 3));
  with_hint(x);
  return std::move(x);
}

std::string planned_config(const std::string& config_path, const std::string& out_path,
                           const PlanResults& planned, const PlanRequest& request) {
  const PlannedJob job = planned_job(planned, request);
  const std::string baseline = request.baseline.value_or("");
  // The job planned: the command line's overrides (--set, --global-batch-size, ...) are
  // written in with the plan.
  return written_config(
      config_path, out_path, job.overrides, {}, job.edits,
      "Written by bmpipe plan from " + config_path + ": " +
          (baseline.empty() ? "the plan found" : "the " + baseline + " baseline's plan") + " for " +
          planned.outcomes.front().schedule + ", " +
          format_ms(planned.shown->result.iteration_time, 3) + " ms per iteration as simulated.\n" +
          (request.memory_limit_GiB
               ? "cluster.device.memory_GiB is --memory-limit-GiB, the limit it was planned "
                 "for.\n"
               : "") +
          "`bmpipe simulate` on this file reproduces it.",
      request.memory_limit_GiB);
}

std::string best_layout_config(const SearchSetup& setup, const SearchReport& report,
                               const std::string& out_path) {
  const Config& config = setup.config;
  const std::optional<ConfigEdits> edits = best_layout_edits(config, report);
  if (!edits) throw ConfigError(config.file, 0, "--out", "no layout fits: nothing to write");
  const LayoutResult& best = report.layouts.front();
  // --offload auto: the offload choice is the layout's too.
  Overrides written = setup.request.overrides;
  for (auto& kv : offload_keys(best)) written.set.push_back(std::move(kv));
  return written_config(config.file, out_path, written, {"training.megatron_layout"}, *edits,
                        "Written by bmpipe search from " + config.file + ": the fastest layout, " +
                            to_string(best.layout) + ", " + format_ms(best.iteration_time, 1) +
                            " ms per iteration as simulated.\n" +
                            (setup.request.memory_limit_GiB
                                 ? "cluster.device.memory_GiB is --memory-limit-GiB, the limit "
                                   "it was searched for.\n"
                                 : "") +
                            "`bmpipe simulate` on this file reproduces it.",
                        setup.request.memory_limit_GiB);
}

ExportOutcome export_best_layout(const SearchSetup& setup, const SearchReport& report,
                                 const std::string& format) {
  const Config& config = setup.config;
  const std::optional<ConfigEdits> edits = best_layout_edits(config, report);
  if (!edits) throw ConfigError(config.file, 0, "--format", "no layout fits: nothing to export");
  // The best layout as its --out file would state it, under the search's memory limit.
  return export_config(
      config_with_plan(layout_config(config, report.layouts.front().layout), *edits),
      ExportRequest{format, setup.request.memory_limit_GiB});
}

}  // namespace bmpipe::api
