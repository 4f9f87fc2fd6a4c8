#pragma once
/// \file
/// Collectives by algorithm and size, as NCCL runs them: the time of an all-reduce,
/// all-gather or reduce-scatter over a group that may span several scale-up domains, for
/// each algorithm NCCL has for it, and the one NCCL's tuner would pick (the fastest
/// predicted). The concepts are those of NCCL's tuning model (NVIDIA/nccl
/// 5067397c2676d5aed50042fc39e5c8ee96eb0027, src/graph/tuning.cc, ncclTopoTuneModel and
/// ncclTopoGetAlgoTime; read, not copied): every algorithm's time is a latency plus the
/// bytes over an algorithm bandwidth, latency in steps of a per-hop latency, intra-node
/// hops at the NVLink's and inter-node hops at the network's; the tuner takes the smallest.
///
/// A group (CollectiveGroup) is k members, g of them in each scale-up domain (the node, or
/// an NVL72 rack), over n = ceil(k / g) domains. Every member has its own NIC
/// (HardwareSpec::inter_node is one device's), so a group with g members in a domain
/// drives g NICs at once, as NCCL's rings and trees do: one channel per NIC ("rail"),
/// each crossing the domains on a different GPU's NIC. Links (per member, one way):
///   B_nv  = intra_node bandwidth x collective_efficiency (x (g - 1) peer links on a mesh
///           node, Ascend HCCS, which drives them all at once);
///   B_nic = inter_node bandwidth x nic_efficiency (collective_efficiency when unset);
///   a_nv, a_nic = intra_node and inter_node latency, paid once per step on that link.
/// With S the whole (unsharded) buffer, f = 2 (k - 1) / k for an all-reduce and (k - 1) / k
/// for an all-gather or reduce-scatter (bytes each member sends), the algorithms are:
///
/// - ring (every kind): one ring per rail through all k members.
///     n = 1: S f / B_nv + steps a_nv, steps = 2 (k - 1) (all-reduce) or k - 1;
///     n > 1: S f / B_bus + (steps - inter) a_nv + inter a_nic, inter = 2 (n - 1) or n - 1
///            domain crossings, B_bus = min(g B_nic, B_nv g / (g - 1)) (B_nic when g = 1):
///            each member sends 1 / g of the bus traffic on its NIC and (g - 1) / g on
///            the NVLink.
/// - tree (all-reduce): NCCL's double binary tree over the domains, a chain through the g
///   members inside each (reduce up, broadcast down). Each of the two trees carries S / 2;
///   a domain is inner node in one and leaf in the other, so its NICs carry S each way
///   (2 S when n > 2: an inner node has two children), spread over its g NICs; each chain
///   member sends 2 S on the NVLink (S up, S down):
///     max(c S / (g B_nic), 2 S / B_nv) / kTreeBandwidthFactor
///       + 2 ((g - 1) a_nv + ceil(log2 n) a_nic),   c = 1 when n = 2, 2 when n > 2
///   (n = 1: the chain alone).
/// - nvls (all-reduce, n = 1, HardwareSpec::nvls_efficiency > 0, g >= 2): NVLink SHARP, the
///   NVSwitch reduces and multicasts; every member sends and receives its buffer once:
///     S / (intra_node bandwidth x nvls_efficiency) + kNvlsLatencySteps a_nv.
/// - nvls_tree (all-reduce, n > 1, NVLS as above, g >= 2): NVLS inside each domain, then
///   each member's 1 / g share of the buffer over the tree on its own NIC:
///     min(NVLS bandwidth, g B_nic / c) x kTreeBandwidthFactor
///       + kNvlsLatencySteps a_nv + 2 ceil(log2 n) a_nic.
///
/// Not modelled: NCCL's protocols (LL and LL128, which trade bandwidth for a lower latency
/// on small messages: every algorithm here runs Simple, whose per-step latency a_nv and
/// a_nic stand for); CollNet (InfiniBand SHARP: NCCL only uses it with NCCL_COLLNET_ENABLE
/// and SHARP-capable switches, and no published figure was found here to calibrate it);
/// PAT (NCCL's all-gather and reduce-scatter with one GPU a node) and NVLS for all-gather
/// and reduce-scatter (their bandwidth is the ring's: each member must still receive
/// (k - 1) / k of the buffer).

#include <limits>

#include "sim/cost/hardware.hpp"

namespace bmpipe {

enum class Collective { all_reduce, all_gather, reduce_scatter };

enum class CollectiveAlgorithm { ring, tree, nvls, nvls_tree };

/// Every algorithm, in CollectiveAlgorithm's order.
inline constexpr CollectiveAlgorithm kCollectiveAlgorithms[] = {
    CollectiveAlgorithm::ring, CollectiveAlgorithm::tree, CollectiveAlgorithm::nvls,
    CollectiveAlgorithm::nvls_tree};

/// "ring", "tree", "nvls", "nvls_tree".
const char* collective_algorithm_name(CollectiveAlgorithm algorithm);

/// Where a group's members lie: `size` members, `per_domain` of them in each scale-up domain
/// they touch (clamped to 1..size). inside(k): all in one domain; spread(k): one a domain.
struct CollectiveGroup {
  int size = 1;
  int per_domain = 1;

  static CollectiveGroup inside(int k) { return {k, k}; }
  static CollectiveGroup spread(int k) { return {k, 1}; }
  /// Members per domain, clamped to 1..size.
  int members_per_domain() const {
    return per_domain < 1 ? 1 : (per_domain > size ? size : per_domain);
  }
  /// Domains the group spans: ceil(size / members_per_domain()).
  int domains() const {
    const int g = members_per_domain();
    return (size + g - 1) / g;
  }
};

/// NCCL's tuning model takes a tree all-reduce's bus bandwidth at 0.92 of its links'
/// (tuning.cc: "busBw * .92" for NCCL_ALGO_TREE); the same factor is taken here for the
/// tree part of NVLS-tree.
inline constexpr double kTreeBandwidthFactor = 0.92;

/// NVLink SHARP's fixed latency, in intra_node latencies (steps). Fitted on Azure's ND H200
/// v5 table of nccl-tests all-reduce over 8 H200 with the NVLS algorithm
/// (Azure/AI-benchmarking-guide 7f20e5fa3b2f9a46d8404af1f6fb14b049d6d5cc,
/// Azure_Results/ND_H200_v5_results.md, "NCCL Bandwidth"): from 1 KB to 64 KB the busbw is
/// 0.06-3.72 GB/s, i.e. S x 2 (8 - 1) / 8 / busbw = 29.9-30.8 us whatever the size: 6 x the
/// h200 preset's 5 us. NCCL's own model puts NVLS at 25 us on NVLink (tuning.cc,
/// hwLatencies, NVLS Simple), of the same order. Carried over to Blackwell (an estimate: no
/// small-size NVLS figure was found for it).
inline constexpr double kNvlsLatencySteps = 6;

/// Time of `kind` over `group` on `bytes` (the whole buffer) by `algorithm`, in seconds; 0
/// for a group of one or no bytes; +infinity when the algorithm cannot run it (tree, nvls
/// and nvls_tree on anything but an all-reduce, nvls off the device or across domains,
/// nvls_tree inside one domain).
double collective_algorithm_time_s(const HardwareSpec& hw, Collective kind,
                                   CollectiveAlgorithm algorithm, const CollectiveGroup& group,
                                   double bytes);

/// The algorithm NCCL's tuner would pick (the fastest predicted; ties to the earlier in
/// kCollectiveAlgorithms) and its time.
struct CollectiveChoice {
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::ring;
  double time_s = 0.0;
};
CollectiveChoice choose_collective(const HardwareSpec& hw, Collective kind,
                                   const CollectiveGroup& group, double bytes);

/// The NIC's fraction of inter_node bandwidth: nic_efficiency, or collective_efficiency
/// when unset.
inline double nic_efficiency(const HardwareSpec& hw) {
  return hw.nic_efficiency.value_or(hw.collective_efficiency);
}

}  // namespace bmpipe
