#pragma once
/// \file
/// The experiment as the user wrote it: plain structs filled from YAML, and the one place
/// where input is checked. Every key carries its unit in its name (memory_GiB,
/// bandwidth_GBps, latency_us, forward_ms, *_bytes). Unknown keys, wrong types, missing
/// or negative values, and contradictions between sections are ConfigErrors that name
/// the file, the line and the key path.

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "experiment/parallel_mesh.hpp"
#include "schedules/registry.hpp"
#include "sim/cost/cost_model.hpp"
#include "sim/cost/hardware.hpp"
#include "sim/cost/model_shape.hpp"
#include "sim/recompute.hpp"
#include "sim/topology.hpp"

namespace bmpipe {

/// Bad input. `line` is 1-based, 0 when no line applies (a command-line override, a file
/// that cannot be opened). All four texts are valid UTF-8: bytes of the input that are
/// not (a path, a key, a value) appear as \xNN, as do control characters.
class ConfigError : public std::runtime_error {
 public:
  ConfigError(std::string file, int line, std::string key, std::string message);
  const std::string& file() const { return file_; }
  int line() const { return line_; }
  const std::string& key() const { return key_; }
  const std::string& message() const { return message_; }

 private:
  std::string file_;
  int line_;
  std::string key_;
  std::string message_;
};

struct DeviceSpec {
  std::string name = "device";
  double memory_GiB = 0.0;
  double reserved_GiB = 0.0;        ///< taken by the framework before any tensor
  double allocator_overhead = 0.0;  ///< HardwareSpec::allocator_overhead
  /// Compute figures for the analytic cost model: from `preset:` with any key overriding
  /// it, or from explicit peak_tflops + hbm_GBps. Empty for a device described only by
  /// its memory (enough for measured layer costs). Its links mirror cluster.intra_node /
  /// inter_node.
  std::optional<HardwareSpec> hardware;
};

/// What a measured layer costs when it runs in one recompute mode other than none.
struct LayerModeCosts {
  double recompute_ms = 0.0;                               ///< extra backward time
  std::int64_t activation_bytes = 0;                       ///< kept from forward to backward
  std::optional<std::int64_t> weight_grad_retained_bytes;  ///< kept until W; none = all
};

/// A run of identical layers with measured costs (per micro-batch).
struct LayerGroup {
  std::string name;
  int count = 1;
  double forward_ms = 0.0;
  double backward_input_ms = 0.0;
  double backward_weight_ms = 0.0;
  double recompute_ms = 0.0;                               ///< extra backward time, if recomputed
  std::int64_t activation_bytes = 0;                       ///< kept from forward to backward
  std::optional<std::int64_t> weight_grad_retained_bytes;  ///< kept until W; none = all of it
  std::int64_t output_bytes = 0;                           ///< sent to the next layer / stage
  std::int64_t param_bytes = 0;                            ///< weights
  std::int64_t grad_bytes = 0;                             ///< gradient buffers
  std::int64_t optimizer_bytes = 0;                        ///< optimizer state (and master weights)
  /// The modes this group can run besides none, from its `recompute` map; the keys above
  /// are the none mode (with recompute_ms, if given, as extra time it always pays).
  /// [Recompute::none] is never set.
  PerMode<std::optional<LayerModeCosts>> recompute;

  /// none always; another mode when the `recompute` map defines it.
  bool has_mode(Recompute mode) const {
    return mode == Recompute::none || recompute[mode].has_value();
  }
  /// The group as it runs in `mode`: that mode's recompute_ms, activation_bytes and
  /// weight_grad_retained_bytes replace the none-mode values (the flat recompute_ms
  /// belongs to none). The mode must exist (has_mode); check_config makes sure of that
  /// for every layer training.recompute names.
  LayerGroup in_mode(Recompute mode) const;
};

struct ModelConfig {
  std::string name = "model";
  /// Measured form: layer groups with their costs. Empty for an analytic model.
  std::vector<LayerGroup> layers;
  /// Analytic form (`preset:`, `hf_config:` or explicit shape keys): the cost model
  /// (sim/cost) turns it into per-layer costs in make_sim_input.
  std::optional<ModelShape> shape;
  bool analytic() const { return shape.has_value(); }
  /// Rows of the layer table the partition counts: the measured layers, or the analytic
  /// model's decoder layers plus a vision model's encoder blocks and projector
  /// (VisionShape::rows).
  int num_layers() const;
};

/// Where recomputation applies, for analytic and measured models alike. A layer's mode is
/// its `layers` entry if any, else its stage's `stages` entry, else `global`. A measured
/// layer can only use the modes its group defines (LayerGroup::has_mode).
struct RecomputeSpec {
  Recompute global = Recompute::none;
  std::map<int, Recompute> stages;  ///< stage index (0 .. pp*vpp-1) -> mode
  /// layer index (0 .. num_layers-1; every layer of every group, in model order) -> mode
  std::map<int, Recompute> layers;
  /// Whether the spec names an offload mode (offload or selective_offload) anywhere
  /// (default, a stage or a layer). Then training.offload_modules move in the offload
  /// layers only, and none and selective layers keep theirs (the per-layer form); else every
  /// none and selective layer moves them (the job-wide form, Megatron-Core's
  /// --offload-modules, as before the modes).
  bool names_offload() const {
    bool any = is_offload_mode(global);
    for (const auto& [index, mode] : stages) any = any || is_offload_mode(mode);
    for (const auto& [index, mode] : layers) any = any || is_offload_mode(mode);
    return any;
  }
  /// The per-layer offload form a planner starts from: offload the default, so that every
  /// layer's row has the offload mode beside none, selective and full, and the planner picks
  /// each layer's (plan --offload auto and search --offload auto both plan it so).
  static RecomputeSpec per_layer_offload() { return {Recompute::offload, {}, {}}; }
};

struct TrainingConfig {
  std::string schedule = "1f1b";
  int pp = 1;
  int vpp = 1;
  int tp = 1;
  /// Mixture-of-experts layers (Megatron-Core's parallel folding): expert parallel and
  /// expert tensor parallel sizes over the tp x dp devices of a stage; the expert data
  /// parallel size is edp = tp x dp / (etp x ep).
  int ep = 1;
  int etp = 1;
  /// Context parallelism (Megatron-LM's --context-parallel-size, CostSettings::cp): the
  /// ranks that split each sequence, placed after tp; cp_comm_type p2p (the ring), a2a
  /// (Ulysses) or a2a+p2p (the two in a hierarchy: cp_hierarchy).
  int cp = 1;
  std::string cp_comm_type = "p2p";
  /// Hierarchical cp (Megatron-LM's --hierarchical-context-parallel-sizes, with cp_comm_type
  /// a2a+p2p): the sizes of the levels, inner first, [all-to-all ranks, ring ranks]; their
  /// product is cp. Empty: not given.
  std::vector<int> cp_hierarchy;
  std::optional<int> dp;  ///< not given: derived as devices / (pp * tp * cp)
  /// The devices the job runs on, the cluster's first ones (Config::devices); not given:
  /// all of the cluster's. The rest stay idle: 64 of an NVL72's 72 GPUs, 1 024 NPUs of three
  /// 384-NPU SuperPoDs.
  std::optional<int> devices;
  int microbatches = 1;
  std::vector<int> partition;  ///< layers per stage; empty = uniform
  /// A Megatron-LM --pipeline-model-parallel-layout (empty: none), e.g. the one a job was
  /// imported with: bmpipe plan's megatron-layout baseline runs it. One that puts the
  /// embedding, MTP layers or the loss on a stage without decoder layers (or MTP layers
  /// before the last stage) is the partition itself, on a layer table with separate ends
  /// (separate_end_layout, layer_table.hpp); otherwise the partition is `partition`.
  std::string megatron_layout;
  /// Duration of an overlapped forward-and-backward pair (DualPipeV's F&B) as a factor of
  /// F + B of its two halves; 1 = no gain from overlapping.
  double overlap_factor = 1.0;
  /// Alternatively, the pair's duration in ms (overrides overlap_factor when given).
  std::optional<double> overlap_ms;
  /// Activation-memory limit per device, in micro-batches of one stage's activations, for
  /// schedules that take one (zb-auto).
  std::optional<int> activation_limit_microbatches;

  // Batch: microbatches = global_batch_size / (micro_batch_size * dp). Either key may be
  // given; both must then agree.
  std::optional<int> seq_length;  ///< tokens per sample; required by the analytic model
  int micro_batch_size = 1;
  std::optional<int> global_batch_size;
  bool microbatches_given = false;  ///< `microbatches` was in the file (or an override)
  // Analytic model only.
  std::string dtype = "bf16";  ///< bf16 or fp16 (2 bytes, tensor-core peak)
  bool sequence_parallel = false;
  /// CostSettings::tp_comm_overlap (Megatron-LM's --tp-comm-overlap); needs
  /// sequence_parallel.
  bool tp_comm_overlap = false;
  /// The layer table gives the embedding, each MTP layer and the loss rows of their own
  /// (layer_table.hpp), so that the planner moves them as layers; `partition` still counts
  /// decoder layers, with the embedding on the first stage and the MTP layers and the loss
  /// on the last. A megatron_layout that needs it sets it too.
  bool separate_ends = false;
  std::string fp8 = "none";            ///< none, hybrid or e4m3 (CostSettings::fp8)
  std::string fp8_recipe = "delayed";  ///< delayed, tensorwise, blockwise, mxfp8, nvfp4 or rowwise
  /// The GEMM weights kept in FP8 (NVFP4: FP4) alone, no bf16 copy beside them, and
  /// gathered so (Megatron-LM's --fp8-param-gather, TransformerConfig.fp8_param;
  /// CostSettings::fp8_param). Needs fp8 and a sharded optimizer (zero_stage >= 1).
  bool fp8_param_gather = false;
  /// eager or fused (CostSettings::kernels); empty: the architecture's own (llama eager,
  /// gpt fused).
  std::string kernels;
  OptimizerSettings optimizer;
  /// How weight gradients reach the buffer; unset: the architecture's default
  /// (CostSettings::grad_accumulation).
  std::optional<GradAccumulation> grad_accumulation;
  // Both forms.
  RecomputeSpec recompute;
  /// Fully sharded data parallel (Megatron-FSDP, torch FSDP2): sets optimizer.zero_stage to
  /// 3 when the file gives none; 2 may be given, 0 and 1 are refused.
  bool fsdp = false;
  /// Hybrid sharding (HSDP): the members of the dp x cp group one copy of the sharded state
  /// spans; the dp x cp / fsdp_shard_group copies replicate it and all-reduce their
  /// gradient shards (Megatron-LM's --num-distributed-optimizer-instances = dp x cp / this;
  /// the experts' edp splits into as many copies). 0: the whole dp x cp group, one copy.
  int fsdp_shard_group = 0;
  /// ZeRO-3: false keeps each layer's gathered parameters from its forward to its backward,
  /// which then gathers nothing (Megatron-LM's --torch-fsdp2-no-reshard-after-forward).
  bool fsdp_reshard_after_forward = true;
  /// Hybrid sharding at zero_stage 3 (fsdp_shard_group): true all-reduces each layer's
  /// reduce-scattered gradient shard across the copies in every micro-batch's backward, as
  /// FSDP2 does unless the trainer calls set_requires_all_reduce(False) (torchtitan does
  /// not); false once an iteration, after the last micro-batch, as Megatron-FSDP does.
  bool fsdp_all_reduce_every_microbatch = false;
  /// Megatron-LM's --overlap-moe-expert-parallel-comm: 1F1B and interleaved pair a
  /// steady-state backward with the next forward, one's computation hiding the other's
  /// all-to-all (schedules/fb_pairing.hpp, sim/fb_pair.hpp). Needs MoE layers and ep > 1.
  bool moe_overlap = false;
  /// alltoall or deepep (CostSettings::moe_dispatcher).
  std::string moe_dispatcher = "alltoall";
  /// CostSettings::moe_capacity_factor: every expert's input dropped beyond and padded to
  /// its capacity (Megatron-LM's --moe-expert-capacity-factor with
  /// --moe-pad-expert-input-to-capacity; MindFormers' capacity_factor with its BatchMatMul
  /// experts). 0: dropless, no padding.
  double moe_capacity_factor = 0.0;
  /// CostSettings::vocab_parallel: the embedding table and the LM head split over tp
  /// (Megatron's vocab-parallel layers). false: both replicated over tp, split over dp only
  /// (MindFormers' parallel_config.vocab_emb_dp).
  bool vocab_parallel = true;
  /// The scopes CUDA graphs capture, comma-separated (attn, mlp, moe, moe_router,
  /// moe_preprocess, mamba, full_iteration; CostSettings::cuda_graphs); empty or "none": no graphs.
  std::string cuda_graphs;
  /// What selective recompute re-runs, Megatron-Core's recompute modules comma-separated
  /// (core_attn, layernorm, mla_up_proj, mlp, moe, moe_act, shared_experts; "none": nothing;
  /// CostSettings::recompute_modules).
  std::string recompute_modules = "core_attn";
  /// Activation offload: Megatron-Core's offload modules comma-separated (attn_norm,
  /// qkv_linear, core_attn, attn_proj, mlp_norm, expert_fc1, moe_act; "none": nothing;
  /// CostSettings::offload_modules), and how many ops ahead of a backward its activations
  /// start coming back (SimInput::offload_lead).
  std::string offload_modules = "none";
  int offload_lead = 1;
  /// Whole-layer activation offload (Megatron-LM's --cpu-offloading-num-layers, Transformer
  /// Engine's CPU offload): the first this many decoder layers' activations go to host
  /// memory in each pass (sim/layer_offload.hpp). 0: none.
  int offload_layers = 0;
  /// BPipe's activation balancing on 1F1B (SimInput::bpipe; Kim et al., ICML 2023).
  bool bpipe = false;

  /// The mesh's sizes as the config states them (ParallelMesh, parallel_mesh.hpp).
  MeshSizes mesh_sizes() const {
    MeshSizes s;
    s.tp = tp, s.cp = cp, s.ep = ep, s.etp = etp, s.pp = pp, s.dp = dp;
    return s;
  }
  /// dp as given, or devices / (pp * tp * cp) (ParallelMesh::data_parallel).
  int data_parallel(int device_count) const {
    return static_cast<int>(ParallelMesh::data_parallel(mesh_sizes(), device_count));
  }
  CpComm cp_comm() const {
    return cp_comm_type == "a2a"       ? CpComm::a2a
           : cp_comm_type == "a2a+p2p" ? CpComm::a2a_p2p
                                       : CpComm::p2p;
  }
  /// The ranks of one all-to-all of the cp exchange (CostSettings::cp_a2a_ranks): cp under
  /// a2a, cp_hierarchy's first level under a2a+p2p, 1 under p2p.
  int cp_a2a_ranks() const {
    const CpComm comm = cp_comm();
    if (comm == CpComm::a2a) return cp;
    return comm == CpComm::a2a_p2p && !cp_hierarchy.empty() ? cp_hierarchy.front() : 1;
  }
  int dtype_bytes() const { return 2; }
  Kernels kernel_set() const { return kernels == "fused" ? Kernels::fused : Kernels::eager; }
  MoeDispatcher dispatcher() const {
    return moe_dispatcher == "deepep" ? MoeDispatcher::deepep : MoeDispatcher::alltoall;
  }
  Fp8 fp8_format() const {
    return fp8 == "hybrid" ? Fp8::hybrid : fp8 == "e4m3" ? Fp8::e4m3 : Fp8::none;
  }
  Fp8Recipe fp8_scaling() const {
    return fp8_recipe == "tensorwise"  ? Fp8Recipe::tensorwise
           : fp8_recipe == "blockwise" ? Fp8Recipe::blockwise
           : fp8_recipe == "mxfp8"     ? Fp8Recipe::mxfp8
           : fp8_recipe == "nvfp4"     ? Fp8Recipe::nvfp4
           : fp8_recipe == "rowwise"   ? Fp8Recipe::rowwise
                                       : Fp8Recipe::delayed;
  }
};

/// How much work a run may ask for, checked before anything is allocated. Measured (README,
/// "Limits"): 33 to 51 bytes and 0.25 to 1.3 us per op by schedule (about 100 bytes with an
/// SVG, which keeps every op; a trace streams), about 100 bytes per link of the device
/// graph, and 1e8 link visits per second when routing.
struct WorkLimits {
  std::int64_t max_ops = 100'000'000;  ///< stages x micro-batches x ops per micro-batch
  int max_devices = 65'536;            ///< nodes x devices_per_node
  /// Links of the device graph: devices_per_node x (devices_per_node - 1) per node, plus
  /// two NIC links per device when there are several nodes.
  std::int64_t max_links = std::int64_t{1} << 23;
  /// Links times routes: the pipeline computes one route per direction per stage
  /// boundary, and each visits every link.
  std::int64_t max_link_visits = std::int64_t{1} << 30;
};

struct Config {
  std::string file;  ///< where it was read from, for messages
  ClusterSpec cluster;
  DeviceSpec device;
  ModelConfig model;
  TrainingConfig training;
  /// 1-based line of every key path that was read ("training.pp" -> 12), so checks made
  /// after parsing can still point at the line.
  std::map<std::string, int> lines;
  /// What check_config allows (Overrides::limits sets it).
  WorkLimits limits;

  /// Throws a ConfigError about `key`, pointing at its line: the key's own, else that of
  /// the nearest enclosing section that was read, else line 1; a key set on the command
  /// line is named as such.
  [[noreturn]] void fail(const std::string& key, const std::string& message) const;
  /// nodes x devices_per_node.
  int cluster_devices() const { return cluster.nodes * cluster.devices_per_node; }
  /// The job's devices: training.devices, else the whole cluster's.
  int devices() const { return training.devices ? *training.devices : cluster_devices(); }
  /// The job's parallel mesh on the cluster's devices and scale-up domain. Read after
  /// check_config: the sizes are taken as they are.
  ParallelMesh mesh() const {
    return ParallelMesh(training.mesh_sizes(), devices(), cluster.domain());
  }
};

/// Values given on the command line, which win over the file.
struct Overrides {
  std::optional<std::string> schedule;
  std::optional<int> pp;
  std::optional<int> vpp;
  std::optional<int> microbatches;
  /// Replaces Config::limits (--max-ops, --max-devices).
  std::optional<WorkLimits> limits;
  /// Key paths set on the command line (--set training.sequence_parallel=true, and the
  /// knobs --tp, --dp, --micro-batch-size, --global-batch-size, --seq-length, --recompute,
  /// --partition), as YAML values ("true", "4", "[9, 9, 8, 6]"). load_config and
  /// parse_config write them into the document before reading it, so they are checked like
  /// the file's own values, and errors name them as coming from the command line.
  /// (apply_overrides, on a Config already read, ignores them.)
  std::vector<std::pair<std::string, std::string>> set;
};

/// Reads a YAML file, applies `overrides`, derives the batch and runs check_config once, so
/// that a file valid only with its overrides (pp: 4 and 2 layers, run with --pp 2) loads.
/// A file that cannot be read, or is larger than 16 MiB, is a ConfigError too.
Config load_config(const std::string& path, const Overrides& overrides = {});
/// Same, from text; `name` stands for the file in messages.
Config parse_config(const std::string& yaml_text, const std::string& name,
                    const Overrides& overrides = {});

/// Derives training.microbatches from global_batch_size (or checks that the two agree).
/// load_config and apply_overrides call it; call it after changing pp, tp, dp or the batch
/// of a Config by hand.
void resolve_batch(Config& config);

/// Applies overrides to a Config read earlier and re-runs the cross-field checks (the
/// compare command re-applies a schedule and vpp per schedule). An override that makes
/// the experiment impossible names the option, e.g. "--pp".
void apply_overrides(Config& config, const Overrides& overrides);

/// The cross-field checks (pp divides the devices, the partition adds up, the schedule
/// exists, every layer's recompute mode exists, ...), the work limits (check_work_bounds
/// with config.limits), and that no time or byte total of the run can overflow int64.
/// load_config runs them; call again after changing a Config by hand.
void check_config(const Config& config);

/// The work a run of `config` asks for against `limits`: devices, ops (stages x
/// micro-batches x 3, an upper bound for every schedule), links and link visits. The
/// message estimates the memory or time and names the option that raises the limit.
void check_work_bounds(const Config& config, const WorkLimits& limits);

/// An upper bound on the ops one iteration of `config` runs.
std::int64_t op_bound(const Config& config);

/// "unknown schedule 'x' (did you mean 'y'?) (known: a, b, c)": the one message for a
/// schedule name that is not built in, wherever it was given (a long name is cut at 60
/// characters).
std::string unknown_schedule_message(std::string_view name);

/// The built-in schedule `name`. Throws ConfigError as config.fail(key, ...) does (the
/// key's line, or "(from the command line)") with unknown_schedule_message.
const ScheduleInfo& require_schedule(const Config& config, std::string_view name,
                                     const std::string& key);

}  // namespace bmpipe
