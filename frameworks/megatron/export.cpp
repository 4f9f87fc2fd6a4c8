#include "frameworks/megatron/export.hpp"

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <numeric>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "frameworks/megatron/formats.hpp"
#include "sim/cost/kernels.hpp"
#include "sim/offload.hpp"

// Sources (read, not copied), cited below by these short names, all Megatron-LM at
// d98e8a64ddf3:
//  [MG-layout] docs/user-guide/features/pipeline_parallel_layout.md and
//              megatron/core/transformer/pipeline_parallel_layer_layout.py.
//  [MG-args]   megatron/training/arguments.py (validate_args).
//  [MG-config] megatron/core/transformer/transformer_config.py (__post_init__ and the
//              recompute_* field docs).
//  [MG-block]  megatron/core/transformer/transformer_block.py (get_num_layers_to_build) and
//              megatron/core/recompute.py (checkpointed forward).
//  [MG-hybrid] megatron/core/models/hybrid/hybrid_layer_allocation.py
//              (select_pipeline_segment: segment vp_stage x pp + pp_rank of the '|'-split
//              pattern), validate_args' hybrid block in [MG-args] (the pattern sets the layer
//              count and the virtual stages; the vpp, layout and account-for flags are
//              refused beside it, and first/last counts beside '|'), hybrid_builders.py (the
//              hybrid stack from --spec) and megatron/core/ssm/mamba_mixer.py (d_conv 4 and
//              chunk_size 128, no flags).
//  [MG-lm]     megatron/core/models/common/language_module/language_module.py
//              (_set_attention_backend).

namespace bmpipe {

namespace {

// ---- Megatron-LM partition ---------------------------------------------------------------

/// The partition flags, simplest first: none (Megatron's even split), first and/or last
/// rank uneven, or the explicit layout, which expresses any partition under interleaved
/// placement.
std::vector<std::string> megatron_partition_flags(const ExportLayout& l) {
  const int layers = static_cast<int>(l.recompute.size());
  std::vector<std::string> flags;
  // [MG-args]: at most one of --num-layers-per-virtual-pipeline-stage,
  // --num-virtual-stages-per-pipeline-rank and --pipeline-model-parallel-layout; with the
  // layout, vpp is the number of stages / pp. Uneven first/last with vpp needs
  // --num-virtual-stages-per-pipeline-rank (the other vpp flag is refused with them).
  const std::string vpp_flag = "--num-virtual-stages-per-pipeline-rank " + std::to_string(l.vpp);
  // MTP layers anywhere but on the last stage, with the loss, need the layout.
  const bool mtp_on_last = l.mtp_per_stage.empty() || l.mtp_per_stage.back() == l.mtp_layers;
  const bool even = std::all_of(l.partition.begin(), l.partition.end(),
                                [&](int n) { return n == l.partition.front(); });
  if (even && mtp_on_last) {
    if (l.vpp > 1) flags.push_back(vpp_flag);
    return flags;
  }
  if (l.pp >= 2 && mtp_on_last) {
    const int first_total = l.partition.front() * l.vpp;
    const int last_total = l.partition[l.pp - 1] * l.vpp;
    struct Candidate {
      std::optional<int> first, last;
    };
    const Candidate candidates[] = {
        {first_total, std::nullopt}, {std::nullopt, last_total}, {first_total, last_total}};
    for (const Candidate& c : candidates) {
      const auto built = megatron_uneven(layers, l.pp, l.vpp, c.first, c.last);
      if (!built || *built != l.partition) continue;
      if (l.vpp > 1) flags.push_back(vpp_flag);
      if (c.first)
        flags.push_back("--decoder-first-pipeline-num-layers " + std::to_string(*c.first));
      if (c.last) flags.push_back("--decoder-last-pipeline-num-layers " + std::to_string(*c.last));
      return flags;
    }
  }
  // Quoted: '|' and '*' are shell metacharacters ([MG-layout] quotes it the same way).
  flags.push_back("--pipeline-model-parallel-layout \"" +
                  megatron_layout_string(l.partition, l.mtp_layers, l.mtp_per_stage) + "\"");
  return flags;
}

/// `m`'s pattern with '|' between the stages of `partition` (layers per stage, in stage
/// order): [MG-hybrid]'s segments, vp_stage x pp + pp_rank, are bmpipe's stages in order. One
/// stage: no '|'. A hybrid MTP block follows, after '/', once a depth.
std::string hybrid_pattern_with_stages(const ModelShape& m, const std::vector<int>& partition) {
  std::string out;
  std::size_t at = 0;
  for (std::size_t s = 0; s < partition.size(); ++s) {
    if (s > 0) out += '|';
    out += m.hybrid_pattern.substr(at, static_cast<std::size_t>(partition[s]));
    at += static_cast<std::size_t>(partition[s]);
  }
  // [MG-hybrid] parse_hybrid_pattern: the MTP block after '/', once a depth.
  for (int d = 0; d < m.mtp_layers && !m.mtp_pattern.empty(); ++d) out += '/' + m.mtp_pattern;
  return out;
}

/// Whether the export states the model's layers: experts, latent attention, MTP modules, a
/// hybrid pattern, squared ReLU, a head width of its own or no RoPE (a plain model's shape is
/// the script's own and is not restated).
bool states_model(const ModelShape& m) {
  return m.is_moe() || m.is_mla() || m.mtp_layers > 0 || m.is_hybrid() || !m.rotary ||
         m.has_windows() || m.mlp_activation == MlpActivation::relu2 ||
         (m.explicit_head_dim > 0 && !m.is_mla());
}

/// The layers of `m` that import reads from flags beside the shape (frameworks/megatron/
/// import.cpp, read_layers_and_attention, read_mlp, read_mamba): the head width
/// (--kv-channels), the MLP's activation with the RMSNorm it needs (--squared-relu,
/// --normalization RMSNorm), and a hybrid model's stack and Mamba mixer; the pattern itself
/// goes where --num-layers would (megatron_job_flags).
std::string megatron_layer_flags(const ModelShape& m, std::vector<std::string>& remove) {
  std::string out;
  auto flag = [&out](const std::string& name, long long v) {
    out += name + " " + std::to_string(v) + "\n";
  };
  // [MG-args]: kv_channels is every attention head's width; MLA has its own.
  if (m.explicit_head_dim > 0 && !m.is_mla()) flag("--kv-channels", m.explicit_head_dim);
  // RoPE on or off as bmpipe costed it (read_position_embedding in import.cpp): off is none;
  // a hybrid's default is none, so RoPE there is stated.
  if (m.architecture == Architecture::llama && !m.rotary)
    out += "--position-embedding-type none\n";
  else if (m.architecture == Architecture::llama && m.is_hybrid())
    out += "--position-embedding-type rope\n";
  const bool relu2 = m.mlp_activation == MlpActivation::relu2;
  if (relu2 || m.is_hybrid()) out += "--normalization RMSNorm\n";
  if (relu2) {
    // [MG-au]: squared ReLU asserts no --swiglu beside it.
    out += "--squared-relu\n";
    remove.emplace_back("--swiglu");
  } else if (m.is_hybrid()) {
    out += "--swiglu\n";
    remove.emplace_back("--squared-relu");
  }
  if (!m.is_hybrid()) return out;
  // hybrid_builders.py builds the hybrid model from --spec: Megatron-Core's hybrid stack.
  out += "--spec megatron.core.models.hybrid.hybrid_layer_specs hybrid_stack_spec\n";
  // The deprecated spelling: Megatron-LM refuses it beside --hybrid-layer-pattern.
  remove.emplace_back("--hybrid-override-pattern");
  if (m.hybrid_pattern.find('M') != std::string::npos) {
    flag("--mamba-num-heads", m.mamba.num_heads);
    flag("--mamba-head-dim", m.mamba.head_dim);
    flag("--mamba-state-dim", m.mamba.state_dim);
    flag("--mamba-num-groups", m.mamba.groups);
  }
  return out;
}

/// The experts, the latent attention and the MTP modules of `m` as Megatron-LM's flags,
/// which import reads back to the same shape (frameworks/megatron/import.cpp,
/// read_experts and read_latent_attention); `remove`: the flags of those groups that the
/// model does not use and a script may have.
std::string megatron_model_flags(const ModelShape& m, int ep, int etp, bool deepep,
                                 double capacity_factor, std::vector<std::string>& remove) {
  std::string out = megatron_layer_flags(m, remove);
  auto flag = [&out](const std::string& name, long long v) {
    out += name + " " + std::to_string(v) + "\n";
  };
  if (m.is_moe()) {
    const MoeShape& moe = m.moe;
    flag("--num-experts", moe.num_experts);
    flag("--moe-router-topk", moe.top_k);
    flag("--moe-ffn-hidden-size", moe.expert_ffn);
    if (moe.shared_ffn > 0)
      flag("--moe-shared-expert-intermediate-size", moe.shared_ffn);
    else
      remove.emplace_back("--moe-shared-expert-intermediate-size");
    // A hybrid model's MoE layers are the E of its pattern ([MG-hybrid]).
    if (!m.is_hybrid()) {
      std::vector<int> pattern;
      for (int i = 0; i < m.num_layers; ++i) pattern.push_back(m.is_moe_layer(i) ? 1 : 0);
      // Quoted: '(' '[' and '*' are shell metacharacters.
      const std::string freq = megatron_moe_freq_text(pattern);
      out += "--moe-layer-freq " + (freq.front() == '(' ? "\"" + freq + "\"" : freq) + "\n";
    }
    // bmpipe's MoE layer: the alltoall dispatcher's, or the flex dispatcher's with the
    // deepep backend (training.moe_dispatcher), its experts grouped GEMMs.
    out += deepep ? "--moe-token-dispatcher-type flex\n--moe-flex-dispatcher-backend deepep\n"
                  : "--moe-token-dispatcher-type alltoall\n";
    if (!deepep)
      remove.insert(remove.end(), {"--moe-flex-dispatcher-backend", "--moe-enable-deepep"});
    out += "--moe-grouped-gemm\n";
    if (moe.router_groups > 0) {
      flag("--moe-router-num-groups", moe.router_groups);
      flag("--moe-router-group-topk", moe.router_group_top_k);
    } else {
      remove.emplace_back("--moe-router-num-groups");
      remove.emplace_back("--moe-router-group-topk");
    }
    // training.moe_capacity_factor: dropped and padded to capacity (frameworks/megatron/
    // import.cpp, read_capacity); dropless otherwise, so a script's factor goes.
    if (capacity_factor > 0) {
      char factor[32];
      const auto r = std::to_chars(factor, factor + sizeof factor, capacity_factor);
      out += "--moe-expert-capacity-factor " + std::string(factor, r.ptr) +
             "\n--moe-pad-expert-input-to-capacity\n";
    } else {
      remove.insert(remove.end(),
                    {"--moe-expert-capacity-factor", "--moe-pad-expert-input-to-capacity"});
    }
    flag("--expert-model-parallel-size", ep);
    flag("--expert-tensor-parallel-size", etp);
    if (moe.latent_size > 0)
      flag("--moe-latent-size", moe.latent_size);
    else
      remove.emplace_back("--moe-latent-size");
  }
  if (m.is_mla()) {
    out += "--multi-latent-attention\n";
    if (m.mla.q_lora_rank > 0)
      flag("--q-lora-rank", m.mla.q_lora_rank);
    else
      remove.emplace_back("--q-lora-rank");
    flag("--kv-lora-rank", m.mla.kv_lora_rank);
    flag("--qk-head-dim", m.mla.qk_nope_head_dim);
    flag("--qk-pos-emb-head-dim", m.mla.qk_rope_head_dim);
    flag("--v-head-dim", m.mla.v_head_dim);
  } else {
    remove.emplace_back("--multi-latent-attention");
  }
  // DeepSeek sparse attention as import's read_sparse_attention reads it back. The loss's
  // scale does not change the cost; 0.001 is Megatron-Bridge's GLM-5 bridge's (NVIDIA-NeMo/
  // Megatron-Bridge 067f987d src/megatron/bridge/models/glm_moe_dsa/glm5_bridge.py:140).
  if (m.is_dsa()) {
    out += "--experimental-attention-variant dsa\n";
    flag("--dsa-indexer-n-heads", m.dsa.index_heads);
    flag("--dsa-indexer-head-dim", m.dsa.index_head_dim);
    flag("--dsa-indexer-topk", m.dsa.index_topk);
    if (m.dsa.indexer_loss)
      out += "--dsa-indexer-loss-coeff 0.001\n--dsa-indexer-use-sparse-loss\n";
    else
      remove.insert(remove.end(), {"--dsa-indexer-loss-coeff", "--dsa-indexer-use-sparse-loss"});
  }
  if (m.mtp_layers > 0)
    flag("--mtp-num-layers", m.mtp_layers);
  else
    remove.emplace_back("--mtp-num-layers");
  // A hybrid model's MTP block is stated in --hybrid-layer-pattern after '/' (one copy a
  // depth, megatron_job_flags); the deprecated flag would be ignored beside it.
  remove.emplace_back("--mtp-hybrid-override-pattern");
  if (m.mtp_shared)
    out += "--mtp-use-repeated-layer\n";
  else
    remove.emplace_back("--mtp-use-repeated-layer");
  // Sliding windows as import's read_window reads them back: --window-size W-1,0; every
  // layer needs no skip flag, every other layer from layer 0 is the int 2, any other k the
  // list form (an int N would window N-1 layers of N).
  if (m.has_windows()) {
    out += "--window-size " + std::to_string(m.sliding_window - 1) + ",0\n";
    if (m.full_every > 0) {
      flag("--window-attn-skip-freq", m.full_every);  // layer_number % N != 0: windowed
    } else if (m.sliding_every == 2) {
      flag("--window-attn-skip-freq", 2);
    } else if (m.sliding_every > 2) {
      const int k = m.sliding_every, whole = m.num_layers / k, rest = m.num_layers % k;
      std::string list =
          whole > 0 ? "([1]+[0]*" + std::to_string(k - 1) + ")*" + std::to_string(whole) : "";
      if (rest > 0)
        list += std::string(whole > 0 ? "+" : "") + "[1]" +
                (rest > 1 ? "+[0]*" + std::to_string(rest - 1) : std::string());
      out += "--window-attn-skip-freq \"" + list + "\"\n";
    } else {
      remove.emplace_back("--window-attn-skip-freq");
    }
  } else {
    remove.emplace_back("--window-size");
    remove.emplace_back("--window-attn-skip-freq");
  }
  return out;
}

}  // namespace

std::string megatron_model_refusal(const ModelShape& m) {
  // [MG-args] has --window-size for sliding windows alone: Llama 4's chunks have no flag.
  if (m.has_windows() && m.chunked_window)
    return "the attention is chunked (model.chunked_window, Llama 4's attention_chunk_size), "
           "and Megatron-LM's --window-size slides its window; it has no flag for chunks";
  // [MG-args] has no flag for Gemma's norms of the attention and MLP outputs.
  if (m.post_norms)
    return "the layers norm their attention and MLP outputs (model.post_norms, Gemma's "
           "post_attention_layernorm and post_feedforward_layernorm), which no Megatron-LM "
           "flag builds";
  if (!m.is_hybrid()) return "";
  // [MG-hybrid]: MambaMixer's d_conv and chunk_size are its own, with no flag.
  if (m.hybrid_pattern.find('M') != std::string::npos &&
      (m.mamba.conv_kernel != 4 || m.mamba.chunk_size != 128))
    return "the Mamba mixer has conv_kernel " + std::to_string(m.mamba.conv_kernel) +
           " and chunk_size " + std::to_string(m.mamba.chunk_size) +
           ", and Megatron-LM's MambaMixer runs 4 and 128, with no flag to change them";
  return "";
}

// ---- Megatron-LM -------------------------------------------------------------------------

MegatronExport export_megatron(const ExportLayout& layout) {
  check_export_layout(layout);
  MegatronExport result;
  result.expressed = layout;
  ExportLayout& e = result.expressed;
  std::vector<std::string> why;
  const int stages = export_stage_count(layout);
  const int layers = static_cast<int>(layout.recompute.size());
  const std::vector<int> starts = stage_starts(layout.partition);

  if (!interleaved_placement(layout)) {
    // [MG-layout]: the flattened stage list is indexed vpp_rank * pp + pp_rank, so stage s
    // always runs on rank s mod pp; Megatron-LM has no V placement.
    for (int s = 0; s < stages; ++s) e.stage_rank[s] = s % layout.pp;
    why.push_back(
        "Megatron-LM runs stage s on pipeline rank s mod pp and has no V placement, so the "
        "flags run the same layers per stage with interleaved placement.");
  }
  if (!layout.embedding_on_first || !layout.loss_on_last) {
    // [MG-layout] validate_layer_layout: the first layer must be E and the last L.
    e.embedding_on_first = true;
    e.loss_on_last = true;
    why.push_back(
        "Megatron-LM always builds the embedding on the first stage and the loss on the last.");
  }

  std::vector<std::string> flags;
  flags.push_back("--pipeline-model-parallel-size " + std::to_string(layout.pp));
  flags.push_back("--num-layers " + std::to_string(layers));
  for (std::string& f : megatron_partition_flags(layout)) flags.push_back(std::move(f));

  // Recompute, from [MG-config] and [MG-block]:
  //  - selective: every layer, no method and no count ("'selective' always uses all
  //    layers"; recompute_num_layers must be None; [MG-args] refuses --recompute-method with
  //    it). Its default --recompute-modules is core_attn, the attention core that bmpipe's
  //    selective mode models, so no module flag is printed.
  //  - full + block N: within each TransformerBlock, i.e. each (virtual) stage, the first N
  //    layers recompute fully and the rest not at all (layer_idx < recompute_num_layers;
  //    N above a stage's size takes the whole stage).
  //  - full + uniform N: every layer, checkpointing the input of each group of N layers;
  //    with N = 1 that is full recompute of every layer, one layer input kept per layer.
  // One rule for all stages, and never selective beside full: a plan outside that gets the
  // smallest rule that recomputes every layer at least as much as the plan does.
  // An offload layer recomputes nothing: to the rules below it is none, and a
  // selective_offload layer is selective. Megatron-Core's --offload-modules (written from the
  // job, megatron_job_flags) offloads in every layer that does not recompute in full
  // ([MG-config] offload_modules: a list of modules, no layer list), beside selective
  // recompute too (a selective layer is then selective_offload), so a plan with offload
  // layers beside none or selective ones is stated with every such layer offloading.
  std::vector<Recompute> modes = layout.recompute;  // the recompute rules' view
  std::transform(modes.begin(), modes.end(), modes.begin(), device_mode);
  bool any_full = false, any_selective = false, any_none = false, any_offload = false,
       any_kept = false;
  for (Recompute r : layout.recompute) {
    any_full = any_full || r == Recompute::full;
    any_selective = any_selective || device_mode(r) == Recompute::selective;
    any_none = any_none || device_mode(r) == Recompute::none;
    any_offload = any_offload || is_offload_mode(r);
    any_kept = any_kept || r == Recompute::none || r == Recompute::selective;
  }
  e.recompute = modes;
  if (any_offload && any_kept) {
    const auto count = [&](Recompute r) {
      return std::count(layout.recompute.begin(), layout.recompute.end(), r);
    };
    why.push_back(
        "Megatron-LM offloads the modules of --offload-modules in every layer that "
        "does not recompute in full; the plan offloads " +
        std::to_string(count(Recompute::offload) + count(Recompute::selective_offload)) +
        " layers and keeps those of " +
        std::to_string(count(Recompute::none) + count(Recompute::selective)) +
        " others, so the flags offload in those too.");
  }
  if (any_full) {
    int n = 0;
    for (int s = 0; s < stages; ++s)
      n = std::max(n, covering_prefix(layout.partition, modes, s, Recompute::selective));
    const int largest = *std::max_element(layout.partition.begin(), layout.partition.end());
    for (int s = 0; s < stages; ++s)
      for (int i = starts[s]; i < starts[s + 1]; ++i)
        e.recompute[i] = (i - starts[s] < n) ? Recompute::full : Recompute::none;
    flags.push_back("--recompute-granularity full");
    if (n >= largest) {
      flags.push_back("--recompute-method uniform");
      flags.push_back("--recompute-num-layers 1");
    } else {
      flags.push_back("--recompute-method block");
      flags.push_back("--recompute-num-layers " + std::to_string(n));
    }
    if (e.recompute != modes) {
      std::vector<int> full_counts(stages, 0), selective_counts(stages, 0);
      for (int s = 0; s < stages; ++s)
        for (int i = starts[s]; i < starts[s + 1]; ++i) {
          if (layout.recompute[i] == Recompute::full) ++full_counts[s];
          if (modes[i] == Recompute::selective) ++selective_counts[s];
        }
      why.push_back(
          "Megatron-LM recomputes in full the same first N layers of every stage and cannot mix "
          "selective with full; the plan has full " +
          format_int_list(full_counts) + " and selective " + format_int_list(selective_counts) +
          " layers per stage, so the nearest flags recompute " +
          (n >= largest ? std::string("every layer")
                        : "the first " + std::to_string(n) + " layers of every stage") +
          " in full.");
    }
  } else if (any_selective) {
    std::fill(e.recompute.begin(), e.recompute.end(), Recompute::selective);
    flags.push_back("--recompute-granularity selective");
    if (any_none) {
      const auto kept = std::count(modes.begin(), modes.end(), Recompute::none);
      why.push_back(
          "Megatron-LM's selective recompute covers every layer and takes no count; the plan "
          "keeps " +
          std::to_string(kept) + " of " + std::to_string(layers) +
          " layers without recompute, so the flags recompute those selectively too.");
    }
  }

  // With offload layers the flags offload in every layer the rules leave without full
  // recompute: none layers become offload, selective ones selective_offload.
  if (any_offload) {
    std::replace(e.recompute.begin(), e.recompute.end(), Recompute::none, Recompute::offload);
    std::replace(e.recompute.begin(), e.recompute.end(), Recompute::selective,
                 Recompute::selective_offload);
  }

  result.exact = why.empty();
  for (const std::string& w : why) result.note += (result.note.empty() ? "" : " ") + w;
  for (const std::string& f : flags) result.flags += f + "\n";
  return result;
}

/// ZeRO-2/3 as Megatron-FSDP (--data-parallel-sharding-strategy optim_grads /
/// optim_grads_params, beside the distributed optimizer, which Megatron-FSDP's recipes give
/// too), and --overlap-param-gather ([MG-args]: it needs the distributed optimizer, so a
/// stage-1 job that overlaps says so, as one with --fp8-param-gather does). Nothing for stage 0 or
/// 1 without the overlap: those stay the script's own, as before.
namespace {
std::string megatron_sharding_flags(const ExportJob& job) {
  std::string out;
  if (job.zero_stage >= 3 && !job.reshard_after_forward)
    // Only torch FSDP2 keeps the gathered parameters through the backward.
    out += "--use-torch-fsdp2\n--torch-fsdp2-no-reshard-after-forward\n";
  else if (job.zero_stage >= 2)
    out += std::string("--use-distributed-optimizer\n--use-megatron-fsdp\n") +
           "--data-parallel-sharding-strategy " +
           (job.zero_stage >= 3 ? "optim_grads_params" : "optim_grads") + "\n";
  else if (job.zero_stage == 1 && (job.overlap_param_gather || job.offload_fraction > 0 ||
                                   job.shard_copies > 1 || job.fp8_param_gather))
    out += "--use-distributed-optimizer\n";
  // Hybrid sharding: the copies of the state over the dp x cp ranks.
  if (job.shard_copies > 1)
    out += "--num-distributed-optimizer-instances " + std::to_string(job.shard_copies) + "\n";
  // The dp overlaps the config costs: Megatron-LM's defaults are both off, and its
  // validate_args asserts --overlap-grad-reduce beside --overlap-param-gather.
  if (job.overlap_grad_reduce) out += "--overlap-grad-reduce\n";
  if (job.overlap_param_gather && job.zero_stage >= 1) out += "--overlap-param-gather\n";
  // Optimizer offload ([MG-args]: --optimizer-cpu-offload asserts the precision-aware
  // optimizer, which needs the distributed optimizer, written above). The fraction is
  // written even at Megatron-LM's default 1.0, in the shortest form that reads back the same.
  // A config without offload comes from a script without it: nothing is written, as before.
  if (job.offload_fraction > 0) {
    char fraction[32];
    const auto r = std::to_chars(fraction, fraction + sizeof fraction, job.offload_fraction);
    out +=
        "--use-precision-aware-optimizer\n--optimizer-cpu-offload\n"
        "--optimizer-offload-fraction " +
        std::string(fraction, r.ptr) + "\n";
  }
  // Activation offload: Megatron-Core's fine-grained offloading of the modules' inputs
  // (offload_modules, a List field: nargs "+"). bmpipe's offload_lead 1 is its reading of
  // how Megatron reloads (the op before the backward); other leads have no flag.
  const OffloadModules modules = parse_offload_modules(job.offload_modules, nullptr);
  if (modules != 0) {
    out += "--fine-grained-activation-offloading\n--offload-modules";
    for (const auto& [bit, name] : kOffloadModuleNames)
      if (offloads(modules, bit)) {
        out += ' ';
        out += name;
      }
    out += "\n";
  }
  // Whole-layer offload: the first N decoder layers through Transformer Engine.
  if (job.offload_layers > 0)
    out += "--cpu-offloading-num-layers " + std::to_string(job.offload_layers) + "\n";
  return out;
}
}  // namespace

std::string megatron_cp_fp8_flags(const ExportJob& job) {
  // Written only when they differ from Megatron-LM's defaults (cp 1, no FP8), so that a
  // job without them exports as before.
  std::string out;
  if (job.cp > 1) {
    out += "--context-parallel-size " + std::to_string(job.cp) + "\n";
    out += "--cp-comm-type " + job.cp_comm_type + "\n";
    if (!job.cp_hierarchy.empty()) {
      out += "--hierarchical-context-parallel-sizes";
      for (int n : job.cp_hierarchy) out.append(" ").append(std::to_string(n));
      out += "\n";
    }
  }
  if (job.fp8 != "none" && job.fp8_recipe == "nvfp4") {
    // Megatron-LM's FP4 flags (--fp4-format e2m1, --fp4-recipe nvfp4) in place of FP8's.
    out += "--fp4-format e2m1\n--fp4-recipe nvfp4\n";
    if (job.fp8_param_gather) out += "--fp4-param-gather\n";
  } else if (job.fp8 != "none") {
    out += "--fp8-format " + job.fp8 + "\n";
    out += "--fp8-recipe " + job.fp8_recipe + "\n";
    if (job.fp8_param_gather) out += "--fp8-param-gather\n";
  }
  // CUDA graphs (Megatron-LM d98e8a64, as bmpipe import reads them): the whole iteration is
  // --cuda-graph-impl full_iteration; per-layer scopes are TransformerEngine's graphs of
  // the modules named (Megatron-Bridge's perf recipes capture attn, moe_router and
  // moe_preprocess this way).
  const std::vector<std::string> scopes = graph_scope_names(job.cuda_graphs);
  if (std::find(scopes.begin(), scopes.end(), "full_iteration") != scopes.end()) {
    out += "--cuda-graph-impl full_iteration\n";
  } else if (!scopes.empty()) {
    out += "--cuda-graph-impl transformer_engine\n--cuda-graph-modules";
    for (const std::string& m : scopes) out += " " + m;
    out += "\n";
  }
  return out;
}

std::string megatron_job_flags(const MegatronExport& x, const ExportJob& job) {
  // A hybrid model's pattern states the layers and, with '|' between the stages, the split
  // and the virtual stages ([MG-hybrid]): it takes the place of --num-layers and of the
  // partition flags, which Megatron-LM refuses beside it (or ignores: --num-layers).
  const bool hybrid = job.shape && job.shape->is_hybrid();
  std::string flags = x.flags;
  if (hybrid) {
    std::string kept, line;
    std::istringstream in(x.flags);
    const std::string pattern = hybrid_pattern_with_stages(
        *job.shape, x.expressed.pp * x.expressed.vpp > 1 ? x.expressed.partition
                                                         : std::vector<int>{job.shape->num_layers});
    while (std::getline(in, line)) {
      const bool partition_flag = line.rfind("--num-virtual-stages-per-pipeline-rank ", 0) == 0 ||
                                  line.rfind("--decoder-first-pipeline-num-layers ", 0) == 0 ||
                                  line.rfind("--decoder-last-pipeline-num-layers ", 0) == 0 ||
                                  line.rfind("--pipeline-model-parallel-layout ", 0) == 0;
      if (line.rfind("--num-layers ", 0) == 0)
        kept += "--hybrid-layer-pattern \"" + pattern + "\"\n";  // quoted: '*' and '|'
      else if (!partition_flag)
        kept += line + "\n";
    }
    flags = kept;
  }
  // Selective recompute re-runs the modules of training.recompute_modules. Megatron-LM's
  // --recompute-modules takes one or more (argument_utils.py at d98e8a64 gives a List field
  // nargs "+"), so no module at all is stated as no recompute, which costs the same.
  const RecomputeModules modules = parse_recompute_modules(job.recompute_modules, nullptr);
  const bool selective_named =
      x.flags.find("--recompute-granularity selective") != std::string::npos;
  if (selective_named && modules == 0) {
    const std::string line = "--recompute-granularity selective\n";
    if (const auto at = flags.find(line); at != std::string::npos) flags.erase(at, line.size());
  }
  auto gives = [&](const std::string& flag) {
    return flags.rfind(flag + " ", 0) == 0 || flags.rfind(flag + "\n", 0) == 0 ||
           flags.find("\n" + flag + " ") != std::string::npos ||
           flags.find("\n" + flag + "\n") != std::string::npos;
  };
  const bool selective = selective_named && modules != 0;
  const bool sequence_parallel = job.sequence_parallel && job.tp > 1;
  // Flags whose presence in the script changes the job whatever the flags below say
  // ([MG-args]): another way to set vpp or the partition (Megatron refuses two of them
  // together), the recompute flags a plan without them must not keep
  // (--recompute-activations turns the granularity to selective in validate_args), and
  // --recompute-modules beside selective (written below when the modules are not
  // Megatron's default, core_attn).
  std::vector<std::string> remove;
  for (const char* f :
       {"--num-layers-per-virtual-pipeline-stage", "--num-virtual-stages-per-pipeline-rank",
        "--decoder-first-pipeline-num-layers", "--decoder-last-pipeline-num-layers",
        "--pipeline-model-parallel-layout", "--account-for-embedding-in-pipeline-split",
        "--account-for-loss-in-pipeline-split", "--recompute-granularity", "--recompute-method",
        "--recompute-num-layers"})
    if (!gives(f)) remove.emplace_back(f);
  if (!selective) remove.emplace_back("--recompute-activations");
  if (selective) remove.emplace_back("--recompute-modules");
  if (!sequence_parallel && job.tp > 1) remove.emplace_back("--sequence-parallel");
  if (!(sequence_parallel && job.tp_comm_overlap) && job.tp > 1)
    remove.emplace_back("--tp-comm-overlap");
  // The data-parallel sharding implementation: the flags below state ZeRO-2/3 as
  // Megatron-FSDP (megatron_sharding_flags), so a script's other implementation, torch
  // FSDP2 (`bmpipe import` reads --use-torch-fsdp2 as ZeRO-3), would stay beside it, and
  // Megatron-LM's validate_args refuses the two together ([MG-args]). A ZeRO-0/1 config
  // comes from a script without either, so its list is left as it was.
  if (job.zero_stage >= 2 && job.reshard_after_forward) remove.emplace_back("--use-torch-fsdp2");
  if (job.zero_stage >= 3 && !job.reshard_after_forward) {
    remove.emplace_back("--use-megatron-fsdp");
    remove.emplace_back("--data-parallel-sharding-strategy");
  }
  // With CUDA graphs the flags below state them by --cuda-graph-impl and
  // --cuda-graph-modules; Megatron-LM's validate_args refuses the deprecated spellings
  // beside those.
  if (!graph_scope_names(job.cuda_graphs).empty())
    for (const char* f : {"--enable-cuda-graph", "--external-cuda-graph", "--cuda-graph-scope"})
      remove.emplace_back(f);
  const std::string model_flags =
      job.shape && states_model(*job.shape)
          ? megatron_model_flags(*job.shape, job.ep, job.etp, job.deepep, job.moe_capacity_factor,
                                 remove)
          : std::string();

  std::string out;
  out += "# Remove these flags from your script if it has them (no value below undoes them):\n";
  for (const std::string& f : remove) out += "#   " + f + "\n";
  out += "# data parallel " + std::to_string(job.dp) + ": Megatron-LM takes the world size (" +
         std::to_string(job.devices) + " devices) / (tp " + std::to_string(job.tp) + " x pp " +
         std::to_string(x.expressed.pp) + (job.cp > 1 ? " x cp " + std::to_string(job.cp) : "") +
         ")\n";
  out += "--tensor-model-parallel-size " + std::to_string(job.tp) + "\n";
  out += flags;
  if (selective && modules != 0 && modules != kDefaultRecomputeModules) {
    out += "--recompute-modules";
    for (const auto& [bit, name] : kRecomputeModuleNames)
      if (has_module(modules, bit)) out += " " + std::string(name);
    out += "\n";
  }
  out += "--micro-batch-size " + std::to_string(job.micro_batch_size) + "\n";
  out += "--global-batch-size " + std::to_string(job.global_batch_size()) + "\n";
  if (sequence_parallel) out += "--sequence-parallel\n";
  if (sequence_parallel && job.tp_comm_overlap) out += "--tp-comm-overlap\n";
  out += megatron_sharding_flags(job);
  out += megatron_cp_fp8_flags(job);
  out += model_flags;
  // The unfused attention core bmpipe costed (model.flash_attention false) as the flag import
  // reads back ([MG-lm] _set_attention_backend): unfused is TransformerEngine's
  // UnfusedDotProductAttention, which needs no --spec (local is Megatron-Core's own core, which
  // validate_args allows only with --spec local). A flash-attention job keeps Megatron's
  // default, auto.
  if (job.shape && !job.shape->flash_attention) out += "--attention-backend unfused\n";
  if (job.moe_overlap) out += "--overlap-moe-expert-parallel-comm\n";
  return out;
}

std::vector<std::vector<Recompute>> megatron_recompute_choices(const std::vector<int>& partition) {
  const int layers = std::accumulate(partition.begin(), partition.end(), 0);
  const int largest = partition.empty() ? 0 : *std::max_element(partition.begin(), partition.end());
  std::vector<std::vector<Recompute>> out;
  out.emplace_back(layers, Recompute::none);
  out.emplace_back(layers, Recompute::selective);
  // [MG-block]: full + block N recomputes layer_idx < N of every (virtual) stage.
  for (int n = 1; n < largest; ++n) {
    std::vector<Recompute> modes;
    for (int count : partition)
      for (int k = 0; k < count; ++k) modes.push_back(k < n ? Recompute::full : Recompute::none);
    out.push_back(std::move(modes));
  }
  out.emplace_back(layers, Recompute::full);
  return out;
}

}  // namespace bmpipe
