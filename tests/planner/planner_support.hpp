#pragma once
// Small planner instances built in code: measured layers of a few kinds, each with its own
// none / selective / full costs, on one node with free communication.
#include <random>
#include <string>

#include "experiment/experiment.hpp"
#include "planner/planner.hpp"

namespace bmpipe::test {

struct LayerKind {
  Time f, i, w;               // ns
  PerMode<Time> recompute;    // extra backward ns per mode
  PerMode<std::int64_t> act;  // bytes kept per mode
  std::int64_t static_bytes;
};

/// A random kind: full keeps least and costs most, selective sits between.
inline LayerKind random_kind(std::mt19937_64& rng) {
  auto pick = [&](std::int64_t lo, std::int64_t hi) {
    return lo + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(hi - lo + 1));
  };
  LayerKind k;
  k.f = pick(5, 20) * 1000;
  k.i = pick(5, 25) * 1000;
  k.w = pick(2, 15) * 1000;
  k.recompute[Recompute::none] = 0;
  k.recompute[Recompute::full] = k.f;
  k.recompute[Recompute::selective] = k.f * pick(1, 4) / 10;
  k.act[Recompute::none] = pick(40, 100) * 1000;
  k.act[Recompute::selective] = k.act[Recompute::none] * pick(4, 8) / 10;
  k.act[Recompute::full] = k.act[Recompute::none] * pick(1, 2) / 10;
  k.static_bytes = pick(10, 60) * 1000;
  return k;
}

/// An experiment of `kinds[order[l]]` layers, pp ranks, m micro-batches, `capacity` bytes
/// per device. Built from a YAML config, then given its recompute modes in code.
inline std::shared_ptr<const Experiment> instance(const std::vector<LayerKind>& kinds,
                                                  const std::vector<int>& order, int pp, int m,
                                                  std::int64_t capacity) {
  std::string yaml =
      "cluster: {nodes: 1, devices_per_node: " + std::to_string(pp) +
      ", device: {name: d, memory_GiB: 1}, intra_node: {bandwidth_GBps: 1000, latency_us: 0}}\n"
      "model:\n  layers:\n";
  for (std::size_t l = 0; l < order.size(); ++l) {
    const LayerKind& k = kinds[order[l]];
    yaml += "    - {name: k" + std::to_string(order[l]) +
            ", count: 1, forward_ms: " + std::to_string(k.f / 1e6) +
            ", backward_input_ms: " + std::to_string(k.i / 1e6) +
            ", backward_weight_ms: " + std::to_string(k.w / 1e6) +
            ", activation_bytes: " + std::to_string(k.act[Recompute::none]) +
            ", output_bytes: 0, param_bytes: " + std::to_string(k.static_bytes) + "}\n";
  }
  yaml += "training: {schedule: 1f1b, pp: " + std::to_string(pp) +
          ", microbatches: " + std::to_string(m) + "}\n";
  auto e = std::make_shared<Experiment>(*prepare(parse_config(yaml, "instance.yaml")));
  for (std::size_t l = 0; l < order.size(); ++l) {
    const LayerKind& k = kinds[order[l]];
    LayerRow& row = e->layers.layers[l];
    row.forward = k.f, row.backward_input = k.i, row.backward_weight = k.w;
    for (Recompute r : kAllRecompute) row.modes[r] = LayerModeCost{k.recompute[r], k.act[r], {}};
  }
  e->capacity_bytes = capacity;
  return e;
}

}  // namespace bmpipe::test
