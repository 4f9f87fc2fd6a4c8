#include "experiment/layer_table.hpp"

#include <algorithm>
#include <cmath>
#include <string_view>

#include "sim/cost/kernels.hpp"

namespace bmpipe {

CostSettings cost_settings(const Config& c) {
  const TrainingConfig& t = c.training;
  CostSettings st;
  st.seq_length = t.seq_length.value_or(0);
  st.micro_batch_size = t.micro_batch_size;
  st.tp = t.tp;
  st.sequence_parallel = t.sequence_parallel;
  st.tp_comm_overlap = t.tp_comm_overlap;
  st.dtype_bytes = t.dtype_bytes();
  // Megatron places each group on consecutive devices, in RankGenerator's orders
  // (ParallelMesh): a group leaves the scale-up domain (the node, unless
  // cluster.scale_up_domain is larger) only when the devices it spans are more than one
  // domain holds; inside it the group runs on the intra_node link. The tp group spans tp.
  const ParallelMesh mesh = c.mesh();
  st.tp_crosses_nodes = mesh.crosses_domain(MeshGroup::tp);
  st.grad_accumulation = t.grad_accumulation;
  // The buffer the weight-grad pass accumulates into is the one the optimizer reads.
  st.grad_bytes = t.optimizer.grad_bytes;
  st.ep = t.ep;
  st.etp = t.etp;
  // Megatron-Core's expert ranks run etp fastest, then ep (order "tp-ep-dp-pp" with
  // tp = etp): an ep group spans etp x ep consecutive devices of the stage, an etp group etp.
  st.ep_crosses_nodes = mesh.crosses_domain(MeshGroup::ep);
  st.etp_crosses_nodes = mesh.crosses_domain(MeshGroup::etp);
  st.moe_dispatcher = t.dispatcher();
  st.moe_capacity_factor = t.moe_capacity_factor;
  st.vocab_parallel = t.vocab_parallel;
  st.cuda_graphs = parse_graph_scopes(t.cuda_graphs, nullptr);
  st.recompute_modules = parse_recompute_modules(t.recompute_modules, nullptr);
  st.offload_modules = parse_offload_modules(t.offload_modules, nullptr);
  st.ep_per_domain = mesh.ep_per_domain();
  st.fp8 = t.fp8_format();
  st.fp8_recipe = t.fp8_scaling();
  st.fp8_param = t.fp8_param_gather && st.fp8 != Fp8::none;
  st.kernels = t.kernel_set();
  st.cp = t.cp;
  st.cp_comm = t.cp_comm();
  // The dense order "tp-cp-ep-dp-pp": a cp group spans tp x cp consecutive devices.
  st.cp_crosses_nodes = mesh.crosses_domain(MeshGroup::cp);
  // Hierarchical cp: the all-to-all level is cp_a2a consecutive cp ranks (Megatron's
  // create_hierarchical_groups, level 0), the mesh's shard part of the cp group; the ring
  // across those groups spans the whole cp group.
  st.cp_a2a = t.cp_a2a_ranks();
  const ParallelMesh::Part a2a = mesh.shard_part(MeshGroup::cp, st.cp_a2a, -1);
  st.cp_a2a_crosses_nodes = a2a.per_domain < a2a.size;
  return st;
}

std::vector<LayoutStage> separate_end_layout(const Config& c) {
  const std::string& layout = c.training.megatron_layout;
  if (layout.empty() || !c.model.analytic()) return {};
  std::vector<LayoutStage> stages;
  try {
    stages = parse_layer_layout(layout);
  } catch (const LayoutError& e) {
    c.fail("training.megatron_layout", "'" + layout + "' " + e.what());
  }
  if (folded_layout_mismatch(stages).empty()) return {};
  return stages;
}

bool has_separate_ends(const Config& c) {
  return c.model.analytic() && (c.training.separate_ends || !separate_end_layout(c).empty());
}

std::vector<std::pair<const LayerCost*, int>> AnalyticCosts::layer_kinds(
    const ModelShape& m) const {
  // The kinds in a fixed order (a hybrid's in kHybridSymbols' order; otherwise dense, MoE,
  // then their windowed versions), each counted by the cost `layer` gives its layers.
  std::vector<const LayerCost*> kinds;
  if (m.is_hybrid()) {
    for (const auto& h : hybrid) kinds.push_back(h ? &*h : nullptr);
  } else {
    kinds = {&decoder, moe_decoder ? &*moe_decoder : nullptr,
             windowed_decoder ? &*windowed_decoder : nullptr,
             windowed_moe_decoder ? &*windowed_moe_decoder : nullptr};
  }
  std::vector<int> counts(kinds.size(), 0);
  for (int i = 0; i < m.num_layers; ++i) {
    const LayerCost* c = &layer(m, i);
    for (std::size_t k = 0; k < kinds.size(); ++k) counts[k] += kinds[k] == c ? 1 : 0;
  }
  std::vector<std::pair<const LayerCost*, int>> out;
  if (m.vision.enabled()) {
    // A vision model's kinds first, as its rows come: the patch embedding, the blocks
    // attending to the whole image, those attending within windows, the projector.
    int windowed = 0;
    for (int i = 0; i < m.vision.layers; ++i) windowed += m.vision.is_windowed_layer(i) ? 1 : 0;
    out.emplace_back(&*patch_embed, 1);
    if (m.vision.layers > windowed) out.emplace_back(&*vision, m.vision.layers - windowed);
    if (windowed > 0) out.emplace_back(&*vision_window, windowed);
    out.emplace_back(&*projector, 1);
  }
  for (std::size_t k = 0; k < kinds.size(); ++k)
    if (counts[k] > 0) out.emplace_back(kinds[k], counts[k]);
  return out;
}

const LayerCost& AnalyticCosts::layer(const ModelShape& m, int i) const {
  if (m.is_hybrid()) return *hybrid[hybrid_slot(m.hybrid_kind(i))];
  const bool moe = moe_decoder && m.is_moe_layer(i);
  const bool windowed = m.is_windowed_layer(i);
  if (moe) return windowed && windowed_moe_decoder ? *windowed_moe_decoder : *moe_decoder;
  return windowed && windowed_decoder ? *windowed_decoder : decoder;
}

AnalyticCosts analytic_costs(const Config& c) {
  if (!c.model.analytic() || !c.device.hardware)
    c.fail("model",
           "needs an analytic model (preset, hf_config or shape keys) and a device "
           "with compute figures");
  const TrainingConfig& t = c.training;
  AnalyticCosts a;
  a.hardware = *c.device.hardware;
  a.hardware.intra_node = c.cluster.intra_node;
  a.hardware.inter_node = c.cluster.inter_node;
  a.settings = cost_settings(c);
  a.optimizer = t.optimizer;
  a.optimizer.reshard_after_forward = t.fsdp_reshard_after_forward;
  const ParallelMesh mesh = c.mesh();
  a.dp = mesh.dp();
  a.cp = mesh.cp();
  // Experts fold over the tp x cp x dp devices of a stage (etp x ep x edp).
  a.edp = mesh.edp();
  // Hybrid sharding: dp x cp / fsdp_shard_group copies of the state (Megatron-LM's
  // num_distributed_optimizer_instances; check_config holds the divisions).
  const int shard = t.fsdp_shard_group;
  if (t.optimizer.zero_stage >= 1 && shard > 0 && a.dense_group() % shard == 0)
    a.shard_copies = a.dense_group() / shard;
  // ZeRO-3 / FSDP: every layer gathers its parameters over its shard group of dp x cp
  // (experts over edp's), on the links the shard group of tp-strided devices reaches (it
  // leaves the domain when its span, tp x shard, does).
  if (t.optimizer.zero_stage >= 3) {
    const ParallelMesh::Part dense = mesh.shard_part(MeshGroup::dp_cp, a.dense_shard(), -1);
    const ParallelMesh::Part experts = mesh.shard_part(MeshGroup::edp, a.edp_shard(), -1);
    a.settings.param_shard_dp = dense.size;  // Megatron shards over dp x cp
    a.settings.param_shard_edp = experts.size;
    a.settings.dp_crosses_nodes = dense.per_domain < dense.size;
    a.settings.param_shard_dp_per_domain = dense.per_domain;
    a.settings.param_shard_edp_per_domain = experts.per_domain;
    a.settings.param_reshard_after_forward = t.fsdp_reshard_after_forward;
    // FSDP2's HSDP all-reduces across the copies in every micro-batch's backward.
    if (t.fsdp_all_reduce_every_microbatch && a.shard_copies > 1) {
      const ParallelMesh::Part d = mesh.replica_part(MeshGroup::dp_cp, a.dense_shard(), -1);
      const ParallelMesh::Part x = mesh.replica_part(MeshGroup::edp, a.edp_shard(), -1);
      a.settings.param_replicas_dp = d.size;
      a.settings.param_replicas_dp_per_domain = d.per_domain;
      a.settings.param_replicas_edp = x.size;
      a.settings.param_replicas_edp_per_domain = x.per_domain;
    }
  }
  const ModelShape& m = *c.model.shape;
  if (m.is_hybrid()) {
    // Each kind the pattern holds, once; the rows take theirs by symbol.
    for (const char symbol : std::string_view(kHybridSymbols)) {
      const auto kind = static_cast<HybridKind>(symbol);
      if (m.hybrid_pattern.find(symbol) != std::string::npos)
        a.hybrid[AnalyticCosts::hybrid_slot(kind)] =
            hybrid_layer_cost(m, a.hardware, a.settings, kind);
    }
  } else {
    a.decoder = decoder_layer_cost(m, a.hardware, a.settings);
    if (m.is_moe()) a.moe_decoder = moe_decoder_layer_cost(m, a.hardware, a.settings);
    // A kind of its own for each kind that has windowed layers (costed only when it has).
    bool dense_windowed = false, moe_windowed = false;
    for (int i = 0; i < m.num_layers; ++i)
      if (m.is_windowed_layer(i)) (m.is_moe_layer(i) ? moe_windowed : dense_windowed) = true;
    if (dense_windowed) a.windowed_decoder = decoder_layer_cost(m, a.hardware, a.settings, true);
    if (moe_windowed)
      a.windowed_moe_decoder = moe_decoder_layer_cost(m, a.hardware, a.settings, true);
  }
  if (m.vision.enabled()) {
    const VisionShape& v = m.vision;
    for (int i = 0; i < v.layers; ++i) {
      std::optional<LayerCost>& kind = v.is_windowed_layer(i) ? a.vision_window : a.vision;
      if (!kind)
        kind = vision_encoder_layer_cost(m, a.hardware, a.settings, v.is_windowed_layer(i));
    }
    a.patch_embed = vision_patch_embed_cost(m, a.hardware, a.settings);
    a.projector = vision_projector_cost(m, a.hardware, a.settings);
  }
  if (m.mtp_layers > 0) a.mtp = mtp_module_cost(m, a.hardware, a.settings);
  if (a.mtp && m.mtp_shared && m.mtp_layers > 1) {
    LayerCost repeat = *a.mtp;
    repeat.param_count = repeat.active_param_count = repeat.expert_param_count = 0;
    repeat.fp8_weight_bytes = repeat.fp8_gemm_params = 0;
    a.mtp_repeat = std::move(repeat);
  }
  a.embedding = embedding_cost(m, a.hardware, a.settings);
  // Tied embeddings: with one stage the head reuses the embedding matrix; with more, the
  // last stage keeps its own copy.
  a.head = head_cost(m, a.hardware, a.settings, true);
  a.head_single_stage = head_cost(m, a.hardware, a.settings, !m.tied_embeddings);
  return a;
}

namespace {

LayerRow measured_row(const LayerGroup& g, int group) {
  LayerRow row;
  row.name = g.name;
  row.group = group;
  row.forward = ms_to_ns(g.forward_ms);
  row.backward_input = ms_to_ns(g.backward_input_ms);
  row.backward_weight = ms_to_ns(g.backward_weight_ms);
  row.output_bytes = g.output_bytes;
  row.static_bytes = g.param_bytes + g.grad_bytes + g.optimizer_bytes;
  row.modes[Recompute::none] =
      LayerModeCost{ms_to_ns(g.recompute_ms), g.activation_bytes, g.weight_grad_retained_bytes};
  for (Recompute r : kRecomputingModes)
    if (const auto& m = g.recompute[r])
      row.modes[r] = LayerModeCost{ms_to_ns(m->recompute_ms), m->activation_bytes,
                                   m->weight_grad_retained_bytes};
  return row;
}

/// A layer of the cost model in one mode, its time still in seconds so that folding the
/// embedding or the head into it rounds once.
struct Seconds {
  double forward = 0, backward_input = 0, backward_weight = 0;
  PerMode<double> recompute;
  PerMode<std::int64_t> activation, retained, offload;
  std::int64_t static_bytes = 0, params = 0, expert_params = 0;
  double gather_bytes = 0;

  static Seconds of(const LayerCost& c, const AnalyticCosts& a, bool all_modes) {
    Seconds s;
    s.forward = c.forward_s;
    s.backward_input = c.backward_input_s;
    s.backward_weight = c.backward_weight_s;
    for (Recompute r : kAllRecompute) {
      // The embedding and the head always keep their activations.
      const Recompute from = all_modes ? r : Recompute::none;
      s.recompute[r] = c.recompute_extra_s[from];
      s.activation[r] = c.activation_bytes[from];
      s.retained[r] = c.weight_grad_bytes[from];
      s.offload[r] = c.offload_bytes[from];
    }
    // Routed experts' state shards over edp (ZeRO-1), the rest over dp x cp: over their
    // shard groups under hybrid sharding.
    s.static_bytes = bmpipe::static_bytes(c.param_count - c.expert_param_count,
                                          a.settings.dtype_bytes, a.optimizer, a.dense_shard());
    if (c.expert_param_count > 0)
      s.static_bytes += bmpipe::static_bytes(c.expert_param_count, a.settings.dtype_bytes,
                                             a.optimizer, a.edp_shard());
    // FP8: the weights' FP8 copies, one byte a GEMM parameter, beside the bf16 ones. With
    // --fp8-param-gather (CostSettings::fp8_param) they are the GEMM weights themselves: the
    // bf16 bytes of those go, and ZeRO-3 shards them as it shards the weights (dense over
    // dp x cp, experts over edp, taken in proportion to the layer's parameters).
    if (a.settings.fp8_param && c.fp8_gemm_params > 0) {
      const double experts = c.param_count > 0 ? static_cast<double>(c.expert_param_count) /
                                                     static_cast<double>(c.param_count)
                                               : 0.0;
      const double held = a.optimizer.zero_stage >= 3
                              ? (1 - experts) / a.dense_shard() + experts / a.edp_shard()
                              : 1.0;
      s.static_bytes += static_cast<std::int64_t>(
          std::llround((c.fp8_weight_bytes - a.settings.dtype_bytes * c.fp8_gemm_params) * held));
    } else {
      s.static_bytes += static_cast<std::int64_t>(std::llround(c.fp8_weight_bytes));
    }
    s.params = c.param_count;
    s.expert_params = c.expert_param_count;
    s.gather_bytes = param_gather_bytes(a.settings, ParamGatherer::distributed_optimizer,
                                        static_cast<double>(c.param_count), c.fp8_gemm_params,
                                        c.fp8_weight_bytes);
    return s;
  }
  void add(const Seconds& o) {
    forward += o.forward;
    backward_input += o.backward_input;
    backward_weight += o.backward_weight;
    for (Recompute r : kAllRecompute) {
      recompute[r] += o.recompute[r];
      activation[r] += o.activation[r];
      retained[r] += o.retained[r];
      offload[r] += o.offload[r];
    }
    static_bytes += o.static_bytes;
    params += o.params;
    expert_params += o.expert_params;
    gather_bytes += o.gather_bytes;
  }
};

bool is_all_to_all(const std::string& name) {
  const auto ends = [&](std::string_view tail) {
    return name.size() >= tail.size() &&
           name.compare(name.size() - tail.size(), tail.size(), tail.data(), tail.size()) == 0;
  };
  return ends("a2a-dispatch") || ends("a2a-combine");
}

/// Computation and a2a in turn (seconds) to ns parts adding up to `total` exactly: a2a
/// rounded each, computation rounded on its running sum, the last computation taking what
/// the row's own rounding leaves (a few ns at most).
std::vector<Time> to_parts(const std::vector<double>& seconds, Time total) {
  std::vector<Time> parts(seconds.size(), 0);
  double compute = 0;
  Time compute_ns = 0, sum = 0;
  for (std::size_t k = 0; k < seconds.size(); ++k) {
    if (k % 2 == 1) {
      parts[k] = s_to_ns(seconds[k]);
    } else {
      compute += seconds[k];
      parts[k] = s_to_ns(compute) - compute_ns;
      compute_ns += parts[k];
    }
    sum += parts[k];
  }
  parts.back() += total - sum;  // an odd count: the last part is computation
  if (parts.back() < 0) parts.back() = 0;
  return parts;
}

/// The row's forward and backward parts from the sub-ops of what it folds together, in
/// forward order (see LayerRow::forward_parts); nothing when none of them is an a2a.
void split_parts(const std::vector<const LayerCost*>& folded, LayerRow& row) {
  std::vector<double> f{0.0}, b{0.0};
  bool any = false;
  for (const LayerCost* c : folded)
    for (const SubOpCost& op : c->ops) {
      if (!is_all_to_all(op.name)) {
        f.back() += op.forward_s;
        continue;
      }
      any = true;
      f.push_back(op.forward_s);
      f.push_back(0.0);
    }
  if (!any) return;
  for (auto c = folded.rbegin(); c != folded.rend(); ++c)
    for (auto op = (*c)->ops.rbegin(); op != (*c)->ops.rend(); ++op) {
      if (!is_all_to_all(op->name)) {
        b.back() += op->backward_input_s + op->backward_weight_s;
        continue;
      }
      b.push_back(op->backward_input_s + op->backward_weight_s);
      b.push_back(0.0);
    }
  row.forward_parts = to_parts(f, row.forward);
  row.backward_parts = to_parts(b, row.backward_input + row.backward_weight);
}

}  // namespace

LayerTable layer_costs(const Config& c, const AnalyticCosts* a) {
  LayerTable table;
  if (!c.model.analytic()) {
    for (int gi = 0; gi < static_cast<int>(c.model.layers.size()); ++gi)
      for (int i = 0; i < c.model.layers[gi].count; ++i)
        table.layers.push_back(measured_row(c.model.layers[gi], gi));
    return table;
  }
  if (!a) c.fail("model", "internal: the analytic layer table needs the cost model's layers");
  const ModelShape& m = *c.model.shape;
  const int n = m.num_layers;  // the LLM's; c.model.num_layers() counts the vision rows too
  const Seconds head = Seconds::of(a->head_single_stage, *a, false);
  table.head_copy_static_bytes = Seconds::of(a->head, *a, false).static_bytes - head.static_bytes;
  table.head_copy_params = a->head.param_count - a->head_single_stage.param_count;
  table.fixed_forward_flops = a->embedding.forward_flops + a->head.forward_flops;
  if (a->patch_embed) table.fixed_forward_flops += a->patch_embed->forward_flops;
  // The MTP modules sit on the last stage, before the head: folded into the last layer
  // (or rows of their own with separate ends).
  if (a->mtp) table.fixed_forward_flops += m.mtp_layers * a->mtp->forward_flops;
  const bool separate = has_separate_ends(c);
  table.separate_ends = separate;
  // One row of the table from its units (`folded`, in the order they run), their time
  // summed in seconds so that the row rounds once.
  auto make_row = [&](std::string name, LayerKind kind, const LayerCost& unit,
                      const std::vector<std::pair<const LayerCost*, bool>>& folded) {
    Seconds s;
    for (const auto& [cost, all_modes] : folded) s.add(Seconds::of(*cost, *a, all_modes));
    LayerRow row;
    row.name = std::move(name);
    row.kind = kind;
    row.forward = s_to_ns(s.forward);
    row.backward_input = s_to_ns(s.backward_input);
    row.backward_weight = s_to_ns(s.backward_weight);
    row.output_bytes = unit.output_bytes;
    row.static_bytes = s.static_bytes;
    row.param_count = s.params;
    row.expert_param_count = s.expert_params;
    row.gather_bytes = s.gather_bytes;
    // The embedding and the head alone keep their activations whatever the mode: they run
    // none only, so that a plan's modes say what recomputes.
    const bool recomputes =
        std::any_of(folded.begin(), folded.end(), [](const auto& f) { return f.second; });
    for (Recompute r : kAllRecompute)
      if (recomputes || r == Recompute::none)
        row.modes[r] =
            LayerModeCost{s_to_ns(s.recompute[r]), s.activation[r], s.retained[r], s.offload[r]};
    // The unit each op runs first: the first one in forward, the last one in backward.
    row.first_forward = s_to_ns(folded.front().first->first_forward_s);
    row.first_backward_input = s_to_ns(folded.back().first->first_backward_input_s);
    row.first_backward_weight = s_to_ns(folded.back().first->first_backward_weight_s);
    // The forward FLOPs of the embedding, the head and the MTP modules are the table's
    // fixed_forward_flops; what recomputing adds is the row's.
    if (kind == LayerKind::decoder || kind == LayerKind::vision)
      row.forward_flops = unit.forward_flops;
    if (kind == LayerKind::decoder || kind == LayerKind::mtp || kind == LayerKind::vision)
      row.recompute_flops = unit.recompute_flops;
    if (a->settings.ep > 1) {
      std::vector<const LayerCost*> units;
      for (const auto& f : folded) units.push_back(f.first);
      split_parts(units, row);
      table.all_to_all = table.all_to_all || !row.forward_parts.empty();
    }
    return row;
  };
  if (separate && a->mtp) {
    table.mtp_embedding_copy_static_bytes = Seconds::of(a->embedding, *a, false).static_bytes;
    table.mtp_embedding_copy_params = a->embedding.param_count;
    if (!m.tied_embeddings) {
      table.mtp_head_copy_static_bytes = Seconds::of(a->head, *a, false).static_bytes;
      table.mtp_head_copy_params = a->head.param_count;
    }
  }
  table.layers.reserve(n + m.vision.rows() + (separate ? 2 + m.mtp_layers : 0));
  // A vision model's rows come first, in the order they run: its encoder blocks
  // ("vision.0+patch_embed", "vision.window.1", ...), then "projector". The planner and
  // training.partition count them as layers; Megatron's placement puts them on the first
  // stage (planner/baselines.cpp, rows_of_split).
  const VisionShape& v = m.vision;
  for (int l = 0; l < v.layers; ++l) {
    const LayerCost& kind = v.is_windowed_layer(l) ? *a->vision_window : *a->vision;
    std::string name = kind.name + "." + std::to_string(l);
    std::vector<std::pair<const LayerCost*, bool>> units;
    if (l == 0) units.emplace_back(&*a->patch_embed, false), name += "+patch_embed";
    units.emplace_back(&kind, true);
    table.layers.push_back(make_row(std::move(name), LayerKind::vision, kind, units));
  }
  if (v.enabled())
    table.layers.push_back(
        make_row("projector", LayerKind::vision, *a->projector, {{&*a->projector, true}}));
  if (separate)
    table.layers.push_back(
        make_row("embedding", LayerKind::embedding, a->embedding, {{&a->embedding, false}}));
  for (int l = 0; l < n; ++l) {
    const LayerCost& kind = a->layer(m, l);
    // Named by kind: "decoder.5", "moe_decoder.5", "decoder.swa.4" (a sliding-window layer),
    // a hybrid model's "mamba.0", "moe.1", "attention.5".
    std::string name = kind.name + "." + std::to_string(l);
    std::vector<std::pair<const LayerCost*, bool>> units;
    if (l == 0 && !separate) units.emplace_back(&a->embedding, false), name += "+embedding";
    units.emplace_back(&kind, true);
    if (l == n - 1 && !separate && a->mtp) {
      for (int k = 0; k < m.mtp_layers; ++k) units.emplace_back(&a->mtp_depth(k), true);
      name += "+mtp";
    }
    if (l == n - 1 && !separate)
      units.emplace_back(&a->head_single_stage, false), name += "+lm_head";
    LayerRow row = make_row(std::move(name), LayerKind::decoder, kind, units);
    if (l == n - 1 && !separate && a->mtp)
      for (Recompute r : kAllRecompute)
        row.recompute_flops[r] += m.mtp_layers * a->mtp->recompute_flops[r];
    table.layers.push_back(std::move(row));
  }
  if (separate) {
    const std::int64_t hidden = table.layers.back().output_bytes;  // the last decoder's
    for (int k = 0; k < m.mtp_layers; ++k) {
      const LayerCost& depth = a->mtp_depth(k);
      LayerRow row = make_row("mtp." + std::to_string(k), LayerKind::mtp, depth, {{&depth, true}});
      // Megatron-Core's MTP block hands on the main model's hidden states and those of
      // each MTP layer so far, concatenated along the sequence (MultiTokenPredictionBlock
      // .forward, megatron/core/transformer/multi_token_prediction.py at d98e8a64ddf3).
      row.output_bytes = (k + 2) * hidden;
      table.layers.push_back(std::move(row));
    }
    table.layers.push_back(make_row("lm_head", LayerKind::head, a->head_single_stage,
                                    {{&a->head_single_stage, false}}));
  }
  // Whole-layer offload runs without recomputation (Megatron-Core refuses the two
  // together): a planner may not pick a mode the job cannot run.
  if (c.training.offload_layers > 0)
    for (LayerRow& row : table.layers)
      for (Recompute r : kAllModes)
        if (r != Recompute::none) row.modes[r].reset();
  // Nor beside the EP all-to-all overlap (training.moe_overlap) does Megatron-Core run full
  // recomputation (megatron.moe-overlap-full-recompute in experiment/rules_megatron.cpp quotes it):
  // the planner keeps to the rest.
  if (c.training.moe_overlap)
    for (LayerRow& row : table.layers) row.modes[Recompute::full].reset();
  // The offload layer modes (Recompute::offload and selective_offload) exist when
  // training.recompute names one (RecomputeSpec::names_offload): offload is none's costs
  // with none's offload_bytes on the host, selective_offload selective's with selective's,
  // each copy timed on the device's share of its host link (HardwareSpec::host_link_GBps
  // over host_link_devices, as the engine copies a stage's bytes); none and selective
  // layers then keep all of theirs. Otherwise the table is the job-wide form, as before
  // the modes: every none and selective layer offloads. selective_offload is left out where
  // Megatron-Core refuses it: expert offload while recompute_modules re-runs the whole MoE
  // (megatron.offload-experts-moe-recompute, experiment/rules_megatron.cpp).
  if (c.training.recompute.names_offload()) {
    const HardwareSpec& hw = a->hardware;
    const double link = hw.host_link_GBps * 1e9 / std::max(hw.host_link_devices, 1);
    const OffloadModules off = a->settings.offload_modules;
    const bool experts_refused =
        has_module(a->settings.recompute_modules, RecomputeModule::moe) &&
        (offloads(off, OffloadModule::expert_fc1) || offloads(off, OffloadModule::moe_act));
    for (LayerRow& row : table.layers) {
      for (Recompute mode : kOffloadModes) {
        const Recompute kept = device_mode(mode);
        if (!row.has(kept) || (mode == Recompute::selective_offload && experts_refused)) continue;
        LayerModeCost& moved = row.modes[mode].emplace(*row.modes[kept]);
        if (link > 0) moved.offload_copy = s_to_ns(static_cast<double>(moved.offload_bytes) / link);
      }
      for (Recompute r : {Recompute::none, Recompute::selective})
        if (row.modes[r]) row.modes[r]->offload_bytes = 0;
    }
  }
  return table;
}

}  // namespace bmpipe
