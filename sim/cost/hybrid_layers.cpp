// The layers of hybrid models (ModelShape::hybrid_pattern): each layer is one block with its
// own pre-norm and residual add, as Megatron-Core's HybridBlock builds them (NVIDIA/Megatron-LM
// d98e8a64, megatron/core/models/hybrid/hybrid_layer_specs.py: MambaLayer, a TransformerLayer
// with attention only, one with the MLP only, one with the MoE MLP only). The attention and
// MLP blocks are the transformer layer's (layer_parts.hpp); the Mamba-2 block is here.
#include <algorithm>
#include <cmath>

#include "sim/cost/cost_model.hpp"
#include "sim/cost/layer_parts.hpp"

namespace bmpipe {

namespace {

using namespace layer_parts;

/// The Mamba-2 mixer's dimensions on one device: tp splits heads and groups (MambaMixer's
/// nheads_local_tp, ngroups_local_tp; d98e8a64 megatron/core/ssm/mamba_mixer.py).
struct MambaDims {
  double heads = 0, groups = 0, head_dim = 0, state = 0, chunk = 0, kernel = 0;
  double inner = 0;     // d_inner / tp
  double in_cols = 0;   // in_proj's columns on this device: z, x, B, C, dt
  double channels = 0;  // conv1d's channels on this device: x, B, C
};

MambaDims mamba_dims(const ModelShape& m, const CostSettings& st) {
  const MambaShape& x = m.mamba;
  MambaDims M;
  M.heads = static_cast<double>(x.num_heads) / st.tp;
  M.groups = static_cast<double>(x.groups) / st.tp;
  M.head_dim = x.head_dim;
  M.state = x.state_dim;
  M.chunk = x.chunk_size;
  M.kernel = x.conv_kernel;
  M.inner = M.heads * M.head_dim;
  M.in_cols = 2 * M.inner + 2 * M.groups * M.state + M.heads;
  M.channels = M.inner + 2 * M.groups * M.state;
  return M;
}

/// FLOPs of the SSD scan's forward per token on one device (Dao and Gu 2024, arXiv
/// 2405.21060, sec. 6, the chunked algorithm with chunk Q, state N, head width P):
///   C B^T inside each chunk, once a group:            2 Q N      a group
///   (L o C B^T) X, the intra-chunk outputs:            2 Q P      a head
///   B^T X, each chunk's final state:                   2 N P      a head
///   C h, the states' contribution to the outputs:      2 N P      a head
/// (the state passing between chunks, N P a chunk, is left out: 1/Q of the above).
double ssd_flops_per_token(const MambaDims& M) {
  return M.groups * 2 * M.chunk * M.state +
         M.heads * (2 * M.chunk * M.head_dim + 4 * M.state * M.head_dim);
}

/// The part of a mixer block before its scan, Mamba-2's and Gated DeltaNet's alike: the
/// pre-norm, the gather under sequence parallelism, in_proj h -> `in_cols`, and the causal
/// depthwise conv1d with SiLU over `channels` of `kernel` taps (2 x kernel FLOPs an element;
/// reads and writes the channels; backward re-runs it, reads the gradient and its input and
/// writes the input's gradient: 5 element passes), whose `conv_params` in `conv_tensors`
/// tensors get their gradients.
void mixer_in(Builder& b, const LayerDims& D, const CostSettings& st, double in_cols,
              double channels, double kernel, double conv_params, int conv_tensors) {
  const double e = D.e, T = D.T;
  b.elementwise("input_norm", D.norm.f * D.Hs, D.norm.i * D.Hs, D.norm.w * D.Hs, D.norm.kf,
                D.norm.ki, D.norm.kw, D.h, 1);
  if (st.sequence_parallel)
    b.tp_collective("in_all_gather", Collective::all_gather, Collective::reduce_scatter, e * D.Hn);
  b.linear("in_proj", T, D.h, in_cols);
  const double conv = e * T * channels;
  b.elementwise("conv1d", 2 * conv, 5 * conv, 0, 1, 2, 0, conv_params, conv_tensors);
  b.count_flops(2 * kernel * T * channels);
}

/// The part after the scan: the gated RMSNorm over the `inner` outputs (reads them and the
/// gate z, writes the product; backward reads the gradient and both and writes two
/// gradients; `norm_params` in `norm_tensors` tensors get gradients), out_proj inner -> h,
/// its tp collective, the residual add, and TransformerEngine's overlap of the two tp
/// collectives with in_proj and out_proj.
void mixer_out(Builder& b, const LayerDims& D, const CostSettings& st, double inner,
               double norm_params, int norm_tensors) {
  const double y = D.e * D.T * inner;
  b.elementwise("gated_norm", 3 * y, 5 * y, 0, 1, 1, 0, norm_params, norm_tensors);
  b.linear("out_proj", D.T, inner, D.h);
  b.tp_collective(st.sequence_parallel ? "out_reduce_scatter" : "out_all_reduce",
                  st.sequence_parallel ? Collective::reduce_scatter : Collective::all_reduce,
                  st.sequence_parallel ? Collective::all_gather : Collective::all_reduce,
                  D.e * D.Hn);
  b.elementwise("residual_1", D.add_f, D.add_f, 0, 1, 1, 0);
  if (st.tp_comm_overlap && st.sequence_parallel) {
    b.overlap_tp("in_all_gather", "in_proj", true);
    b.overlap_tp("out_reduce_scatter", "out_proj", false);
  }
}

/// The Mamba-2 block as Megatron-Core trains it (MambaLayer: a fused RMSNorm into in_proj, the
/// mixer, the residual add; MambaMixer.forward with use_mem_eff_path, the default: in_proj,
/// mamba_ssm's mamba_split_conv1d_scan_combined, out_proj). Sub-ops:
///   input_norm, (in_all_gather under sequence parallelism), in_proj h -> in_cols,
///   conv1d: the causal depthwise convolution with SiLU over x, B and C (2 x kernel FLOPs an
///     element; reads and writes the channels; backward re-runs it and reads the gradient
///     and its input, writes the input's gradient: 5 element passes),
///   ssd_scan: the chunked scan (ssd_flops_per_token) at the attention kernels' efficiency,
///     they being fused tensor-core kernels of the same kind; bytes: five kernels (chunk
///     cumsum, bmm_chunk, chunk_state, state_passing, chunk_scan: the PyTorch blog
///     "Accelerating Mamba2 with Kernel Fusion", 2025, names them and calls the unfused
///     scan "mostly bottlenecked by memory bandwidth and latency"), so x, B and C are each
///     read by two of them and dt by two, y written once (dtype), the chunks' fp32 states
///     (heads x P x N a chunk) written once and read three times, and C B^T in fp32 (groups
///     x Q a token) written and read; backward
///     (mamba_ssm's _mamba_chunk_scan_combined_bwd) recomputes the states and runs the
///     gradients of each product: 2x the forward's FLOPs plus the states' 2 N P a head, twice
///     the bytes, ten kernels,
///   gated_norm: RMSNorm(y) x SiLU(z) over d_inner (reads y and z, writes the product;
///     backward reads the gradient, y and z and writes two gradients),
///   out_proj d_inner -> h, its tp collective, the residual add.
/// Full recompute re-runs all of it (Megatron's reentrant checkpoint of the layer).
void mamba_block(Builder& b, const LayerDims& D, const MambaDims& M, const CostSettings& st) {
  b.set_scope(GraphScope::mamba);
  const double e = D.e, T = D.T;
  mixer_in(b, D, st, M.in_cols, M.channels, M.kernel, M.channels * (M.kernel + 1), 2);
  const double flops = ssd_flops_per_token(M) * T;
  const double states = 4.0 * T * M.heads * M.head_dim * M.state / M.chunk;  // fp32, per pass
  const double cb = 4.0 * T * M.groups * M.chunk;
  const double io = e * T * (2 * M.channels + 2 * M.heads + M.inner);
  const double bytes_f = io + 4 * states + 2 * cb;
  const double flops_b = 2 * flops + 2 * M.heads * M.state * M.head_dim * T;
  const HardwareSpec& hw = b.hardware();
  b.add("ssd_scan", b.roof(flops, bytes_f, hw.attention_efficiency) + b.launches(5),
        b.roof(flops_b, 2 * bytes_f, hw.attention_backward_efficiency) + b.launches(10), 0.0,
        KernelClass::attention);
  b.count_flops(flops);
  // The per-head dt_bias, A_log and D get their gradients inside the scan's backward.
  mixer_out(b, D, st, M.inner, M.inner + 3 * M.heads, 4);
}

/// The Gated DeltaNet mixer's dimensions on one device: tp splits the key and value heads
/// (Megatron-Core's GatedDeltaNet splits both; HF's module is the unsplit form).
struct GdnDims {
  double key_heads = 0, value_heads = 0, dk = 0, dv = 0, chunk = 0, kernel = 0;
  double key_dim = 0, value_dim = 0;
  double in_cols = 0;   // in_proj_qkvz + in_proj_ba: q, k, v, z, then beta and the decay
  double channels = 0;  // conv1d over q, k, v
};

GdnDims gdn_dims(const ModelShape& m, const CostSettings& st) {
  const GdnShape& g = m.gdn;
  GdnDims G;
  G.key_heads = static_cast<double>(g.key_heads) / st.tp;
  G.value_heads = static_cast<double>(g.value_heads) / st.tp;
  G.dk = g.key_head_dim;
  G.dv = g.value_head_dim;
  G.chunk = g.chunk_size;
  G.kernel = g.conv_kernel;
  G.key_dim = G.key_heads * G.dk;
  G.value_dim = G.value_heads * G.dv;
  G.in_cols = 2 * G.key_dim + 2 * G.value_dim + 2 * G.value_heads;
  G.channels = 2 * G.key_dim + G.value_dim;
  return G;
}

/// FLOPs of the chunked gated delta rule's forward per token on one device, a value head at a
/// time (flash-linear-attention's chunk_gated_delta_rule, chunk C, key width dk, value width
/// dv; each key head serves its value heads' share): K K^T inside the chunk 2 C dk; the WY
/// representation's W = A K and U = A V, 2 C dk + 2 C dv; the chunk's state update
/// h += K^T (U - W h), 4 dk dv; the outputs Q h, 2 dk dv, and (Q K^T o M)(U - W h), 2 C dk +
/// 2 C dv. So 6 C dk + 4 C dv + 6 dk dv a value head (the triangular solve for A, C^2 / 3 a
/// token, left out).
double gdn_flops_per_token(const GdnDims& G) {
  return G.value_heads * (6 * G.chunk * G.dk + 4 * G.chunk * G.dv + 6 * G.dk * G.dv);
}

/// The Gated DeltaNet block (HF transformers' Qwen3NextGatedDeltaNet, Megatron-Core's
/// GatedDeltaNet): input_norm, (in_all_gather), in_proj (qkvz and ba fused in one GEMM here:
/// the same input), conv1d with SiLU over q, k, v (as the Mamba block's), the gates and the
/// L2 norms of q and k (memory-bound: read q, k, beta and the decay inputs, write them back),
/// gdn_scan (gdn_flops_per_token at the attention efficiency; bytes: q, k, v read twice, the
/// gates, the output written, the chunks' fp32 states, value heads x dk x dv a chunk,
/// written once and read twice, and the chunks' C x C matrices in fp32 written and read),
/// its backward twice the FLOPs plus the states again and twice the bytes; the gated RMSNorm
/// over the value dim; out_proj; its tp collective; the residual.
void gdn_block(Builder& b, const LayerDims& D, const GdnDims& G, const CostSettings& st) {
  b.set_scope(GraphScope::other);
  const double e = D.e, T = D.T;
  mixer_in(b, D, st, G.in_cols, G.channels, G.kernel, G.channels * G.kernel, 1);
  const double qk = e * T * 2 * G.key_dim, gates = 4.0 * T * 2 * G.value_heads;
  b.elementwise("gates_l2norm", 2 * qk + 2 * gates, 3 * qk + 3 * gates, 0, 3, 3, 0,
                2 * G.value_heads, 2);
  const double flops = gdn_flops_per_token(G) * T;
  const double states = 4.0 * T * G.value_heads * G.dk * G.dv / G.chunk;  // fp32, a pass
  const double blocks = 4.0 * T * G.value_heads * G.chunk;                // C x C a chunk
  const double io = e * T * (2 * 2 * G.key_dim + 2 * G.value_dim + G.value_dim) + gates;
  const double bytes_f = io + 3 * states + 2 * blocks;
  const double flops_b = 2 * flops + 4 * G.value_heads * G.dk * G.dv * T;
  const HardwareSpec& hw = b.hardware();
  b.add("gdn_scan", b.roof(flops, bytes_f, hw.attention_efficiency) + b.launches(4),
        b.roof(flops_b, 2 * bytes_f, hw.attention_backward_efficiency) + b.launches(8), 0.0,
        KernelClass::attention);
  b.count_flops(flops);
  mixer_out(b, D, st, G.value_dim, G.dv, 1);
}

/// What one block keeps for backward with no recompute, and of it what the weight-grad
/// needs, per device (bytes). All blocks keep their input (the norm's, dtype bytes, with an
/// fp32 rstd a token: TransformerEngine's fused norms keep the input alone) and the
/// normalized tensor their first GEMM reads (at gi bytes, its FP8 cast under fp8).
struct BlockSaved {
  double saved = 0;      // everything, recompute none
  double core_only = 0;  // what selective recompute drops (the attention core's)
  double weight_grad = 0;
};

BlockSaved block_saved(HybridKind kind, const LayerDims& D, const MambaDims& M, const GdnDims& G,
                       const ModelShape& m, const CostSettings& st) {
  const bool fp8 = st.fp8 != Fp8::none;
  const double e = D.e, gi = fp8 ? Builder::low_precision_bytes(st.fp8_recipe) : e;
  const double Ts = D.Hs / D.h;
  BlockSaved s;
  s.saved = e * D.Hs + 4 * Ts + gi * D.Hs;  // the norm's input and rstd; the first GEMM's input
  s.weight_grad = gi * D.Hs + e * D.Hs;     // the first GEMM's input; the normalized tensor
  const double act = D.relu2 ? e : 2 * e;   // the MLP activation's saved input, an element
  switch (kind) {
    case HybridKind::mamba: {
      // mamba_split_conv1d_scan_combined saves in_proj's output (zxBCdt) and the scan's
      // output y before the gated norm, with the norm's fp32 rstd a group; out_proj keeps its
      // input (the gated norm's output).
      s.saved += e * D.T * M.in_cols + e * D.T * M.inner + 4 * D.T * M.groups + gi * D.T * M.inner;
      s.weight_grad += gi * D.T * M.inner;
      break;
    }
    case HybridKind::gdn:
      // in_proj's output (q, k, v, z, beta, decay), the conv's output (q, k, v), the L2-normed
      // q and k, the fp32 gates, the solved C x C blocks in fp32, the scan's output with the
      // gated norm's rstd (a value head each), out_proj's input.
      s.saved += e * D.T * G.in_cols + e * D.T * G.channels + e * D.T * 2 * G.key_dim +
                 4.0 * D.T * 2 * G.value_heads + 4.0 * D.T * G.value_heads * G.chunk +
                 e * D.T * G.value_dim + 4.0 * D.T * G.value_heads + gi * D.T * G.value_dim;
      s.weight_grad += gi * D.T * G.value_dim;
      break;
    case HybridKind::attention:
      // q, k, v, flash attention's output (out_proj's input; its FP8 copy beside it) and
      // the fp32 logsumexp; an output gate keeps its sigmoid's input and the gated output.
      s.saved += e * D.T * (D.q_cols + 2 * D.kv_cols) + e * D.T * D.q_cols +
                 (fp8 ? gi * D.T * D.q_cols : 0.0) +
                 (m.attention_output_gate ? 2 * e * D.T * D.q_cols : 0.0);
      s.core_only = 4 * D.mb * D.heads * D.sl;
      s.weight_grad += gi * D.T * D.q_cols;
      break;
    case HybridKind::mlp:
      s.saved += (act + gi) * D.F;  // the activation's input; its output (the down's input)
      s.weight_grad += gi * D.F;
      break;
    case HybridKind::moe: {
      const MoeShape& x = m.moe;
      s.saved += e * D.Hs;                    // the router's input (a bf16 GEMM)
      s.saved += 4 * D.Tm * D.E + 12 * D.Tk;  // fp32 probabilities, top-k indices, weights
      s.saved += gi * D.Tg * D.X;             // the experts' gathered input rows
      s.saved += (act + gi) * D.Tg * D.ef;    // activation input; experts_down's input
      // Megatron-Core scales the experts' activation by the router weights and keeps them
      // (fp32, a value a row), not the experts' outputs (saved_activations in cost_model.cpp
      // gives the sources).
      s.saved += 4 * D.Tg;
      s.weight_grad += e * D.Hs + gi * D.Tg * (D.X + D.ef);
      // A latent MoE's projections: fc2_latent_proj's input, fc1_latent_proj's FP8 input.
      s.saved += latent_saved(D, st);
      s.weight_grad += latent_saved(D, st);
      if (x.shared_ffn > 0) {
        s.saved += (act + gi) * D.T * D.sf;
        // Under FP8 the shared expert's fc1 keeps its FP8 input beside the router's bf16 one.
        if (fp8) s.saved += gi * D.T * D.h;
        s.weight_grad += gi * D.T * D.sf;
      }
      break;
    }
  }
  return s;
}

/// The parameters one device holds of a block: its tp share (the router replicated, the
/// local experts at their etp share), and of them the routed experts' and what a token
/// runs through.
void block_params(LayerCost& c, HybridKind kind, const LayerDims& D, const MambaDims& M,
                  const GdnDims& G, const ModelShape& m) {
  double params = D.h;  // the pre-norm's scale
  double active = 0, expert = 0;
  switch (kind) {
    case HybridKind::mamba:
      params +=
          D.h * M.in_cols + M.channels * (M.kernel + 1) + 3 * M.heads + M.inner + M.inner * D.h;
      break;
    case HybridKind::gdn:
      params +=
          D.h * G.in_cols + G.channels * G.kernel + 2 * G.value_heads + G.dv + G.value_dim * D.h;
      break;
    case HybridKind::attention:
      params += attention_weights(D, m);
      break;
    case HybridKind::mlp:
      params += (D.in_factor + 1) * D.h * D.f;
      break;
    case HybridKind::moe: {
      const MoeShape& x = m.moe;
      params += D.h * D.E + (x.router_bias ? D.E : 0.0) + (x.router_score_bias ? D.E : 0.0);
      params += (D.in_factor + 1) * D.h * D.sf + (x.shared_gate ? D.h : 0.0);
      params += 2 * D.h * D.L;  // a latent MoE's fc1_latent_proj and fc2_latent_proj
      const double one =
          (D.in_factor + 1) * D.X * D.ef + (x.expert_bias ? D.in_factor * D.ef + D.X : 0.0);
      expert = D.local_experts * one;
      active = D.top_k * one;
      break;
    }
  }
  c.expert_param_count = static_cast<std::int64_t>(std::llround(expert));
  c.param_count = static_cast<std::int64_t>(std::llround(params)) + c.expert_param_count;
  c.active_param_count = static_cast<std::int64_t>(std::llround(params + active));
}

const char* kind_name(HybridKind kind) {
  switch (kind) {
    case HybridKind::mamba:
      return "mamba";
    case HybridKind::attention:
      return "attention";
    case HybridKind::mlp:
      return "mlp";
    case HybridKind::moe:
      return "moe";
    case HybridKind::gdn:
      return "gdn";
  }
  return "layer";
}

LayerCost hybrid_impl(const ModelShape& m, const HardwareSpec& hw, const CostSettings& st,
                      HybridKind kind) {
  Builder b(hw, st, m.architecture, kind_name(kind));
  const LayerDims D = layer_dims(m, st);
  const MambaDims M = mamba_dims(m, st);
  const GdnDims G = gdn_dims(m, st);
  std::size_t last_saving_op = 0;
  switch (kind) {
    case HybridKind::mamba:
      mamba_block(b, D, M, st);
      break;
    case HybridKind::gdn:
      gdn_block(b, D, G, st);
      break;
    case HybridKind::attention:
      attention_block(b, D, m, hw, st);
      if (st.tp_comm_overlap && st.sequence_parallel) {
        b.overlap_tp("qkv_all_gather", "qkv_proj", true);
        b.overlap_tp("out_reduce_scatter", "out_proj", false);
      }
      break;
    case HybridKind::mlp:
    case HybridKind::moe:
      last_saving_op = mlp_block(b, D, m, hw, st, kind == HybridKind::moe);
      break;
  }
  LayerCost& c = b.cost();
  mark_recompute(c, D, st, last_saving_op);
  const BlockSaved s = block_saved(kind, D, M, G, m, st);
  c.activation_bytes[Recompute::none] = to_bytes(s.saved + s.core_only);
  const MlpKind mlp = kind == HybridKind::moe   ? MlpKind::moe
                      : kind == HybridKind::mlp ? MlpKind::dense
                                                : MlpKind::none;
  c.activation_bytes[Recompute::selective] =
      to_bytes(s.saved + s.core_only - modules_freed(D, m, st, mlp, s.core_only));
  c.activation_bytes[Recompute::full] = to_bytes(D.e * D.Hs);  // only the block's input
  c.weight_grad_bytes[Recompute::none] =
      std::min(c.activation_bytes[Recompute::none], to_bytes(s.weight_grad));
  c.weight_grad_bytes[Recompute::selective] =
      std::min(c.activation_bytes[Recompute::selective], c.weight_grad_bytes[Recompute::none]);
  c.weight_grad_bytes[Recompute::full] = c.activation_bytes[Recompute::full];
  // (recompute_flops[selective]: mark_recompute's sum over the re-run sub-ops.)
  c.recompute_flops[Recompute::full] = c.forward_flops;
  c.output_bytes = to_bytes(stage_output_bytes(m.architecture, st, D.e * D.Hn));
  block_params(c, kind, D, M, G, m);
  return c;
}

}  // namespace

LayerCost hybrid_layer_cost(const ModelShape& m, const HardwareSpec& hw, const CostSettings& st,
                            HybridKind kind) {
  if (m.architecture != Architecture::llama || eager_kernels(m.architecture, st))
    throw ShapeError(
        "hybrid layers are costed as Megatron-Core runs them: llama architecture with fused "
        "kernels (training.kernels: fused)");
  if (kind == HybridKind::moe && !m.is_moe())
    throw ShapeError("an E layer needs a mixture of experts (model.moe)");
  LayerCost c = hybrid_impl(m, hw, st, kind);
  if (hw.host_launch_us > 0) {
    HardwareSpec quiet = hw;
    quiet.kernel_launch_us = 0;
    add_host_bound(c, hybrid_impl(m, quiet, st, kind), hw);
  }
  add_param_sharding_comm(c, hw, st);
  return c;
}

}  // namespace bmpipe
