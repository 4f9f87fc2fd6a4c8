#pragma once
// Small builders shared by the engine tests: uniform stages on one node.
#include <memory>

#include "schedules/registry.hpp"
#include "sim/simulate.hpp"

namespace bmpipe::test {

struct Uniform {
  Time f = 0, i = 0, w = 0;
  std::int64_t activation = 0, output = 0;
};

/// One node of `devices` devices joined by links of `latency_us` and `bandwidth_GBps`.
inline std::unique_ptr<Topology> one_node(int devices, double latency_us = 0.0,
                                          double bandwidth_GBps = 1e6) {
  return std::make_unique<Topology>(
      ClusterSpec{1, devices, LinkSpec{bandwidth_GBps, latency_us}, LinkSpec{}});
}

inline SimInput uniform_input(const Schedule& sch, const Topology& topo, const Uniform& u) {
  SimInput in;
  in.topology = &topo;
  StageCost c;
  c.forward = u.f;
  c.backward_input = u.i;
  c.backward_weight = u.w;
  c.activation_bytes = u.activation;
  c.output_bytes = u.output;
  in.stages.assign(sch.num_stages, c);
  for (int r = 0; r < sch.num_devices; ++r) in.rank_device.push_back(r);
  return in;
}

/// Records everything an Observer is told.
struct Recorder : Observer {
  std::vector<OpRecord> ops;
  std::vector<TransferRecord> transfers;
  struct Mem {
    int rank;
    Time time;
    std::int64_t bytes;
  };
  std::vector<Mem> memory;
  void on_op(const OpRecord& r) override { ops.push_back(r); }
  void on_transfer(const TransferRecord& t) override { transfers.push_back(t); }
  void on_memory(int rank, Time t, std::int64_t b) override { memory.push_back({rank, t, b}); }
  const OpRecord* find(int rank, const Op& op) const {
    for (const auto& r : ops)
      if (r.rank == rank && r.op == op) return &r;
    return nullptr;
  }
};

}  // namespace bmpipe::test
