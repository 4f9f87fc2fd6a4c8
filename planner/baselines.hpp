#pragma once
/// \file
/// The planner's baselines (internal to planner/): the plans a user would make by rule or
/// that published planners make, each run as the search's plans are. planner.hpp names
/// them (baseline_names()).

#include <cstddef>
#include <cstdint>
#include <string>
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

/// Bytes in GiB, or MiB / KiB when smaller, with two decimals.
std::string gib(std::int64_t bytes);

}  // namespace bmpipe::planner
