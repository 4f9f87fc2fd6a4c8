#include "sim/cost/cost_model.hpp"

#include "sim/cost/kernels.hpp"
#include "sim/cost/layer_parts.hpp"

#include <algorithm>
#include <cmath>

namespace bmpipe {

// The parts of a layer (layer_parts.hpp), defined below and in hybrid_layers.cpp.
using namespace layer_parts;

const char* kernel_class_name(KernelClass kind) {
  switch (kind) {
    case KernelClass::gemm:
      return "gemm";
    case KernelClass::grouped_gemm:
      return "grouped_gemm";
    case KernelClass::attention:
      return "attention";
    case KernelClass::memory:
      return "memory";
    case KernelClass::permute:
      return "permute";
    case KernelClass::collective:
      return "collective";
    case KernelClass::host:
      return "host";
    case KernelClass::cast:
      return "cast";
  }
  return "memory";
}

double collective_time_s(const HardwareSpec& hw, Collective kind, const CollectiveGroup& group,
                         double bytes) {
  return choose_collective(hw, kind, group, bytes).time_s;
}

double collective_time_s(const HardwareSpec& hw, Collective kind, int group, double bytes,
                         bool crosses_nodes) {
  return collective_time_s(
      hw, kind, crosses_nodes ? CollectiveGroup::spread(group) : CollectiveGroup::inside(group),
      bytes);
}

double all_to_all_time_s(const HardwareSpec& hw, int group, double bytes, bool crosses_nodes) {
  if (group <= 1 || bytes <= 0) return 0.0;
  const double k = group;
  const LinkSpec& link = crosses_nodes ? hw.inter_node : hw.intra_node;
  const double lanes = (!crosses_nodes && hw.intra_node_mesh) ? k - 1 : 1.0;
  const double bw = link.bandwidth_GBps * 1e9 * lanes * hw.collective_efficiency;
  // NCCL (and HCCL) run the k-1 sends and receives of an all-to-all as one grouped step:
  // one latency, not k-1.
  return link.latency_us * 1e-6 + (k - 1) / k * bytes / bw;
}

double expected_bins_hit(double bins, int picks, double items) {
  if (bins <= 1) return 1.0;
  const double rest = items - items / bins;  // items outside one bin
  // P(a given bin gets none) = C(rest, picks) / C(items, picks).
  double none = 1.0;
  for (int i = 0; i < picks && none > 0; ++i)
    none = items - i > 0 ? none * std::max(0.0, rest - i) / (items - i) : 0.0;
  return bins * (1.0 - none);
}

DeepEpFanout deepep_fanout(const MoeShape& moe, int ep, int ep_per_domain) {
  const double E = moe.num_experts;
  const int G = moe.router_groups, M = moe.router_group_top_k;
  const bool groups = G > 0 && M > 0;
  // Experts sit in order on the ep devices, the devices in order in the domains, so a
  // group of E / G consecutive experts stays inside one domain (device) when G is a
  // multiple of the domains (devices), and spans whole devices when ep is a multiple of G.
  const int domains = ep_per_domain > 0 && ep % ep_per_domain == 0 ? ep / ep_per_domain : 0;
  DeepEpFanout out;
  if (groups && domains > 0 && G % domains == 0)
    out.nodes = expected_bins_hit(domains, M, G);
  else
    out.nodes = expected_bins_hit(static_cast<double>(ep) / ep_per_domain, moe.top_k, E);
  if (groups && ep % G == 0)
    out.ranks = expected_bins_hit(static_cast<double>(M) * ep / G, moe.top_k, M * E / G);
  else if (groups && G % ep == 0)
    out.ranks = expected_bins_hit(ep, M, G);
  else
    out.ranks = expected_bins_hit(ep, moe.top_k, E);
  return out;
}

double deepep_time_s(const HardwareSpec& hw, const MoeShape& moe, int ep, int ep_per_domain,
                     double tokens, double row_bytes) {
  if (ep <= 1 || tokens <= 0) return 0.0;
  const DeepEpFanout f = deepep_fanout(moe, ep, ep_per_domain);
  const double domains = static_cast<double>(ep) / ep_per_domain;
  const double nvlink = tokens * f.ranks * row_bytes /
                        (hw.intra_node.bandwidth_GBps * 1e9 * hw.collective_efficiency);
  if (domains <= 1) return hw.intra_node.latency_us * 1e-6 + nvlink;
  const double nic = tokens * f.nodes * (domains - 1) / domains * row_bytes /
                     (hw.inter_node.bandwidth_GBps * 1e9 * kDeepEpNicEfficiency);
  return hw.inter_node.latency_us * 1e-6 + std::max(nic, nvlink);
}

double p2p_time_s(const HardwareSpec& hw, double bytes, bool crosses_nodes) {
  if (bytes <= 0) return 0.0;
  const LinkSpec& link = crosses_nodes ? hw.inter_node : hw.intra_node;
  return link.latency_us * 1e-6 + bytes / (link.bandwidth_GBps * 1e9 * hw.collective_efficiency);
}

StaticParts static_parts(std::int64_t params, int dtype_bytes, const OptimizerSettings& opt,
                         int dp) {
  // Adam keeps m and v in fp32 (8 bytes), plus an fp32 master copy with mixed precision
  // (ZeRO paper, Rajbhandari et al. 2020, sec. 3.1: 12 bytes of optimizer state).
  // ZeRO-2 shards the gradients too, ZeRO-3 the weights as well (sec. 5.1's P_os+g, P_os+g+p).
  // Optimizer offload keeps 1 - F of the state on the device (F = 0: all of it, exactly).
  const double state = (8.0 + (opt.master_weights ? 4.0 : 0.0)) * (1.0 - opt.offload_fraction);
  const double shard = opt.zero_stage >= 1 ? std::max(dp, 1) : 1;
  const double grad_shard = opt.zero_stage >= 2 ? shard : 1;
  const double weight_shard = opt.zero_stage >= 3 ? shard : 1;
  const double p = static_cast<double>(params);
  // FSDP2 without resharding after forward: the gathered copy (all-gather output) is an
  // allocation of its own beside the shard (torch/distributed/fsdp/_fully_shard's
  // FSDPParam keeps _sharded_param_data and the unsharded parameter apart).
  const double gathered = opt.zero_stage >= 3 && !opt.reshard_after_forward ? 1.0 : 0.0;
  return {p * dtype_bytes * (1.0 / weight_shard + gathered), p * opt.grad_bytes / grad_shard,
          p * state / shard};
}

std::int64_t static_bytes(std::int64_t params, int dtype_bytes, const OptimizerSettings& opt,
                          int dp) {
  const StaticParts parts = static_parts(params, dtype_bytes, opt, dp);
  return static_cast<std::int64_t>(std::llround(parts.weights + parts.grads + parts.optimizer));
}

double offload_host_bytes(std::int64_t params, const OptimizerSettings& opt, int dp) {
  if (!(opt.offload_fraction > 0)) return 0.0;
  const double shard = opt.zero_stage >= 1 ? std::max(dp, 1) : 1;
  return opt.offload_fraction * static_cast<double>(params) / shard * kHostOffloadBytesPerParam;
}

double optimizer_step_s(std::int64_t params, int dtype_bytes, const OptimizerSettings& opt, int dp,
                        const HardwareSpec& hw) {
  // Per parameter of this device's shard: read grad, read+write m, v and the master copy,
  // write the low-precision weight.
  const double shard = opt.zero_stage >= 1 ? std::max(dp, 1) : 1;
  const double per_param =
      opt.grad_bytes + 2.0 * (8.0 + (opt.master_weights ? 4.0 : 0.0)) + dtype_bytes;
  const double hbm = hw.hbm_GBps * 1e9 * hw.memory_efficiency;
  if (!(opt.offload_fraction > 0)) return static_cast<double>(params) / shard * per_param / hbm;
  // HybridDeviceOptimizer.step (the closed form is in the header): the gradient copy, the
  // device's and the host's steps side by side, the parameter copy.
  const double f = opt.offload_fraction;
  const double share = static_cast<double>(params) / shard;
  const double link = hw.host_link_GBps * 1e9 / std::max(hw.host_link_devices, 1);
  const double device = (1.0 - f) * share * per_param / hbm;
  const double host = f * share * std::max(hw.host_devices, 1) / (hw.host_adam_Gparams_per_s * 1e9);
  const double to_host = f * share * kOffloadGradCopyBytes / link;
  const double to_device = f * share * dtype_bytes / link;
  return to_host + std::max(device, host) + to_device;
}

double param_gather_bytes(const CostSettings& st, ParamGatherer by, double params,
                          double fp8_gemm_params, double fp8_weight_bytes) {
  const double e = st.dtype_bytes;
  if (!st.fp8_param) return params * e;
  double gemm = fp8_weight_bytes;  // the layers gather the copies as they are held
  if (by == ParamGatherer::distributed_optimizer)
    gemm = fp8_gemm_params * (st.fp8_recipe == Fp8Recipe::mxfp8   ? e
                              : st.fp8_recipe == Fp8Recipe::nvfp4 ? 0.5
                                                                  : 1.0);
  return (params - fp8_gemm_params) * e + gemm;
}

void add_param_sharding_comm(LayerCost& c, const HardwareSpec& hw, const CostSettings& st) {
  if (st.param_shard_dp <= 1 && st.param_shard_edp <= 1) return;
  // Megatron-FSDP (NVIDIA/Megatron-LM, megatron/core/distributed/fsdp: prefetches the next
  // module's parameter all-gather, reduce-scatters each module's gradients once its
  // backward is done) and FSDP2 (pytorch/pytorch, torch/distributed/fsdp/_fully_shard:
  // forward and backward prefetch of one module on separate streams) read, not copied.
  const double dense = static_cast<double>(c.param_count - c.expert_param_count);
  const double experts = static_cast<double>(c.expert_param_count);
  // Where the groups lie: as stated, or (0) inside a domain or one member a domain.
  const auto group = [&](int size, int per_domain) {
    return CollectiveGroup{size, per_domain > 0 ? per_domain : st.dp_crosses_nodes ? 1 : size};
  };
  const CollectiveGroup dp = group(st.param_shard_dp, st.param_shard_dp_per_domain);
  const CollectiveGroup edp = group(st.param_shard_edp, st.param_shard_edp_per_domain);
  const auto both = [&](Collective kind, double bytes_per_param) {
    return collective_time_s(hw, kind, dp, dense * bytes_per_param) +
           collective_time_s(hw, kind, edp, experts * bytes_per_param);
  };
  // --fp8-param-gather: the GEMM weights are gathered in their low precision, the rest
  // (norms, embedding) in bf16; the GEMM weights taken alike over dense and experts.
  const double total = static_cast<double>(c.param_count);
  const double ag_bytes = total > 0 ? param_gather_bytes(st, ParamGatherer::layers, total,
                                                         c.fp8_gemm_params, c.fp8_weight_bytes) /
                                          total
                                    : st.dtype_bytes;
  const double ag = both(Collective::all_gather, ag_bytes);
  // FSDP2's HSDP: each backward all-reduces the reduce-scattered shard across the copies
  // (torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py, foreach_reduce: the
  // all-reduce over the replicate group when all_reduce_grads, True by default in
  // FSDPParamGroup). It runs on a stream of its own, all_reduce_stream, which waits for the
  // reduce-scatter stream and nothing else (pytorch/pytorch 010ae4a8, same file: "the next
  // layer's reduce-scatter can reuse the same physical block while this layer's AR is
  // still in flight"): layer i's all-reduce overlaps layer i-1's gather and reduce-scatter.
  double ar = 0;
  if (st.param_replicas_dp > 1 && st.param_shard_dp > 0)
    ar += collective_time_s(hw, Collective::all_reduce,
                            CollectiveGroup{st.param_replicas_dp, st.param_replicas_dp_per_domain},
                            dense * st.grad_bytes / st.param_shard_dp);
  if (st.param_replicas_edp > 1 && st.param_shard_edp > 0 && experts > 0)
    ar +=
        collective_time_s(hw, Collective::all_reduce,
                          CollectiveGroup{st.param_replicas_edp, st.param_replicas_edp_per_domain},
                          experts * st.grad_bytes / st.param_shard_edp);
  const double rs = both(Collective::reduce_scatter, st.grad_bytes);
  const double f = c.forward_s, b = c.backward_input_s + c.backward_weight_s;
  // Without resharding after forward the backward finds its parameters gathered.
  const double ag_back = st.param_reshard_after_forward ? ag : 0.0;
  const double ag_b = std::max(0.0, ag_back - b);
  // A layer's backward keeps two chains busy beside the compute: the gather and the
  // reduce-scatter on one (they share the shard group's communicator, which runs them in
  // the order they are issued), the all-reduce on the other. In a run of alike layers the
  // longer chain sets the pace: C = max(AG + RS, AR) a layer under its B.
  const double chain = std::max(ag_back + rs, ar);
  const double both_b = std::max(0.0, chain - b);
  c.ops.push_back(
      {"param_all_gather", std::max(0.0, ag - f), ag_b, 0.0, {}, KernelClass::collective});
  c.ops.push_back({"grad_reduce_scatter", 0.0, 0.0, both_b - ag_b, {}, KernelClass::collective});
  c.forward_s += std::max(0.0, ag - f);
  c.backward_input_s += ag_b;
  c.backward_weight_s += both_b - ag_b;
  c.first_forward_s = std::min(ag, f);
  // An op's backward shows its first layer's gather whole (no backward before it to hide
  // it) and its last layer's reduce-scatter and all-reduce (none after them): X = AG + RS
  // + AR, the layers being alike, carried by the first layer (the first_ terms) less what
  // its sub-ops already hold, max(0, C - B).
  c.first_backward_input_s = std::min(ag_back, b);
  const double all = ag_back + rs + ar;  // X - max(0, C - B), with C = X exactly min(X, B)
  c.first_backward_weight_s = std::min(all, all - chain + b) - std::min(ag_back, b);
}

namespace layer_parts {

/// Bytes one device sends to the next stage (and receives back as the gradient) for a
/// hidden-state tensor of `full_bytes` (T x h x dtype). Megatron-LM's scatter/gather of
/// pipeline tensors (Narayanan et al. 2021, SC'21, sec. 4.1; p2p_communication.py,
/// `--no-scatter-gather-tensors-in-pipeline` turns it off, on by default): without
/// sequence parallelism the t ranks of a tp group hold the same output, so each sends
/// only its 1/t slice, over its own NIC, and the receiving ranks all-gather the slices
/// over NVLink. With sequence parallelism each rank already holds a different 1/t. Either
/// way a device's link carries full / t. Taken as on for gpt layers (Megatron-LM of
/// 2021-22, which the gpt architecture describes); llama layers send the whole tensor
/// (Megatron-Core's p2p has no scatter/gather). The receiver's all-gather is not charged:
/// it runs on the node's links, (t - 1)/t of the tensor at 12x a DGX A100 NIC's bandwidth
/// (GPT-3 175B at tp 8, 50 MB: about 0.2 ms a receive, against 0.25 ms for the slice over
/// the NIC and 2 ms for the whole tensor; under 0.5 % of a micro-batch's stage time).
double stage_output_bytes(Architecture arch, const CostSettings& st, double full_bytes) {
  const bool split = st.sequence_parallel || arch == Architecture::gpt;
  return split && st.tp > 1 ? full_bytes / st.tp : full_bytes;
}

}  // namespace layer_parts

double causal_attention_pairs(double s, double window) {
  // The closed form is derived in cost_model.hpp.
  if (!(window > 0) || window >= s) return s * (s + 1) / 2;
  return window * s - window * (window - 1) / 2;
}

double chunked_attention_pairs(double s, double chunk) {
  // The closed form is derived in cost_model.hpp.
  if (!(chunk > 0) || chunk >= s) return s * (s + 1) / 2;
  const double whole = std::floor(s / chunk), rest = s - whole * chunk;
  return whole * chunk * (chunk + 1) / 2 + rest * (rest + 1) / 2;
}

namespace layer_parts {

/// The context-parallel exchanges of one layer's attention (CostSettings::cp > 1), added
/// after the attention sub-op as the time they leave exposed. `tokens`: this rank's
/// tokens; `attention_f` / `attention_b`: the attention core's forward and backward time
/// on them; `kv_cols`: key plus value columns per token (one device's heads); `qkv_cols`
/// and `out_cols`: what Ulysses' all-to-alls carry in and out.
///
/// p2p (the ring; TransformerEngine's AttnFuncWithCPAndKVP2P, NVIDIA/TransformerEngine
/// v2.1, transformer_engine/pytorch/attention.py, read for its structure, not copied):
/// cp steps of attention, each on one key/value block, while the block for the next step
/// travels one hop of the ring: cp - 1 transfers of the rank's keys and values,
/// kv_cols x tokens x dtype bytes, forward; the backward passes the keys and values and
/// their gradients on, twice the bytes. Under the load-balanced split every step is the
/// same share of the rank's attention, 1/cp (step 0: two diagonal half-blocks and one full
/// block; the others: two full blocks), so transfer i hides behind attention step i - 1 and
/// exposed = (cp - 1) x max(0, transfer - attention / cp), forward and backward alike.
///
/// a2a (DeepSpeed-Ulysses; TE's AttnFuncWithCPAndQKVOA2A): an all-to-all over the cp group
/// of q, k, v before attention and one of its output after, the reverse pair on the
/// gradients backward; each moves (cp - 1)/cp of this rank's tokens x columns x dtype
/// bytes (all_to_all_time_s) and nothing overlaps them.
///
/// a2a_p2p (hierarchical; TE's AttnFuncWithCPAndKVP2P with cp_group = [a2a group, p2p
/// group], NVIDIA/TransformerEngine d0067d0d, transformer_engine/pytorch/attention/
/// dot_product_attention/context_parallel.py, read for its structure, not copied): the
/// a2a above over the cp_a2a ranks of the inner group (on cp_a2a_crosses_nodes' link),
/// then the ring above over the r = cp / cp_a2a groups. After the all-to-all a rank holds
/// cp_a2a x tokens of 1/cp_a2a of the heads, so its ring block is the same tokens x kv_cols
/// x dtype bytes, r - 1 hops, each hidden behind 1/r of its attention (the a2a gathers the
/// load-balanced chunks of its group into the ring's 2 r chunks, TE's
/// get_seq_chunk_ids_for_reordering_before_attn). TE itself runs [cp, 1] as a2a and
/// [1, cp] as p2p (attn_forward_func_with_cp); the levels below give the same: a level of
/// one rank adds nothing.
void cp_exchange(Builder& b, const HardwareSpec& hw, const CostSettings& st, double tokens,
                 double attention_f, double attention_b, double kv_cols, double qkv_cols,
                 double out_cols) {
  const double e = st.dtype_bytes;
  const int a2a = st.cp_a2a_ranks();
  const bool a2a_crosses =
      st.cp_comm == CpComm::a2a_p2p ? st.cp_a2a_crosses_nodes : st.cp_crosses_nodes;
  if (a2a > 1) {
    const double in = all_to_all_time_s(hw, a2a, e * tokens * qkv_cols, a2a_crosses);
    const double out = all_to_all_time_s(hw, a2a, e * tokens * out_cols, a2a_crosses);
    b.add("cp_a2a", in + out, in + out, 0.0);
  }
  const double ring = st.cp_ring_ranks();
  if (ring <= 1) return;
  const double block = e * tokens * kv_cols;
  const double forward = p2p_time_s(hw, block, st.cp_crosses_nodes);
  const double backward = p2p_time_s(hw, 2 * block, st.cp_crosses_nodes);
  b.add("cp_ring", (ring - 1) * std::max(0.0, forward - attention_f / ring),
        (ring - 1) * std::max(0.0, backward - attention_b / ring), 0.0);
}

LayerDims layer_dims(const ModelShape& m, const CostSettings& st) {
  LayerDims D;
  D.llama = m.architecture == Architecture::llama;
  D.eager = eager_kernels(m.architecture, st);
  D.e = st.dtype_bytes;
  D.t = st.tp;
  D.s = st.seq_length;
  D.mb = st.micro_batch_size;
  D.cp = st.cp;
  D.sl = D.s / D.cp;
  D.T = D.sl * D.mb;
  D.h = m.hidden_size;
  D.d = m.head_dim();
  D.heads = m.num_attention_heads / D.t;
  // kv heads split over tp, replicated when tp exceeds them (Megatron does the same).
  D.kv_heads = std::max(1.0, std::ceil(m.num_kv_heads / D.t));
  D.q_cols = D.heads * D.d;
  D.kv_cols = D.kv_heads * D.d;
  D.f = m.ffn_hidden_size / D.t;
  D.Hn = D.T * D.h;
  D.Hs = st.sequence_parallel ? D.Hn / D.t : D.Hn;
  D.F = D.T * D.f;
  D.S2 = D.heads * D.mb * D.sl * D.s;
  D.norm = norm_traffic(D.eager, D.e);
  // Squared ReLU (MlpActivation::relu2; Megatron's fused kernel reads its input and writes
  // the output, backward reads the gradient and the input and writes one gradient).
  D.relu2 = m.mlp_activation == MlpActivation::relu2;
  D.glu = D.relu2 ? SwigluTraffic{2 * D.e, 3 * D.e, 1, 1} : swiglu_traffic(D.eager, D.e);
  D.in_factor = m.mlp_in_factor();
  D.norm_tensors = D.llama ? 1 : 2;
  const MlaShape& mla = m.mla;
  D.is_mla = m.is_mla();
  D.ql = mla.q_lora_rank;
  D.kvl = mla.kv_lora_rank;
  D.qk = mla.qk_nope_head_dim + mla.qk_rope_head_dim;
  D.dr = mla.qk_rope_head_dim;
  D.dv = mla.v_head_dim;
  D.Ts_att = D.Hs / D.h;
  D.o_cols = D.is_mla ? D.heads * D.dv : D.q_cols;
  D.dsa = m.is_dsa();
  if (D.dsa) {
    D.dsa_loss = m.dsa.indexer_loss;
    D.Hi = m.dsa.index_heads;
    D.di = m.dsa.index_head_dim;
    D.kk = std::min<double>(m.dsa.index_topk, D.s);
    // Query i (0-based) keeps min(i + 1, k) keys: the pairs of a k-token sliding window
    // (causal_attention_pairs), all of them while s <= k.
    D.dsa_share = causal_attention_pairs(D.s, D.kk) / causal_attention_pairs(D.s, 0);
  }
  // Megatron-Core builds DSA's attention as AbsorbedMLASelfAttention (NVIDIA/Megatron-LM
  // d98e8a64, megatron/core/models/gpt/experimental_attention_variant_module_specs.py:130;
  // transformer_config.py:1514 "DSA uses AbsorbedMLASelfAttention"): the up projection of k
  // is absorbed into q, the core runs in MQA form over the latent, and v's up projection
  // follows it (experimental_attention_variant/absorbed_mla.py).
  D.absorbed = D.dsa;
  D.core_qk = D.absorbed ? D.kvl + D.dr : D.qk;
  D.core_dv = D.absorbed ? D.kvl : D.dv;
  D.core_q = D.heads * D.core_qk;
  D.core_kv = D.absorbed ? D.kvl + D.dr : D.heads * (D.qk + D.dv);
  D.core_out = D.heads * D.core_dv;
  D.add_f = (3 * D.e + (m.dropout ? 1 : 0)) * D.Hs;
  D.add_bias = D.llama ? 0.0 : D.h;
  const MoeShape& x = m.moe;
  D.Tm = D.Hs / D.h;
  D.E = x.num_experts;
  D.top_k = x.top_k;
  D.local_experts = D.E / st.ep;
  D.ef = static_cast<double>(x.expert_ffn) / st.etp;
  D.Tk = D.Tm * D.top_k;
  D.Tmax = D.Tk * x.load_imbalance;
  if (st.moe_capacity_factor > 0 && D.E > 0) {
    // Padded to capacity (CostSettings::moe_capacity_factor): Megatron's get_capacity,
    // ceil(tokens x top_k / experts x factor), never more than the tokens themselves; every
    // expert then runs exactly that many rows, so the imbalance no longer shows.
    const double capacity = std::min(std::ceil(D.Tk / D.E * st.moe_capacity_factor), D.Tm);
    D.Tk = D.E * capacity;
    D.Tmax = D.Tk;
  }
  D.etp = st.etp;
  D.Tg = D.etp * D.Tmax;
  D.sf = static_cast<double>(x.shared_ffn) / D.t;
  D.L = x.latent_size;
  D.X = x.routed_width(m.hidden_size);
  return D;
}

/// The attention block's sub-ops, the input norm to the first residual add; returns the
/// attention core's forward FLOPs (what selective recompute re-runs).
double attention_block(Builder& b, const LayerDims& D, const ModelShape& m, const HardwareSpec& hw,
                       const CostSettings& st) {
  b.set_scope(GraphScope::attn);
  // Megatron's layernorm module re-runs the input norm where it is a module of its own:
  // MLA's (TENorm: both down projections read it); elsewhere it is fused into linear_qkv
  // (an IdentityOp, which the module skips: transformer_layer.py, recompute_input_layernorm).
  b.set_modules(D.is_mla ? module_bit(RecomputeModule::layernorm) : 0);
  b.elementwise("input_norm", D.norm.f * D.Hs, D.norm.i * D.Hs, D.norm.w * D.Hs, D.norm.kf,
                D.norm.ki, D.norm.kw, D.norm_tensors * D.h, D.norm_tensors);
  // RoPE on `el` elements of q and k. Eager (HF): five elementwise kernels (mul, neg, cat,
  // mul, add) on each. Fused (TransformerEngine's fused RoPE): one kernel each on q and k
  // that reads and writes the tensor once, each way.
  const auto rope = [&](double el) {
    if (D.eager)
      b.elementwise("rope", 10 * D.e * el, 8 * D.e * el, 0, 10, 8, 0);
    else
      b.elementwise("rope", 2 * D.e * el, 2 * D.e * el, 0, 2, 2, 0);
  };
  if (D.is_mla) {
    // Megatron-Core's MLASelfAttention (NVIDIA/Megatron-LM
    // d98e8a64ddf34856e74b24714e3bedb2f5a39553, megatron/core/transformer/
    // multi_latent_attention.py): the down projections linear_q_down_proj and
    // linear_kv_down_proj are 'duplicated' (every tp rank holds them whole) and run on the
    // rank's own tokens; the latents are layer-normed, gathered over tp under sequence
    // parallelism, and the up projections linear_q_up_proj / linear_kv_up_proj and the
    // output projection split the heads. Norms and RoPE as the llama layer runs them.
    const double gathered = (D.ql > 0 ? D.ql : 0.0) + D.kvl + D.dr;  // latent columns gathered
    // mla_up_proj re-runs qkv_up_proj_and_rope_apply (multi_latent_attention.py, same
    // commit): the latent norms (fused into the up projections), the gather under sequence
    // parallelism, the up projections, RoPE and the concat; not the down projections.
    const RecomputeModules up = module_bit(RecomputeModule::mla_up_proj);
    b.set_modules(0);
    if (D.ql > 0) {
      b.linear("q_a_proj", D.Ts_att, D.h, D.ql);
      b.set_modules(up);
      b.elementwise("q_a_layernorm", D.norm.f * D.Ts_att * D.ql, D.norm.i * D.Ts_att * D.ql,
                    D.norm.w * D.Ts_att * D.ql, D.norm.kf, D.norm.ki, D.norm.kw, D.ql, 1);
    } else if (st.sequence_parallel) {
      // q_proj (column-parallel) gathers the hidden states itself.
      b.tp_collective("q_all_gather", Collective::all_gather, Collective::reduce_scatter,
                      D.e * D.Hn);
    }
    b.set_modules(0);
    b.linear("kv_a_proj_with_mqa", D.Ts_att, D.h, D.kvl + D.dr);
    b.set_modules(up);
    b.elementwise("kv_a_layernorm", D.norm.f * D.Ts_att * D.kvl, D.norm.i * D.Ts_att * D.kvl,
                  D.norm.w * D.Ts_att * D.kvl, D.norm.kf, D.norm.ki, D.norm.kw, D.kvl, 1);
    if (st.sequence_parallel)
      b.tp_collective("latent_all_gather", Collective::all_gather, Collective::reduce_scatter,
                      D.e * D.T * gathered);
    if (D.ql > 0)
      b.linear("q_b_proj", D.T, D.ql, D.heads * D.qk);
    else
      b.linear("q_proj", D.T, D.h, D.heads * D.qk);
    if (D.absorbed) {
      // q_absorbed = q_nope . k_up per head (torch.einsum "...nd,ndk->...nk", in bf16
      // whatever the run's FP8: not a TransformerEngine module). Taken as one GEMM of
      // T x heads rows: the same FLOPs as the batched one; the per-head weights' bytes
      // (heads x qk_nope x kvl) are read once, not once a head.
      b.bf16_linear("q_absorb", D.T * D.heads, m.mla.qk_nope_head_dim, D.kvl);
    } else {
      b.linear("kv_b_proj", D.T, D.kvl, D.heads * (m.mla.qk_nope_head_dim + D.dv));
    }
    // RoPE on the rope parts: q's heads x qk_rope_head_dim and the one shared k_pe.
    const double el = D.T * (D.heads * D.dr + D.dr);
    rope(el);
    // q = [q_nope, q_pe]; k = [k_nope, k_pe broadcast to every head]: read the parts,
    // write q and k (backward: the slices back). Absorbed: q' = [q_absorbed, q_pe] and the
    // one k = [latent, k_pe], each read and written once.
    const double cat =
        D.absorbed ? 2 * D.e * D.T * (D.core_q + D.core_kv)
                   : D.e * D.T * (3 * D.heads * D.qk + D.heads * m.mla.qk_nope_head_dim + D.dr);
    b.elementwise("qk_concat", cat, cat, 0, 2, 2, 0);
    b.set_modules(0);
  } else if (st.sequence_parallel)
    b.tp_collective("qkv_all_gather", Collective::all_gather, Collective::reduce_scatter,
                    D.e * D.Hn);
  if (D.is_mla) {
    // q, k and v came from the latent projections above.
  } else if (D.eager) {
    b.linear("qkv_proj", D.T, D.h, D.q_cols + 2 * D.kv_cols, 3, 2);  // HF: separate q, k, v
  } else if (D.llama) {
    // Megatron's linear_qkv; an output gate (ModelShape::attention_output_gate) widens q.
    b.linear("qkv_proj", D.T, D.h, D.q_cols * (m.attention_output_gate ? 2 : 1) + 2 * D.kv_cols);
  } else {
    b.linear("qkv_proj", D.T, D.h, D.q_cols + 2 * D.kv_cols);
    // Its bias gradient: a reduction of the output gradient over the tokens.
    const double qkv_out = D.T * (D.q_cols + 2 * D.kv_cols);
    b.elementwise("qkv_bias", 0, 0, D.e * qkv_out, 0, 0, 1, D.q_cols + 2 * D.kv_cols, 1);
  }
  if (D.llama && !D.is_mla && m.rotary) rope(D.T * (D.q_cols + D.kv_cols));
  // A sliding window (D.window > 0): the fused kernels skip the masked tiles, so the core's
  // FLOPs scale by the window's share of the causal pairs (causal_attention_pairs); the
  // bytes stay. Under Ulysses each rank runs all s tokens of its heads, the same share.
  const bool windowed = D.window > 0 && D.window < D.s;
  if (windowed && st.cp_ring_ranks() > 1)
    throw ShapeError(
        "a sliding window under the load-balanced context-parallel ring (cp_comm p2p or "
        "a2a+p2p): TransformerEngine runs windows only with a2a or all_gather context "
        "parallelism");
  // A chunked window (Llama 4) keeps the causal triangle of each chunk alone.
  const double pairs = m.chunked_window ? chunked_attention_pairs(D.s, D.window)
                                        : causal_attention_pairs(D.s, D.window);
  const double window_share = windowed ? pairs / causal_attention_pairs(D.s, 0) : 1.0;
  double core_f = 0, core_flops = 0;
  // core_attn re-runs the core and, under cp, its exchanges (TransformerEngine's
  // context-parallel attention is one autograd function).
  b.set_modules(module_bit(RecomputeModule::core_attn));
  // DeepSeek sparse attention: the indexer runs inside the core attention module
  // (Megatron-Core's DSAttention builds and calls it), so core_attn re-runs it too.
  if (D.dsa) dsa_indexer(b, D, hw, st);
  if (D.is_mla) {
    // Flash attention with q/k heads of qk_nope + qk_rope and v heads of v_head_dim:
    // causal QK^T over qk columns and PV over dv columns, half the s x s computed each.
    // DSA keeps min(i + 1, k) keys of query i (D.dsa_share of the causal pairs), in the
    // absorbed form at widths kvl + dr and kvl (D.core_qk, D.core_dv), and reads each
    // query's k indices (int64).
    core_flops =
        2 * D.T * D.s * D.heads * (D.core_qk + D.core_dv) * 0.5 * window_share * D.dsa_share;
    const double io = D.e * D.T * (D.core_q + D.core_kv + D.core_out) +  // q, k, v, output
                      (D.dsa ? 8 * D.T * D.kk : 0.0);
    core_f = b.roof(core_flops, io, hw.attention_efficiency) + b.launches(1);
    b.add("attention", core_f,
          b.roof(2.5 * core_flops, 2 * io, hw.attention_backward_efficiency) + b.launches(2), 0.0,
          KernelClass::attention);
  } else if (m.flash_attention) {
    // Causal: half of the s x s scores computed. Backward re-forms the scores and runs
    // four more matmuls: 2.5x the forward FLOPs.
    core_flops = 2 * 2 * D.T * D.s * D.q_cols * 0.5 * window_share;
    const double io = D.e * D.T * (2 * D.q_cols + 2 * D.kv_cols);
    // Below head dim 128 the fused kernel runs slower (attention_head_dim_factor).
    const double hd = attention_head_dim_factor(D.d);
    core_f = b.roof(core_flops, io, hw.attention_efficiency * hd) + b.launches(1);
    b.add("attention", core_f,
          b.roof(2.5 * core_flops, 2 * io, hw.attention_backward_efficiency * hd) + b.launches(2),
          0.0, KernelClass::attention);
  } else {
    // Megatron's unfused core: QK^T and xV batched GEMMs over the full s x s (the mask is
    // applied after), fused scale-mask-softmax, dropout on the probabilities. A window
    // saves it nothing: the masked scores are computed all the same.
    core_flops = 2 * 2 * D.T * D.s * D.q_cols;
    const double io = D.e * (D.T * (D.q_cols + D.kv_cols) + D.S2);
    const double bmm = b.roof(core_flops / 2, io, hw.matmul_efficiency) + b.launches(1);
    const double bmm_b = b.roof(core_flops / 2, io, hw.matmul_backward_efficiency) + b.launches(1);
    const double softmax_f = b.memory(2 * D.e * D.S2) + b.launches(1);
    const double softmax_i = b.memory(3 * D.e * D.S2) + b.launches(1);
    const double drop_f = m.dropout ? b.memory((2 * D.e + 1) * D.S2) + b.launches(1) : 0.0;
    const double drop_i = m.dropout ? b.memory((2 * D.e + 1) * D.S2) + b.launches(1) : 0.0;
    core_f = 2 * bmm + softmax_f + drop_f;
    b.add("attention", core_f, 4 * bmm_b + softmax_i + drop_i, 0.0, KernelClass::attention);
  }
  b.count_flops(core_flops);
  if (st.cp > 1)
    cp_exchange(b, hw, st, D.T, core_f, b.cost().ops.back().backward_input_s,
                D.is_mla ? D.core_kv : 2 * D.kv_cols,
                D.is_mla ? D.core_q + D.core_kv : D.q_cols + 2 * D.kv_cols,
                D.is_mla ? D.core_out : D.q_cols);
  b.set_modules(0);
  if (D.absorbed) {
    // v's up projection of the core's latent output per head (the second einsum,
    // _apply_absorbed_v_up_projection; bf16), outside the core attention module.
    b.bf16_linear("v_up", D.T * D.heads, D.kvl, D.dv);
  }
  if (m.attention_output_gate) {
    // Qwen3-Next: output x sigmoid(gate), one fused kernel each way (read both, write one;
    // backward read the gradient and both, write two).
    const double o = D.e * D.T * D.q_cols;
    b.elementwise("output_gate", 3 * o, 5 * o, 0, 1, 1, 0);
  }
  b.linear("out_proj", D.T, D.o_cols, D.h);
  b.tp_collective(st.sequence_parallel ? "out_reduce_scatter" : "out_all_reduce",
                  st.sequence_parallel ? Collective::reduce_scatter : Collective::all_reduce,
                  st.sequence_parallel ? Collective::all_gather : Collective::all_reduce,
                  D.e * D.Hn);
  // Residual add (gpt: fused bias-dropout-add, which also writes a 1-byte mask; its
  // weight-grad is the bias gradient of the projection before it).
  // Gemma 2 and 3 (ModelShape::post_norms): an RMSNorm of the attention output before the
  // residual add, as the input norm costs it.
  if (m.post_norms)
    b.elementwise("post_attention_norm", D.norm.f * D.Hs, D.norm.i * D.Hs, D.norm.w * D.Hs,
                  D.norm.kf, D.norm.ki, D.norm.kw, D.h, 1);
  b.elementwise("residual_1", D.add_f, D.add_f, D.llama ? 0.0 : D.e * D.Hs, 1, 1, 1, D.add_bias, 1);
  return core_flops;
}

/// DeepSeek sparse attention's lightning indexer (ModelShape::dsa; DeepSeek-AI 2025, arXiv
/// 2512.02556, sec. 2.1; Megatron-Core's DSAIndexer and DSAttention, NVIDIA/Megatron-LM
/// d98e8a64 megatron/core/transformer/experimental_attention_variant/dsa.py, read). Per
/// device, on its T tokens (the indexer's projections are duplicated over tp, so every tp
/// rank runs all of them, heads included):
///   indexer_all_gather  under sequence parallelism the hidden state x gathered over tp
///                       (forward_before_topk; the q latent rides MLA's latent gather)
///   indexer_wq_b, indexer_wk, indexer_weights_proj
///                       T x q_in -> Hi di, T x h -> di, T x h -> Hi
///   indexer_rope_norm   the key's LayerNorm, RoPE on q and k, the Hadamard rotation
///   indexer_scores      I(t, s) = sum_j w(t, j) ReLU(q(t, j) . k(s)) over the causal pairs
///                       (half of T x s, as the core counts them): 2 Hi (di + 1) FLOPs a
///                       pair (the dot products, then the weighting), in FP8 when the run
///                       uses FP8 GEMMs (the paper runs the indexer in FP8), the fp32 scores
///                       written (4 T s bytes)
///   indexer_topk        memory-bound: read the scores, write T x k int64 indices
///   indexer_loss        (indexer_loss) the KL target, the main attention's logits at the k
///                       selected keys over this device's heads: 2 heads qk FLOPs a selected
///                       pair, forward only (a detached target), and its tp all-reduce
///                       (indexer_loss_all_reduce, 4 T k bytes)
/// Backward: the indexer's input is detached (dsa.py: `x = x.detach(); qr = qr.detach()`),
/// so nothing reaches the main model: no input-grad GEMMs and no collective mirrors. With
/// indexer_loss the projections' weight-grads run and the scores' gradient runs over the
/// selected pairs (the sparse KL loss: 2x their forward FLOPs, bf16); without it the
/// indexer runs under no_grad and has no backward at all. Saved for backward (dsa_saved):
/// the indices (8 T k), and with indexer_loss q, k (bf16), the fp32 weights, and under
/// sequence parallelism the gathered x the weight-grads of indexer_wk and
/// indexer_weights_proj read (Megatron's FusedDSAIndexerLoss keeps q, weights, k and the
/// indices; the main query and key it also keeps are the core's own).
void dsa_indexer(Builder& b, const LayerDims& D, const HardwareSpec& hw, const CostSettings& st) {
  if (st.cp > 1)
    throw ShapeError(
        "DeepSeek sparse attention under context parallelism (cp > 1) is not modelled: "
        "Megatron-Core gathers the indexer's keys over the cp group, which bmpipe does not cost");
  const double e = D.e, T = D.T, s = D.s, Hi = D.Hi, di = D.di, kk = D.kk;
  const bool loss = D.dsa_loss;
  const bool sp = st.sequence_parallel && st.tp > 1;
  LayerCost& c = b.cost();
  // Drops the backward of the sub-ops from `first` on: the input-grad of the GEMMs (the
  // indexer's input is detached), and everything without the indexer loss.
  const auto detached = [&](std::size_t from) {
    for (std::size_t i = from; i < c.ops.size(); ++i) {
      SubOpCost& op = c.ops[i];
      const bool drop_i = !loss || op.kind == KernelClass::gemm;
      const double di_s = drop_i ? op.backward_input_s : 0.0;
      const double dw_s = loss ? 0.0 : op.backward_weight_s;
      op.backward_input_s -= di_s;
      op.backward_weight_s -= dw_s;
      c.backward_input_s -= di_s;
      c.backward_weight_s -= dw_s;
    }
  };
  const std::size_t first = c.ops.size();
  if (sp)
    b.add("indexer_all_gather",
          collective_time_s(hw, Collective::all_gather, st.tp, e * D.Hn, st.tp_crosses_nodes), 0.0,
          0.0);
  const double q_in = D.ql > 0 ? D.ql : D.h;
  b.linear("indexer_wq_b", T, q_in, Hi * di);
  b.linear("indexer_wk", T, D.h, di);
  b.linear("indexer_weights_proj", T, D.h, Hi);
  // The key's LayerNorm (T x di), RoPE on the rotary part of q and k, the Hadamard
  // rotation of both: each reads and writes its tensor once (one kernel each; backward
  // reads the gradient too), the norm's scale and bias getting gradients.
  const double rot = T * (Hi + 1);
  const double fb = e * (2 * T * di + 2 * rot * D.dr + 2 * rot * di);
  const double ib = e * (3 * T * di + 2 * rot * D.dr + 2 * rot * di);
  b.elementwise("indexer_rope_norm", fb, ib, 2 * e * T * di, 5, 5, 1, 2 * di, 2);
  // The scores: FP8 operands (one byte, the blockwise scale aside) under an FP8 run on a
  // device with an FP8 peak, else dtype; fp32 weights in, fp32 scores out.
  const bool fp8 = st.fp8 != Fp8::none && hw.fp8_peak_tflops > 0;
  const double peak = (fp8 ? hw.fp8_peak_tflops * hw.fp8_matmul_scale : hw.peak_tflops) * 1e12;
  const double op_bytes = fp8 ? 1.0 : e;
  const double pairs = T * s * 0.5;  // the core's convention: half of T x s
  const double score_flops = 2 * pairs * Hi * (di + 1);
  const double score_bytes = op_bytes * (T * Hi * di + T * di) + 4 * T * Hi + 4 * T * s;
  const double score_f =
      std::max(score_flops / (peak * hw.attention_efficiency), b.memory(score_bytes)) +
      b.launches(1);
  const double grad_flops = 2 * score_flops * D.dsa_share;
  const double grad_bytes = 2 * (e * (T * Hi * di + T * di) + 4 * T * Hi) + 8 * T * kk;
  const double score_i =
      b.roof(grad_flops, grad_bytes, hw.attention_backward_efficiency) + b.launches(2);
  b.add("indexer_scores", score_f, score_i, 0.0, KernelClass::attention);
  b.count_flops(score_flops);
  b.elementwise("indexer_topk", 4 * T * s + 8 * T * kk, 0, 0, 1, 0, 0);
  if (loss) {
    // The main logits of the core's own q and k: in the absorbed form q' of heads x
    // (kvl + dr) against the one shared k (compute_dsa_indexer_loss, dsa.py).
    const double teacher = 2 * pairs * D.dsa_share * D.heads * D.core_qk;
    // q and k read, the fp32 logits at the selected keys written, then the head sum and
    // softmax over them (read, write).
    const double k_cols = D.absorbed ? D.core_qk : D.heads * D.qk;
    const double tb = e * T * (D.core_q + k_cols) + 3 * 4 * T * kk;
    b.add("indexer_loss", b.roof(teacher, tb, hw.attention_efficiency) + b.launches(3), 0.0, 0.0,
          KernelClass::attention);
    b.count_flops(teacher);
    if (st.tp > 1)
      b.add("indexer_loss_all_reduce",
            collective_time_s(hw, Collective::all_reduce, st.tp, 4 * T * kk, st.tp_crosses_nodes),
            0.0, 0.0);
  }
  detached(first);
}

double dsa_saved(const LayerDims& D, const CostSettings& st) {
  if (!D.dsa) return 0.0;
  const double T = D.T;
  double saved = 8 * T * D.kk;  // the indices
  if (D.dsa_loss)
    saved += D.e * (T * D.Hi * D.di + T * D.di) + 4 * T * D.Hi +
             (st.sequence_parallel && st.tp > 1 ? D.e * D.Hn : 0.0);
  return saved;
}

/// The MLP block's sub-ops (dense or mixture of experts), the post-attention norm to the
/// second residual add, and the tp collectives TransformerEngine hides; returns the index
/// of the layer's last sub-op that saves a tensor for backward (where an early-stopping
/// checkpoint stops recomputing).
std::size_t mlp_block(Builder& b, const LayerDims& D, const ModelShape& m, const HardwareSpec& hw,
                      const CostSettings& st, bool moe_mlp) {
  b.set_scope(moe_mlp ? GraphScope::moe : GraphScope::mlp);
  // Recompute modules (RecomputeModule): an MoE layer's pre-MLP norm is a TENorm of its own
  // (the router and the shared expert read it), which layernorm re-runs; a dense MLP's is
  // fused into linear_fc1 and belongs to the mlp module's checkpoint.
  const RecomputeModules mlp_bit = module_bit(RecomputeModule::mlp);
  const RecomputeModules moe_bit = module_bit(RecomputeModule::moe);
  b.set_modules(moe_mlp ? module_bit(RecomputeModule::layernorm) : mlp_bit);
  b.elementwise("post_norm", D.norm.f * D.Hs, D.norm.i * D.Hs, D.norm.w * D.Hs, D.norm.kf,
                D.norm.ki, D.norm.kw, D.norm_tensors * D.h, D.norm_tensors);
  b.set_modules(moe_mlp ? moe_bit : mlp_bit);
  if (st.sequence_parallel)
    b.tp_collective("mlp_all_gather", Collective::all_gather, Collective::reduce_scatter,
                    D.e * D.Hn);
  // The mixture-of-experts MLP (moe_decoder_layer_cost's comment; its rows: LayerDims).
  const MoeShape& x = m.moe;
  std::size_t moe_last_saving_op = 0;
  if (moe_mlp) {
    b.set_scope(GraphScope::moe_router);
    b.bf16_linear("router", D.Tm, D.h, D.E);  // Megatron's router stays in bf16/fp32
    // Softmax (or sigmoid) over fp32 logits, then top-k: read and write T x E fp32, write
    // the T x top_k indices (int64) and weights (fp32); backward the same over the probs.
    b.elementwise("router_topk", 8 * D.Tm * D.E + 12 * D.Tk, 8 * D.Tm * D.E + 4 * D.Tk, 0, 2, 2, 0);
    b.set_scope(GraphScope::moe_preprocess);
    // A latent MoE (MoeShape::latent_size) projects the routed tokens down after the route:
    // MoELayer.preprocess runs fc1_latent_proj (a TELinear h -> L, parallel_mode
    // "duplicated": whole on every tp rank, on the rank's own Tm tokens, no tp collective;
    // an FP8 GEMM under FP8) before dispatch_preprocess (NVIDIA/Megatron-LM d98e8a64
    // megatron/core/transformer/moe/moe_layer.py). It is inside the moe_preprocess CUDA
    // graph and the moe recompute module's checkpoint (custom_forward), as the permute is.
    if (D.L > 0) b.linear("fc1_latent_proj", D.Tm, D.h, D.L);
    // Permute: gather T x X into T x top_k rows in expert order (X: the hidden width, or
    // the latent's); its backward scatters the rows' gradients back (read top_k rows per
    // token, write one).
    b.elementwise("permute", D.e * (D.Tm * D.X + D.Tk * D.X), D.e * (D.Tk * D.X + D.Tm * D.X), 0, 1,
                  1, 0);
    b.set_scope(GraphScope::moe);
    // Megatron-Core's MoEAlltoAllTokenDispatcher (NVIDIA/Megatron-LM
    // d98e8a64ddf34856e74b24714e3bedb2f5a39553, megatron/core/transformer/moe/
    // token_dispatcher.py: token_dispatch and token_combine each call all_to_all over the
    // ep group on the permuted T x top_k rows; the autograd backward of each is the reverse
    // all_to_all on the gradients, same volume). Exposed: nothing overlaps them here. A
    // latent MoE's rows are L wide (the flex dispatcher's hidden_dim is moe_latent_size,
    // token_dispatcher.py: 1535).
    const double a2a = all_to_all_time_s(hw, st.ep, D.e * D.Tk * D.X, st.ep_crosses_nodes);
    // DeepEP (deepep_time_s) moves each token once a domain and once a device instead. The
    // precisions of DeepSeek-V3's training (arXiv 2412.19437, sec. 3.3.2): with FP8 GEMMs
    // the forward dispatch and the backward one (the gradients before the down-projection)
    // go in FP8 with one fp32 scale per 128 values (DeepEP's 1 + 4/128 bytes an element),
    // both combines in bf16.
    const double fp8_row = st.fp8 != Fp8::none ? 1.0 + 4.0 / 128.0 : D.e;
    const bool deepep = st.moe_dispatcher == MoeDispatcher::deepep;
    const auto deepep_s = [&](double bytes) {
      return deepep_time_s(hw, x, st.ep, st.ep_per_domain, D.Tm, bytes * D.X);
    };
    const double dispatch_f = deepep ? deepep_s(fp8_row) : a2a;
    const double combine_f = deepep ? deepep_s(D.e) : a2a;
    // The backward of a dispatch is a combine, and of a combine a dispatch.
    if (st.ep > 1) b.add("a2a-dispatch", dispatch_f, combine_f, 0.0);
    // Expert tensor parallelism (same file: dispatch_postprocess all-gathers the rows the
    // all_to_all brought, gather_from_sequence_parallel_region over the expert tp group,
    // and combine_preprocess reduce-scatters the experts' outputs back,
    // reduce_scatter_to_sequence_parallel_region; each one's autograd backward is the
    // other). The gathered buffer: etp x Tmax rows x X. Beside it, dispatch_postprocess
    // all-gathers the rows' router probabilities (global_probs, one value a row) in a call of
    // its own: a collective's latency for 1/h of the bytes, counted at 4 bytes a value (the
    // router's softmax runs in fp32; at bf16 it would be half of a small term). Its backward,
    // the probabilities' gradients, is the reduce-scatter.
    const auto etp_op = [&](Collective c) {
      return collective_time_s(hw, c, st.etp, D.e * D.Tg * D.X, st.etp_crosses_nodes);
    };
    const auto etp_probs = [&](Collective c) {
      return collective_time_s(hw, c, st.etp, 4.0 * D.Tg, st.etp_crosses_nodes);
    };
    if (st.etp > 1) {
      b.add("etp-all-gather", etp_op(Collective::all_gather), etp_op(Collective::reduce_scatter),
            0.0);
      b.add("etp-probs-all-gather", etp_probs(Collective::all_gather),
            etp_probs(Collective::reduce_scatter), 0.0);
    }
    // The experts read and write X columns (a latent MoE's linear_fc1 is L -> ffn and its
    // linear_fc2 ffn -> L: experts.py at the same commit).
    b.grouped(D.relu2 ? "experts_fc1" : "experts_gate_up", D.Tg, D.X, D.in_factor * D.ef,
              D.local_experts, D.etp * D.Tk);
    b.set_modules(moe_bit | module_bit(RecomputeModule::moe_act));
    b.elementwise(D.relu2 ? "experts_relu2" : "experts_swiglu", D.glu.f * D.Tg * D.ef,
                  D.glu.i * D.Tg * D.ef, 0, D.glu.kf, D.glu.ki, 0);
    b.set_modules(moe_bit);
    b.grouped("experts_down", D.Tg, D.ef, D.X, D.local_experts, D.etp * D.Tk);
    if (st.etp > 1)
      b.add("etp-reduce-scatter", etp_op(Collective::reduce_scatter),
            etp_op(Collective::all_gather), 0.0);
    if (st.ep > 1) b.add("a2a-combine", combine_f, dispatch_f, 0.0);
    // Unpermute: sum the rows back to T x h; backward: the rows' gradients (read T x h,
    // write top_k rows). HF's eager blocks scale the rows by their router weights here
    // (read the weights; a second backward kernel for the weights' gradient reads the
    // saved rows and the gradient again). Megatron-Core scales them in the experts'
    // activation instead and unpermutes without them (saved_activations gives the
    // sources): its unpermute is the sum alone, and the weights' gradient comes out of the
    // activation's backward, which reads one value a row more (not charged).
    const double weights = D.eager ? 4 * D.Tk : 0.0;
    const double reread = D.eager ? D.e * D.Tk * D.X : 0.0;
    moe_last_saving_op = b.cost().ops.size();
    b.elementwise("unpermute", D.e * (D.Tk * D.X + D.Tm * D.X) + weights,
                  D.e * (D.Tm * D.X + D.Tk * D.X) + reread + weights, 0, 1, D.eager ? 2 : 1, 0);
    if (D.L > 0) {
      // MoELayer.postprocess: fc2_latent_proj (L -> h, duplicated as fc1_latent_proj is) on
      // the combined latent tokens, before the shared expert's output is added. Outside the
      // moe_router / moe_preprocess graphs; inside the moe module's checkpoint. It keeps
      // its input for backward: the layer's last saving op when no shared expert follows.
      moe_last_saving_op = b.cost().ops.size();
      b.linear("fc2_latent_proj", D.Tm, D.L, D.h);
    }
    if (x.shared_ffn > 0) {
      // The shared expert is a tp-split MLP over every token of the sequence: under sequence
      // parallelism it reads the gathered hidden states (mlp_all_gather's T x h; Megatron-
      // Core's SharedExpertMLP gathers the sequence before its fc1, NVIDIA/Megatron-LM
      // d98e8a64 megatron/core/transformer/moe/shared_experts.py) and reduce-scatters its
      // output, so its GEMMs have T rows and shared_ffn / tp columns, not T / tp rows.
      b.set_modules(moe_bit | module_bit(RecomputeModule::shared_experts));
      if (D.relu2)
        b.linear("shared_fc1", D.T, D.h, D.sf);
      else if (D.eager)
        b.linear("shared_gate_up", D.T, D.h, 2 * D.sf, 2, 1);  // HF: separate gate and up
      else
        b.linear("shared_gate_up", D.T, D.h, 2 * D.sf);
      b.elementwise(D.relu2 ? "shared_relu2" : "shared_swiglu", D.glu.f * D.T * D.sf,
                    D.glu.i * D.T * D.sf, 0, D.glu.kf, D.glu.ki, 0);
      moe_last_saving_op = b.cost().ops.size();
      b.linear("shared_down", D.T, D.sf, D.h);
      if (st.sequence_parallel)
        b.tp_collective("shared_reduce_scatter", Collective::reduce_scatter, Collective::all_gather,
                        D.e * D.Hn);
      b.set_modules(moe_bit);
    }
  } else if (D.llama && D.relu2) {
    b.linear("fc1", D.T, D.h, D.f);
    b.elementwise("relu2", D.glu.f * D.F, D.glu.i * D.F, 0, D.glu.kf, D.glu.ki, 0);
  } else if (D.llama) {
    if (D.eager)
      b.linear("gate_up_proj", D.T, D.h, 2 * D.f, 2, 1);  // HF: separate gate and up
    else
      b.linear("gate_up_proj", D.T, D.h, 2 * D.f);  // Megatron's linear_fc1
    b.elementwise("swiglu", D.glu.f * D.F, D.glu.i * D.F, 0, D.glu.kf, D.glu.ki,
                  0);  // SiLU(gate) * up
  } else {
    b.linear("fc1", D.T, D.h, D.f);
    // Fused bias-GeLU; the bias gradient is a reduction over the tokens.
    b.elementwise("gelu", 2 * D.e * D.F, 3 * D.e * D.F, D.e * D.F, 1, 1, 1, D.f, 1);
  }
  // The MLP's output projection saves the layer's last tensor for backward (its input):
  // an early-stopping recompute ends before it (see recompute_extra_s).
  std::size_t last_saving_op = moe_last_saving_op;
  if (!moe_mlp) {
    last_saving_op = b.cost().ops.size();
    b.linear(D.llama && !D.relu2 ? "down_proj" : "fc2", D.T, D.f, D.h);
    b.tp_collective(st.sequence_parallel ? "mlp_reduce_scatter" : "mlp_all_reduce",
                    st.sequence_parallel ? Collective::reduce_scatter : Collective::all_reduce,
                    st.sequence_parallel ? Collective::all_gather : Collective::all_reduce,
                    D.e * D.Hn);
  }
  b.set_modules(0);
  if (m.post_norms) {
    // The MLP output's RMSNorm (Gemma's post_feedforward_layernorm) keeps that output and,
    // eagerly, tensors of its own: an early-stopping checkpoint re-runs the MLP and it.
    b.elementwise("post_mlp_norm", D.norm.f * D.Hs, D.norm.i * D.Hs, D.norm.w * D.Hs, D.norm.kf,
                  D.norm.ki, D.norm.kw, D.h, 1);
    last_saving_op = b.cost().ops.size();
  }
  b.elementwise("residual_2", D.add_f, D.add_f, D.llama ? 0.0 : D.e * D.Hs, 1, 1, 1, D.add_bias, 1);
  if (st.tp_comm_overlap && st.sequence_parallel) {
    // TransformerEngine's userbuffers hide the collectives of the dense GEMMs. MLA's latent
    // all-gather, the MoE block's and the experts' collectives stay exposed: bmpipe does
    // not model an overlap for them.
    b.overlap_tp("qkv_all_gather", "qkv_proj", true);
    b.overlap_tp("q_all_gather", "q_proj", true);
    b.overlap_tp("out_reduce_scatter", "out_proj", false);
    if (!moe_mlp) {
      const bool glu = D.llama && !D.relu2;
      b.overlap_tp("mlp_all_gather", glu ? "gate_up_proj" : "fc1", true);
      b.overlap_tp("mlp_reduce_scatter", glu ? "down_proj" : "fc2", false);
    }
  }
  return last_saving_op;
}

/// Each recompute mode's re-run forward, per sub-op and summed (LayerCost::recompute_extra_s).
void mark_recompute(LayerCost& c, const LayerDims& D, const CostSettings& st,
                    std::size_t last_saving_op) {
  // selective re-runs the sub-ops of the chosen modules (the attention core by default);
  // full re-runs the forward, up to the last saving op under PyTorch's early-stopping
  // checkpoint (llama as HF runs it), all of it under Megatron-LM's reentrant one (gpt, and
  // llama with fused kernels). Each mode's FLOPs are its re-run sub-ops'.
  const std::size_t full_end = D.eager ? last_saving_op : c.ops.size();
  for (std::size_t k = 0; k < c.ops.size(); ++k) {
    SubOpCost& op = c.ops[k];
    if ((op.modules & st.recompute_modules) != 0) {
      op.recompute_s[Recompute::selective] = op.forward_s;
      c.recompute_flops[Recompute::selective] += op.forward_flops;
    }
    if (k < full_end) op.recompute_s[Recompute::full] = op.forward_s;
    for (Recompute r : kRecomputingModes) c.recompute_extra_s[r] += op.recompute_s[r];
  }
}

double latent_saved(const LayerDims& D, const CostSettings& st) {
  if (!(D.L > 0)) return 0.0;
  // fc2_latent_proj keeps its input, the combined latent tokens (Tm x L, its FP8 cast under
  // FP8); fc1_latent_proj reads the pre-MLP norm's output, which the router keeps in bf16
  // (one tensor in bf16 training), and under FP8 keeps its own FP8 cast beside it
  // (TransformerEngine's Linear saves the quantized input; MoELayer's
  // set_for_recompute_pre_mlp_layernorm asks the shared expert's fc1 alone for the
  // original). Both are weight-grad inputs too.
  const bool fp8 = st.fp8 != Fp8::none;
  const double gi = fp8 ? Builder::low_precision_bytes(st.fp8_recipe) : D.e;
  return gi * D.Tm * D.L + (fp8 ? gi * D.Hs : 0.0);
}

double modules_freed(const LayerDims& D, const ModelShape& m, const CostSettings& st, MlpKind mlp,
                     double core_only) {
  // Megatron-Core, NVIDIA/Megatron-LM d98e8a64ddf34856e74b24714e3bedb2f5a39553. A normal
  // checkpoint (core_attn, mlp, moe, shared_experts: tensor_parallel.checkpoint) keeps its
  // input and none of the tensors inside; an output-discarding one (layernorm, moe_act,
  // mla_up_proj: CheckpointWithoutOutput, tensor_parallel/random.py) runs its function under
  // no_grad, keeps its inputs and frees its output once the next op has read it. Under
  // FP8 the GEMM that reads a discarded output saves that output (set_save_original_input:
  // transformer_layer.py for the norms, moe/experts.py for moe_act), not its FP8 copy, so
  // the GEMM input's saved bytes (gi an element) go whatever the precision.
  const RecomputeModules set = st.recompute_modules;
  const bool fp8 = st.fp8 != Fp8::none;
  const double gi = fp8 ? Builder::low_precision_bytes(st.fp8_recipe) : D.e;
  const double Ts = D.Hs / D.h;
  const double glu_saved = D.relu2 ? D.e : D.eager ? 3 * D.e : 2 * D.e;
  double freed = has_module(set, RecomputeModule::core_attn) ? core_only : 0.0;
  const bool shared = mlp == MlpKind::moe && m.moe.shared_ffn > 0;
  // The shared expert's SwiGLU (or squared ReLU) and its product; under FP8 its fc1's FP8
  // input beside the router's bf16 one, which layernorm, shared_experts and moe each free
  // (counted once).
  const double shared_saved = shared ? (glu_saved + gi) * D.T * D.sf : 0.0;
  const bool shared_copy_freed =
      shared && fp8 &&
      (set & (module_bit(RecomputeModule::layernorm) | module_bit(RecomputeModule::moe) |
              module_bit(RecomputeModule::shared_experts))) != 0;
  if (shared_copy_freed) freed += gi * D.T * D.h;
  if (has_module(set, RecomputeModule::layernorm)) {
    if (mlp == MlpKind::moe) freed += D.e * D.Hs;  // the pre-MLP norm's output: the router's input
    if (D.is_mla) freed += gi * D.Hs;  // the input norm's output: the down projections' input
  }
  if (has_module(set, RecomputeModule::mla_up_proj) && D.is_mla) {
    // Inside: the up projections' inputs, the latent norms' rstd; out: q, k, v. Kept: the
    // function's inputs, the latents (the norms' inputs, already counted) and k_pe.
    const double q_lat = D.ql > 0 ? D.ql : 0.0;
    // Absorbed: q' and k, and inside, q_nope (the absorption's input).
    freed += gi * D.T * (q_lat + D.kvl) + 4 * D.Ts_att * (D.ql > 0 ? 2 : 1) +
             D.e * D.T * (D.core_q + D.core_kv) - D.e * D.Ts_att * D.dr +
             (D.absorbed ? D.e * D.T * D.heads * m.mla.qk_nope_head_dim : 0.0);
  }
  if (has_module(set, RecomputeModule::mlp) && mlp == MlpKind::dense) {
    // Everything the MLP keeps but its input (the fused norm's input): the norm's rstd,
    // fc1's input, the activation's and fc2's inputs.
    if (D.llama)
      freed += 4 * Ts + gi * D.Hs + (glu_saved + gi) * D.F;
    else
      freed += 8 * Ts + gi * D.Hs + (D.e + gi) * D.F;
  }
  if (has_module(set, RecomputeModule::moe) && mlp == MlpKind::moe) {
    // Everything the MoE block keeps but its input (the norm's output, the router's input).
    freed += 4 * D.Tm * D.E + 12 * D.Tk + gi * D.Tg * D.X + (glu_saved + gi) * D.Tg * D.ef +
             (D.eager ? D.e * D.Tmax * D.X : 4 * D.Tg) + shared_saved +
             latent_saved(D, st);  // saved_activations
    return freed;                  // moe_act and shared_experts free parts of the same tensors
  }
  if (has_module(set, RecomputeModule::moe_act) && mlp == MlpKind::moe)
    freed += gi * D.Tg * D.ef;  // the activation's output: experts_down's input
  if (has_module(set, RecomputeModule::shared_experts)) freed += shared_saved;
  return freed;
}

}  // namespace layer_parts

namespace {

/// What autograd keeps from forward to backward per recompute mode, what the weight-grad
/// still needs, and the FLOPs each mode re-runs.
void saved_activations(LayerCost& c, const LayerDims& D, const ModelShape& m,
                       const CostSettings& st, bool moe_mlp) {
  const MoeShape& x = m.moe;
  // Recompute none first; selective drops what its modules free (modules_freed), full keeps
  // the input.
  const double drop_mask = m.dropout ? 1.0 * D.Hs : 0.0;
  const double Ts = D.Hs / D.h;  // tokens this device normalizes (T / tp under sequence par.)
  double saved = 0;
  double core_only = 0;  // the attention core's own tensors (what core_attn frees)
  // Bytes an element of a tensor that only an FP8 GEMM saves: under training.fp8 the GEMM
  // keeps the FP8 cast of its input, not the bf16 one (TransformerEngine's _Linear.forward,
  // NVIDIA/TransformerEngine d0067d0da6cb01811b8072a7d304f0e00344ce2b,
  // transformer_engine/pytorch/module/linear.py: inputmat = input_quantizer(inputmat), then
  // saved_inputmat = inputmat with only its column-wise (transposed) FP8 data kept for the
  // weight-grad GEMM; GroupedLinear and LayerNormLinear save theirs alike). Norm inputs,
  // the attention core's tensors, the SwiGLU / GeLU inputs and the router's (a bf16 GEMM)
  // stay at dtype bytes. A tensor another op also keeps in bf16 (flash attention's output,
  // which out_proj reads; the router input, which the shared expert reads) stays, and the
  // FP8 GEMM keeps its one-byte copy beside it (fp8_copies). A saved low-precision element
  // carries its scale factors (Builder::low_precision_bytes: NVFP4 0.5625 bytes).
  const bool fp8 = st.fp8 != Fp8::none;
  const double gi = fp8 ? Builder::low_precision_bytes(st.fp8_recipe) : D.e;
  double fp8_copies = 0;
  // out_proj's saved input, the core's output, an element: Megatron-Core sets
  // save_original_input on linear_proj for FP8 recipes but delayed (TE >= 2.6) and for FP4
  // (NVIDIA/Megatron-LM d98e8a64ddf3, megatron/core/transformer/attention.py:428-444,
  // multi_latent_attention.py:235-251: "the output of the fused core_attn is saved by
  // itself, and linear_proj also saves the quantized tensor of this output. Here we set
  // the linear_proj to save the original input tensors"), so it keeps the bf16 output
  // (e), the very tensor flash attention keeps, and no FP8 copy; under delayed scaling (and
  // torchao's rowwise, whose Float8Linear saves its casts) it keeps its FP8 cast (gi). With
  // the core checkpointed (selective, core_attn) flash's own copy is dropped with the
  // checkpoint's insides (tensor_parallel.checkpoint, attention.py:446-495), so the output
  // costs proj_in alone.
  const bool proj_original =
      fp8 && st.fp8_recipe != Fp8Recipe::delayed && st.fp8_recipe != Fp8Recipe::rowwise;
  const double proj_in = proj_original ? D.e : gi;
  // out_proj's input (the core's output), elements, and of them the FP8 copy it keeps.
  const double proj_elems = D.T * (D.is_mla ? D.heads * D.dv : D.q_cols);
  const double proj_fp8_copy = fp8 && !proj_original ? proj_elems : 0.0;
  // The layer input and the two RMSNorms (what rms_norm_saved says, and an fp32 rsqrt per
  // token). A fused norm keeps only its input, and the first one's is the layer input.
  // ModelShape::post_norms: two more, each keeping its input as a norm does (and no
  // recompute module frees them).
  const double post_norms_saved =
      m.post_norms ? 2 * (rms_norm_saved(D.eager, D.e) * D.Hs + 4 * Ts) : 0.0;
  const double norms_saved =
      post_norms_saved + (D.eager ? D.e * D.Hs + 2 * (rms_norm_saved(true, D.e) * D.Hs + 4 * Ts)
                                  : 2 * (D.e * D.Hs + 4 * Ts));
  // SwiGLU keeps gate and up, and eagerly silu(gate) too, per element of its output;
  // squared ReLU its input.
  const double glu_saved = D.relu2 ? D.e : D.eager ? 3 * D.e : 2 * D.e;
  if (moe_mlp) {
    saved += norms_saved;
    saved += gi * D.Hs + D.e * D.Hs;          // inputs of the qkv projection and the router
    saved += 4 * D.Tm * D.E + 12 * D.Tk;      // fp32 router probabilities, top-k indices, weights
    saved += gi * D.Tg * D.X;                 // gathered rows: the experts' input
    saved += (glu_saved + gi) * D.Tg * D.ef;  // SwiGLU; product (experts_down's input)
    // Where the router's weights meet the rows decides what their gradient keeps.
    // Megatron-Core (fused kernels) scales the activation: TEGroupedMLP calls
    // weighted_bias_swiglu_impl(fc1_output, bias, permuted_probs) (NVIDIA/Megatron-LM
    // d98e8a64ddf34856e74b24714e3bedb2f5a39553, megatron/core/transformer/moe/experts.py:966;
    // the fused op-fuser path likewise, experts.py:817 "Scaled activation"), whose autograd
    // function keeps its input and the weights (megatron/core/fusions/fused_bias_swiglu.py:270,
    // fused_weighted_squared_relu.py:74 for squared ReLU), and combine_postprocess unpermutes
    // without probs (token_dispatcher.py:891; moe_utils.py:598 scales the rows only when
    // probs are passed), so the experts' outputs are kept by nothing. What the weights cost
    // is one value a row, at the router's dtype: fp32 (4 bytes; moe_router_dtype fp32, as
    // the DeepEP and HybridEP dispatchers require, token_dispatcher.py:1139, 1316). HF
    // transformers' eager MoE blocks multiply each expert's output by its weight after the
    // down projection (Mixtral's and DeepSeek-V3's `expert_output * weights` before the
    // index_add_), and that multiply keeps the output rows, dtype bytes each (its copy of
    // the weights, a value a row, is not counted).
    if (D.eager)
      saved += D.e * D.Tmax * D.X;  // expert outputs, for the router weights' gradient
    else
      saved += 4 * D.Tg;           // the weights the scaled activation keeps
    saved += latent_saved(D, st);  // a latent MoE's projections (latent_saved)
    if (x.shared_ffn > 0) {
      saved += (glu_saved + gi) * D.T * D.sf;  // the shared expert's SwiGLU; product (its down's)
      if (fp8) fp8_copies += D.T * D.h;        // shared_gate_up's FP8 input beside the router's
    }
  } else if (D.llama) {
    saved += norms_saved;             // (the layer input counted, as the h200 profile does)
    saved += 2 * gi * D.Hs;           // inputs of the qkv and gate/up projections
    saved += (glu_saved + gi) * D.F;  // SwiGLU; product (down_proj's input)
  } else {
    saved += 2 * (D.e * D.Hs + 8 * Ts);  // two LayerNorm inputs (+ fp32 mean, rstd)
    saved += 2 * gi * D.Hs;              // qkv and fc1 inputs
    saved += (D.e + gi) * D.F;           // GeLU input, fc2 input
    saved += 2 * drop_mask;              // after attention and after the MLP
  }
  if (D.is_mla) {
    // The latents' norms (rms_norm_saved, an fp32 rsqrt), the up projections' inputs,
    // q, k (heads x qk), v (heads x dv), and the core output (out_proj's input).
    const double q_lat = D.ql > 0 ? D.ql : 0.0;
    saved += rms_norm_saved(D.eager, D.e) * D.Ts_att * (q_lat + D.kvl) +
             4 * D.Ts_att * (D.ql > 0 ? 2 : 1);
    saved += gi * D.T * (q_lat + D.kvl);
    saved += D.e * D.T * (D.core_q + D.core_kv);
    saved += D.e * D.T * D.core_out;  // flash's output (also out_proj's input)
    // Absorbed: the einsums' inputs, q_nope and the core's latent output (counted above),
    // and v_up's output, out_proj's input.
    if (D.absorbed) saved += D.e * D.T * D.heads * (m.mla.qk_nope_head_dim + D.dv);
    fp8_copies += proj_fp8_copy;
  } else {
    saved += D.e * D.T * (D.q_cols + 2 * D.kv_cols);  // q, k, v (the core's inputs)
    // Core output = out_proj input: flash attention keeps it too (bf16), the unfused
    // core's batched GEMM does not.
    if (m.flash_attention) {
      saved += D.e * D.T * D.q_cols;
      fp8_copies += proj_fp8_copy;
    } else {
      saved += proj_in * proj_elems;
    }
  }
  if (m.flash_attention || D.is_mla) {
    // fp32 logsumexp; DSA's indexer tensors are the core attention module's (dsa_saved).
    core_only = 4 * D.mb * D.heads * D.sl + dsa_saved(D, st);
  } else {
    core_only = D.e * D.S2 + (m.dropout ? (1 + D.e) * D.S2 : 0.0);  // softmax, mask, dropped probs
  }
  saved += gi * fp8_copies;  // (elements; gi bytes each under fp8)
  c.activation_bytes[Recompute::none] = to_bytes(saved + core_only);
  // Where flash attention keeps the core's output (bf16, beside out_proj's FP8 copy), a
  // checkpointed core keeps it through out_proj's saved input alone (proj_in).
  const bool flash_keeps_output = D.is_mla ? !D.absorbed : m.flash_attention;
  const double core_out_freed =
      flash_keeps_output && has_module(st.recompute_modules, RecomputeModule::core_attn)
          ? D.e * D.T * (D.is_mla ? D.core_out : D.q_cols) + gi * proj_fp8_copy -
                proj_in * proj_elems
          : 0.0;
  c.activation_bytes[Recompute::selective] =
      to_bytes(saved + core_only - core_out_freed -
               modules_freed(D, m, st, moe_mlp ? MlpKind::moe : MlpKind::dense, core_only));
  c.activation_bytes[Recompute::full] = to_bytes(D.e * D.Hs);  // only the layer input
  // W needs the inputs of the four projections (qkv and MLP-in: gi Hs each, the router's
  // e Hs; out_proj: the core output; MLP-out: gi F), at gi bytes (their FP8 casts under
  // fp8), and, for the norm scales, the normalized tensors (llama) or the LayerNorm inputs
  // (gpt): e Hs each.
  const double proj_inputs =
      moe_mlp ? gi * D.Hs + D.e * D.Hs + proj_in * D.T * D.o_cols + gi * D.Tg * (D.X + D.ef) +
                    (x.shared_ffn > 0 ? gi * D.T * D.sf + (fp8 ? gi * D.T * D.h : 0.0) : 0.0) +
                    latent_saved(D, st)
              : 2 * gi * D.Hs + proj_in * D.T * D.o_cols + gi * D.F;
  // A trained DSA indexer's weight-grads read the hidden state it gathered under sequence
  // parallelism (without it, the input norm's output counted below).
  const double indexer_inputs =
      D.dsa && D.dsa_loss && st.sequence_parallel && st.tp > 1 ? D.e * D.Hn : 0.0;
  // MLA: the normalized latents, which are also the up projections' inputs (under fp8
  // those keep their FP8 casts: gi T (q_lat + kvl) more).
  const double latents = D.is_mla ? D.T * ((D.ql > 0 ? D.ql : 0.0) + D.kvl) : 0.0;
  const double norm_outputs =
      (m.post_norms ? 4 : 2) * D.e * D.Hs + D.e * latents + (fp8 ? gi * latents : 0.0);
  c.weight_grad_bytes[Recompute::none] = std::min(
      c.activation_bytes[Recompute::none], to_bytes(proj_inputs + norm_outputs + indexer_inputs));
  c.weight_grad_bytes[Recompute::selective] =
      std::min(c.activation_bytes[Recompute::selective], c.weight_grad_bytes[Recompute::none]);
  c.weight_grad_bytes[Recompute::full] = c.activation_bytes[Recompute::full];
  // (recompute_flops[selective]: mark_recompute's sum over the re-run sub-ops.)
  // (An early-stopping checkpoint skips the last saving op: the MLP's output projection.)
  // (Without a shared expert a latent MoE's last saving op is fc2_latent_proj.)
  c.recompute_flops[Recompute::full] =
      c.forward_flops - (!D.eager ? 0.0
                         : moe_mlp
                             ? (x.shared_ffn > 0 ? 2 * D.T * D.sf * D.h : 2 * D.Tm * D.L * D.h)
                             : 2 * D.T * D.f * D.h);

  // What CostSettings::offload_modules move to the host (sim/offload.hpp): each module's
  // input, as counted above. Megatron-Core's module inputs (NVIDIA/Megatron-LM d98e8a64,
  // transformer_config.py offload_modules: "offload the input of ..."): attn_norm and
  // mlp_norm exist only where the norm is a module of its own (MLA's input norm, an MoE
  // layer's pre-MLP norm; a fused norm is an IdentityOp, skipped), the norm keeping its
  // input and an fp32 rsqrt a token; qkv_linear the projection's input (MLA: the down
  // projections'); core_attn q, k and v; attn_proj the core's output (out_proj's input,
  // with its FP8 copy under fp8); expert_fc1 the gathered rows (X wide: a latent MoE's
  // latent); moe_act the scaled
  // activation's input and the router weights it keeps.
  const OffloadModules off = st.offload_modules;
  if (off == 0) return;
  const bool flash = m.flash_attention || D.is_mla;
  const double core_out = D.is_mla ? D.T * D.heads * D.dv : D.T * D.q_cols;
  const double norm_in = D.e * D.Hs + 4 * Ts;
  // Selective recompute's output-discarding modules free some of these inputs first:
  // layernorm (MLA) the down projections' input, mla_up_proj (MLA) q, k and v.
  const auto gone = [&](RecomputeModule r) {
    return D.is_mla && has_module(st.recompute_modules, r);
  };
  PerMode<double> by_mode{};
  for (Recompute mode : {Recompute::none, Recompute::selective}) {
    const bool sel = mode == Recompute::selective;
    double bytes = 0;
    if (offloads(off, OffloadModule::attn_norm) && D.is_mla) bytes += norm_in;
    if (offloads(off, OffloadModule::qkv_linear) && !(sel && gone(RecomputeModule::layernorm)))
      bytes += gi * D.Hs;
    // A checkpointed core moves nothing: Megatron-Core enters the core_attn offload context
    // only when the core is not recomputed (Attention.forward, megatron/core/transformer/
    // attention.py:1552-1606, and MLASelfAttention's, multi_latent_attention.py:380-432, at
    // d98e8a64ddf3), so q, k and v stay as the checkpoint's inputs.
    const bool core_checkpointed =
        sel && has_module(st.recompute_modules, RecomputeModule::core_attn);
    if (offloads(off, OffloadModule::core_attn) && !core_checkpointed &&
        !(sel && gone(RecomputeModule::mla_up_proj)))
      bytes +=
          D.is_mla ? D.e * D.T * (D.core_q + D.core_kv) : D.e * D.T * (D.q_cols + 2 * D.kv_cols);
    // attn_proj: out_proj's input; flash attention's backward keeps the core's output
    // too, unless the core is checkpointed (its output then is out_proj's alone).
    if (offloads(off, OffloadModule::attn_proj))
      bytes += flash && !core_checkpointed
                   ? D.e * core_out + (fp8 && !proj_original ? gi * core_out : 0.0)
                   : proj_in * core_out;
    if (moe_mlp) {
      if (offloads(off, OffloadModule::mlp_norm)) bytes += norm_in;
      if (offloads(off, OffloadModule::expert_fc1)) bytes += gi * D.Tg * D.X;
      if (offloads(off, OffloadModule::moe_act))
        bytes += glu_saved * D.Tg * D.ef + (D.eager ? 0.0 : 4 * D.Tg);
    }
    by_mode[mode] = bytes;
  }
  // Full recompute keeps the layer input alone: nothing of a module's to move.
  for (Recompute mode : {Recompute::none, Recompute::selective})
    c.offload_bytes[mode] = std::min(c.activation_bytes[mode], to_bytes(by_mode[mode]));
}

}  // namespace

namespace layer_parts {

double attention_weights(const LayerDims& D, const ModelShape& m) {
  double w = 2 * D.h * D.q_cols + 2 * D.kv_cols * D.h;  // q, o; k, v
  if (m.attention_bias)
    w += D.q_cols + 2 * D.kv_cols + D.h;
  else if (m.qkv_bias)
    w += D.q_cols + 2 * D.kv_cols;
  if (m.qk_norm) w += 2 * D.d;
  if (m.attention_sinks) w += D.heads;
  if (m.attention_output_gate) w += D.h * D.q_cols;
  return w;
}

}  // namespace layer_parts

namespace {

/// What the layer sends onward and the parameters one device holds (its tp share; an MoE
/// layer's local experts at their etp share).
void layer_params(LayerCost& c, const LayerDims& D, const ModelShape& m, const CostSettings& st,
                  bool moe_mlp) {
  const MoeShape& x = m.moe;
  c.output_bytes = to_bytes(stage_output_bytes(m.architecture, st, D.e * D.Hn));
  const long long kv_params = static_cast<long long>(D.kv_cols * D.h);
  // MLA's attention on this device (ModelShape::attention_params without its norm, the
  // up and output projections at this device's heads).
  const double mla_att =
      (D.ql > 0 ? D.h * D.ql + D.ql + D.ql * D.heads * D.qk : D.h * D.heads * D.qk) +
      D.h * (D.kvl + D.dr) + D.kvl + D.kvl * D.heads * (m.mla.qk_nope_head_dim + D.dv) +
      D.heads * D.dv * D.h +
      (D.dsa ? m.dsa.params(m.hidden_size, D.ql > 0 ? m.mla.q_lora_rank : m.hidden_size)
             : 0.0);  // the DSA indexer, whole on every tp rank
  if (moe_mlp) {
    // Attention (this device's heads), two norms, the extras of ModelShape::
    // attention_params, the router (replicated), the shared expert (tp share) and the
    // local experts (etp share).
    const double att =
        (m.post_norms ? 4 : 2) * D.h +
        (D.is_mla ? mla_att + (m.qk_norm ? 2 * D.d : 0.0) + (m.attention_sinks ? D.heads : 0.0)
                  : attention_weights(D, m));
    const double router =
        D.h * D.E + (x.router_bias ? D.E : 0.0) + (x.router_score_bias ? D.E : 0.0);
    const double in = D.in_factor;
    const double shared = (in + 1) * D.h * D.sf + (x.shared_gate ? D.h : 0.0);
    // A latent MoE's experts are X = L wide; its two projections are replicated over tp
    // (duplicated) and are not experts' parameters (is_expert False: sharded over dp).
    const double expert = (in + 1) * D.X * D.ef + (x.expert_bias ? in * D.ef + D.X : 0.0);
    const double latent = 2 * D.h * D.L;
    c.expert_param_count = static_cast<std::int64_t>(std::llround(D.local_experts * expert));
    c.param_count = static_cast<std::int64_t>(std::llround(att + router + latent + shared)) +
                    c.expert_param_count;
    c.active_param_count =
        static_cast<std::int64_t>(std::llround(att + router + latent + shared + D.top_k * expert));
    return;
  }
  const double mlp = (D.in_factor + 1) * D.h * D.f;
  const double norms = (m.post_norms ? 4 : 2) * D.h;  // RMSNorm scales
  if (D.is_mla)
    c.param_count = static_cast<std::int64_t>(std::llround(mla_att + mlp + norms));
  else if (D.llama)
    c.param_count = static_cast<std::int64_t>(2 * D.h * D.q_cols + 2 * kv_params + mlp + norms +
                                              (m.attention_output_gate ? D.h * D.q_cols : 0.0));
  else
    c.param_count =
        static_cast<std::int64_t>(D.h * (D.q_cols + 2 * D.kv_cols) + D.q_cols + 2 * D.kv_cols +
                                  D.q_cols * D.h + D.h + 2 * D.h * D.f + D.f + D.h + 4 * D.h);
  c.active_param_count = c.param_count;
}

LayerCost decoder_impl(const ModelShape& m, const HardwareSpec& hw, const CostSettings& st,
                       bool moe_mlp, bool windowed) {
  windowed = windowed && m.sliding_window > 0;
  const std::string name =
      std::string(moe_mlp ? "moe_decoder" : "decoder") + (windowed ? ".swa" : "");
  Builder b(hw, st, m.architecture, name);
  LayerDims D = layer_dims(m, st);
  if (windowed) D.window = m.sliding_window;
  attention_block(b, D, m, hw, st);
  const std::size_t last_saving_op = mlp_block(b, D, m, hw, st, moe_mlp);
  LayerCost& c = b.cost();
  mark_recompute(c, D, st, last_saving_op);
  saved_activations(c, D, m, st, moe_mlp);
  layer_params(c, D, m, st, moe_mlp);
  return c;
}
}  // namespace

namespace layer_parts {

/// `c` (built on `hw`) with what the host adds when it cannot issue the layer's kernels as
/// fast as the GPU runs them (HardwareSpec::host_launch_us): the kernels each pass launches
/// outside CUDA graphs are counted from the launch time they cost (`quiet`: the same layer
/// built with kernel_launch_us 0), and a pass takes at least kernels x host_launch_us. The
/// difference is a sub-op "host_launch"; the backward's is split between input-grad and
/// weight-grad as their times are. PyTorch issues kernels ahead of the GPU, so only a pass
/// whose issue time exceeds its GPU time waits on the host.
void add_host_bound(LayerCost& c, const LayerCost& quiet, const HardwareSpec& hw) {
  if (!(hw.host_launch_us > 0) || !(hw.kernel_launch_us > 0)) return;
  const double per_kernel = hw.kernel_launch_us * 1e-6, host = hw.host_launch_us * 1e-6;
  const double kernels_f = (c.forward_s - quiet.forward_s) / per_kernel;
  const double b = c.backward_input_s + c.backward_weight_s;
  const double kernels_b = (b - quiet.backward_input_s - quiet.backward_weight_s) / per_kernel;
  const double f = std::max(0.0, kernels_f * host - c.forward_s);
  const double extra_b = std::max(0.0, kernels_b * host - b);
  const double i = b > 0 ? extra_b * c.backward_input_s / b : extra_b;
  if (f <= 0 && extra_b <= 0) return;
  c.ops.push_back({"host_launch", f, i, extra_b - i, {}, KernelClass::host});
  c.forward_s += f;
  c.backward_input_s += i;
  c.backward_weight_s += extra_b - i;
}

}  // namespace layer_parts

namespace {

/// decoder_impl, host-bound where the host is slower (add_host_bound).
LayerCost decoder_with_host(const ModelShape& m, const HardwareSpec& hw, const CostSettings& st,
                            bool moe_mlp, bool windowed) {
  LayerCost c = decoder_impl(m, hw, st, moe_mlp, windowed);
  if (hw.host_launch_us > 0) {
    HardwareSpec quiet = hw;
    quiet.kernel_launch_us = 0;
    add_host_bound(c, decoder_impl(m, quiet, st, moe_mlp, windowed), hw);
  }
  return c;
}

}  // namespace

LayerCost decoder_layer_cost(const ModelShape& m, const HardwareSpec& hw, const CostSettings& st,
                             bool windowed) {
  LayerCost c = decoder_with_host(m, hw, st, false, windowed);
  add_param_sharding_comm(c, hw, st);
  return c;
}

LayerCost moe_decoder_layer_cost(const ModelShape& m, const HardwareSpec& hw,
                                 const CostSettings& st, bool windowed) {
  if (!m.is_moe() || m.architecture != Architecture::llama)
    throw ShapeError("moe_decoder_layer_cost needs a llama-architecture mixture of experts");
  LayerCost c = decoder_with_host(m, hw, st, true, windowed);
  add_param_sharding_comm(c, hw, st);
  return c;
}

LayerCost mtp_module_cost(const ModelShape& m, const HardwareSpec& hw,
                          const CostSettings& sharded) {
  // ZeRO-3: the module gathers its parameters as one unit, added once at the end.
  CostSettings st = sharded;
  st.param_shard_dp = st.param_shard_edp = 1;
  // Megatron-Core's MultiTokenPredictionLayer (NVIDIA/Megatron-LM
  // d98e8a64ddf34856e74b24714e3bedb2f5a39553, megatron/core/transformer/
  // multi_token_prediction.py): embedding of the next tokens, enorm / hnorm, concat,
  // eh_proj, a transformer layer, then the shared output layer and its loss. Its
  // _proj_and_transformer_layer enters the FP8 context when config.fp8 is set and none
  // under FP4 ("currently ignoring FP4 in MTP layers"): under NVFP4 the module runs bf16.
  if (st.fp8_recipe == Fp8Recipe::nvfp4) st.fp8 = Fp8::none;
  // A hybrid model's block (ModelShape::mtp_pattern): a HybridStack of the pattern's blocks
  // (MultiTokenPredictionLayer builds it with post_layer_norm False: its own
  // final_layernorm, the head's norm below, follows), each as the main model runs its kind.
  LayerCost layer;
  if (!m.mtp_pattern.empty()) {
    layer.name = "mtp_block";
    for (const char symbol : m.mtp_pattern) {
      const LayerCost part = hybrid_layer_cost(m, hw, st, static_cast<HybridKind>(symbol));
      for (SubOpCost op : part.ops) {
        op.name = part.name + "." + op.name;  // "attention.qkv_proj", "moe.router"
        layer.ops.push_back(std::move(op));
      }
      layer.forward_s += part.forward_s;
      layer.backward_input_s += part.backward_input_s;
      layer.backward_weight_s += part.backward_weight_s;
      layer.forward_flops += part.forward_flops;
      layer.fp8_weight_bytes += part.fp8_weight_bytes;
      layer.fp8_gemm_params += part.fp8_gemm_params;
      for (Recompute r : kAllRecompute) {
        layer.recompute_extra_s[r] += part.recompute_extra_s[r];
        layer.recompute_flops[r] += part.recompute_flops[r];
        layer.activation_bytes[r] += part.activation_bytes[r];
        layer.weight_grad_bytes[r] += part.weight_grad_bytes[r];
      }
      layer.param_count += part.param_count;
      layer.active_param_count += part.active_param_count;
      layer.expert_param_count += part.expert_param_count;
    }
  } else {
    const bool last_moe = m.is_moe_layer(m.num_layers - 1);
    layer = last_moe ? moe_decoder_layer_cost(m, hw, st) : decoder_layer_cost(m, hw, st);
  }
  const LayerCost lookup = embedding_cost(m, hw, st);
  const LayerCost head = head_cost(m, hw, st, false);  // the norm only: the matrix is shared
  Builder b(hw, st, m.architecture, "mtp");
  const bool eager = eager_kernels(m.architecture, st);
  const double e = st.dtype_bytes, t = st.tp;
  const double T = st.local_tokens();
  const double h = m.hidden_size;
  const double Hn = T * h, Hs = st.sequence_parallel ? Hn / t : Hn, Ts = Hs / h;
  LayerCost& c = b.cost();
  const auto append = [&c](const LayerCost& part) {
    for (SubOpCost op : part.ops) {
      op.name = "mtp." + op.name;
      c.forward_s += op.forward_s;
      c.backward_input_s += op.backward_input_s;
      c.backward_weight_s += op.backward_weight_s;
      c.ops.push_back(std::move(op));
    }
    c.forward_flops += part.forward_flops;
  };
  append(lookup);
  // enorm (the embedded tokens) and hnorm (the main model's last hidden state): RMSNorms.
  const NormTraffic norm = norm_traffic(eager, e);
  for (const char* name : {"mtp.enorm", "mtp.hnorm"})
    b.elementwise(name, norm.f * Hs, norm.i * Hs, norm.w * Hs, norm.kf, norm.ki, norm.kw, h, 1);
  // The concat of the two (2h wide) into eh_proj, column-parallel over tp, its output
  // gathered back to the full hidden state.
  b.elementwise("mtp.concat", 4 * e * Hs, 4 * e * Hs, 0, 1, 1, 0);
  if (st.sequence_parallel)
    b.tp_collective("mtp.eh_all_gather", Collective::all_gather, Collective::reduce_scatter,
                    2 * e * Hn);
  b.linear("mtp.eh_proj", T, 2 * h, h / t);
  if (st.tp > 1)
    b.tp_collective("mtp.eh_gather", Collective::all_gather, Collective::reduce_scatter, e * Hn);
  append(layer);
  append(head);
  // Recompute acts on the module's decoder layer; the rest always keeps its tensors: the
  // lookup's ids, the two norms (rms_norm_saved, rsqrt), eh_proj's input, and the head's.
  const double own = 2 * (rms_norm_saved(eager, e) * Hs + 4 * Ts) + 2 * e * Hs;
  for (Recompute r : kAllRecompute) {
    c.recompute_extra_s[r] = layer.recompute_extra_s[r];
    c.recompute_flops[r] = layer.recompute_flops[r];
    c.activation_bytes[r] = layer.activation_bytes[r] + lookup.activation_bytes[r] +
                            head.activation_bytes[r] + to_bytes(own);
    c.weight_grad_bytes[r] = layer.weight_grad_bytes[r] + lookup.weight_grad_bytes[r] +
                             head.weight_grad_bytes[r] + to_bytes(2 * e * Hs + e * Hs);
  }
  // (The layer's sub-ops carry their recompute_s over; the others re-run nothing.)
  const std::int64_t own_params =
      static_cast<std::int64_t>(std::llround(2 * h + 2 * h * h / t));  // norms, eh_proj
  c.param_count = own_params + layer.param_count + head.param_count;
  c.active_param_count = own_params + layer.active_param_count + head.active_param_count;
  c.expert_param_count = layer.expert_param_count;
  c.output_bytes = 0;
  add_param_sharding_comm(c, hw, sharded);
  return c;
}

LayerCost embedding_cost(const ModelShape& m, const HardwareSpec& hw, const CostSettings& st) {
  Builder b(hw, st, m.architecture, "embedding");
  const double e = st.dtype_bytes, t = st.vocab_parallel ? st.tp : 1;
  const double T = st.local_tokens();
  const double h = m.hidden_size;
  const double Hn = T * h, Hs = st.sequence_parallel ? Hn / t : Hn;
  // Vocab-parallel lookup: each device writes its rows (others zero), then the tp group
  // sums them. The gradient is a scatter-add into the table: weight-grad only.
  const bool gpt = m.architecture == Architecture::gpt;
  const double pos = gpt ? 3 * e * Hn : 0.0;
  // The table's gradient is dense (PyTorch's embedding backward zero-fills a vocab x h
  // tensor before the scatter-add), then accumulated like any weight's.
  const double table = m.vocab_size / t * h + (gpt ? st.seq_length * h : 0.0);
  b.elementwise("lookup", 2 * e * Hn + pos, 0, 3 * e * Hn + e * table, 2, 0, gpt ? 4 : 3, table,
                gpt ? 2 : 1);
  // Forward only: the first stage needs no gradient of its input, and the backward of
  // the sum is the identity (of the scatter, an all-gather the next layer does anyway).
  // Replicated over tp (CostSettings::vocab_parallel false), every device looks up whole
  // rows and keeps its own slice of the sequence: no collective.
  if (st.tp > 1 && st.vocab_parallel)
    b.add(st.sequence_parallel ? "embed_reduce_scatter" : "embed_all_reduce",
          collective_time_s(
              hw, st.sequence_parallel ? Collective::reduce_scatter : Collective::all_reduce, st.tp,
              e * Hn, st.tp_crosses_nodes),
          0.0, 0.0);
  LayerCost& c = b.cost();
  const double saved = 8 * T + (m.dropout ? Hs : 0.0);  // token ids (+ dropout mask)
  c.activation_bytes.fill(to_bytes(saved));
  c.weight_grad_bytes.fill(to_bytes(8 * T));  // token ids for the scatter-add
  c.output_bytes = to_bytes(stage_output_bytes(m.architecture, st, e * Hn));
  c.param_count =
      static_cast<std::int64_t>(m.vocab_size / t * h) +
      (m.architecture == Architecture::gpt ? static_cast<std::int64_t>(st.seq_length * h) : 0);
  c.active_param_count = c.param_count;
  add_param_sharding_comm(c, hw, st);
  return c;
}

LayerCost head_cost(const ModelShape& m, const HardwareSpec& hw, const CostSettings& st,
                    bool holds_head_weights) {
  Builder b(hw, st, m.architecture, "lm_head");
  b.fp8_gemms(false);  // Megatron runs the output layer in bf16 under FP8
  const bool llama = m.architecture == Architecture::llama;
  const double e = st.dtype_bytes, t = st.tp;
  const double T = st.local_tokens();
  // The head's columns on this device: its vocabulary share, or all of it when replicated
  // over tp (CostSettings::vocab_parallel false).
  const double h = m.hidden_size, v = m.vocab_size / (st.vocab_parallel ? t : 1.0);
  const double Hn = T * h, Hs = st.sequence_parallel ? Hn / t : Hn;
  const double L = T * m.vocab_size / t;  // this device's logits in the (tp-split) loss
  const bool eager = eager_kernels(m.architecture, st);
  const NormTraffic norm = norm_traffic(eager, e);
  b.elementwise("final_norm", norm.f * Hs, norm.i * Hs, 2 * e * Hs, norm.kf, norm.ki, norm.kw,
                (llama ? 1 : 2) * h, llama ? 1 : 2);
  if (st.sequence_parallel)
    b.tp_collective("head_all_gather", Collective::all_gather, Collective::reduce_scatter, e * Hn);
  b.linear("lm_head", T, h, v);
  // Replicated: MindFormers' loss keeps the logits split over tp (its loss_parallel_config
  // keeps model_parallel), so the head's backward first all-gathers their gradient.
  if (!st.vocab_parallel && st.tp > 1)
    b.add("logits_grad_all_gather", 0.0,
          collective_time_s(hw, Collective::all_gather, st.tp, e * T * m.vocab_size,
                            st.tp_crosses_nodes),
          0.0);
  // Vocab-parallel cross-entropy in fp32 (Megatron): cast, max, subtract, exp, sum,
  // normalize forward (~10 fp32 passes); softmax minus one-hot, scale, cast back.
  b.elementwise("cross_entropy", 38 * L, 26 * L, 0, 8, 4, 0);
  if (st.tp > 1) {
    const auto ar = [&](double bytes) {
      return collective_time_s(hw, Collective::all_reduce, st.tp, bytes, st.tp_crosses_nodes);
    };
    b.add("loss_all_reduce", 3 * ar(4 * T), 0.0, 0.0);  // max, sum-exp, target logit
  }
  LayerCost& c = b.cost();
  const double norm_saved =
      llama ? rms_norm_saved(eager, e) * Hs + 4 * Hs / h : e * Hs + 8 * Hs / h;
  // The fp32 logits (softmax) dominate: b * s * V * 4 bytes over tp.
  c.activation_bytes.fill(to_bytes(norm_saved + e * Hn + 4 * L));
  c.weight_grad_bytes.fill(to_bytes(e * Hn + (llama ? e : 2.0 * e) * Hs));  // head input, norm
  c.output_bytes = 0;
  c.param_count =
      static_cast<std::int64_t>(h) + (holds_head_weights ? static_cast<std::int64_t>(v * h) : 0);
  c.active_param_count = c.param_count;
  add_param_sharding_comm(c, hw, st);
  return c;
}

}  // namespace bmpipe
