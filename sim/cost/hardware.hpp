#pragma once
/// \file
/// What the analytic cost model needs to know about one accelerator and the links around
/// it. Presets hold public datasheet figures (each with its source in hardware.cpp) plus
/// efficiencies: the fraction of a peak a real kernel reaches. Efficiencies are the knobs
/// of the roofline: the h200 ones are fitted to measured layers (Hopper and Ampere carry
/// them over, with their own FP8 scale), Ascend's and Blackwell's (b200/gb200, and
/// b300/gb300 apart) to published runs of their own (see the comments in hardware.cpp).
/// Every value can be overridden in YAML under cluster.device.

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/topology.hpp"

namespace bmpipe {

/// The shape model's constants as fitted on DeepGEMM's table (sim/cost/kernels.hpp's file comment):
/// least squares of the relative error of its 22 FP8 shapes on H800 (132 SMs, 1979 TFLOPS FP8, 3.35
/// TB/s), a large FP8 GEMM at 0.80 of the FP8 peak and the memory-bound shapes at 0.8 of HBM, on
/// grids of 0.01, 50 and 10: k_half 550 FP8 elements (275 at bf16 speed), tile intensity 160
/// FLOP/byte; mean |error| 8.5 %, max 28.6 % (M 64, N 2112, K 7168: DeepGEMM splits such shapes
/// finer than these tiles). tests/cost/gemm_shape_test.cpp pins it.
inline constexpr double kGemmKHalfFit = 275;
inline constexpr double kGemmTileIntensityFit = 160;

struct HardwareSpec {
  std::string name;
  double peak_tflops = 0.0;   ///< dense fp16/bf16 tensor-core peak, 1e12 FLOP/s
  double memory_GiB = 0.0;    ///< usable HBM capacity
  double reserved_GiB = 0.0;  ///< taken by the runtime before any tensor (context, buffers)
  /// The caching allocator's reserved bytes over the tensors it holds, less one, at the
  /// peak: torch.cuda.max_memory_reserved = (1 + allocator_overhead) x max_memory_allocated.
  /// 0: no fragmentation counted (the default; reserved_GiB may hold some slack instead).
  double allocator_overhead = 0.0;
  double hbm_GBps = 0.0;  ///< HBM bandwidth, 1e9 bytes/s
  /// Fraction of peak_tflops a forward GEMM reaches.
  double matmul_efficiency = 0.7;
  /// Same for the input-grad GEMMs (transposed operands; in a fit it also absorbs the
  /// input-grad's smaller unmodelled kernels).
  double matmul_backward_efficiency = 0.6;
  /// Same for the weight-grad GEMMs (reduction over the tokens into a weight-sized
  /// output). Unset: matmul_backward_efficiency.
  std::optional<double> matmul_weight_grad_efficiency;
  /// Fraction of peak_tflops reached by fused (flash) attention, forward and backward.
  /// Attention kernels run well below GEMM throughput, the backward lower still.
  double attention_efficiency = 0.5;
  double attention_backward_efficiency = 0.4;
  /// Fraction of hbm_GBps reached by memory-bound kernels (norms, activations, casts).
  double memory_efficiency = 0.8;
  /// Fixed cost of one kernel launch; a layer of unfused ops launches dozens, which is
  /// what keeps short sequences from scaling down linearly.
  double kernel_launch_us = 3.0;
  /// The host's time to issue one kernel the model counts (PyTorch's and TransformerEngine's
  /// dispatch, the launch call), when no CUDA graph captures it. A layer pass whose kernels
  /// take the host longer to issue than the GPU to run is host-bound: it takes
  /// kernels x host_launch_us (add_host_bound in cost_model.cpp). 0: never host-bound.
  double host_launch_us = 0.0;
  /// Fraction of link bandwidth a collective (all-reduce, all-gather, reduce-scatter)
  /// reaches.
  double collective_efficiency = 0.8;
  /// Fraction of inter_node bandwidth a collective reaches on each NIC (NCCL's rings and
  /// trees over InfiniBand run close to the line rate, NVLink's protocols further below
  /// it). Unset: collective_efficiency. sim/cost/collectives.hpp.
  std::optional<double> nic_efficiency;
  /// NVLink SHARP (NVLS): the scale-up switches reduce and multicast an all-reduce (NVSwitch
  /// of Hopper and Blackwell). Its algorithm bandwidth (bytes of the buffer a second) as a
  /// fraction of intra_node bandwidth; 0: no NVLS (A100, Ascend). sim/cost/collectives.hpp.
  double nvls_efficiency = 0.0;
  LinkSpec intra_node;  ///< one directed device-to-device link (the topology's unit)
  /// True when a node is a full mesh of point-to-point links (Ascend HCCS): a collective
  /// over k devices of a node drives k - 1 links at once. False for a switch (NVSwitch),
  /// where a device's whole bandwidth is its one intra_node link.
  bool intra_node_mesh = false;
  LinkSpec inter_node;       ///< one device's NIC into the fabric
  int devices_per_node = 8;  ///< the usual node size: cluster.devices_per_node when not given
  /// Devices on one scale-up fabric (whole nodes): cluster.scale_up_domain when not given;
  /// 0 = the node is the domain.
  int scale_up_domain = 0;
  /// Dense FP8 tensor-core peak, 1e12 FLOP/s; 0 = no FP8 (training.fp8 is refused).
  double fp8_peak_tflops = 0.0;
  /// An FP8 GEMM's fraction of the FP8 peak, as a multiple of the bf16 GEMM's fraction of
  /// the bf16 peak (matmul_efficiency and its backward kinds). 1: carried over unchanged.
  double fp8_matmul_scale = 1.0;
  /// A rowwise-scaled FP8 GEMM's (training.fp8_recipe rowwise) fraction of the FP8 peak, as
  /// a multiple of fp8_matmul_scale's: 1 runs it as fast as a tensorwise one.
  double fp8_rowwise_scale = 1.0;
  /// Block-scaled MXFP8 GEMMs in hardware (Blackwell): training.fp8_recipe mxfp8.
  bool mxfp8 = false;
  /// Dense FP4 (NVFP4) tensor-core peak, 1e12 FLOP/s; 0 = no FP4 (training.fp8_recipe nvfp4
  /// is refused).
  double fp4_peak_tflops = 0.0;
  /// An NVFP4 GEMM's fraction of the FP4 peak, as fp8_matmul_scale is for FP8: a multiple of
  /// the bf16 GEMM's fraction of the bf16 peak.
  double fp4_matmul_scale = 1.0;

  /// The host link: the path between a device and its host's memory that offloading uses
  /// (the optimizer step on the host, training.optimizer.offload_fraction). `host_link` is
  /// its kind (kHostLinkKinds: "pcie4_x16", "pcie5_x16", "nvlink_c2c", "ub"; "" when no figure
  /// is known, as for ascend-910b); host_link_GBps its bandwidth one way, 1e9 bytes/s,
  /// which host_link_devices devices share (1: a link of its own; a Grace's NVLink-C2C
  /// serves its two Blackwell GPUs). 0 GB/s: no host link known, so offloading is refused
  /// until cluster.device.host_link_GBps gives one.
  std::string host_link;
  double host_link_GBps = 0.0;
  int host_link_devices = 1;
  /// One host's memory (GiB) and the devices sharing it and its CPUs (an HGX node's 8 GPUs
  /// share its two sockets; a GB200 Grace its 2 GPUs). 0 GiB: unknown.
  double host_memory_GiB = 0.0;
  int host_devices = 1;
  /// Adam's step on the host's CPUs over fp32 master weights, m and v: 1e9 parameters/s for
  /// the whole host (its devices' offloaded shares share it). 0: unknown.
  double host_adam_Gparams_per_s = 0.0;

  /// The GEMM shape model (sim/cost/kernels.hpp): the SMs tiles spread over (0: no shape
  /// model, every GEMM at the flat efficiencies above), the k at which a bf16 tile's fixed
  /// prologue and epilogue take as long as its k loop, and the FLOPs per loaded byte a tile
  /// needs to feed its tensor cores. The efficiencies above are then a large GEMM's.
  int sm_count = 0;
  double gemm_k_half = kGemmKHalfFit;
  double gemm_tile_intensity = kGemmTileIntensityFit;

  /// matmul_weight_grad_efficiency, or matmul_backward_efficiency when unset.
  double weight_grad_efficiency() const {
    return matmul_weight_grad_efficiency.value_or(matmul_backward_efficiency);
  }
};

/// HardwareSpec::host_link's kinds: PCIe 4.0 x16, PCIe 5.0 x16, NVLink-C2C, Huawei's
/// Unified Bus (CloudMatrix384: NPUs and Kunpeng CPUs on one UB switch fabric).
inline constexpr std::array<std::string_view, 4> kHostLinkKinds{"pcie4_x16", "pcie5_x16",
                                                                "nvlink_c2c", "ub"};

/// The preset called `name` (ascend-910b, ascend-910c, a100-80g, b200, b300, gb200, gb300,
/// h100-sxm, h200, h800), or nullptr.
const HardwareSpec* find_hardware_preset(const std::string& name);
/// Every preset name, comma-separated, for error messages.
std::string hardware_preset_names();

}  // namespace bmpipe
