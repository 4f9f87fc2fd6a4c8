#pragma once
/// \file
/// Internal to traces/: a rank's memory as the pictures draw it, shared by the memory
/// panels of the timeline picture and the memory picture: its peak, the one y-scale of a
/// picture, and the step curve as SVG points.

#include <climits>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "traces/svg_primitives.hpp"
#include "traces/timeline.hpp"

namespace bmpipe::svg {

/// Static bytes plus the rank's largest activation sample.
std::int64_t rank_peak(const Timeline& t, int r);

// One y-scale for every memory curve of a picture. It reaches the largest capacity, so
// headroom shows, unless every device uses under a quarter of it: then a flat line would
// say nothing, so the scale follows the peak and capacity lines are pinned to the top.
struct MemoryScale {
  double full = 1;  // bytes at the top edge
  bool off_scale = false;
  std::int64_t peak = 0;
  std::int64_t capacity = 0;  // the largest
};
MemoryScale memory_scale(std::span<const Timeline> timelines);

// A step curve of total memory (static + activations) from time 0 to `end`, as SVG points.
// Points that land on the same spot (to 0.1 px) are dropped: the picture is the same and
// a dense run's file stays proportional to its width, not its events.
template <typename X, typename Y>
std::string memory_points(const Timeline& t, int r, Time end, X x, Y y) {
  static const std::vector<Timeline::MemorySample> kNone;
  const auto& samples = static_cast<std::size_t>(r) < t.memory.size() ? t.memory[r] : kNone;
  const std::int64_t stat = at_or<std::int64_t>(t.static_bytes, r, 0);
  std::string pts;
  long last_px = LONG_MIN, last_py = LONG_MIN;
  auto point = [&](double px, double py) {
    const long ix = std::lround(px * 10), iy = std::lround(py * 10);
    if (ix == last_px && iy == last_py) return;
    last_px = ix, last_py = iy;
    if (!pts.empty()) pts += ' ';
    pts += num(px);
    pts += ',';
    pts += num(py);
  };
  std::int64_t current = stat;
  point(x(0), y(current));
  for (const auto& s : samples) {
    point(x(s.time), y(current));
    current = stat + s.activation_bytes;
    point(x(s.time), y(current));
  }
  point(x(end), y(current));
  return pts;
}

}  // namespace bmpipe::svg
