#pragma once
/// \file
/// From a checked Config to what the engine runs: the device graph, the schedule, and the
/// per-stage costs and per-rank memory of one pipeline.
///
/// Placement follows Megatron-LM: tp is innermost inside a node, then dp, then pp. The
/// simulated pipeline is the one with dp rank 0 and tp rank 0, so pipeline rank r runs on
/// physical device r * tp * dp, and its transfers cross the links that device really has.

#include <vector>

#include "schedules/registry.hpp"
#include "sim/config/config.hpp"
#include "sim/simulate.hpp"
#include "sim/topology.hpp"

namespace bmpipe {

/// Layer counts per stage: the config's partition, or as even as possible with the
/// remainder going to the earliest stages.
std::vector<int> stage_layer_counts(const Config& config, int num_stages);

/// Builds the schedule the config names. Throws ConfigError for parameters the schedule
/// refuses (the message names training.schedule).
Schedule make_schedule(const Config& config);

/// Costs and memory of one pipeline running `schedule`. Needs `topology` to outlive the
/// returned input.
SimInput make_sim_input(const Config& config, const Topology& topology, const Schedule& schedule);

}  // namespace bmpipe
