#include "frameworks/torchtitan/registry_export.hpp"

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <utility>

#include "frameworks/torchtitan/flavors.hpp"
#include "frameworks/torchtitan/formats.hpp"
#include "frameworks/torchtitan/registry.hpp"
#include "schedules/registry.hpp"

// Sources (read, not copied): pytorch/torchtitan at b5bcd76c66d0, as
// frameworks/torchtitan/registry.cpp cites them: [R-manager] (the command line: --module,
// --config, then tyro's --section.option VALUE, bool fields as --x.flag / --x.no-flag;
// "CLI args > config_registry function defaults"), [R-configs] (the token-counted batch:
// max_context_length, num_tokens_per_microbatch_per_dp_rank, num_tokens_per_train_step,
// num_pp_microbatches; compile.enable_async_tensor_parallel; no expert tensor parallelism and
// no expert_parallel_comm_backend option; the model spec is not an option), [R-trainer] (CUDA
// graphs of the whole step unless training.disable_cuda_graphs, refused with pipeline
// parallelism or with expert parallelism on the standard dispatcher), and the registered
// functions of torchtitan/models/{llama3,deepseek_v3}/config_registry.py (registry.cpp's
// table). The split: torchtitan/distributed/pipeline_parallel.py, as formats.hpp's
// torchtitan_partition.

namespace bmpipe {

namespace {

/// The registered function of `flavor`, or nullptr.
const TorchTitanRegistryEntry* entry_of(const TorchTitanFlavor& flavor) {
  for (const TorchTitanRegistryEntry& e : torchtitan_registry()) {
    std::string_view name, f;
    for (const TorchTitanSetting& s : e.settings) {
      if (s.key == "model.name") name = s.value;
      if (s.key == "model.flavor") f = s.value;
    }
    if (name == flavor.model && f == flavor.flavor) return &e;
  }
  return nullptr;
}

/// The function's value of `key`, if it sets one.
std::optional<std::string_view> entry_value(const TorchTitanRegistryEntry& e,
                                            std::string_view key) {
  for (const TorchTitanSetting& s : e.settings)
    if (s.key == key) return s.value;
  return std::nullopt;
}

/// Whether the function converts any module (a converter the command cannot remove).
bool converts(const TorchTitanRegistryEntry& e) {
  const std::optional<std::string_view> c = entry_value(e, "model.converters");
  return c && !c->empty();
}

/// How the importer reads a split from the command: the stages of `pp` ranks (one each, or
/// two for multi-stage schedules, or pipeline_parallel_layers_per_stage), the first and last
/// counted as holding `in` and `out` layers more.
struct Split {
  int in = 1, out = 1;  ///< ..._first_stage_less_layers, ..._last_stage_less_layers
  int per_stage = 0;    ///< pipeline_parallel_layers_per_stage (0: not given)
  std::vector<int> partition;
};

/// The split the command states for `layers` decoder layers in `stages` stages on ranks of
/// `default_per_rank` stages by default, nearest to `want`: `want` itself when some
/// first/last weights give it, else torchtitan's own (weights 1 and 1).
Split split_for(int layers, int stages, int pp, int default_per_rank,
                const std::vector<int>& want) {
  const auto stated = [&](int in, int out) -> std::optional<Split> {
    Split s{in, out, 0, {}};
    if (stages != pp * default_per_rank) {
      // Find a layers-per-stage the importer turns into `stages`: ceil(effective / per).
      const int effective = layers + in + out;
      for (int per = 1; per <= effective && s.per_stage == 0; ++per)
        if ((effective + per - 1) / per == stages) s.per_stage = per;
      if (s.per_stage == 0) return std::nullopt;
    }
    try {
      s.partition = torchtitan_partition(layers, stages, in, out);
    } catch (const FormatError&) {
      return std::nullopt;
    }
    return s;
  };
  // Of the weights that give `want`, the fewest options away from torchtitan's 1 and 1,
  // then the nearest to them.
  const int most = layers / std::max(1, stages) + 1;
  std::optional<Split> best;
  const auto cost = [](const Split& s) {
    return std::pair{(s.in != 1) + (s.out != 1), std::abs(s.in - 1) + std::abs(s.out - 1)};
  };
  for (int in = 0; in <= most; ++in)
    for (int out = 0; out <= most; ++out)
      if (const std::optional<Split> s = stated(in, out);
          s && s->partition == want && (!best || cost(*s) < cost(*best)))
        best = s;
  if (best) return *best;
  if (std::optional<Split> s = stated(1, 1)) return *s;
  return Split{1, 1, 0, want};  // no split states it: left to check_export_layout's message
}

/// torchtitan's defaults of the options the command writes, which it leaves out where the
/// function sets none: v0.2.2's (frameworks/torchtitan/import.cpp [TT-config]), which
/// b5bcd76c66d0 kept, and its new options' [R-configs].
constexpr std::pair<std::string_view, std::string_view> kDefaults[] = {
    {"training.mixed_precision_param", "bfloat16"},
    {"training.disable_cuda_graphs", "false"},
    {"parallelism.data_parallel_replicate_degree", "1"},
    {"parallelism.tensor_parallel_degree", "1"},
    {"parallelism.pipeline_parallel_degree", "1"},
    {"parallelism.pipeline_parallel_schedule", "1F1B"},
    {"parallelism.num_pp_microbatches", "1"},
    {"parallelism.context_parallel_degree", "1"},
    {"parallelism.expert_parallel_degree", "1"},
    {"compile.enable", "false"},
    {"compile.enable_async_tensor_parallel", "false"},
    {"compile.components", "model,loss"},
};

/// The value `key` has when the command does not give it: the function's, else torchtitan's
/// default (none known: nullopt).
std::optional<std::string_view> unstated_value(const TorchTitanRegistryEntry& e,
                                               std::string_view key) {
  if (const std::optional<std::string_view> v = entry_value(e, key)) return v;
  for (const auto& [k, v] : kDefaults)
    if (k == key) return v;
  return std::nullopt;
}

/// A TOML literal as the command line writes it: strings unquoted, lists comma-separated.
std::string command_value(const std::string& literal) {
  if (literal.size() >= 2 && literal.front() == '"' && literal.back() == '"')
    return literal.substr(1, literal.size() - 2);
  if (literal.size() >= 2 && literal.front() == '[' && literal.back() == ']') {
    std::string out;
    for (char c : literal.substr(1, literal.size() - 2))
      if (c != '"' && c != ' ') out += c;
    return out;
  }
  return literal;
}

}  // namespace

std::string torchtitan_registry_refusal(const Config& config) {
  if (!config.model.shape)
    return "torchtitan's config registry names a model by a registered function of its "
           "flavor; a measured model has none";
  const TorchTitanFlavor* flavor = torchtitan_flavor_of(*config.model.shape);
  if (!flavor) return "";  // torchtitan_refusal says why, as for the TOML
  const TorchTitanRegistryEntry* e = entry_of(*flavor);
  if (!e)
    return "torchtitan's config registry (pytorch/torchtitan " +
           std::string(kTorchTitanRegistryCommit) + ") registers no function of " +
           std::string(flavor->model) + " " + std::string(flavor->flavor) +
           "; --format torchtitan writes its job TOML";
  // The function's float8 rowwise converter is its model spec: the job must be that.
  const TrainingConfig& t = config.training;
  if (converts(*e) && (t.fp8 == "none" || t.fp8_recipe != "rowwise"))
    return "torchtitan's " + std::string(e->config) + " converts its linears (" +
           std::string(*entry_value(*e, "model.converters")) +
           ", recipe rowwise), which its command line cannot turn off: set training.fp8 e4m3 "
           "with fp8_recipe rowwise, or --format torchtitan writes its job TOML";
  return "";
}

Config torchtitan_registry_restated(const Config& config, std::vector<std::string>& dropped) {
  // CUDA graphs as the 2026 trainer takes them (below), not as the TOML's restatement.
  Config without = config;
  without.training.cuda_graphs.clear();
  Config c = torchtitan_restated(without, dropped);
  TrainingConfig& t = c.training;
  const ParallelMesh mesh = config.mesh();
  const std::string graphs = config.training.cuda_graphs;
  if (!graphs.empty() && graphs != "none") {
    // The command line states the standard token dispatcher whatever the config's (deepep
    // is dropped below): torchtitan's rule (frameworks/torchtitan/rules.cpp) refuses its
    // graphs at ep > 1.
    const bool standard_ep = mesh.ep() > 1;
    if (graphs != "full_iteration")
      dropped.push_back("training.cuda_graphs " + graphs +
                        ": torchtitan captures the whole forward and backward step or nothing; "
                        "stated without.");
    else if (mesh.pp() > 1 || standard_ep)
      dropped.push_back(
          "training.cuda_graphs full_iteration: torchtitan refuses CUDA graphs with " +
          std::string(mesh.pp() > 1 ? "pipeline parallelism" : "the standard token dispatcher") +
          " (trainer.py, _validate_cuda_graphs); stated without.");
    else
      t.cuda_graphs = "full_iteration";
  }
  const TorchTitanFlavor* flavor =
      config.model.shape ? torchtitan_flavor_of(*config.model.shape) : nullptr;
  const TorchTitanRegistryEntry* entry = flavor ? entry_of(*flavor) : nullptr;
  if (t.fp8 != "none" && !(entry && converts(*entry))) {
    dropped.push_back("training.fp8 " + t.fp8 +
                      ": the registry's converters are its functions' model spec, which the "
                      "command line cannot set, and this flavor's function has none; stated "
                      "without FP8.");
    t.fp8 = "none";
  }
  if (t.moe_dispatcher == "deepep") {
    dropped.push_back(
        "training.moe_dispatcher deepep: the token dispatcher is the registered function's "
        "model spec (deepseek_v3_16b runs the standard one); stated so.");
    t.moe_dispatcher = "alltoall";
  }
  if (config.model.shape && config.model.shape->is_moe() && mesh.etp() != 1) {
    dropped.push_back("expert tensor parallelism " + std::to_string(mesh.etp()) +
                      ": gone from torchtitan's ParallelismConfig; stated as 1.");
    t.etp = 1;
  }
  return c;
}

TorchTitanExport torchtitan_registry_plan(const ExportLayout& layout) {
  TorchTitanExport x = torchtitan_plan(layout);
  if (layout.pp <= 1) return x;
  const int layers = static_cast<int>(layout.recompute.size());
  const int stages = export_stage_count(layout);
  // Without a split option the importer builds 1 stage per rank, or 2 for multi-stage
  // schedules (import.cpp [TT-pp]); the layout's placement says which schedule it runs.
  const int default_per_rank = layout.vpp > 1 ? 2 : 1;
  const Split s = split_for(layers, stages, layout.pp, default_per_rank, layout.partition);
  if (s.partition == layout.partition) return x;
  ExportLayout moved = x.expressed;
  moved.partition = s.partition;
  TorchTitanExport y = torchtitan_plan(moved);
  const std::string why =
      "the command line has no module_fqns_per_model_part (a list per stage); it splits by "
      "how many layers fewer the first and last stages hold, and no such split is this "
      "plan's: stated as torchtitan's own split";
  y.exact = false;
  y.note = x.note.empty() ? why + "." : x.note.substr(0, x.note.size() - 1) + "; " + why + ".";
  return y;
}

std::string torchtitan_registry_command(const TorchTitanExport& x, const ExportJob& job,
                                        std::string_view schedule) {
  const TorchTitanFlavor* flavor = job.shape ? torchtitan_flavor_of(*job.shape) : nullptr;
  const TorchTitanRegistryEntry* entry = flavor ? entry_of(*flavor) : nullptr;
  if (!entry)  // torchtitan_registry_refusal refuses these first
    throw std::logic_error("torchtitan_registry_command: the job's flavor has no function");
  const ExportLayout& l = x.expressed;
  std::vector<std::pair<std::string, std::string>> options;  // dotted key, command value
  const auto set = [&](const std::string& key, const std::string& value) {
    options.emplace_back(key, value);
  };
  // The batch in tokens [R-configs]: sequences of max_context_length, a micro-batch of
  // num_tokens_per_microbatch_per_dp_rank, num_pp_microbatches of them under a pipeline.
  const long long seq = job.seq_length;
  set("training.max_context_length", std::to_string(seq));
  set("training.num_tokens_per_microbatch_per_dp_rank", std::to_string(seq * job.micro_batch_size));
  set("training.num_tokens_per_train_step", std::to_string(seq * job.global_batch_size()));
  if (l.pp > 1) set("parallelism.num_pp_microbatches", std::to_string(job.microbatches));
  for (const TorchTitanKey& k : torchtitan_job_keys(x, job, schedule)) {
    const std::string key = k.section + "." + k.key;
    if (k.section == "model" || key == "training.local_batch_size" ||
        key == "training.global_batch_size" || key == "training.seq_len" ||
        key == "parallelism.pipeline_parallel_microbatch_size" ||
        key == "parallelism.expert_tensor_parallel_degree" ||
        key == "parallelism.expert_parallel_comm_backend")
      continue;  // said above, or the function's model spec (restated to its value)
    if (key == "parallelism.module_fqns_per_model_part") {
      const int stages = export_stage_count(l);
      const Split s = split_for(static_cast<int>(l.recompute.size()), stages, l.pp,
                                l.vpp > 1 ? 2 : 1, l.partition);
      if (s.per_stage > 0)
        set("parallelism.pipeline_parallel_layers_per_stage", std::to_string(s.per_stage));
      if (s.in != 1)
        set("parallelism.pipeline_parallel_first_stage_less_layers", std::to_string(s.in));
      if (s.out != 1)
        set("parallelism.pipeline_parallel_last_stage_less_layers", std::to_string(s.out));
      continue;
    }
    set(key == "parallelism.enable_async_tensor_parallel" ? "compile.enable_async_tensor_parallel"
                                                          : key,
        command_value(k.literal));
  }
  const std::string graphs = job.cuda_graphs;
  set("training.disable_cuda_graphs", graphs == "full_iteration" ? "false" : "true");

  std::ostringstream out;
  out << "# torchtitan's 2026 launch (pytorch/torchtitan " << kTorchTitanRegistryCommit
      << ", run_train.sh): the config registry's " << entry->config << " for " << job.devices
      << " GPUs, with the options that make its job this one\n";
  out << "# " << l.recompute.size() << " decoder layers; global batch " << job.global_batch_size()
      << " sequences of " << seq << " tokens\n";
  out << "NGPU=" << job.devices << " MODULE=" << entry->module << " CONFIG=" << entry->config
      << " ./run_train.sh";
  for (const auto& [key, value] : options) {
    const std::optional<std::string_view> given = unstated_value(*entry, key);
    if (given && *given == value) continue;  // the function's own value, or the default
    const bool flag = value == "true" || value == "false";
    if (flag) {
      // tyro's bool fields: --x.flag sets it, --x.no-flag clears it [R-manager].
      const std::size_t dot = key.rfind('.');
      out << " \\\n  --"
          << (value == "true" ? key : key.substr(0, dot + 1) + "no-" + key.substr(dot + 1));
    } else {
      out << " \\\n  --" << key << " " << value;
    }
  }
  out << "\n";
  return out.str();
}

}  // namespace bmpipe
