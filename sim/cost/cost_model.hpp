#pragma once
/// \file
/// The analytic cost model: per-layer forward, input-grad (I) and weight-grad (W) time,
/// activation bytes per recompute mode and parameter counts, from a model shape, a
/// hardware spec and the parallel layout, for one micro-batch on one device.
///
/// How it is built (bottom-up, as a roofline model):
/// - A layer is a list of sub-ops (QKV and output projections, attention core, norms,
///   RoPE, MLP, activations, residual adds, dropout) with FLOPs and HBM bytes for each of
///   forward, input-grad and weight-grad. A sub-op takes
///     max(FLOPs / (peak * efficiency), bytes / (HBM bandwidth * memory_efficiency)),
///   with the GEMM efficiency for projections, the attention efficiencies for a fused
///   attention core.
/// - Weight-grad also accumulates every weight's gradient into the gradient buffer
///   (GradAccumulation): bytes in proportion to the parameters, not the tokens.
/// - Recompute re-runs sub-ops' forward in the backward: selective the attention core, full
///   the forward up to the layer's last saved tensor (see LayerCost::recompute_extra_s).
/// - Tensor parallelism (tp) splits heads, the MLP and the vocabulary, and adds per layer
///   two all-reduces in forward and two in backward, or with sequence parallelism an
///   all-gather plus a reduce-scatter in their place (same bytes) and norms, dropout and
///   residuals sharded over the sequence.
/// - Activation bytes follow what autograd saves (Korthikanti et al. 2022, "Reducing
///   Activation Recomputation in Large Transformer Models", sec. 4): for a gpt layer
///   without flash attention sbh(34 + 5as/h) at tp 1; selective recompute drops the
///   attention core's s x s tensors; full recompute keeps the layer input, 2sbh.
/// - Llama layers follow HF transformers' LlamaDecoderLayer (what the H200 profile
///   measured): the unfused RMSNorm keeps an fp32 copy of its input, the layer input is
///   counted as kept, SDPA keeps q, k, v, output and logsumexp.
///
/// All times are seconds; the engine rounds them to ns in one place (sim/time.hpp).

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/cost/collectives.hpp"
#include "sim/cost/hardware.hpp"
#include "sim/cost/model_shape.hpp"
#include "sim/offload.hpp"
#include "sim/recompute.hpp"

namespace bmpipe {

/// How one micro-batch's weight gradients reach the gradient buffer. Each weight-grad
/// GEMM writes a fresh gradient; what follows moves bytes in proportion to the
/// parameters, not the tokens, so it weighs most on short sequences of wide layers.
enum class GradAccumulation {
  /// The GEMM's output becomes the gradient (an empty buffer: PyTorch's first backward
  /// after zero_grad(set_to_none=True)): nothing more.
  overwrite,
  /// A separate add per weight after its GEMM (PyTorch's AccumulateGrad,
  /// `param.grad += g`; Megatron-LM's main_grad hooks without gradient-accumulation
  /// fusion): reads the buffer and the fresh gradient, writes the buffer.
  add,
  /// The GEMM's epilogue adds into the buffer (Megatron-LM's gradient-accumulation
  /// fusion, on unless --no-gradient-accumulation-fusion: a GEMM with beta = 1 into the
  /// fp32 main_grad): the buffer's read and write join the GEMM's own traffic.
  fused,
};

/// Which kernels run the memory-bound sub-ops of llama-style layers (RMSNorm, RoPE,
/// SwiGLU) and how their activation recompute runs. eager: PyTorch eager ops as HF
/// transformers runs them (the norm in six kernels through fp32, RoPE in five, SiLU and mul
/// apart; separate q/k/v and gate/up GEMMs; an early-stopping checkpoint), the kernels the
/// h200 profiles measured. fused: Megatron-Core with TransformerEngine (one RMSNorm kernel
/// each way, fused RoPE and SwiGLU, fused qkv and fc1 GEMMs, the whole layer recomputed).
/// gpt-style layers are Megatron-LM's fused kernels either way.
enum class Kernels { eager, fused };

/// FP8 GEMMs (Megatron-LM's --fp8-format): none (bf16/fp16 GEMMs), hybrid (E4M3 forward,
/// E5M2 gradients) or e4m3 (E4M3 throughout). Both are one byte an element.
enum class Fp8 { none, hybrid, e4m3 };
/// How FP8 scales are found (Megatron-LM's --fp8-recipe): delayed (amax history, the amax
/// fused into the cast), tensorwise (current scaling: an amax pass over the tensor before
/// its cast), blockwise (1 x 128 / 128 x 128 blocks, the amax fused into the cast), mxfp8
/// (32-element blocks in hardware, Blackwell only), nvfp4 (Blackwell's FP4 GEMMs: E2M1 values
/// with an E4M3 scale per 16 and an fp32 scale per tensor, TransformerEngine's
/// NVFP4BlockScaling; Megatron-LM's --fp4-format e2m1 --fp4-recipe nvfp4), rowwise
/// (torchao's float8 rowwise recipe, torchtitan's Float8LinearConverter default at
/// b5bcd76c66d0: a current scale per row of each operand along the GEMM's reduction, so the
/// weight-grad GEMM casts its two inputs again along the other axis, and torch._scaled_mm
/// with rowwise scales in place of the tensorwise kernel).
enum class Fp8Recipe { delayed, tensorwise, blockwise, mxfp8, nvfp4, rowwise };
/// How the context-parallel ranks of a layer exchange what attention needs (Megatron-LM's
/// --cp-comm-type): p2p, the ring (each rank passes its key/value block on, cp - 1 times,
/// overlapped with the attention of the block in hand); a2a, DeepSpeed-Ulysses (all-to-alls
/// before and after attention turn the sequence split into a head split); a2a_p2p, the two
/// in a hierarchy (Megatron-LM's --cp-comm-type a2a+p2p with
/// --hierarchical-context-parallel-sizes): the all-to-all inside groups of
/// CostSettings::cp_a2a consecutive cp ranks, the ring across the cp / cp_a2a groups.
enum class CpComm { p2p, a2a, a2a_p2p };

/// How a mixture-of-experts layer moves its tokens to the experts and back:
///   - alltoall: Megatron-Core's MoEAlltoAllTokenDispatcher, one all-to-all over the ep group
///     on the permuted T x top_k rows, each way (the default);
///   - deepep: DeepEP's normal kernels (Megatron-Core's flex dispatcher with the deepep
///     backend; DeepSeek-V3's own training): a token crosses the NICs once per remote node
///     that holds one of its experts, and NVLink forwards it to the experts' devices inside
///     the node, the two pipelined (deepep_time_s in cost_model.cpp).
enum class MoeDispatcher { alltoall, deepep };

struct CostSettings {
  int seq_length = 0;
  int micro_batch_size = 1;
  int tp = 1;
  bool sequence_parallel = false;
  int dtype_bytes = 2;  ///< bf16 / fp16
  /// The tp group crosses nodes (tp larger than a node): its collectives use inter_node.
  bool tp_crosses_nodes = false;
  /// TransformerEngine's userbuffer overlap of the sequence-parallel collectives with the
  /// GEMMs beside them (Megatron-LM's --tp-comm-overlap, which needs sequence_parallel):
  /// each collective costs only what its GEMM cannot hide (Builder::overlap_tp in
  /// cost_model.cpp). false: every tp collective is exposed, as without the flag.
  bool tp_comm_overlap = false;
  /// Unset: what the architecture's framework does with every micro-batch after the
  /// first -- llama (PyTorch eager) `add`, gpt and llama with fused kernels (Megatron-LM)
  /// `fused`.
  std::optional<GradAccumulation> grad_accumulation;
  /// The kernels of llama-style layers (Kernels); gpt-style layers ignore it.
  Kernels kernels = Kernels::eager;
  /// Bytes per element of the gradient buffer: 4 for an fp32 buffer (Megatron's
  /// main_grad; OptimizerSettings::grad_bytes' default), 2 for a bf16 `param.grad`.
  int grad_bytes = 4;
  /// Mixture-of-experts layers (Megatron-Core's MoE parallel folding): the experts are
  /// split over ep devices (each holds num_experts / ep of them) and each expert's
  /// matrices over etp; the tokens a device's experts receive are, balanced, the device's
  /// tokens x top_k (every device of the ep group sends as many as it receives), times etp
  /// once the etp group has all-gathered them (moe_decoder_layer_cost).
  int ep = 1;
  int etp = 1;
  /// The ep group leaves the node: its all-to-all runs over the NICs (inter_node) instead
  /// of the node's links. Megatron-Core orders expert ranks etp, then ep (RankGenerator
  /// order "tp-ep-dp-pp" with tp = etp), so an ep group spans etp x ep consecutive
  /// devices: it crosses nodes when that is more than a node holds.
  bool ep_crosses_nodes = false;
  /// The etp group (etp consecutive devices, the fastest-running expert rank) leaves the
  /// node: its all-gather and reduce-scatter around the experts run over the NICs.
  bool etp_crosses_nodes = false;
  MoeDispatcher moe_dispatcher = MoeDispatcher::alltoall;
  /// Token dropping with padding to capacity (Megatron-LM d98e8a64,
  /// megatron/core/transformer/moe/moe_utils.py get_capacity and
  /// apply_router_token_dropping with pad_to_capacity; token_dispatcher.py drop_and_pad):
  /// each of the E experts takes capacity = ceil(factor x Tm x top_k / E) rows of the Tm
  /// tokens the router sees on this device (at most Tm), padded when fewer are routed to it
  /// and dropped beyond. The permute, the all-to-alls and the expert GEMMs then run
  /// E x capacity rows instead of Tm x top_k x load_imbalance. 0: dropless.
  double moe_capacity_factor = 0.0;
  /// The embedding table and the LM head split over tp (vocab-parallel, Megatron's). false:
  /// replicated over tp (MindFormers' vocab_emb_dp): the table and the head hold the whole
  /// vocabulary on every device of the tp group, the lookup needs no tp collective, the
  /// head's GEMM runs every vocabulary column (redundantly over tp), and its backward
  /// all-gathers the logits' gradient from the loss, which stays split over tp
  /// (embedding_cost, head_cost).
  bool vocab_parallel = true;
  /// Devices of the ep group inside one scale-up domain (the group spans ep / this of
  /// them); ep when the group stays inside one. Read by the deepep dispatcher.
  int ep_per_domain = 1;
  /// FP8 GEMMs: at HardwareSpec::fp8_peak_tflops, with a cast of each GEMM input.
  Fp8 fp8 = Fp8::none;
  Fp8Recipe fp8_recipe = Fp8Recipe::delayed;
  /// The GEMM weights held in the low precision alone (Megatron-LM's --fp8-param-gather):
  /// no bf16 copy of them beside LayerCost::fp8_weight_bytes, and the all-gathers move them
  /// in it (param_gather_bytes: ZeRO-3's add_param_sharding_comm, ZeRO-1/2's after the step).
  bool fp8_param = false;
  /// ZeRO-3 / FSDP (OptimizerSettings::zero_stage 3): the parameters are sharded over the
  /// dp group (routed experts over the edp group), so every layer all-gathers them before
  /// its forward and again before its backward and reduce-scatters its gradients after its
  /// backward (add_param_sharding_comm). 1: not sharded, no such traffic.
  int param_shard_dp = 1;
  int param_shard_edp = 1;
  /// The dp group leaves the scale-up domain: those collectives run over the NICs.
  bool dp_crosses_nodes = false;
  /// Members of the dp x cp (edp) group in one scale-up domain, for the hierarchical
  /// collectives (sim/cost/collectives.hpp); 0: all of them, or one a domain when
  /// dp_crosses_nodes.
  int param_shard_dp_per_domain = 0;
  int param_shard_edp_per_domain = 0;
  /// false: the gathered parameters stay from a layer's forward to its backward, which
  /// then all-gathers nothing (FSDP2's reshard_after_forward=False, Megatron-LM's
  /// --torch-fsdp2-no-reshard-after-forward); only the reduce-scatter is left to hide.
  bool param_reshard_after_forward = true;
  /// Hybrid sharding with FSDP2's all-reduce in every micro-batch's backward: the replica
  /// groups (one rank of each copy of the shard) of dp x cp and of edp, and their members in
  /// one scale-up domain. Each layer all-reduces its reduce-scattered gradient shard over
  /// them after the reduce-scatter (add_param_sharding_comm). 1: no such all-reduce in the
  /// layers (Megatron-FSDP's, once an iteration, is the stage's end-of-iteration reduction).
  int param_replicas_dp = 1;
  int param_replicas_dp_per_domain = 1;
  int param_replicas_edp = 1;
  int param_replicas_edp_per_domain = 1;

  /// Context parallelism (Megatron-LM's --context-parallel-size): each of the cp ranks of
  /// a sequence holds seq_length / cp of its tokens, with the load-balanced causal split of
  /// Megatron / TransformerEngine (the sequence cut into 2 cp chunks, rank r holding chunks
  /// r and 2 cp - 1 - r), so every per-token cost divides by cp and each rank's causal
  /// attention is 1/cp of the whole: seq_length / cp queries against seq_length keys, half
  /// of them masked. seq_length stays the whole sequence.
  int cp = 1;
  CpComm cp_comm = CpComm::p2p;
  /// The cp group leaves the scale-up domain: its exchanges run over the NICs. Megatron
  /// orders ranks "tp-cp-ep-dp-pp", so a cp group spans tp x cp consecutive devices.
  bool cp_crosses_nodes = false;
  /// Hierarchical cp (cp_comm a2a_p2p): the ranks of the all-to-all level, the first of
  /// Megatron's --hierarchical-context-parallel-sizes (NVIDIA/Megatron-LM d98e8a64,
  /// megatron/core/parallel_state.py, create_hierarchical_groups: level 0 is cp_a2a
  /// consecutive cp ranks, level 1 one rank of each such group). The ring runs over
  /// cp / cp_a2a of them, on cp_crosses_nodes' link (its span is the cp group's).
  int cp_a2a = 1;
  /// The all-to-all level's cp_a2a ranks (tp x cp_a2a consecutive devices) leave the
  /// scale-up domain.
  bool cp_a2a_crosses_nodes = false;
  /// The cp ranks of one all-to-all (cp under a2a, cp_a2a under a2a_p2p, 1 under p2p) and
  /// of one ring (cp / that).
  int cp_a2a_ranks() const {
    return cp_comm == CpComm::a2a ? cp : cp_comm == CpComm::a2a_p2p ? cp_a2a : 1;
  }
  int cp_ring_ranks() const { return cp / cp_a2a_ranks(); }

  /// The scopes CUDA graphs capture (GraphScope bits, sim/cost/kernels.hpp; Megatron-LM's
  /// --cuda-graph-impl with --cuda-graph-scope): a captured sub-op's kernels launch from the
  /// graph and their launch cost (HardwareSpec::kernel_launch_us) is not paid. 0: none.
  std::uint8_t cuda_graphs = 0;

  /// What the selective recompute mode re-runs: Megatron-Core's recompute modules
  /// (RecomputeModule bits, sim/recompute.hpp; --recompute-modules). Each sub-op carries the
  /// modules that re-run it (SubOpCost::modules); the mode's saved bytes drop what the
  /// modules free (modules_freed, sim/cost/layer_parts.hpp). Default core_attn, as Megatron's.
  RecomputeModules recompute_modules = kDefaultRecomputeModules;

  /// Activation offload: Megatron-Core's offload modules (OffloadModule bits,
  /// sim/offload.hpp; --offload-modules). LayerCost::offload_bytes is their inputs' bytes.
  /// 0: none, the default.
  OffloadModules offload_modules = 0;

  /// Tokens of one micro-batch on this device: seq_length / cp x micro_batch_size.
  double local_tokens() const { return static_cast<double>(seq_length) / cp * micro_batch_size; }
};

/// The kernel class of a sub-op (the kernel model's unit): dense GEMMs, the experts' grouped
/// GEMMs, fused attention, memory-bound kernels (norms, activations, RoPE, residuals, router
/// softmax and top-k, optimizer-style traffic), the MoE permute and unpermute (gathers and
/// scatters), collectives and transfers (tp, cp, ep, etp, dp/FSDP), the host's share of a
/// host-bound pass, and the casts (with their amax and scale factors) a low-precision GEMM's
/// operands take, a sub-op "<gemm>_cast" beside each FP8 or NVFP4 GEMM.
enum class KernelClass : std::uint8_t {
  gemm,
  grouped_gemm,
  attention,
  memory,
  permute,
  collective,
  host,
  cast
};
/// "gemm", "grouped_gemm", "attention", "memory", "permute", "collective", "host", "cast".
const char* kernel_class_name(KernelClass kind);

/// One sub-op's share, kept for `bmpipe cost` and for calibration.
struct SubOpCost {
  std::string name;
  double forward_s = 0;
  double backward_input_s = 0;
  double backward_weight_s = 0;
  /// Forward time each recompute mode re-runs of this sub-op in the backward;
  /// LayerCost::recompute_extra_s is their sum.
  PerMode<double> recompute_s;
  KernelClass kind = KernelClass::memory;
  /// The recompute modules that re-run this sub-op (RecomputeModule bits; 0: none of
  /// them): selective recompute re-runs it when CostSettings::recompute_modules names one.
  RecomputeModules modules = 0;
  /// Its forward FLOPs (GEMMs and the attention core; 0 for memory-bound and
  /// communication sub-ops): LayerCost::recompute_flops sums them over what a mode re-runs.
  double forward_flops = 0;
};

struct LayerCost {
  std::string name;
  double forward_s = 0;
  double backward_input_s = 0;
  double backward_weight_s = 0;
  /// Kept from forward to backward, per recompute mode .
  PerMode<std::int64_t> activation_bytes;
  /// Of activation_bytes, what CostSettings::offload_modules move to host memory between
  /// the forward and the backward, per recompute mode (full: none).
  PerMode<std::int64_t> offload_bytes;
  /// Of activation_bytes, what the weight-grad pass still needs after the input-grad
  /// (the inputs of the projections and the normalized tensors of the norms), so a split
  /// backward can free the rest at the end of I. Under full recompute: all of it.
  PerMode<std::int64_t> weight_grad_bytes;
  /// Extra backward time the mode costs: the forward of the sub-ops it re-runs.
  /// selective: the sub-ops of CostSettings::recompute_modules (by default the attention
  /// core, Korthikanti et al. 2022, sec. 5). full, llama: the
  /// sub-ops up to the last one that saves a tensor for backward -- torch.utils.checkpoint's
  /// non-reentrant mode stops recomputing there (set_checkpoint_early_stop, on by
  /// default), so the down projection and the residual add after it are not re-run.
  /// full, gpt: the whole forward (Megatron-LM's reentrant CheckpointFunction re-runs it).
  PerMode<double> recompute_extra_s;
  std::int64_t output_bytes = 0;  ///< sent onward (to the next layer / stage)
  std::int64_t param_count = 0;   ///< parameters one device holds (its tp share)
  /// Of param_count, what one token runs through (dense layers: all of it; an MoE layer:
  /// top_k of the num_experts experts, at the device's etp share).
  std::int64_t active_param_count = 0;
  /// Of param_count, the routed experts' weights: their gradients reduce over the expert
  /// data-parallel group (edp = tp x dp / (etp x ep)), not over dp.
  std::int64_t expert_param_count = 0;
  /// Model FLOPs of one device's forward (what the layer must compute: no recompute, the
  /// attention matmuls counted as the kernel runs them). Training = 3x this.
  double forward_flops = 0;
  /// FLOPs the recompute mode adds.
  PerMode<double> recompute_flops;
  /// Bytes of the FP8 copies of the GEMM weights (one a parameter) held beside the bf16
  /// ones when CostSettings::fp8 is on; 0 otherwise.
  double fp8_weight_bytes = 0;
  /// The GEMM parameters those copies are of (fp8_weight_bytes over the recipe's bytes a
  /// parameter): with CostSettings::fp8_param their bf16 bytes are not held.
  double fp8_gemm_params = 0;
  /// ZeRO-3: what a stage op pays beyond the sub-ops when this layer is the first its op
  /// runs (the first of the stage in forward, the last in backward): the part of the
  /// layer's gather (and, backward, its reduce-scatter) the op cannot hide, since nothing
  /// runs before it to overlap with. See add_param_sharding_comm.
  double first_forward_s = 0;
  double first_backward_input_s = 0;
  double first_backward_weight_s = 0;
  std::vector<SubOpCost> ops;
};

/// Who all-gathers the parameters (param_gather_bytes).
enum class ParamGatherer {
  /// Megatron-LM's distributed optimizer (ZeRO-1 and -2): the updated parameters, from its
  /// parameter buffer, after the step (optimizer_tail_time).
  distributed_optimizer,
  /// The layers themselves (ZeRO-3: Megatron-FSDP, FSDP2), before their forward and
  /// backward (add_param_sharding_comm).
  layers,
};

/// Bytes an all-gather of `params` parameters moves, `fp8_gemm_params` of them GEMM weights
/// whose low-precision copies take `fp8_weight_bytes` (LayerCost's). Without
/// CostSettings::fp8_param: params x dtype_bytes. With it (--fp8-param-gather) the GEMM
/// weights travel in their low precision, the rest (norms, embedding, head) in dtype_bytes:
///   layers:                (params - G) x dtype_bytes + fp8_weight_bytes
///   distributed_optimizer: (params - G) x dtype_bytes + G x v
/// with G = fp8_gemm_params and v the bytes of a value without its scales: 1 (FP8), 0.5
/// (NVFP4), and MXFP8 v = dtype_bytes. Megatron's distributed optimizer gathers its bucket's
/// param_data, a uint8 buffer of one element per FP8 parameter (packed two a byte under
/// NVFP4), the scales recomputed after the gather; MXFP8 parameters instead share a buffer
/// with the gradients, viewed as bf16, and are quantized after the gather (NVIDIA/Megatron-LM
/// d98e8a64, megatron/core/distributed/param_and_grad_buffer.py: group_params_for_buffers
/// keys _param_uses_quantized_storage parameters to torch.uint8, _ParamAndGradBuffer
/// allocates param_data of nvfp4_packed_numel, and shared_buffer for MXFP8;
/// start_param_sync all-gathers bucket.param_data). One rule for ZeRO-1/2 and ZeRO-3.
double param_gather_bytes(const CostSettings& settings, ParamGatherer by, double params,
                          double fp8_gemm_params, double fp8_weight_bytes);

/// ZeRO-3 / FSDP parameter traffic of one layer (Megatron-FSDP, torch FSDP2), added as two
/// sub-ops when CostSettings::param_shard_dp or param_shard_edp is above 1. With
/// P_d = param_count - expert_param_count and P_e = expert_param_count (this device's tp
/// share, full size), on ring collectives over dp (P_d) and edp (P_e):
///   AG = all-gather of P_d x dtype_bytes + of P_e x dtype_bytes  ((k-1)/k of the bytes each)
///   RS = reduce-scatter of P_d x grad_bytes + of P_e x grad_bytes
/// The frameworks prefetch one layer ahead on a communication stream, so a layer's traffic
/// runs under the compute of the layer before it; layers of a model being alike, that
/// compute is taken as the layer's own (F forward, B = input-grad + weight-grad). In
/// backward the gather and the reduce-scatter share one chain (one communicator, which
/// runs them in the order issued); FSDP2's HSDP all-reduce AR (below) runs on a chain of
/// its own, so a layer's backward traffic paces at C = max(AG + RS, AR):
///   param_all_gather   forward      max(0, AG - F)
///                      input-grad   max(0, AG - B)
///   grad_reduce_scatter weight-grad max(0, C - B) - max(0, AG - B)
/// An op's first layer has nothing before it to hide its gather, nor its last anything
/// after it to hide its reduce-scatter and all-reduce: first_forward_s = min(AG, F),
/// first_backward_input_s = min(AG, B), first_backward_weight_s = X - max(0, C - B) -
/// min(AG, B) with X = AG + RS + AR (min(X, B) - min(AG, B) when C = X), which bring the
/// first layer's exposed time to AG (forward) and X (backward). So a stage op of n alike
/// layers exposes AG + (n-1) max(0, AG - F) in forward and X + (n-1) max(0, C - B) in
/// backward, as Megatron-FSDP and FSDP2 expose them. Without resharding after forward
/// (CostSettings::param_reshard_after_forward false) the backward gathers nothing: AG is 0
/// in every backward term above. Under hybrid sharding dp and edp are the shard groups;
/// with CostSettings::param_replicas_dp (edp) above 1 (FSDP2's HSDP) AR is the all-reduce
/// of the shard, P_d x grad_bytes / param_shard_dp (P_e x grad_bytes / param_shard_edp),
/// over the replica group, on FSDP2's all_reduce_stream after the layer's reduce-scatter
/// (0 otherwise: Megatron-FSDP's, once an iteration, is the stage's reduction).
/// Call it once, after the layer's compute sub-ops.
void add_param_sharding_comm(LayerCost& cost, const HardwareSpec& hw, const CostSettings& settings);

/// The query-key pairs of causal attention over `s` tokens when each query sees at most
/// `window` keys (itself and the window - 1 before it; 0: no window). Query i (0-based)
/// sees min(i + 1, W) keys, so the pairs are
///   sum_{i<s} min(i + 1, W) = s (s + 1) / 2                          W >= s (or no window)
///                           = W (W + 1) / 2 + (s - W) W
///                           = W s - W (W - 1) / 2                    W < s
/// (the first W queries fill the triangle 1 + 2 + ... + W, the other s - W see W keys each).
/// Flash-attention kernels skip the tiles the mask leaves empty, so a windowed core's
/// FLOPs follow its pairs and its bytes (q, k, v, the output once each) do not change.
/// The kernels compute whole tiles, so the real work is a little more: about (W + B) s for
/// tiles of B keys against W s, which this leaves out (the tile shapes vary by kernel and
/// head size, and no measured windowed kernel time was at hand to fit).
double causal_attention_pairs(double s, double window);
/// The query-key pairs of chunked causal attention over `s` tokens (Llama 4's
/// attention_chunk_size; ModelShape::chunked_window): the sequence splits into aligned chunks
/// of C tokens and query i sees the keys j <= i of its own chunk, i mod C + 1 of them. With
/// n = floor(s / C) whole chunks and r = s - n C tokens left over,
///   pairs = n C (C + 1) / 2 + r (r + 1) / 2                     (s (s + 1) / 2 when C >= s).
/// Against a sliding window of the same W = C, whose queries past the first W all see W keys
/// (W s - W (W - 1) / 2), a chunk's queries see (C + 1) / 2 keys on average: at s = 4 C the
/// chunked core does 2 C (C + 1) pairs, the sliding one 3.5 C^2 + C / 2, and for s >> C
/// the chunked core does about half the sliding one's work. Flash kernels skip the masked
/// tiles alike, so the core's FLOPs follow the pairs and its bytes do not change.
double chunked_attention_pairs(double s, double chunk);

/// One decoder layer. Under context parallelism (CostSettings::cp > 1) on this rank's
/// seq_length / cp tokens, with a sub-op after the attention core for what the cp group's
/// exchanges leave exposed: "cp_ring" (p2p) or "cp_a2a" (Ulysses), both (a2a+p2p); see cp_exchange
/// in cost_model.cpp and docs/cost-model.md. `windowed`: the layer attends through
/// `model.sliding_window` (ModelShape:: is_windowed_layer says which layers do): its attention core
/// does causal_attention_pairs (s, window) / causal_attention_pairs(s, 0) of the full core's FLOPs,
/// and selective recompute re-runs that windowed core. Named "decoder.swa". Context parallelism:
/// under Ulysses (a2a) each rank runs heads / cp over all s tokens, the windowed pairs split by cp
/// exactly; the load-balanced ring (p2p) throws ShapeError for a window shorter than the
/// sequence -- TransformerEngine's context-parallel attention asserts that sliding windows
/// run only with a2a or all_gather ("The context parallel running configs cannot support
/// sliding window attention", attn_forward_func_with_cp), and under the ring a rank's far
/// key blocks would be empty steps, the even split gone.
/// gpt-oss's attention sinks (one learned logit per head, added to each softmax
/// denominator) cost heads x queries additions beside heads x pairs x 4 head_dim FLOPs: under
/// 0.1 % of even a 128-token window's core at head_dim 64, so not costed.
LayerCost decoder_layer_cost(const ModelShape& model, const HardwareSpec& hw,
                             const CostSettings& settings, bool windowed = false);
/// One decoder layer with the mixture-of-experts MLP of `model.moe` in place of the dense
/// one (llama architecture): attention as decoder_layer_cost's, then
///   router:   a T x h x E GEMM (replicated over tp), softmax and top-k over fp32 logits;
///   permute:  the T x h tokens gathered into T x top_k expert order (memory-bound), and
///             unpermute: the T x top_k expert outputs scaled and summed back to T x h;
///   experts:  grouped GEMMs over the T x top_k x load_imbalance tokens the busiest
///             expert set receives (gate_up h -> 2 ef / etp, SwiGLU, down ef / etp -> h),
///             reading the E / ep local experts' weights;
///   shared:   a dense SwiGLU MLP of shared_ffn / tp, when the model has one.
/// Activations add T x top_k x (h + 4 ef / etp) elements for the experts (their input and
/// SwiGLU's four tensors) and fp32 router probabilities.
/// With ep > 1 the tokens are exchanged before and after the experts (Megatron-Core's
/// alltoall token dispatcher), exposed, as 1F1B and interleaved run them:
///   a2a-dispatch (after permute) and a2a-combine (before unpermute), each
///   all_to_all_time_s over the ep group on T x top_k x h x dtype_bytes, forward and again
///   in the input-grad (the backward runs the reverse exchange on the gradients).
/// Their buffers are the experts' input rows and output rows the activations already keep.
/// With etp > 1 each device's dispatched rows are all-gathered over the etp group before the
/// experts and the experts' outputs reduce-scattered back after them (Megatron-Core's
/// dispatch_postprocess / combine_preprocess), so the experts run etp x T x top_k rows
/// (x load_imbalance) at ef / etp columns:
///   etp-all-gather (after a2a-dispatch: all-gather forward, reduce-scatter in the
///   input-grad) and etp-reduce-scatter (before a2a-combine: reduce-scatter forward,
///   all-gather in the input-grad), each collective_time_s over etp on the gathered
///   etp x T x top_k x load_imbalance x h x dtype_bytes.
/// `windowed`: as decoder_layer_cost's ("moe_decoder.swa").
LayerCost moe_decoder_layer_cost(const ModelShape& model, const HardwareSpec& hw,
                                 const CostSettings& settings, bool windowed = false);
/// One layer of a hybrid model (ModelShape::hybrid_pattern), of kind `kind`: one block with
/// its pre-norm and residual add, as Megatron-Core's HybridBlock runs it -- the Mamba-2 mixer
/// (M; hybrid_layers.cpp: in_proj, conv1d, the chunked SSD scan, the gated RMSNorm,
/// out_proj), the attention block of decoder_layer_cost (*), its dense MLP (-) or the MoE
/// MLP of moe_decoder_layer_cost (E). Selective recompute re-runs the attention core of a *
/// layer and nothing of the others; full re-runs the whole block. Throws ShapeError unless
/// the model is llama-architecture with fused kernels (Megatron-Core's TransformerEngine
/// layers, the only way these models train).
LayerCost hybrid_layer_cost(const ModelShape& model, const HardwareSpec& hw,
                            const CostSettings& settings, HybridKind kind);
/// A vision-language model's vision layers (ModelShape::vision; vision_layers.cpp), per
/// micro-batch on one device, on micro_batch_size x VisionShape::patches_per_sample()
/// patches (not seq_length tokens): tp splits heads, the MLP and the projector's fc1 as
/// Megatron-Core's TransformerLayer does, sequence parallelism the patches (or, with
/// VisionShape::tensor_parallel false, every tp rank runs them whole). All run in
/// bf16 whatever CostSettings::fp8 says. vision_encoder_layer_cost: one encoder block,
/// windowed (VisionShape::is_windowed_layer) or attending to the whole image;
/// vision_patch_embed_cost: the patch embedding, folded into the first block's row (as the
/// LLM's embedding into its first layer); vision_projector_cost: the projector, whose
/// output is the image tokens' hidden states. Throws ShapeError without a vision model.
LayerCost vision_encoder_layer_cost(const ModelShape& model, const HardwareSpec& hw,
                                    const CostSettings& settings, bool windowed);
LayerCost vision_patch_embed_cost(const ModelShape& model, const HardwareSpec& hw,
                                  const CostSettings& settings);
LayerCost vision_projector_cost(const ModelShape& model, const HardwareSpec& hw,
                                const CostSettings& settings);
/// One multi-token-prediction module (DeepSeek-V3's num_nextn_predict_layers; Megatron-Core's
/// MultiTokenPredictionLayer), on the last stage before the output head: the shared
/// embedding's lookup of the shifted tokens, enorm and hnorm over the two inputs, eh_proj
/// (2h -> h, split over tp), one decoder layer shaped as the model's last (MoE when that
/// is), and one more pass through the shared head (its own norm, the shared output matrix,
/// the loss). Sub-ops are prefixed "mtp."; param_count is ModelShape::mtp_module_params'
/// (the embedding and the output matrix are the model's: not counted again).
LayerCost mtp_module_cost(const ModelShape& model, const HardwareSpec& hw,
                          const CostSettings& settings);
/// Word (and, for gpt, position) embedding: runs on the first stage.
LayerCost embedding_cost(const ModelShape& model, const HardwareSpec& hw,
                         const CostSettings& settings);
/// Final norm, LM head and cross-entropy loss on fp32 logits: runs on the last stage.
/// `holds_head_weights`: false when tied embeddings share the first stage's matrix (pp 1).
LayerCost head_cost(const ModelShape& model, const HardwareSpec& hw, const CostSettings& settings,
                    bool holds_head_weights);

/// Time of `kind` over `group` on `bytes` (the full, unsharded buffer) by the algorithm
/// NCCL would pick (sim/cost/collectives.hpp: ring, tree, NVLS, NVLS-tree; hierarchical
/// when the group spans scale-up domains, its members per domain driving their NICs at
/// once).
double collective_time_s(const HardwareSpec& hw, Collective kind, const CollectiveGroup& group,
                         double bytes);
/// The same for a caller that only knows whether the group leaves the scale-up domain:
/// inside it (CollectiveGroup::inside) or, when `crosses_nodes`, one member a domain
/// (CollectiveGroup::spread: every step on the NIC, as a group of tp-strided dp ranks).
double collective_time_s(const HardwareSpec& hw, Collective kind, int group, double bytes,
                         bool crosses_nodes);

/// Time of an all-to-all over `group` devices where each device holds `bytes` to scatter
/// (its own share included): it sends (k-1)/k of them and receives as much, in parallel,
///   latency + (k-1)/k x bytes / (link bandwidth x lanes x collective_efficiency),
/// on one directed link (lanes 1: a switched node or the NIC) or, on a mesh node, the k-1
/// peer links at once. `crosses_nodes` selects the NIC. 0 for a group of one.
double all_to_all_time_s(const HardwareSpec& hw, int group, double bytes, bool crosses_nodes);

/// Expected number of bins holding at least one of `picks` distinct items drawn uniformly
/// from `items` spread evenly over `bins`: bins x (1 - C(items - items/bins, picks) /
/// C(items, picks)). `bins` when every draw must hit them all.
double expected_bins_hit(double bins, int picks, double items);

/// Where one DeepEP normal-kernel dispatch or combine sends each token of a device of the
/// ep group (multiply by tokens x hidden x bytes for the bytes):
///   - nodes: distinct scale-up domains its top_k experts sit in, its own counted (DeepEP's
///     num_rdma_token_sent per token); over N domains, (N - 1) / N of them are remote on
///     average and cross the NIC;
///   - ranks: distinct devices they sit on (the tokens NVLink delivers, DeepEP's recv_x).
/// With group-limited routing whose groups fill whole domains (router_groups a multiple of
/// the domains), a token reaches exactly the domains of its router_group_top_k groups
/// (drawn uniformly), and its experts spread over those groups' devices; otherwise its
/// top_k experts are drawn uniformly from all of them.
struct DeepEpFanout {
  double nodes = 1;
  double ranks = 1;
};
DeepEpFanout deepep_fanout(const MoeShape& moe, int ep, int ep_per_domain);

/// Time of one DeepEP normal-kernel dispatch or combine of `tokens` tokens of `row_bytes`
/// each (hidden x bytes per element) over an ep group of `ep` devices, `ep_per_domain` of
/// them in each scale-up domain (deepseek-ai/DeepEP, README "Normal kernels with NVLink
/// and RDMA forwarding"; the byte counts of its tests/test_internode.py): the NIC part,
/// tokens x fanout.nodes x (domains - 1) / domains rows, and the NVLink part, tokens x
/// fanout.ranks rows, run pipelined, so the slower one sets the time:
///   latency + max(NIC bytes / (NIC bandwidth x kDeepEpNicEfficiency),
///                 NVLink bytes / (intra_node bandwidth x collective_efficiency)).
/// Inside one domain only the NVLink part is left.
double deepep_time_s(const HardwareSpec& hw, const MoeShape& moe, int ep, int ep_per_domain,
                     double tokens, double row_bytes);

/// The NIC efficiency of DeepEP's internode kernels: the mean, over its README's four
/// RDMA-bound rows on H800 with one 50 GB/s CX7 NIC a GPU (EP 32 and 64, dispatch in FP8
/// and combine in bf16: 58, 57, 51 and 50 GB/s of "bottleneck bandwidth"), of the NIC's
/// share of what those figures count: DeepEP counts a token once for every domain it
/// reaches, its own included (4 of 4 and 4 of 8 domains: 3/4 and 7/8 cross the NIC), so
/// 58 x 3/4 / 50 = 0.870, 57 x 3/4 / 50 = 0.855, 51 x 7/8 / 50 = 0.893, 50 x 7/8 / 50 =
/// 0.875, mean 0.873. tests/cost/deepep_test.cpp reproduces the whole table with it.
inline constexpr double kDeepEpNicEfficiency = 0.873;

/// Time of one point-to-point transfer of `bytes` on one directed link (a ring step: every
/// rank sends to the next while it receives from the previous, each on its own link):
///   latency + bytes / (link bandwidth x collective_efficiency).
/// `crosses_nodes` selects the NIC. 0 for no bytes.
double p2p_time_s(const HardwareSpec& hw, double bytes, bool crosses_nodes);

/// Optimizer-state bytes per parameter and step time come from these.
struct OptimizerSettings {
  /// 0: replicated; 1: optimizer state sharded over dp (ZeRO-1, Megatron's distributed
  /// optimizer); 2: gradients too (ZeRO-2); 3: parameters too (ZeRO-3, FSDP), gathered a
  /// layer at a time (add_param_sharding_comm).
  int zero_stage = 0;
  bool master_weights = true;  ///< fp32 copy of the weights (mixed precision)
  int grad_bytes = 4;          ///< gradient buffer dtype: 4 (fp32, Megatron's main_grad) or 2
  /// Reduce each stage's gradients over dp while the backward goes on (Megatron-LM's
  /// --overlap-grad-reduce; off by default there too) instead of in one block at the end.
  bool overlap_grad_reduce = false;
  /// ZeRO-1/2: run the all-gather of the updated parameters in the next iteration's forward
  /// (Megatron-LM's --overlap-param-gather) instead of after the step.
  bool overlap_param_gather = false;
  /// Megatron-Core's --optimizer-cpu-offload with --optimizer-offload-fraction F: the share of
  /// this device's optimizer shard that HybridDeviceOptimizer keeps and steps on the host
  /// (megatron/core/optimizer/cpu_offloading/hybrid_optimizer.py). 0: off; in [0, 1].
  double offload_fraction = 0.0;
  /// zero_stage 3 with false (TrainingConfig::fsdp_reshard_after_forward): the device holds
  /// its layers' gathered parameters whole beside its shard of them (static_parts).
  bool reshard_after_forward = true;
};

/// Host bytes per offloaded parameter: HybridDeviceOptimizer keeps the offloaded share's
/// parameter on the host in fp32 (param_update_in_fp32, which Megatron-Core always sets),
/// Adam's m and v beside it, and an fp32 pinned copy of its gradient (cpu_copy_map_grad, of
/// the fp32 parameter's dtype): 4 + 4 + 4 + 4.
inline constexpr double kHostOffloadBytesPerParam = 16;
/// Bytes per offloaded parameter on the host link each step: the gradient device to host
/// into that fp32 copy (4), the updated parameter host to device into the device's
/// parameter (dtype bytes, optimizer_step_s).
inline constexpr double kOffloadGradCopyBytes = 4;

/// Static bytes (weights, gradients, Adam m and v, master weights) of `params` parameters
/// on one device (ZeRO paper, Rajbhandari et al. 2020, sec. 5.1), with P params, dtype
/// bytes e, gradient bytes g, optimizer state K (12 with master weights, else 8):
///   stage 0: P (e + g + K)       stage 1: P (e + g + K/dp)
///   stage 2: P (e + (g + K)/dp)  stage 3: P (e + g + K) / dp
/// Stage 3 without resharding after forward (OptimizerSettings::reshard_after_forward
/// false) keeps every layer's gathered parameters from its forward to its backward, and
/// with micro-batches in flight (pp > 1) or at the end of the forward (pp 1) that is all
/// of them at once: stage 2's working set, P e, beside the shard, P (e + g + K) / dp.
/// Under hybrid sharding dp is the shard group (TrainingConfig::fsdp_shard_group).
/// (stage 3's gathered working set is Experiment::reserved_bytes', not here). Optimizer
/// offload (OptimizerSettings::offload_fraction F) moves F of the state to the host: K
/// becomes K (1 - F), so the device holds exactly F K P / dp bytes less (stage >= 1; the host
/// holds kHostOffloadBytesPerParam for each offloaded parameter, offload_host_bytes).
std::int64_t static_bytes(std::int64_t params, int dtype_bytes, const OptimizerSettings& opt,
                          int dp);

/// static_bytes' three terms, before its rounding: the weights (P e, over dp at stage 3),
/// the gradients (P g, over dp from stage 2) and the optimizer state (P K (1 - F), over dp
/// from stage 1). What a framework's memory report breaks the static bytes into
/// (Megatron-LM's theoretical_memory_usage.py counts the three as one "bytes per parameter").
struct StaticParts {
  double weights = 0, grads = 0, optimizer = 0;
};
StaticParts static_parts(std::int64_t params, int dtype_bytes, const OptimizerSettings& opt,
                         int dp);

/// Host bytes one device's offloaded share takes: F x P / dp x kHostOffloadBytesPerParam
/// (the dp shard as static_bytes takes it); 0 with offload off.
double offload_host_bytes(std::int64_t params, const OptimizerSettings& opt, int dp);

/// Adam step over one device's share S = P / dp (P with zero_stage 0): memory-bound, reads
/// and writes every state once, b = g + 2K + e bytes a parameter at hbm_GBps x
/// memory_efficiency:
///   t_device(S) = S b / (hbm x memory_efficiency).
/// With optimizer offload F (Megatron-Core's HybridDeviceOptimizer.step, without
/// --overlap-cpu-optimizer-d2h-h2d: the copies run on the compute stream): the gradients of
/// the host's share go device to host first, then the device steps its (1 - F) share while
/// the host's CPUs step theirs (the device kernels are queued asynchronously before the CPU
/// step starts), then the updated parameters come back:
///   t = F S 4 / L + max(t_device((1 - F) S), F S H / A) + F S e / L
/// with L = host_link_GBps / host_link_devices (the devices sharing a link copy at once),
/// A = host_adam_Gparams_per_s (every device of the host steps its share at once on the
/// host's CPUs: H = host_devices of them share A), 4 = kOffloadGradCopyBytes.
double optimizer_step_s(std::int64_t params, int dtype_bytes, const OptimizerSettings& opt, int dp,
                        const HardwareSpec& hw);

}  // namespace bmpipe
