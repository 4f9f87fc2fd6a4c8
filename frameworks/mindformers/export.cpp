#include "frameworks/mindformers/export.hpp"

#include <algorithm>
#include <charconv>
#include <sstream>
#include <string>
#include <vector>

#include "frameworks/mindformers/formats.hpp"
#include "sim/offload.hpp"

// Sources (read, not copied), cited below by these short names:
//  [MF-card]   MindFormers, docs/feature_cards/Offset_Recompute.md ("流水并行的负载偏置与重计算"),
//              github.com/mindspore-lab/mindformers at f1e33c5629d5.
//  [MF-docs]   MindFormers docs, "Memory Optimization" > Recomputation
//              (www.mindspore.cn/mindformers/docs/en/master/feature/memory_optimization.html).
//  [MF-code]   MindFormers, mindformers/models/utils.py and
//              mindformers/parallel_core/training_graph/transformer/utils.py, class
//              LayerSetting, at fd4deebc1 (dev branch).

namespace bmpipe {

MindFormersExport mindformers_plan(const ExportLayout& layout) {
  check_export_layout(layout);
  std::vector<std::string> said;
  const int pp = layout.pp;
  const int stages = export_stage_count(layout);
  const std::vector<int> starts = stage_starts(layout.partition);

  // [MF-card], [MF-docs]: layers of (mini) stage = num_layers // (pipeline_stage *
  // pp_interleave_num) + offset, and the offsets add up to the remainder ([MF-code]
  // _check_inputs enforces that sum), so any partition, negative offsets included, is an
  // offset list.
  // DeepSeek-V3's MTP layers are LayerSetting's last entries (frameworks/mindformers/
  // import.cpp, [MF-ds3]): the offsets split num_layers + mtp_depth, the MTP layers on the
  // last stage, where bmpipe runs them.
  std::vector<int> with_mtp = layout.partition;
  if (!with_mtp.empty()) with_mtp.back() += layout.mtp_layers;
  const std::vector<int> offset = mindformers_offsets(with_mtp);

  // [MF-card]/[MF-docs]: an integer list gives, per (mini) stage, how many layers recompute;
  // 2-D lists give it per interleave and stage (a 1-D list with interleave would be spread
  // over the interleaves by MindFormers itself, so bmpipe always writes 2-D then).
  // [MF-code] LayerSetting._check_layer_rule and _set_select_recompute take the *first* n
  // layers of the stage (0 <= layer_id - first_layer_of_stage < n), and a layer in both
  // counts recomputes fully ([MF-card] note 1: "如果某一层同时配置了完全重计算与选择重计算，
  // 则按完全重计算生效"; the code sets select recompute only when full is not set). So a
  // stage of the form full*, selective*, none* — the order bmpipe's planner assigns — is
  // recompute = #full, select_recompute = #full + #selective; any other order is covered
  // by the shortest prefixes that hold every recomputed layer, which recompute more.
  // A plan with offload layers is stated with swap_config (mindformers_job_yaml), under
  // which MindFormers reads recompute and select_recompute as decoder-layer indices
  // ([MF-swap]): every layer's mode is stated as it is, in any order.
  const bool by_layer =
      std::any_of(layout.recompute.begin(), layout.recompute.end(), is_offload_mode);
  std::vector<int> full(stages), select(stages);
  std::vector<int> out_of_order, empty;
  bool any_selective = false;
  for (int s = 0; s < stages; ++s) {
    full[s] = covering_prefix(layout.partition, layout.recompute, s, Recompute::full);
    select[s] = covering_prefix(layout.partition, layout.recompute, s, Recompute::selective);
    for (int i = starts[s]; i < starts[s + 1]; ++i) {
      const int k = i - starts[s];
      const Recompute runs = k < full[s]     ? Recompute::full
                             : k < select[s] ? Recompute::selective
                                             : Recompute::none;
      if (!by_layer && runs != layout.recompute[i]) {
        out_of_order.push_back(s);
        break;
      }
    }
    for (int i = starts[s]; i < starts[s + 1]; ++i)
      any_selective = any_selective || device_mode(layout.recompute[i]) == Recompute::selective;
    if (layout.partition[s] == 0) empty.push_back(s);
  }

  if (!interleaved_placement(layout))
    said.push_back(
        "MindFormers puts (mini) stage j of every interleave on pipeline rank j (LayerSetting: "
        "pipeline id = stage index mod pipeline_stage), so it cannot express this plan's V "
        "placement; the lists below run the same layers per stage, interleaved.");
  if (!out_of_order.empty())
    said.push_back("stage" + std::string(out_of_order.size() > 1 ? "s " : " ") +
                   stages_in_words(out_of_order) +
                   ": MindFormers recomputes the first n layers of a stage, full before "
                   "selective, and this plan's modes there are in another order; the counts "
                   "below recompute every layer the plan does, and more.");
  if (any_selective)
    said.push_back(
        "select_recompute as counts recomputes MindFormers' default operators (the MLP's "
        "activation: feed_forward.mul and the SiLU, or mlp.mul and mlp.activation_func.silu "
        "in mcore models), not the attention core that bmpipe's selective mode models; to "
        "match, give select_recompute as a dict from your model's attention-core operator "
        "patterns to these same counts.");
  if (!empty.empty())
    said.push_back("stage" + std::string(empty.size() > 1 ? "s " : " ") + stages_in_words(empty) +
                   (empty.size() > 1 ? " hold" : " holds") +
                   " no decoder layer; MindFormers' docs show no such stage, so check that "
                   "MindSpore accepts a pipeline stage without a transformer layer.");
  if (!layout.mtp_per_stage.empty() && layout.mtp_per_stage.back() != layout.mtp_layers)
    said.push_back(
        "MindFormers builds the MTP layers last, on the last stage (LayerSetting over "
        "num_layers + mtp_depth); the plan puts them elsewhere, which these keys cannot say.");
  if (!layout.embedding_on_first || !layout.loss_on_last)
    said.push_back(
        "MindFormers builds the embedding on the first stage and the LM head on the last; the "
        "plan puts them elsewhere, which these keys cannot say.");

  MindFormersExport x;
  x.offset = offset;
  x.full = full;
  x.select = select;
  x.notes = std::move(said);
  x.expressed = layout;
  for (int s = 0; s < stages; ++s) {
    x.expressed.stage_rank[s] = s % pp;
    if (by_layer) continue;
    for (int i = starts[s]; i < starts[s + 1]; ++i) {
      const int k = i - starts[s];
      x.expressed.recompute[i] = k < full[s]     ? Recompute::full
                                 : k < select[s] ? Recompute::selective
                                                 : Recompute::none;
    }
  }
  x.expressed.embedding_on_first = true;
  x.expressed.mtp_per_stage.clear();
  x.expressed.loss_on_last = true;
  return x;
}

std::string export_mindformers(const ExportLayout& layout, std::vector<std::string>* notes) {
  MindFormersExport x = mindformers_plan(layout);
  const int pp = layout.pp;
  const int vpp = layout.vpp;
  const int layers = static_cast<int>(layout.recompute.size());
  std::ostringstream out;
  out << "# bmpipe plan: " << layers << " decoder layers, pipeline_stage " << pp;
  if (vpp > 1) out << ", pp_interleave_num " << vpp;
  out << ", layers per stage " << mindformers_stage_list(layout.partition, pp, vpp) << "\n";
  if (vpp > 1) {
    // [MF-card]: pp_interleave_num takes effect only with parallel.pipeline_config
    // .pipeline_interleave on ([MF-code]: otherwise LayerSetting resets it to 1).
    out << "parallel:\n  pipeline_config:\n    pipeline_interleave: True\n";
  }
  out << "parallel_config:\n  pipeline_stage: " << pp << "\n";
  out << "model:\n  model_config:\n";
  if (vpp > 1) out << "    pp_interleave_num: " << vpp << "\n";
  out << "    offset: " << mindformers_stage_list(x.offset, pp, vpp) << "\n";
  out << "recompute_config:\n";
  out << "  recompute: " << mindformers_stage_list(x.full, pp, vpp) << "\n";
  out << "  select_recompute: " << mindformers_stage_list(x.select, pp, vpp) << "\n";

  if (notes) *notes = std::move(x.notes);
  return out.str();
}

std::string mindformers_job_yaml(const MindFormersExport& x, const ExportJob& job,
                                 const std::string& scheduler) {
  const ExportLayout& l = x.expressed;
  const int pp = l.pp;
  const int vpp = l.vpp;
  std::ostringstream out;
  out << "# " << l.recompute.size() << " decoder layers, layers per stage "
      << mindformers_stage_list(l.partition, pp, vpp) << "; global batch "
      << job.global_batch_size() << " = batch_size x data_parallel x "
      << (pp > 1 ? "micro_batch_num" : "gradient_accumulation_steps") << "\n";
  // [MF-card]: pp_interleave_num counts only with pipeline_interleave on, so both are
  // always given, and so is the scheduler: a run's own values would otherwise stay.
  out << "parallel:\n  pipeline_config:\n    pipeline_interleave: " << (vpp > 1 ? "True" : "False")
      << "\n    pipeline_scheduler: " << scheduler << "\n";
  // The experts' all-to-all dispatch bmpipe costs: MindSpore's AllGather path otherwise
  // (frameworks/mindformers/import.cpp, read_moe_config).
  if (job.shape && job.shape->is_moe() && job.ep > 1) out << "  enable_alltoall: True\n";
  out << "parallel_config:\n";
  out << "  data_parallel: " << job.dp << "\n";
  out << "  model_parallel: " << job.tp << "\n";
  out << "  pipeline_stage: " << pp << "\n";
  out << "  micro_batch_num: " << (pp > 1 ? job.microbatches : 1) << "\n";
  out << "  use_seq_parallel: " << (job.sequence_parallel ? "True" : "False") << "\n";
  // training.vocab_parallel: vocab_emb_dp, which counts only with tp and without pipeline
  // stages (MindFormers resets it to False with them: frameworks/mindformers/import.cpp,
  // read_vocab_emb_dp; mindformers_refusal keeps a replicated one at pp > 1 out).
  if (pp == 1 && job.tp > 1)
    out << "  vocab_emb_dp: " << (job.vocab_parallel ? "False" : "True") << "\n";
  const bool moe = job.shape && job.shape->is_moe();
  if (moe) out << "  expert_parallel: " << job.ep << "\n";
  // MindFormers' context_parallel_algo: colossalai_cp (a ring, its default) or ulysses_cp.
  if (job.cp > 1)
    out << "  context_parallel: " << job.cp << "\n  context_parallel_algo: "
        << (job.cp_comm_type == "a2a" ? "ulysses_cp" : "colossalai_cp") << "\n";
  // [MF-batch] (frameworks/mindformers/import.cpp): with pipeline stages micro_batch_num
  // micro-batches and no gradient accumulation; without, one per accumulation step.
  out << "runner_config:\n  batch_size: " << job.micro_batch_size << "\n";
  out << "  gradient_accumulation_steps: " << (pp > 1 ? 1 : job.microbatches) << "\n";
  out << "model:\n  model_config:\n";
  // LlamaConfig's head_dim, when the head is not hidden_size / num_heads wide (the import
  // reads it back).
  if (job.shape && job.shape->explicit_head_dim > 0 && !job.shape->is_mla())
    out << "    head_dim: " << job.shape->explicit_head_dim << "\n";
  // DeepseekV3Config's multi-latent attention and MTP (the import's [MF-ds3]); the model
  // class goes with it (model.arch: DeepseekV3ForCausalLM).
  if (job.shape && (job.shape->is_mla() || job.shape->mtp_layers > 0)) {
    const MlaShape& mla = job.shape->mla;
    out << "    type: DeepseekV3Config\n";
    out << "    q_lora_rank: " << mla.q_lora_rank << "\n";
    out << "    kv_lora_rank: " << mla.kv_lora_rank << "\n";
    out << "    qk_nope_head_dim: " << mla.qk_nope_head_dim << "\n";
    out << "    qk_rope_head_dim: " << mla.qk_rope_head_dim << "\n";
    out << "    v_head_dim: " << mla.v_head_dim << "\n";
    out << "    mtp_depth: " << job.shape->mtp_layers << "\n";
  }
  out << "    pp_interleave_num: " << vpp << "\n";
  out << "    offset: " << mindformers_stage_list(x.offset, pp, vpp) << "\n";
  out << "recompute_config:\n";
  // Activation offload: swap_config ([MF-swap], frameworks/mindformers/import.cpp read_swap).
  // The layers that offload: the plan's offload layers, or, in the job-wide form (no offload
  // layer: every none and selective layer moves training.offload_modules), every layer
  // that does not recompute in full. Under swap True MindFormers reads recompute and
  // select_recompute as decoder-layer indices.
  const OffloadModules offloaded = parse_offload_modules(job.offload_modules, nullptr);
  const bool per_layer = std::any_of(l.recompute.begin(), l.recompute.end(), is_offload_mode);
  std::vector<int> full_layers, select_layers, swap_layers;
  for (std::size_t i = 0; i < l.recompute.size(); ++i) {
    const Recompute r = l.recompute[i];
    const int at = static_cast<int>(i);
    if (r == Recompute::full) full_layers.push_back(at);
    // A selective_offload layer is in both lists: selective and swapped.
    if (device_mode(r) == Recompute::selective) select_layers.push_back(at);
    if (is_offload_mode(r) || (!per_layer && r != Recompute::full)) swap_layers.push_back(at);
  }
  if (offloaded != 0 && !swap_layers.empty()) {
    auto indices = [](const std::vector<int>& v) {
      if (v.empty()) return std::string("False");
      std::string t = "[";
      for (std::size_t i = 0; i < v.size(); ++i) t += (i ? ", " : "") + std::to_string(v[i]);
      return t + "]";
    };
    out << "  recompute: " << indices(full_layers) << "\n";
    out << "  select_recompute: " << indices(select_layers) << "\n";
    // mindformers_refusal lets through only these two sets, at lead 1 (bmpipe reads every
    // backward_prefetch as lead 1; 1 is MindFormers' default_prefetch).
    const bool attention = offloads(offloaded, OffloadModule::qkv_linear);
    out << "swap_config:\n  swap: True\n  op_swap:\n    - op_name: "
        << (attention ? "'attention'" : R"('.*\.flash_attention')")
        << "\n      backward_prefetch: 1\n      layers: " << indices(swap_layers) << "\n";
  } else {
    out << "  recompute: " << mindformers_stage_list(x.full, pp, vpp) << "\n";
    out << "  select_recompute: " << mindformers_stage_list(x.select, pp, vpp) << "\n";
  }
  if (moe) {
    // What frameworks/mindformers/import.cpp (read_moe_config) reads back; the shape is
    // one mindformers_moe_refusal accepts.
    const ModelShape& m = *job.shape;
    out << "moe_config:\n";
    out << "  expert_num: " << m.moe.num_experts << "\n";
    out << "  num_experts_chosen: " << m.moe.top_k << "\n";
    out << "  shared_expert_num: " << (m.moe.shared_ffn / m.moe.expert_ffn) << "\n";
    if (m.moe.expert_ffn != m.ffn_hidden_size)
      out << "  moe_intermediate_size: " << m.moe.expert_ffn << "\n";
    int dense = 0;
    while (dense < m.num_layers && !m.is_moe_layer(dense)) ++dense;
    if (dense > 0) out << "  first_k_dense_replace: " << dense << "\n";
    // training.moe_capacity_factor: MoEV2's experts padded to capacity; dropless: MoEV3's
    // grouped matmuls (frameworks/mindformers/import.cpp, read_capacity).
    if (job.moe_capacity_factor > 0) {
      char factor[32];
      const auto r = std::to_chars(factor, factor + sizeof factor, job.moe_capacity_factor);
      out << "  capacity_factor: " << std::string(factor, r.ptr) << "\n  use_gmm: False\n";
    } else {
      out << "  use_gmm: True\n";
    }
  }
  return out.str();
}

std::string mindformers_shape_refusal(const ModelShape& m) {
  if (m.is_hybrid())
    return "MindFormers' Llama-family keys have no hybrid Mamba layers (model.hybrid_pattern)";
  if (m.mlp_activation != MlpActivation::swiglu)
    return "MindFormers' Llama-family MLP is SwiGLU, not model.mlp_activation's squared ReLU";
  if (!m.rotary) return "MindFormers' Llama-family layers always run RoPE";
  if (m.post_norms)
    return "MindFormers' Llama-family layers have no norms of the attention and MLP outputs "
           "(model.post_norms)";
  if (m.has_windows())
    return "MindFormers' Llama-family keys have no sliding or chunked attention window "
           "(model.sliding_window)";
  return {};
}

std::string mindformers_moe_refusal(const ModelShape& m, int etp) {
  // DeepSeek-V3's keys (DeepseekV3Config) state MLA with a q latent and MTP layers together.
  if ((m.is_mla() || m.mtp_layers > 0) && !(m.is_mla() && m.mla.q_lora_rank > 0))
    return "MindFormers' MTP layers and multi-latent attention are DeepseekV3Config's, whose "
           "attention always projects q through a latent (q_lora_rank > 0)";
  if (!m.is_moe()) return {};
  int dense = 0;
  while (dense < m.num_layers && !m.is_moe_layer(dense)) ++dense;
  for (int i = dense; i < m.num_layers; ++i)
    if (!m.is_moe_layer(i))
      return "moe_config states only the first k layers dense (first_k_dense_replace) and the "
             "rest MoE; layer " +
             std::to_string(i) + " is dense after MoE layers";
  if (m.moe.shared_ffn % m.moe.expert_ffn != 0)
    return "moe_config states shared experts as shared_expert_num experts of the experts' width "
           "(" +
           std::to_string(m.moe.expert_ffn) + "); " + std::to_string(m.moe.shared_ffn) +
           " is not a multiple of it";
  if (m.moe.load_imbalance != 1.0)
    return "model.moe.load_imbalance describes the data, which no MindFormers key states; set "
           "it to 1 to export";
  if (etp != 1) return "MindFormers has no expert tensor parallel size other than 1 (training.etp)";
  return {};
}

namespace {

/// 0 for full, 1 for selective, 2 for none: the first-N order.
int first_n_rank(Recompute r) {
  // (An offload mode ranks with the recompute mode it runs: selective_offload with
  // selective, offload with none.)
  r = device_mode(r);
  return r == Recompute::full ? 0 : r == Recompute::selective ? 1 : 2;
}

/// Whether every stage's decoder modes read full*, selective*, none*.
bool first_n_form(const ExportLayout& l) {
  std::size_t i = 0;
  for (int n : l.partition) {
    int last = 0;
    for (int k = 0; k < n; ++k, ++i) {
      const int now = first_n_rank(l.recompute[i]);
      if (now < last) return false;
      last = now;
    }
  }
  return true;
}

}  // namespace

bool mindformers_states(const ExportLayout& l) {
  return interleaved_placement(l) && l.embedding_on_first && l.loss_on_last &&
         std::none_of(l.partition.begin(), l.partition.end(), [](int n) { return n == 0; }) &&
         first_n_form(l);
}

}  // namespace bmpipe
