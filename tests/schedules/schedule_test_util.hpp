#pragma once
// Shared by the schedule tests: uniform integer costs on one node with free transfers.
#include <algorithm>
#include <memory>

#include "schedules/registry.hpp"
#include "sim/simulate.hpp"

namespace bmpipe::test {

struct Costs {
  Time f = 1, i = 1, w = 1;
  std::int64_t activation = 1;
};

inline std::unique_ptr<Topology> one_node(int devices) {
  return std::make_unique<Topology>(ClusterSpec{1, devices, LinkSpec{1e6, 0.0}, LinkSpec{}});
}

inline SimInput uniform(const Schedule& sch, const Topology& topo, const Costs& c) {
  SimInput in;
  in.topology = &topo;
  StageCost sc;
  sc.forward = c.f;
  sc.backward_input = c.i;
  sc.backward_weight = c.w;
  sc.activation_bytes = c.activation;
  sc.output_bytes = 0;  // free communication
  in.stages.assign(sch.num_stages, sc);
  for (int r = 0; r < sch.num_devices; ++r) in.rank_device.push_back(r);
  return in;
}

inline Schedule generate(const char* name, int p, int m, int v = 1) {
  return find_schedule(name)->generate(ScheduleParams{p, m, v, {}});
}

/// Idle time of a device between its own first op and its last.
inline Time span_idle(const DeviceResult& d) {
  return d.last_end - d.first_start - d.busy;
}

inline Time max_span_idle(const SimResult& r) {
  Time t = 0;
  for (const auto& d : r.devices) t = std::max(t, span_idle(d));
  return t;
}

inline int max_inflight(const SimResult& r) {
  int n = 0;
  for (const auto& d : r.devices) n = std::max(n, d.peak_inflight);
  return n;
}

}  // namespace bmpipe::test
