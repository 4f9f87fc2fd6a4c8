#include "sim/cost/hardware.hpp"

#include <array>

namespace bmpipe {

namespace {

// The host link, host memory and CPU Adam of each preset (HardwareSpec::host_link and the
// fields after it). Sources, per preset below: MLCommons system descriptions (the
// "accelerator_host_interconnect" and "host_memory_*" fields of the submitters' systems/*.json)
// and NVIDIA's figures for the superchips. PCIe 5.0 x16 runs 32 GT/s a lane, 128b/130b
// coded: 63 GB/s each way, quoted as "PCIe Gen5: 128 GB/s" (both ways) on NVIDIA's H100 /
// H200 datasheets; taken as 64. PCIe 4.0 x16: half, 32 each way ("PCIe Gen4: 64 GB/s" on
// the A100 datasheet).
//
// CPU Adam. ZeRO-Offload (Ren et al., USENIX ATC 2021, arXiv 2101.06840), its table of Adam
// step latencies: DeepSpeed's CPU-Adam steps 10 B parameters in 2.57 s on one DGX-2 host
// (2 x 24-core Xeon Platinum 8168; 1 B in 0.22 s), 5-7x PyTorch's CPU Adam (1.39 s for
// 1 B), which DeepSpeed's docs also state ("DeepSpeedCPUAdam is 5X-7X faster than the
// standard PyTorch implementation", deepspeed.ai/tutorials/zero-offload, read). The table's
// rows are as recalled: the paper itself could not be re-read, so they are to be checked
// (the ratio is what was read). Per host:
// 10e9 / 2.57 s = 3.89e9 parameters/s (the largest row, past the caches). Every preset
// carries it over unscaled: newer hosts (Sapphire Rapids, Grace) have more memory
// bandwidth, so it is a floor, an estimate.
constexpr double kZeroOffloadCpuAdamGparamsPerS = 10.0 / 2.57;

/// An x86 host of an HGX board: `devices` GPUs, each on its own PCIe x16 link of `kind`.
void hgx_host(HardwareSpec& h, const char* kind, double link_GBps, double memory_GiB, int devices) {
  h.host_link = kind;
  h.host_link_GBps = link_GBps;
  h.host_link_devices = 1;
  h.host_memory_GiB = memory_GiB;
  h.host_devices = devices;
  h.host_adam_Gparams_per_s = kZeroOffloadCpuAdamGparamsPerS;
}

/// No host link figure found: offloading is refused until the config gives one.
void unknown_host(HardwareSpec& h) {
  h.host_link.clear();
  h.host_link_GBps = 0;
  h.host_link_devices = 1;
  h.host_memory_GiB = 0;
  h.host_devices = 1;
  h.host_adam_Gparams_per_s = 0;
}

// Calibration. sim/cost/cost_model.cpp builds each layer from sub-ops; the h200 preset's
// seven knobs (forward, input-grad and weight-grad GEMMs, forward and backward attention,
// memory-bound kernels, kernel launch) were fitted by a grid search to the twelve H200 rows
// of tests/data/h200_llama_layer_profiles.json (llama2-7b, llama3-8b, llama2-13b layers;
// s = 2048 / 4096 / 8192; mbs 1 and 2), read as accumulating weight gradients into bf16
// param.grad. Objective: the worst error relative to its tolerance (forward 10 %,
// input-grad and weight-grad 15 %). Grid: forward GEMM 0.64-0.86 by 0.02, input-grad GEMM
// 0.40-0.80 by 0.02, weight-grad GEMM 0.60-0.90 by 0.02, attention 0.35-0.65 and
// 0.25-0.55 by 0.05, memory 0.40-0.90 by 0.05, launch 2-12 us by 1; kept only points
// where attention runs below the GEMMs and its backward below its forward. The data do not
// pin the input-grad split between GEMMs and attention, so of the points within 0.50 of
// tolerance (best 0.46) the one closest to the previous knobs was taken. Every row then
// lands within 4.9 % (forward), 7.3 % (input-grad) and 7.2 % (weight-grad) --
// tests/cost/h200_accuracy_test.cpp prints them. Held-out check: on a Llama-3-70B-shaped
// layer at s = 2048 the weight-grad, measured about 20 % above the previous model, now
// comes out about 7 % under it (forward and input-grad moved +5 % and +2 %). The other
// devices carry the h200 fractions over unless noted per preset.
HardwareSpec make_h200() {
  HardwareSpec h;
  h.name = "h200";
  h.peak_tflops = 989;       // NVIDIA H200 datasheet: 989 TFLOPS dense BF16 (1979 with sparsity)
  h.fp8_peak_tflops = 1979;  // datasheet: FP8 3958 TFLOPS with sparsity = 1979 dense (2x BF16)
  h.memory_GiB = 140;        // 141 GB HBM3e (datasheet); nvidia-smi reports 143771 MiB
  h.reserved_GiB = 2;        // CUDA context + caching-allocator slack, typical for PyTorch
  h.hbm_GBps = 4800;         // datasheet: 4.8 TB/s
  // Fitted (see the note at the top): forward GEMMs 0.68, input-grad GEMMs 0.58 (the fit
  // lets them absorb the input-grad's small unmodelled kernels), weight-grad GEMMs 0.72
  // (W is nearly pure GEMM, so this one is well pinned: 2 x tokens x params over the
  // measured W at s = 8192 is 0.64-0.71 of peak before the accumulation term), SDPA
  // attention 0.50 forward / 0.35 backward, memory-bound kernels 0.90 of HBM bandwidth,
  // 4 us of fixed cost per kernel.
  h.matmul_efficiency = 0.68;
  h.matmul_backward_efficiency = 0.58;
  h.matmul_weight_grad_efficiency = 0.72;
  h.attention_efficiency = 0.50;
  h.attention_backward_efficiency = 0.35;
  h.memory_efficiency = 0.90;
  h.kernel_launch_us = 4;
  // FP8 GEMMs reach 0.79 of the bf16 GEMMs' fraction of peak (forward 0.54 of the FP8
  // peak, about 1060 TFLOPS). Fitted on H100 (the same GH100 die, so carried to h200 and
  // h800; b200 and gb200 reset it to 1): NVIDIA's five NeMo 24.07 FP8 pre-training rows
  // on DGX-H100 (configs/calibration/h100_nemo_*.yaml, each citing its row), least squares
  // of the relative iteration-time error on a 0.01 grid. At 1 (the bf16 fraction carried
  // over) every row read 10-16 % fast; at 0.79 the rows read +0.9, -0.6, +3.1, -5.4 and
  // +0.7 %. tests/cost/h100_nemo_runs_test.cpp pins both the rows and the minimum. Since
  // the collectives run by algorithm over the NICs a dp group drives
  // (sim/cost/collectives.hpp) the rows read +0.9, -0.6, -3.5, -5.4 and -2.4 % and their
  // minimum is at 0.76; not refitted, since 0.76 takes the fidelity table's Hopper FP8 rows
  // (bench/fidelity, which read slow) past its 10 % bound: the test says so.
  h.fp8_matmul_scale = 0.79;
  // Rowwise-scaled FP8 GEMMs (torchao's float8 rowwise, training.fp8_recipe rowwise) at 0.89
  // of the tensorwise fraction. Fitted on the one published pair of the same job
  // (pytorch/torchtitan@7a04053a742a, "example of float8 with rowwise scaling", its commit
  // message: Llama 3 8B, FSDP on 8 H100, compile; bf16 5,760 tokens/s a GPU, rowwise
  // float8 with pytorch/ao#1629 6,424): bmpipe's rowwise / bf16 speedup of that job
  // (tests/cost/fp8_rowwise_test.cpp builds it) on a 0.01 grid is 1.1079 at 0.88, 1.1140 at
  // 0.89 and 1.1200 at 0.90 against the published 1.1153. The other presets carry it over:
  // no rowwise run of another generation was found.
  h.fp8_rowwise_scale = 0.89;
  h.collective_efficiency = 0.75;  // NCCL busbw on NVLink4 reaches ~340 of 450 GB/s
  h.intra_node = {450, 5};         // NVLink 4: 900 GB/s total = 450 GB/s per direction; ~5 us NCCL
  h.inter_node = {50, 10};         // one 400 Gb/s NDR InfiniBand NIC per GPU (DGX H200); ~10 us
  h.devices_per_node = 8;          // HGX H200 8-GPU board
  // Collectives (sim/cost/collectives.hpp). NICs: NCCL's maintainers give 46-48 GB/s of
  // busbw per 400 Gb/s ConnectX-7 (AddyLaddy, NVIDIA/nccl-tests issues 290 and 319: "You
  // should achieve around 48GB/s from each CX7 NIC at 400Gbps ... aggregated to achieve up
  // to ~396GB/s with the RING protocol") and 24 per 200 Gb/s NIC (sjeaugey, nccl-tests
  // issue 119: "24GB/s is the peak performance per 200G NIC"): 48 / 50 = 0.96.
  h.nic_efficiency = 0.96;
  // NVLink SHARP: Azure's ND H200 v5 nccl-tests all-reduce over 8 H200 with the NVLS
  // algorithm (Azure/AI-benchmarking-guide 7f20e5fa3b2f9a46d8404af1f6fb14b049d6d5cc,
  // Azure_Results/ND_H200_v5_results.md): 479.98 GB/s busbw at 8 GB = algbw
  // 479.98 x 8 / (2 x 7) = 274.3 GB/s, 0.61 of NVLink's 450. Cross-checks: NCCL's maintainer
  // on 8 H100, "a peak busBw of ~480GB/s (algbw ~275GB/s)" (sjeaugey, NVIDIA/nccl-tests issue
  // 212); 215 GB/s busbw reported on 8 H800 (NVIDIA/nccl issue 1374) = 0.61 of its 200.
  h.nvls_efficiency = 0.61;
  // Host: MLCommons inference v4.1, NVIDIA's systems/H200-SXM-141GBx8_TRT_MaxQ.json: each
  // GPU on "PCIe Gen5 x16"; "2 TB" of host memory, 32 x 64 GB DIMMs (2048 GiB), on two Xeon
  // Platinum 8480C for the 8 GPUs.
  hgx_host(h, "pcie5_x16", 64, 2048, 8);
  return h;
}

HardwareSpec make_h100() {
  HardwareSpec h = make_h200();  // same GH100 die and clocks: same fractions of peak
  h.name = "h100-sxm";
  h.peak_tflops = 989;       // NVIDIA H100 SXM datasheet: 989 TFLOPS dense BF16
  h.fp8_peak_tflops = 1979;  // datasheet: FP8 3958 TFLOPS with sparsity = 1979 dense
  h.memory_GiB = 79.6;       // 80 GB HBM3; nvidia-smi reports 81559 MiB
  h.hbm_GBps = 3350;         // datasheet: 3.35 TB/s
  h.intra_node = {450, 5};   // NVLink 4, as h200
  h.inter_node = {50, 10};   // 400 Gb/s NDR per GPU (DGX H100)
  // Host: MLCommons inference v3.1, Dell's systems/XE9680_H100_SXM_80GBx8_TRT.json (an HGX
  // H100 8-GPU server): "PCIe Gen5 x16" per GPU, "2 TB" of host memory (2048 GiB) on two
  // Xeon Platinum 8470.
  hgx_host(h, "pcie5_x16", 64, 2048, 8);
  return h;
}

HardwareSpec make_h800() {
  // The H100 SXM's GH100 die, HBM and compute (NVIDIA H800 SXM product brief: the same
  // 989 TFLOPS dense BF16, 80 GB HBM3 at 3.35 TB/s), with NVLink cut to 400 GB/s over both
  // directions: 200 GB/s one way, against the H100's 450.
  HardwareSpec h = make_h100();
  h.name = "h800";
  h.intra_node = {200, 5};  // 400 GB/s bidirectional NVLink (H800 product brief); ~5 us NCCL
  // DeepSeek-V3 technical report (arXiv 2412.19437), sec. 3.1: its 2048 H800 are nodes of
  // 8 GPUs on NVLink + NVSwitch, the nodes on InfiniBand; sec. 3.2.2: "IB (50 GB/s)" per
  // GPU and NVLink "160 GB/s" as achieved. 50 GB/s is the NIC's line rate (one 400 Gb/s
  // NDR port per GPU); 160 of NVLink's 200 GB/s one way is a fraction of 0.8, which this
  // preset takes for every collective on NVLink and for the all-to-alls and transfers on
  // the NICs (40 GB/s); the all-reduce, all-gather and reduce-scatter on the NICs keep
  // h200's nic_efficiency (48 GB/s: the same ConnectX-7 NIC) and NVLS its 0.61 (see there).
  h.inter_node = {50, 10};
  h.collective_efficiency = 0.8;
  h.devices_per_node = 8;
  // Host link and memory: the h100-sxm preset's (the same HGX board), carried over; no H800
  // host figure was found.
  return h;
}

// Blackwell. Its kernel constants are its own, fitted on the published runs of its
// generation (B200 and GB200 rows of bench/fidelity: Megatron-Bridge's performance tables
// at 067f987d, latest release of each configuration) by bench/fidelity/fit.py: one GEMM
// fraction for the three passes (a large GEMM's: the shape model takes each shape below
// it), the FP8 and FP4 scales, and fused attention's fraction (held within 0.40-0.65, what
// fused attention kernels reach; the backward at the h200 fit's 0.7 of the forward).
// Mean |log error| over the 17 rows 9.7 %; docs/cost-model.md has the table. Memory-bound
// kernels, launches and collectives keep the h200 figures.
HardwareSpec make_b200() {
  HardwareSpec h = make_h200();
  h.name = "b200";
  // NVIDIA HGX B200 datasheet (8 GPUs per board): FP16/BF16 "36 PFLOPS" for the board is
  // with 2:4 sparsity, so 4.5 PFLOPS sparse = 2.25 PFLOPS dense per GPU.
  h.peak_tflops = 2250;
  // Datasheet: FP8/FP6 72 PFLOPS with sparsity for the board = 4.5 PFLOPS dense per GPU
  // (2x BF16); MXFP8 (32-element block scales) runs at the same rate in hardware.
  h.fp8_peak_tflops = 4500;
  h.mxfp8 = true;
  // Datasheet: FP4 144 PFLOPS with sparsity, 72 PFLOPS dense for the board = 9 PFLOPS dense
  // per GPU.
  h.fp4_peak_tflops = 9000;
  // The GEMM shape model (sim/cost/kernels.hpp): B200's 148 SMs (two dies of 74, NVIDIA's
  // Blackwell architecture brief), with the tile constants of the DeepGEMM fit on H800 (the
  // defaults; no Blackwell GEMM table was read).
  h.sm_count = 148;
  // Fitted (see the note above the function): large GEMMs at 0.55 of the bf16 peak, FP8
  // GEMMs at 1.05 x that of the FP8 peak, NVFP4 at 1.30 x of the FP4 peak, attention 0.40
  // forward (at the bound) and 0.28 backward.
  h.matmul_efficiency = 0.55;
  h.matmul_backward_efficiency = 0.55;
  h.matmul_weight_grad_efficiency = 0.55;
  h.fp8_matmul_scale = 1.05;
  h.fp4_matmul_scale = 1.30;
  h.attention_efficiency = 0.40;
  h.attention_backward_efficiency = 0.28;
  // HGX B200 datasheet: 1.4 TB HBM3e for 8 GPUs = 180 GB per GPU. nvidia-smi on B200 shows
  // 183359 MiB in public outputs (179.1 GiB; not checked on a machine here: an estimate).
  h.memory_GiB = 179;
  h.reserved_GiB = 2;  // CUDA context + allocator slack, as h200
  h.hbm_GBps = 8000;   // HGX B200 datasheet: 64 TB/s for 8 GPUs = 8 TB/s per GPU
  // NVLink 5: 1.8 TB/s per GPU counting both directions (HGX B200 datasheet) = 900 GB/s one
  // way through the NVSwitch; NCCL overhead taken as NVLink 4's ~5 us (estimate).
  h.intra_node = {900, 5};
  // DGX B200: eight ConnectX-7 400 Gb/s NICs, one per GPU = 50 GB/s (DGX B200 user guide).
  h.inter_node = {50, 10};
  // NVLink busbw fraction: 0.75 of 900 GB/s = 675. Azure's ND GB200 v6 nccl-tests ring
  // all-reduce over a tray's 4 GB200 (Azure/AI-benchmarking-guide
  // 2a370be6de9586d365feed77e014a73f25198f4d, Azure_Results/ND_GB200_v6_results.md, "NCCL
  // Bandwidth") reaches 679.61 GB/s busbw at 8 GB: 0.755.
  h.collective_efficiency = 0.75;
  // NICs: ConnectX-7 at 400 Gb/s as DGX H100 (h200's 0.96, carried over).
  h.nic_efficiency = 0.96;
  // NVLink SHARP: 8 B200 reported at "830+" GB/s busbw (NVIDIA/nccl issue 1807, a user's
  // figure: algbw 830 x 8 / 14 = 474 GB/s, 0.53 of 900); NCCL's own model rates NVLS on
  // Blackwell at 0.74 / 0.85 of Hopper's (tuning.cc, nvlsEfficiency at NVIDIA/nccl
  // 5067397c2676d5aed50042fc39e5c8ee96eb0027): 0.61 x 0.87 = 0.53. No NVL72 figure was
  // found: gb200 and gb300 carry it over (an estimate).
  h.nvls_efficiency = 0.53;
  h.devices_per_node = 8;  // HGX B200 8-GPU board
  // Host: MLCommons inference v6.0, Nebius's systems/nebius_b200_n1.json (HGX B200, 8 GPUs):
  // "PCIe Gen5 x16" per GPU, 32 x 64 GB DIMMs (2048 GiB; the file's capacity reads "1.8 TB",
  // as the OS counts it) on two Xeon Platinum 8580.
  hgx_host(h, "pcie5_x16", 64, 2048, 8);
  return h;
}

HardwareSpec make_gb200() {
  // GB200 NVL72 rack (NVIDIA GB200 NVL72 datasheet): 72 Blackwell GPUs and 36 Grace CPUs,
  // all 72 GPUs on one NVLink 5 switch fabric. The same B200-class die as make_b200, a
  // higher power limit.
  HardwareSpec h = make_b200();
  h.name = "gb200";
  // Datasheet, for the rack: FP16/BF16 360 PFLOPS with sparsity = 5 PFLOPS sparse =
  // 2.5 PFLOPS dense per GPU.
  h.peak_tflops = 2500;
  // Datasheet: FP8/FP6 720 PFLOPS with sparsity for the rack = 5 PFLOPS dense per GPU.
  h.fp8_peak_tflops = 5000;
  // Datasheet: FP4 1440 PFLOPS with sparsity, 720 dense for the rack = 10 PFLOPS dense per
  // GPU.
  h.fp4_peak_tflops = 10000;
  // Datasheet: up to 13.4 TB HBM3e for the rack = 186 GB per GPU. Usable capacity taken as
  // B200's 179 GiB of 180 GB scaled to 186: 185 GiB (an estimate, no nvidia-smi figure here).
  h.memory_GiB = 185;
  h.hbm_GBps = 8000;  // datasheet: 576 TB/s for the rack = 8 TB/s per GPU
  // NVLink 5 as HGX B200: 130 TB/s for the rack = 1.8 TB/s per GPU both ways = 900 GB/s
  // one way, to any of the 72 GPUs (the NVLink switch trays are non-blocking).
  h.intra_node = {900, 5};
  // Scale-out: one 400 Gb/s ConnectX-7 InfiniBand NIC per GPU in NVIDIA's GB200 NVL72
  // reference architecture = 50 GB/s (ConnectX-8 at 800 Gb/s comes with GB300).
  h.inter_node = {50, 10};
  // A compute tray holds two GB200 superchips (one Grace + two Blackwell each): 4 GPUs per
  // node, 18 trays per rack, all 72 GPUs one NVLink domain.
  h.devices_per_node = 4;
  h.scale_up_domain = 72;
  // Host: each Grace CPU joins its two GPUs by NVLink-C2C, 900 GB/s over both directions,
  // with up to 480 GB of LPDDR5X (NVIDIA's GB200 figures as issue 43 quotes them; NVIDIA's
  // page itself was not retrieved here, but secondary pages agree: continuumlabs.ai's
  // "NVIDIA GB200 NVL72" gives the 900 GBps NVLink-C2C joining one 72-core Grace to two
  // Blackwell GPUs, fibermall.com's "In-depth analysis for NVIDIA GB200" 480 GB a superchip,
  // 17 TB of LPDDR5X a rack), read as 450 GB/s one way shared by the two GPUs
  // and 447 GiB for the two. MLCommons inference v6.1,
  // Crusoe's systems/GB200-NVL72_GB200-186GB_aarch64x16_Dynamo.json, confirms the link
  // ("accelerator_host_interconnect": "NVLink-C2C"). CPU Adam: the ZeRO-Offload figure for a
  // whole x86 host carried over to one 72-core Grace (an estimate).
  h.host_link = "nvlink_c2c";
  h.host_link_GBps = 450;
  h.host_link_devices = 2;
  h.host_memory_GiB = 447;
  h.host_devices = 2;
  h.host_adam_Gparams_per_s = kZeroOffloadCpuAdamGparamsPerS;
  return h;
}

// Blackwell Ultra: B300 and GB300, fitted on their own rows as make_b200 is on Blackwell's
// (16 rows, mean |log error| 12.4 %): their GEMMs and attention run faster at the same
// datasheet BF16 and FP8 peaks (a higher power limit; Blackwell Ultra's doubled
// attention-layer throughput, NVIDIA's Blackwell Ultra brief), which Blackwell's constants
// would miss by 15-25 %.
/// Blackwell Ultra's SMs and fitted kernel constants, for b300 and gb300.
void blackwell_ultra_kernels(HardwareSpec& h) {
  h.sm_count = 160;  // two dies of 80 SMs (NVIDIA's Blackwell Ultra brief)
  // Fitted (bench/fidelity/fit.py blackwell-ultra): large GEMMs 0.63 of the bf16 peak, FP8
  // 1.10 x, NVFP4 1.02 x, attention 0.48 forward and 0.336 backward.
  h.matmul_efficiency = 0.63;
  h.matmul_backward_efficiency = 0.63;
  h.matmul_weight_grad_efficiency = 0.63;
  h.fp8_matmul_scale = 1.10;
  h.fp4_matmul_scale = 1.02;
  h.attention_efficiency = 0.48;
  h.attention_backward_efficiency = 0.336;
}

HardwareSpec make_b300() {
  HardwareSpec h = make_b200();
  h.name = "b300";
  // NVIDIA HGX B300 datasheet (8 GPUs): FP16/BF16 36 PFLOPS and FP8 72 PFLOPS with sparsity
  // for the board, as HGX B200 = 2.25 and 4.5 PFLOPS dense per GPU; FP4 144 PFLOPS with
  // sparsity, 108 dense = 13.5 PFLOPS dense per GPU.
  h.peak_tflops = 2250;
  h.fp8_peak_tflops = 4500;
  h.fp4_peak_tflops = 13500;
  blackwell_ultra_kernels(h);
  // Datasheet: 2.3 TB HBM3e for 8 GPUs = 288 GB per GPU (12-high stacks); usable capacity
  // taken as b200's 179 GiB of 180 GB scaled to 288: 286 GiB (an estimate).
  h.memory_GiB = 286;
  h.hbm_GBps = 8000;  // datasheet: up to 8 TB/s per GPU
  // NVLink 5 through the NVSwitch as HGX B200: 1.8 TB/s per GPU both ways = 900 GB/s one way.
  h.intra_node = {900, 5};
  // DGX B300: eight ConnectX-8 SuperNICs, 800 Gb/s per GPU = 100 GB/s (datasheet:
  // networking 1.6 TB/s for the board, twice HGX B200's).
  h.inter_node = {100, 10};
  // nic_efficiency: b200's 0.96 carried over to ConnectX-8 (an estimate: no nccl-tests
  // figure for it was found).
  h.devices_per_node = 8;
  // Host link: no HGX B300 host figure was found (its ConnectX-8 SuperNICs carry a PCIe
  // Gen6 switch; what the GPU's own host link runs at was not established): unknown.
  unknown_host(h);
  return h;
}

HardwareSpec make_gb300() {
  // GB300 NVL72 rack (NVIDIA GB300 NVL72 datasheet): 72 Blackwell Ultra GPUs and 36 Grace
  // CPUs on one NVLink 5 fabric, as GB200 NVL72.
  HardwareSpec h = make_gb200();
  h.name = "gb300";
  // Datasheet, for the rack: FP16/BF16 360 PFLOPS and FP8 720 PFLOPS with sparsity, as GB200
  // NVL72 (2.5 and 5 PFLOPS dense per GPU); FP4 1440 PFLOPS with sparsity, 1080 dense =
  // 15 PFLOPS dense per GPU.
  h.peak_tflops = 2500;
  h.fp8_peak_tflops = 5000;
  h.fp4_peak_tflops = 15000;
  blackwell_ultra_kernels(h);
  // Datasheet: up to 20 TB HBM3e for the rack = 288 GB per GPU (usable 286 GiB, as b300),
  // 576 TB/s = 8 TB/s per GPU.
  h.memory_GiB = 286;
  h.hbm_GBps = 8000;
  h.intra_node = {900, 5};  // NVLink 5: 130 TB/s for the rack, 900 GB/s one way a GPU
  // ConnectX-8 SuperNIC at 800 Gb/s per GPU (the datasheet's 72 ConnectX-8) = 100 GB/s.
  h.inter_node = {100, 10};
  h.devices_per_node = 4;  // a compute tray: two Grace CPUs and four GPUs
  h.scale_up_domain = 72;
  // Host: as gb200 (carried over by make_gb200): one Grace with up to 480 GB LPDDR5X per 2
  // GPUs on its 900 GB/s NVLink-C2C; no GB300-specific C2C figure was found.
  return h;
}

HardwareSpec make_a100() {
  // Every fraction of peak as h200 (none was measured on A100). Large square bf16 GEMMs
  // reach ~250-270 of 312 TFLOP/s in public cuBLAS benchmarks; the tp-sharded GEMMs of a
  // training layer reach less, and the h200 fit's 0.68 (212 TFLOP/s) is in that range.
  // With them GPT-3 175B on 1024 GPUs lands 3.5 % under the Megatron-LM figure
  // (tests/cost/gpt3_figure_test.cpp: 30.8 s vs 32 s); a forward GEMM fraction of 0.64 /
  // 0.72 (the backward ones scaled alike) would give 32.4 s / 29.6 s. Checked, not fitted,
  // on nine more published A100 runs (Megatron-LM 175B and 530B at pp 12 and 35, MT-NLG
  // 530B): tests/cost/a100_published_runs_test.cpp, docs/cost-model.md "Calibration on
  // published A100 runs".
  HardwareSpec h = make_h200();
  h.name = "a100-80g";
  h.peak_tflops = 312;    // NVIDIA A100 datasheet: 312 TFLOPS dense BF16/FP16
  h.fp8_peak_tflops = 0;  // Ampere has no FP8 tensor cores
  h.memory_GiB = 80;      // 80 GB HBM2e; nvidia-smi reports 81920 MiB
  h.reserved_GiB = 2;     // CUDA context + allocator slack
  h.hbm_GBps = 2039;      // A100 80GB SXM datasheet: 2,039 GB/s
  // Megatron-LM launches few, large, fused kernels that the CPU queues ahead of the GPU:
  // a smaller per-kernel cost than the h200 fit's 4 us for eager HF.
  h.kernel_launch_us = 2;
  h.collective_efficiency = 0.75;  // NCCL all-reduce busbw ~230 of 300 GB/s
  h.intra_node = {300, 5};         // NVLink 3: 600 GB/s total = 300 GB/s per direction
  h.inter_node = {25, 10};         // DGX A100: eight 200 Gb/s HDR InfiniBand NICs, one per GPU
  // NICs: "On an Nvidia DGX-A100 system we have 8x200Gbit/s IB cards and we measure 192GB/s
  // AllReduce BusBW" (AddyLaddy, NVIDIA/nccl issue 812): 24 of 25 GB/s a NIC, h200's 0.96.
  h.nic_efficiency = 0.96;
  h.nvls_efficiency = 0;  // A100's NVSwitch (gen 2) has no NVLink SHARP
  h.devices_per_node = 8;
  // Host: MLCommons training v1.0, Inspur's systems/nf5488a5_pytorch.json (8 A100-SXM4-80GB):
  // "PCIe Gen4" per GPU (x16: 32 GB/s each way), 16 x 64 GB DDR4 (1024 GiB) on two EPYC 7713.
  hgx_host(h, "pcie4_x16", 32, 1024, 8);
  return h;
}

HardwareSpec make_ascend_910b() {
  HardwareSpec h;
  h.name = "ascend-910b";
  // Public figures conflict (roughly 256-376 TFLOPS fp16 by variant); 313 is the figure
  // Huawei quotes for the 910B (Atlas 800T A2). Override peak_tflops for other variants.
  h.peak_tflops = 313;
  h.memory_GiB = 64;   // 64 GB HBM2e per NPU (Atlas 800T A2 spec sheet)
  h.reserved_GiB = 3;  // CANN runtime and HCCL buffers
  h.hbm_GBps = 1600;   // 1.6 TB/s HBM2e, commonly quoted for 910B
  // Calibrated on two published MindFormers runs on Atlas 800T A2 (configs/calibration/,
  // sources in configs/presets/README.md): Llama 2 7B on 8 NPUs (dp 8; 4160 tokens/s/p)
  // and Llama 2 70B on 32 (tp 4 + sequence parallel, pp 8; 337 tokens/s/p). Two knobs:
  // every compute fraction is the h200 one times a common scale (kernels relative to
  // each other as on H200), and the collective efficiency. The scale came out at 1.29,
  // the collective efficiency at 0.50 (both runs then land within 0.1 %). The high
  // fractions (0.88 of 313 TFLOP/s on forward GEMMs) say that the product, not the peak,
  // is what the runs pin: the tested NPUs may be a faster variant (at 376 TFLOP/s they
  // would be 0.73), and MindSpore's fused norms, RoPE and SwiGLU move fewer bytes than the
  // HF-shaped sub-ops the model counts. The collective efficiency also absorbs whatever
  // slows the 70B run beyond the 7B one and is not modelled (tp-sharded, smaller GEMMs;
  // pipeline overheads), net of the tp communication MindFormers hides under compute
  // (fine_grain_interleave), which bmpipe does not overlap. Held-back runs:
  // configs/presets/README.md.
  h.matmul_efficiency = 0.88;              // 0.68 x 1.29
  h.matmul_backward_efficiency = 0.75;     // 0.58 x 1.29
  h.matmul_weight_grad_efficiency = 0.93;  // 0.72 x 1.29
  h.attention_efficiency = 0.65;           // 0.50 x 1.29, FlashAttentionScore
  h.attention_backward_efficiency = 0.45;  // 0.35 x 1.29
  h.memory_efficiency = 0.90;              // as h200
  h.kernel_launch_us = 4;                  // as h200
  h.collective_efficiency = 0.50;
  // HCCS full mesh: 392 GB/s per NPU counts both directions (about 196 GB/s one way;
  // docs/cost-model.md, "Hardware figures"), spread over 7 peers: 28 GB/s per directed link.
  h.intra_node = {28, 10};
  h.intra_node_mesh = true;
  h.inter_node = {25, 20};  // one 200 Gb/s RoCE v2 port per NPU; RoCE latency ~20 us
  h.devices_per_node = 8;
  // Host link: no figure for the link between a 910B and the Atlas 800T A2's Kunpeng 920
  // hosts (its generation, lanes, bandwidth) nor for the host memory was found: unknown.
  // Searched (2026-12): hiascend.com's Atlas A2 documents (CANN installation guides, HCCL
  // rank tables, MindCluster affinity pages: none gives the NPU-CPU link or the DIMMs),
  // Huawei support's Kunpeng server manuals (riser cards and PCIe slots of TaiShan servers,
  // not of the 800T A2), the Atlas 300T (model 9000, the 910's PCIe card) white paper, and
  // third-party overviews of the Atlas line; none states the 800T A2's figures.
  unknown_host(h);
  return h;
}

HardwareSpec make_ascend_910c() {
  // Ascend 910C in an Atlas 900 A3 SuperPoD / CloudMatrix384: 384 NPUs in 48 nodes of 8,
  // all on one Unified Bus (UB) fabric, a two-tier non-blocking Clos of UB switches. Figures
  // from Zuo et al., "Serving Large Language Models on Huawei CloudMatrix384" (arXiv
  // 2506.12708, 2025), sec. 3: the 910C is two dies in one package, each 376 TFLOPS dense
  // BF16/FP16, 64 GB HBM at 1.6 TB/s, 7 x 224 Gb/s UB links (196 GB/s one way) and a
  // 200 Gb/s RDMA port. One device here is the package, as Huawei counts 384 NPUs.
  HardwareSpec h = make_ascend_910b();
  h.name = "ascend-910c";
  h.peak_tflops = 752;    // 2 x 376 TFLOPS dense BF16 (paper, sec. 3.3)
  h.fp8_peak_tflops = 0;  // no FP8 in the paper's figures (INT8 is the low precision)
  h.memory_GiB = 128;     // 2 x 64 GB HBM (paper); usable capacity as 910B's 64 per die
  h.reserved_GiB = 6;     // 910B's 3 GiB of CANN runtime and HCCL buffers per die (estimate)
  h.hbm_GBps = 3200;      // 2 x 1.6 TB/s (paper)
  // Efficiencies: the 910B fit's (see make_ascend_910b), carried over -- the 910C is two
  // 910B-generation dies and no 910C run has been fitted here. They multiply the 910C's
  // own peak, so what the 910B fit absorbed (possibly a faster variant than 313 TFLOPS)
  // carries over too: an estimate.
  // UB: 392 GB/s one way per package through switches, not a mesh of point-to-point
  // links, so a device's whole bandwidth is its one link (as an NVSwitch). Latency: the
  // paper quotes sub-microsecond UB hops; the HCCL software overhead is taken as 910B's
  // 10 us (estimate).
  h.intra_node = {392, 10};
  h.intra_node_mesh = false;
  h.inter_node = {50, 20};  // RDMA plane: 2 x 200 Gb/s RoCE per package = 50 GB/s (paper)
  h.devices_per_node = 8;   // 48 nodes x 8 NPUs = 384 (paper, sec. 3.2)
  h.scale_up_domain = 384;  // the whole SuperPoD on one UB fabric
  // Host link: the Unified Bus. Zuo et al. (above), sec. 3, its description of the Ascend
  // 910C node: each node has 8 NPUs, 4 Kunpeng CPUs and 7 on-board UB switch chips, all 12
  // processors on the switches by UB links; each NPU has up to 392 GB/s of UB one way and
  // each Kunpeng CPU socket about 160 GB/s; the four sockets form a full-mesh NUMA, so an
  // NPU reaches all of the node's CPU-attached DRAM. A device's path to host memory is
  // thus bounded by the CPU side: 160 GB/s one way a socket for 8 / 4 = 2 NPUs
  // (host_link_devices 2: 80 GB/s each when all copy at once), and the node's 4 sockets
  // are one host for its 8 NPUs (host_devices 8). Read through copies of the paper's text,
  // not the paper itself: emergentmind.com's "CloudMatrix Datacenter Architecture" topic
  // page ("4 Kunpeng CPUs (each providing approximately 160 GB/s of UB bandwidth)", citing
  // Zuo et al.) and 10100.com/article/50957727 (the full-mesh NUMA paragraph, verbatim);
  // to be checked against the paper. Host memory: no DRAM capacity of a node was found
  // (the paper's copies above, hiascend.com's Atlas 900 A3 SuperPoD pages, third-party
  // descriptions of the SuperPoD): unknown (0), so activation and optimizer offload are
  // refused until cluster.device.host_memory_GiB gives it. CPU Adam: ZeRO-Offload's
  // figure is a Xeon host's; none was found for Kunpeng: unknown (optimizer offload also
  // needs cluster.device.host_adam_Gparams_per_s).
  h.host_link =
      std::string(kHostLinkKinds[3]);  // "ub" (a literal trips GCC 12's -Wmaybe-uninitialized)
  h.host_link_GBps = 160;
  h.host_link_devices = 2;
  h.host_memory_GiB = 0;
  h.host_devices = 8;
  h.host_adam_Gparams_per_s = 0;
  return h;
}

const std::array<HardwareSpec, 10>& presets() {
  static const std::array<HardwareSpec, 10> table{
      make_ascend_910b(), make_ascend_910c(), make_a100(), make_b200(), make_b300(),
      make_gb200(),       make_gb300(),       make_h100(), make_h200(), make_h800()};
  return table;
}

}  // namespace

const HardwareSpec* find_hardware_preset(const std::string& name) {
  for (const auto& p : presets())
    if (p.name == name) return &p;
  return nullptr;
}

std::string hardware_preset_names() {
  std::string out;
  for (const auto& p : presets()) out += (out.empty() ? "" : ", ") + p.name;
  return out;
}

}  // namespace bmpipe
