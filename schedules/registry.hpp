#pragma once
/// \file
/// Built-in schedules as an explicit table {name, description, generator}. Generators are
/// pure functions of ScheduleParams; nothing registers itself at static-init time.

#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

#include "schedules/op.hpp"

namespace bmpipe {

struct ScheduleParams {
  int pp = 1;            ///< pipeline devices
  int microbatches = 1;  ///< micro-batches per iteration
  int vpp = 1;           ///< chunks (virtual stages) per device, for schedules that use them
};

/// Thrown by a generator when its parameters are impossible (pp < 1, m < 1, ...).
struct ScheduleError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

using ScheduleGenerator = Schedule (*)(const ScheduleParams&);

struct ScheduleInfo {
  std::string_view name;
  std::string_view description;
  ScheduleGenerator generate;
};

/// Every built-in schedule, in the order `bmpipe schedules` lists them.
std::span<const ScheduleInfo> builtin_schedules();

/// The table entry called `name`, or nullptr.
const ScheduleInfo* find_schedule(std::string_view name);

/// Comma-separated names of all built-in schedules, for error messages and --help.
std::string schedule_names();

// Generators (also callable directly).
Schedule make_gpipe(const ScheduleParams& params);
Schedule make_1f1b(const ScheduleParams& params);

}  // namespace bmpipe
