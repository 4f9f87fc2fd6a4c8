#pragma once
// Internal to bmpipe_experiment: the field table of every config section. A key exists
// because it is listed here, and only here: config.cpp derives the allowed keys, the reads
// and the messages from these rows. The ranges are physical: a value outside is not a
// configuration but a typo (a latency of a year, a bandwidth of a bit per day), and a value
// inside converts to int64 ns and bytes without overflow.

#include <array>
#include <climits>
#include <string_view>

#include "experiment/fields.hpp"

// GCC 12 warns about designated initializers that leave members to their default member
// initializers (GCC bug 96868); in these tables that is the point: a row says only what
// differs from the default.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace bmpipe::detail {

// ---- ranges, by unit ------------------------------------------------------------------------

/// Time of one op of one layer for one micro-batch.
inline constexpr Range kOpMs{.min = 0, .max = 86'400'000, .unit = "ms", .max_note = "a day"};
inline constexpr Range kLatencyUs{.min = 0, .max = 3.6e9, .unit = "us", .max_note = "an hour"};
inline constexpr Range kBandwidth{.min = 0,
                                  .min_open = true,
                                  .max = 1e6,
                                  .unit = "GB/s",
                                  .max_note = "1 PB/s",
                                  .low = 1e-9,
                                  .low_note = "1 byte/s"};
/// A host link's bandwidth, one way: 0 = no host link known (offloading refused).
inline constexpr Range kHostLinkGBps{.min = 0, .max = 1e6, .unit = "GB/s", .max_note = "1 PB/s"};
/// A host's memory: 0 = unknown (offloading refused).
inline constexpr Range kHostMemoryGiB{
    .min = 0, .max = 1'048'576, .unit = "GiB", .max_note = "1 PiB"};
/// CPU Adam throughput of one host: 0 = unknown (offloading refused).
inline constexpr Range kHostAdamGparams{
    .min = 0, .max = 1e6, .unit = "1e9 params/s", .max_note = "a quadrillion parameters a second"};
/// Devices sharing one host or one host link.
inline constexpr Range kHostSharing{
    .min = 1, .max = 1024, .max_note = "more devices than any host serves"};
inline constexpr Range kCapacityGiB{
    .min = 0, .min_open = true, .max = 1'048'576, .unit = "GiB", .max_note = "1 PiB"};
inline constexpr Range kReservedGiB{.min = 0, .max = 1'048'576, .unit = "GiB", .max_note = "1 PiB"};
inline constexpr Range kAllocatorOverhead{
    .min = 0, .max = 10, .max_note = "reserved eleven times what the tensors hold"};
/// Bytes of one layer for one micro-batch (or its weights): 2^50 = 1 PiB.
inline constexpr Range kBytes{
    .min = 0, .max = 1'125'899'906'842'624, .unit = "bytes", .max_note = "1 PiB"};
inline constexpr Range kTflops{.min = 0,
                               .min_open = true,
                               .max = 1e6,
                               .unit = "TFLOP/s",
                               .max_note = "an exaflop per device",
                               .low = 1e-6,
                               .low_note = "1 MFLOP/s"};
inline constexpr Range kFraction{
    .min = 0, .min_open = true, .max = 1, .max_note = "a fraction of peak"};
/// A multiple of a fraction of peak (fp8_matmul_scale): the product with each GEMM
/// efficiency is checked against 1 in check_values.
inline constexpr Range kEfficiencyScale{
    .min = 0, .min_open = true, .max = 1000, .max_note = "a thousand times the bf16 fraction"};
/// A share that may be none or all: [0, 1].
inline constexpr Range kShare{.min = 0, .max = 1, .max_note = "all of it"};
inline constexpr Range kOverlapFactor{
    .min = 0, .min_open = true, .max = 10, .max_note = "ten times the two halves run apart"};
/// Counts of devices, stages, micro-batches: the work limits (WorkLimits) bound products.
inline constexpr Range kCount{.min = 1, .max = INT_MAX};
inline constexpr Range kCount0{.min = 0, .max = INT_MAX};
/// max / mean tokens per expert.
/// training.moe_capacity_factor: 0 (dropless) or a factor up to 1024 experts' worth.
inline constexpr Range kCapacityFactor{
    .min = 0, .max = 1024, .max_note = "every token on each of 1024 experts"};
inline constexpr Range kLoadImbalance{
    .min = 1, .max = 1024, .max_note = "more than every token of 1024 experts on one"};
inline constexpr Range kLayers{.min = 1, .max = 100'000, .max_note = "no model has more layers"};
inline constexpr Range kLayers0{.min = 0, .max = 100'000, .max_note = "no model has more layers"};
/// model.moe.layer_freq: an entry of its list form (0 dense, 1 MoE), or its int form.
inline constexpr Range kMoeBit{.min = 0, .max = 1, .max_note = "1 marks an MoE layer"};
inline constexpr Range kLayerFreq{.min = 1, .max = 100'000, .max_note = "no model has more layers"};
/// Routed experts of an MoE layer, and experts per token.
inline constexpr Range kExperts{.min = 1, .max = 65'536};
inline constexpr Range kExperts0{.min = 0, .max = 65'536};
/// A sliding attention window in tokens (0: none): as long as a sequence may be.
inline constexpr Range kWindow{.min = 0, .max = 16'777'216, .unit = "tokens"};
/// Which layers are windowed: every k-th from layer 0 (0: none).
inline constexpr Range kWindowEvery{
    .min = 0, .max = 100'000, .max_note = "no model has more layers"};
/// Multi-token-prediction modules (DeepSeek-V3 has 1).
inline constexpr Range kMtpLayers{
    .min = 0, .max = 64, .max_note = "more predicted tokens than any model uses"};
inline constexpr Range kZeroStage{
    .min = 0, .max = 3, .max_note = "ZeRO-3 shards everything there is: parameters"};
// Shapes: generous bounds that keep the cost model's parameter counts far inside int64.
inline constexpr Range kHidden{.min = 1, .max = 1'048'576};
inline constexpr Range kHeads{.min = 1, .max = 65'536};
inline constexpr Range kHeads0{.min = 0, .max = 65'536};
/// Mamba-2's conv1d taps and scan chunk (tokens).
inline constexpr Range kConvKernel{.min = 1, .max = 64, .max_note = "Mamba-2 uses 4"};
inline constexpr Range kChunk{.min = 1, .max = 65'536, .unit = "tokens"};
inline constexpr Range kFfn{.min = 1, .max = 16'777'216};
inline constexpr Range kFfn0{.min = 0, .max = 16'777'216};
/// Multi-latent attention ranks and head widths.
inline constexpr Range kRank{.min = 1, .max = 1'048'576};
inline constexpr Range kRank0{.min = 0, .max = 1'048'576};
/// DeepSeek sparse attention's keys per query.
inline constexpr Range kTopk{.min = 1, .max = 16'777'216, .unit = "tokens"};
inline constexpr Range kVocab{.min = 1, .max = 16'777'216};
inline constexpr Range kSeqLength{.min = 1, .max = 16'777'216, .unit = "tokens"};
inline constexpr Range kMicroBatch{.min = 1, .max = 65'536, .unit = "samples"};

inline constexpr std::array<std::string_view, 2> kArchitectures{"llama", "gpt"};
/// ModelShape::mlp_activation, in MlpActivation's order.
inline constexpr std::array<std::string_view, 2> kMlpActivations{"swiglu", "relu2"};
inline constexpr std::array<std::string_view, 2> kDtypes{"bf16", "fp16"};
inline constexpr std::array<std::string_view, 3> kFp8Formats{"none", "hybrid", "e4m3"};
inline constexpr std::array<std::string_view, 3> kCpCommTypes{"p2p", "a2a", "a2a+p2p"};
inline constexpr std::array<std::string_view, 6> kFp8Recipes{"delayed", "tensorwise", "blockwise",
                                                             "mxfp8",   "nvfp4",      "rowwise"};
inline constexpr std::array<std::string_view, 1> kOptimizers{"adam"};
inline constexpr std::array<std::string_view, 3> kGradDtypes{"fp32", "bf16", "fp16"};
/// CostSettings::kernels, in Kernels' order.
inline constexpr std::array<std::string_view, 2> kKernels{"eager", "fused"};
inline constexpr std::array<std::string_view, 2> kMoeDispatchers{"alltoall", "deepep"};
/// CostSettings::grad_accumulation, in GradAccumulation's order.
inline constexpr std::array<std::string_view, 3> kGradAccumulations{"overwrite", "add", "fused"};

// ---- sections ---------------------------------------------------------------------------------

inline constexpr auto kRootFields = std::to_array<Field<Config>>({
    {.name = "cluster", .need = Need::required, .help = "the devices and their links"},
    {.name = "model", .need = Need::required, .help = "measured layers or an analytic shape"},
    {.name = "training", .need = Need::required, .help = "schedule and parallel layout"},
});

inline constexpr auto kClusterFields = std::to_array<Field<ClusterSpec>>({
    {.name = "nodes",
     .slot = &ClusterSpec::nodes,
     .range = kCount,
     .need = Need::required,
     .help = "number of nodes"},
    {.name = "devices_per_node",
     .slot = &ClusterSpec::devices_per_node,
     .range = kCount,
     .need = Need::unless_base,
     .help = "devices in one node; a device preset knows the usual number"},
    {.name = "scale_up_domain",
     .slot = &ClusterSpec::scale_up_domain,
     .range = kCount0,
     .help = "devices on one scale-up fabric (whole nodes, dividing the device count) whose "
             "tp and ep groups use the intra_node link; 0: devices_per_node; absent: the "
             "device preset's (gb200 72, ascend-910c 384, capped at the device count), else 0"},
    {.name = "device", .need = Need::required, .help = "the accelerator"},
    {.name = "intra_node", .help = "the link between two devices of a node"},
    {.name = "inter_node", .help = "one device's NIC into the fabric"},
});

inline constexpr auto kDeviceFields = std::to_array<Field<HardwareSpec>>({
    {.name = "preset", .help = "a hardware preset; keys beside it override its values"},
    {.name = "name", .slot = &HardwareSpec::name, .help = "shown in outputs"},
    {.name = "memory_GiB",
     .slot = &HardwareSpec::memory_GiB,
     .range = kCapacityGiB,
     .need = Need::unless_base,
     .help = "usable memory"},
    {.name = "reserved_GiB",
     .slot = &HardwareSpec::reserved_GiB,
     .range = kReservedGiB,
     .help = "taken by the framework before any tensor"},
    {.name = "allocator_overhead",
     .slot = &HardwareSpec::allocator_overhead,
     .range = kAllocatorOverhead,
     .help = "the caching allocator's fragmentation: its reserved peak (what "
             "torch.cuda.max_memory_reserved prints) is 1 + this times the tensors' peak "
             "(max_memory_allocated); 0 = none counted. GMLake (Guo et al., ASPLOS 2024, "
             "arXiv 2401.08156) measured PyTorch's allocator at 15 % of reserved memory on "
             "average and up to 33 % (eight LLMs, A100 80 GB, with recompute, offload or "
             "ZeRO): 0.18 and 0.49 here"},
    {.name = "peak_tflops",
     .slot = &HardwareSpec::peak_tflops,
     .range = kTflops,
     .need = Need::unless_base,
     .help = "dense fp16/bf16 peak",
     .form = Form::compute},
    {.name = "hbm_GBps",
     .slot = &HardwareSpec::hbm_GBps,
     .range = kBandwidth,
     .need = Need::unless_base,
     .help = "memory bandwidth",
     .form = Form::compute},
    {.name = "matmul_efficiency",
     .slot = &HardwareSpec::matmul_efficiency,
     .range = kFraction,
     .help = "fraction of peak a forward GEMM reaches",
     .form = Form::compute},
    {.name = "matmul_backward_efficiency",
     .slot = &HardwareSpec::matmul_backward_efficiency,
     .range = kFraction,
     .help = "fraction of peak a backward GEMM reaches",
     .form = Form::compute},
    {.name = "matmul_weight_grad_efficiency",
     .slot = &HardwareSpec::matmul_weight_grad_efficiency,
     .range = kFraction,
     .help = "fraction of peak a weight-grad GEMM reaches; default matmul_backward_efficiency",
     .form = Form::compute},
    {.name = "fp8_matmul_scale",
     .slot = &HardwareSpec::fp8_matmul_scale,
     .range = kEfficiencyScale,
     .help = "an FP8 GEMM's fraction of the FP8 peak, as a multiple of the bf16 GEMM's "
             "fraction of the bf16 peak; 1: the same fraction. Times each GEMM efficiency "
             "it stays at most 1",
     .form = Form::compute},
    {.name = "fp4_matmul_scale",
     .slot = &HardwareSpec::fp4_matmul_scale,
     .range = kEfficiencyScale,
     .help = "an NVFP4 GEMM's fraction of the FP4 peak, as a multiple of the bf16 GEMM's "
             "fraction of the bf16 peak (fp8_matmul_scale's FP4 twin)",
     .form = Form::compute},
    {.name = "fp8_rowwise_scale",
     .slot = &HardwareSpec::fp8_rowwise_scale,
     .range = kFraction,
     .help = "a rowwise-scaled FP8 GEMM's (training.fp8_recipe rowwise) fraction of the FP8 "
             "peak, as a multiple of a tensorwise one's (fp8_matmul_scale); 1: as fast",
     .form = Form::compute},
    {.name = "sm_count",
     .slot = &HardwareSpec::sm_count,
     .range = kCount0,
     .help = "SMs a GEMM's tiles spread over, for the GEMM shape model (tile and wave "
             "quantization, docs/cost-model.md); 0: every GEMM at the flat efficiencies",
     .form = Form::compute},
    {.name = "attention_efficiency",
     .slot = &HardwareSpec::attention_efficiency,
     .range = kFraction,
     .help = "fraction of peak fused attention reaches",
     .form = Form::compute},
    {.name = "attention_backward_efficiency",
     .slot = &HardwareSpec::attention_backward_efficiency,
     .range = kFraction,
     .help = "fraction of peak fused attention's backward reaches",
     .form = Form::compute},
    {.name = "memory_efficiency",
     .slot = &HardwareSpec::memory_efficiency,
     .range = kFraction,
     .help = "fraction of hbm_GBps memory-bound kernels reach",
     .form = Form::compute},
    {.name = "collective_efficiency",
     .slot = &HardwareSpec::collective_efficiency,
     .range = kFraction,
     .help = "fraction of link bandwidth collectives reach",
     .form = Form::compute},
    {.name = "nic_efficiency",
     .slot = &HardwareSpec::nic_efficiency,
     .range = kFraction,
     .help = "fraction of inter_node bandwidth an all-reduce, all-gather or reduce-scatter "
             "reaches on each NIC; default collective_efficiency",
     .form = Form::compute},
    {.name = "nvls_efficiency",
     .slot = &HardwareSpec::nvls_efficiency,
     .range = kShare,
     .help = "NVLink SHARP: an all-reduce's algorithm bandwidth inside the scale-up domain "
             "as a fraction of intra_node bandwidth; 0: no NVLS",
     .form = Form::compute},
    {.name = "kernel_launch_us",
     .slot = &HardwareSpec::kernel_launch_us,
     .range = kLatencyUs,
     .help = "fixed cost of one kernel launch",
     .form = Form::compute},
    {.name = "host_launch_us",
     .slot = &HardwareSpec::host_launch_us,
     .range = kLatencyUs,
     .help = "the host's time to issue one kernel outside CUDA graphs; a layer pass whose "
             "kernels take the host longer than the GPU is host-bound; 0: never",
     .form = Form::compute},
    {.name = "intra_node_mesh",
     .slot = &HardwareSpec::intra_node_mesh,
     .help = "a node is a full mesh (HCCS), not a switch",
     .form = Form::compute},
    {.name = "host_link",
     .slot = &HardwareSpec::host_link,
     .help = "the link between the device and its host's memory: pcie4_x16, pcie5_x16, "
             "nvlink_c2c or ub (Huawei's Unified Bus) (shown in outputs; host_link_GBps is "
             "its speed)",
     .choices = kHostLinkKinds,
     .form = Form::compute},
    {.name = "host_link_GBps",
     .slot = &HardwareSpec::host_link_GBps,
     .range = kHostLinkGBps,
     .help = "the host link's bandwidth one way, shared by host_link_devices devices; 0: no "
             "host link known (training.optimizer.offload_fraction is refused)",
     .form = Form::compute},
    {.name = "host_link_devices",
     .slot = &HardwareSpec::host_link_devices,
     .range = kHostSharing,
     .help = "devices sharing one host link (1: a link of its own; gb200: a Grace's "
             "NVLink-C2C serves 2)",
     .form = Form::compute},
    {.name = "host_memory_GiB",
     .slot = &HardwareSpec::host_memory_GiB,
     .range = kHostMemoryGiB,
     .help = "one host's memory, shared by host_devices devices; 0: unknown",
     .form = Form::compute},
    {.name = "host_devices",
     .slot = &HardwareSpec::host_devices,
     .range = kHostSharing,
     .help = "devices sharing one host's memory and CPUs (an 8-GPU HGX node: 8; gb200: 2)",
     .form = Form::compute},
    {.name = "host_adam_Gparams_per_s",
     .slot = &HardwareSpec::host_adam_Gparams_per_s,
     .range = kHostAdamGparams,
     .help = "Adam's step on one host's CPUs (fp32 master weights, m, v), 1e9 parameters a "
             "second for the whole host; 0: unknown",
     .form = Form::compute},
});

inline constexpr auto kLinkFields = std::to_array<Field<LinkSpec>>({
    {.name = "bandwidth_GBps",
     .slot = &LinkSpec::bandwidth_GBps,
     .range = kBandwidth,
     .need = Need::unless_base,
     .help = "per direction"},
    {.name = "latency_us",
     .slot = &LinkSpec::latency_us,
     .range = kLatencyUs,
     .need = Need::unless_base,
     .help = "paid once per transfer"},
});

inline constexpr auto kModelFields = std::to_array<Field<ModelShape>>({
    {.name = "name", .slot = &ModelShape::name, .help = "shown in outputs"},
    {.name = "layers", .help = "measured layer groups, in model order", .form = Form::measured},
    {.name = "preset", .help = "a model preset", .form = Form::analytic},
    {.name = "hf_config",
     .help = "a HuggingFace config.json, relative to the YAML file",
     .form = Form::analytic},
    {.name = "moe", .help = "mixture-of-experts layers: see model.moe", .form = Form::analytic},
    {.name = "mla", .help = "multi-latent attention: see model.mla", .form = Form::analytic},
    {.name = "dsa",
     .help = "DeepSeek sparse attention over the MLA: see model.dsa",
     .form = Form::analytic},
    {.name = "hybrid_pattern",
     .slot = &ModelShape::hybrid_pattern,
     .help = "a hybrid model's layers, one symbol each: M Mamba-2, * attention, - MLP, E MoE "
             "(Megatron's --hybrid-override-pattern); as many symbols as num_layers",
     .form = Form::analytic},
    {.name = "mamba",
     .help = "the Mamba-2 mixer of hybrid_pattern's M layers: see model.mamba",
     .form = Form::analytic},
    {.name = "gdn",
     .help = "the Gated DeltaNet mixer of hybrid_pattern's G layers: see model.gdn",
     .form = Form::analytic},
    {.name = "vision",
     .help = "a vision-language model's vision encoder and projector, and the images a "
             "sample carries: see model.vision",
     .form = Form::analytic},
    {.name = "attention_output_gate",
     .slot = &ModelShape::attention_output_gate,
     .help = "a sigmoid gate on the attention output from a second half of q_proj "
             "(Qwen3-Next's attn_output_gate)",
     .form = Form::analytic},
    {.name = "rotary",
     .slot = &ModelShape::rotary,
     .help = "RoPE on q and k (default true; Nemotron-H has no position embedding: false)",
     .form = Form::analytic},
    {.name = "mlp_activation",
     .help = "swiglu (gated, h -> 2 ffn -> h) or relu2 (squared ReLU, h -> ffn -> h: "
             "Nemotron-H); llama architecture; also the experts'",
     .choices = kMlpActivations,
     .form = Form::analytic},
    {.name = "head_dim",
     .slot = &ModelShape::explicit_head_dim,
     .range = kHeads0,
     .help = "one attention head's width (HF head_dim, Megatron's --kv-channels); 0: "
             "hidden_size / num_attention_heads",
     .form = Form::analytic},
    {.name = "sliding_window",
     .slot = &ModelShape::sliding_window,
     .range = kWindow,
     .help = "sliding-window attention: each query sees itself and the sliding_window - 1 "
             "tokens before it (HF sliding_window; Megatron's --window-size W-1,0); 0: none. "
             "At most training.seq_length",
     .form = Form::analytic},
    {.name = "sliding_every",
     .slot = &ModelShape::sliding_every,
     .range = kWindowEvery,
     .help = "which layers use sliding_window: every k-th from layer 0 (gpt-oss: 2; 1, the "
             "default with a window: all)",
     .form = Form::analytic},
    {.name = "full_every",
     .slot = &ModelShape::full_every,
     .range = kWindowEvery,
     .help = "the other way to pick them: every k-th layer counted from 1 attends to the whole "
             "sequence, the others use sliding_window (Gemma 3: 6; Llama 4: 4; Megatron's "
             "--window-attn-skip-freq k); not with sliding_every. 0: sliding_every picks",
     .form = Form::analytic},
    {.name = "chunked_window",
     .slot = &ModelShape::chunked_window,
     .help = "sliding_window is a chunk (Llama 4's attention_chunk_size): a query sees the keys "
             "of its own aligned chunk of sliding_window tokens up to itself",
     .form = Form::analytic},
    {.name = "post_norms",
     .slot = &ModelShape::post_norms,
     .help = "two more RMSNorms a layer, of the attention output and of the MLP output before "
             "each residual add (Gemma 2 and 3's post_attention_layernorm and "
             "post_feedforward_layernorm)",
     .form = Form::analytic},
    {.name = "mtp_layers",
     .slot = &ModelShape::mtp_layers,
     .range = kMtpLayers,
     .help = "multi-token-prediction modules after the last layer (DeepSeek-V3: 1); a hybrid "
             "model's MTP depths (Megatron's --mtp-num-layers: Nemotron 3 Super's recipes "
             "run 2)",
     .form = Form::analytic},
    {.name = "mtp_pattern",
     .slot = &ModelShape::mtp_pattern,
     .help = "a hybrid model's MTP block, one symbol a block as hybrid_pattern's (HF "
             "mtp_hybrid_override_pattern, Megatron's --mtp-hybrid-override-pattern; Nemotron "
             "3 Super: \"*E\"); needs hybrid_pattern and mtp_layers",
     .form = Form::analytic},
    {.name = "mtp_shared",
     .slot = &ModelShape::mtp_shared,
     .help = "the MTP depths share one block's weights (Megatron's mtp_use_repeated_layer; "
             "Megatron-Bridge's default for Nemotron 3): parameters counted once",
     .form = Form::analytic},
    {.name = "architecture",
     .help = "llama or gpt",
     .choices = kArchitectures,
     .form = Form::analytic},
    {.name = "num_layers",
     .slot = &ModelShape::num_layers,
     .range = kLayers,
     .need = Need::unless_base,
     .help = "decoder layers",
     .form = Form::analytic},
    {.name = "hidden_size",
     .slot = &ModelShape::hidden_size,
     .range = kHidden,
     .need = Need::unless_base,
     .form = Form::analytic},
    {.name = "num_attention_heads",
     .slot = &ModelShape::num_attention_heads,
     .range = kHeads,
     .need = Need::unless_base,
     .form = Form::analytic},
    {.name = "num_kv_heads",
     .slot = &ModelShape::num_kv_heads,
     .range = kHeads,
     .help = "default: num_attention_heads",
     .form = Form::analytic},
    {.name = "ffn_hidden_size",
     .slot = &ModelShape::ffn_hidden_size,
     .range = kFfn,
     .need = Need::unless_base,
     .form = Form::analytic},
    {.name = "vocab_size",
     .slot = &ModelShape::vocab_size,
     .range = kVocab,
     .need = Need::unless_base,
     .form = Form::analytic},
    {.name = "tied_embeddings", .slot = &ModelShape::tied_embeddings, .form = Form::analytic},
    {.name = "flash_attention", .slot = &ModelShape::flash_attention, .form = Form::analytic},
    {.name = "dropout", .slot = &ModelShape::dropout, .form = Form::analytic},
});

inline constexpr auto kLayerFields = std::to_array<Field<LayerGroup>>({
    {.name = "name", .slot = &LayerGroup::name, .need = Need::required},
    {.name = "count",
     .slot = &LayerGroup::count,
     .range = kLayers,
     .help = "identical layers in a row (default 1)"},
    {.name = "forward_ms",
     .slot = &LayerGroup::forward_ms,
     .range = kOpMs,
     .need = Need::required,
     .help = "per micro-batch"},
    {.name = "backward_input_ms",
     .slot = &LayerGroup::backward_input_ms,
     .range = kOpMs,
     .need = Need::required,
     .help = "input-gradient part of the backward"},
    {.name = "backward_weight_ms",
     .slot = &LayerGroup::backward_weight_ms,
     .range = kOpMs,
     .need = Need::required,
     .help = "weight-gradient part of the backward"},
    {.name = "recompute_ms",
     .slot = &LayerGroup::recompute_ms,
     .range = kOpMs,
     .help = "extra backward time the group always pays in its none mode"},
    {.name = "activation_bytes",
     .slot = &LayerGroup::activation_bytes,
     .range = kBytes,
     .need = Need::required,
     .help = "kept from forward to backward, per in-flight micro-batch"},
    {.name = "weight_grad_retained_bytes",
     .slot = &LayerGroup::weight_grad_retained_bytes,
     .range = kBytes,
     .help = "of activation_bytes, what W still needs after I (default all)"},
    {.name = "output_bytes",
     .slot = &LayerGroup::output_bytes,
     .range = kBytes,
     .need = Need::required,
     .help = "sent to the next layer or stage"},
    {.name = "param_bytes",
     .slot = &LayerGroup::param_bytes,
     .range = kBytes,
     .need = Need::required,
     .help = "weights"},
    {.name = "grad_bytes", .slot = &LayerGroup::grad_bytes, .range = kBytes},
    {.name = "optimizer_bytes", .slot = &LayerGroup::optimizer_bytes, .range = kBytes},
    {.name = "recompute", .help = "costs per recompute mode: {selective: {...}, full: {...}}"},
});

/// One mode of a layer group's `recompute` map.
inline constexpr auto kLayerModeFields = std::to_array<Field<LayerModeCosts>>({
    {.name = "recompute_ms",
     .slot = &LayerModeCosts::recompute_ms,
     .range = kOpMs,
     .need = Need::required,
     .help = "extra backward time in this mode"},
    {.name = "activation_bytes",
     .slot = &LayerModeCosts::activation_bytes,
     .range = kBytes,
     .need = Need::required,
     .help = "kept from forward to backward in this mode"},
    {.name = "weight_grad_retained_bytes",
     .slot = &LayerModeCosts::weight_grad_retained_bytes,
     .range = kBytes},
});

inline constexpr auto kTrainingFields = std::to_array<Field<TrainingConfig>>({
    {.name = "schedule", .slot = &TrainingConfig::schedule, .help = "see `bmpipe schedules`"},
    {.name = "pp",
     .slot = &TrainingConfig::pp,
     .range = kCount,
     .need = Need::required,
     .help = "pipeline devices"},
    {.name = "vpp", .slot = &TrainingConfig::vpp, .range = kCount, .help = "chunks per device"},
    {.name = "tp", .slot = &TrainingConfig::tp, .range = kCount},
    {.name = "ep",
     .slot = &TrainingConfig::ep,
     .range = kCount,
     .help = "expert parallel size: divides the experts, ep x etp divides tp x dp",
     .form = Form::analytic},
    {.name = "etp",
     .slot = &TrainingConfig::etp,
     .range = kCount,
     .help = "expert tensor parallel size (default 1)",
     .form = Form::analytic},
    {.name = "cp",
     .slot = &TrainingConfig::cp,
     .range = kCount,
     .help = "context parallel size (Megatron's --context-parallel-size): splits each "
             "sequence in 2 cp causal chunks; divides seq_length / 2",
     .form = Form::analytic},
    {.name = "cp_comm_type",
     .slot = &TrainingConfig::cp_comm_type,
     .help = "p2p: ring key/value exchange overlapped with attention; a2a: Ulysses "
             "all-to-alls, exposed; a2a+p2p: both in a hierarchy (cp_hierarchy)",
     .choices = kCpCommTypes,
     .form = Form::analytic},
    {.name = "cp_hierarchy",
     .help = "Megatron's --hierarchical-context-parallel-sizes, with cp_comm_type a2a+p2p: "
             "[a2a ranks, ring ranks], inner first, multiplying to cp; the all-to-all runs "
             "inside groups of consecutive cp ranks, the ring across them",
     .form = Form::analytic},
    {.name = "dp",
     .slot = &TrainingConfig::dp,
     .range = kCount,
     .help = "default: devices / (pp * tp * cp)"},
    {.name = "devices",
     .slot = &TrainingConfig::devices,
     .range = kCount,
     .help = "the devices the job runs on, the cluster's first ones; the rest stay idle "
             "(default: all of nodes x devices_per_node)"},
    {.name = "microbatches",
     .slot = &TrainingConfig::microbatches,
     .range = kCount,
     .help = "per iteration (or give global_batch_size)"},
    {.name = "partition", .help = "layers per stage"},
    {.name = "megatron_layout",
     .slot = &TrainingConfig::megatron_layout,
     .help = "Megatron-LM's --pipeline-model-parallel-layout (\"Et*3|(tt|)*29,m|L\"); "
             "bmpipe plan's megatron-layout baseline runs it, and one with a stage "
             "without decoder layers (t) or MTP layers (m) before the last stage is the "
             "partition: every layer runs where it puts it"},
    {.name = "overlap_factor",
     .slot = &TrainingConfig::overlap_factor,
     .range = kOverlapFactor,
     .help = "an overlapped F&B pair's time over F + B"},
    {.name = "overlap_ms",
     .slot = &TrainingConfig::overlap_ms,
     .range = kOpMs,
     .help = "an overlapped F&B pair's time; 0 = use overlap_factor"},
    {.name = "activation_limit_microbatches",
     .slot = &TrainingConfig::activation_limit_microbatches,
     .range = kCount,
     .help = "zb-auto's memory limit"},
    {.name = "seq_length", .slot = &TrainingConfig::seq_length, .range = kSeqLength},
    {.name = "micro_batch_size", .slot = &TrainingConfig::micro_batch_size, .range = kMicroBatch},
    {.name = "global_batch_size", .slot = &TrainingConfig::global_batch_size, .range = kCount},
    {.name = "dtype", .slot = &TrainingConfig::dtype, .choices = kDtypes, .form = Form::analytic},
    {.name = "sequence_parallel",
     .slot = &TrainingConfig::sequence_parallel,
     .form = Form::analytic},
    {.name = "tp_comm_overlap",
     .slot = &TrainingConfig::tp_comm_overlap,
     .help = "TransformerEngine's userbuffer overlap of the sequence-parallel collectives with "
             "the dense GEMMs beside them (Megatron's --tp-comm-overlap); needs "
             "sequence_parallel and tp > 1",
     .form = Form::analytic},
    {.name = "separate_ends",
     .slot = &TrainingConfig::separate_ends,
     .help = "rows of their own for the embedding, the MTP layers and the loss, which the "
             "planner then moves like layers (partition still counts decoder layers)",
     .form = Form::analytic},
    {.name = "fp8",
     .slot = &TrainingConfig::fp8,
     .help = "FP8 GEMMs (Megatron's --fp8-format): at the device's FP8 peak, casts "
             "memory-bound, FP8 weight copies held; needs a device with FP8",
     .choices = kFp8Formats,
     .form = Form::analytic},
    {.name = "fp8_recipe",
     .slot = &TrainingConfig::fp8_recipe,
     .help = "FP8 scaling (Megatron's --fp8-recipe); tensorwise adds an amax pass per cast; "
             "mxfp8 needs Blackwell (b200, gb200, b300, gb300); nvfp4 runs the GEMMs in FP4 "
             "(Megatron's --fp4-format e2m1 --fp4-recipe nvfp4) and needs Blackwell; rowwise is "
             "torchao's float8 rowwise (torchtitan's): a scale per row, the weight-grad's inputs "
             "cast again, slower GEMMs (cluster.device.fp8_rowwise_scale)",
     .choices = kFp8Recipes,
     .form = Form::analytic},
    {.name = "fp8_param_gather",
     .slot = &TrainingConfig::fp8_param_gather,
     .help = "keep the GEMM weights in FP8 (NVFP4: FP4) alone and all-gather them so "
             "(Megatron's --fp8-param-gather; Megatron-Bridge's FP8 and MXFP8 recipes): no "
             "bf16 copy beside them; needs fp8 and optimizer.zero_stage >= 1",
     .form = Form::analytic},
    {.name = "optimizer", .form = Form::analytic},
    {.name = "kernels",
     .slot = &TrainingConfig::kernels,
     .help = "llama layers' norm, RoPE and SwiGLU kernels: eager (HF transformers, the "
             "default) or fused (Megatron-Core with TransformerEngine); gpt layers are fused",
     .choices = kKernels,
     .form = Form::analytic},
    {.name = "grad_accumulation",
     .help = "how weight gradients reach the buffer; default: llama add (with fused kernels: "
             "fused), gpt fused",
     .choices = kGradAccumulations,
     .form = Form::analytic},
    {.name = "recompute",
     .help = "a mode (none, selective, full, offload: none's activations with "
             "offload_modules' inputs on the host, or selective_offload: selective's, with "
             "the inputs selective keeps on the host), or {default, stages: {s: mode}, "
             "layers: {l: mode}}"},
    {.name = "recompute_modules",
     .slot = &TrainingConfig::recompute_modules,
     .help = "what the selective mode re-runs, comma-separated: core_attn, layernorm (an MoE "
             "layer's pre-MLP norm, MLA's input norm), mla_up_proj, mlp (dense MLPs), moe, "
             "moe_act (the experts' activation), shared_experts, or none (Megatron-Core's "
             "--recompute-modules); default core_attn",
     .form = Form::analytic},
    {.name = "offload_modules",
     .slot = &TrainingConfig::offload_modules,
     .help = "activation offload: what moves to host memory between a layer's forward and "
             "its backward, comma-separated module inputs: attn_norm (MLA's input norm), "
             "qkv_linear, core_attn (q, k, v), attn_proj (with core_attn), mlp_norm (an MoE "
             "layer's pre-MLP norm), expert_fc1, moe_act, or none (Megatron-Core's "
             "--fine-grained-activation-offloading with --offload-modules); every none and "
             "selective layer moves them, or, when training.recompute names offload, the "
             "offload layers only; needs a host link (cluster.device.host_link_GBps); default "
             "none",
     .form = Form::analytic},
    {.name = "offload_lead",
     .slot = &TrainingConfig::offload_lead,
     .range = kCount0,
     .help = "activation offload: a backward's activations start coming back when the op "
             "this many places before it on its device starts (0: when the op just before it "
             "ends, so the backward waits for the whole copy); default 1",
     .form = Form::analytic},
    {.name = "offload_layers",
     .slot = &TrainingConfig::offload_layers,
     .range = kCount0,
     .help = "whole-layer activation offload: the first this many decoder layers' activations "
             "go to host memory in each forward and come back for the backward, at most "
             "(layers - this) layers' on the device at once (Megatron-LM's "
             "--cpu-offloading-num-layers, Transformer Engine's CPU offload); fewer than the "
             "model's decoder layers, pp 1, no recompute, no offload_modules, and a host link "
             "(cluster.device.host_link_GBps); default 0",
     .form = Form::analytic},
    {.name = "bpipe",
     .slot = &TrainingConfig::bpipe,
     .help = "BPipe's activation balancing (Kim et al., ICML 2023): stage s of 1F1B, which "
             "holds up to pp - s micro-batches' activations, keeps at most ceil((pp + 1) / 2) "
             "and moves the latest others to the device of stage pp - 1 - s over the device "
             "graph, back before their backward; needs schedule 1f1b, pp >= 3, no "
             "offload_modules and no moe_overlap; default false"},
    {.name = "fsdp",
     .slot = &TrainingConfig::fsdp,
     .help = "fully sharded data parallel (Megatron-FSDP, FSDP2): optimizer.zero_stage 3 "
             "unless it says 2",
     .form = Form::analytic},
    {.name = "fsdp_shard_group",
     .slot = &TrainingConfig::fsdp_shard_group,
     .range = kCount0,
     .help = "hybrid sharding (HSDP): the dp x cp ranks one copy of the sharded state spans "
             "(zero_stage >= 1; must divide dp x cp, and dp x cp / it the experts' edp); the "
             "copies all-reduce their gradient shards. Megatron-LM's "
             "--num-distributed-optimizer-instances = dp x cp / this; 0: all of dp x cp",
     .form = Form::analytic},
    {.name = "fsdp_reshard_after_forward",
     .slot = &TrainingConfig::fsdp_reshard_after_forward,
     .help = "zero_stage 3: false keeps each layer's gathered parameters until its backward, "
             "which gathers nothing again (Megatron-LM's "
             "--torch-fsdp2-no-reshard-after-forward); default true",
     .form = Form::analytic},
    {.name = "fsdp_all_reduce_every_microbatch",
     .slot = &TrainingConfig::fsdp_all_reduce_every_microbatch,
     .help = "zero_stage 3 with fsdp_shard_group: true all-reduces each layer's gradient "
             "shard across the copies in every micro-batch's backward (FSDP2, torchtitan); "
             "false once an iteration after the last micro-batch (Megatron-FSDP); default "
             "false",
     .form = Form::analytic},
    {.name = "moe_overlap",
     .slot = &TrainingConfig::moe_overlap,
     .help = "1f1b/interleaved: pair each steady-state backward with the next forward so one "
             "hides the other's all-to-all (Megatron's --overlap-moe-expert-parallel-comm); "
             "needs MoE layers and ep > 1 and, by Megatron-Core's rules, schedule 1f1b at pp 1 "
             "or interleaved with vpp >= 2, no full recompute (the planner leaves it out), no "
             "moe in recompute_modules and at most one MTP layer",
     .form = Form::analytic},
    {.name = "moe_dispatcher",
     .slot = &TrainingConfig::moe_dispatcher,
     .help = "how MoE layers move tokens to the experts: alltoall (Megatron-Core's all-to-all "
             "over the ep group, the default) or deepep (DeepEP's kernels: once over the NIC "
             "per remote node, then NVLink; Megatron's flex dispatcher with the deepep "
             "backend); deepep needs MoE layers, ep > 1, etp 1 and NVLink-switched nodes",
     .choices = kMoeDispatchers,
     .form = Form::analytic},
    {.name = "moe_capacity_factor",
     .slot = &TrainingConfig::moe_capacity_factor,
     .range = kCapacityFactor,
     .help = "token dropping with padding: each expert runs capacity = ceil(factor x tokens x "
             "top_k / experts) rows of a device's tokens, padded or dropped to that (Megatron's "
             "--moe-expert-capacity-factor with --moe-pad-expert-input-to-capacity, MindFormers' "
             "moe_config.capacity_factor); 0: dropless. Needs MoE layers and the alltoall "
             "dispatcher",
     .form = Form::analytic},
    {.name = "vocab_parallel",
     .slot = &TrainingConfig::vocab_parallel,
     .help = "the embedding table and the LM head split over tp (default true); false: "
             "replicated over tp, split over dp only (MindFormers' vocab_emb_dp): tp x their "
             "weights, the head's GEMM over the whole vocabulary, its gradient all-gathered",
     .form = Form::analytic},
    {.name = "cuda_graphs",
     .slot = &TrainingConfig::cuda_graphs,
     .help = "the scopes CUDA graphs capture, comma-separated: attn, mlp, moe, moe_router, "
             "moe_preprocess, mamba, full_iteration (Megatron's --cuda-graph-modules under "
             "--cuda-graph-impl transformer_engine or local; full_iteration: --cuda-graph-impl "
             "full_iteration); their kernels launch for free; default none",
     .form = Form::analytic},
});

/// model.moe. Beside hf_config (or a preset) each key overrides the file's value; on a
/// dense base, num_experts and top_k make the model a mixture of experts.
inline constexpr auto kMoeFields = std::to_array<Field<MoeShape>>({
    {.name = "num_experts",
     .slot = &MoeShape::num_experts,
     .range = kExperts,
     .need = Need::unless_base,
     .help = "routed experts per MoE layer"},
    {.name = "top_k",
     .slot = &MoeShape::top_k,
     .range = kExperts,
     .need = Need::unless_base,
     .help = "experts per token, at most num_experts; with group-limited routing at "
             "most router_group_top_k x num_experts / router_groups"},
    {.name = "expert_ffn_hidden_size",
     .slot = &MoeShape::expert_ffn,
     .range = kFfn,
     .help = "one routed expert's intermediate size; default: the base's, else ffn_hidden_size"},
    {.name = "shared_expert_ffn_hidden_size",
     .slot = &MoeShape::shared_ffn,
     .range = kFfn0,
     .help = "all shared experts' intermediate size together (0: none)"},
    {.name = "first_dense_layers",
     .slot = &MoeShape::first_dense_layers,
     .range = kLayers0,
     .help = "the first layers keep a dense MLP (DeepSeek-V3: 3)"},
    {.name = "layer_freq",
     .help = "N: layer i is MoE when i % N == 0; or a list of 0/1 per layer (1: MoE), as "
             "Megatron's --moe-layer-freq; replaces the base's pattern"},
    {.name = "load_imbalance",
     .slot = &MoeShape::load_imbalance,
     .range = kLoadImbalance,
     .help = "max / mean tokens per expert; 1 = balanced"},
    {.name = "router_groups",
     .slot = &MoeShape::router_groups,
     .range = kExperts0,
     .help = "group-limited routing (HF n_group, Megatron's --moe-router-num-groups): the "
             "experts form this many equal groups; 0: none. With router_group_top_k"},
    {.name = "router_group_top_k",
     .slot = &MoeShape::router_group_top_k,
     .range = kExperts0,
     .help = "the groups each token picks its experts in (HF topk_group, Megatron's "
             "--moe-router-group-topk); at most router_groups"},
    {.name = "latent_size",
     .slot = &MoeShape::latent_size,
     .range = kRank,
     .help = "a latent MoE (HF and Megatron-Core moe_latent_size; Nemotron 3 Super: 1024): "
             "the routed tokens are projected h -> latent_size before the dispatch and back "
             "after the combine, the experts run latent_size wide; less than hidden_size"},
});

/// model.mla, named as Megatron-Core's MLATransformerConfig names them. Beside an hf_config
/// with MLA each key overrides the file's value.
inline constexpr auto kMlaFields = std::to_array<Field<MlaShape>>({
    {.name = "q_lora_rank",
     .slot = &MlaShape::q_lora_rank,
     .range = kRank0,
     .help = "q's low-rank latent (0: q projected directly); at most hidden_size"},
    {.name = "kv_lora_rank",
     .slot = &MlaShape::kv_lora_rank,
     .range = kRank,
     .need = Need::unless_base,
     .help = "the k/v latent; at most hidden_size"},
    {.name = "qk_head_dim",
     .slot = &MlaShape::qk_nope_head_dim,
     .range = kHeads,
     .need = Need::unless_base,
     .help = "q/k head width without the rotary part (HF qk_nope_head_dim)"},
    {.name = "qk_pos_emb_head_dim",
     .slot = &MlaShape::qk_rope_head_dim,
     .range = kHeads,
     .need = Need::unless_base,
     .help = "q/k rotary head width (HF qk_rope_head_dim)"},
    {.name = "v_head_dim",
     .slot = &MlaShape::v_head_dim,
     .range = kHeads,
     .need = Need::unless_base},
});

/// model.dsa, DeepSeek sparse attention over model.mla, named as Megatron-Core's
/// TransformerConfig names them without its dsa_ prefix. Beside an hf_config with DSA each key
/// overrides the file's value.
inline constexpr auto kDsaFields = std::to_array<Field<DsaShape>>({
    {.name = "indexer_n_heads",
     .slot = &DsaShape::index_heads,
     .range = kHeads,
     .need = Need::unless_base,
     .help = "the lightning indexer's heads (HF index_n_heads, Megatron's "
             "--dsa-indexer-n-heads; DeepSeek-V3.2: 64)"},
    {.name = "indexer_head_dim",
     .slot = &DsaShape::index_head_dim,
     .range = kHeads,
     .need = Need::unless_base,
     .help = "the width of an indexer head (HF index_head_dim, Megatron's "
             "--dsa-indexer-head-dim; DeepSeek-V3.2: 128); at least model.mla's "
             "qk_pos_emb_head_dim"},
    {.name = "indexer_topk",
     .slot = &DsaShape::index_topk,
     .range = kTopk,
     .need = Need::unless_base,
     .help = "the keys each query attends to (HF index_topk, Megatron's --dsa-indexer-topk; "
             "DeepSeek-V3.2: 2048); a sequence no longer than this attends densely"},
    {.name = "indexer_loss",
     .slot = &DsaShape::indexer_loss,
     .help = "the indexer trains by its own KL loss over the selected keys, its input "
             "detached (V3.2's sparse training stage; Megatron's --dsa-indexer-loss-coeff > 0 "
             "with --dsa-indexer-use-sparse-loss); false: frozen, no backward (default true)"},
});

inline constexpr auto kMambaFields = std::to_array<Field<MambaShape>>({
    {.name = "num_heads",
     .slot = &MambaShape::num_heads,
     .range = kHeads,
     .need = Need::unless_base,
     .help = "SSM heads (HF mamba_num_heads, Megatron's --mamba-num-heads); d_inner = "
             "num_heads x head_dim"},
    {.name = "head_dim",
     .slot = &MambaShape::head_dim,
     .range = kHeads,
     .help = "HF mamba_head_dim, Megatron's --mamba-head-dim (default 64)"},
    {.name = "state_dim",
     .slot = &MambaShape::state_dim,
     .range = kHeads,
     .help = "HF ssm_state_size, Megatron's --mamba-state-dim (default 128)"},
    {.name = "groups",
     .slot = &MambaShape::groups,
     .range = kHeads,
     .help = "B/C groups (HF n_groups, Megatron's --mamba-num-groups; default 8); divide "
             "num_heads"},
    {.name = "conv_kernel",
     .slot = &MambaShape::conv_kernel,
     .range = kConvKernel,
     .help = "conv1d taps (HF conv_kernel; default 4)"},
    {.name = "chunk_size",
     .slot = &MambaShape::chunk_size,
     .range = kChunk,
     .help = "the SSD scan's chunk (HF chunk_size; default 128)"},
});

inline constexpr auto kGdnFields = std::to_array<Field<GdnShape>>({
    {.name = "key_heads",
     .slot = &GdnShape::key_heads,
     .range = kHeads,
     .need = Need::unless_base,
     .help = "HF linear_num_key_heads"},
    {.name = "key_head_dim",
     .slot = &GdnShape::key_head_dim,
     .range = kHeads,
     .help = "HF linear_key_head_dim (default 128)"},
    {.name = "value_heads",
     .slot = &GdnShape::value_heads,
     .range = kHeads,
     .need = Need::unless_base,
     .help = "HF linear_num_value_heads; a multiple of key_heads"},
    {.name = "value_head_dim",
     .slot = &GdnShape::value_head_dim,
     .range = kHeads,
     .help = "HF linear_value_head_dim (default 128)"},
    {.name = "conv_kernel",
     .slot = &GdnShape::conv_kernel,
     .range = kConvKernel,
     .help = "conv1d taps (HF linear_conv_kernel_dim; default 4)"},
    {.name = "chunk_size",
     .slot = &GdnShape::chunk_size,
     .range = kChunk,
     .help = "the chunked delta rule's chunk (flash-linear-attention: 64)"},
});

/// Pixels: a patch side, a window side.
inline constexpr Range kPixels{.min = 1, .max = 65'536, .unit = "pixels"};
inline constexpr Range kPixels0{.min = 0, .max = 65'536, .unit = "pixels"};
inline constexpr Range kImages{.min = 1, .max = 65'536, .unit = "images"};
inline constexpr Range kImageTokens{.min = 1, .max = 16'777'216, .unit = "tokens"};
inline constexpr Range kSmall{.min = 1, .max = 64};

inline constexpr auto kVisionFields = std::to_array<Field<VisionShape>>({
    {.name = "layers",
     .slot = &VisionShape::layers,
     .range = kLayers,
     .need = Need::unless_base,
     .help = "encoder blocks (HF vision_config.depth)"},
    {.name = "hidden_size",
     .slot = &VisionShape::hidden_size,
     .range = kHidden,
     .need = Need::unless_base,
     .help = "the encoder's width"},
    {.name = "num_heads",
     .slot = &VisionShape::num_heads,
     .range = kHeads,
     .need = Need::unless_base,
     .help = "attention heads; divide hidden_size, and training.tp divides them"},
    {.name = "ffn_hidden_size",
     .slot = &VisionShape::ffn_hidden_size,
     .range = kFfn,
     .need = Need::unless_base,
     .help = "the MLP's intermediate size (HF intermediate_size)"},
    {.name = "gated_mlp",
     .slot = &VisionShape::gated_mlp,
     .help = "SwiGLU MLP (gate, up, down: Qwen2.5-VL; default true); false: fc1, GELU, fc2 "
             "(ViT, CLIP, SigLIP)"},
    {.name = "patch_size",
     .slot = &VisionShape::patch_size,
     .range = kPixels,
     .help = "a patch's side (default 14)"},
    {.name = "temporal_patch",
     .slot = &VisionShape::temporal_patch,
     .range = kSmall,
     .help = "frames a patch spans (HF temporal_patch_size; Qwen2.5-VL 2; default 1)"},
    {.name = "in_channels",
     .slot = &VisionShape::in_channels,
     .range = kSmall,
     .help = "colour channels (default 3)"},
    {.name = "spatial_merge",
     .slot = &VisionShape::spatial_merge,
     .range = kSmall,
     .help = "the projector merges spatial_merge x spatial_merge patches into one LLM token "
             "(HF spatial_merge_size; Qwen2.5-VL 2; default 1)"},
    {.name = "window_size",
     .slot = &VisionShape::window_size,
     .range = kPixels0,
     .help = "window attention: a window's side (Qwen2.5-VL 112 = 8 patches of 14); the "
             "layers not in full_attention_layers attend within their window; 0 (default): "
             "every layer attends to the whole image. A multiple of patch_size x spatial_merge"},
    {.name = "full_attention_layers",
     .help = "with window_size: the encoder layers (0-based) that attend to the whole image "
             "(HF fullatt_block_indexes)"},
    {.name = "projector_ffn",
     .slot = &VisionShape::projector_ffn,
     .range = kFfn0,
     .help = "the projector's fc1 width; 0 (default): spatial_merge^2 x hidden_size, "
             "Qwen2.5-VL's PatchMerger"},
    {.name = "tensor_parallel",
     .slot = &VisionShape::tensor_parallel,
     .help = "training.tp splits the encoder's heads and MLP and the projector's fc1 "
             "(Megatron-Core's layers; default true); false: every tp rank runs the whole "
             "vision model (Megatron-Bridge's HF Qwen2.5-VL tower; an HF qwen2_5_vl config "
             "sets false)"},
    {.name = "images_per_sample",
     .slot = &VisionShape::images_per_sample,
     .range = kImages,
     .need = Need::required,
     .help = "images in each sample"},
    {.name = "image_tokens",
     .slot = &VisionShape::image_tokens,
     .range = kImageTokens,
     .need = Need::required,
     .help = "LLM tokens an image gives after the projector (image_tokens x spatial_merge^2 "
             "patches); images_per_sample x image_tokens of training.seq_length are image "
             "tokens"},
});

inline constexpr auto kOptimizerFields = std::to_array<Field<OptimizerSettings>>({
    {.name = "type", .choices = kOptimizers},
    {.name = "zero_stage",
     .slot = &OptimizerSettings::zero_stage,
     .range = kZeroStage,
     .help = "sharded over dp: 1 optimizer state, 2 also gradients, 3 also parameters "
             "(gathered per layer, as FSDP)"},
    {.name = "master_weights", .slot = &OptimizerSettings::master_weights},
    {.name = "grad_dtype", .help = "gradient buffers", .choices = kGradDtypes},
    {.name = "overlap_grad_reduce",
     .slot = &OptimizerSettings::overlap_grad_reduce,
     .help = "reduce each stage's gradients over dp during the backward"},
    {.name = "overlap_param_gather",
     .slot = &OptimizerSettings::overlap_param_gather,
     .help = "zero_stage 1/2: the post-step all-gather runs under the next first forward; "
             "needs a sharded optimizer (zero_stage >= 1 or fsdp), as Megatron's "
             "--overlap-param-gather"},
    {.name = "offload_fraction",
     .slot = &OptimizerSettings::offload_fraction,
     .range = kShare,
     .help = "the share of each device's optimizer state (fp32 master weights, Adam m and v) "
             "kept and stepped on the host (Megatron's --optimizer-cpu-offload with "
             "--optimizer-offload-fraction); 0: off. Needs the distributed optimizer "
             "(zero_stage >= 1) and a device with a host link (cluster.device.host_link_GBps, "
             "host_memory_GiB, host_adam_Gparams_per_s)"},
});

inline constexpr auto kRecomputeFields = std::to_array<Field<RecomputeSpec>>({
    {.name = "default", .help = "mode of every layer not named below"},
    {.name = "stages", .help = "{stage index: mode}"},
    {.name = "layers", .help = "{layer index: mode}; layers count in model order"},
});

}  // namespace bmpipe::detail

#pragma GCC diagnostic pop
