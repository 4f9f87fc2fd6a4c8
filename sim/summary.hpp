#pragma once
/// \file
/// The summary of one run, as the JSON contract scripts rely on and as a table for people.
/// Both are pure functions of the result, so equal inputs print equal bytes.

#include <nlohmann/json.hpp>
#include <string>

#include "sim/simulate.hpp"

namespace bmpipe {

/// What the run was, beyond what the SimResult holds.
struct RunInfo {
  std::string schedule;
  int pp = 1;
  int vpp = 1;
  int microbatches = 1;
};

/// JSON keys: schedule, pp, vpp, microbatches, iteration_time_ms, pipeline_time_ms,
/// bubble_ratio, fits, ops_executed, devices[{rank, device, busy_ms, idle_ms,
/// peak_memory_bytes, static_bytes, peak_activation_bytes, capacity_bytes,
/// peak_inflight_microbatches, fits}]; on failure also error and blocked[{rank, position,
/// op, waiting_for}].
nlohmann::json summary_json(const RunInfo& info, const SimResult& result);

/// The same as a human-readable table.
std::string summary_text(const RunInfo& info, const SimResult& result);

/// Bytes as GiB with two decimals, e.g. "61.25 GiB".
std::string format_gib(std::int64_t bytes);

}  // namespace bmpipe
