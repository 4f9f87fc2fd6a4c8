#pragma once
/// \file
/// The layer table: what every layer of the model costs, for one micro-batch on one device,
/// in every recompute mode it can run, in the engine's units (Time in ns, bytes). It is
/// computed once per experiment (layer_costs), from measured layer groups or from the
/// analytic cost model, and every plan is then a re-summation of its rows (assemble in
/// experiment.hpp). Nothing here depends on the partition or on the schedule.
///
/// Analytic models fold the embedding into the first layer and the final norm, LM head and
/// loss into the last: those always sit on the first and the last stage, whatever the
/// partition, so folding them is exact. A config whose training.megatron_layout puts one of
/// them, or an MTP layer, on a stage without decoder layers (Megatron-LM's DeepSeek-V3
/// layout "Et*3|(tt|)*29,m|L") gets a table with separate ends instead: rows E, the
/// decoder layers, the MTP layers, L (separate_end_layout); so does a config with
/// training.separate_ends (has_separate_ends).

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "experiment/config.hpp"
#include "experiment/layer_layout.hpp"
#include "sim/recompute.hpp"
#include "sim/time.hpp"

namespace bmpipe {

/// What one layer costs in one recompute mode.
struct LayerModeCost {
  Time recompute = 0;                 ///< extra time every backward of the layer spends
  std::int64_t activation_bytes = 0;  ///< kept from the start of F until the backward
  /// Of those, what a split backward keeps until W; not given: all of them.
  std::optional<std::int64_t> weight_grad_retained_bytes;
  /// Of activation_bytes, what goes to host memory between F and the backward
  /// (training.offload_modules; LayerCost::offload_bytes).
  std::int64_t offload_bytes = 0;
  /// The offload mode: one copy of offload_bytes on the device's host-link share, what the
  /// planner prices the mode at (planner/stage_options.hpp); the engine times a stage's
  /// copies from their summed bytes (assemble). 0 in the other modes.
  Time offload_copy = 0;
};

/// What a row of the table is. Folded analytic tables and measured ones have decoder rows
/// only (a measured embedding or head group is told by its name: decoder_layers), and a
/// vision-language model's vision rows before them (its encoder blocks, the first with the
/// patch embedding folded in, and its projector).
enum class LayerKind { decoder, embedding, mtp, head, vision };

struct LayerRow {
  std::string name;  ///< "decoder.5", or the measured group's name
  LayerKind kind = LayerKind::decoder;
  int group = 0;  ///< index of the measured layer group (0 for analytic models)
  Time forward = 0;
  Time backward_input = 0;
  Time backward_weight = 0;
  std::int64_t output_bytes = 0;  ///< sent to the next layer (and stage)
  std::int64_t static_bytes = 0;  ///< weights, gradients and optimizer state on one device
  std::int64_t param_count = 0;   ///< parameters on one device (analytic models; else 0)
  /// Of param_count, routed-expert weights: reduced and sharded over edp, not dp.
  std::int64_t expert_param_count = 0;
  /// Bytes of the param_count parameters as ZeRO-1/2's all-gather after the step moves
  /// them (param_gather_bytes, ParamGatherer::distributed_optimizer); analytic models.
  double gather_bytes = 0;
  /// ZeRO-3: what a stage op adds when this layer is the first it runs in forward (the
  /// stage's first layer) and in backward (its last): LayerCost::first_forward_s etc.
  Time first_forward = 0;
  Time first_backward_input = 0;
  Time first_backward_weight = 0;
  /// The modes the layer can run; [Recompute::none] is always set.
  PerMode<std::optional<LayerModeCost>> modes;
  /// Analytic models: forward FLOPs of the decoder layer (the embedding and head are in
  /// LayerTable::fixed_forward_flops) and the FLOPs each mode adds.
  double forward_flops = 0;
  PerMode<double> recompute_flops;
  /// Analytic layers with all-to-all (mixture-of-experts layers at ep > 1, and the layers
  /// an MTP module with them is folded into): the forward and the full backward (input and
  /// weight gradients, no recompute) as computation and a2a parts in turn, the backward in
  /// the order it runs (SimInput::stage_parts, sim/fb_pair.hpp). They add up to forward and
  /// to backward_input + backward_weight. Empty: one computation piece.
  std::vector<Time> forward_parts;
  std::vector<Time> backward_parts;

  bool has(Recompute r) const { return modes[r].has_value(); }
};

struct LayerTable {
  std::vector<LayerRow> layers;  ///< in model order
  /// Tied embeddings: what the last stage adds for its own copy of the output matrix when
  /// the model spans more than one stage (Megatron-LM keeps the copies in sync with an
  /// all-reduce). Zero otherwise.
  std::int64_t head_copy_static_bytes = 0;
  std::int64_t head_copy_params = 0;
  /// Separate ends: what a rank holding MTP layers adds for the embedding matrix it looks
  /// the shifted tokens up in, when it does not hold the embedding row, and for the output
  /// matrix, when it does not hold the head row (untied models; tied ones share the
  /// embedding's). Megatron-LM builds both on an MTP stage (GPTModel.__init__: "if
  /// self.pre_process or self.mtp_process", at d98e8a64ddf3); a rank holding the main
  /// model's shares them, as DeepSeek-V3's DualPipe placement does (report, sec. 3.2.2).
  std::int64_t mtp_embedding_copy_static_bytes = 0;
  std::int64_t mtp_embedding_copy_params = 0;
  std::int64_t mtp_head_copy_static_bytes = 0;
  std::int64_t mtp_head_copy_params = 0;
  /// Analytic models: forward FLOPs of the embedding plus the head (and the MTP modules),
  /// per micro-batch.
  double fixed_forward_flops = 0;
  /// Some layer has forward_parts: the engine can time F&B pairs from them.
  bool all_to_all = false;
  /// Rows E, decoders, MTP layers, L (has_separate_ends); false: the ends are folded.
  bool separate_ends = false;

  int size() const { return static_cast<int>(layers.size()); }
  /// Some row can run `mode`.
  bool has_mode(Recompute mode) const {
    return std::any_of(layers.begin(), layers.end(),
                       [mode](const LayerRow& r) { return r.has(mode); });
  }
  /// Some row can run an offload mode (the per-layer form, RecomputeSpec::names_offload).
  bool has_offload_mode() const {
    return std::any_of(kOffloadModes.begin(), kOffloadModes.end(),
                       [this](Recompute m) { return has_mode(m); });
  }
  /// The modes a plan on this table can name: kAllRecompute, and the offload modes some row
  /// has (the per-layer form). What tables and documents list, so a job without them reads
  /// as before.
  std::vector<Recompute> modes() const {
    std::vector<Recompute> out(kAllRecompute.begin(), kAllRecompute.end());
    for (Recompute m : kOffloadModes)
      if (has_mode(m)) out.push_back(m);
    return out;
  }
};

/// The cost model's view of an analytic config: its inputs and the kinds of layer.
struct AnalyticCosts {
  HardwareSpec hardware;
  CostSettings settings;
  OptimizerSettings optimizer;
  int dp = 1;
  /// Context parallel size: the dense parameters' gradients reduce (and ZeRO-1 state
  /// shards) over dp x cp, Megatron's data-parallel group with context parallelism.
  int cp = 1;
  int dense_group() const { return dp * cp; }
  /// Expert data parallel size, tp x cp x dp / (etp x ep): the group the experts' gradients
  /// reduce over and their optimizer state shards over (1 for a dense model).
  int edp = 1;
  /// Hybrid sharding (TrainingConfig::fsdp_shard_group): the copies of the sharded state,
  /// dp x cp / fsdp_shard_group (1: none). The state shards over dense_shard() members of
  /// dp x cp and edp_shard() of edp, and the copies all-reduce their gradient shards.
  int shard_copies = 1;
  int dense_shard() const { return dense_group() / shard_copies; }
  int edp_shard() const { return std::max(edp / shard_copies, 1); }
  LayerCost decoder;
  /// Mixture-of-experts models: the layer with the MoE MLP (ModelShape::is_moe_layer picks
  /// it); the others are `decoder`.
  std::optional<LayerCost> moe_decoder;
  /// Models with sliding-window layers (ModelShape::is_windowed_layer): the windowed
  /// versions of `decoder` and `moe_decoder` ("decoder.swa", "moe_decoder.swa"), each set
  /// when the model has such a layer.
  std::optional<LayerCost> windowed_decoder, windowed_moe_decoder;
  /// Hybrid models (ModelShape::hybrid_pattern): the layer of each kind the pattern has,
  /// indexed by hybrid_slot(kind) (kHybridSymbols' order); `decoder` is then unused.
  std::array<std::optional<LayerCost>, kHybridKinds> hybrid;
  static int hybrid_slot(HybridKind kind) {
    return static_cast<int>(std::string_view(kHybridSymbols).find(static_cast<char>(kind)));
  }
  /// Models with multi-token prediction (ModelShape::mtp_layers): one module, run
  /// mtp_layers times on the last stage before the head (folded into the last layer).
  std::optional<LayerCost> mtp;
  /// The depths after the first when they share one block's weights (ModelShape::
  /// mtp_shared): `mtp`'s time and activations without parameters of their own (the first
  /// depth holds them; their gradients accumulate into the same buffer).
  std::optional<LayerCost> mtp_repeat;
  /// The module run at MTP depth `k` (0-based).
  const LayerCost& mtp_depth(int k) const { return k > 0 && mtp_repeat ? *mtp_repeat : *mtp; }
  /// A vision-language model (ModelShape::vision): its encoder blocks, attending to the
  /// whole image (`vision`) and within windows (`vision_window`), each set when some block
  /// does; the patch embedding (folded into the first block's row); the projector.
  std::optional<LayerCost> vision, vision_window, patch_embed, projector;
  LayerCost embedding;          ///< on the first stage
  LayerCost head;               ///< final norm, LM head and loss on the last stage, own weights
  LayerCost head_single_stage;  ///< the same when one stage holds the whole model (tied: shared)

  /// The model's kinds of decoder layer with how many layers of each there are, a kind with
  /// none left out: dense, MoE, windowed dense, windowed MoE decoder layers, or a hybrid
  /// model's M, *, -, E layers; a vision model's patch embedding, encoder blocks (full,
  /// windowed) and projector before them.
  std::vector<std::pair<const LayerCost*, int>> layer_kinds(const ModelShape& m) const;
  /// The cost of decoder layer `i` (0-based) of `m`: its kind's.
  const LayerCost& layer(const ModelShape& m, int i) const;

  /// The head as it runs when the model spans `num_stages` stages.
  const LayerCost& head_for(int num_stages) const {
    return num_stages == 1 ? head_single_stage : head;
  }
};

/// The cost model's settings for `config`'s training and cluster (the ZeRO-3 sharding
/// aside, which needs dp: analytic_costs adds it).
CostSettings cost_settings(const Config& config);

/// The config's training.megatron_layout, parsed, when it must run on a table with separate
/// ends (folded_layout_mismatch is not empty), else empty. Throws ConfigError naming
/// training.megatron_layout when it does not parse.
std::vector<LayoutStage> separate_end_layout(const Config& config);

/// Whether `config` runs on a table with separate ends: an analytic model with
/// training.separate_ends, or with a training.megatron_layout that needs it.
bool has_separate_ends(const Config& config);

/// Runs the cost model for an analytic config. Throws ConfigError when the model is not
/// analytic.
AnalyticCosts analytic_costs(const Config& config);

/// The table for `config`: measured groups expanded one row per layer, or the analytic
/// model's layers. `analytic` must be analytic_costs(config) for an analytic model.
LayerTable layer_costs(const Config& config, const AnalyticCosts* analytic);

}  // namespace bmpipe
