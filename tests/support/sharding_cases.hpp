#pragma once
/// \file
/// The links and the job the ZeRO, FSDP and hybrid-sharding tests work their volumes out
/// by hand on (tests/cost/zero_sharding_test.cpp, hybrid_sharding_test.cpp,
/// fsdp_overlap_test.cpp).

#include <string>

#include "sim/cost/hardware.hpp"

namespace bmpipe::test {

/// A switched node at 100 GB/s and a NIC at 10 GB/s, every byte of both reached, no
/// latency: a ring collective over k takes f x bytes / bandwidth (f = (k-1)/k, all-reduce
/// 2 (k-1)/k).
inline HardwareSpec round_links() {
  HardwareSpec hw;
  hw.intra_node = {100, 0};
  hw.inter_node = {10, 0};
  hw.collective_efficiency = 1.0;
  return hw;
}

/// Llama-2-7B (a decoder layer holds P = 4 x 4096^2 + 3 x 4096 x 11008 + 2 x 4096 =
/// 202,383,360 parameters) on 2 nodes of 8, pp 1 tp 1: dp 16. NVLink 100 GB/s, the NIC
/// 10 GB/s, no latency, every byte of both reached, no NVLink SHARP: ring collectives.
/// `optimizer` is training.optimizer's flow map; `extra` more training keys, indented.
inline std::string llama_dp16(const std::string& optimizer, const std::string& extra = "") {
  return "cluster:\n"
         "  nodes: 2\n"
         "  devices_per_node: 8\n"
         "  device: {preset: h200, reserved_GiB: 0, collective_efficiency: 1, nic_efficiency: 1, "
         "nvls_efficiency: 0}\n"
         "  intra_node: {bandwidth_GBps: 100, latency_us: 0}\n"
         "  inter_node: {bandwidth_GBps: 10, latency_us: 0}\n"
         "model: {preset: llama2-7b}\n"
         "training:\n"
         "  pp: 1\n"
         "  seq_length: 4096\n"
         "  global_batch_size: 16\n"
         "  optimizer: " +
         optimizer + "\n" + extra;
}

}  // namespace bmpipe::test
