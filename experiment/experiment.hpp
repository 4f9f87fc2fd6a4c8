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
#include "experiment/config.hpp"
#include "sim/cost/cost_model.hpp"
#include "sim/simulate.hpp"
#include "sim/run_info.hpp"
#include "sim/topology.hpp"

namespace bmpipe {

/// Layer counts per stage: the config's partition, or as even as possible with the
/// remainder going to the earliest stages.
std::vector<int> stage_layer_counts(const Config& config, int num_stages);

/// Builds the schedule the config names. Throws ConfigError for parameters the schedule
/// refuses (the message names training.schedule).
Schedule make_schedule(const Config& config);

/// Costs and memory of one pipeline running `schedule`. Needs `topology` to outlive the
/// returned input. For an analytic model the per-layer costs come from the cost model
/// (sim/cost), the embedding is added to the first stage, LM head and loss to the last,
/// and each rank's tail_time is its dp gradient reduction plus the optimizer step.
SimInput make_sim_input(const Config& config, const Topology& topology, const Schedule& schedule);

/// The cost model's view of an analytic config: its inputs and the three kinds of layer.
struct AnalyticCosts {
  HardwareSpec hardware;
  CostSettings settings;
  OptimizerSettings optimizer;
  int dp = 1;
  LayerCost decoder;
  LayerCost embedding;  ///< on the first stage
  LayerCost head;       ///< final norm, LM head and loss, on the last stage
};

/// Throws ConfigError when the model is not analytic. `num_stages` decides whether tied
/// embeddings put a second copy of the matrix on the last stage (they do when > 1).
AnalyticCosts analytic_costs(const Config& config, int num_stages);

/// The recompute mode of decoder layer `layer`, which sits in stage `stage`.
Recompute recompute_mode(const Config& config, int stage, int layer);

/// One entry per decoder layer, in order, with per-micro-batch costs and static bytes. For
/// an analytic model the embedding is folded into layer 0 of stage 0 and the head into the
/// last layer, and each layer carries its recompute mode's costs. `counts`: layers per
/// stage (stage_layer_counts).
std::vector<LayerGroup> expand_layers(const Config& config, const std::vector<int>& counts);

/// End-of-iteration work of a device holding `params` parameters of an analytic model: dp
/// gradient reduction (all-reduce, or reduce-scatter + all-gather with ZeRO-1, over the
/// links the dp group of pipeline rank `rank` crosses) and the Adam step.
Time tail_time(const Config& config, const AnalyticCosts& costs, int rank, std::int64_t params);

/// What the summary needs beyond the result: schedule, sizes, and for an analytic model
/// tokens and FLOPs per iteration (tokens_per_s, mfu, tflops_per_device).
RunInfo make_run_info(const Config& config, const Schedule& schedule);

}  // namespace bmpipe
