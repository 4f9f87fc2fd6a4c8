#pragma once
/// \file
/// The summary of one run, as the JSON contract scripts rely on and as a table for people.
/// Both are pure functions of the result, so equal inputs print equal bytes.

#include <nlohmann/json.hpp>
#include <string>

#include "sim/bubbles.hpp"
#include "sim/run_info.hpp"
#include "sim/simulate.hpp"

namespace bmpipe {

/// JSON keys: schedule, pp, vpp, microbatches, the resolved layout (tp, dp,
/// micro_batch_size, global_batch_size, partition, recompute_per_stage), iteration_time_ms,
/// pipeline_time_ms, bubble_ratio, fits, ops_executed, devices[{rank, device, busy_ms, idle_ms,
/// peak_memory_bytes, peak_allocated_bytes, peak_reserved_bytes, static_bytes,
/// peak_activation_bytes, capacity_bytes,
/// peak_inflight_microbatches, reload_wait_ms, peak_host_bytes, fits}]; on failure also error and
/// blocked[{rank, position, op, waiting_for}]. From RunInfo's throughput inputs: tokens_per_s, mfu,
/// tflops_per_device.
/// With `bubbles` (sim/bubbles.hpp) also "bubble_breakdown_ms" {ideal, imbalance,
/// communication, recompute, idle} (totals in device-ms) and "bubble_ms" per device; if the
/// breakdown failed, "bubble_breakdown_error".
nlohmann::json summary_json(const RunInfo& info, const SimResult& result,
                            const BubbleBreakdown* bubbles = nullptr);

/// The same as a human-readable table.
/// With `bubbles`, a second table: where each device's idle time comes from.
std::string summary_text(const RunInfo& info, const SimResult& result,
                         const BubbleBreakdown* bubbles = nullptr);

/// Bytes as GiB with two decimals, e.g. "61.25 GiB".
std::string format_gib(std::int64_t bytes);

}  // namespace bmpipe
