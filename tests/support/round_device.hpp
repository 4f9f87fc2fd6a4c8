#pragma once
/// \file
/// A device of round figures, for the tests that work a layer's costs out by hand.

#include "sim/cost/hardware.hpp"

namespace bmpipe::test {

/// 1000 TFLOPS, GEMMs and attention at 0.5 of it both ways, 1000 GB/s of HBM all reached,
/// no launch cost; a switched node whose links carry `link_GBps` after `latency_us` (the
/// NIC a tenth of that, twice the latency), collectives at full speed.
inline HardwareSpec round_device(double link_GBps, double latency_us) {
  HardwareSpec hw;
  hw.name = "round";
  hw.peak_tflops = 1000;
  hw.hbm_GBps = 1000;
  hw.memory_efficiency = 1.0;
  hw.matmul_efficiency = 0.5;
  hw.matmul_backward_efficiency = 0.5;
  hw.matmul_weight_grad_efficiency = 0.5;
  hw.attention_efficiency = 0.5;
  hw.attention_backward_efficiency = 0.5;
  hw.kernel_launch_us = 0;
  hw.collective_efficiency = 1.0;
  hw.intra_node = LinkSpec{link_GBps, latency_us};
  hw.inter_node = LinkSpec{link_GBps / 10, latency_us * 2};
  return hw;
}

/// 1 TFLOPS and 1000 GB/s, every kernel at full efficiency, no launch cost: a GEMM or a
/// memory-bound sub-op takes max(FLOPs, bytes) picoseconds.
inline HardwareSpec unit_device() {
  HardwareSpec hw;
  hw.name = "unit";
  hw.peak_tflops = 1;
  hw.hbm_GBps = 1000;
  hw.matmul_efficiency = hw.matmul_backward_efficiency = 1;
  hw.attention_efficiency = hw.attention_backward_efficiency = 1;
  hw.memory_efficiency = 1;
  hw.kernel_launch_us = 0;
  return hw;
}

}  // namespace bmpipe::test
