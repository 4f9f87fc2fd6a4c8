#pragma once
/// \file
/// Activation recomputation modes, and arrays indexed by them. The set is closed, so it is
/// an enum; the names below are the only spelling of the modes anywhere (YAML, JSON,
/// traces, exports).
///   none       keep every activation a layer's backward needs
///   selective  drop the attention core's activations and re-run it in the backward
///              (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
///              Transformer Models", section 5)
///   full       keep only the layer input and re-run the whole forward in the backward

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>

namespace bmpipe {

enum class Recompute : unsigned char { none = 0, selective = 1, full = 2 };
inline constexpr std::size_t kRecomputeModes = 3;
/// Every mode, in order from the most memory to the least.
inline constexpr std::array<Recompute, kRecomputeModes> kAllRecompute = {
    Recompute::none, Recompute::selective, Recompute::full};
/// The modes that recompute something (every mode but none), in the same order: the ones
/// that carry recompute costs. Code that lists them loops over this, so a new mode is
/// found everywhere it must be.
inline constexpr std::array<Recompute, kRecomputeModes - 1> kRecomputingModes = {
    Recompute::selective, Recompute::full};

/// "none", "selective" or "full".
constexpr std::string_view recompute_name(Recompute r) {
  constexpr std::array<std::string_view, kRecomputeModes> kNames = {"none", "selective", "full"};
  return kNames[static_cast<std::size_t>(r)];
}
/// The mode's name in a table's narrow column: "none", "sel" or "full".
constexpr std::string_view recompute_column(Recompute r) {
  return r == Recompute::selective ? "sel" : recompute_name(r);
}
/// The mode called `text`, or nullopt.
constexpr std::optional<Recompute> parse_recompute(std::string_view text) {
  for (Recompute r : kAllRecompute)
    if (recompute_name(r) == text) return r;
  return std::nullopt;
}

/// A value per recompute mode, indexed by the mode itself (never by a bare 0/1/2).
template <typename T>
struct PerMode {
  std::array<T, kRecomputeModes> values{};

  constexpr T& operator[](Recompute r) { return values[static_cast<std::size_t>(r)]; }
  constexpr const T& operator[](Recompute r) const { return values[static_cast<std::size_t>(r)]; }
  constexpr void fill(const T& v) { values.fill(v); }
  friend constexpr bool operator==(const PerMode&, const PerMode&) = default;
};

}  // namespace bmpipe
