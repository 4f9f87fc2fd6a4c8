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

#include "sim/cost/cost_model.hpp"
#include "sim/cost/hardware.hpp"
#include "sim/cost/model_shape.hpp"
#include "sim/recompute.hpp"
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
  /// Compute figures for the analytic cost model: from `preset:` with any key overriding
  /// it, or from explicit peak_tflops + hbm_GBps. Empty for a device described only by
  /// its memory (enough for measured layer costs). Its links mirror cluster.intra_node /
  /// inter_node.
  std::optional<HardwareSpec> hardware;
};

/// What a measured layer costs when it runs in one recompute mode other than none.
struct LayerModeCosts {
  double recompute_ms = 0.0;                               ///< extra backward time
  std::int64_t activation_bytes = 0;                       ///< kept from forward to backward
  std::optional<std::int64_t> weight_grad_retained_bytes;  ///< kept until W; none = all
};

/// A run of identical layers with measured costs (per micro-batch).
struct LayerGroup {
  std::string name;
  int count = 1;
  double forward_ms = 0.0;
  double backward_input_ms = 0.0;
  double backward_weight_ms = 0.0;
  double recompute_ms = 0.0;                     ///< extra backward time, if recomputed
  std::int64_t activation_bytes = 0;             ///< kept from forward to backward
  std::optional<std::int64_t> weight_grad_retained_bytes;  ///< kept until W; none = all of it
  std::int64_t output_bytes = 0;                 ///< sent to the next layer / stage
  std::int64_t param_bytes = 0;                  ///< weights
  std::int64_t grad_bytes = 0;                   ///< gradient buffers
  std::int64_t optimizer_bytes = 0;              ///< optimizer state (and master weights)
  /// The modes this group can run besides none, from its `recompute` map; the keys above
  /// are the none mode (with recompute_ms, if given, as extra time it always pays).
  /// [Recompute::none] is never set.
  PerMode<std::optional<LayerModeCosts>> recompute;
};

struct ModelConfig {
  std::string name = "model";
  /// Measured form: layer groups with their costs. Empty for an analytic model.
  std::vector<LayerGroup> layers;
  /// Analytic form (`preset:`, `hf_config:` or explicit shape keys): the cost model
  /// (sim/cost) turns it into per-layer costs in make_sim_input.
  std::optional<ModelShape> shape;
  bool analytic() const { return shape.has_value(); }
  int num_layers() const;
};

/// Where recomputation applies. A layer's mode is its `layers` entry if any, else its
/// stage's `stages` entry, else `global`.
struct RecomputeSpec {
  Recompute global = Recompute::none;
  std::map<int, Recompute> stages;  ///< stage index (0 .. pp*vpp-1) -> mode
  std::map<int, Recompute> layers;  ///< decoder-layer index (0 .. num_layers-1) -> mode
};

struct TrainingConfig {
  std::string schedule = "1f1b";
  int pp = 1;
  int vpp = 1;
  int tp = 1;
  std::optional<int> dp;  ///< not given: derived as devices / (pp * tp)
  int microbatches = 1;
  std::vector<int> partition;  ///< layers per stage; empty = uniform
  /// Duration of an overlapped forward-and-backward pair (DualPipeV's F&B) as a factor of
  /// F + B of its two halves; 1 = no gain from overlapping.
  double overlap_factor = 1.0;
  /// Alternatively, the pair's duration in ms (overrides overlap_factor when given).
  std::optional<double> overlap_ms;
  /// Activation-memory limit per device, in micro-batches of one stage's activations, for
  /// schedules that take one (zb-auto).
  std::optional<int> activation_limit_microbatches;

  // Batch: microbatches = global_batch_size / (micro_batch_size * dp). Either key may be
  // given; both must then agree.
  std::optional<int> seq_length;  ///< tokens per sample; required by the analytic model
  int micro_batch_size = 1;
  std::optional<int> global_batch_size;
  bool microbatches_given = false;  ///< `microbatches` was in the file (or an override)
  // Analytic model only.
  std::string dtype = "bf16";  ///< bf16 or fp16 (2 bytes, tensor-core peak)
  bool sequence_parallel = false;
  OptimizerSettings optimizer;
  RecomputeSpec recompute;

  /// dp as given, or devices / (pp * tp).
  int data_parallel(int devices) const { return dp ? *dp : devices / (pp * tp); }
  int dtype_bytes() const { return 2; }
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

/// Derives training.microbatches from global_batch_size (or checks that the two agree).
/// load_config and apply_overrides call it; call it after changing pp, tp, dp or the batch
/// of a Config by hand.
void resolve_batch(Config& config);

/// Applies overrides and re-runs the cross-field checks. An override that makes the
/// experiment impossible names the option, e.g. "--pp".
void apply_overrides(Config& config, const Overrides& overrides);

/// The cross-field checks (pp divides the devices, the partition adds up, the schedule
/// exists, ...). load_config runs them; call again after changing a Config by hand.
void check_config(const Config& config);

}  // namespace bmpipe
