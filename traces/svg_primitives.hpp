#pragma once
/// \file
/// Internal to traces/: the SVG writing helpers that the timeline picture
/// (timeline_svg.cpp) and the memory picture (memory_svg.cpp) share, so that both format
/// numbers, escape text and open a page the same way. Not part of the public interface.

#include <cstdint>
#include <string>
#include <vector>

#include "sim/time.hpp"

namespace bmpipe::svg {

inline constexpr double kCharWidth = 6.2;  // 10 px sans-serif digits, a little generous
inline constexpr const char* kCapacityColour = "#d62728";

/// A coordinate or length with at most two decimals, trailing zeros trimmed ("12.5", "3").
std::string num(double v);

/// The XML declaration, the <svg> element of a w x h picture and its white page.
std::string svg_open(double w, double h);

/// `text` with the five XML special characters escaped.
std::string escape(const std::string& text);

/// Width of `text` on the page at 10 px: characters (UTF-8 continuation bytes take no room
/// of their own) times kCharWidth.
double text_px(const std::string& text);

/// "37.8 GiB", or "12.0 MiB" below a GiB so that small runs do not all read "0.0".
std::string gib(std::int64_t bytes);

/// "12.345 ms".
std::string ms_text(Time t);

/// A 1-2-5 step of at least `raw`.
double nice_step(double raw);

/// Decimals that print every multiple of `step` exactly enough.
int decimals_for(double step);

/// v[i], or `fallback` when i is out of range (hand-made timelines may leave vectors short).
template <typename T>
T at_or(const std::vector<T>& v, int i, T fallback) {
  return i >= 0 && static_cast<std::size_t>(i) < v.size() ? v[static_cast<std::size_t>(i)]
                                                          : fallback;
}

}  // namespace bmpipe::svg
