#pragma once
/// \file
/// From a checked Config to what the engine runs, through one narrow door in three steps:
///
///   layer_costs(config)        the layer table: every layer's costs in every recompute
///                              mode (layer_table.hpp). The cost model runs once.
///   prepare(config)            an immutable Experiment: the config, the device graph, the
///                              layer table, where each pipeline rank runs, and what its
///                              end-of-iteration work depends on. Built once, shared by
///                              threads (the planner evaluates plans on all cores).
///   assemble(e, plan, sched)   the engine's SimInput for one Plan (layers per stage and a
///                              recompute mode per layer) under one schedule: a
///                              re-summation of table rows, nothing else.
///
/// Every command is parse -> prepare -> run -> print: simulate, compare, cost, plan and
/// search all go through here, so a candidate plan costs one assemble plus one simulate().
///
/// Placement follows Megatron-LM: tp is innermost inside a node, then cp, dp, then pp. The
/// simulated pipeline is the one with dp rank 0 and tp rank 0, so pipeline rank r runs on
/// physical device r * tp * cp * dp, and its transfers cross the links that device really has.

#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "experiment/config.hpp"
#include "experiment/layer_table.hpp"
#include "experiment/write_config.hpp"
#include "schedules/registry.hpp"
#include "sim/compiled_schedule.hpp"
#include "sim/run_info.hpp"
#include "sim/simulate.hpp"
#include "sim/topology.hpp"

namespace bmpipe {

/// One way to run the model: how many layers each stage holds and how every layer treats
/// its activations. Stages are the schedule's (pp x chunks), in stage order.
struct Plan {
  std::vector<int> partition;        ///< layers per stage
  std::vector<Recompute> recompute;  ///< mode of every layer, in model order
  friend bool operator==(const Plan&, const Plan&) = default;
};

struct Experiment {
  Config config;
  std::shared_ptr<const Topology> topology;
  LayerTable layers;
  /// The cost model's layers; set for analytic models only.
  std::optional<AnalyticCosts> analytic;
  std::vector<int> rank_device;  ///< physical device of each pipeline rank
  /// Per device, before any tensor: device.reserved_GiB, plus under ZeRO-3 the gathered
  /// working set (sharded_working_bytes).
  std::int64_t reserved_bytes = 0;
  /// ZeRO-3 / FSDP: the full-size parameters of the layer in use and of the next one,
  /// prefetched: 2 x the largest unit's (decoder layer, embedding, head, MTP module)
  /// parameters x dtype bytes. 0 otherwise.
  std::int64_t sharded_working_bytes = 0;
  std::int64_t capacity_bytes = 0;  ///< per device
  /// cluster.device.allocator_overhead: the caching allocator reserves 1 + this times the
  /// tensors' peak (all but reserved_bytes - sharded_working_bytes, which sits outside it;
  /// SimInput::allocator_overhead).
  double allocator_overhead = 0.0;
  /// Activation offload (training.offload_modules): the host memory a device may fill with
  /// offloaded activations, its share of the host less its offloaded optimizer state
  /// (SimInput::host_capacity_bytes); 0 when nothing is offloaded.
  std::int64_t host_capacity_bytes = 0;

  int num_layers() const { return layers.size(); }
  int pp() const { return config.training.pp; }
};

/// Builds the experiment of a checked config (load_config, apply_overrides). Throws
/// ConfigError when the cost model refuses the model.
std::shared_ptr<const Experiment> prepare(const Config& config);
/// The same on `topology`, a Topology of config.cluster shared with other experiments of
/// that cluster (bmpipe search's layouts): its routes are computed once for all of them.
/// nullptr: a topology of its own, as above.
std::shared_ptr<const Experiment> prepare(const Config& config,
                                          std::shared_ptr<const Topology> topology);

/// `layers` split over `stages` as evenly as possible, the remainder going to the earliest
/// stages: Megatron-LM's split, bmpipe's default, and the planner's baselines' start.
/// Precondition: 0 < stages.
std::vector<int> uniform_partition(int layers, int stages);

/// Layer counts per stage: the config's partition, or uniform_partition. Throws ConfigError when
/// the partition does not match `num_stages` or the layers cannot fill them.
std::vector<int> stage_layer_counts(const Config& config, int num_stages);

/// The recompute mode the config gives decoder layer `layer`, which sits in stage `stage`:
/// its `layers` entry, else its stage's `stages` entry, else the default.
Recompute recompute_mode(const Config& config, int stage, int layer);

/// The plan the config describes for a schedule of `num_stages` stages. Throws ConfigError
/// as stage_layer_counts does, and when a layer is asked for a mode it cannot run.
Plan config_plan(const Experiment& e, int num_stages);

/// Sets edits.partition and edits.recompute to how a config of `config`'s model states
/// `plan` (a plan of prepare(config)). Folded tables: the plan's own. Separate ends: the
/// decoder layers per stage and their modes, then the MTP layers' modes (recompute keys
/// num_layers.. name MTP layers there); and, when the plan puts the embedding, an MTP layer
/// or the loss on a stage without decoder layers, or the MTP layers before the last stage,
/// edits.megatron_layout instead of a partition, else edits.separate_ends.
void set_plan_keys(ConfigEdits& edits, const Config& config, const Plan& plan);

/// Why `plan` cannot run on `e` with `num_stages` stages (sizes, sums, unknown modes), or
/// an empty string.
std::string check_plan(const Experiment& e, const Plan& plan, int num_stages);

/// The engine input for `plan` under `schedule` (its stages and their ranks). Precondition:
/// check_plan is empty (throws std::invalid_argument otherwise). `out` keeps its capacity,
/// so a caller that reuses it assembles without allocating. The SimInput points at
/// e.topology: `e` must outlive it.
void assemble(const Experiment& e, const Plan& plan, const Schedule& schedule, SimInput& out);
SimInput assemble(const Experiment& e, const Plan& plan, const Schedule& schedule);

/// How run() runs a plan beyond the plan and the schedule.
struct RunOptions {
  /// Every rank's memory limit in bytes (a planner's limit); none: the device's capacity.
  std::optional<std::int64_t> capacity_bytes;
  Observer* observer = nullptr;  ///< told every event (selects the ordered engine)
};

/// "Run this plan": assemble + simulate `plan` under `schedule` on `e`. The one path every
/// command, the planner's final runs and the exports take to a result.
SimResult run(const Experiment& e, const Plan& plan, const Schedule& schedule,
              const RunOptions& options = {});
/// The same on `compiled` (a schedule compiled and validated once, as the planner's Space
/// keeps it), for callers that run many plans under one order.
SimResult run(const Experiment& e, const Plan& plan, const CompiledSchedule& compiled,
              const RunOptions& options = {});

/// What a plan puts on each stage, for tables, traces and exports.
struct StageInfo {
  int first_layer = 0;
  int num_layers = 0;
  PerMode<int> modes;             ///< layers per recompute mode
  std::int64_t static_bytes = 0;  ///< weights, gradients, optimizer state (no reserve)
  /// Parameters on one device (analytic models; 0 for measured ones), the tied head's copy
  /// included, and of them the routed experts' (sharded over edp, not dp).
  std::int64_t params = 0, expert_params = 0;
};
std::vector<StageInfo> stage_info(const Experiment& e, const Plan& plan);

/// Per stage: the mode's name ("none", "selective", "full", "offload", "selective_offload")
/// when all its layers agree, else "mixed".
std::vector<std::string> stage_recompute_labels(const std::vector<StageInfo>& stages);
/// Per stage: its layers per mode, e.g. "none 2, full 1" (modes without layers left out).
std::vector<std::string> stage_recompute_counts(const std::vector<StageInfo>& stages);

/// The end of an iteration of an analytic model, in two parts (assemble builds both):
///
/// The dp reduction of `params` gradients on pipeline rank `rank` (all-reduce, or ZeRO-1's
/// reduce-scatter, over the links the dp group crosses), 0 when dp is 1 or the model is
/// measured: one bucket of SimInput::grad_buckets, which the engine runs on the rank's
/// communication stream. With training.optimizer.overlap_grad_reduce a stage's gradients
/// are several buckets ready part-way through its last backward; without, a rank's
/// gradients are one bucket that starts after its last pipeline op.
/// Of `params`, `expert_params` are routed experts' (mixture-of-experts models): they
/// reduce over the expert data-parallel group (AnalyticCosts::edp) instead.
Time stage_grad_reduce_time(const Experiment& e, int rank, std::int64_t params,
                            std::int64_t expert_params = 0);

/// Whether those reductions run as buckets during the last backward:
/// training.optimizer.overlap_grad_reduce, or ZeRO-3, whatever that flag says. Megatron-FSDP
/// at ZeRO-3 reduces every FSDP unit's gradients as its backward ends, on the last
/// micro-batch across the copies too (hybrid sharding), on streams of their own
/// (NVIDIA/Megatron-LM d98e8a64, megatron/core/distributed/fsdp/src/megatron_fsdp/
/// megatron_fsdp.py, _process_post_backward_gradients: grad_reduce_every_bprop for
/// optim_grads_params, outer_fsdp_group_grad_reduce on is_last_microbatch;
/// param_and_grad_buffer.py, _bucket_group_gradient_reduce: the outer-DP all-reduce on
/// outer_fsdp_group_grad_reduce_stream after the reduce-scatter; synchronize_gradient_reduce
/// refuses ZeRO-3 without overlap_grad_reduce). assemble and the planner's layout bound
/// both ask here.
bool grad_reduce_overlapped(const OptimizerSettings& optimizer);

/// What follows rank `rank`'s reductions, holding `params` parameters: the Adam step and,
/// with ZeRO-1 or ZeRO-2, the all-gather of the updated parameters. Under
/// training.optimizer.overlap_param_gather (Megatron-LM's --overlap-param-gather) that
/// all-gather runs in the next iteration's forward, waited on layer by layer: it is taken
/// as hidden behind the rank's first forward op, `first_forward` long, and only what
/// exceeds it is left in the tail (the default hides it all: a lower bound). ZeRO-3 has
/// neither: its layers gather and reduce-scatter inside their forward and backward.
/// SimInput::tail_time. 0 for measured models.
/// `expert_params` of them shard over edp under ZeRO-1 (and gather over it).
/// `gather_bytes`: what the all-gather moves for the `params` (the rows' LayerRow::gather_bytes
/// and the copies' bf16 bytes: FP8 weights in their own bytes under fp8_param_gather);
/// unset, params x dtype_bytes.
Time optimizer_tail_time(const Experiment& e, int rank, std::int64_t params,
                         std::int64_t expert_params = 0,
                         Time first_forward = std::numeric_limits<Time>::max(),
                         std::optional<double> gather_bytes = std::nullopt);

/// The tied embedding's gradient all-reduce between pipeline ranks `rank_a` and `rank_b`
/// (the first and the last stage's): vocab x hidden / tp parameters of gradient dtype over
/// the link between their devices. 0 unless the model is analytic with tied embeddings.
Time tied_embedding_reduce_time(const Experiment& e, int rank_a, int rank_b);

/// Builds the schedule `name` (a built-in) with `vpp` chunks where it takes them, for the
/// plan's costs where the schedule plans with costs (the config's plan when `plan` is
/// null). Throws ConfigError naming training.schedule for parameters the schedule refuses.
/// `on_candidate`, when given, is called after each candidate a ranking generator
/// (zb-auto, zb-v) simulates, with the count so far: a progress hook for long generations.
Schedule make_schedule(const Experiment& e, std::string_view name, int vpp,
                       const Plan* plan = nullptr,
                       const std::function<void(int)>& on_candidate = {});
/// The schedule the config names.
Schedule make_schedule(const Experiment& e);

/// What the summary needs beyond the result: schedule, sizes (vpp from the schedule), and
/// for an analytic model tokens and FLOPs per iteration (tokens_per_s, mfu,
/// tflops_per_device).
RunInfo make_run_info(const Experiment& e, const Plan& plan, const Schedule& schedule);

}  // namespace bmpipe
