#include "experiment/experiment.hpp"

#include <cmath>

namespace bmpipe {

std::vector<int> stage_layer_counts(const Config& c, int num_stages) {
  if (!c.training.partition.empty()) {
    if (static_cast<int>(c.training.partition.size()) != num_stages)
      c.fail("training.partition", "has " + std::to_string(c.training.partition.size()) +
                                       " entries but the schedule has " +
                                       std::to_string(num_stages) + " stages");
    return c.training.partition;
  }
  const int layers = c.model.num_layers();
  if (layers < num_stages)
    c.fail("training.pp", "the model's " + std::to_string(layers) + " layers cannot fill " +
                              std::to_string(num_stages) + " stages");
  std::vector<int> counts(num_stages, layers / num_stages);
  for (int s = 0; s < layers % num_stages; ++s) ++counts[s];
  return counts;
}

AnalyticCosts analytic_costs(const Config& c, int num_stages) {
  if (!c.model.analytic() || !c.device.hardware)
    c.fail("model",
           "needs an analytic model (preset, hf_config or shape keys) and a device "
           "with compute figures");
  const TrainingConfig& t = c.training;
  AnalyticCosts a;
  a.hardware = *c.device.hardware;
  a.hardware.intra_node = c.cluster.intra_node;
  a.hardware.inter_node = c.cluster.inter_node;
  a.settings.seq_length = t.seq_length.value_or(0);
  a.settings.micro_batch_size = t.micro_batch_size;
  a.settings.tp = t.tp;
  a.settings.sequence_parallel = t.sequence_parallel;
  a.settings.dtype_bytes = t.dtype_bytes();
  // Megatron placement puts a tp group on consecutive devices: it leaves the node only
  // when it is larger than one.
  a.settings.tp_crosses_nodes = t.tp > c.cluster.devices_per_node;
  a.optimizer = t.optimizer;
  a.dp = t.data_parallel(c.cluster.nodes * c.cluster.devices_per_node);
  const ModelShape& m = *c.model.shape;
  a.decoder = decoder_layer_cost(m, a.hardware, a.settings);
  a.embedding = embedding_cost(m, a.hardware, a.settings);
  // Tied embeddings: with one stage the head reuses the embedding matrix; with more, the
  // last stage keeps its own copy (Megatron-LM keeps the two in sync with an all-reduce).
  a.head = head_cost(m, a.hardware, a.settings, !(m.tied_embeddings && num_stages == 1));
  return a;
}

Recompute recompute_mode(const Config& c, int stage, int layer) {
  const RecomputeSpec& r = c.training.recompute;
  if (auto it = r.layers.find(layer); it != r.layers.end()) return it->second;
  if (auto it = r.stages.find(stage); it != r.stages.end()) return it->second;
  return r.global;
}

namespace {

LayerGroup group_of(const LayerCost& cost, Recompute mode, const AnalyticCosts& a) {
  LayerGroup g;
  g.name = cost.name;
  g.forward_ms = cost.forward_s * 1e3;
  g.backward_input_ms = cost.backward_input_s * 1e3;
  g.backward_weight_ms = cost.backward_weight_s * 1e3;
  g.recompute_ms = cost.recompute_extra_s[mode] * 1e3;
  g.activation_bytes = cost.activation_bytes[mode];
  g.weight_grad_retained_bytes = cost.weight_grad_bytes[mode];
  g.output_bytes = cost.output_bytes;
  const int e = a.settings.dtype_bytes;
  g.param_bytes = cost.param_count * e;
  g.grad_bytes = cost.param_count * a.optimizer.grad_bytes;
  g.optimizer_bytes =
      static_bytes(cost.param_count, e, a.optimizer, a.dp) - g.param_bytes - g.grad_bytes;
  return g;
}

void fold(LayerGroup& into, const LayerGroup& extra) {
  into.forward_ms += extra.forward_ms;
  into.backward_input_ms += extra.backward_input_ms;
  into.backward_weight_ms += extra.backward_weight_ms;
  into.recompute_ms += extra.recompute_ms;
  into.activation_bytes += extra.activation_bytes;
  into.weight_grad_retained_bytes =
      into.weight_grad_retained_bytes.value_or(into.activation_bytes - extra.activation_bytes) +
      extra.weight_grad_retained_bytes.value_or(extra.activation_bytes);
  into.param_bytes += extra.param_bytes;
  into.grad_bytes += extra.grad_bytes;
  into.optimizer_bytes += extra.optimizer_bytes;
}

}  // namespace

std::vector<LayerGroup> expand_layers(const Config& c, const std::vector<int>& counts) {
  std::vector<LayerGroup> out;
  if (!c.model.analytic()) {
    for (const auto& g : c.model.layers)
      for (int i = 0; i < g.count; ++i) {
        out.push_back(g);
        out.back().count = 1;
      }
    return out;
  }
  const AnalyticCosts a = analytic_costs(c, static_cast<int>(counts.size()));
  int layer = 0;
  for (int s = 0; s < static_cast<int>(counts.size()); ++s)
    for (int i = 0; i < counts[s]; ++i, ++layer) {
      LayerGroup g = group_of(a.decoder, recompute_mode(c, s, layer), a);
      g.name = "decoder." + std::to_string(layer);
      out.push_back(g);
    }
  if (out.empty()) return out;
  fold(out.front(), group_of(a.embedding, Recompute::none, a));
  out.front().name += "+embedding";
  fold(out.back(), group_of(a.head, Recompute::none, a));
  out.back().name += "+lm_head";
  return out;
}

Time tail_time(const Config& c, const AnalyticCosts& a, int rank, std::int64_t params) {
  const int tp = c.training.tp, dp = a.dp;
  const int e = a.settings.dtype_bytes;
  double seconds = optimizer_step_s(params, e, a.optimizer, dp, a.hardware);
  if (dp > 1) {
    // The dp group of pipeline rank `rank` (tp rank 0): devices base + j * tp.
    const int base = rank * tp * dp, last = base + (dp - 1) * tp;
    const bool crosses = base / c.cluster.devices_per_node != last / c.cluster.devices_per_node;
    const double grads = static_cast<double>(params) * a.optimizer.grad_bytes;
    if (a.optimizer.zero_stage >= 1)
      seconds += collective_time_s(a.hardware, Collective::reduce_scatter, dp, grads, crosses) +
                 collective_time_s(a.hardware, Collective::all_gather, dp,
                                   static_cast<double>(params) * e, crosses);
    else
      seconds += collective_time_s(a.hardware, Collective::all_reduce, dp, grads, crosses);
  }
  return s_to_ns(seconds);
}

SimInput make_sim_input(const Config& c, const Topology& topology, const Schedule& schedule) {
  SimInput in;
  in.topology = &topology;
  in.fb_overlap_factor = c.training.overlap_factor;
  if (c.training.overlap_ms) in.fb_pair_time = ms_to_ns(*c.training.overlap_ms);
  const std::vector<int> counts = stage_layer_counts(c, schedule.num_stages);

  // A flat list of layers, then each stage's share summed. Every layer's times are
  // rounded to ns once, here.
  const std::vector<LayerGroup> layers = expand_layers(c, counts);

  std::vector<std::int64_t> stage_static(schedule.num_stages, 0);
  std::vector<std::int64_t> stage_params(schedule.num_stages, 0);
  std::size_t next = 0;
  for (int s = 0; s < schedule.num_stages; ++s) {
    StageCost cost;
    std::int64_t retained = 0;
    bool all_retained = true;
    for (int i = 0; i < counts[s]; ++i) {
      const LayerGroup& g = layers[next++];
      cost.forward += ms_to_ns(g.forward_ms);
      cost.backward_input += ms_to_ns(g.backward_input_ms);
      cost.backward_weight += ms_to_ns(g.backward_weight_ms);
      cost.recompute += ms_to_ns(g.recompute_ms);
      cost.activation_bytes += g.activation_bytes;
      all_retained = all_retained && !g.weight_grad_retained_bytes;
      retained += g.weight_grad_retained_bytes.value_or(g.activation_bytes);
      cost.output_bytes = g.output_bytes;
      stage_static[s] += g.param_bytes + g.grad_bytes + g.optimizer_bytes;
      stage_params[s] += g.param_bytes;
    }
    if (!all_retained) cost.weight_grad_retained_bytes = retained;
    in.stages.push_back(cost);
  }

  const int p = schedule.num_ranks;
  const int devices = topology.num_devices();
  const int per_pipeline_rank = devices / c.training.pp;  // tp * dp devices per pp rank
  const auto gib = [](double v) {
    return static_cast<std::int64_t>(std::llround(v * 1073741824.0));
  };
  in.rank_device.resize(p);
  in.static_bytes.assign(p, gib(c.device.reserved_GiB));
  in.capacity_bytes.assign(p, gib(c.device.memory_GiB));
  for (int r = 0; r < p; ++r) in.rank_device[r] = r * per_pipeline_rank;
  for (int s = 0; s < schedule.num_stages; ++s)
    in.static_bytes[schedule.stage_rank[s]] += stage_static[s];

  if (c.model.analytic()) {
    const AnalyticCosts a = analytic_costs(c, schedule.num_stages);
    std::vector<std::int64_t> rank_params(p, 0);
    for (int s = 0; s < schedule.num_stages; ++s)
      rank_params[schedule.stage_rank[s]] += stage_params[s] / a.settings.dtype_bytes;
    in.tail_time.resize(p);
    for (int r = 0; r < p; ++r) in.tail_time[r] = tail_time(c, a, r, rank_params[r]);
  }
  return in;
}

RunInfo make_run_info(const Config& c, const Schedule& schedule) {
  RunInfo info;
  info.schedule = schedule.name;
  info.pp = c.training.pp;
  info.vpp = c.training.vpp;
  info.microbatches = c.training.microbatches;
  const TrainingConfig& t = c.training;
  const int devices = c.cluster.nodes * c.cluster.devices_per_node;
  const int dp = t.data_parallel(devices);
  if (t.seq_length)
    info.tokens_per_iteration =
        static_cast<double>(t.microbatches) * t.micro_batch_size * dp * *t.seq_length;
  if (!c.model.analytic() || !c.device.hardware) return info;
  const std::vector<int> counts = stage_layer_counts(c, schedule.num_stages);
  const AnalyticCosts a = analytic_costs(c, schedule.num_stages);
  // One device's forward FLOPs per micro-batch summed over the pipeline, times the tp x
  // dp devices that share each stage and the micro-batches.
  double forward = a.embedding.forward_flops + a.head.forward_flops, recompute = 0;
  int layer = 0;
  for (int s = 0; s < static_cast<int>(counts.size()); ++s)
    for (int i = 0; i < counts[s]; ++i, ++layer) {
      forward += a.decoder.forward_flops;
      recompute += a.decoder.recompute_flops[recompute_mode(c, s, layer)];
    }
  const double scale = static_cast<double>(t.tp) * dp * t.microbatches;
  // Training = forward + input-grad + weight-grad = 3x forward (the usual model-FLOPs
  // convention behind MFU, e.g. Chowdhery et al. 2022, appendix B).
  info.model_flops_per_iteration = 3 * forward * scale;
  info.hardware_flops_per_iteration = (3 * forward + recompute) * scale;
  info.peak_flops_per_device = a.hardware.peak_tflops * 1e12;
  info.devices = t.pp * t.tp * dp;
  return info;
}

}  // namespace bmpipe
