// The vision layers of a vision-language model (ModelShape::vision): the patch embedding,
// the ViT encoder blocks and the projector, as Qwen2.5-VL builds them (Bai et al. 2025,
// arXiv 2502.13923, sec. 2.1; HF transformers' Qwen2_5_VisionTransformerPretrainedModel,
// Qwen2_5_VLVisionBlock, Qwen2_5_VLPatchMerger, read) and Megatron-Core trains such an
// encoder (NVIDIA/Megatron-LM d98e8a64, megatron/core/models/vision/clip_vit_model.py: a
// TransformerBlock of TransformerLayers with the padding mask, no causal mask;
// multimodal_projector.py: an MLP projector). Their work follows the image patches a
// micro-batch carries, micro_batch_size x images_per_sample x image_tokens x
// spatial_merge^2, not the LLM's seq_length.
#include <algorithm>
#include <cmath>

#include "sim/cost/cost_model.hpp"
#include "sim/cost/layer_parts.hpp"

namespace bmpipe {

namespace {

using namespace layer_parts;

/// One vision layer's dimensions on one device.
struct VisionDims {
  double e = 0, tp = 1;
  double T = 0;   // patches of the micro-batch (every tp rank runs all of them)
  double Hs = 0;  // hidden elements this device holds outside tp regions (T h, / tp with SP)
  double Ts = 0;  // tokens of Hs (T, or T / tp with SP)
  double h = 0, heads = 0, d = 0, q_cols = 0, f = 0;
  double in_factor = 2;  // fc1's columns per intermediate column: 2 gated, 1 not
  double Tm = 0;         // merged tokens: the image tokens the projector emits
  double pf = 0;         // the projector's fc1 columns on this device
  double out = 0;        // the LLM's hidden size
};

VisionDims vision_dims(const ModelShape& m, const CostSettings& st) {
  const VisionShape& v = m.vision;
  if (!v.enabled()) throw ShapeError("vision layers need a vision model (model.vision)");
  VisionDims D;
  D.e = st.dtype_bytes;
  D.tp = st.tp;
  D.T = static_cast<double>(st.micro_batch_size) * static_cast<double>(v.patches_per_sample());
  D.h = v.hidden_size;
  D.Ts = st.sequence_parallel ? D.T / D.tp : D.T;
  D.Hs = D.Ts * D.h;
  D.heads = static_cast<double>(v.num_heads) / D.tp;
  D.d = D.h / v.num_heads;
  D.q_cols = D.heads * D.d;
  D.f = static_cast<double>(v.ffn_hidden_size) / D.tp;
  D.in_factor = v.gated_mlp ? 2 : 1;
  D.Tm = D.T / static_cast<double>(v.merge2());
  D.pf = static_cast<double>(v.projector_width()) / D.tp;
  D.out = m.hidden_size;
  return D;
}

/// The sub-op accumulator of a vision layer called `name`: its GEMMs in bf16, its kernels
/// in CUDA-graph scope `scope` until it says otherwise.
Builder vision_builder(const HardwareSpec& hw, const CostSettings& st, const char* name,
                       GraphScope scope) {
  Builder b(hw, st, Architecture::llama, name);
  b.fp8_gemms(false);
  b.set_scope(scope);
  return b;
}

/// A fused RMSNorm over `elements` (TransformerEngine's: one kernel a pass reading the input,
/// and backward the gradient, once; norm_traffic), its scale of `width` getting its gradient.
void norm(Builder& b, const std::string& name, double elements, double e, double width) {
  const NormTraffic n = norm_traffic(false, e);
  b.elementwise(name, n.f * elements, n.i * elements, n.w * elements, n.kf, n.ki, n.kw, width, 1);
}

/// A linear layer's bias gradient: a reduction of the output gradient (`out` elements) into
/// `width` values, in the weight-grad pass.
void bias(Builder& b, const std::string& name, double out, double e, double width) {
  b.elementwise(name, 0, 0, e * out, 0, 0, 1, width, 1);
}

/// The row-parallel GEMM's tp collective on its output of `bytes`, and the sequence-parallel
/// gather before a column-parallel one.
void reduce_out(Builder& b, const CostSettings& st, const std::string& name, double bytes) {
  b.tp_collective(name + (st.sequence_parallel ? "_reduce_scatter" : "_all_reduce"),
                  st.sequence_parallel ? Collective::reduce_scatter : Collective::all_reduce,
                  st.sequence_parallel ? Collective::all_gather : Collective::all_reduce, bytes);
}
void gather_in(Builder& b, const CostSettings& st, const std::string& name, double bytes) {
  if (st.sequence_parallel)
    b.tp_collective(name + "_all_gather", Collective::all_gather, Collective::reduce_scatter,
                    bytes);
}

/// Forward FLOPs of one encoder block's bidirectional attention core on one device: each of
/// the T patches scores `keys` keys and sums as many values, over q_cols columns:
/// QK^T 2 T keys q_cols + PV 2 T keys q_cols. No causal mask: every pair is computed (a
/// decoder's causal core computes about half).
double core_flops(const VisionDims& D, double keys) {
  return 4 * D.T * keys * D.q_cols;
}

/// One encoder block (Qwen2_5_VLVisionBlock as Megatron-Core's TransformerLayer would run
/// it), sub-ops in order:
///   input_norm (RMSNorm over Hs), [qkv_all_gather], qkv_proj T x h -> 3 q_cols, qkv_bias,
///   attention: flash attention without a mask over `keys` keys a patch (core_flops; bytes
///     q, k, v and the output once, e T 4 q_cols; backward 2.5x the FLOPs and twice the
///     bytes, as the decoder's core), at the attention efficiency for head width d,
///   out_proj q_cols -> h, out_bias, its tp collective, residual_1 (3 e Hs),
///   post_norm, [fc1_all_gather], fc1 h -> in_factor f, fc1_bias, activation (SwiGLU fused:
///     3 e, 5 e an element of F = T f; GELU 2 e, 3 e), fc2 f -> h, fc2_bias, its tp
///     collective, residual_2.
/// The 2D rotary embedding of q and k (Qwen2.5-VL's) is left out: 2 reads and writes of q
/// and k, under 1 % of the block's time.
LayerCost encoder_impl(const ModelShape& m, const HardwareSpec& hw, const CostSettings& st,
                       bool windowed) {
  const VisionShape& v = m.vision;
  const VisionDims D = vision_dims(m, st);
  Builder b = vision_builder(hw, st, windowed ? "vision.window" : "vision", GraphScope::attn);
  const double e = D.e, T = D.T, F = T * D.f;
  const double keys = windowed ? std::min(v.window_patches(), v.patches_per_image())
                               : static_cast<double>(v.patches_per_image());
  norm(b, "input_norm", D.Hs, e, D.h);
  gather_in(b, st, "qkv", e * T * D.h);
  b.linear("qkv_proj", T, D.h, 3 * D.q_cols);
  bias(b, "qkv_bias", T * 3 * D.q_cols, e, 3 * D.q_cols);
  b.set_modules(module_bit(RecomputeModule::core_attn));
  const double flops = core_flops(D, keys);
  const double io = e * T * 4 * D.q_cols;
  const double hd = attention_head_dim_factor(D.d);
  b.add("attention", b.roof(flops, io, hw.attention_efficiency * hd) + b.launches(1),
        b.roof(2.5 * flops, 2 * io, hw.attention_backward_efficiency * hd) + b.launches(2), 0.0,
        KernelClass::attention);
  b.count_flops(flops);
  b.set_modules(0);
  b.linear("out_proj", T, D.q_cols, D.h);
  bias(b, "out_bias", T * D.h, e, D.h);
  reduce_out(b, st, "out", e * T * D.h);
  b.elementwise("residual_1", 3 * e * D.Hs, 3 * e * D.Hs, 0, 1, 1, 0);
  b.set_scope(GraphScope::mlp);
  norm(b, "post_norm", D.Hs, e, D.h);
  gather_in(b, st, "fc1", e * T * D.h);
  b.set_modules(module_bit(RecomputeModule::mlp));
  b.linear("fc1", T, D.h, D.in_factor * D.f);
  bias(b, "fc1_bias", T * D.in_factor * D.f, e, D.in_factor * D.f);
  const SwigluTraffic act =
      v.gated_mlp ? swiglu_traffic(false, e) : SwigluTraffic{2 * e, 3 * e, 1, 1};
  b.elementwise("activation", act.f * F, act.i * F, 0, act.kf, act.ki, 0);
  b.linear("fc2", T, D.f, D.h);
  b.set_modules(0);
  bias(b, "fc2_bias", T * D.h, e, D.h);
  reduce_out(b, st, "fc2", e * T * D.h);
  b.elementwise("residual_2", 3 * e * D.Hs, 3 * e * D.Hs, 0, 1, 1, 0);
  if (st.tp_comm_overlap && st.sequence_parallel) {
    b.overlap_tp("qkv_all_gather", "qkv_proj", true);
    b.overlap_tp("out_reduce_scatter", "out_proj", false);
    b.overlap_tp("fc1_all_gather", "fc1", true);
    b.overlap_tp("fc2_reduce_scatter", "fc2", false);
  }
  LayerCost& c = b.cost();
  LayerDims none;  // mark_recompute reads D.eager only: Megatron's reentrant checkpoint
  mark_recompute(c, none, st, c.ops.size());
  // Saved for backward, recompute none (per device, bytes): the input norm's input and
  // fp32 rstd, e Hs + 4 Ts; qkv_proj's input, e Hs; q, k, v, e T 3 q_cols; the core's
  // output (out_proj's input), e T q_cols; its fp32 logsumexp, 4 heads T; the post norm's,
  // e Hs + 4 Ts; fc1's input, e Hs; the activation's input (gate and up, 2 e F, or e F)
  // and fc2's input, e F:
  //   none = 4 e Hs + 8 Ts + 4 e T q_cols + 4 heads T + (act + e) F.
  // The core_attn module frees the logsumexp (the checkpoint keeps q, k, v; out_proj its
  // input), the mlp module the activation's input and fc2's input (it keeps fc1's input);
  // full keeps the block's input, e Hs. The weight-grad needs the GEMMs' inputs:
  // 2 e Hs + e T q_cols + e F.
  const double act_saved = (v.gated_mlp ? 2 : 1) * e * F;
  const double lse = 4 * D.heads * T, mlp_inner = act_saved + e * F;
  const double saved = 4 * e * D.Hs + 8 * D.Ts + 4 * e * T * D.q_cols + lse + mlp_inner;
  double freed = 0;
  if (st.recompute_modules & module_bit(RecomputeModule::core_attn)) freed += lse;
  if (st.recompute_modules & module_bit(RecomputeModule::mlp)) freed += mlp_inner;
  const double wgrad = 2 * e * D.Hs + e * T * D.q_cols + e * F;
  c.activation_bytes[Recompute::none] = to_bytes(saved);
  c.activation_bytes[Recompute::selective] = to_bytes(saved - freed);
  c.activation_bytes[Recompute::full] = to_bytes(e * D.Hs);
  c.weight_grad_bytes[Recompute::none] = to_bytes(wgrad);
  c.weight_grad_bytes[Recompute::selective] =
      std::min(c.activation_bytes[Recompute::selective], to_bytes(wgrad));
  c.weight_grad_bytes[Recompute::full] = c.activation_bytes[Recompute::full];
  c.recompute_flops[Recompute::full] = c.forward_flops;
  c.output_bytes = to_bytes(e * D.Hs);
  // Parameters on one device: qkv, proj, fc1 and fc2 (with their column-parallel biases)
  // split over tp; the norms' scales and the row-parallel biases whole.
  const double per_tp = 3 * D.h * D.q_cols + 3 * D.q_cols + D.q_cols * D.h +
                        D.in_factor * (D.h * D.f + D.f) + D.f * D.h;
  c.param_count = static_cast<std::int64_t>(std::llround(per_tp + 2 * D.h + 2 * D.h));
  c.active_param_count = c.param_count;
  return c;
}

/// The patch embedding: Qwen2.5-VL's Conv3d with stride equal to its kernel, one GEMM of
/// T patches x (in_channels temporal_patch patch_size^2) pixels -> h, no bias, whole on
/// every tp rank (Megatron-Core's CLIPViTModel conv1 is not tp-split). Saves its input,
/// the pixels; hands on e T h (its output, whole: the first block's norm reads it).
LayerCost patch_embed_impl(const ModelShape& m, const HardwareSpec& hw, const CostSettings& st) {
  const VisionShape& v = m.vision;
  const VisionDims D = vision_dims(m, st);
  Builder b = vision_builder(hw, st, "patch_embed", GraphScope::other);
  const double k = static_cast<double>(v.in_channels) * v.temporal_patch * v.patch_size *
                   static_cast<double>(v.patch_size);
  b.linear("patch_embed", D.T, k, D.h);
  LayerCost& c = b.cost();
  for (Recompute r : kAllRecompute) {
    c.activation_bytes[r] = to_bytes(D.e * D.T * k);
    c.weight_grad_bytes[r] = c.activation_bytes[r];
  }
  c.output_bytes = to_bytes(D.e * D.Hs);
  c.param_count = v.patch_embed_params();
  c.active_param_count = c.param_count;
  return c;
}

/// The projector (Qwen2.5-VL's PatchMerger; Megatron-Core's MultimodalProjector "mlp"):
///   norm (RMSNorm over the T patches), [fc1_all_gather], fc1: Tm merged tokens of
///   merge^2 h -> pf (column-parallel), fc1_bias, gelu (2 e, 3 e an element of Tm pf),
///   fc2 pf -> the LLM's hidden size H (row-parallel), fc2_bias, its tp collective.
/// Saved, recompute none: the norm's input and rstd, e Hs + 4 Ts; fc1's input, e Hs (the
/// same elements, merged); GELU's input and fc2's input, 2 e Tm pf. Selective frees
/// nothing (no attention); full keeps the input, e Hs. Output: the image tokens' hidden
/// states, e Tm H (/ tp under sequence parallelism).
LayerCost projector_impl(const ModelShape& m, const HardwareSpec& hw, const CostSettings& st) {
  const VisionShape& v = m.vision;
  const VisionDims D = vision_dims(m, st);
  Builder b = vision_builder(hw, st, "projector", GraphScope::other);
  const double e = D.e, in = static_cast<double>(v.merge2()) * D.h;
  norm(b, "norm", D.Hs, e, D.h);
  gather_in(b, st, "fc1", e * D.T * D.h);
  b.linear("fc1", D.Tm, in, D.pf);
  bias(b, "fc1_bias", D.Tm * D.pf, e, D.pf);
  b.elementwise("gelu", 2 * e * D.Tm * D.pf, 3 * e * D.Tm * D.pf, 0, 1, 1, 0);
  b.linear("fc2", D.Tm, D.pf, D.out);
  bias(b, "fc2_bias", D.Tm * D.out, e, D.out);
  reduce_out(b, st, "fc2", e * D.Tm * D.out);
  LayerCost& c = b.cost();
  LayerDims none;
  mark_recompute(c, none, st, c.ops.size());
  const double saved = 2 * e * D.Hs + 4 * D.Ts + 2 * e * D.Tm * D.pf;
  const double wgrad = e * D.Hs + e * D.Tm * D.pf;
  c.activation_bytes[Recompute::none] = c.activation_bytes[Recompute::selective] = to_bytes(saved);
  c.activation_bytes[Recompute::full] = to_bytes(e * D.Hs);
  c.weight_grad_bytes[Recompute::none] = c.weight_grad_bytes[Recompute::selective] =
      to_bytes(wgrad);
  c.weight_grad_bytes[Recompute::full] = c.activation_bytes[Recompute::full];
  c.recompute_flops[Recompute::full] = c.forward_flops;
  const double out = e * D.Tm * D.out;
  c.output_bytes = to_bytes(st.sequence_parallel ? out / D.tp : out);
  c.param_count =
      static_cast<std::int64_t>(std::llround(D.h + in * D.pf + D.pf + D.pf * D.out + D.out));
  c.active_param_count = c.param_count;
  return c;
}

/// `impl` on `hw`, host-bound where the host is slower (add_host_bound), with ZeRO-3's
/// parameter traffic.
template <class Impl>
LayerCost with_host(const HardwareSpec& hw, Impl impl) {
  LayerCost c = impl(hw);
  if (hw.host_launch_us > 0) {
    HardwareSpec quiet = hw;
    quiet.kernel_launch_us = 0;
    add_host_bound(c, impl(quiet), hw);
  }
  return c;
}

/// The settings the vision layers run under: `st`, or without tp splitting (tp 1, no
/// sequence parallelism, no tp collectives) when the vision model is replicated over tp
/// (VisionShape::tensor_parallel false).
CostSettings vision_settings(const ModelShape& m, const CostSettings& st) {
  if (m.vision.tensor_parallel) return st;
  CostSettings whole = st;
  whole.tp = 1;
  whole.sequence_parallel = false;
  whole.tp_comm_overlap = false;
  return whole;
}

}  // namespace

LayerCost vision_encoder_layer_cost(const ModelShape& m, const HardwareSpec& hw,
                                    const CostSettings& given, bool windowed) {
  const CostSettings st = vision_settings(m, given);
  LayerCost c =
      with_host(hw, [&](const HardwareSpec& h) { return encoder_impl(m, h, st, windowed); });
  add_param_sharding_comm(c, hw, st);
  return c;
}

LayerCost vision_patch_embed_cost(const ModelShape& m, const HardwareSpec& hw,
                                  const CostSettings& given) {
  const CostSettings st = vision_settings(m, given);
  LayerCost c = with_host(hw, [&](const HardwareSpec& h) { return patch_embed_impl(m, h, st); });
  add_param_sharding_comm(c, hw, st);
  return c;
}

LayerCost vision_projector_cost(const ModelShape& m, const HardwareSpec& hw,
                                const CostSettings& given) {
  const CostSettings st = vision_settings(m, given);
  LayerCost c = with_host(hw, [&](const HardwareSpec& h) { return projector_impl(m, h, st); });
  add_param_sharding_comm(c, hw, st);
  return c;
}

}  // namespace bmpipe
