// The table of built-in schedules. Adding a schedule = one generator + one row here.
#include "schedules/registry.hpp"

namespace bmpipe {

namespace {
constexpr ScheduleInfo kBuiltins[] = {
    {"gpipe", "GPipe: all forwards, then all backwards; holds m micro-batches of activations",
     &make_gpipe},
    {"1f1b", "1F1B (PipeDream-flush): p-r-1 warm-up forwards, then alternate F and B",
     &make_1f1b},
};
}  // namespace

std::span<const ScheduleInfo> builtin_schedules() { return kBuiltins; }

const ScheduleInfo* find_schedule(std::string_view name) {
  for (const auto& info : kBuiltins)
    if (info.name == name) return &info;
  return nullptr;
}

std::string schedule_names() {
  std::string names;
  for (const auto& info : kBuiltins) {
    if (!names.empty()) names += ", ";
    names += info.name;
  }
  return names;
}

}  // namespace bmpipe
