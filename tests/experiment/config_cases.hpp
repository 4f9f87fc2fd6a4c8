#pragma once
// Shared by the config tests: a small valid config to break one thing at a time, and the
// ConfigError a text must raise.
#include <gtest/gtest.h>

#include <string>

#include "experiment/config.hpp"

namespace bmpipe::test {

/// 4 devices, 8 unit layers, 1F1B with pp 4 and 8 micro-batches. Line numbers matter:
/// training.pp is on line 18.
inline const std::string kUnit = R"(cluster:
  nodes: 1
  devices_per_node: 4
  device: {name: unit, memory_GiB: 1}
  intra_node: {bandwidth_GBps: 100, latency_us: 0}
model:
  layers:
    - name: unit
      count: 8
      forward_ms: 0.5
      backward_input_ms: 0.5
      backward_weight_ms: 0.5
      activation_bytes: 1048576
      output_bytes: 0
      param_bytes: 1048576
training:
  schedule: 1f1b
  pp: 4
  microbatches: 8
)";

/// `text` with its first `from` replaced by `to` (the test fails if `from` is absent).
inline std::string with(const std::string& from, const std::string& to,
                        const std::string& text = kUnit) {
  std::string s = text;
  const auto at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) s.replace(at, from.size(), to);
  return s;
}

/// The ConfigError parsing `text` (with `overrides`, as the file `file`) raises; a test
/// failure if none.
inline ConfigError config_error(const std::string& text, const Overrides& overrides = {},
                                const std::string& file = "exp.yaml") {
  try {
    parse_config(text, file, overrides);
  } catch (const ConfigError& e) {
    return e;
  }
  ADD_FAILURE() << "no ConfigError for:\n" << text;
  return ConfigError("", 0, "", "");
}

/// True if `haystack` contains `needle`; for EXPECT_TRUE with the text in the message.
inline ::testing::AssertionResult has(const std::string& haystack, const std::string& needle) {
  if (haystack.find(needle) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << needle << "' not in: " << haystack;
}

}  // namespace bmpipe::test
