#include "sim/cost/collectives.hpp"

#include <algorithm>
#include <cmath>

namespace bmpipe {

const char* collective_algorithm_name(CollectiveAlgorithm algorithm) {
  switch (algorithm) {
    case CollectiveAlgorithm::ring:
      return "ring";
    case CollectiveAlgorithm::tree:
      return "tree";
    case CollectiveAlgorithm::nvls:
      return "nvls";
    case CollectiveAlgorithm::nvls_tree:
      return "nvls_tree";
  }
  return "ring";
}

namespace {

constexpr double kCannot = std::numeric_limits<double>::infinity();

/// The links a group's members see (the formulas are in the header).
struct Links {
  double nv = 0;     ///< B_nv, bytes/s
  double nic = 0;    ///< B_nic, bytes/s
  double a_nv = 0;   ///< s
  double a_nic = 0;  ///< s
};

Links links(const HardwareSpec& hw, int g) {
  Links l;
  // A mesh node drives its g - 1 peer links at once; a switched node has one port.
  const double lanes = hw.intra_node_mesh ? std::max(g - 1, 1) : 1.0;
  l.nv = hw.intra_node.bandwidth_GBps * 1e9 * lanes * hw.collective_efficiency;
  l.nic = hw.inter_node.bandwidth_GBps * 1e9 * nic_efficiency(hw);
  l.a_nv = hw.intra_node.latency_us * 1e-6;
  l.a_nic = hw.inter_node.latency_us * 1e-6;
  return l;
}

/// ceil(log2 n) for n >= 1: the levels of a binary tree over n domains.
double tree_levels(int n) {
  return n <= 1 ? 0.0 : std::ceil(std::log2(static_cast<double>(n)));
}

double ring_time(const Links& l, Collective kind, int k, int g, int n, double bytes) {
  const bool ar = kind == Collective::all_reduce;
  const double f = (ar ? 2.0 : 1.0) * (k - 1) / k;
  const double steps = (ar ? 2.0 : 1.0) * (k - 1);
  if (n <= 1) return f * bytes / l.nv + steps * l.a_nv;
  const double inter = (ar ? 2.0 : 1.0) * (n - 1);
  const double bus = g <= 1 ? l.nic : std::min(g * l.nic, l.nv * g / (g - 1.0));
  return f * bytes / bus + (steps - inter) * l.a_nv + inter * l.a_nic;
}

/// Bytes each NIC of a domain moves per byte of the buffer in a double binary tree over n
/// domains (c in the header), over the g NICs.
double tree_nic_share(int n, int g) {
  return (n == 2 ? 1.0 : 2.0) / g;
}

double tree_time(const Links& l, int g, int n, double bytes) {
  double per_byte = g > 1 ? 2.0 / l.nv : 0.0;  // the chain: S up and S down
  if (n > 1) per_byte = std::max(per_byte, tree_nic_share(n, g) / l.nic);
  return bytes * per_byte / kTreeBandwidthFactor +
         2.0 * ((g - 1) * l.a_nv + tree_levels(n) * l.a_nic);
}

}  // namespace

double collective_algorithm_time_s(const HardwareSpec& hw, Collective kind,
                                   CollectiveAlgorithm algorithm, const CollectiveGroup& group,
                                   double bytes) {
  if (group.size <= 1 || bytes <= 0) return 0.0;
  const int k = group.size, g = group.members_per_domain(), n = group.domains();
  const Links l = links(hw, g);
  if (algorithm == CollectiveAlgorithm::ring) return ring_time(l, kind, k, g, n, bytes);
  if (kind != Collective::all_reduce) return kCannot;  // NCCL's trees and NVLS reduce only
  if (algorithm == CollectiveAlgorithm::tree) return tree_time(l, g, n, bytes);
  // NVLS needs the switch's multicast (nvls_efficiency > 0) and two members in a domain.
  if (!(hw.nvls_efficiency > 0) || g < 2) return kCannot;
  const double nvls_bw = hw.intra_node.bandwidth_GBps * 1e9 * hw.nvls_efficiency;
  const double nvls_latency = kNvlsLatencySteps * l.a_nv;
  if (algorithm == CollectiveAlgorithm::nvls)
    return n == 1 ? bytes / nvls_bw + nvls_latency : kCannot;
  if (n == 1) return kCannot;  // nvls_tree: NCCL disables it on a single node
  const double bw = std::min(nvls_bw, l.nic / tree_nic_share(n, g)) * kTreeBandwidthFactor;
  return bytes / bw + nvls_latency + 2.0 * tree_levels(n) * l.a_nic;
}

CollectiveChoice choose_collective(const HardwareSpec& hw, Collective kind,
                                   const CollectiveGroup& group, double bytes) {
  CollectiveChoice best{
      CollectiveAlgorithm::ring,
      collective_algorithm_time_s(hw, kind, CollectiveAlgorithm::ring, group, bytes)};
  for (const CollectiveAlgorithm a : kCollectiveAlgorithms) {
    const double t = collective_algorithm_time_s(hw, kind, a, group, bytes);
    if (t < best.time_s) best = {a, t};
  }
  return best;
}

}  // namespace bmpipe
