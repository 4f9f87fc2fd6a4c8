#pragma once
/// \file
/// Structural validation of a Schedule, independent of any costs: every (stage,
/// micro-batch) is run exactly once forward and exactly once backward (B, or I then W),
/// each op runs on the device that holds its stage, and W never precedes its I on that
/// device. Ordering across devices (deadlock) is the engine's to find, not this check's.

#include <optional>
#include <string>

#include "schedules/op.hpp"

namespace bmpipe {

struct ScheduleIssue {
  int rank = -1;      ///< device whose list holds the offending op, or -1
  int position = -1;  ///< index of the op in that list, or -1
  std::string message;
};

/// The first problem found, or nullopt when the schedule is well formed.
std::optional<ScheduleIssue> validate_schedule(const Schedule& schedule);

}  // namespace bmpipe
