#pragma once
/// \file
/// What the importers share (frameworks/megatron/import.hpp, frameworks/mindformers/import.hpp,
/// frameworks/profile/import.hpp): the error that points into the user's own file, the cluster an
/// imported job runs on, and the job itself, which becomes a bmpipe YAML config. Every
/// imported config is loaded (parse_config) before it is returned, and a check that fails
/// there is reported against the flag or key the value came from.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "experiment/config.hpp"

namespace bmpipe {

/// Bad input to an importer: a ConfigError with a column (the CSV importer's FILE:ROW:COL).
/// what() is "FILE:LINE:COLUMN: KEY: MESSAGE", each of FILE, LINE, COLUMN and KEY left out
/// when empty or 0; every part is valid UTF-8, as in ConfigError.
class ImportError : public ConfigError {
 public:
  ImportError(std::string file, int line, int column, std::string key, std::string message);
  int column() const { return column_; }
  const char* what() const noexcept override { return what_.c_str(); }

 private:
  int column_;
  std::string what_;
};

/// Where an imported value came from: the user's file, line (and column) and the flag or
/// key as written. `why`, when set, is what the YAML comment beside the value says instead
/// (a default the framework applies, a derived value).
struct Origin {
  std::string file;
  int line = 0;
  int column = 0;
  std::string key;
  std::string why;
};

/// The cluster an imported job runs on, as the cluster: section of a config.
struct ImportCluster {
  std::string yaml;          ///< "cluster:\n  ...", ending in a newline
  std::string description;   ///< one line for the header comment
  long long devices = 0;     ///< nodes x devices_per_node
  bool has_compute = false;  ///< the device has figures for the analytic cost model
  Origin origin;             ///< the file or the options it came from
};

/// The cluster of `path`, a YAML file holding only a cluster: section (as in a config).
/// It is checked as `bmpipe simulate` would check it; errors name `path` and its lines.
ImportCluster cluster_from_file(const std::string& path);

/// `devices` devices of the hardware preset `name`: one node of them when they are no more
/// than the preset's node size, else whole nodes of that size. Errors name --preset or
/// --devices.
ImportCluster cluster_from_preset(const std::string& name, long long devices);

/// A training job read from a framework's settings, before it becomes YAML. Optional
/// values left empty are not written (bmpipe's defaults apply).
struct ImportedJob {
  std::string source;               ///< the file it was read from ("-" is shown as stdin)
  std::string framework;            ///< "Megatron-LM arguments", for the header
  std::string model_name;           ///< model.name
  std::optional<ModelShape> shape;  ///< an analytic model
  std::vector<LayerGroup> layers;   ///< or measured layer groups
  std::optional<bool> flash_attention, dropout;  ///< analytic only; written when set

  std::string schedule = "1f1b";
  int pp = 1;
  int vpp = 1;
  int tp = 1;
  std::optional<int> dp;  ///< empty: devices / (pp * tp)
  std::optional<int> microbatches, global_batch_size, micro_batch_size, seq_length;
  std::optional<std::string> dtype;  ///< bf16 or fp16
  std::optional<bool> sequence_parallel;
  std::optional<int> zero_stage;
  std::optional<std::string> grad_dtype;  ///< fp32, bf16 or fp16
  std::vector<int> partition;             ///< layers per stage; empty: bmpipe's uniform split
  std::vector<Recompute> recompute;       ///< per layer in model order; empty: none

  /// Config key path ("training.pp", "model.layers[2].forward_ms") -> where its value came
  /// from. A key without an entry takes its nearest parent's.
  std::map<std::string, Origin> origin;
  /// Flags or keys of the input that bmpipe does not model, in input order, once each.
  std::vector<std::string> ignored;
  /// What the config approximates, one sentence each.
  std::vector<std::string> notes;

  /// Records `key`'s origin.
  void from(const std::string& key, Origin o) { origin[key] = std::move(o); }
  /// Adds `what` to `ignored` unless it is there already.
  void ignore(const std::string& what);
};

/// `job` on `cluster` as a bmpipe config, with a header saying where it came from and a
/// comment beside every value naming its flag or key. `out_name` stands for the file in
/// messages of the final check (parse_config), which are reported against the origin of
/// the key they name. Throws ImportError for an analytic job on a cluster without compute
/// figures.
std::string imported_yaml(const ImportedJob& job, const ImportCluster& cluster,
                          const std::string& out_name);

/// The text of `path`, or of standard input for "-"; at most `max_bytes`. Errors name the
/// file.
std::string read_input(const std::string& path, std::size_t max_bytes);

/// The model's name for an imported job: the input file's stem, or `fallback` for standard
/// input ("-") or a name without a stem.
std::string model_name_of(const std::string& path, const std::string& fallback);

/// `path` as messages show it: "<stdin>" for "-".
std::string shown_path(const std::string& path);

}  // namespace bmpipe
