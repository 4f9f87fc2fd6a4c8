#pragma once
/// \file
/// The device graph: which devices exist, which links join them, and the cheapest path a
/// point-to-point transfer takes. Built with Boost.Graph; nothing outside topology.cpp sees
/// Boost types.
///
/// Shape: `nodes` x `devices_per_node` devices. Inside a node every ordered pair of devices
/// has its own directed link (HCCS full mesh; NVLink through NVSwitch gives every GPU its
/// own port, which behaves the same for point-to-point traffic). Between nodes, every
/// device has its own NIC: a directed link device -> fabric carrying the inter-node latency
/// and a link fabric -> device with none, so a cross-node path pays the latency once and
/// contends on the sender's and the receiver's NICs. Each link direction is a resource
/// that transfers queue on.
///
/// A scale-up domain larger than a node (`scale_up_domain` devices: GB200 NVL72's 72 GPUs
/// on one NVLink switch fabric, an Ascend SuperPoD's 384 NPUs on one Unified Bus) adds one
/// switch vertex per domain: every device has a directed link device -> switch with the
/// intra-node bandwidth and latency and a link switch -> device with no latency, so a
/// transfer between two nodes of one domain runs at the scale-up bandwidth and contends on
/// the sender's and the receiver's switch ports.

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "sim/time.hpp"

namespace bmpipe {

struct LinkSpec {
  double bandwidth_GBps = 0.0;  ///< 1 GB/s = 1e9 bytes/s = 1 byte/ns
  double latency_us = 0.0;
};

struct ClusterSpec {
  int nodes = 1;
  int devices_per_node = 1;
  LinkSpec intra_node;
  LinkSpec inter_node;
  /// Devices per scale-up domain (whole nodes, one high-bandwidth fabric); 0 =
  /// devices_per_node, the usual node that is its own domain. Last, so that positional
  /// initializers of the other four keep working.
  int scale_up_domain = 0;

  /// scale_up_domain, or devices_per_node when it is 0.
  int domain() const { return scale_up_domain > 0 ? scale_up_domain : devices_per_node; }
};

struct Link {
  int from = 0;  ///< vertex; devices are 0..num_devices()-1, the fabric is num_devices()
  int to = 0;
  double bytes_per_ns = 0.0;
  Time latency = 0;
};

/// A path through the graph. A transfer holds every link of its path at once (cut-through
/// rather than store-and-forward): it takes latency + bytes / (slowest link's bandwidth).
struct Route {
  std::vector<int> links;  ///< link ids, in path order
  Time latency = 0;
  double bytes_per_ns = 0.0;  ///< bandwidth of the slowest link on the path

  /// Time the links are held for `bytes`: the serialization time, rounded to nearest ns.
  Time serialization(std::int64_t bytes) const;
};

/// Immutable after construction, apart from a memo of computed routes guarded by a mutex,
/// so one Topology can serve many concurrent simulate() calls.
class Topology {
 public:
  explicit Topology(const ClusterSpec& spec);
  ~Topology();
  Topology(const Topology&) = delete;
  Topology& operator=(const Topology&) = delete;

  int num_devices() const { return num_devices_; }
  int devices_per_node() const { return devices_per_node_; }
  int node_of(int device) const { return device / devices_per_node_; }
  /// The scale-up domain of `device` (the node when the domain is the node).
  int domain_of(int device) const { return device / domain_; }
  const std::vector<Link>& links() const { return links_; }

  /// Cheapest path from `src` to `dst` for a message of `bytes`, by Dijkstra with edge
  /// weight latency + bytes / bandwidth. Ties go to the lower vertex numbers, so the
  /// choice is deterministic. src == dst gives an empty route. Results are memoized.
  Route route(int src, int dst, std::int64_t bytes) const;

 private:
  Route compute_route(int src, int dst, std::int64_t bytes) const;

  struct Graph;  // the Boost.Graph adjacency list, kept out of this header
  int num_devices_ = 0;
  int devices_per_node_ = 1;
  int domain_ = 1;
  int vertices_ = 1;  ///< devices, the fabric, then one switch per domain larger than a node
  std::vector<Link> links_;
  std::unique_ptr<Graph> graph_;
  mutable std::mutex memo_mutex_;
  mutable std::map<std::tuple<int, int, std::int64_t>, Route> memo_;
};

}  // namespace bmpipe
