#pragma once
/// \file
/// The exact recompute step of the planner.
///
/// Layers of one type inside one stage are interchangeable: which of them recompute
/// changes neither the stage's times nor its memory, only how many of each type run in each
/// mode. So a stage's choices are the mode counts per layer type, and each choice costs an
/// extra backward time (recompute) and keeps some activation bytes (A, and R until W).
/// Only choices that no other beats in all three are kept (StageOptions).
///
/// For a rank, time never decreases when a stage's backward gets longer (with the op order
/// fixed, start times are max-plus expressions of durations), and memory depends only on
/// the order (memory_model.hpp). So with one stage per rank the fastest plan for a fixed
/// partition takes, on every rank, the option with the least recompute time that fits: a
/// small knapsack, solved exactly here. With several stages per rank the answer is a small
/// Pareto set of per-stage recompute times, and the search chooses among them.
///
/// The offload layer modes (a table with the per-layer form) are a fourth and a fifth
/// choice per layer: offload keeps A as none does, selective_offload A and the recompute time
/// as selective does, and each takes its offload bytes O off the device for all but
/// RankMemory::offload_resident micro-batches. Their time cost depends on what
/// the copies overlap, which no per-stage sum knows, so the step prices it: both copies of
/// O on the device's host-link share, none hidden (StageOption::copy), and minimises
/// recompute + copy (StageOption::cost) in place of recompute. What that guarantees: for a
/// fixed partition, with one stage per rank, every rank takes the option of least
/// recompute + price that fits the memory model, exactly (the same knapsack; the price is
/// a sum over layers, so the prefix construction stays exact for it, and the pruning keeps
/// every option no other beats in price, A - O, A and R, what a moment's bytes weigh); with
/// several stages per rank, the Pareto set of per-stage prices. It does not guarantee the
/// least simulated time: a copy the schedule hides costs less than its price, one that
/// queues behind others more. Every plan is simulated, and `plan --offload auto` keeps
/// the fastest of the recompute-only, offload-only and joint plans (api::run_plan), so the
/// plan it returns is never slower than the other two as planned. Without offload layers
/// the price is 0 and the step is the recompute step above, unchanged.

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "experiment/experiment.hpp"
#include "planner/memory_model.hpp"

namespace bmpipe {

/// One way a stage's layers can treat their activations.
struct StageOption {
  Time recompute = 0;  ///< extra backward time per micro-batch
  /// The price of its offload layers (offload and selective_offload): both copies of their
  /// bytes on
  /// the device's host-link share, as if none were hidden (2 x LayerModeCost::
  /// offload_copy). 0 without
  /// offload layers, so a job without the offload mode is planned as before.
  Time copy = 0;
  std::int64_t activation = 0;  ///< A: bytes kept per micro-batch from F to I (or B)
  std::int64_t retained = 0;    ///< R: of those, bytes kept until W
  std::int64_t offload = 0;     ///< O: of A, bytes offloaded to the host
  /// Which layers run in which mode, as a link to the one-layer-shorter prefix range
  /// (StageOptions::prefix): this option is that range's option `base` with the range's
  /// last layer in `mode`. A link, not a per-type count, so building a range copies no
  /// counts (apply_option walks the links back).
  std::uint32_t base = 0;
  Recompute mode = Recompute::none;
  /// A first-N table's option (StageOptions::first_n): its first `first_n_full` decoder
  /// layers in full, the next `first_n_selective` selective, the rest none.
  int first_n_full = 0, first_n_selective = 0;
  /// What the step minimises: recompute plus the copies' price.
  Time cost() const { return recompute + copy; }
};

/// The undominated options of one range of layers, by increasing recompute time.
struct StageOptions {
  std::vector<int> type_of;  ///< per layer of the range, its type
  int types = 0;             ///< how many types the range's layers have
  /// The range one layer shorter, whose options this range's options extend
  /// (StageOption::base); null for the empty range and first-N tables.
  const StageOptions* prefix = nullptr;
  std::vector<StageOption> options;
  bool thinned = false;  ///< the set was too large and was thinned (see stage_options.cpp)
  /// A first-N table's range (StageOptionTable's `first_n`): its options state the decoder
  /// layers in full and in selective, which are the range's first decoder layers;
  /// `decoder` marks the range's decoder layers (the others stay none).
  bool first_n = false;
  std::vector<char> decoder;
};

/// Options per layer range, computed on first use and kept: the search asks for the same
/// ranges again and again. Safe to use from several threads.
class StageOptionTable {
 public:
  /// With `first_n`, a range's options are only the first-N forms MindFormers states (per
  /// stage, the first f decoder layers in full and the next g selective, the rest none):
  /// every (f, g) a range's decoder layers can run, undominated ones kept.
  explicit StageOptionTable(const Experiment& experiment, bool first_n = false);
  /// Layers [first, first + count).
  const StageOptions& get(int first, int count) const;
  /// Weights, gradients and optimizer state of layers [first, first + count).
  std::int64_t static_bytes(int first, int count) const {
    return prefix_static_[first + count] - prefix_static_[first];
  }
  const Experiment& experiment() const { return e_; }

 private:
  const StageOptions* make_first_n(int first, int count) const;
  const Experiment& e_;
  bool first_n_ = false;
  bool per_layer_ = false;     ///< the table has the offload mode: prune exactly (see prune)
  std::vector<char> decoder_;  ///< per model layer (first_n tables)
  std::vector<std::int64_t> prefix_static_;
  mutable std::mutex mutex_;
  mutable std::map<std::pair<int, int>, std::unique_ptr<StageOptions>> cache_;
};

/// A rank's choice: one option per local stage.
struct RankChoice {
  std::vector<int> option;      ///< per local stage, index into its StageOptions
  std::vector<Time> recompute;  ///< per local stage
  std::vector<Time> cost;       ///< per local stage: StageOption::cost, what is minimised
  std::int64_t peak = 0;        ///< activation bytes at the peak
  Time total_recompute() const;
  Time total_cost() const;
};

/// How many choices rank_choices() keeps for one rank at most: the planner's choice index
/// of a rank runs from 0 to kMaxRankChoices - 1.
inline constexpr std::size_t kMaxRankChoices = 64;

/// The undominated choices of a rank whose activations may use `budget` bytes, ordered by
/// total cost, recompute plus the offload price (then by the stages' costs,
/// lexicographically). Empty when nothing
/// fits. At most `limit` choices are returned.
std::vector<RankChoice> rank_choices(const RankMemory& memory,
                                     const std::vector<const StageOptions*>& stages,
                                     std::int64_t budget, std::size_t limit = kMaxRankChoices);

/// The least activation peak any choice of the rank reaches (for "nothing fits" messages).
std::int64_t least_peak(const RankMemory& memory, const std::vector<const StageOptions*>& stages);

/// Writes the modes of layers [first, first + n) for `option` into `modes` (model order):
/// within each layer type, full first, then selective_offload, selective, offload, none, so the
/// recomputed
/// layers are the first of the stage, as MindFormers' and Megatron-LM's per-stage counts mean.
/// (Across types they need not be: first_n_order in planner.hpp makes a plan's stages
/// first-N; a first-N table's options are first-N over the stage's decoder layers.)
void apply_option(const StageOptions& stage, const StageOption& option, int first,
                  std::vector<Recompute>& modes);

}  // namespace bmpipe
