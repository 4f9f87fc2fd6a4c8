#pragma once
// Internal to bmpipe_experiment: a YAML walker that remembers the key path and line of all
// it reads and turns every surprise into a ConfigError. The section readers (config.cpp)
// drive it through the field tables of experiment/fields.hpp.

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "experiment/config.hpp"
#include "experiment/suggest.hpp"

namespace bmpipe::detail {

/// What a number may be: a hard lower bound, a plausible one (below it the value is absurd
/// for its unit), and an upper bound. Integers use the same bounds (exact up to 2^53).
struct Range {
  double min = 0;
  bool min_open = false;  ///< min itself is refused ("greater than")
  double max = 0;
  std::string_view unit;      ///< shown after the bounds: "ms", "GB/s", ...
  std::string_view max_note;  ///< why max: "a day"
  double low = 0;             ///< values below are absurd (checked after min)
  std::string_view low_note;  ///< why low: "1 byte/s"
};

/// A number as people write it: integers in full (up to 2^53, where doubles stop being
/// exact), others in at most 6 significant digits.
inline std::string format_number(double v) {
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) <= 9007199254740992.0)
    return std::to_string(static_cast<long long>(v));
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

/// Walks a YAML document, remembering the key path and line of everything it reads, and
/// turns every surprise into a ConfigError.
class Reader {
 public:
  explicit Reader(Config& config) : config_(config) {}

  /// A node without a position (a missing key, an empty document) points at line 1, so
  /// every message from a file names a line.
  [[noreturn]] void fail(const YAML::Node& node, const std::string& key, const std::string& msg) {
    throw ConfigError(config_.file, line_of(node), key, msg);
  }

  static int line_of(const YAML::Node& node) {
    return node.IsDefined() && node.Mark().line >= 0 ? node.Mark().line + 1 : 1;
  }

  /// A mapping whose keys are plain names, each given once and each in `allowed`.
  /// yaml-cpp keeps both entries of a duplicated key and looks up the first, so duplicates
  /// are found here, while walking the entries.
  void expect_map(const YAML::Node& node, const std::string& key,
                  std::span<const std::string_view> allowed) {
    if (!node.IsMap()) fail(node, key, "expected a mapping of keys");
    std::map<std::string, int> seen;
    for (const auto& kv : node) {
      const std::string name = key_name(kv.first, key);
      if (std::find(allowed.begin(), allowed.end(), name) == allowed.end())
        fail(kv.first, join(key, name),
             "unknown key" + did_you_mean(name, allowed) + " (expected one of: " + list(allowed) +
                 ")");
      const int line = line_of(kv.first);
      if (auto [it, fresh] = seen.emplace(name, line); !fresh)
        fail(kv.first, join(key, name),
             "given twice, on lines " + std::to_string(it->second) + " and " +
                 std::to_string(line) + " (one of the two would be ignored)");
    }
    note(node, key);
  }

  /// The text of a mapping key; keys must be scalars.
  std::string key_name(const YAML::Node& k, const std::string& key) {
    if (!k.IsScalar()) fail(k, key, "expected a plain key name, got " + shown(k));
    return k.Scalar();
  }

  /// map[name], or an undefined node when absent or null (then `required` fails).
  YAML::Node child(const YAML::Node& map, const std::string& key, std::string_view name,
                   bool required) {
    YAML::Node n = map[std::string(name)];
    if (!n.IsDefined() || n.IsNull()) {
      if (required) fail(map, join(key, std::string(name)), "missing required key");
      return YAML::Node(YAML::NodeType::Undefined);
    }
    note(n, join(key, std::string(name)));
    return n;
  }

  static bool present(const YAML::Node& map, std::string_view name) {
    const YAML::Node n = map[std::string(name)];
    return n.IsDefined() && !n.IsNull();
  }

  /// A finite, normal (or zero) number inside `r`.
  double real(const YAML::Node& n, const std::string& path, const Range& r) {
    double v = 0;
    if (!n.IsScalar() || !YAML::convert<double>::decode(n, v) || !std::isfinite(v))
      fail(n, path, "expected a number, got " + shown(n));
    check_range(n, path, v, r);
    return v;
  }

  /// An integer inside `r` and inside [type_min, type_max] (the member's type), never
  /// wrapped: 4294967298 for an int is an error, not 2.
  std::int64_t whole(const YAML::Node& n, const std::string& path, const Range& r,
                     std::int64_t type_max = INT64_MAX) {
    std::int64_t v = 0;
    if (!n.IsScalar() || !YAML::convert<std::int64_t>::decode(n, v)) {
      double d = 0;
      if (n.IsScalar() && YAML::convert<double>::decode(n, d) && std::isfinite(d) &&
          d == std::floor(d))
        fail(n, path,
             "expected an integer in full digits, got " + shown(n) + " (at most " +
                 format_number(std::min<double>(r.max, type_max)) + ")");
      fail(n, path, "expected an integer, got " + shown(n));
    }
    Range bounded = r;
    if (bounded.max > static_cast<double>(type_max)) bounded.max = static_cast<double>(type_max);
    check_range(n, path, static_cast<double>(v), bounded);
    // check_range compared doubles; compare again exactly at the type's edge.
    if (v > type_max)
      fail(n, path, "must be at most " + std::to_string(type_max) + ", got " + shown(n));
    note(n, path);
    return v;
  }

  bool flag(const YAML::Node& n, const std::string& path) {
    bool v = false;
    if (!n.IsScalar() || !YAML::convert<bool>::decode(n, v))
      fail(n, path, "expected true or false, got " + shown(n));
    return v;
  }

  /// A string; one of `choices` unless that is empty.
  std::string text(const YAML::Node& n, const std::string& path,
                   std::span<const std::string_view> choices = {}) {
    if (!n.IsScalar()) fail(n, path, "expected a string, got " + shown(n));
    const std::string v = n.Scalar();
    if (!choices.empty() && std::find(choices.begin(), choices.end(), v) == choices.end())
      fail(n, path,
           "unknown value " + shown(n) + did_you_mean(v, choices) +
               " (expected one of: " + list(choices) + ")");
    return v;
  }

  /// Records that `path` was read at `n`'s line, for checks made after parsing.
  void mark(const YAML::Node& n, const std::string& path) { note(n, path); }

  static std::string join(const std::string& key, const std::string& name) {
    return key.empty() ? name : key + "." + name;
  }

  static std::string list(std::span<const std::string_view> names) {
    std::string out;
    for (auto a : names) out += (out.empty() ? "" : ", ") + std::string(a);
    return out;
  }

  /// A node as a message shows it: a scalar in quotes (cut at 60 bytes), else its kind.
  static std::string shown(const YAML::Node& n) {
    if (n.IsScalar()) {
      const std::string& s = n.Scalar();
      return "'" + (s.size() > 60 ? s.substr(0, 60) + "..." : s) + "'";
    }
    if (n.IsSequence()) return "a list";
    if (n.IsMap()) return "a mapping";
    return "nothing";
  }

 private:
  void check_range(const YAML::Node& n, const std::string& path, double v, const Range& r) {
    const std::string unit = r.unit.empty() ? "" : " " + std::string(r.unit);
    if (v < r.min || (r.min_open && v == r.min))
      fail(n, path,
           std::string(r.min_open ? "must be greater than " : "must be at least ") +
               format_number(r.min) + unit + ", got " + shown(n));
    if (v != 0 && std::fpclassify(v) == FP_SUBNORMAL)
      fail(n, path, "is a denormal number, " + shown(n) + ": no measurement is that small");
    if (v < r.low)
      fail(n, path,
           "must be at least " + format_number(r.low) + unit +
               (r.low_note.empty() ? "" : " (" + std::string(r.low_note) + ")") + ", got " +
               shown(n));
    if (v > r.max)
      fail(n, path,
           "must be at most " + format_number(r.max) + unit +
               (r.max_note.empty() ? "" : " (" + std::string(r.max_note) + ")") + ", got " +
               shown(n));
  }
  void note(const YAML::Node& n, const std::string& path) { config_.lines[path] = line_of(n); }

  Config& config_;
};

}  // namespace bmpipe::detail
