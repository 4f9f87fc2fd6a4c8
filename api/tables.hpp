#pragma once
/// \file
/// The text tables the commands print, as strings: what `bmpipe plan`, `bmpipe cost` and
/// `bmpipe compare` print without --json (the JSON is each command's summary). The executable
/// prints them; the Python module returns the summaries.

#include <cstdint>
#include <string>

#include "api/api.hpp"

namespace bmpipe::api {

/// `bmpipe plan`'s table of the plan of `planned` for `request` on the config `file` under
/// `memory_limit` bytes: the schedule line, the offload choices tried (with --offload), the
/// stages (layers per recompute mode, F and B per micro-batch, peak memory), the baselines
/// and the speedup over Megatron-LM, the schedules planned (several) and the search's line.
std::string plan_text(const std::string& file, const PlanRequest& request,
                      const PlanResults& planned, std::int64_t memory_limit);

/// `bmpipe cost`'s tables of `cost` on `config`: the model, device and parallel sizes, each
/// layer kind's times, activations per recompute mode, recompute times and parameters per
/// micro-batch and device (with `with_ops`, each layer's sub-ops), then static bytes per
/// stage.
std::string cost_text(const Config& config, const CostOutcome& cost, bool with_ops);

/// `bmpipe compare`'s table: one row per schedule (vpp, iteration ms, bubble %, the fullest
/// device's peak, fits), REFUSED and FAILED rows with their reasons.
std::string compare_text(const std::string& file, const CompareOutcome& outcome);

}  // namespace bmpipe::api
