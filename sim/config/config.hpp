#pragma once
/// \file
/// The experiment as the user wrote it: plain structs filled from YAML, and the one place
/// where input is checked. Every key carries its unit in its name (memory_GiB,
/// bandwidth_GBps, latency_us, forward_ms, *_bytes). Unknown keys, wrong types, missing
/// or negative values, and contradictions between sections are ConfigErrors that name
/// the file, the line and the key path.

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "sim/topology.hpp"

namespace bmpipe {

/// Bad input. `line` is 1-based, 0 when no line applies (a command-line override).
class ConfigError : public std::runtime_error {
 public:
  ConfigError(std::string file, int line, std::string key, std::string message);
  const std::string& file() const { return file_; }
  int line() const { return line_; }
  const std::string& key() const { return key_; }
  const std::string& message() const { return message_; }

 private:
  std::string file_;
  int line_;
  std::string key_;
  std::string message_;
};

struct DeviceSpec {
  std::string name = "device";
  double memory_GiB = 0.0;
  double reserved_GiB = 0.0;  ///< taken by the framework before any tensor
};

/// A run of identical layers with measured costs (per micro-batch).
struct LayerGroup {
  std::string name;
  int count = 1;
  double forward_ms = 0.0;
  double backward_input_ms = 0.0;
  double backward_weight_ms = 0.0;
  double recompute_ms = 0.0;                       ///< extra backward time, if recomputed
  std::int64_t activation_bytes = 0;               ///< kept from forward to backward
  std::int64_t weight_grad_retained_bytes = -1;    ///< kept until W; -1 = all of it
  std::int64_t output_bytes = 0;                   ///< sent to the next layer / stage
  std::int64_t param_bytes = 0;                    ///< weights
  std::int64_t grad_bytes = 0;                     ///< gradient buffers
  std::int64_t optimizer_bytes = 0;                ///< optimizer state (and master weights)
};

struct ModelConfig {
  std::string name = "model";
  std::vector<LayerGroup> layers;
  int num_layers() const;
};

struct TrainingConfig {
  std::string schedule = "1f1b";
  int pp = 1;
  int vpp = 1;
  int tp = 1;
  int dp = 0;  ///< 0: derived as devices / (pp * tp)
  int microbatches = 1;
  std::vector<int> partition;  ///< layers per stage; empty = uniform
  /// Duration of an overlapped forward-and-backward pair (DualPipeV's F&B) as a factor of
  /// F + B of its two halves; 1 = no gain from overlapping.
  double overlap_factor = 1.0;
  /// Alternatively, the pair's duration in ms (overrides overlap_factor when > 0).
  double overlap_ms = 0.0;
  /// Activation-memory limit per device, in micro-batches of one stage's activations, for
  /// schedules that take one (zb-auto). 0 = not given.
  int activation_limit_microbatches = 0;
};

struct Config {
  std::string file;  ///< where it was read from, for messages
  ClusterSpec cluster;
  DeviceSpec device;
  ModelConfig model;
  TrainingConfig training;
  /// 1-based line of every key path that was read ("training.pp" -> 12), so checks made
  /// after parsing can still point at the line.
  std::map<std::string, int> lines;

  /// Throws a ConfigError about `key`, pointing at its line if known.
  [[noreturn]] void fail(const std::string& key, const std::string& message) const;
};

/// Reads and checks a YAML file.
Config load_config(const std::string& path);
/// Same, from text; `name` stands for the file in messages.
Config parse_config(const std::string& yaml_text, const std::string& name);

/// Values given on the command line, which win over the file.
struct Overrides {
  std::optional<std::string> schedule;
  std::optional<int> pp;
  std::optional<int> vpp;
  std::optional<int> microbatches;
};

/// Applies overrides and re-runs the cross-field checks. An override that makes the
/// experiment impossible names the option, e.g. "--pp".
void apply_overrides(Config& config, const Overrides& overrides);

/// The cross-field checks (pp divides the devices, the partition adds up, the schedule
/// exists, ...). load_config runs them; call again after changing a Config by hand.
void check_config(const Config& config);

}  // namespace bmpipe
