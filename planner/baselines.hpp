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

/// The decoder-layer split (stage order, as Megatron-LM lists the stages) of a
/// --pipeline-model-parallel-layout on `decoders` decoder layers, read as Megatron-LM reads
/// it (parse_megatron_layout). Throws FormatError, saying what is wrong, for a layout
/// Megatron-LM refuses or bmpipe's cost model cannot run as written: multi-token prediction
/// layers (m), the embedding E off the first stage or the loss L off the last, or another
/// number of decoder layers (t). api::run_plan checks --baseline-layout with it too.
std::vector<int> megatron_layout_split(std::string_view layout, int decoders);

/// Bytes in GiB, or MiB / KiB when smaller, with two decimals.
std::string gib(std::int64_t bytes);

}  // namespace bmpipe::planner
