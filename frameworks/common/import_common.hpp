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
#include <string_view>
#include <utility>
#include <vector>

#include "experiment/config.hpp"
#include "experiment/framework_rules.hpp"

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
  std::string yaml;         ///< "cluster:\n  ...", ending in a newline
  std::string description;  ///< one line for the header comment
  long long devices = 0;    ///< nodes x devices_per_node
  /// --preset with --devices N that are not whole nodes: N, on the nodes that hold them.
  std::optional<long long> job_devices;
  bool has_compute = false;  ///< the device has figures for the analytic cost model
  double memory_GiB = 0;     ///< the device's memory (cluster.device.memory_GiB)
  Origin origin;             ///< the file or the options it came from
};

// ---- the vocabulary of a framework ---------------------------------------------------------

/// What an importer does with one of the framework's flags or keys.
enum class Treatment {
  modelled,    ///< read into the job
  inert,       ///< cannot change time or memory: listed as ignored
  unmodelled,  ///< changes time or memory, not modelled: refused unless allowed
  obsolete,    ///< the framework itself refuses it
};

/// One row of a vocabulary table.
struct VocabularyEntry {
  std::string name;
  Treatment treatment = Treatment::inert;
  /// unmodelled only: the values ('|' between them) with which it changes nothing bmpipe
  /// models (for Megatron-LM, the value taken when the flag is absent).
  std::optional<std::string> harmless;
  std::string reason;  ///< unmodelled and obsolete: what it does, or what to use instead
  /// How many words follow it as its values, when the table says (a fifth column): the
  /// fewest it needs, and the most it takes (-1: no limit). A switch takes 0 and 0.
  std::optional<std::pair<int, int>> values;

  /// Whether `value` is one of the harmless values.
  bool harmless_value(std::string_view value) const;
};

/// Every flag or key a framework reads, each with its treatment: a table compiled into bmpipe
/// (frameworks/megatron/flags.tsv, frameworks/mindformers/keys.tsv). One row a line, tab-
/// separated: NAME, CLASS (modelled, inert, unmodelled, obsolete), HARMLESS and REASON ('-'
/// for none), and for a command line's flags VALUES (argparse's nargs: 0 for a switch, N,
/// '+', '*' or '?'), in every row or none; '#' starts a comment line.
class Vocabulary {
 public:
  /// Parses `text`; a malformed row or a name given twice throws std::logic_error naming
  /// `source` and the line (the table is bmpipe's own, so that is a bug in bmpipe).
  Vocabulary(std::string_view text, std::string_view source);
  const VocabularyEntry* find(std::string_view name) const;
  const std::vector<VocabularyEntry>& entries() const { return entries_; }
  /// " (did you mean 'x'?)" for the closest name, or "".
  std::string suggestion(std::string_view name) const;

 private:
  std::vector<VocabularyEntry> entries_;
  std::map<std::string, std::size_t, std::less<>> index_;
  std::vector<std::string> names_;
};

/// A flag or key the job was given that changes time or memory in a way bmpipe does not
/// model (Treatment::unmodelled). The import refuses the job unless asked to allow them.
struct Unmodelled {
  Origin origin;       ///< where it was given; key: the flag or key
  std::string given;   ///< as given: "--fp8-format hybrid"
  std::string reason;  ///< what it does that bmpipe does not model
};

/// The refusal of `u`: "FILE:LINE: KEY: not modelled yet; the simulated job would differ
/// from yours (REASON) ...", naming the others after the first.
ImportError unmodelled_error(const std::vector<Unmodelled>& u);

/// The warning for `u` when allowed: "--fp8-format hybrid is not modelled; the simulated
/// job differs from yours (REASON)".
std::string unmodelled_warning(const Unmodelled& u);

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
  /// training.devices: the job runs on part of the cluster (empty: all of it).
  std::optional<long long> devices;
  std::optional<int> ep, etp;  ///< expert (tensor) parallel sizes; written when set
  /// Context parallelism (training.cp, cp_comm_type) and FP8 GEMMs (training.fp8,
  /// fp8_recipe); written when set.
  std::optional<int> cp;
  std::optional<std::string> cp_comm_type, fp8, fp8_recipe;
  /// training.cp_hierarchy (hierarchical cp, inner first); written when not empty.
  std::vector<int> cp_hierarchy;
  std::optional<bool> fp8_param_gather;    ///< training.fp8_param_gather
  std::optional<std::string> cuda_graphs;  ///< training.cuda_graphs; written when set
  /// training.recompute_modules (a comma list, or "none"); written when set.
  std::optional<std::string> recompute_modules;
  /// training.offload_modules (a comma list); written when set.
  std::optional<std::string> offload_modules;
  /// training.offload_layers (whole-layer offload); written when set.
  std::optional<int> offload_layers;
  std::optional<int> microbatches, global_batch_size, micro_batch_size, seq_length;
  std::optional<std::string> dtype;    ///< bf16 or fp16
  std::optional<std::string> kernels;  ///< training.kernels (eager or fused); written when set
  std::optional<bool> sequence_parallel;
  std::optional<int> zero_stage;
  std::optional<std::string> grad_dtype;  ///< fp32, bf16 or fp16
  std::vector<int> partition;             ///< layers per stage; empty: bmpipe's uniform split
  /// Megatron-LM's --pipeline-model-parallel-layout as given (training.megatron_layout).
  std::optional<std::string> megatron_layout;
  std::vector<Recompute> recompute;  ///< per layer in model order; empty: none
  std::optional<bool> overlap_grad_reduce;
  std::optional<bool> overlap_param_gather;  ///< written when set
  /// training.optimizer.offload_fraction; written when set.
  std::optional<double> optimizer_offload_fraction;
  std::optional<bool> fsdp;  ///< training.fsdp; written when set
  /// Copies of the sharded state (Megatron-LM's --num-distributed-optimizer-instances):
  /// written as training.fsdp_shard_group = dp x cp / this, once the devices are known.
  std::optional<int> shard_copies;
  /// training.fsdp_reshard_after_forward; written when set.
  std::optional<bool> fsdp_reshard_after_forward;
  /// training.fsdp_all_reduce_every_microbatch; written when set.
  std::optional<bool> fsdp_all_reduce_every_microbatch;
  std::optional<bool> moe_overlap;            ///< training.moe_overlap; written when set
  std::optional<std::string> moe_dispatcher;  ///< training.moe_dispatcher; written when set
  std::optional<double> moe_capacity_factor;  ///< training.moe_capacity_factor; when set
  std::optional<bool> vocab_parallel;         ///< training.vocab_parallel; written when set
  std::optional<bool> tp_comm_overlap;        ///< training.tp_comm_overlap; written when set
  /// The memory the framework may use per device, GiB: cluster.device.memory_GiB when below
  /// the device's own (MindFormers' context.max_device_memory).
  std::optional<double> device_memory_GiB;

  /// Config key path ("training.pp", "model.layers[2].forward_ms") -> where its value came
  /// from. A key without an entry takes its nearest parent's.
  std::map<std::string, Origin> origin;
  /// Flags or keys of the input that bmpipe does not model, in input order, once each.
  std::vector<std::string> ignored;
  /// What the config approximates, one sentence each.
  std::vector<std::string> notes;
  /// Flags or keys that change time or memory and that bmpipe does not model, in input
  /// order: the import fails on them unless allowed (api::ImportRequest::allow_unmodelled).
  std::vector<Unmodelled> unmodelled;

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
/// The framework's own `rules` (experiment/framework_rules.hpp) are applied to the config
/// as the loader's are, and reported the same way.
std::string imported_yaml(const ImportedJob& job, const ImportCluster& cluster,
                          const std::string& out_name, std::span<const FrameworkRule> rules = {});

/// The text of `path`, or of standard input for "-"; at most `max_bytes`. Errors name the
/// file.
std::string read_input(const std::string& path, std::size_t max_bytes);

/// The model's name for an imported job: the input file's stem, or `fallback` for standard
/// input ("-") or a name without a stem.
std::string model_name_of(const std::string& path, const std::string& fallback);

/// `path` as messages show it: "<stdin>" for "-".
std::string shown_path(const std::string& path);

}  // namespace bmpipe
