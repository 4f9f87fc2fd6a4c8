#pragma once
/// \file
/// The parts the cost model builds a layer from (cost_model.cpp's transformer layers,
/// hybrid_layers.cpp's Mamba-2 and single-block layers): the sub-op accumulator (Builder),
/// the traffic of the memory-bound kernels, the dimensions of one layer on one device
/// (LayerDims) and the blocks. Internal to sim/cost: nothing outside it includes this.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "sim/cost/cost_model.hpp"
#include "sim/cost/kernels.hpp"

namespace bmpipe::layer_parts {

/// Whether `arch`'s layers run HF's eager kernels (CostSettings::kernels): llama-style ones
/// unless the kernels are fused; gpt-style ones never (Megatron-LM's fused kernels).
inline bool eager_kernels(Architecture arch, const CostSettings& st) {
  return arch == Architecture::llama && st.kernels == Kernels::eager;
}

/// Accumulates sub-ops into a LayerCost.
class Builder {
 public:
  Builder(const HardwareSpec& hw, const CostSettings& st, Architecture arch, std::string name)
      : hw_(hw), st_(st) {
    cost_.name = std::move(name);
    peak_ = hw.peak_tflops * 1e12;
    const bool fp4 = st.fp8_recipe == Fp8Recipe::nvfp4;
    const double rowwise = st.fp8_recipe == Fp8Recipe::rowwise ? hw.fp8_rowwise_scale : 1.0;
    fp8_peak_ = fp4 ? hw.fp4_peak_tflops * 1e12 * hw.fp4_matmul_scale
                    : hw.fp8_peak_tflops * 1e12 * hw.fp8_matmul_scale * rowwise;
    lp_bytes_ = low_precision_bytes(st.fp8_recipe);
    lp_speed_ =
        hw.peak_tflops > 0 ? (fp4 ? hw.fp4_peak_tflops : hw.fp8_peak_tflops) / hw.peak_tflops : 1.0;
    fp8_ = st.fp8 != Fp8::none;
    bw_ = hw.hbm_GBps * 1e9 * hw.memory_efficiency;
    launch_ = hw.kernel_launch_us * 1e-6;
    accumulation_ = st.grad_accumulation.value_or(
        eager_kernels(arch, st) ? GradAccumulation::add : GradAccumulation::fused);
  }

  /// Bytes an element of a low-precision GEMM operand takes, its scale factors included:
  /// FP8 with one scale a tensor (delayed, tensorwise) 1; blockwise 1 + 4/128 (an fp32 scale
  /// per 128 values, DeepSeek-V3's 1 x 128 tiles); MXFP8 1 + 1/32 (an E8M0 scale per 32, the
  /// OCP MX format); NVFP4 0.5 + 1/16 (E2M1 values, an E4M3 scale per 16).
  static double low_precision_bytes(Fp8Recipe recipe) {
    switch (recipe) {
      case Fp8Recipe::blockwise:
        return 1.0 + 4.0 / 128.0;
      case Fp8Recipe::mxfp8:
        return 1.0 + 1.0 / 32.0;
      case Fp8Recipe::nvfp4:
        return 0.5 + 1.0 / 16.0;
      default:
        return 1.0;
    }
  }

  /// Roofline of one kernel.
  double roof(double flops, double bytes, double efficiency) const {
    return std::max(flops / (peak_ * efficiency), bytes / bw_);
  }
  double memory(double bytes) const { return bytes / bw_; }
  /// Roofline of an FP8 GEMM: the FP8 peak x the GEMM's efficiency (the bf16 fraction of
  /// peak, carried over: no FP8 layer has been measured here).
  double fp8_roof(double flops, double bytes, double efficiency) const {
    return std::max(flops / (fp8_peak_ * efficiency), bytes / bw_);
  }
  /// Turns FP8 off for the GEMMs that follow (Megatron keeps the output layer in bf16)
  /// and back on.
  void fp8_gemms(bool on) { fp8_ = on && st_.fp8 != Fp8::none; }
  /// One `linear` in the run's dtype whatever its FP8: a GEMM that is not a Transformer
  /// Engine module (Megatron's router, MLA's absorbed einsums).
  void bf16_linear(const std::string& name, double m, double k, double n) {
    const bool fp8 = fp8_;
    fp8_ = false;
    linear(name, m, k, n);
    fp8_ = fp8;
  }
  /// The memory-bound cast of `elements` bf16 values to FP8 (read dtype bytes, write
  /// lp_bytes_) with its scale; tensorwise and rowwise (current) scaling and NVFP4 (whose
  /// per-tensor fp32 scale is a current amax) first read the tensor once more for its amax,
  /// the other recipes find it inside the cast kernel.
  double fp8_cast(double elements) const {
    const bool amax_pass = st_.fp8_recipe == Fp8Recipe::tensorwise ||
                           st_.fp8_recipe == Fp8Recipe::nvfp4 ||
                           st_.fp8_recipe == Fp8Recipe::rowwise;
    const double per_element = st_.dtype_bytes + lp_bytes_ + (amax_pass ? st_.dtype_bytes : 0.0);
    return memory(per_element * elements) + launches(amax_pass ? 2 : 1);
  }
  /// The casts a low-precision GEMM `gemm` takes per micro-batch, as the sub-op
  /// "<gemm>_cast" added just before it: its forward input (`f_elements`) and, in the
  /// input-grad, its output gradient (`i_elements`); the weight-grad reuses both, but under
  /// rowwise scaling, whose scales run along each GEMM's reduction, it casts both again
  /// along the tokens (torchao's Float8Linear: grad_weight = to_fp8(x.t()) @ to_fp8(dy),
  /// each scaled along its rows).
  void casts(const std::string& gemm, double f_elements, double i_elements) {
    const double w =
        st_.fp8_recipe == Fp8Recipe::rowwise ? fp8_cast(f_elements) + fp8_cast(i_elements) : 0.0;
    add(gemm + "_cast", fp8_cast(f_elements), fp8_cast(i_elements), w, KernelClass::cast);
  }
  /// `n` kernel launches of the sub-op being added: none under a CUDA graph that captures
  /// the current scope (set_scope).
  double launches(int n) const { return captured(st_.cuda_graphs, scope_) ? 0.0 : n * launch_; }
  /// The CUDA-graph scope of the sub-ops added next.
  void set_scope(GraphScope scope) { scope_ = scope; }
  /// The recompute modules that re-run the sub-ops added next (SubOpCost::modules).
  void set_modules(RecomputeModules modules) { modules_ = modules; }
  /// Counts `flops` forward FLOPs to the layer and to the sub-op added last.
  void count_flops(double flops) {
    cost_.forward_flops += flops;
    cost_.ops.back().forward_flops += flops;
  }

  /// The shape factors (gemm_shape_efficiency) of a GEMM's three passes: forward
  /// [m x k] x [k x n], input-grad [m x n] x [n x k], weight-grad [k x m] x [m x n] (each of
  /// `groups` GEMMs holding m / groups rows, and in the weight-grad reducing them). 1 on a
  /// device without a shape model.
  struct PassShapes {
    double f = 1, i = 1, w = 1;
  };
  PassShapes shapes(double m, double k, double n, double groups, bool low_precision) const {
    if (hw_.sm_count <= 0) return {};
    const double speed = low_precision ? lp_speed_ : 1.0;
    return {gemm_shape_efficiency(hw_, m, n, k, groups, speed),
            gemm_shape_efficiency(hw_, m, k, n, groups, speed),
            gemm_shape_efficiency(hw_, k * groups, n, m / groups, groups, speed)};
  }

  /// `count` GEMMs [m x k] x [k x n] (n summed over them) in forward, input-grad and
  /// weight-grad. `grad_adds`: extra kernels summing the input-grads of GEMMs that share
  /// one input (HF's separate q, k, v and gate, up projections).
  void linear(const std::string& name, double m, double k, double n, int count = 1,
              int grad_adds = 0) {
    if (fp8_) return fp8_linear(name, m, k, n, count, grad_adds);
    const double e = st_.dtype_bytes, g = st_.grad_bytes, flops = 2 * m * k * n;
    const double bytes = e * (m * k + k * n + m * n);
    const PassShapes s = shapes(m, k, n, 1, false);
    const double f = roof(flops, bytes, hw_.matmul_efficiency * s.f) + launches(count);
    const double i = roof(flops, bytes, hw_.matmul_backward_efficiency * s.i) + launches(count) +
                     grad_adds * (memory(3 * e * m * k) + launches(1));
    // The weight-grad GEMM writes its k x n gradient: fused, as a read-add-write of the
    // buffer inside the GEMM; otherwise as a fresh tensor, then added by its own kernel.
    const double we = hw_.weight_grad_efficiency() * s.w;
    double w = 0;
    if (accumulation_ == GradAccumulation::fused)
      w = roof(flops, e * (m * k + m * n) + 2 * g * k * n, we) + launches(count);
    else
      w = roof(flops, bytes, we) + launches(count) + accumulate(k * n, count);
    add(name, f, i, w, KernelClass::gemm);
    count_flops(flops);
  }

  /// linear() with FP8 operands (TransformerEngine's fp8_autocast): each GEMM reads its two
  /// inputs as one byte an element and writes a dtype output, at the FP8 peak. Casts, per
  /// micro-batch: the forward's input X (m x k) and the input-grad's output gradient dY
  /// (m x n); the weight-grad GEMM reuses both (its transposes come out of the same
  /// cast-transpose kernels). The FP8 weights are cast once an iteration (TE caches them
  /// from the first micro-batch, Megatron passing is_first_microbatch), so not here; they
  /// are held beside the bf16 ones (LayerCost::fp8_weight_bytes).
  void fp8_linear(const std::string& name, double m, double k, double n, int count, int grad_adds) {
    const double e = st_.dtype_bytes, g = st_.grad_bytes, flops = 2 * m * k * n;
    const double l = lp_bytes_;
    const PassShapes s = shapes(m, k, n, 1, true);
    casts(name, m * k, m * n);
    const double f = fp8_roof(flops, l * (m * k + k * n) + e * m * n, hw_.matmul_efficiency * s.f) +
                     launches(count);
    const double i =
        fp8_roof(flops, l * (m * n + k * n) + e * m * k, hw_.matmul_backward_efficiency * s.i) +
        launches(count) + grad_adds * (memory(3 * e * m * k) + launches(1));
    const double we = hw_.weight_grad_efficiency() * s.w;
    double w = 0;
    if (accumulation_ == GradAccumulation::fused)
      w = fp8_roof(flops, l * (m * k + m * n) + 2 * g * k * n, we) + launches(count);
    else
      w = fp8_roof(flops, l * (m * k + m * n) + e * k * n, we) + launches(count) +
          accumulate(k * n, count);
    add(name, f, i, w, KernelClass::gemm);
    count_flops(flops);
    cost_.fp8_weight_bytes += l * k * n;
    cost_.fp8_gemm_params += k * n;
  }

  /// A grouped GEMM over `groups` experts (Megatron-Core's GroupedMLP / TE GroupedLinear):
  /// `m` tokens in all (the rows the time is set by), each group's own [k x n] weight
  /// read once; one kernel per pass. Model FLOPs count `flop_m` tokens (balanced load).
  void grouped(const std::string& name, double m, double k, double n, double groups,
               double flop_m) {
    const double e = st_.dtype_bytes, g = st_.grad_bytes, flops = 2 * m * k * n;
    const double weights = groups * k * n;
    if (fp8_) {  // as fp8_linear, over the groups' weights
      const double l = lp_bytes_;
      const PassShapes s = shapes(m, k, n, groups, true);
      casts(name, m * k, m * n);
      const double f =
          fp8_roof(flops, l * (m * k + weights) + e * m * n, hw_.matmul_efficiency * s.f) +
          launches(1);
      const double i =
          fp8_roof(flops, l * (m * n + weights) + e * m * k, hw_.matmul_backward_efficiency * s.i) +
          launches(1);
      const double we = hw_.weight_grad_efficiency() * s.w;
      double w = 0;
      if (accumulation_ == GradAccumulation::fused)
        w = fp8_roof(flops, l * (m * k + m * n) + 2 * g * weights, we) + launches(1);
      else
        w = fp8_roof(flops, l * (m * k + m * n) + e * weights, we) + launches(1) +
            accumulate(weights, static_cast<int>(groups));
      add(name, f, i, w, KernelClass::grouped_gemm);
      count_flops(2 * flop_m * k * n);
      cost_.fp8_weight_bytes += l * weights;
      cost_.fp8_gemm_params += weights;
      return;
    }
    const double bytes = e * (m * k + weights + m * n);
    const PassShapes s = shapes(m, k, n, groups, false);
    const double f = roof(flops, bytes, hw_.matmul_efficiency * s.f) + launches(1);
    const double i = roof(flops, bytes, hw_.matmul_backward_efficiency * s.i) + launches(1);
    const double we = hw_.weight_grad_efficiency() * s.w;
    double w = 0;
    if (accumulation_ == GradAccumulation::fused)
      w = roof(flops, e * (m * k + m * n) + 2 * g * weights, we) + launches(1);
    else
      w = roof(flops, bytes, we) + launches(1) + accumulate(weights, static_cast<int>(groups));
    add(name, f, i, w, KernelClass::grouped_gemm);
    count_flops(2 * flop_m * k * n);
  }

  /// Adding `params` fresh gradients into the buffer with one kernel per tensor: read the
  /// buffer (grad_bytes) and the gradient (dtype), write the buffer. Norm scales, biases
  /// and embeddings take this path even under `fused` (only GEMMs fuse it).
  double accumulate(double params, int tensors) const {
    if (accumulation_ == GradAccumulation::overwrite || params <= 0) return 0.0;
    return memory((2.0 * st_.grad_bytes + st_.dtype_bytes) * params) + launches(tensors);
  }

  /// A memory-bound sub-op: bytes moved and kernels launched per pass; `w_params` in
  /// `w_tensors` tensors (norm scales, biases) get their gradients accumulated.
  void elementwise(const std::string& name, double f_bytes, double i_bytes, double w_bytes,
                   int f_kernels, int i_kernels, int w_kernels, double w_params = 0,
                   int w_tensors = 0) {
    const bool gather = name == "permute" || name == "unpermute";
    add(name, f_bytes > 0 ? memory(f_bytes) + launches(f_kernels) : 0.0,
        i_bytes > 0 ? memory(i_bytes) + launches(i_kernels) : 0.0,
        (w_bytes > 0 ? memory(w_bytes) + launches(w_kernels) : 0.0) +
            accumulate(w_params, w_tensors),
        gather ? KernelClass::permute : KernelClass::memory);
  }

  /// A sub-op of class `kind` (a collective unless said: the adds outside linear, grouped
  /// and elementwise are the exchanges, and attention, which says so).
  void add(const std::string& name, double f, double i, double w,
           KernelClass kind = KernelClass::collective) {
    cost_.ops.push_back({name, f, i, w, {}, kind, modules_});
    cost_.forward_s += f;
    cost_.backward_input_s += i;
    cost_.backward_weight_s += w;
  }

  /// A collective in forward and its mirror in the input-grad.
  void tp_collective(const std::string& name, Collective fwd, Collective bwd, double bytes) {
    const auto t = [&](Collective c) {
      return collective_time_s(hw_, c, st_.tp, bytes, st_.tp_crosses_nodes);
    };
    if (st_.tp > 1) add(name, t(fwd), t(bwd), 0.0);
  }

  /// TransformerEngine's userbuffer overlap (CostSettings::tp_comm_overlap) of the
  /// sequence-parallel collective `comm` with the GEMM `gemm` beside it, as Megatron-Core
  /// sets it up for a transformer layer (NeMo's userbuffers configs, NVIDIA/NeMo
  /// nemo/collections/llm/recipes/tp_overlap_configs/userbuffers.py @0594a70: qkv and fc1
  /// forward by ring exchange, proj and fc2 forward pipelined or by ring exchange, proj
  /// and fc2 dgrad by ring exchange, qkv and fc1 backward in bulk; read, not copied).
  ///
  /// Pipelined (a ring exchange or a split pipeline): the GEMM runs in t chunks and the
  /// collective's t - 1 steps, C / (t - 1) each, run beside t - 1 of them, so the pair
  /// takes G / t + (t - 1) max(G / t, C / (t - 1)) = max(G, G / t + C) and the
  /// collective leaves max(0, C - G (t - 1) / t) exposed. That covers the all-gather
  /// before a column-parallel GEMM (`gathers`: qkv, fc1) and the reduce-scatter after a
  /// row-parallel one (proj, fc2) in the forward, and the latter's mirror, the all-gather
  /// of the output gradient, under the input-grad GEMM. Bulk: the column-parallel GEMM's
  /// backward reduce-scatter of the input gradient runs whole beside the weight-grad GEMM,
  /// so max(0, C - G_w) stays. The SMs a pipelined overlap takes from the GEMM (NeMo's
  /// num_sm, 16 to 32 of an H100's 132) are not charged.
  void overlap_tp(const std::string& comm, const std::string& gemm, bool gathers) {
    const auto find = [&](const std::string& name) -> SubOpCost* {
      for (SubOpCost& op : cost_.ops)
        if (op.name == name) return &op;
      return nullptr;
    };
    SubOpCost* c = find(comm);
    const SubOpCost* g = find(gemm);
    if (st_.tp <= 1 || c == nullptr || g == nullptr) return;
    // An FP8 GEMM's casts (its "_cast" sub-op) run in the same chunked pipeline.
    const SubOpCost* cast = find(gemm + "_cast");
    const double g_f = g->forward_s + (cast ? cast->forward_s : 0.0);
    const double g_i = g->backward_input_s + (cast ? cast->backward_input_s : 0.0);
    const double hidden = (st_.tp - 1.0) / st_.tp;
    const double f = std::max(0.0, c->forward_s - hidden * g_f);
    const double i = gathers ? std::max(0.0, c->backward_input_s - g->backward_weight_s)
                             : std::max(0.0, c->backward_input_s - hidden * g_i);
    cost_.forward_s += f - c->forward_s;
    cost_.backward_input_s += i - c->backward_input_s;
    c->forward_s = f;
    c->backward_input_s = i;
  }

  LayerCost& cost() { return cost_; }
  const HardwareSpec& hardware() const { return hw_; }

 private:
  const HardwareSpec& hw_;
  const CostSettings& st_;
  LayerCost cost_;
  double peak_ = 0, fp8_peak_ = 0, bw_ = 0, launch_ = 0;
  double lp_bytes_ = 1.0;  ///< low_precision_bytes of the recipe
  double lp_speed_ = 1.0;  ///< the recipe's peak over the bf16 peak
  GraphScope scope_ = GraphScope::other;
  RecomputeModules modules_ = 0;
  bool fp8_ = false;
  GradAccumulation accumulation_ = GradAccumulation::add;
};

inline std::int64_t to_bytes(double v) {
  return static_cast<std::int64_t>(std::llround(v));
}

/// One norm's HBM traffic per element of its input (bytes: reads + writes) and its kernel
/// launches, forward / input-grad / weight-grad. Eager (HF's RMSNorm): cast to fp32, pow,
/// mean, rsqrt-mul, cast back, scale: six kernels forward, about ten backward. Fused
/// (Megatron's LayerNorm, TransformerEngine's RMSNorm): one kernel each way that reads the
/// input (and the gradient) once and writes its output.
struct NormTraffic {
  double f, i, w;
  int kf, ki, kw;
};
inline NormTraffic norm_traffic(bool eager, double e) {
  if (eager) return {18 * e, 36 * e, 4 * e, 6, 10, 2};
  return {2 * e, 3 * e, 2 * e, 1, 1, 1};
}

/// What one RMSNorm keeps for backward per element of its input, beyond its per-token
/// fp32 rsqrt: eager, the fp32 copy of the input and the bf16 normalized tensor; fused
/// (TransformerEngine), the input alone.
inline double rms_norm_saved(bool eager, double e) {
  return eager ? 4 + e : e;
}

/// SwiGLU's HBM traffic per element of its output, forward / input-grad, and its launches.
/// Eager: silu (read, write) and mul (two reads, a write) forward; mul and silu backward.
/// Fused (Megatron's bias_swiglu): one kernel reads gate and up and writes the product;
/// backward reads the gradient and both inputs and writes both gradients.
struct SwigluTraffic {
  double f, i;
  int kf, ki;
};
inline SwigluTraffic swiglu_traffic(bool eager, double e) {
  if (eager) return {5 * e, 9 * e, 2, 4};
  return {3 * e, 5 * e, 1, 1};
}

/// The dimensions of one decoder layer on one device, which its parts (decoder_impl) build
/// their sub-ops from, named as the parts use them.
struct LayerDims {
  bool llama = false, eager = false, is_mla = false;
  double e = 0, t = 0;
  // s: the whole sequence (the keys a query may see); sl: this rank's share of it under
  // context parallelism (CostSettings::cp), whose tokens T every per-token cost runs on.
  double s = 0, mb = 0, cp = 0, sl = 0, T = 0;
  double h = 0, d = 0, heads = 0, kv_heads = 0, q_cols = 0, kv_cols = 0, f = 0;
  double Hn = 0;  // full hidden tensor
  double Hs = 0;  // replicated-region share
  double F = 0;   // MLP intermediate
  double S2 = 0;  // score-matrix elements
  // This layer's sliding window in tokens (0: full causal attention); decoder_impl sets it
  // for the layers ModelShape::is_windowed_layer names.
  double window = 0;
  // Per-element HBM traffic of memory-bound sub-ops (reads + writes, bytes), forward /
  // input-grad / weight-grad (NormTraffic). gpt's LayerNorm and activations are
  // Megatron's fused kernels; llama's are HF's eager ones unless the kernels are fused.
  NormTraffic norm{};
  SwigluTraffic glu{};   // the MLP's activation: SwiGLU, or squared ReLU when relu2
  bool relu2 = false;    // ModelShape::mlp_activation is relu2 (no gate)
  double in_factor = 2;  // the first MLP GEMM's columns per intermediate column
  int norm_tensors = 1;  // RMSNorm: a scale; LayerNorm: scale and bias
  // Multi-latent attention (DeepSeek-V2/V3): the shape of one device's share; Ts_att: the
  // tokens before the sequence-parallel gather.
  double ql = 0, kvl = 0, qk = 0, dr = 0, dv = 0, Ts_att = 0;
  double o_cols = 0;  // the output projection's input
  // The MLA core's tensors a token, as its kernel sees them: q's columns, k's and v's
  // together, the output's, and a head's q/k and v widths. Absorbed (Megatron-Core's
  // AbsorbedMLASelfAttention, which DSA runs): MQA over the latent, q' heads x (kvl + dr)
  // against one shared k = [latent, k_pe] of kvl + dr whose first kvl columns are v, the
  // output heads x kvl; otherwise q heads x qk, k heads x qk, v heads x dv, output heads x dv.
  bool absorbed = false;
  double core_q = 0, core_kv = 0, core_out = 0, core_qk = 0, core_dv = 0;
  // DeepSeek sparse attention (ModelShape::dsa; dsa_indexer in cost_model.cpp): the
  // indexer's heads Hi of width di, the keys a query keeps kk = min(index_topk, s), the share
  // of the causal pairs the sparse core keeps, and whether the indexer trains (its KL loss).
  bool dsa = false, dsa_loss = false;
  double Hi = 0, di = 0, kk = 0, dsa_share = 1;
  // The residual adds (gpt: fused bias-dropout-add, which also writes a 1-byte mask; its
  // weight-grad is the bias gradient of the projection before it).
  double add_f = 0, add_bias = 0;
  // The mixture-of-experts MLP (moe_decoder_layer_cost's comment): on the tokens this
  // device holds at the MLP (T / tp with sequence parallelism). Tk: rows a device
  // dispatches, balanced; Tmax: rows the busiest device receives over ep; Tg: the rows its
  // experts run, etp x Tmax once the etp group has all-gathered them (the etp collectives),
  // at ef = expert_ffn / etp columns.
  double Tm = 0, E = 0, top_k = 0, local_experts = 0, ef = 0, Tk = 0, Tmax = 0, etp = 0, Tg = 0;
  double sf = 0;  // the shared expert's columns on this device
  // A latent MoE (MoeShape::latent_size): L its width (0: none); X the width the routed
  // rows are permuted, dispatched, gathered and run in (L, or h without a latent).
  double L = 0, X = 0;
};

/// Bytes one device sends to the next stage for a hidden-state tensor of `full_bytes`
/// (cost_model.cpp says why).
double stage_output_bytes(Architecture arch, const CostSettings& st, double full_bytes);
/// The context-parallel exchanges of one layer's attention (cost_model.cpp).
void cp_exchange(Builder& b, const HardwareSpec& hw, const CostSettings& st, double tokens,
                 double attention_f, double attention_b, double kv_cols, double qkv_cols,
                 double out_cols);
LayerDims layer_dims(const ModelShape& m, const CostSettings& st);
/// The attention block's sub-ops, the input norm to the first residual add; returns the
/// attention core's forward FLOPs (what selective recompute re-runs).
double attention_block(Builder& b, const LayerDims& D, const ModelShape& m, const HardwareSpec& hw,
                       const CostSettings& st);
/// DeepSeek sparse attention's lightning indexer (ModelShape::dsa), its sub-ops added before
/// the attention core.
void dsa_indexer(Builder& b, const LayerDims& D, const HardwareSpec& hw, const CostSettings& st);
/// What the indexer keeps for backward (bytes; 0 without DSA): the core attention module's,
/// so recompute's core_attn frees it (cost_model.cpp, dsa_indexer).
double dsa_saved(const LayerDims& D, const CostSettings& st);
/// The MLP block's sub-ops (dense or mixture of experts), the post-attention norm to the
/// second residual add; returns the index of the block's last sub-op that saves a tensor for
/// backward. `overlap`: pair the transformer layer's tp collectives with their GEMMs
/// (CostSettings::tp_comm_overlap) at its end.
std::size_t mlp_block(Builder& b, const LayerDims& D, const ModelShape& m, const HardwareSpec& hw,
                      const CostSettings& st, bool moe_mlp);
/// The weights one device holds of a (not multi-latent) attention block, its norm aside: q, k,
/// v and output projections at this device's heads, their biases, q/k norms, sinks and an
/// output gate, as ModelShape::attention_params counts them for the whole model.
double attention_weights(const LayerDims& D, const ModelShape& m);
/// Each recompute mode's re-run forward, per sub-op and summed (LayerCost::recompute_extra_s).
void mark_recompute(LayerCost& c, const LayerDims& D, const CostSettings& st,
                    std::size_t last_saving_op);

/// What a latent MoE's two projections keep for backward, and the weight-grad needs (bytes,
/// 0 without a latent): fc2_latent_proj's input gi Tm L, and under FP8 fc1_latent_proj's FP8
/// input gi Hs (in bf16 it reads the router's saved input), gi the GEMM input's bytes.
double latent_saved(const LayerDims& D, const CostSettings& st);
/// The MLP a block holds: none (an attention, Mamba or Gated DeltaNet block), a dense MLP
/// or a mixture of experts.
enum class MlpKind { none, dense, moe };
/// The saved bytes (of recompute none's) the selective mode's recompute modules
/// (CostSettings::recompute_modules) free in a block with an attention block (`D`, when the
/// block has one: `core_only` is its core's own bytes) and an MLP of kind `mlp`:
///   core_attn       core_only
///   layernorm       MoE: the pre-MLP norm's output e Hs (+ the shared expert fc1's FP8
///                   input, gi T h); MLA: the input norm's output gi Hs
///   mla_up_proj     gi T (q_lat + kv_lat) + 4 Ts_att x norms + e T heads (2 qk + dv)
///                   - e Ts_att rope_dim (the up projections' inputs, the norms' rstd, q,
///                   k, v; less k_pe, which the checkpoint keeps)
///   mlp             dense: 4 Ts + gi Hs + (act + gi) F (gpt: 8 Ts + gi Hs + (e + gi) F)
///   moe             4 Tm E + 12 Tk + gi Tg X + (act + gi) Tg ef + 4 Tg + shared (the
///                   router weights the scaled activation keeps; eager: e Tmax h, the
///                   experts' outputs) + latent (gi Tm L, fc2_latent_proj's input, and under
///                   FP8 gi Hs, fc1_latent_proj's FP8 input), X the routed width
///   moe_act         gi Tg ef (experts_down's input)
///   shared_experts  (act + gi) T sf (+ gi T h under FP8)
/// with gi the GEMM input's bytes an element (low_precision_bytes under FP8, else e) and
/// act the activation's saved bytes an element (SwiGLU 2 e, eager 3 e; squared ReLU e).
/// moe frees what moe_act and shared_experts would, so those add nothing beside it.
double modules_freed(const LayerDims& D, const ModelShape& m, const CostSettings& st, MlpKind mlp,
                     double core_only);
/// `c` with what the host adds when it cannot issue the layer's kernels as fast as the GPU
/// runs them (cost_model.cpp).
void add_host_bound(LayerCost& c, const LayerCost& quiet, const HardwareSpec& hw);

}  // namespace bmpipe::layer_parts
