// The cross-field checks: what no single key can get wrong but keys together can (pp
// divides the devices, the partition adds up, every layer's recompute mode exists), the
// work limits, and that no time or byte total of a run can leave int64.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <initializer_list>
#include <limits>
#include <numeric>

#include "experiment/config.hpp"
#include "experiment/config_fields.hpp"
#include "experiment/framework_rules.hpp"
#include "experiment/layer_table.hpp"
#include "experiment/output_work.hpp"
#include "experiment/parallel_mesh.hpp"
#include "experiment/rules_megatron.hpp"
#include "experiment/suggest.hpp"
#include "schedules/registry.hpp"
#include "sim/cost/kernels.hpp"
#include "sim/offload.hpp"

namespace bmpipe {

namespace {

/// The cluster's devices, nodes x devices_per_node (what the engine builds links for).
std::int64_t cluster_device_count(const Config& c) {
  return static_cast<std::int64_t>(c.cluster.nodes) * c.cluster.devices_per_node;
}

/// The job's devices: training.devices, or all of the cluster's.
std::int64_t device_count(const Config& c) {
  return c.training.devices ? *c.training.devices : cluster_device_count(c);
}

/// training.devices, when given, is part of the cluster: the job runs on its first devices.
void check_job_devices(const Config& c) {
  const std::optional<int>& d = c.training.devices;
  if (d && *d > cluster_device_count(c))
    c.fail("training.devices",
           std::to_string(*d) + " devices, but the cluster has nodes x devices_per_node = " +
               std::to_string(c.cluster.nodes) + " x " +
               std::to_string(c.cluster.devices_per_node) + " = " +
               std::to_string(cluster_device_count(c)) +
               " (expected at most that; the job runs on the cluster's first devices)");
}

/// Stages the schedule really has: V schedules hold two per device whatever vpp says.
std::int64_t schedule_stages(const Config& c) {
  const ScheduleInfo* info = find_schedule(c.training.schedule);
  const int chunks = info ? effective_vpp(*info, c.training.vpp) : c.training.vpp;
  return static_cast<std::int64_t>(c.training.pp) * std::max(chunks, c.training.vpp);
}

std::string count_text(long double v) {
  return detail::format_number(static_cast<double>(v));
}

// Every number a table describes, held to its range again: the reader checked what came
// from YAML, but a Config changed by hand (or by a planner) gets here unchecked.
template <class T, std::size_t N>
void check_table(const Config& c, const std::string& key,
                 const std::array<detail::Field<T>, N>& table, const T& obj, bool compute = true) {
  detail::for_each_number(table, obj, [&](const detail::Field<T>& f, double v) {
    if (f.form == detail::Form::compute && !compute) return;
    if (auto why = detail::out_of_range(f, v))
      c.fail(detail::Reader::join(key, std::string(f.name)),
             *why + ", got " + detail::format_number(v));
  });
}

// What no framework rule says but the device and the model must give, checked after
// Megatron-LM's rules (experiment/rules_megatron.cpp): a host for the optimizer offload,
// and a router whose groups can offer top_k experts.
void check_host_and_router(const Config& c) {
  const TrainingConfig& t = c.training;
  if (t.optimizer.offload_fraction > 0 && c.device.hardware) {
    const HardwareSpec& hw = *c.device.hardware;
    const char* missing = !(hw.host_link_GBps > 0)            ? "host_link_GBps"
                          : !(hw.host_memory_GiB > 0)         ? "host_memory_GiB"
                          : !(hw.host_adam_Gparams_per_s > 0) ? "host_adam_Gparams_per_s"
                                                              : nullptr;
    if (missing)
      c.fail("training.optimizer.offload_fraction",
             detail::format_number(t.optimizer.offload_fraction) +
                 " offloads to the host, but the " + hw.name + " device has no " + missing +
                 " (no figure is known for its host; expected 0, or give "
                 "cluster.device." +
                 missing + ")");
  }
  if (!c.model.shape || !c.model.shape->is_moe()) return;
  // The router: top_k experts a token, inside router_group_top_k of router_groups equal
  // groups (DeepSeek-V3's MoEGate; Megatron-Core's group_limited_topk asserts the same).
  const MoeShape& moe = c.model.shape->moe;
  const std::string k = "model.moe.";
  if (moe.top_k > moe.num_experts)
    c.fail(given_key(c, {"model.moe.top_k", "model.moe.num_experts"}),
           std::to_string(moe.top_k) + " experts per token, but the model has " +
               std::to_string(moe.num_experts) + " (expected top_k at most num_experts)");
  if (moe.router_groups == 0 && moe.router_group_top_k == 0) return;
  if ((moe.router_groups > 0) != (moe.router_group_top_k > 0))
    c.fail(moe.router_groups > 0 ? k + "router_group_top_k" : k + "router_groups",
           "group-limited routing takes both router_groups and router_group_top_k, but only " +
               std::string(moe.router_groups > 0 ? "router_groups" : "router_group_top_k") +
               " is set (0 for both turns it off)");
  if (moe.num_experts % moe.router_groups != 0)
    c.fail(given_key(c, {"model.moe.router_groups", "model.moe.num_experts"}),
           std::to_string(moe.router_groups) + " router groups do not split the " +
               std::to_string(moe.num_experts) +
               " experts evenly (expected router_groups dividing num_experts)");
  if (moe.router_group_top_k > moe.router_groups)
    c.fail(given_key(c, {"model.moe.router_group_top_k", "model.moe.router_groups"}),
           std::to_string(moe.router_group_top_k) + " groups a token, but there are " +
               std::to_string(moe.router_groups) + " (expected at most router_groups)");
  const int per_group = moe.num_experts / moe.router_groups;
  const long long offered = static_cast<long long>(moe.router_group_top_k) * per_group;
  if (offered < moe.top_k)
    c.fail(given_key(c, {"model.moe.top_k", "model.moe.router_group_top_k", "model.moe.num_experts",
                         "model.moe.router_groups"}),
           "top_k = " + std::to_string(moe.top_k) + " experts a token, but its " +
               std::to_string(moe.router_group_top_k) + " router groups (router_group_top_k) of " +
               std::to_string(per_group) + " experts (num_experts / router_groups = " +
               std::to_string(moe.num_experts) + " / " + std::to_string(moe.router_groups) +
               ") offer only " + std::to_string(offered) + " (expected top_k at most " +
               std::to_string(offered) + ")");
}

void check_values(const Config& c) {
  check_table(c, "cluster", detail::kClusterFields, c.cluster);
  HardwareSpec device = c.device.hardware.value_or(HardwareSpec{});
  device.memory_GiB = c.device.memory_GiB;
  device.reserved_GiB = c.device.reserved_GiB;
  device.allocator_overhead = c.device.allocator_overhead;
  check_table(c, "cluster.device", detail::kDeviceFields, device, c.device.hardware.has_value());
  if (c.cluster.devices_per_node > 1)
    check_table(c, "cluster.intra_node", detail::kLinkFields, c.cluster.intra_node);
  if (c.cluster.nodes > 1)
    check_table(c, "cluster.inter_node", detail::kLinkFields, c.cluster.inter_node);
  if (c.model.shape) check_table(c, "model", detail::kModelFields, *c.model.shape);
  for (std::size_t g = 0; g < c.model.layers.size(); ++g) {
    const std::string key = "model.layers[" + std::to_string(g) + "]";
    check_table(c, key, detail::kLayerFields, c.model.layers[g]);
    for (Recompute m : kAllRecompute)
      if (const auto& costs = c.model.layers[g].recompute[m])
        check_table(c, key + ".recompute." + std::string(recompute_name(m)),
                    detail::kLayerModeFields, *costs);
  }
  check_table(c, "training", detail::kTrainingFields, c.training);
  // FP8 needs FP8 tensor cores; MXFP8 needs Blackwell's block-scaled ones.
  if (c.training.fp8_format() != Fp8::none && c.device.hardware) {
    const HardwareSpec& hw = *c.device.hardware;
    if (!(hw.fp8_peak_tflops > 0))
      c.fail("training.fp8", "fp8 = " + c.training.fp8 + ", but the device " + hw.name +
                                 " has no FP8 peak (expected none; FP8 presets: b200, b300, "
                                 "gb200, gb300, h100-sxm, h200, h800)");
    if (c.training.fp8_scaling() == Fp8Recipe::mxfp8 && !hw.mxfp8)
      c.fail("training.fp8_recipe",
             "mxfp8 needs block-scaled FP8 GEMMs in hardware (b200, b300, "
             "gb200, gb300), but the device is " +
                 hw.name + " (expected delayed, tensorwise, blockwise or rowwise)");
    if (c.training.fp8_scaling() == Fp8Recipe::nvfp4 && !(hw.fp4_peak_tflops > 0))
      c.fail("training.fp8_recipe",
             "nvfp4 needs FP4 tensor cores (b200, b300, gb200, gb300), but the device " + hw.name +
                 " has no FP4 peak (expected delayed, tensorwise, blockwise, rowwise" +
                 (hw.mxfp8 ? std::string(" or mxfp8)") : std::string(")")));
  }
  // Megatron-LM d98e8a64 arguments.py: "--fp8-param-gather only supported with distributed
  // optimizer, torch fsdp2, megatron fsdp"; and FP8 parameters need FP8.
  if (c.training.fp8_param_gather) {
    if (c.training.fp8_format() == Fp8::none)
      c.fail("training.fp8_param_gather",
             "keeps the GEMM weights in FP8, but training.fp8 is none (expected false, or "
             "training.fp8 hybrid or e4m3)");
    if (c.training.optimizer.zero_stage < 1)
      c.fail("training.fp8_param_gather",
             "needs a sharded optimizer (Megatron-LM: \"--fp8-param-gather only supported with "
             "distributed optimizer, torch fsdp2, megatron fsdp\"; expected "
             "training.optimizer.zero_stage 1 or more)");
  }
  // fp8_matmul_scale multiplies the GEMM efficiencies (sim/cost/cost_model.cpp): an FP8
  // GEMM past the FP8 peak is impossible, whichever kind of GEMM.
  if (c.device.hardware) {
    const HardwareSpec& hw = *c.device.hardware;
    const double eff = std::max(
        {hw.matmul_efficiency, hw.matmul_backward_efficiency, hw.weight_grad_efficiency()});
    // The FP8 and NVFP4 scales, each against its own peak.
    const auto check_scale = [&](const char* key, double scale, const char* gemm,
                                 const char* peak) {
      if (scale * eff > 1.0)
        c.fail(key, detail::format_number(scale) + " puts an " + gemm + " GEMM at " +
                        detail::format_number(scale * eff) + " of the " + peak +
                        " peak (with the GEMM efficiency " + detail::format_number(eff) +
                        "); expected at most 1 / " + detail::format_number(eff) + " = " +
                        detail::format_number(1.0 / eff));
    };
    check_scale("cluster.device.fp4_matmul_scale", hw.fp4_matmul_scale, "NVFP4", "FP4");
    check_scale("cluster.device.fp8_matmul_scale", hw.fp8_matmul_scale, "FP8", "FP8");
  }
  {
    std::string unknown;
    parse_graph_scopes(c.training.cuda_graphs, &unknown);
    if (!unknown.empty())
      c.fail("training.cuda_graphs",
             "'" + unknown +
                 "' is not a CUDA-graph scope (expected a comma-separated list of attn, mlp, "
                 "moe, moe_router, moe_preprocess, mamba, full_iteration, or none)");
  }
  {
    std::string unknown;
    const RecomputeModules modules =
        parse_recompute_modules(c.training.recompute_modules, &unknown);
    if (!unknown.empty())
      c.fail("training.recompute_modules",
             "'" + unknown +
                 "' is not a recompute module (expected a comma-separated list of core_attn, "
                 "layernorm, mla_up_proj, mlp, moe, moe_act, shared_experts, or none)");
    // Megatron-Core's TransformerConfig.__post_init__ (NVIDIA/Megatron-LM d98e8a64,
    // megatron/core/transformer/transformer_config.py): "mla_up_proj in recompute_modules is
    // only supported with multi_latent_attention"; "moe_act ... only supported with
    // moe_grouped_gemm" (bmpipe's experts always run grouped), so only with experts.
    const ModelShape* shape = c.model.shape ? &*c.model.shape : nullptr;
    if (has_module(modules, RecomputeModule::mla_up_proj) && shape && !shape->is_mla())
      c.fail("training.recompute_modules",
             "mla_up_proj needs multi-latent attention (model.mla), as Megatron-Core's "
             "TransformerConfig requires");
    if ((has_module(modules, RecomputeModule::moe_act) ||
         has_module(modules, RecomputeModule::moe) ||
         has_module(modules, RecomputeModule::shared_experts)) &&
        shape && !shape->is_moe())
      c.fail("training.recompute_modules",
             "moe, moe_act and shared_experts need a mixture of experts (model.moe)");
  }
  {
    // Activation offload (sim/offload.hpp). Megatron-Core's own module rules (attn_proj
    // needs core_attn; no expert offload while selective recompute re-runs the whole MoE)
    // are in its table (experiment/rules_megatron.cpp); here, what bmpipe cannot offload: a
    // norm Megatron fuses into the next linear is an IdentityOp it skips, so bmpipe refuses
    // to offload one the layers do not have.
    std::string unknown;
    const OffloadModules off = parse_offload_modules(c.training.offload_modules, &unknown);
    const char* const key = "training.offload_modules";
    if (!unknown.empty())
      c.fail(key, "'" + unknown +
                      "' is not an offload module (expected a comma-separated list of attn_norm, "
                      "qkv_linear, core_attn, attn_proj, mlp_norm, expert_fc1, moe_act, or none)");
    const ModelShape* shape = c.model.shape ? &*c.model.shape : nullptr;
    if (shape && offloads(off, OffloadModule::attn_norm) && !shape->is_mla())
      c.fail(key,
             "attn_norm: this model's input norm is fused into the qkv projection (an "
             "IdentityOp Megatron-Core skips); only multi-latent attention (model.mla) has "
             "one of its own (expected qkv_linear, which offloads the same input)");
    const bool moe_only = offloads(off, OffloadModule::mlp_norm) ||
                          offloads(off, OffloadModule::expert_fc1) ||
                          offloads(off, OffloadModule::moe_act);
    if (shape && moe_only && !shape->is_moe())
      c.fail(key,
             "mlp_norm, expert_fc1 and moe_act need a mixture of experts (model.moe): a dense "
             "MLP's norm is fused into its first linear and it has no experts");
    // The offload layer modes (training.recompute: offload or selective_offload, per
    // layer): such a layer moves the modules above, so it needs some, and a host link to
    // move them on.
    for (Recompute mode : kOffloadModes)
      if (const std::string mode_key = recompute_mode_key(c, mode); !mode_key.empty()) {
        const std::string name(recompute_name(mode));
        if (off == 0)
          c.fail(mode_key, name +
                               " moves the inputs of training.offload_modules to the host, "
                               "but offload_modules is none (expected offload_modules, e.g. "
                               "core_attn,attn_proj, or none, selective or full)");
        if (c.device.hardware && !(c.device.hardware->host_link_GBps > 0))
          c.fail(mode_key, name + " moves activations to the host, but the " +
                               c.device.hardware->name +
                               " device has no host link figure (expected none, selective or "
                               "full, or give cluster.device.host_link_GBps)");
      }
    if (off != 0 && c.device.hardware && !(c.device.hardware->host_link_GBps > 0))
      c.fail(key, offload_modules_text(off) + " offloads to the host, but the " +
                      c.device.hardware->name +
                      " device has no host link figure (expected none, or give "
                      "cluster.device.host_link_GBps)");
  }
  // Megatron-LM's rules (experiment/rules_megatron.cpp): whole-layer offload, the overlaps,
  // sequence parallelism under MoE, the all-to-all overlap.
  apply_rules(megatron_rules(), c);
  if (const int k = c.training.offload_layers;
      k > 0 && c.device.hardware && !(c.device.hardware->host_link_GBps > 0))
    c.fail("training.offload_layers", std::to_string(k) + ": offloads to the host, but the " +
                                          c.device.hardware->name +
                                          " device has no host link figure (expected 0, or give "
                                          "cluster.device.host_link_GBps)");
  check_host_and_router(c);
  if (c.training.kernels == "eager" && c.model.shape &&
      c.model.shape->architecture == Architecture::gpt)
    c.fail("training.kernels",
           "eager: bmpipe models gpt layers with Megatron-LM's fused kernels only (expected "
           "fused, or no key)");
  check_table(c, "training.optimizer", detail::kOptimizerFields, c.training.optimizer);
  std::int64_t layers = 0;
  for (const LayerGroup& g : c.model.layers) {
    if (g.count < 1) c.fail("model.layers", "a group has count " + std::to_string(g.count));
    layers += g.count;
  }
  if (layers > detail::kLayers.max)
    c.fail("model.layers", "the layer groups add up to " + std::to_string(layers) +
                               " layers; a model has at most " +
                               detail::format_number(detail::kLayers.max));
}

// The stage of every layer, in model order: the partition, or as even as possible with the
// remainder on the earliest stages (what make_sim_input does).
std::vector<int> layer_stages(const Config& c, std::int64_t stages, std::int64_t layers) {
  std::vector<int> out;
  out.reserve(static_cast<std::size_t>(layers));
  if (!c.training.partition.empty()) {
    for (std::size_t s = 0; s < c.training.partition.size(); ++s)
      out.insert(out.end(), static_cast<std::size_t>(c.training.partition[s]), static_cast<int>(s));
    return out;
  }
  const std::int64_t base = layers / stages, extra = layers % stages;
  for (std::int64_t s = 0; s < stages; ++s)
    out.insert(out.end(), static_cast<std::size_t>(base + (s < extra ? 1 : 0)),
               static_cast<int>(s));
  return out;
}

// Every measured layer's mode must be one its group defines.
void check_measured_modes(const Config& c, std::int64_t stages) {
  const RecomputeSpec& r = c.training.recompute;
  if (r.global == Recompute::none && r.stages.empty() && r.layers.empty()) return;
  const std::int64_t layers = c.model.num_layers();
  const std::vector<int> stage = layer_stages(c, stages, layers);
  const std::string global_key = c.lines.count("training.recompute.default")
                                     ? "training.recompute.default"
                                     : "training.recompute";
  int index = 0;
  for (std::size_t g = 0; g < c.model.layers.size(); ++g) {
    const LayerGroup& group = c.model.layers[g];
    for (int i = 0; i < group.count; ++i, ++index) {
      Recompute mode = r.global;
      std::string key = global_key;
      if (auto it = r.layers.find(index); it != r.layers.end()) {
        mode = it->second;
        key = "training.recompute.layers." + std::to_string(index);
      } else if (auto st = r.stages.find(stage[index]); st != r.stages.end()) {
        mode = st->second;
        key = "training.recompute.stages." + std::to_string(stage[index]);
      }
      if (group.has_mode(mode)) continue;
      std::string modes;
      for (Recompute m : kAllRecompute)
        if (group.has_mode(m))
          modes += (modes.empty() ? "" : ", ") + std::string(recompute_name(m));
      c.fail(key, "layer " + std::to_string(index) + " (group '" + group.name + "', model.layers[" +
                      std::to_string(g) + "]) has no " + std::string(recompute_name(mode)) +
                      " recompute costs: the group defines " + modes + " (add " +
                      std::string(recompute_name(mode)) + " to model.layers[" + std::to_string(g) +
                      "].recompute)");
    }
  }
}

// What one layer costs per micro-batch, as bounds: the most expensive mode it can run in.
struct Load {
  long double compute_ns = 0;       // F + I + W + recompute
  long double activation = 0;       // bytes kept per micro-batch in flight
  long double static_bytes = 0;     // weights, gradients, optimizer state
  long double output = 0;           // largest stage output, bytes
  long double tail_ns = 0;          // end-of-iteration work
  long double stage_reduce_ns = 0;  // what splitting the dp reduction adds per stage
  std::string key;                  // the key to blame for the largest compute share
};

constexpr long double kClock = 4611686018427387904.0L;  // 2^62 ns: room below kNever

Load measured_load(const Config& c) {
  Load load;
  long double largest = -1;
  for (std::size_t g = 0; g < c.model.layers.size(); ++g) {
    const LayerGroup& l = c.model.layers[g];
    long double recompute = l.recompute_ms,
                activation = static_cast<long double>(l.activation_bytes);
    for (Recompute m : kAllRecompute)
      if (m != Recompute::none && l.recompute[m]) {
        recompute = std::max<long double>(recompute, l.recompute[m]->recompute_ms);
        activation = std::max<long double>(activation, l.recompute[m]->activation_bytes);
      }
    const long double ms = static_cast<long double>(l.forward_ms) + l.backward_input_ms +
                           l.backward_weight_ms + recompute;
    const long double share = l.count * ms * 1e6L;
    load.compute_ns += share;
    load.activation += l.count * activation;
    load.static_bytes +=
        l.count * (static_cast<long double>(l.param_bytes) + l.grad_bytes + l.optimizer_bytes);
    load.output = std::max<long double>(load.output, l.output_bytes);
    if (share > largest) largest = share, load.key = "model.layers[" + std::to_string(g) + "]";
  }
  return load;
}

// The analytic model's costs come from the cost model; every figure it derives from the
// shape, the batch and the device is held to the ranges a measured layer would be.
Load analytic_load(const Config& c) {
  const TrainingConfig& t = c.training;
  const ModelShape& m = *c.model.shape;
  const CostSettings st = cost_settings(c);
  const HardwareSpec& hw = *c.device.hardware;
  // The cost model rounds bytes with llround, which has no answer past int64. Its stored
  // tensors are at most 8 bytes per token per column of the widest matrix (the fp32
  // logits, the MLP's intermediates, the s x s scores of every head).
  const long double tokens = static_cast<long double>(st.seq_length) * st.micro_batch_size;
  const long double widest =
      std::max({static_cast<long double>(m.vocab_size), static_cast<long double>(m.ffn_hidden_size),
                static_cast<long double>(m.hidden_size),
                static_cast<long double>(m.num_attention_heads) * st.seq_length});
  if (8 * tokens * widest > kClock)
    c.fail("training.seq_length",
           "one micro-batch of seq_length x micro_batch_size = " + count_text(tokens) +
               " tokens would keep about " + count_text(8 * tokens * widest) +
               " bytes in one layer, more than int64 can count");
  // An MoE model's bound takes every layer as an MoE one (its costliest kind).
  const LayerCost parts[] = {
      m.is_moe() ? moe_decoder_layer_cost(m, hw, st) : decoder_layer_cost(m, hw, st),
      embedding_cost(m, hw, st), head_cost(m, hw, st, true)};
  Load load;
  load.key = "model";
  const long double kDay = 86'400;
  for (std::size_t i = 0; i < 3; ++i) {
    const LayerCost& p = parts[i];
    const long double n = i == 0 ? m.num_layers : 1;
    long double extra = 0, activation = 0;
    for (Recompute r : kAllRecompute) {
      extra = std::max<long double>(extra, p.recompute_extra_s[r]);
      activation = std::max<long double>(activation, p.activation_bytes[r]);
      if (p.activation_bytes[r] < 0 || p.weight_grad_bytes[r] < 0 ||
          !std::isfinite(p.recompute_extra_s[r]))
        c.fail("model", "the cost model's " + p.name + " has activations beyond int64 bytes");
    }
    const double times[] = {p.forward_s, p.backward_input_s, p.backward_weight_s};
    for (double s : times)
      if (!(s >= 0 && s <= kDay) || extra > kDay)
        c.fail("model", "the cost model gives the " + p.name + " an op of " +
                            detail::format_number(s) +
                            " s for one micro-batch, more than a day: check seq_length, "
                            "micro_batch_size, the shape and the device's peak_tflops, hbm_GBps "
                            "and efficiencies");
    load.compute_ns +=
        n *
        (static_cast<long double>(p.forward_s) + p.backward_input_s + p.backward_weight_s + extra) *
        1e9L;
    load.activation += n * activation;
    load.output = std::max<long double>(load.output, p.output_bytes);
    // Weights, gradients, Adam's two moments and the fp32 master copy: at most 18 bytes
    // per parameter (static_bytes in sim/cost), however dp shards them.
    load.static_bytes += n * 18.0L * p.param_count;
    if (p.param_count < 0)
      c.fail("model", "the cost model's " + p.name + " has too many parameters");
  }
  // The dp reduction and the Adam step of every parameter on one device: an upper bound on
  // any rank's tail.
  const long double params = load.static_bytes / 18.0L;
  if (params < kClock / 64) {
    // The dense gradients reduce over dp x cp: every device but the pp x tp of a pipeline.
    const int dp = static_cast<int>(device_count(c) / (static_cast<std::int64_t>(t.pp) * t.tp));
    const double step =
        optimizer_step_s(static_cast<std::int64_t>(params), st.dtype_bytes, t.optimizer, 1, hw);
    // An all-reduce of every gradient over `group` devices on the slower of the links the
    // cluster has (a link it does not have, e.g. the NIC of a single node, is left unset).
    const auto all_reduce = [&](int group) {
      const double bytes = static_cast<double>(params) * 4;
      double worst = 0;
      if (c.cluster.nodes > 1)
        worst = collective_time_s(hw, Collective::all_reduce, group, bytes, true);
      if (c.cluster.devices_per_node > 1)
        worst = std::max(worst, collective_time_s(hw, Collective::all_reduce, group, bytes, false));
      return worst;
    };
    const double reduce = dp > 1 ? all_reduce(dp) : 0.0;
    load.tail_ns = (static_cast<long double>(step) + reduce) * 1e9L;
    if (t.optimizer.overlap_grad_reduce) {
      // Per-stage reductions pay their latencies once per stage, and the tied embedding's
      // all-reduce between two ranks moves at most every parameter's gradient once.
      const long double latency =
          std::max(c.cluster.intra_node.latency_us, c.cluster.inter_node.latency_us) * 1e3L;
      load.stage_reduce_ns = 2.0L * std::max(dp, 1) * latency;
      load.tail_ns += all_reduce(2) * 1e9L;
    }
    if (!std::isfinite(static_cast<double>(load.tail_ns))) load.tail_ns = kClock * 2;
  }
  return load;
}

// No time or byte total of the run may leave int64. An iteration cannot outlast the sum
// of all its work run one piece after another (the engine never idles while work is
// ready), so that sum, with every op at its most expensive mode, is the bound.
void check_totals(const Config& c, std::int64_t stages) {
  const TrainingConfig& t = c.training;
  const Load load = c.model.analytic() ? analytic_load(c) : measured_load(c);
  const long double m = t.microbatches;
  const long double compute =
      m * load.compute_ns * std::max(1.0L, static_cast<long double>(t.overlap_factor)) +
      (t.overlap_ms ? m * stages * *t.overlap_ms * 1e6L : 0.0L);
  // A transfer pays the latency of every link on its path and the slowest bandwidth.
  long double latency = 0, bandwidth = std::numeric_limits<long double>::infinity();
  std::string link_key;
  const auto link = [&](const LinkSpec& l, const char* key) {
    latency += l.latency_us * 1e3L;
    if (l.bandwidth_GBps < bandwidth) bandwidth = l.bandwidth_GBps, link_key = key;
  };
  if (c.cluster.devices_per_node > 1) link(c.cluster.intra_node, "cluster.intra_node");
  if (c.cluster.nodes > 1) link(c.cluster.inter_node, "cluster.inter_node");
  const bool transfers = stages > 1 && link_key.size() > 0;
  const long double transfer = transfers ? latency + load.output / bandwidth : 0.0L;
  if (transfers && transfer > kClock)
    c.fail(link_key + ".bandwidth_GBps", "one transfer of " + count_text(load.output) +
                                             " bytes would take " + count_text(transfer) +
                                             " ns, past the int64 clock (2^62 ns, 146 years)");
  const long double communication = 2.0L * stages * m * transfer;
  const long double total = compute + communication + load.tail_ns + stages * load.stage_reduce_ns;
  if (total > kClock) {
    const std::string key = communication > compute ? link_key + ".bandwidth_GBps" : load.key;
    c.fail(key, "one iteration could last up to " + count_text(total) + " ns (compute " +
                    count_text(compute) + ", transfers " + count_text(communication) +
                    "), past the int64 clock of 2^62 ns (146 years): the times or the "
                    "micro-batches are far too large");
  }
  const long double bytes = c.device.reserved_GiB * 1073741824.0L +
                            (1.0L + c.device.allocator_overhead) *
                                (load.static_bytes + m * (load.activation + 2 * load.output));
  if (bytes > kClock)
    c.fail(m * load.activation > load.static_bytes ? "training.microbatches" : load.key,
           "one device could hold up to " + count_text(bytes) +
               " bytes, more than int64 can count (2^62): the byte counts or the "
               "micro-batches are far too large");
}

/// An estimate of memory as the work limits' messages say it: "1.5 GiB", else whole MiB
/// rounded up.
std::string memory_estimate_text(long double bytes) {
  char buf[32];
  if (bytes >= 1073741824.0L)
    std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(bytes / 1073741824.0L));
  else
    std::snprintf(buf, sizeof buf, "%.0f MiB", std::ceil(static_cast<double>(bytes / 1048576.0L)));
  return std::string(buf);
}

}  // namespace

std::int64_t op_bound(const Config& c) {
  const long double ops =
      static_cast<long double>(schedule_stages(c)) * c.training.microbatches * 3;
  return ops >= 9.2e18L ? std::numeric_limits<std::int64_t>::max() : static_cast<std::int64_t>(ops);
}

std::int64_t weighted_op_bound(const Config& c, const std::vector<OutputWork>& outputs) {
  long double bytes = kSimulationBytesPerOp;
  for (const OutputWork& o : outputs) bytes += o.bytes_per_op;
  const long double ops = std::ceil(op_bound(c) * bytes / kSimulationBytesPerOp);
  return ops >= 9.2e18L ? std::numeric_limits<std::int64_t>::max() : static_cast<std::int64_t>(ops);
}

void check_output_work(const Config& c, const std::vector<OutputWork>& outputs) {
  const std::int64_t weighted = weighted_op_bound(c, outputs);
  if (weighted <= c.limits.max_ops) return;
  const TrainingConfig& t = c.training;
  const std::int64_t stages = schedule_stages(c);
  std::string names;
  int extra = 0;
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    names += (i == 0 ? "" : i + 1 == outputs.size() ? " and " : ", ") + outputs[i].option;
    extra += outputs[i].bytes_per_op;
  }
  const auto gib = memory_estimate_text;
  const std::int64_t ops = op_bound(c);
  const std::string key = t.microbatches >= stages ? "training.microbatches" : "training.pp";
  c.fail(key, "this run needs up to " + std::to_string(ops) + " ops (" + std::to_string(stages) +
                  " stages x " + std::to_string(t.microbatches) + " micro-batches x 3), and " +
                  names + " keeps about " + std::to_string(extra) +
                  " bytes per op on top of the simulation's " +
                  std::to_string(kSimulationBytesPerOp) + ": about " +
                  gib(static_cast<long double>(ops) * (kSimulationBytesPerOp + extra)) +
                  ", the work of " + std::to_string(weighted) + " ops; the limit is " +
                  std::to_string(c.limits.max_ops) + " ops (about " +
                  gib(static_cast<long double>(c.limits.max_ops) * kSimulationBytesPerOp) +
                  "); raise it with --max-ops " + std::to_string(weighted) +
                  ", or run with fewer micro-batches");
}

void check_work_bounds(const Config& c, const WorkLimits& limits) {
  const TrainingConfig& t = c.training;
  const std::int64_t devices = cluster_device_count(c);
  if (devices > limits.max_devices)
    c.fail(c.cluster.nodes > 1 ? "cluster.nodes" : "cluster.devices_per_node",
           "nodes x devices_per_node = " + std::to_string(c.cluster.nodes) + " x " +
               std::to_string(c.cluster.devices_per_node) + " = " + std::to_string(devices) +
               " devices; the limit is " + std::to_string(limits.max_devices) +
               "; raise it with --max-devices");
  const std::int64_t stages = schedule_stages(c);
  const std::int64_t ops = op_bound(c);
  if (ops > limits.max_ops) {
    // Bytes per op measured on runs of 8-24 million ops: 33 (ZB-H1) to 51 (ZB-V), 96 with
    // an SVG (README, "Limits").
    const auto memory = memory_estimate_text;
    const std::string key = t.microbatches >= stages ? "training.microbatches" : "training.pp";
    c.fail(key, "this run needs up to " + count_text(ops) + " ops (" + std::to_string(stages) +
                    " stages x " + std::to_string(t.microbatches) + " micro-batches x 3), about " +
                    memory(ops * 50.0L) + " (" + memory(ops * 100.0L) +
                    " with --svg); the limit is " + std::to_string(limits.max_ops) +
                    " ops; raise it with --max-ops");
  }
  // Every route the engine computes walks every link of the device graph.
  const long double dpn = c.cluster.devices_per_node;
  const long double links = c.cluster.nodes * dpn * (dpn - 1) +
                            (c.cluster.nodes > 1 ? 2.0L * devices : 0.0L) +
                            (c.cluster.domain() > dpn ? 2.0L * devices : 0.0L);
  const std::string links_text =
      count_text(links) +
      " links (devices_per_node x (devices_per_node - 1) in each node, 2 per device between "
      "nodes)";
  if (links > limits.max_links)
    c.fail("cluster.devices_per_node", "the device graph would have " + links_text + ", about " +
                                           count_text(std::ceil(links * 100 / 1073741824.0L)) +
                                           " GiB; the limit is " +
                                           std::to_string(limits.max_links) + " links");
  const long double routes = 1 + 2.0L * (stages - 1);
  if (links * routes > limits.max_link_visits)
    c.fail("cluster.devices_per_node",
           "routing the " + std::to_string(stages - 1) + " stage boundaries over " + links_text +
               " visits about " + count_text(links * routes) + " links, about " +
               count_text(std::ceil(links * routes / 1e8L)) + " s; the limit is " +
               std::to_string(limits.max_link_visits) +
               ": use fewer devices per node or fewer stages");
}

// training.ep and training.etp against the model's experts and the stage's tp x dp devices
// (Megatron-Core's MoE parallel folding: etp x ep x edp = tp x dp).
void check_expert_parallel(const Config& c, const ParallelMesh& mesh) {
  const TrainingConfig& t = c.training;
  const ModelShape& m = *c.model.shape;
  if (t.moe_overlap && (!m.is_moe() || t.ep == 1))
    c.fail("training.moe_overlap",
           !m.is_moe() ? "true, but " + m.name +
                             " has no mixture-of-experts layers: there is no all-to-all to overlap"
                       : "true, but ep = 1: the experts are not split, so there is no "
                         "all-to-all to overlap (set training.ep)");
  if (t.moe_capacity_factor > 0) {
    if (!m.is_moe())
      c.fail("training.moe_capacity_factor",
             "pads the experts' input, but " + m.name + " has no mixture-of-experts layers");
    // Megatron-LM d98e8a64, transformer_config.py __post_init__: "Flex token dispatcher
    // with deepep backend does not support moe_pad_expert_input_to_capacity".
    if (t.dispatcher() == MoeDispatcher::deepep)
      c.fail("training.moe_capacity_factor",
             "pads to capacity, which DeepEP's dispatcher does not do (Megatron-LM: \"Flex "
             "token dispatcher with deepep backend does not support "
             "moe_pad_expert_input_to_capacity\"); expected alltoall, or 0");
  }
  if (t.dispatcher() == MoeDispatcher::deepep) {
    if (!m.is_moe() || t.ep == 1)
      c.fail("training.moe_dispatcher",
             !m.is_moe() ? "deepep, but " + m.name +
                               " has no mixture-of-experts layers: there are no tokens to "
                               "dispatch (expected alltoall, or no key)"
                         : "deepep, but ep = 1: the experts are not split, so nothing is "
                           "dispatched (set training.ep, or expected alltoall)");
    if (c.device.hardware && c.device.hardware->intra_node_mesh)
      c.fail("training.moe_dispatcher",
             "deepep: DeepEP's kernels need NVLink-switched GPUs and RDMA, but the device " +
                 c.device.hardware->name +
                 "'s node is a mesh of point-to-point links (expected alltoall)");
    if (t.etp > 1)
      c.fail("training.moe_dispatcher",
             "deepep with etp = " + std::to_string(t.etp) +
                 ": bmpipe models DeepEP's kernels with whole experts on a device only "
                 "(expected etp 1, or alltoall)");
  }
  if (!m.is_moe()) {
    if (t.ep > 1)
      c.fail("training.ep", "ep = " + std::to_string(t.ep) + ", but " + m.name +
                                " has no experts (a dense model)");
    if (t.etp > 1)
      c.fail("training.etp", "etp = " + std::to_string(t.etp) + ", but " + m.name +
                                 " has no experts (a dense model)");
    return;
  }
  if (m.architecture != Architecture::llama)
    c.fail("model.architecture", "the mixture-of-experts layer is costed for llama only");
  if (m.moe.num_experts % t.ep != 0)
    c.fail("training.ep", "ep = " + std::to_string(t.ep) + " does not divide the " +
                              std::to_string(m.moe.num_experts) + " experts of " + m.name);
  if (m.moe.expert_ffn % t.etp != 0)
    c.fail("training.etp", "etp = " + std::to_string(t.etp) +
                               " does not divide the experts' intermediate size " +
                               std::to_string(m.moe.expert_ffn));
  if (m.moe.shared_ffn % t.tp != 0)
    c.fail("training.tp", "tp = " + std::to_string(t.tp) +
                              " does not divide the shared experts' intermediate size " +
                              std::to_string(m.moe.shared_ffn));
  if (const auto broken = mesh.expert_violation()) {
    // Name the key the file set: ep, or etp when only etp is there.
    const std::string key = c.lines.count("training.ep") || !c.lines.count("training.etp")
                                ? "training.ep"
                                : "training.etp";
    c.fail(key, broken->message());
  }
}

// Hybrid sharding and resharding after forward against the sharding and the mesh. The
// divisions are Megatron-Core's (NVIDIA/Megatron-LM d98e8a64, megatron/core/
// parallel_state.py, initialize_model_parallel): "Data parallel size should be divisible by
// partial DistOpt shard factor" ((dp x cp) % instances) and "Expert data parallel size
// should be divisible by partial DistOpt shard factor" (edp % instances).
void check_hybrid_sharding(const Config& c, const ParallelMesh& mesh) {
  const TrainingConfig& t = c.training;
  if (!t.fsdp_reshard_after_forward && t.optimizer.zero_stage < 3)
    c.fail("training.fsdp_reshard_after_forward",
           "false, but zero_stage is " + std::to_string(t.optimizer.zero_stage) +
               ": only sharded parameters (zero_stage 3, training.fsdp) are gathered and "
               "resharded (expected true, or zero_stage 3)");
  if (t.fsdp_all_reduce_every_microbatch && t.optimizer.zero_stage < 3)
    c.fail("training.fsdp_all_reduce_every_microbatch",
           "true, but zero_stage is " + std::to_string(t.optimizer.zero_stage) +
               ": only the layers of zero_stage 3 (training.fsdp) reduce their gradients in "
               "every micro-batch's backward (expected false, or zero_stage 3)");
  const int shard = t.fsdp_shard_group;
  if (shard == 0) return;
  const int dense = mesh.size(MeshGroup::dp_cp);
  const std::string group =
      t.cp > 1 ? "dp x cp = " + std::to_string(dense) : "dp = " + std::to_string(dense);
  if (t.optimizer.zero_stage < 1)
    c.fail("training.fsdp_shard_group",
           std::to_string(shard) +
               ", but nothing is sharded at zero_stage 0 (expected no key, or "
               "training.optimizer.zero_stage 1 or more, or training.fsdp: true)");
  if (dense % shard != 0)
    c.fail("training.fsdp_shard_group",
           std::to_string(shard) + " does not divide " + group +
               ": the shard groups cut the data-parallel group into equal copies (expected a "
               "divisor of " +
               std::to_string(dense) + ")");
  const int copies = dense / shard;
  if (c.model.shape && c.model.shape->is_moe() && mesh.edp() % copies != 0)
    c.fail("training.fsdp_shard_group",
           std::to_string(shard) + " makes " + std::to_string(copies) +
               " copies of the sharded state, which do not divide the experts' edp = " +
               std::to_string(mesh.edp()) +
               " (Megatron-Core: \"Expert data parallel size should be divisible by partial "
               "DistOpt shard factor\"; expected " +
               group + " over a divisor of " + std::to_string(mesh.edp()) + ")");
}

// training.cp_hierarchy against cp_comm_type, cp and the heads. Megatron-LM's own checks
// (the sizes multiply to cp; a2a+p2p needs them) are in its table (experiment/
// rules_megatron.cpp), applied before these; here TransformerEngine's (NVIDIA/
// TransformerEngine d0067d0d, transformer_engine/pytorch/attention/dot_product_attention/
// context_parallel.py, attn_forward_func_with_cp), with its message, and bmpipe's own: the
// sizes are read by a2a+p2p alone, and at cp 1 there is no group to split.
void check_cp_hierarchy(const Config& c) {
  const TrainingConfig& t = c.training;
  const std::vector<int>& h = t.cp_hierarchy;
  const std::string key = "training.cp_hierarchy";
  if (h.empty()) return;
  if (t.cp_comm() != CpComm::a2a_p2p)
    c.fail(key, "is read with cp_comm_type a2a+p2p only (cp_comm_type is " + t.cp_comm_type +
                    ": Megatron-LM builds the hierarchical groups, and only a2a+p2p attention "
                    "uses them); expected cp_comm_type a2a+p2p, or no cp_hierarchy");
  const std::string sizes = cp_hierarchy_text(h);
  if (h.size() != 2)
    c.fail(key, sizes + " has " + std::to_string(h.size()) +
                    " levels (TransformerEngine: \"CP implementation a2a+p2p requires cp_group = "
                    "[a2a_cp_group, p2p_cp_group]!\"; expected two sizes, [a2a ranks, ring "
                    "ranks])");
  if (t.cp <= 1)
    c.fail(key, sizes +
                    " at training.cp 1: there is no context-parallel group to split into "
                    "levels (expected training.cp 2 or more with sizes multiplying to it, "
                    "or no cp_hierarchy and cp_comm_type p2p)");
  if (const auto problem =
          ulysses_heads_problem(c.model.shape->num_attention_heads, t.tp, h.front()))
    c.fail(key, "its a2a level: " + *problem +
                    " (expected a first size dividing the heads of a tp rank)");
}

// training.cp and cp_comm_type against the sequence and the heads.
void check_context_parallel(const Config& c) {
  const TrainingConfig& t = c.training;
  const ModelShape& m = *c.model.shape;
  if (const auto problem = cp_split_problem(*t.seq_length, t.cp)) c.fail("training.cp", *problem);
  if (t.cp_comm() == CpComm::a2a)
    if (const auto problem = ulysses_heads_problem(m.num_attention_heads, t.tp, t.cp))
      c.fail("training.cp_comm_type", *problem + " (expected p2p, or a cp dividing the heads)");
  check_cp_hierarchy(c);
}

// model.sliding_window against the sequence and context parallelism.
void check_windows(const Config& c) {
  const ModelShape& m = *c.model.shape;
  const TrainingConfig& t = c.training;
  if (!m.has_windows()) return;
  const int s = *t.seq_length;
  // A window written in the YAML and longer than the sequence masks nothing: it is full
  // attention written as a window, most likely a window in the wrong unit or a seq_length
  // shorter than meant. (An HF config's window is the model's, and training it on shorter
  // sequences is ordinary: that one is costed as the full attention it then is.)
  if (c.lines.count("model.sliding_window") && m.sliding_window > s)
    c.fail("model.sliding_window",
           std::to_string(m.sliding_window) +
               " tokens is longer than training.seq_length = " + std::to_string(s) +
               ": a window past the sequence masks nothing (expected at most seq_length, or 0 "
               "for full attention)");
  // TransformerEngine's context-parallel attention (attn_forward_func_with_cp) asserts that a
  // sliding window runs only with a2a or all_gather: not the p2p ring.
  if (m.sliding_window < s && t.cp > 1 && t.cp_comm() == CpComm::p2p)
    c.fail(c.lines.count("training.cp_comm_type") ? "training.cp_comm_type" : "training.cp",
           "cp = " + std::to_string(t.cp) + " over the p2p ring with a " +
               std::to_string(m.sliding_window) +
               "-token sliding window: TransformerEngine runs windows only with a2a (Ulysses) "
               "or all_gather context parallelism (expected cp_comm_type a2a, or cp 1)");
  // a2a+p2p with a ring level of more than one rank (TE runs [cp, 1] as a2a).
  if (m.sliding_window < s && t.cp_comm() == CpComm::a2a_p2p && t.cp > t.cp_a2a_ranks())
    c.fail("training.cp_hierarchy",
           "a ring level of " + std::to_string(t.cp / t.cp_a2a_ranks()) + " ranks with a " +
               std::to_string(m.sliding_window) +
               "-token sliding window (TransformerEngine: \"Context parallelism does not "
               "support sliding window attention with cp_comm_type='a2a+p2p'!\"; expected a "
               "ring level of 1, or cp_comm_type a2a)");
}

// training.megatron_layout: it parses; and when the folded layer table cannot run it
// (separate_end_layout), it is the partition, so it must fit the model and the schedule.
void check_written_layout(const Config& c, std::int64_t stages, std::int64_t layers,
                          const std::string& shape) {
  const TrainingConfig& t = c.training;
  const std::string key = "training.megatron_layout";
  std::vector<LayoutStage> parsed;
  try {
    parsed = parse_layer_layout(t.megatron_layout);
  } catch (const LayoutError& e) {
    c.fail(key, "'" + t.megatron_layout + "' " + e.what());
  }
  const std::string mismatch = folded_layout_mismatch(parsed);
  if (mismatch.empty()) return;  // the partition is training.partition's; plan checks it
  const std::string text = "'" + t.megatron_layout + "' " + mismatch;
  if (!c.model.analytic())
    c.fail(key, text +
                    ": only an analytic model (preset, hf_config or shape keys) runs it; "
                    "measured layer groups are the rows of their own partition");
  if (!t.partition.empty())
    c.fail("training.partition",
           "cannot be given with " + key + " " + text +
               ": the layout places every layer, so it is the partition (drop one of them)");
  if (static_cast<std::int64_t>(parsed.size()) != stages)
    c.fail(key, text + ", and has " + std::to_string(parsed.size()) + " stages but there are " +
                    std::to_string(stages) + shape);
  std::int64_t decoders = 0, mtp = 0;
  for (const LayoutStage& st : parsed) decoders += st.decoders, mtp += st.mtp;
  if (decoders != layers)
    c.fail(key, "'" + t.megatron_layout + "' holds " + std::to_string(decoders) +
                    " decoder layers (t) but the model has " + std::to_string(layers));
  if (mtp != c.model.shape->mtp_layers)
    c.fail(key, "'" + t.megatron_layout + "' holds " + std::to_string(mtp) +
                    " multi-token prediction layers (m) but the model has " +
                    std::to_string(c.model.shape->mtp_layers) + " (model.mtp_layers)");
}

namespace {

// A vision-language model (model.vision) against the training settings: its image tokens
// are part of the LLM's sequence, so they must fit it; tp splits the encoder's heads and
// MLP and the projector's fc1 as Megatron-Core's layers do; context parallelism of the
// encoder and vision rows on a separate-ends table are not modelled.
void check_vision_training(const Config& c) {
  const ModelShape& m = *c.model.shape;
  const VisionShape& v = m.vision;
  const TrainingConfig& t = c.training;
  const long long tokens = v.image_tokens_per_sample();
  const long long s = *t.seq_length;
  if (tokens > s)
    c.fail(c.lines.count("model.vision.image_tokens") ? "model.vision.image_tokens"
                                                      : "training.seq_length",
           "images_per_sample x image_tokens = " + std::to_string(v.images_per_sample) + " x " +
               std::to_string(v.image_tokens) + " = " + std::to_string(tokens) +
               " image tokens do not fit training.seq_length = " + std::to_string(s) +
               " tokens, which holds them with the text (expected at most " +
               std::to_string(s / v.images_per_sample) + " tokens an image)");
  const auto divides = [&](long long size, const char* field) {
    if (size % t.tp != 0)
      c.fail("model.vision." + std::string(field),
             std::to_string(size) +
                 " is not split evenly by training.tp = " + std::to_string(t.tp) +
                 " (Megatron-Core splits the vision encoder's heads, MLP and projector over "
                 "tp as the LLM's)");
  };
  if (v.tensor_parallel) {
    divides(v.num_heads, "num_heads");
    divides(v.ffn_hidden_size, "ffn_hidden_size");
    divides(v.projector_width(), "projector_ffn");
  }
  if (t.cp > 1)
    c.fail("training.cp",
           "context parallelism with a vision encoder is not modelled "
           "(expected cp 1 with model.vision)");
  if (t.separate_ends || !t.megatron_layout.empty())
    c.fail(t.separate_ends ? "training.separate_ends" : "training.megatron_layout",
           "a vision model's rows come before the LLM's; a layout with separate ends or "
           "Megatron's layout string does not name them (expected training.partition, which "
           "counts the vision encoder's blocks and projector as layers)");
}

/// A hybrid model (model.hybrid_pattern) against the training keys: its layers are costed as
/// Megatron-Core runs them (hybrid_layer_cost: fused kernels), and the Mamba mixer's heads and
/// groups split over tp as MambaMixer asserts (NVIDIA/Megatron-LM d98e8a64
/// megatron/core/ssm/mamba_mixer.py: "nheads must be evenly divisble by tp_size", "ngroups
/// must be evenly divisible by tp_size"). Context parallelism of Mamba layers (Megatron's
/// mamba_context_parallel.py) is not modelled, so refused.
void check_hybrid_training(const Config& c) {
  const ModelShape& m = *c.model.shape;
  const TrainingConfig& t = c.training;
  if (t.kernels != "fused")
    c.fail("training.kernels",
           (t.kernels.empty() ? std::string("the default (eager)") : t.kernels) +
               ": bmpipe costs hybrid models as Megatron-Core runs them, with fused kernels "
               "(expected fused)");
  if (m.hybrid_pattern.find('G') != std::string::npos &&
      (m.gdn.key_heads % t.tp != 0 || m.gdn.value_heads % t.tp != 0))
    c.fail("training.tp", "tp = " + std::to_string(t.tp) +
                              " does not divide the Gated DeltaNet's " +
                              std::to_string(m.gdn.key_heads) + " key heads and " +
                              std::to_string(m.gdn.value_heads) + " value heads");
  if (m.hybrid_pattern.find('G') != std::string::npos && t.cp > 1)
    c.fail("training.cp", "cp = " + std::to_string(t.cp) +
                              ": context parallelism of Gated DeltaNet layers is not modelled "
                              "(expected cp 1 for a hybrid model with G layers)");
  if (m.hybrid_pattern.find('M') == std::string::npos) return;
  if (m.mamba.num_heads % t.tp != 0 || m.mamba.groups % t.tp != 0)
    c.fail("training.tp", "tp = " + std::to_string(t.tp) + " does not divide the Mamba mixer's " +
                              std::to_string(m.mamba.num_heads) + " heads and " +
                              std::to_string(m.mamba.groups) +
                              " groups (Megatron's MambaMixer: \"nheads must be evenly "
                              "divisble by tp_size\", \"ngroups must be evenly divisible by "
                              "tp_size\")");
  if (t.cp > 1)
    c.fail("training.cp", "cp = " + std::to_string(t.cp) +
                              ": context parallelism of Mamba layers is not modelled (expected "
                              "cp 1 for a hybrid model with M layers)");
}

}  // namespace

void check_config(const Config& c) {
  const TrainingConfig& t = c.training;
  check_values(c);
  require_schedule(c, t.schedule, "training.schedule");
  // BPipe (sim/simulate.hpp, "BPipe"): pairs 1F1B's stage s with stage pp - 1 - s, one stage
  // per device, whole micro-batches moved over the device graph. At pp 2 neither stage holds
  // more than ceil((pp + 1) / 2) = 2, so there is nothing to balance.
  std::string unknown_module;
  if (t.bpipe && (t.schedule != "1f1b" || t.pp < 3 || t.moe_overlap ||
                  parse_offload_modules(t.offload_modules, &unknown_module) != 0))
    c.fail("training.bpipe",
           t.schedule != "1f1b" ? "true balances 1F1B's stages, but training.schedule is " +
                                      t.schedule + " (expected 1f1b, or bpipe: false)"
           : t.pp < 3 ? "true needs pp >= 3: with pp " + std::to_string(t.pp) +
                            " no stage holds more than ceil((pp + 1) / 2) micro-batches "
                            "(expected bpipe: false)"
           : t.moe_overlap
               ? "true cannot pair with training.moe_overlap, which merges 1F1B's forwards "
                 "and backwards (expected one of them)"
               : "true cannot be combined with training.offload_modules (" + t.offload_modules +
                     "): a stage's activations go either to the host or to its partner "
                     "(expected one of them)");
  // First, so that every product below is of small numbers.
  check_work_bounds(c, c.limits);
  check_job_devices(c);
  const std::int64_t devices = device_count(c);
  // The mesh's rules on the devices: pp, pp x tp, pp x tp x cp, then a given dp.
  const MeshSizes sizes = t.mesh_sizes();
  if (auto broken = ParallelMesh::device_violation(sizes, devices)) {
    broken->job_devices = t.devices.has_value();
    c.fail(broken->key, broken->message());
  }
  // check_work_bounds bounds the devices, so they fit an int.
  const ParallelMesh mesh(sizes, static_cast<int>(devices), c.cluster.domain());
  // The schedule's real stage count: V schedules hold two stages per device even when the
  // config says vpp 1.
  const std::int64_t stages = schedule_stages(c);
  const std::int64_t layers = c.model.num_layers();
  const std::string shape =
      stages == static_cast<std::int64_t>(t.pp) * t.vpp
          ? " (pp " + std::to_string(t.pp) + " x vpp " + std::to_string(t.vpp) + ")"
          : " (pp " + std::to_string(t.pp) + " x 2: " + t.schedule +
                " holds two stages per device)";
  if (c.model.analytic()) {
    const ModelShape& m = *c.model.shape;
    if (!t.seq_length)
      c.fail("training", "the analytic model needs training.seq_length (tokens per sample)");
    if (!c.device.hardware)
      c.fail("cluster.device",
             "the analytic model needs the device's compute figures: give "
             "preset (known: " +
                 hardware_preset_names() + ") or peak_tflops and hbm_GBps");
    if (const auto broken =
            ParallelMesh::model_violation(sizes, m.num_attention_heads, m.ffn_hidden_size))
      c.fail(broken->key, broken->message() + " of " + m.name);
    check_context_parallel(c);
    check_windows(c);
    check_expert_parallel(c, mesh);
    check_hybrid_sharding(c, mesh);
    if (m.is_hybrid()) check_hybrid_training(c);
    if (m.vision.enabled()) check_vision_training(c);
  }
  for (const auto& [s, mode] : t.recompute.stages)
    if (s >= stages)
      c.fail("training.recompute.stages." + std::to_string(s),
             "stage " + std::to_string(s) + " does not exist: there are " + std::to_string(stages) +
                 " stages" + shape);
  // With separate ends, keys layers .. layers + mtp_layers - 1 name the MTP layers.
  const std::int64_t mtp_keys = has_separate_ends(c) ? c.model.shape->mtp_layers : 0;
  for (const auto& [l, mode] : t.recompute.layers)
    if (l >= layers + mtp_keys)
      c.fail("training.recompute.layers." + std::to_string(l),
             "layer " + std::to_string(l) + " does not exist: the model has " +
                 std::to_string(layers) + " layers" +
                 (mtp_keys > 0 ? " and " + std::to_string(mtp_keys) + " MTP layers (keys " +
                                     std::to_string(layers) + "..)"
                               : std::string()));
  if (!t.partition.empty()) {
    if (static_cast<std::int64_t>(t.partition.size()) != stages)
      c.fail("training.partition", "has " + std::to_string(t.partition.size()) +
                                       " entries but there are " + std::to_string(stages) +
                                       " stages" + shape);
    // Entries are at most INT_MAX each and there are few of them: the sum fits.
    const std::int64_t sum =
        std::accumulate(t.partition.begin(), t.partition.end(), std::int64_t{0});
    for (int p : t.partition)
      if (p < 0) c.fail("training.partition", "has a negative entry " + std::to_string(p));
    if (sum != layers)
      c.fail("training.partition", "adds up to " + std::to_string(sum) +
                                       " layers but the model has " + std::to_string(layers));
  } else if (layers < stages && separate_end_layout(c).empty()) {
    c.fail("training.pp", "the model's " + std::to_string(layers) + " layers cannot fill " +
                              std::to_string(stages) + " stages");
  }
  if (!t.megatron_layout.empty()) check_written_layout(c, stages, layers, shape);
  if (!c.model.analytic()) check_measured_modes(c, stages);
  check_totals(c, schedule_stages(c));
}

void resolve_batch(Config& c) {
  TrainingConfig& t = c.training;
  check_job_devices(c);
  const std::int64_t devices = device_count(c);
  const MeshSizes sizes = t.mesh_sizes();
  if (t.pp < 1 || t.tp < 1 || t.cp < 1 || devices < 1) return;  // check_config reports it
  // A given dp that does not fill the devices still counts the batch (check_config says
  // what is wrong with it); the other rules leave no dp to count with.
  if (const auto broken = ParallelMesh::device_violation(sizes, devices))
    if (broken->rule != MeshRule::dp_fills_devices) return;  // check_config reports it
  const std::int64_t dp = ParallelMesh::data_parallel(sizes, devices);
  if (t.global_batch_size) {
    const std::int64_t per = static_cast<std::int64_t>(t.micro_batch_size) * dp;
    const std::string per_text = "micro_batch_size x dp = " + std::to_string(t.micro_batch_size) +
                                 " x " + std::to_string(dp) + " = " + std::to_string(per);
    if (per < 1 || *t.global_batch_size % per != 0)
      c.fail("training.global_batch_size",
             "global_batch_size = " + std::to_string(*t.global_batch_size) +
                 " is not a multiple of " + per_text);
    const int m = static_cast<int>(*t.global_batch_size / per);
    if (t.microbatches_given && t.microbatches != m)
      c.fail("training.microbatches", "microbatches = " + std::to_string(t.microbatches) +
                                          " contradicts global_batch_size / (" + per_text +
                                          ") = " + std::to_string(*t.global_batch_size) + " / " +
                                          std::to_string(per) + " = " + std::to_string(m));
    t.microbatches = m;
  } else if (!t.microbatches_given) {
    auto it = c.lines.find("training");
    throw ConfigError(c.file, it == c.lines.end() ? 1 : it->second, "training.microbatches",
                      "missing required key (or give global_batch_size)");
  }
}

std::string unknown_schedule_message(std::string_view name) {
  return "unknown schedule '" +
         (name.size() > 60 ? std::string(name.substr(0, 60)) + "..." : std::string(name)) + "'" +
         did_you_mean(name, split_names(schedule_names())) + " (known: " + schedule_names() + ")";
}

const ScheduleInfo& require_schedule(const Config& config, std::string_view name,
                                     const std::string& key) {
  const ScheduleInfo* info = find_schedule(name);
  if (!info) config.fail(key, unknown_schedule_message(name));
  return *info;
}

}  // namespace bmpipe
