#pragma once
/// \file
/// bmpipe's schedules as MindFormers runs them: the parallel.pipeline_config.pipeline_scheduler
/// of each ("1f1b", interleaved when pp_interleave_num > 1, and "gpipe"). The schedule table
/// (schedules/registry) names no framework; this is MindFormers' column.

#include <span>
#include <string_view>

namespace bmpipe {

/// One schedule MindFormers runs: bmpipe's name and the pipeline_scheduler that runs it.
struct MindFormersSchedule {
  std::string_view schedule;   ///< bmpipe's name: "interleaved"
  std::string_view scheduler;  ///< MindFormers' pipeline_scheduler: "1f1b"
};

/// Every schedule MindFormers runs, in the schedule table's order.
std::span<const MindFormersSchedule> mindformers_schedules();

/// The pipeline_scheduler that runs bmpipe's schedule `schedule`, or "" when MindFormers has
/// none.
std::string_view mindformers_scheduler(std::string_view schedule);

}  // namespace bmpipe
