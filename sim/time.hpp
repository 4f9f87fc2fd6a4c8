#pragma once
/// \file
/// Simulated time is an integer count of nanoseconds. Costs arrive in milliseconds (config)
/// or seconds (cost model) as doubles and are rounded here, in one place, so that the
/// engine itself only adds and compares integers and runs are bit-for-bit reproducible.

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>

namespace bmpipe {

using Time = std::int64_t;  ///< nanoseconds

inline constexpr Time kNsPerUs = 1'000;
inline constexpr Time kNsPerMs = 1'000'000;
inline constexpr Time kNever = std::numeric_limits<Time>::max();

/// Milliseconds to nanoseconds, rounded to nearest.
inline Time ms_to_ns(double ms) {
  return static_cast<Time>(std::llround(ms * 1e6));
}
/// Microseconds to nanoseconds, rounded to nearest.
inline Time us_to_ns(double us) {
  return static_cast<Time>(std::llround(us * 1e3));
}
/// Seconds to nanoseconds, rounded to nearest.
inline Time s_to_ns(double s) {
  return static_cast<Time>(std::llround(s * 1e9));
}

/// `value * ns_per_unit` rounded to nearest, or nullopt when that is not a number or does
/// not fit in Time. For input that may be hostile: the unchecked forms above leave an
/// out-of-range result unspecified.
inline std::optional<Time> checked_to_ns(double value, double ns_per_unit) {
  const double ns = value * ns_per_unit;
  // 2^63 is exactly representable; every double below it rounds to a Time that fits.
  constexpr double kLimit = 9223372036854775808.0;
  if (!(ns > -kLimit && ns < kLimit)) return std::nullopt;  // also false for NaN
  return static_cast<Time>(std::llround(ns));
}
inline std::optional<Time> checked_ms_to_ns(double ms) {
  return checked_to_ns(ms, 1e6);
}
inline std::optional<Time> checked_us_to_ns(double us) {
  return checked_to_ns(us, 1e3);
}
inline std::optional<Time> checked_s_to_ns(double s) {
  return checked_to_ns(s, 1e9);
}

inline double ns_to_ms(Time ns) {
  return static_cast<double>(ns) / 1e6;
}
inline double ns_to_us(Time ns) {
  return static_cast<double>(ns) / 1e3;
}

}  // namespace bmpipe
