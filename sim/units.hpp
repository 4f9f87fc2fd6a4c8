#pragma once
/// \file
/// How every output writes times and byte counts: one formatter each, so a table, a
/// message and a picture that show the same quantity show it alike. Callers choose the
/// precision and the smallest unit; the rules live here.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "sim/time.hpp"

namespace bmpipe {

enum class ByteUnit { KiB, MiB, GiB };

/// `bytes` with `decimals` decimals in the largest binary unit, not below `smallest`, that
/// the magnitude reaches ("1.50 GiB", "512.0 MiB"); below every unit it is written in
/// `smallest`. With smallest = GiB, always in GiB ("0.25 GiB").
inline std::string format_bytes(std::int64_t bytes, int decimals, ByteUnit smallest) {
  constexpr double kKiB = 1024.0, kMiB = 1048576.0, kGiB = 1073741824.0;
  const double b = static_cast<double>(bytes), magnitude = std::abs(b);
  double scale = kGiB;
  const char* unit = "GiB";
  if (smallest != ByteUnit::GiB && magnitude < kGiB) {
    scale = kMiB, unit = "MiB";
    if (smallest == ByteUnit::KiB && magnitude < kMiB) scale = kKiB, unit = "KiB";
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f %s", decimals, b / scale, unit);
  return buf;
}

/// `t` in milliseconds with `decimals` decimals and no unit ("30781.349"): tables put the
/// unit in their header.
inline std::string format_ms(Time t, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, ns_to_ms(t));
  return buf;
}

}  // namespace bmpipe
