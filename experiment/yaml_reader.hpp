#pragma once
// Internal to bmpipe_config: a YAML walker that remembers the key path and line of all it
// reads and turns every surprise into a ConfigError. Each config section's reader
// (config.cpp, and the section files beside it) uses it.

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <sstream>
#include <string>
#include <string_view>

#include "experiment/config.hpp"

namespace bmpipe::detail {

/// Walks a YAML document, remembering the key path and line of everything it reads, and
/// turns every surprise into a ConfigError.
class Reader {
 public:
  Reader(Config& config) : config_(config) {}

  [[noreturn]] void fail(const YAML::Node& node, const std::string& key, const std::string& msg) {
    throw ConfigError(config_.file, node.IsDefined() ? node.Mark().line + 1 : 0, key, msg);
  }

  /// A mapping whose keys must all be in `allowed`.
  void expect_map(const YAML::Node& node, const std::string& key,
                  std::initializer_list<std::string_view> allowed) {
    if (!node.IsMap()) fail(node, key, "expected a mapping of keys");
    for (const auto& kv : node) {
      const std::string name = kv.first.as<std::string>();
      if (std::find(allowed.begin(), allowed.end(), name) == allowed.end()) {
        std::string known;
        for (auto a : allowed) known += (known.empty() ? "" : ", ") + std::string(a);
        fail(kv.first, join(key, name), "unknown key (expected one of: " + known + ")");
      }
    }
    note(node, key);
  }

  YAML::Node child(const YAML::Node& map, const std::string& key, const char* name, bool required) {
    YAML::Node n = map[name];
    if (!n.IsDefined() || n.IsNull()) {
      if (required) fail(map, join(key, name), "missing required key");
      return YAML::Node(YAML::NodeType::Undefined);
    }
    note(n, join(key, name));
    return n;
  }

  double number(const YAML::Node& map, const std::string& key, const char* name, bool required,
                double fallback, double min, bool min_exclusive) {
    YAML::Node n = child(map, key, name, required);
    if (!n.IsDefined()) return fallback;
    const std::string path = join(key, name);
    double v = 0;
    if (!n.IsScalar() || !YAML::convert<double>::decode(n, v) || !std::isfinite(v))
      fail(n, path, "expected a number, got '" + text(n) + "'");
    if (v < min || (min_exclusive && v == min))
      fail(n, path,
           "must be " + std::string(min_exclusive ? "greater than " : "at least ") + shortest(min) +
               ", got " + text(n));
    return v;
  }

  std::int64_t integer(const YAML::Node& map, const std::string& key, const char* name,
                       bool required, std::int64_t fallback, std::int64_t min) {
    YAML::Node n = child(map, key, name, required);
    if (!n.IsDefined()) return fallback;
    return integer_value(n, join(key, name), min);
  }

  std::int64_t integer_value(const YAML::Node& n, const std::string& path, std::int64_t min) {
    std::int64_t v = 0;
    if (!n.IsScalar() || !YAML::convert<std::int64_t>::decode(n, v))
      fail(n, path, "expected an integer, got '" + text(n) + "'");
    if (v < min) fail(n, path, "must be at least " + std::to_string(min) + ", got " + text(n));
    note(n, path);
    return v;
  }

  int small_int(const YAML::Node& map, const std::string& key, const char* name, bool required,
                int fallback, int min) {
    const std::int64_t v = integer(map, key, name, required, fallback, min);
    if (v > 1'000'000'000) fail(map[name], join(key, name), "is implausibly large");
    return static_cast<int>(v);
  }

  std::string string(const YAML::Node& map, const std::string& key, const char* name, bool required,
                     std::string fallback) {
    YAML::Node n = child(map, key, name, required);
    if (!n.IsDefined()) return fallback;
    if (!n.IsScalar()) fail(n, join(key, name), "expected a string");
    return n.as<std::string>();
  }

  bool boolean(const YAML::Node& map, const std::string& key, const char* name, bool fallback) {
    YAML::Node n = child(map, key, name, false);
    if (!n.IsDefined()) return fallback;
    bool v = false;
    if (!n.IsScalar() || !YAML::convert<bool>::decode(n, v))
      fail(n, join(key, name), "expected true or false, got '" + text(n) + "'");
    return v;
  }

  /// A string that must be one of `allowed`; the message lists them.
  std::string choice(const YAML::Node& map, const std::string& key, const char* name,
                     std::string fallback, std::initializer_list<std::string_view> allowed) {
    YAML::Node n = child(map, key, name, false);
    if (!n.IsDefined()) return fallback;
    if (!n.IsScalar()) fail(n, join(key, name), "expected a string");
    const std::string v = n.Scalar();
    if (std::find(allowed.begin(), allowed.end(), v) == allowed.end()) {
      std::string known;
      for (auto a : allowed) known += (known.empty() ? "" : ", ") + std::string(a);
      fail(n, join(key, name), "unknown value '" + v + "' (expected one of: " + known + ")");
    }
    return v;
  }

  /// Records that `path` was read at `n`'s line, for checks made after parsing.
  void mark(const YAML::Node& n, const std::string& path) { note(n, path); }

  static std::string join(const std::string& key, const std::string& name) {
    return key.empty() ? name : key + "." + name;
  }

 private:
  void note(const YAML::Node& n, const std::string& path) {
    config_.lines[path] = n.Mark().line + 1;
  }
  static std::string text(const YAML::Node& n) {
    if (n.IsScalar()) return n.Scalar();
    if (n.IsSequence()) return "a list";
    if (n.IsMap()) return "a mapping";
    return "nothing";
  }
  static std::string shortest(double v) {
    std::ostringstream os;
    os << v;
    return os.str();
  }
  Config& config_;
};

}  // namespace bmpipe::detail
