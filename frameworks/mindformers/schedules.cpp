#include "frameworks/mindformers/schedules.hpp"

#include <array>

namespace bmpipe {

namespace {

constexpr std::array kSchedules = {
    MindFormersSchedule{"gpipe", "gpipe"},
    MindFormersSchedule{"1f1b", "1f1b"},
    MindFormersSchedule{"interleaved", "1f1b"},
};

}  // namespace

std::span<const MindFormersSchedule> mindformers_schedules() {
  return kSchedules;
}

std::string_view mindformers_scheduler(std::string_view schedule) {
  for (const MindFormersSchedule& s : kSchedules)
    if (s.schedule == schedule) return s.scheduler;
  return {};
}

}  // namespace bmpipe
