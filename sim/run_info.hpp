#pragma once
/// \file
/// What a run was, beyond what the SimResult holds: plain values the experiment layer
/// fills (make_run_info) and the output layer prints (traces/summary.hpp).

#include <string>

namespace bmpipe {

/// What the run was, beyond what the SimResult holds.
struct RunInfo {
  std::string schedule;
  int pp = 1;
  int vpp = 1;
  int microbatches = 1;
  /// Throughput inputs (make_run_info in experiment/experiment.hpp fills them). With
  /// tokens_per_iteration > 0 the summary adds tokens_per_s; with the FLOP counts (analytic
  /// models) also mfu (model FLOPs without recompute / (time x peak x devices)) and
  /// tflops_per_device (FLOPs including recompute, the figure Megatron-LM reports).
  double tokens_per_iteration = 0;
  double model_flops_per_iteration = 0;     ///< all devices, no recompute
  double hardware_flops_per_iteration = 0;  ///< all devices, with recompute
  double peak_flops_per_device = 0;         ///< FLOP/s
  int devices = 0;                          ///< pp x tp x dp
};

}  // namespace bmpipe
