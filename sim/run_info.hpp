#pragma once
/// \file
/// What a run was, beyond what the SimResult holds: plain values the experiment layer
/// fills (make_run_info) and the output layer prints (api/summary.hpp).

#include <optional>
#include <string>
#include <vector>

#include "sim/layer_offload.hpp"
#include "sim/time.hpp"

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
  double peak_flops_per_device = 0;         ///< FLOP/s, the bf16 (dense) peak
  /// The GEMMs' precision when it is not bf16 ("FP8", "NVFP4"; empty for bf16) and its
  /// peak (FLOP/s): MFU is quoted against it too (issue 41), beside the bf16 figure.
  std::string gemm_precision = {};
  double gemm_peak_flops_per_device = 0;
  int devices = 0;  ///< pp x tp x dp
  /// The cluster's devices the job leaves idle (training.devices short of the cluster).
  int idle_devices = 0;
  /// The layout that ran, echoed by the JSON summary (make_run_info fills them).
  int tp = 1;
  int dp = 1;
  int micro_batch_size = 1;
  std::vector<int> partition = {};                ///< layers per stage
  std::vector<std::string> stage_recompute = {};  ///< per stage: none, selective, full, mixed
  /// Whole-layer activation offload (training.offload_layers): how many decoder layers
  /// offload, of how many, and one micro-batch's pass (its waits are in the ops' times).
  int offload_layers = 0;
  int offload_layers_of = 0;
  LayerOffloadPass layer_offload = {};
};

/// What an iteration of `iteration_time` achieves, from the throughput inputs of `info`;
/// each figure is empty when its inputs are missing.
struct Throughput {
  std::optional<double> tokens_per_s;
  std::optional<double> mfu;                ///< model FLOPs / (time x peak x devices)
  std::optional<double> tflops_per_device;  ///< FLOPs with recompute / (time x devices)
  /// model FLOPs / (time x the GEMMs' precision's peak x devices), for FP8 and NVFP4 runs.
  std::optional<double> mfu_at_gemm_peak;
};

inline Throughput throughput(const RunInfo& info, Time iteration_time) {
  Throughput t;
  const double seconds = static_cast<double>(iteration_time) * 1e-9;
  if (info.tokens_per_iteration > 0 && seconds > 0)
    t.tokens_per_s = info.tokens_per_iteration / seconds;
  if (info.model_flops_per_iteration > 0 && info.devices > 0 && seconds > 0) {
    t.mfu = info.model_flops_per_iteration / (seconds * info.peak_flops_per_device * info.devices);
    t.tflops_per_device = info.hardware_flops_per_iteration / (seconds * info.devices) / 1e12;
    if (!info.gemm_precision.empty() && info.gemm_peak_flops_per_device > 0)
      t.mfu_at_gemm_peak = info.model_flops_per_iteration /
                           (seconds * info.gemm_peak_flops_per_device * info.devices);
  }
  return t;
}

}  // namespace bmpipe
