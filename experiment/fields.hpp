#pragma once
// Internal to bmpipe_experiment: every config key is declared once, in a field table of its
// section (config_fields.hpp): its name, the member it fills, its range and unit, whether it
// is required, and a line of help. The allowed-key list of a section, the reads, and the
// messages for missing, mistyped, out-of-range and out-of-place keys all come from there.

#include <array>
#include <climits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "experiment/yaml_reader.hpp"

namespace bmpipe::detail {

enum class Need {
  optional,     ///< absent: the member keeps its value (the default, or a preset's)
  required,     ///< absent: "missing required key"
  unless_base,  ///< required, unless a preset (or HF config) of the section gave a value
};

/// Which form of the experiment a key belongs to. A key whose form is not in use is refused
/// with the section's message (measured layers and the analytic shape do not mix; compute
/// figures need a device that has them).
enum class Form : unsigned { any = 0, analytic = 1, measured = 2, compute = 4 };

/// The member a key fills. std::monostate: the section's reader handles the key itself (a
/// sub-section, a list, or a value that maps onto something other than a member).
template <class T>
using Slot = std::variant<std::monostate, double T::*, std::optional<double> T::*, int T::*,
                          std::optional<int> T::*, std::int64_t T::*,
                          std::optional<std::int64_t> T::*, bool T::*, std::string T::*>;

template <class T>
struct Field {
  std::string_view name;
  Slot<T> slot = {};
  Range range = {};  ///< numbers only
  Need need = Need::optional;
  std::string_view help;
  std::span<const std::string_view> choices = {};  ///< strings only; empty = any text
  Form form = Form::any;
};

/// The key names of a table, in table order: the section's allowed keys.
template <class T, std::size_t N>
std::array<std::string_view, N> names_of(const std::array<Field<T>, N>& table) {
  std::array<std::string_view, N> out{};
  for (std::size_t i = 0; i < N; ++i) out[i] = table[i].name;
  return out;
}

/// How one section is read.
struct ReadOptions {
  bool base = false;     ///< a preset filled the target first: unless_base keys are optional
  unsigned forms = ~0u;  ///< forms in use (bits of Form); Form::any is always in use
  std::string refusal;   ///< the message for a key of a form not in use
};

/// Checks `map` against `table` (unknown and duplicate keys, keys of a form not in use,
/// missing required keys) and reads every key that has a member into `out`. Keys without
/// a member are only checked (presence, choices); their section reads them.
template <class T, std::size_t N>
void read_fields(Reader& rd, const YAML::Node& map, const std::string& key,
                 const std::array<Field<T>, N>& table, T& out, const ReadOptions& opt = {}) {
  const auto allowed = names_of(table);
  rd.expect_map(map, key, allowed);
  for (const Field<T>& f : table) {
    const std::string path = Reader::join(key, std::string(f.name));
    const bool in_use = f.form == Form::any || (opt.forms & static_cast<unsigned>(f.form)) != 0;
    if (!in_use) {
      if (Reader::present(map, f.name)) rd.fail(map[std::string(f.name)], path, opt.refusal);
      continue;
    }
    const bool required = f.need == Need::required || (f.need == Need::unless_base && !opt.base);
    if (required && !Reader::present(map, f.name))
      rd.fail(map, path,
              "missing required key" + (f.help.empty() ? "" : " (" + std::string(f.help) + ")"));
    const YAML::Node n = rd.child(map, key, f.name, false);
    if (!n.IsDefined()) continue;
    const Range& r = f.range;
    std::visit(
        [&](auto member) {
          using M = decltype(member);
          if constexpr (std::is_same_v<M, std::monostate>) {
            if (!f.choices.empty()) rd.text(n, path, f.choices);
          } else if constexpr (std::is_same_v<M, double T::*> ||
                               std::is_same_v<M, std::optional<double> T::*>) {
            out.*member = rd.real(n, path, r);
          } else if constexpr (std::is_same_v<M, int T::*> ||
                               std::is_same_v<M, std::optional<int> T::*>) {
            out.*member = static_cast<int>(rd.whole(n, path, r, INT_MAX));
          } else if constexpr (std::is_same_v<M, std::int64_t T::*> ||
                               std::is_same_v<M, std::optional<std::int64_t> T::*>) {
            out.*member = rd.whole(n, path, r);
          } else if constexpr (std::is_same_v<M, bool T::*>) {
            out.*member = rd.flag(n, path);
          } else {
            static_assert(std::is_same_v<M, std::string T::*>);
            out.*member = rd.text(n, path, f.choices);
          }
        },
        f.slot);
  }
}

/// Checks a value that did not come through YAML (a preset, an HF config.json) against its
/// field's range; nullopt if it is inside, else the reason.
template <class T>
std::optional<std::string> out_of_range(const Field<T>& f, double v) {
  const Range& r = f.range;
  const std::string unit = r.unit.empty() ? "" : " " + std::string(r.unit);
  if (!std::isfinite(v)) return std::string("must be a finite number");
  if (v != 0 && std::fpclassify(v) == FP_SUBNORMAL) return std::string("must not be a denormal");
  if (v < r.min || (r.min_open && v == r.min))
    return std::string(r.min_open ? "must be greater than " : "must be at least ") +
           format_number(r.min) + unit;
  if (v < r.low) return "must be at least " + format_number(r.low) + unit;
  if (v > r.max)
    return "must be at most " + format_number(r.max) + unit +
           (r.max_note.empty() ? "" : " (" + std::string(r.max_note) + ")");
  return std::nullopt;
}

/// The numeric members of `obj` that `table` describes, as doubles (an absent optional
/// gives nothing), for checks of values that may not have come through YAML.
template <class T, std::size_t N, class Visit>
void for_each_number(const std::array<Field<T>, N>& table, const T& obj, Visit visit) {
  for (const Field<T>& f : table)
    std::visit(
        [&](auto member) {
          using M = decltype(member);
          if constexpr (std::is_same_v<M, double T::*> || std::is_same_v<M, int T::*> ||
                        std::is_same_v<M, std::int64_t T::*>) {
            visit(f, static_cast<double>(obj.*member));
          } else if constexpr (std::is_same_v<M, std::optional<double> T::*> ||
                               std::is_same_v<M, std::optional<int> T::*> ||
                               std::is_same_v<M, std::optional<std::int64_t> T::*>) {
            if (obj.*member) visit(f, static_cast<double>(*(obj.*member)));
          }
        },
        f.slot);
}

}  // namespace bmpipe::detail
