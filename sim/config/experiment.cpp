#include "sim/config/experiment.hpp"

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

SimInput make_sim_input(const Config& c, const Topology& topology, const Schedule& schedule) {
  SimInput in;
  in.topology = &topology;
  in.fb_overlap_factor = c.training.overlap_factor;
  in.fb_pair_time = ms_to_ns(c.training.overlap_ms);
  const std::vector<int> counts = stage_layer_counts(c, schedule.num_stages);

  // Expand layer groups into a flat list of layers, then sum each stage's share. Every
  // layer's times are rounded to ns once, here.
  std::vector<const LayerGroup*> layers;
  for (const auto& g : c.model.layers)
    for (int i = 0; i < g.count; ++i) layers.push_back(&g);

  std::vector<std::int64_t> stage_static(schedule.num_stages, 0);
  std::size_t next = 0;
  for (int s = 0; s < schedule.num_stages; ++s) {
    StageCost cost;
    std::int64_t retained = 0;
    bool all_retained = true;
    for (int i = 0; i < counts[s]; ++i) {
      const LayerGroup& g = *layers[next++];
      cost.forward += ms_to_ns(g.forward_ms);
      cost.backward_input += ms_to_ns(g.backward_input_ms);
      cost.backward_weight += ms_to_ns(g.backward_weight_ms);
      cost.recompute += ms_to_ns(g.recompute_ms);
      cost.activation_bytes += g.activation_bytes;
      all_retained = all_retained && g.weight_grad_retained_bytes < 0;
      retained += g.weight_grad_retained_bytes < 0 ? g.activation_bytes : g.weight_grad_retained_bytes;
      cost.output_bytes = g.output_bytes;
      stage_static[s] += g.param_bytes + g.grad_bytes + g.optimizer_bytes;
    }
    cost.weight_grad_retained_bytes = all_retained ? -1 : retained;
    in.stages.push_back(cost);
  }

  const int p = schedule.num_devices;
  const int devices = topology.num_devices();
  const int per_pipeline_rank = devices / c.training.pp;  // tp * dp devices per pp rank
  const auto gib = [](double v) { return static_cast<std::int64_t>(std::llround(v * 1073741824.0)); };
  in.rank_device.resize(p);
  in.static_bytes.assign(p, gib(c.device.reserved_GiB));
  in.capacity_bytes.assign(p, gib(c.device.memory_GiB));
  for (int r = 0; r < p; ++r) in.rank_device[r] = r * per_pipeline_rank;
  for (int s = 0; s < schedule.num_stages; ++s)
    in.static_bytes[schedule.stage_device[s]] += stage_static[s];
  return in;
}

}  // namespace bmpipe
