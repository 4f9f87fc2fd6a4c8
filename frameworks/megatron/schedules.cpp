#include "frameworks/megatron/schedules.hpp"

#include <algorithm>
#include <array>

namespace bmpipe {

namespace {

constexpr std::array<std::string_view, 2> kSchedules = {"1f1b", "interleaved"};

}  // namespace

std::span<const std::string_view> megatron_schedules() {
  return kSchedules;
}

bool megatron_runs(std::string_view schedule) {
  return std::find(kSchedules.begin(), kSchedules.end(), schedule) != kSchedules.end();
}

}  // namespace bmpipe
