#include "frameworks/exporters.hpp"

#include <array>
#include <utility>

#include "experiment/rules_megatron.hpp"
#include "frameworks/megatron/export.hpp"
#include "frameworks/megatron/schedules.hpp"
#include "frameworks/mindformers/export.hpp"
#include "frameworks/mindformers/rules.hpp"
#include "frameworks/mindformers/schedules.hpp"
#include "frameworks/torchtitan/export.hpp"
#include "frameworks/torchtitan/formats.hpp"
#include "frameworks/torchtitan/registry_export.hpp"
#include "frameworks/torchtitan/rules.hpp"
#include "schedules/registry.hpp"
#include "sim/offload.hpp"

namespace bmpipe {

namespace {

// The message of the framework rule `id` of `rules` if it refuses `config`, else "": a
// refusal consults the framework's table where the rule stands among its format limits.
std::string rule_message(std::span<const FrameworkRule> rules, std::string_view id,
                         const Config& config) {
  const std::optional<RuleBreach> b = rule_by_id(rules, id).check(config);
  return b ? b->message : "";
}

// Megatron-LM: 1F1B, or interleaved 1F1B with virtual stages; its flags.

std::string_view megatron_runs_as(std::string_view, int vpp) {
  return vpp > 1 ? "interleaved" : "1f1b";
}

std::string megatron_not_run(std::string_view schedule) {
  return "Megatron-LM does not run " + std::string(schedule) +
         " (it runs 1f1b, and interleaved with virtual stages)";
}

// A vision-language model (model.vision): no exporter writes its vision encoder, and the
// layouts they state count decoder layers only.
std::string vision_refusal(const Config& config, const char* framework) {
  if (!config.model.shape || !config.model.shape->vision.enabled()) return "";
  return std::string(framework) +
         " export does not state a vision-language model's vision encoder and projector "
         "(model.vision)";
}

// A latent mixture of experts (ModelShape::moe.latent_size) or DeepSeek sparse attention
// (ModelShape::dsa) where the framework has no key for one (MindFormers, torchtitan;
// Megatron-LM writes --moe-latent-size and --experimental-attention-variant dsa), or a
// vision model (vision_refusal). Exported without it, the job would train plain experts.
std::string unstated_model_refusal(const Config& config, const char* framework) {
  if (std::string vision = vision_refusal(config, framework); !vision.empty()) return vision;
  // DeepSeek sparse attention likewise: neither MindFormers' DeepseekV3Config nor torchtitan's
  // deepseek_v3 (at the commits frameworks/ reads) has an indexer; exported without it, the
  // job would run dense MLA.
  if (config.model.shape && config.model.shape->is_dsa())
    return std::string(framework) +
           " export does not state DeepSeek sparse attention (model.dsa): it has no key for "
           "the indexer; Megatron-LM's --experimental-attention-variant dsa does";
  if (!config.model.shape || config.model.shape->moe.latent_size <= 0) return "";
  return std::string(framework) + " export does not state a latent mixture of experts " +
         "(model.moe.latent_size " + std::to_string(config.model.shape->moe.latent_size) +
         "): it has no key for one; Megatron-LM's --moe-latent-size does";
}

// Activation offload (training.offload_modules, offload_layers) where the framework has no
// such keys: exported without it, the job would hold its activations on the device.
std::string offload_refusal(const Config& config, const char* framework) {
  if (config.training.offload_layers > 0)
    return std::string(framework) + " cannot state training.offload_layers (" +
           std::to_string(config.training.offload_layers) +
           "): it has no key for Megatron-LM's whole-layer CPU offload";
  if (parse_offload_modules(config.training.offload_modules, nullptr) == 0) return "";
  return std::string(framework) + " cannot state training.offload_modules (" +
         config.training.offload_modules +
         "): it has no key for Megatron-Core's fine-grained activation offload";
}

// Hierarchical cp (training.cp_hierarchy) where the framework has no key for it: exported
// as one level, the job would run another exchange. torchtitan's context parallelism is
// the ring alone; MindFormers' hybrid_cp with ulysses_degree_in_cp (mindspore-lab/
// mindformers fd4deebc, mindformers/modules/transformer/transformer.py) may be its
// counterpart, not checked against its group order, so refused too.
std::string cp_hierarchy_refusal(const Config& config, const char* framework) {
  const TrainingConfig& t = config.training;
  if (t.cp_comm() != CpComm::a2a_p2p || t.cp <= 1) return "";
  return std::string(framework) + " cannot state training.cp_comm_type a2a+p2p (cp_hierarchy, " +
         "Megatron-LM's --hierarchical-context-parallel-sizes): it has no key for hierarchical "
         "context parallelism";
}

// An export that cannot state the model would hand the user another job (issue 17).
std::string megatron_refusal(const Config& config) {
  // Megatron-LM d98e8a64 transformer_config.py: fp8_recipe is one of 'tensorwise',
  // 'delayed', 'mxfp8', 'blockwise' and 'custom'; torchao's rowwise scaling is none of them.
  if (config.training.fp8 != "none" && config.training.fp8_recipe == "rowwise")
    return "Megatron-LM's flags cannot state training.fp8_recipe rowwise (torchao's float8 "
           "rowwise scaling; --fp8-recipe is delayed, tensorwise, blockwise, mxfp8 or custom)";
  if (parse_offload_modules(config.training.offload_modules, nullptr) != 0 &&
      config.training.offload_lead != 1)
    return "Megatron-LM's flags cannot state training.offload_lead " +
           std::to_string(config.training.offload_lead) +
           ": bmpipe reads its reloads as running one op ahead of the backward (lead 1)";
  if (!config.model.shape) return "";
  if (std::string vision = vision_refusal(config, "the Megatron-LM"); !vision.empty())
    return vision;
  if (!config.training.vocab_parallel && config.training.tp > 1)
    return "Megatron-LM's flags cannot state training.vocab_parallel: false: its embedding and "
           "output layer are always split over tp (VocabParallelEmbedding, "
           "ColumnParallelLinear)";
  const std::string why = megatron_model_refusal(*config.model.shape);
  return why.empty() ? "" : "Megatron-LM's flags cannot state the model: " + why;
}

ExportStatement megatron_statement(const ExportLayout& layout) {
  MegatronExport x = export_megatron(layout);
  ExportStatement s;
  s.expressed = x.expressed;
  if (!x.exact) s.inexact = x.note;
  s.write = [x = std::move(x)](const ExportJob& job, std::string_view) {
    return megatron_job_flags(x, job);
  };
  return s;
}

bool megatron_states(const ExportLayout& layout) {
  return export_megatron(layout).exact;
}

// MindFormers: its pipeline_scheduler for the schedules it has, else 1f1b, interleaved with
// pp_interleave_num; its YAML keys.

std::string_view mindformers_runs_as(std::string_view schedule, int vpp) {
  if (mindformers_scheduler(schedule) == "gpipe") return "gpipe";
  return vpp > 1 ? "interleaved" : "1f1b";
}

bool mindformers_runs(std::string_view schedule) {
  return !mindformers_scheduler(schedule).empty();
}

std::string mindformers_not_run(std::string_view schedule) {
  return "MindFormers has no " + std::string(schedule) + " pipeline_scheduler";
}

// Activation offload in MindFormers' swap_config (frameworks/mindformers/import.cpp,
// read_swap): op_swap of 'attention' states qkv_linear,core_attn,attn_proj and of
// '.*\.flash_attention' core_attn,attn_proj, in Llama-family dense models (MindFormers'
// docs), and bmpipe reads every backward_prefetch as lead 1.
std::string mindformers_offload_refusal(const Config& config) {
  const TrainingConfig& t = config.training;
  const OffloadModules modules = parse_offload_modules(t.offload_modules, nullptr);
  if (t.offload_layers > 0 || modules == 0) return offload_refusal(config, "MindFormers' keys");
  const std::string set = offload_modules_text(modules);
  if (set != "core_attn,attn_proj" && set != "qkv_linear,core_attn,attn_proj")
    return "MindFormers' swap_config cannot state training.offload_modules (" + set +
           "): its op_swap states core_attn,attn_proj (.*\\.flash_attention) and "
           "qkv_linear,core_attn,attn_proj (attention)";
  if (t.offload_lead != 1)
    return "MindFormers' swap_config cannot state training.offload_lead " +
           std::to_string(t.offload_lead) +
           ": bmpipe reads its backward_prefetch as running one op ahead of the backward "
           "(lead 1)";
  return rule_message(mindformers_rules(), "mindformers.swap-dense-only", config);
}

// An export that cannot state the experts would hand the user another job (issue 17: never
// a different job than the one they wrote).
std::string mindformers_refusal(const Config& config) {
  if (std::string off = mindformers_offload_refusal(config); !off.empty()) return off;
  if (std::string cp = cp_hierarchy_refusal(config, "MindFormers' keys"); !cp.empty()) return cp;
  if (!config.model.shape) return "";
  if (std::string unstated = unstated_model_refusal(config, "the MindFormers"); !unstated.empty())
    return unstated;
  // MindFormers' build_parallel_config resets vocab_emb_dp to False with pipeline stages
  // (frameworks/mindformers/import.cpp, read_vocab_emb_dp).
  if (std::string reset =
          rule_message(mindformers_rules(), "mindformers.vocab-emb-dp-pipeline", config);
      !reset.empty())
    return reset;
  if (const std::string layers = mindformers_shape_refusal(*config.model.shape); !layers.empty())
    return "the model has layers MindFormers' keys cannot state: " + layers;
  const std::string why = mindformers_moe_refusal(*config.model.shape, config.training.etp);
  if (why.empty()) return "";
  return (config.model.shape->is_moe() ? "the model is a mixture of experts that MindFormers' keys "
                                         "cannot state: "
                                       : "MindFormers' keys cannot state the model: ") +
         why;
}

// MindFormers' YAML has no FP8 key (its GEMMs run in the compute_dtype, bf16 or fp16):
// an FP8 job is stated as the bf16 one, whose time the export quotes (issue 41: "What the
// format cannot state (FP8 in MindFormers ...) makes the export inexact").
// FSDP2's all-reduce across the replicas in every micro-batch
// (training.fsdp_all_reduce_every_microbatch): Megatron-FSDP's and MindFormers' run once an
// iteration, so a job with it is stated without.
void once_an_iteration(Config& c, const std::string& framework, std::vector<std::string>& dropped) {
  if (!c.training.fsdp_all_reduce_every_microbatch) return;
  dropped.push_back("training.fsdp_all_reduce_every_microbatch true: " + framework +
                    " all-reduces the gradient shards across the copies once an iteration; "
                    "stated so.");
  c.training.fsdp_all_reduce_every_microbatch = false;
}

Config megatron_restated(const Config& config, std::vector<std::string>& dropped) {
  Config c = config;
  once_an_iteration(c, "Megatron-LM", dropped);
  return c;
}

Config mindformers_restated(const Config& config, std::vector<std::string>& dropped) {
  Config c = config;
  once_an_iteration(c, "MindFormers", dropped);
  if (c.training.fp8 != "none") {
    dropped.push_back("training.fp8 " + c.training.fp8 + " (" + c.training.fp8_recipe +
                      "): MindFormers' keys have no FP8; stated in bf16.");
    c.training.fp8 = "none";
    c.training.fp8_param_gather = false;
  }
  return c;
}

ExportStatement mindformers_statement(const ExportLayout& layout) {
  MindFormersExport x = mindformers_plan(layout);
  ExportStatement s;
  s.expressed = x.expressed;
  s.caveats = x.notes;
  s.write = [x = std::move(x)](const ExportJob& job, std::string_view schedule) {
    return mindformers_job_yaml(x, job, std::string(mindformers_scheduler(schedule)));
  };
  return s;
}

// torchtitan's refusals, and those of the keys it has no counterpart for: its tensor-parallel
// plan splits the embedding over the vocabulary (RowwiseParallel), and its MoE is dropless.
// torchtitan names a model by flavor, refused first (torchtitan_refusal); a flavor's shape
// compared without the latent (same_model_shape in frameworks/torchtitan/flavors.cpp) is
// refused after it.
// `form`: the text the refusal names, "torchtitan's TOML" or "torchtitan's config registry".
std::string torchtitan_refusal_as(const Config& config, const std::string& form) {
  if (std::string off = offload_refusal(config, form.c_str()); !off.empty()) return off;
  if (std::string cp = cp_hierarchy_refusal(config, form.c_str()); !cp.empty()) return cp;
  if (!config.training.vocab_parallel && config.training.tp > 1)
    return form +
           " cannot state training.vocab_parallel: false: its tensor-parallel plan splits the "
           "embedding and the output over the vocabulary";
  if (config.training.moe_capacity_factor > 0)
    return form + " cannot state training.moe_capacity_factor: its MoE layers are dropless";
  if (std::string why = torchtitan_refusal(config, form); !why.empty()) return why;
  return unstated_model_refusal(config, "the torchtitan");
}

std::string torchtitan_full_refusal(const Config& config) {
  return torchtitan_refusal_as(config, "torchtitan's TOML");
}

// torchtitan: the schedules torch.distributed.pipelining names (frameworks/torchtitan/
// formats.hpp); a plan on another runs as the one of its placement: V schedules as
// ZBVZeroBubble, looped ones as Interleaved1F1B, the rest as 1F1B. Its job TOML.

bool torchtitan_runs(std::string_view schedule) {
  return !torchtitan_schedule_name(schedule).empty();
}

std::string_view torchtitan_runs_as(std::string_view schedule, int vpp) {
  const ScheduleInfo* info = find_schedule(schedule);
  if (info && info->placement == Placement::kV)
    return torchtitan_runs(schedule) ? schedule : "zb-v";
  if (vpp > 1) return "interleaved";
  if (schedule == "gpipe") return "gpipe";
  return "1f1b";
}

std::string torchtitan_not_run(std::string_view schedule) {
  return "torchtitan does not run " + std::string(schedule) +
         " (it runs 1F1B, Interleaved1F1B, GPipe, ZBVZeroBubble and DualPipeV)";
}

// What torchtitan's plan `x` states, written by `write` (its job TOML or its registry's
// command line).
using TorchTitanWriter = std::string (*)(const TorchTitanExport&, const ExportJob&,
                                         std::string_view);
ExportStatement torchtitan_statement_of(TorchTitanExport x, TorchTitanWriter write) {
  ExportStatement s;
  s.expressed = x.expressed;
  if (!x.exact) s.inexact = x.note;
  s.write = [x = std::move(x), write](const ExportJob& job, std::string_view schedule) {
    return write(x, job, schedule);
  };
  return s;
}

ExportStatement torchtitan_statement(const ExportLayout& layout) {
  return torchtitan_statement_of(torchtitan_plan(layout), torchtitan_job_toml);
}

// torchtitan's 2026 launch command: a registered function and its overrides
// (frameworks/torchtitan/registry_export.hpp), run and placed as the TOML's job is, read
// back by the same importer.
std::string torchtitan_registry_full_refusal(const Config& config) {
  if (std::string why = torchtitan_registry_refusal(config); !why.empty()) return why;
  return torchtitan_refusal_as(config, "torchtitan's config registry");
}

ExportStatement torchtitan_registry_statement(const ExportLayout& layout) {
  return torchtitan_statement_of(torchtitan_registry_plan(layout), torchtitan_registry_command);
}

bool torchtitan_registry_states(const ExportLayout& layout) {
  return torchtitan_registry_plan(layout).exact;
}

const std::array kExporters = {
    Exporter{.name = "megatron",
             .framework = "Megatron-LM",
             .words = "flags",
             .fuses_llama_kernels = true,
             .runs = megatron_runs,
             .runs_as = megatron_runs_as,
             .not_run = megatron_not_run,
             .refusal = megatron_refusal,
             .state = megatron_statement,
             .states = megatron_states,
             .recompute_rules = megatron_recompute_choices,
             .recompute_stated = RecomputeStated::one_rule,
             .restated = megatron_restated,
             .rules = megatron_rules},
    Exporter{.name = "mindformers",
             .framework = "MindFormers",
             .words = "keys",
             .runs = mindformers_runs,
             .runs_as = mindformers_runs_as,
             .not_run = mindformers_not_run,
             .refusal = mindformers_refusal,
             .state = mindformers_statement,
             .states = mindformers_states,
             // Its per-stage recompute and select_recompute lists state Megatron-LM's rules too.
             .recompute_rules = megatron_recompute_choices,
             .recompute_stated = RecomputeStated::first_n,
             .restated = mindformers_restated,
             .rules = mindformers_rules},
    Exporter{.name = "torchtitan",
             .framework = "torchtitan",
             .words = "TOML keys",
             .runs = torchtitan_runs,
             .runs_as = torchtitan_runs_as,
             .not_run = torchtitan_not_run,
             .refusal = torchtitan_full_refusal,
             .state = torchtitan_statement,
             .states = torchtitan_states,
             .recompute_rules = torchtitan_recompute_choices,
             .recompute_stated = RecomputeStated::one_rule,
             .restated = torchtitan_restated,
             .rules = torchtitan_rules},
    Exporter{.name = "torchtitan-registry",
             .framework = "torchtitan",
             .words = "command-line options",
             .importer = "torchtitan",
             .runs = torchtitan_runs,
             .runs_as = torchtitan_runs_as,
             .not_run = torchtitan_not_run,
             .refusal = torchtitan_registry_full_refusal,
             .state = torchtitan_registry_statement,
             .states = torchtitan_registry_states,
             .recompute_rules = torchtitan_recompute_choices,
             .recompute_stated = RecomputeStated::one_rule,
             .restated = torchtitan_registry_restated,
             .rules = torchtitan_rules},
};

}  // namespace

std::span<const Exporter> exporters() {
  return kExporters;
}

const Exporter* find_exporter(std::string_view name) {
  for (const Exporter& x : kExporters)
    if (x.name == name) return &x;
  return nullptr;
}

std::vector<std::string> exporter_names() {
  std::vector<std::string> out;
  for (const Exporter& x : kExporters) out.emplace_back(x.name);
  return out;
}

}  // namespace bmpipe
