#pragma once
/// \file
/// What an export needs to know of a plan, and what both exports check of it
/// (frameworks/megatron/export.hpp, frameworks/mindformers/export.hpp). The planner builds
/// one from a plan (planner.hpp, export_layout).

#include <optional>
#include <string>
#include <vector>

#include "sim/cost/model_shape.hpp"
#include "sim/recompute.hpp"

namespace bmpipe {

/// What an export needs to know of a plan, counted in decoder (transformer) layers.
struct ExportLayout {
  int pp = 1;   ///< pipeline ranks
  int vpp = 1;  ///< stages (chunks) per rank
  /// Rank of each stage, in stage order (forward order): s % pp for one stage per rank and
  /// interleaved, the V (r, then 2pp-1-r) for V schedules.
  std::vector<int> stage_rank;
  /// Decoder layers of each stage, in stage order; they add up to recompute.size().
  std::vector<int> partition;
  /// The mode of every decoder layer, in model order.
  std::vector<Recompute> recompute;
  /// The embedding runs on the first stage and the loss (LM head) on the last, as they do
  /// in bmpipe's cost model and in both frameworks by default.
  bool embedding_on_first = true;
  bool loss_on_last = true;
  /// Multi-token prediction modules (model.mtp_layers), run on the last stage before the
  /// loss, as bmpipe's cost model runs them; a Megatron-LM layout lists them there as 'm'.
  int mtp_layers = 0;
  /// The MTP layers of each stage, in stage order, when a table with separate ends placed
  /// them (experiment/layer_table.hpp); empty: all mtp_layers on the last stage.
  std::vector<int> mtp_per_stage;
};

/// The job around a plan, which a complete export states beside it (tp, dp, the batch).
/// Its sizes are the config's parallel mesh (experiment/parallel_mesh.hpp; api/export.cpp
/// fills them from ParallelMesh).
struct ExportJob {
  int tp = 1;
  /// Data-parallel replicas, ParallelMesh::dp: devices / (tp * cp * pp), context
  /// parallelism taking its ranks out of what would be dp.
  int dp = 1;
  int micro_batch_size = 1;  ///< samples per micro-batch
  int microbatches = 1;      ///< micro-batches per iteration and pipeline
  bool sequence_parallel = false;
  bool tp_comm_overlap = false;  ///< training.tp_comm_overlap: --tp-comm-overlap
  int devices = 1;               ///< ParallelMesh::devices: pp * tp * cp * dp
  /// An analytic model with experts, latent attention or MTP modules, whose settings the
  /// export states (a dense model's shape is the script's own and is not restated).
  std::optional<ModelShape> shape;
  int ep = 1, etp = 1;  ///< expert (tensor) parallel sizes
  /// training.optimizer.zero_stage and overlap_param_gather: stages 2 and 3 are written as
  /// Megatron-FSDP's flags; stage 1 (the distributed optimizer) is left to the script.
  int zero_stage = 0;
  bool overlap_param_gather = false;
  /// training.fsdp_shard_group as Megatron-LM's --num-distributed-optimizer-instances: the
  /// dp x cp ranks over the shard group (1: one copy, nothing written).
  int shard_copies = 1;
  /// training.fsdp_reshard_after_forward false (zero_stage 3): torch FSDP2 with
  /// --torch-fsdp2-no-reshard-after-forward, the only implementation Megatron-LM gives it.
  bool reshard_after_forward = true;
  /// training.optimizer.offload_fraction: --optimizer-cpu-offload with
  /// --optimizer-offload-fraction (and the precision-aware optimizer Megatron asserts) when
  /// above 0.
  double offload_fraction = 0.0;
  /// training.optimizer.overlap_grad_reduce: --overlap-grad-reduce (Megatron-LM's default
  /// is off; --overlap-param-gather needs it).
  bool overlap_grad_reduce = false;
  bool moe_overlap = false;  ///< training.moe_overlap: --overlap-moe-expert-parallel-comm
  /// training.moe_dispatcher deepep: the flex dispatcher with the deepep backend.
  bool deepep = false;
  double moe_capacity_factor = 0.0;  ///< training.moe_capacity_factor (0: dropless)
  bool vocab_parallel = true;        ///< training.vocab_parallel
  /// Context parallelism and FP8 (training.cp, cp_comm_type, fp8, fp8_recipe); the export
  /// states them when they are not the defaults (cp 1, no FP8).
  int cp = 1;
  std::string cp_comm_type = "p2p", fp8 = "none", fp8_recipe = "delayed";
  /// training.cp_hierarchy (cp_comm_type a2a+p2p), inner first.
  std::vector<int> cp_hierarchy;
  bool fp8_param_gather = false;  ///< training.fp8_param_gather
  /// training.cuda_graphs as the config gives it (a comma list of scopes; empty or "none":
  /// no CUDA graph).
  std::string cuda_graphs;
  /// training.recompute_modules as the config gives it (what selective recompute re-runs).
  std::string recompute_modules = "core_attn";
  /// training.offload_modules and offload_lead (activation offload; "none": off).
  std::string offload_modules = "none";
  int offload_lead = 1;
  /// training.offload_layers: --cpu-offloading-num-layers (whole-layer offload; 0: off).
  int offload_layers = 0;
  /// training.seq_length, for a text that states it (torchtitan's seq_len); 0 when unknown.
  int seq_length = 0;
  /// training.kernels fused: torchtitan states it as compile.
  bool fused_kernels = false;
  /// Samples per iteration: micro-batch size x dp x micro-batches.
  int global_batch_size() const { return micro_batch_size * dp * microbatches; }
};

/// pp * vpp.
int export_stage_count(const ExportLayout& l);

/// Throws std::invalid_argument ("export: ...") for a layout whose fields disagree: pp or
/// vpp below 1, vpp > 1 without pipeline ranks, stage lists of the wrong length, a rank not
/// holding vpp stages, a negative stage, or a partition that does not add up to the modes.
void check_export_layout(const ExportLayout& l);

/// Why no framework's text can state `l`, a layout built from a valid config (planner's
/// export_layout), said against the config key whose value causes it; empty `key` when it
/// can. The layouts check_export_layout refuses that a config can give are exactly these, so
/// an export checks this first and refuses with ConfigError (exit 2), never a bug report:
/// virtual stages on a single pipeline rank (a V schedule at pp 1), a model with no decoder
/// layer (a measured model of an embedding and a head only).
struct ExportRefusal {
  std::string key;      ///< "training.schedule", "model.layers"
  std::string message;  ///< what is wrong and what to do instead
};
ExportRefusal export_layout_refusal(const ExportLayout& l, const std::string& framework);

/// Stage s runs on rank s mod pp: one stage per rank, or Megatron-style interleaving.
bool interleaved_placement(const ExportLayout& l);

/// Stage indices as a note lists them: "1, 2 and 3".
std::string stages_in_words(const std::vector<int>& stages);

}  // namespace bmpipe
