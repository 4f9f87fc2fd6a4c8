#pragma once
/// \file
/// bmpipe's schedules as Megatron-LM runs them: forward_backward_pipelining_without_interleaving
/// (1F1B) and ..._with_interleaving (interleaved 1F1B with virtual stages,
/// --num-layers-per-virtual-pipeline-stage), megatron/core/pipeline_parallel/schedules.py.
/// The schedule table (schedules/registry) names no framework; this is Megatron-LM's column.

#include <span>
#include <string_view>

namespace bmpipe {

/// The names of bmpipe's schedules Megatron-LM runs, in the schedule table's order.
std::span<const std::string_view> megatron_schedules();

/// Whether Megatron-LM runs bmpipe's schedule `schedule` (other schedules' exports carry a
/// note).
bool megatron_runs(std::string_view schedule);

}  // namespace bmpipe
