#pragma once
/// \file
/// The work limit of a run's outputs. WorkLimits::max_ops (experiment/config.hpp) bounds the
/// simulation's own memory, about kSimulationBytesPerOp per op of op_bound; an output that
/// keeps every op until it is written (an SVG, the HTML report) adds its own bytes per op,
/// and the limit counts them before anything is allocated: a run inside the limits never
/// runs out of memory while drawing.

#include <cstdint>
#include <string>
#include <vector>

#include "experiment/config.hpp"

namespace bmpipe {

/// The simulation's own bytes per op of op_bound that WorkLimits::max_ops allows for: the
/// op limit is a memory budget of max_ops x kSimulationBytesPerOp.
inline constexpr int kSimulationBytesPerOp = 50;

/// An output that keeps memory per op while it is made, on top of the simulation's own:
/// `option` names it in messages ("--svg", "the HTML report"), `bytes_per_op` is per op of
/// op_bound (each output declares its figure beside its code: kTimelineBytesPerOp in
/// traces/timeline.hpp, kTraceBytesPerOp in traces/chrome_trace.hpp, api::kReportBytesPerOp
/// in api/report.hpp).
struct OutputWork {
  std::string option;
  int bytes_per_op = 0;
};

/// What check_output_work counts: op_bound(config) weighted by the outputs' bytes per op,
/// in ops of kSimulationBytesPerOp, rounded up: ceil(op_bound x (50 + sum) / 50).
std::int64_t weighted_op_bound(const Config& config, const std::vector<OutputWork>& outputs);

/// The work limit with `outputs` counted: weighted_op_bound must stay within
/// config.limits.max_ops. Past it, a ConfigError as check_work_bounds's (on
/// training.microbatches, or training.pp when there are more stages than micro-batches)
/// gives the estimate in ops and GiB, the limit, and the --max-ops that would admit the
/// run. Call it before anything of the run is allocated.
void check_output_work(const Config& config, const std::vector<OutputWork>& outputs);

}  // namespace bmpipe
