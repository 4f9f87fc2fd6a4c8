#pragma once
/// \file
/// The planner's baselines (internal to planner/): the plans a user would make by rule or
/// that published planners make, each run as the search's plans are. planner.hpp names
/// them (baseline_names()).

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "planner/planner.hpp"
#include "planner/space.hpp"

namespace bmpipe::planner {

/// Every baseline on `space`, in baseline_names() order (one run each, made or not).
std::vector<BaselineRun> run_baselines(const Space& space, const PlannerOptions& o);

/// Whether the search may start from baseline `index` (of baseline_names()); exhaustive is
/// the reference the search is measured against, so it does not.
bool starts_search(std::size_t index);

/// Why a run does not fit ("does not fit: rank r needs x of y"), or its error; empty when
/// it fits.
std::string fit_note(const PlanRun& run);

/// The decoder-layer splits of megatron-first-last (stage order, pp * vpp entries):
/// Megatron-LM's --decoder-first-pipeline-num-layers F and/or
/// --decoder-last-pipeline-num-layers L, the rest split evenly over the middle ranks, as
/// get_num_layers_to_build builds them (megatron_uneven). Tried: F and L each from 1 to the
/// even share ceil(layers / pp) (the first and last rank lighter than the rest, by 0 to
/// share - 1 layers), or absent, every combination Megatron-LM accepts except both absent;
/// in order of F (absent first), then L. Each split once.
std::vector<std::vector<int>> megatron_first_last_splits(int layers, int pp, int vpp);

/// The decoder-layer splits of megatron-embedding-loss: Megatron-LM's even split
/// with --account-for-embedding-in-pipeline-split, --account-for-loss-in-pipeline-split, or
/// both (each counts as one layer; megatron_even), each that Megatron-LM accepts, in that
/// order, with which flags give it.
struct AccountedSplit {
  bool embedding = false, loss = false;
  std::vector<int> partition;
};
std::vector<AccountedSplit> megatron_accounted_splits(int layers, int pp, int vpp);

/// A --pipeline-model-parallel-layout read for a model: its decoder layers per stage (stage
/// order, as Megatron-LM lists the stages), and, when bmpipe's cost model cannot run it as
/// written, why (empty: it can).
struct LayoutSplit {
  std::vector<int> decoders;
  /// Rows of a table with separate ends (E, t, m, L) per stage.
  std::vector<int> rows;
  std::string unsupported;
};

/// The layout read as Megatron-LM reads it (parse_megatron_layout) for a model of
/// `decoders` decoder layers and `mtp_layers` multi-token prediction layers. Throws
/// FormatError, saying what is wrong, for a layout that is not this model's: bad grammar,
/// another number of decoder layers (t) or of MTP layers (m). api::run_plan checks
/// --baseline-layout and training.megatron_layout with it (exit 2). What bmpipe cannot run
/// as written only skips the megatron-layout baseline, with `unsupported` as the reason: a
/// stage without decoder layers, or MTP layers anywhere but the last stage, on a table that
/// folds the embedding, the MTP module and the loss into the first and last decoder layers.
/// A config whose training.megatron_layout is such a layout has a table with separate ends
/// (experiment/layer_table.hpp), and there the baseline runs `rows` as written.
LayoutSplit megatron_layout_split(std::string_view layout, int decoders, int mtp_layers = 0);

/// Bytes in GiB, or MiB / KiB when smaller, with two decimals.
std::string gib(std::int64_t bytes);

}  // namespace bmpipe::planner
