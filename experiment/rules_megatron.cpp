// Megatron-LM's rules, one function each, in the order check_config applies them. Every
// message quotes the assertion it stands for; the sources are NVIDIA/Megatron-LM at
// d98e8a64ddf34856e74b24714e3bedb2f5a39553 unless a rule says otherwise.
#include "experiment/rules_megatron.hpp"

#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "experiment/config_fields.hpp"
#include "sim/offload.hpp"

namespace bmpipe {

namespace {

using Breach = std::optional<RuleBreach>;

// Whole-layer CPU offload (training.offload_layers, sim/layer_offload.hpp), by
// Megatron-Core's own rules (megatron/core/transformer/transformer_config.py,
// TransformerConfig.__post_init__): fewer layers than the model's, no pipeline
// parallelism, no recomputation, not beside fine-grained offload.
std::string offload_layers_what(const Config& c) {
  return std::to_string(c.training.offload_layers) + ": ";
}

Breach offload_layers_fewer(const Config& c) {
  const int k = c.training.offload_layers;
  if (k <= 0 || !c.model.shape || k < c.model.shape->num_layers) return std::nullopt;
  return RuleBreach{"training.offload_layers",
                    offload_layers_what(c) +
                        "\"CPU offloading can be done only for layers less than " +
                        std::to_string(c.model.shape->num_layers) +
                        "\" (Megatron-Core; expected fewer than the model's decoder layers)"};
}

Breach offload_layers_no_pipeline(const Config& c) {
  if (c.training.offload_layers <= 0 || c.training.pp <= 1) return std::nullopt;
  return RuleBreach{"training.offload_layers",
                    offload_layers_what(c) +
                        "\"Currently there is no support for Pipeline parallelism with CPU "
                        "offloading\" (Megatron-Core; expected pp 1, or training.offload_"
                        "modules, which pipelines offload)"};
}

Breach offload_layers_no_recompute(const Config& c) {
  if (c.training.offload_layers <= 0) return std::nullopt;
  const RecomputeSpec& r = c.training.recompute;
  bool recomputes = r.global != Recompute::none;
  for (const auto& [index, mode] : r.stages) recomputes = recomputes || mode != Recompute::none;
  for (const auto& [index, mode] : r.layers) recomputes = recomputes || mode != Recompute::none;
  if (!recomputes) return std::nullopt;
  return RuleBreach{"training.offload_layers",
                    offload_layers_what(c) +
                        "\"CPU offloading does not work when activation recomputation is "
                        "enabled\" (Megatron-Core; expected training.recompute: none)"};
}

Breach offload_layers_not_fine_grained(const Config& c) {
  if (c.training.offload_layers <= 0 ||
      parse_offload_modules(c.training.offload_modules, nullptr) == 0)
    return std::nullopt;
  return RuleBreach{"training.offload_layers",
                    offload_layers_what(c) +
                        "\"fine_grained_activation_offloading cannot be enabled with "
                        "cpu_offloading\" (Megatron-Core; expected training.offload_modules: "
                        "none)"};
}

// megatron/training/arguments.py:1441-1442, validate_args: "Tensor parallel
// communication/GEMM overlap can happen only when sequence parallelism is enabled".
Breach tp_comm_overlap_sequence_parallel(const Config& c) {
  if (!c.training.tp_comm_overlap || c.training.sequence_parallel) return std::nullopt;
  return RuleBreach{"training.tp_comm_overlap",
                    "true needs training.sequence_parallel: true, as Megatron-LM's "
                    "--tp-comm-overlap needs --sequence-parallel (\"Tensor parallel "
                    "communication/GEMM overlap can happen only when sequence parallelism is "
                    "enabled\"; expected false, or sequence_parallel: true)"};
}

// megatron/training/arguments.py:1024-1027, validate_args: "--overlap-param-gather only
// supported with distributed optimizer, megatron fsdp, or dist_muon" (bmpipe models neither
// Muon nor its distributed form): without a sharded optimizer there is no gather after the
// step to overlap.
Breach overlap_param_gather_sharded(const Config& c) {
  const OptimizerSettings& o = c.training.optimizer;
  if (!o.overlap_param_gather || o.zero_stage >= 1) return std::nullopt;
  return RuleBreach{"training.optimizer.overlap_param_gather",
                    "true needs a sharded optimizer, as Megatron-LM's --overlap-param-gather "
                    "needs --use-distributed-optimizer (\"--overlap-param-gather only "
                    "supported with distributed optimizer, megatron fsdp, or dist_muon\"): "
                    "without one no parameters are gathered "
                    "after the step (expected false, or training.optimizer.zero_stage 1 or "
                    "more, or training.fsdp: true)"};
}

// Optimizer offload: megatron/training/arguments.py:1884-1888 (validate_args) asserts
// --use-precision-aware-optimizer beside --optimizer-cpu-offload ("The optimizer cpu offload
// must be used in conjunction with `--use-precision-aware-optimizer`"), and
// megatron/core/optimizer/__init__.py:1057-1060 (get_megatron_optimizer) refuses that
// without the distributed optimizer ("--use-precision-aware-optimizer only supported with
// distributed optimizer").
Breach optimizer_offload_distributed(const Config& c) {
  const OptimizerSettings& o = c.training.optimizer;
  if (!(o.offload_fraction > 0) || o.zero_stage >= 1) return std::nullopt;
  return RuleBreach{"training.optimizer.offload_fraction",
                    detail::format_number(o.offload_fraction) +
                        " needs the distributed optimizer, as Megatron-LM's "
                        "--optimizer-cpu-offload needs --use-precision-aware-optimizer, which is "
                        "\"only supported with distributed optimizer\" (expected 0, or "
                        "training.optimizer.zero_stage 1 or more)"};
}

// megatron/training/arguments.py:1028-1029, validate_args: "Must use --overlap-param-gather
// with --overlap-grad-reduce".
Breach overlap_param_gather_grad_reduce(const Config& c) {
  const OptimizerSettings& o = c.training.optimizer;
  if (!o.overlap_param_gather || o.overlap_grad_reduce) return std::nullopt;
  return RuleBreach{"training.optimizer.overlap_param_gather",
                    "true needs training.optimizer.overlap_grad_reduce: true, as Megatron-LM's "
                    "--overlap-param-gather needs --overlap-grad-reduce (\"Must use "
                    "--overlap-param-gather with --overlap-grad-reduce\"; expected false, or "
                    "overlap_grad_reduce: true)"};
}

// megatron/training/arguments.py:1433-1442, validate_args: at tp 1 Megatron-LM turns
// sequence parallelism off ("Disabling sequence parallelism because tensor model
// parallelism is disabled"), and then --tp-comm-overlap's assertion that it is on fails
// ("Tensor parallel communication/GEMM overlap can happen only when sequence parallelism is
// enabled"): there are no tp collectives to overlap.
Breach tp_comm_overlap_tp1(const Config& c) {
  if (!c.training.tp_comm_overlap || c.training.tp != 1) return std::nullopt;
  return RuleBreach{"training.tp_comm_overlap",
                    "true at tp 1: there are no tensor-parallel collectives to overlap, and "
                    "Megatron-LM refuses it (\"Disabling sequence parallelism because tensor "
                    "model parallelism is disabled\", then \"Tensor parallel communication/GEMM "
                    "overlap can happen only when sequence parallelism is enabled\"; expected "
                    "false, or training.tp 2 or more)"};
}

bool is_moe(const Config& c) {
  return c.model.shape && c.model.shape->is_moe();
}

// Megatron-LM refuses a mixture-of-experts layer under tensor parallelism without sequence
// parallelism, whatever ep is:
//   megatron/core/transformer/moe/moe_layer.py:636, MoELayer.forward:
//     if self.training and self.attn_tp_group.size() > 1 and not self.config.sequence_parallel:
//         raise ValueError(
//             "During training, performance may degrade if MoE and tensor parallelism"
//             "are enabled without also enabling sequence parallelism.")
//   (added by 28c8dd71f0, 2024-05-30, in place of validate_args' "When using MoE and tensor
//   parallelism, sequence parallelism must be used.")
//   megatron/core/model_parallel_config.py:560-565, ModelParallelConfig.__post_init__, for
//   ep > 1 with tp > 1 (a ValueError until 0532e92748, 2025-08-22; a warning since):
//     "When using expert parallelism and tensor parallelism for training, sequence
//     parallelism must be used"
// (Quoted below with the space the two literals lack restored. megatron/training/
// arguments.py and transformer_config.py at that commit hold no such assertion.) Without
// sequence parallelism every tp rank would route the whole sequence through the experts: the
// same expert work tp times over.
Breach moe_tp_sequence_parallel(const Config& c) {
  const TrainingConfig& t = c.training;
  if (!is_moe(c) || t.tp <= 1 || t.sequence_parallel) return std::nullopt;
  return RuleBreach{
      t.ep > 1 ? given_key(c, {"training.sequence_parallel", "training.ep", "training.tp"})
               : given_key(c, {"training.sequence_parallel", "training.tp"}),
      "sequence parallelism is off with tp = " + std::to_string(t.tp) +
          (t.ep > 1 ? " and ep = " : "") + (t.ep > 1 ? std::to_string(t.ep) : std::string()) +
          " for a mixture-of-experts model: Megatron-LM refuses to train it (\"During "
          "training, performance may degrade if MoE and tensor parallelism are enabled "
          "without also enabling sequence parallelism.\"; \"When using expert "
          "parallelism and tensor parallelism for training, sequence parallelism must "
          "be used\"), and every tp rank would run the experts on the whole sequence "
          "(expected training.sequence_parallel: true, or training.tp 1)"};
}

// training.moe_overlap is Megatron-LM's --overlap-moe-expert-parallel-comm: the job is the
// one Megatron-Core runs, so its TransformerConfig.__post_init__ rules apply
// (megatron/core/transformer/transformer_config.py:3002-3046; each message below quotes its
// assertion), and its schedules run the pairing in two of their three functions only. For MoE
// models with the overlap on at ep > 1 (at ep 1 check_expert_parallel refuses the overlap itself).
bool moe_overlap(const Config& c) {
  return is_moe(c) && c.training.moe_overlap && c.training.ep > 1;
}

// Only 1F1B's and interleaved's steady states pair (experiment/make_schedule.cpp,
// schedules/fb_pairing.hpp): Megatron-Core's combined_1f1b schedules. In
// megatron/core/pipeline_parallel/schedules.py, forward_backward_no_pipelining (pp 1, line
// 778) and forward_backward_pipelining_with_interleaving (line 1485) take the combined_1f1b
// path "if config.overlap_moe_expert_parallel_comm and not forward_only"; Megatron-LM has no
// other schedule, and the non-interleaved pipeline needs virtual stages (the next rule).
// So Megatron-LM has no message of its own for this rule (it cannot be given another
// schedule to refuse); the message says so and quotes none.
Breach moe_overlap_schedule(const Config& c) {
  const TrainingConfig& t = c.training;
  if (!moe_overlap(c) || t.schedule == "1f1b" || t.schedule == "interleaved") return std::nullopt;
  return RuleBreach{given_key(c, {"training.moe_overlap", "training.schedule"}),
                    "pairs the forwards and backwards of Megatron-LM's 1F1B and interleaved "
                    "schedules, but the schedule is " +
                        t.schedule +
                        " (Megatron-Core runs the overlap only in those two, its combined_1f1b "
                        "paths, and has no other schedule, so no message of its own refuses "
                        "this; expected schedule 1f1b at pp 1, interleaved with vpp 2 or more, "
                        "or moe_overlap: false)"};
}

Breach moe_overlap_virtual_stages(const Config& c) {
  const TrainingConfig& t = c.training;
  if (!moe_overlap(c) || t.pp <= 1 || t.vpp >= 2) return std::nullopt;
  return RuleBreach{
      given_key(c, {"training.moe_overlap", "training.schedule", "training.vpp", "training.pp"}),
      "Megatron-LM's all-to-all overlap at pp " + std::to_string(t.pp) + " with schedule " +
          t.schedule +
          " and no virtual stages: Megatron-Core refuses it (\"If enabling EP A2A overlap, "
          "virtual_pipeline_model_parallel_size must be specified when "
          "pipeline_model_parallel_size > 1\"; expected schedule interleaved with vpp 2 or "
          "more, or pp 1, or moe_overlap: false)"};
}

Breach moe_overlap_full_recompute(const Config& c) {
  if (!moe_overlap(c)) return std::nullopt;
  const std::string full = recompute_mode_key(c, Recompute::full);
  if (full.empty()) return std::nullopt;
  return RuleBreach{full,
                    "full recomputes a whole layer, which Megatron-Core refuses beside "
                    "training.moe_overlap (\"disable full recomputation when enabling "
                    "overlap_moe_expert_parallel_comm\"; expected none, selective or offload, or "
                    "moe_overlap: false)"};
}

Breach moe_overlap_recompute_moe(const Config& c) {
  if (!moe_overlap(c) || !has_module(parse_recompute_modules(c.training.recompute_modules, nullptr),
                                     RecomputeModule::moe))
    return std::nullopt;
  return RuleBreach{"training.recompute_modules",
                    "names moe, which Megatron-Core refuses beside training.moe_overlap "
                    "(\"disable moe in recompute_modules when enabling "
                    "overlap_moe_expert_parallel_comm\"; expected moe_act or the other modules, "
                    "or moe_overlap: false)"};
}

Breach moe_overlap_mtp(const Config& c) {
  if (!moe_overlap(c) || c.model.shape->mtp_layers <= 1) return std::nullopt;
  return RuleBreach{given_key(c, {"training.moe_overlap", "model.mtp_layers"}),
                    std::to_string(c.model.shape->mtp_layers) +
                        " MTP layers beside the all-to-all overlap: Megatron-Core refuses it "
                        "(\"MTP supports at most one layer when enabling "
                        "overlap_moe_expert_parallel_comm.\"; expected model.mtp_layers 0 or 1, "
                        "or moe_overlap: false)"};
}

// Fine-grained activation offload (training.offload_modules, Megatron-Core's
// --offload-modules): TransformerConfig.__post_init__'s module rules.
Breach offload_attn_proj_core_attn(const Config& c) {
  const OffloadModules off = parse_offload_modules(c.training.offload_modules, nullptr);
  if (!offloads(off, OffloadModule::attn_proj) || offloads(off, OffloadModule::core_attn))
    return std::nullopt;
  return RuleBreach{"training.offload_modules",
                    "attn_proj needs core_attn beside it: \"the input of attn_proj is the output "
                    "of core_attn, which is needed in core_attn.backward()\" (Megatron-Core's "
                    "TransformerConfig)"};
}

Breach offload_experts_moe_recompute(const Config& c) {
  const OffloadModules off = parse_offload_modules(c.training.offload_modules, nullptr);
  if (!offloads(off, OffloadModule::expert_fc1) && !offloads(off, OffloadModule::moe_act))
    return std::nullopt;
  // Megatron-Core asks it of selective recomputation only ("if self.recompute_granularity ==
  // \"selective\" and \"moe\" in self.recompute_modules", transformer_config.py:2165): the
  // modules name what a selective layer re-runs, and a job with no selective layer
  // (Megatron-LM's --recompute-granularity full, or none) re-runs none of them.
  // (selective_offload layers recompute selectively too.)
  if (!has_module(parse_recompute_modules(c.training.recompute_modules, nullptr),
                  RecomputeModule::moe) ||
      (recompute_mode_key(c, Recompute::selective).empty() &&
       recompute_mode_key(c, Recompute::selective_offload).empty()))
    return std::nullopt;
  return RuleBreach{"training.offload_modules",
                    "expert_fc1 and moe_act cannot be offloaded while training.recompute_modules "
                    "re-runs the whole MoE (moe) in the selective layers: \"Cannot offload ... "
                    "while recomputing the "
                    "entire MoE layer\" (Megatron-Core's TransformerConfig; expected moe_act in "
                    "recompute_modules instead of moe, or no expert offload)"};
}

// Hierarchical context parallelism (training.cp_hierarchy, Megatron-LM's
// --hierarchical-context-parallel-sizes with --cp-comm-type a2a+p2p): validate_args' two
// checks, megatron/training/arguments.py:580-585. The first asserts without a message.
Breach cp_hierarchy_product(const Config& c) {
  const TrainingConfig& t = c.training;
  if (t.cp_hierarchy.empty()) return std::nullopt;
  // The product, held just above 2^40 (more than any int cp): levels of up to INT_MAX
  // ranks would overflow it. (A level below 1, which the reader refuses, counts as 0.)
  constexpr long long kCap = 1LL << 40;
  long long product = 1;
  for (int n : t.cp_hierarchy) product = n < 1 ? 0 : product > kCap / n ? kCap + 1 : product * n;
  if (product == t.cp) return std::nullopt;
  return RuleBreach{
      "training.cp_hierarchy",
      cp_hierarchy_text(t.cp_hierarchy) + " multiplies to " +
          (product > kCap ? "more than " + std::to_string(kCap) : std::to_string(product)) +
          ", not training.cp = " + std::to_string(t.cp) +
          " (Megatron-LM asserts context_parallel_size == "
          "prod(hierarchical_context_parallel_sizes); expected sizes multiplying "
          "to cp)"};
}

Breach cp_hierarchy_given(const Config& c) {
  const TrainingConfig& t = c.training;
  if (t.cp_comm() != CpComm::a2a_p2p || !t.cp_hierarchy.empty()) return std::nullopt;
  return RuleBreach{"training.cp_comm_type",
                    "a2a+p2p needs training.cp_hierarchy (Megatron-LM: \"--hierarchical-context-"
                    "parallel-sizes must be set when a2a+p2p is used in cp comm\"; expected "
                    "cp_hierarchy: [a2a ranks, ring ranks] multiplying to cp)"};
}

constexpr std::string_view kMegatron = "Megatron-LM";

const std::array kRules = {
    FrameworkRule{
        "megatron.offload-layers-fewer", kMegatron, "training.offload_layers",
        "\"CPU offloading can be done only for layers less than "
        "{num_layers}\"",
        "NVIDIA/Megatron-LM d98e8a64 megatron/core/transformer/transformer_config.py:1884-1889, "
        "TransformerConfig.__post_init__",
        offload_layers_fewer},
    FrameworkRule{
        "megatron.offload-layers-pipeline", kMegatron, "training.offload_layers",
        "\"Currently there is no support for Pipeline parallelism with CPU "
        "offloading\"",
        "NVIDIA/Megatron-LM d98e8a64 megatron/core/transformer/transformer_config.py:1891-1894, "
        "TransformerConfig.__post_init__",
        offload_layers_no_pipeline},
    FrameworkRule{
        "megatron.offload-layers-recompute", kMegatron, "training.offload_layers",
        "\"CPU offloading does not work when activation recomputation is enabled\"",
        "NVIDIA/Megatron-LM d98e8a64 megatron/core/transformer/transformer_config.py:1896-1899, "
        "TransformerConfig.__post_init__",
        offload_layers_no_recompute},
    FrameworkRule{
        "megatron.offload-layers-fine-grained", kMegatron, "training.offload_layers",
        "\"fine_grained_activation_offloading cannot be enabled with "
        "cpu_offloading\"",
        "NVIDIA/Megatron-LM d98e8a64 megatron/core/transformer/transformer_config.py:2127-2130, "
        "TransformerConfig.__post_init__",
        offload_layers_not_fine_grained},
    FrameworkRule{
        "megatron.offload-attn-proj-core-attn", kMegatron, "training.offload_modules",
        "\"the input of attn_proj is the output of core_attn, which is needed in "
        "core_attn.backward()\"",
        "NVIDIA/Megatron-LM d98e8a64 megatron/core/transformer/transformer_config.py:2148-2153, "
        "TransformerConfig.__post_init__",
        offload_attn_proj_core_attn},
    FrameworkRule{
        "megatron.offload-experts-moe-recompute", kMegatron, "training.offload_modules",
        "\"Cannot offload ... while recomputing the entire MoE layer\"",
        "NVIDIA/Megatron-LM d98e8a64 megatron/core/transformer/transformer_config.py:2165-2175, "
        "TransformerConfig.__post_init__",
        offload_experts_moe_recompute},
    FrameworkRule{
        "megatron.tp-comm-overlap-sequence-parallel", kMegatron, "training.tp_comm_overlap",
        "\"Tensor parallel communication/GEMM overlap can happen only when sequence "
        "parallelism is enabled\"",
        "NVIDIA/Megatron-LM d98e8a64 megatron/training/arguments.py:1441-1442, validate_args",
        tp_comm_overlap_sequence_parallel},
    FrameworkRule{
        "megatron.overlap-param-gather-sharded", kMegatron,
        "training.optimizer.overlap_param_gather",
        "\"--overlap-param-gather only supported with distributed optimizer, "
        "megatron fsdp, or dist_muon\"",
        "NVIDIA/Megatron-LM d98e8a64 megatron/training/arguments.py:1024-1027, validate_args",
        overlap_param_gather_sharded},
    FrameworkRule{"megatron.optimizer-offload-distributed", kMegatron,
                  "training.optimizer.offload_fraction",
                  "\"The optimizer cpu offload must be used in conjunction with "
                  "`--use-precision-aware-optimizer`\"; \"--use-precision-aware-optimizer only "
                  "supported with distributed optimizer\"",
                  "NVIDIA/Megatron-LM d98e8a64 megatron/training/arguments.py:1884-1888, "
                  "validate_args, and megatron/core/optimizer/__init__.py:1057-1060, "
                  "get_megatron_optimizer",
                  optimizer_offload_distributed},
    FrameworkRule{
        "megatron.overlap-param-gather-grad-reduce", kMegatron,
        "training.optimizer.overlap_param_gather",
        "\"Must use --overlap-param-gather with --overlap-grad-reduce\"",
        "NVIDIA/Megatron-LM d98e8a64 megatron/training/arguments.py:1028-1029, validate_args",
        overlap_param_gather_grad_reduce},
    FrameworkRule{
        "megatron.tp-comm-overlap-tp1", kMegatron, "training.tp_comm_overlap",
        "\"Disabling sequence parallelism because tensor model parallelism is "
        "disabled\" (at tp 1), then \"Tensor parallel communication/GEMM overlap can "
        "happen only when sequence parallelism is enabled\"",
        "NVIDIA/Megatron-LM d98e8a64 megatron/training/arguments.py:1433-1442, validate_args",
        tp_comm_overlap_tp1},
    FrameworkRule{"megatron.moe-tp-sequence-parallel", kMegatron,
                  "training.sequence_parallel, training.ep, training.tp",
                  "\"During training, performance may degrade if MoE and tensor parallelism "
                  "are enabled without also enabling sequence parallelism.\"; \"When using "
                  "expert parallelism and tensor parallelism for training, sequence "
                  "parallelism must be used\"",
                  "NVIDIA/Megatron-LM d98e8a64 megatron/core/transformer/moe/moe_layer.py:636, "
                  "MoELayer.forward (since 28c8dd71f0), and "
                  "megatron/core/model_parallel_config.py:560-565, "
                  "ModelParallelConfig.__post_init__ (a warning since 0532e92748)",
                  moe_tp_sequence_parallel},
    FrameworkRule{"megatron.moe-overlap-schedule", kMegatron,
                  "training.moe_overlap, training.schedule",
                  "no message (what it does, unquoted): the overlap runs only in the "
                  "combined_1f1b paths of forward_backward_no_pipelining and "
                  "forward_backward_pipelining_with_interleaving, and Megatron-LM has no other "
                  "schedule to refuse",
                  "NVIDIA/Megatron-LM d98e8a64 megatron/core/pipeline_parallel/schedules.py:778 "
                  "and :1485",
                  moe_overlap_schedule},
    FrameworkRule{
        "megatron.moe-overlap-virtual-stages", kMegatron,
        "training.moe_overlap, training.schedule, training.vpp, training.pp",
        "\"If enabling EP A2A overlap, virtual_pipeline_model_parallel_size must be "
        "specified when pipeline_model_parallel_size > 1\"",
        "NVIDIA/Megatron-LM d98e8a64 megatron/core/transformer/transformer_config.py:3007-3011, "
        "TransformerConfig.__post_init__",
        moe_overlap_virtual_stages},
    FrameworkRule{
        "megatron.moe-overlap-full-recompute", kMegatron, "training.recompute",
        "\"disable full recomputation when enabling overlap_moe_expert_parallel_comm\"",
        "NVIDIA/Megatron-LM d98e8a64 megatron/core/transformer/transformer_config.py:3021-3023, "
        "TransformerConfig.__post_init__",
        moe_overlap_full_recompute},
    FrameworkRule{
        "megatron.moe-overlap-recompute-moe", kMegatron, "training.recompute_modules",
        "\"disable moe in recompute_modules when enabling "
        "overlap_moe_expert_parallel_comm\"",
        "NVIDIA/Megatron-LM d98e8a64 megatron/core/transformer/transformer_config.py:3030-3032, "
        "TransformerConfig.__post_init__",
        moe_overlap_recompute_moe},
    FrameworkRule{
        "megatron.moe-overlap-mtp", kMegatron, "training.moe_overlap, model.mtp_layers",
        "\"MTP supports at most one layer when enabling "
        "overlap_moe_expert_parallel_comm.\"",
        "NVIDIA/Megatron-LM d98e8a64 megatron/core/transformer/transformer_config.py:3042-3046, "
        "TransformerConfig.__post_init__",
        moe_overlap_mtp},
    FrameworkRule{"megatron.cp-hierarchy-product", kMegatron, "training.cp_hierarchy",
                  "assert args.context_parallel_size == "
                  "prod(args.hierarchical_context_parallel_sizes) (no message)",
                  "NVIDIA/Megatron-LM d98e8a64 megatron/training/arguments.py:580-582, "
                  "validate_args",
                  cp_hierarchy_product},
    FrameworkRule{"megatron.cp-hierarchy-given", kMegatron, "training.cp_comm_type",
                  "\"--hierarchical-context-parallel-sizes must be set when a2a+p2p is used in "
                  "cp comm\"",
                  "NVIDIA/Megatron-LM d98e8a64 megatron/training/arguments.py:583-585, "
                  "validate_args",
                  cp_hierarchy_given},
};

}  // namespace

std::span<const FrameworkRule> megatron_rules() {
  return kRules;
}

std::string cp_hierarchy_text(const std::vector<int>& sizes) {
  std::string out;
  for (int n : sizes) out.append(out.empty() ? "[" : ", ").append(std::to_string(n));
  return out.empty() ? "[]" : out + "]";
}

}  // namespace bmpipe
