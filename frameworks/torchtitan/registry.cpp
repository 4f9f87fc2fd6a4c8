#include "frameworks/torchtitan/registry.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <climits>
#include <map>
#include <optional>
#include <vector>

#include "experiment/suggest.hpp"
#include "frameworks/common/shell_words.hpp"
#include "frameworks/torchtitan/import.hpp"
#include "frameworks/torchtitan/rules.hpp"

// Sources (read, not copied): pytorch/torchtitan (github.com/pytorch/torchtitan) at
// b5bcd76c66d0 (2026-08-21, "Introduce a storage seam in BaseCheckpointManager (#4186)"),
// cited by these short names:
//  [R-manager]  torchtitan/config/manager.py, ConfigManager._load_config: --module and
//               --config (each also as --x=y) are both required; a short module name of
//               torchtitan.models._supported_models (deepseek_v3, flux, gpt_oss, kimi_k2_7,
//               llama3, muse_glimmer, qwen3, qwen3_5) loads torchtitan.models.NAME.
//               config_registry, another name NAME.config_registry or NAME; the config is a
//               function of that module ("Config function '...' not found in ..."). The other
//               words are tyro's `--section.option VALUE` (bool fields as `--x.flag` and
//               `--x.no-flag`; list[str] comma-separated), which take precedence over the
//               function's values (ConfigManager's docstring: "CLI args > config_registry
//               function defaults").
//  [R-configs]  torchtitan/config/configs.py: TrainingConfig num_tokens_per_microbatch_per_
//               dp_rank 16384 ("Number of input-token slots processed per data-parallel rank
//               in one model forward"), num_tokens_per_train_step -1 ("Global number of
//               input-token slots across data-parallel ranks, pipeline microbatches, and
//               gradient accumulation steps"), max_context_length 2048, disable_cuda_graphs
//               False; ParallelismConfig num_pp_microbatches 1 ("Number of pipeline
//               microbatches per data-parallel rank and gradient accumulation iteration ...
//               ignored when pipeline parallelism is disabled"), enable_sequence_parallel
//               True, spmd_backend "spmd_types", and no pipeline_parallel_microbatch_size,
//               enable_async_tensor_parallel, expert_tensor_parallel_degree or
//               expert_parallel_comm_backend any more; CompileConfig
//               enable_async_tensor_parallel False; the other defaults are v0.2.2's.
//               Trainer.Config.model_spec is tyro.conf.Suppress: the model, its flavor and
//               its converters are not options (torchtitan/config/README.md).
//  [R-trainer]  torchtitan/trainer.py, _validate_cuda_graphs: unless
//               training.disable_cuda_graphs, the forward+backward step is captured as a CUDA
//               graph, and pipeline_parallel_degree > 1 ("CUDA graphs do not support pipeline
//               parallelism yet") or expert_parallel_degree > 1 with the standard token
//               dispatcher is refused.
//  [R-trainer-config] torchtitan/trainer.py, Trainer.Config: besides v0.2.2's sections,
//               hf_assets_path, dump_folder, profiler, tokenizer, dataloader, validator,
//               override (code overrides: override.imports) and loss.
//  [R-llama3]   torchtitan/models/llama3/config_registry.py: llama3_8b (model_registry("8B"),
//               num_tokens_per_microbatch_per_dp_rank 1 * 8192, max_context_length 8192,
//               SelectiveAC), llama3_70b ("70B", 8 * 8192, 8192, tensor_parallel_degree 8,
//               FullAC), llama3_405b ("405B" with Float8LinearConverter(filter_fqns=
//               ["lm_head"]), 2 * 8192, 8192, tensor_parallel_degree 8, FullAC, CompileConfig(
//               enable=True, enable_async_tensor_parallel=True)).
//  [R-dsv3]     torchtitan/models/deepseek_v3/config_registry.py: deepseek_v3_16b
//               (model_registry("16B", attn_backend="flex"), 4 * 4096, 4096,
//               disable_cuda_graphs True, pipeline_parallel_schedule "Interleaved1F1B",
//               expert_parallel_degree 8, SelectiveAC, CompileConfig(enable=True, components=
//               ["loss"])), deepseek_v3_671b ("671B", the same but expert_parallel_degree 2).
//  [R-ac]       torchtitan/distributed/activation_checkpoint.py: SelectiveAC is the per-op
//               policy that "recomputes every second matmul" (v0.2.2's selective_ac_option
//               "op"); FullAC checkpoints every block.
//  [R-float8]   torchtitan/components/quantization/float8.py: Float8LinearConverter.Config
//               recipe_name defaults to "rowwise" (tensorwise is gone).

namespace bmpipe {

namespace {

constexpr std::string_view kCommit = kTorchTitanRegistryCommit;

// clang-format off
constexpr TorchTitanSetting kLlama3_8b[] = {
    {"model.name", "llama3"}, {"model.flavor", "8B"},
    {"training.num_tokens_per_microbatch_per_dp_rank", "8192"},
    {"training.max_context_length", "8192"},
    {"activation_checkpoint.mode", "selective"},
    {"activation_checkpoint.selective_ac_option", "op"},
};
constexpr TorchTitanSetting kLlama3_70b[] = {
    {"model.name", "llama3"}, {"model.flavor", "70B"},
    {"training.num_tokens_per_microbatch_per_dp_rank", "65536"},
    {"training.max_context_length", "8192"},
    {"parallelism.tensor_parallel_degree", "8"},
    {"activation_checkpoint.mode", "full"},
};
constexpr TorchTitanSetting kLlama3_405b[] = {
    {"model.name", "llama3"}, {"model.flavor", "405B"},
    {"model.converters", "quantize.linear.float8"},
    {"quantize.linear.float8.recipe_name", "rowwise"},
    {"training.num_tokens_per_microbatch_per_dp_rank", "16384"},
    {"training.max_context_length", "8192"},
    {"parallelism.tensor_parallel_degree", "8"},
    {"activation_checkpoint.mode", "full"},
    {"compile.enable", "true"},
    {"compile.enable_async_tensor_parallel", "true"},
};
constexpr TorchTitanSetting kDeepSeekV3_16b[] = {
    {"model.name", "deepseek_v3"}, {"model.flavor", "16B"},
    {"training.num_tokens_per_microbatch_per_dp_rank", "16384"},
    {"training.max_context_length", "4096"},
    {"training.disable_cuda_graphs", "true"},
    {"parallelism.pipeline_parallel_schedule", "Interleaved1F1B"},
    {"parallelism.expert_parallel_degree", "8"},
    {"activation_checkpoint.mode", "selective"},
    {"activation_checkpoint.selective_ac_option", "op"},
    {"compile.enable", "true"},
    {"compile.components", "loss"},
};
constexpr TorchTitanSetting kDeepSeekV3_671b[] = {
    {"model.name", "deepseek_v3"}, {"model.flavor", "671B"},
    {"training.num_tokens_per_microbatch_per_dp_rank", "16384"},
    {"training.max_context_length", "4096"},
    {"training.disable_cuda_graphs", "true"},
    {"parallelism.pipeline_parallel_schedule", "Interleaved1F1B"},
    {"parallelism.expert_parallel_degree", "2"},
    {"activation_checkpoint.mode", "selective"},
    {"activation_checkpoint.selective_ac_option", "op"},
    {"compile.enable", "true"},
    {"compile.components", "loss"},
};

constexpr std::array kRegistry = {
    TorchTitanRegistryEntry{"llama3", "llama3_8b", kLlama3_8b},
    TorchTitanRegistryEntry{"llama3", "llama3_70b", kLlama3_70b},
    TorchTitanRegistryEntry{"llama3", "llama3_405b", kLlama3_405b},
    TorchTitanRegistryEntry{"deepseek_v3", "deepseek_v3_16b", kDeepSeekV3_16b},
    TorchTitanRegistryEntry{"deepseek_v3", "deepseek_v3_671b", kDeepSeekV3_671b},
};

// The other functions of the two registries at b5bcd76c66d0, which bmpipe has no shape of
// (debug models, and variants whose changes are in the model spec: NVFP4, MXFP8, LoRA,
// MTP, other token dispatchers).
constexpr std::string_view kNotCarried[] = {
    "llama3_debugmodel", "llama3_debugmodel_varlen_attn", "llama3_debugmodel_dist_gemm",
    "llama3_debugmodel_float8", "llama3_debugmodel_nvfp4",
    "llama3_debugmodel_first_85_pct_layers_nvfp4", "llama3_debugmodel_float8_emulate_lora",
    "llama3_debugmodel_ce_loss", "llama3_8b_first_85_pct_layers_nvfp4", "llama3_8b_mxfp8",
    "sft_debugmodel", "deepseek_v3_debugmodel", "deepseek_v3_debugmodel_mtp",
    "deepseek_v3_debugmodel_mxfp8", "deepseek_v3_debugmodel_hybridep",
    "deepseek_v3_debugmodel_minimal_async_ep", "deepseek_v3_16b_hybridep",
    "deepseek_v3_16b_minimal_async_ep", "deepseek_v3_671b_float8",
};

// torchtitan.models._supported_models [R-manager].
constexpr std::string_view kModules[] = {"deepseek_v3", "flux", "gpt_oss", "kimi_k2_7",
                                         "llama3", "muse_glimmer", "qwen3", "qwen3_5"};
// clang-format on

/// The short module name of `module`: "llama3" for "llama3", "torchtitan.models.llama3" and
/// "torchtitan.models.llama3.config_registry"; else `module` itself.
std::string short_module(std::string_view module) {
  std::string m(module);
  const std::string prefix = "torchtitan.models.", suffix = ".config_registry";
  if (m.rfind(prefix, 0) == 0) m = m.substr(prefix.size());
  if (m.size() > suffix.size() && m.compare(m.size() - suffix.size(), suffix.size(), suffix) == 0)
    m.resize(m.size() - suffix.size());
  return m;
}

/// Where a value of the synthesised TOML came from: the command's line and the flag as
/// written ("--parallelism.tensor_parallel_degree", or "--config llama3_70b" for the
/// registry's), and for a registry value what it is.
struct From {
  int line = 0;
  std::string key;
  std::string why;
};

/// A value for the TOML, as its literal.
struct Setting {
  std::string literal;
  From from;
};

/// The v0.2.2 flags torchtitan renamed or took off the command line by b5bcd76c66d0
/// [R-configs], and what says it now.
constexpr std::pair<std::string_view, std::string_view> kRenamed[] = {
    {"training.local_batch_size", "--training.num_tokens_per_microbatch_per_dp_rank"},
    {"training.batch_size", "--training.num_tokens_per_microbatch_per_dp_rank"},
    {"training.seq_len", "--training.max_context_length"},
    {"training.global_batch_size", "--training.num_tokens_per_train_step"},
    {"parallelism.pipeline_parallel_microbatch_size",
     "--training.num_tokens_per_microbatch_per_dp_rank and --parallelism.num_pp_microbatches"},
    {"parallelism.enable_async_tensor_parallel", "--compile.enable_async_tensor_parallel"},
    {"parallelism.expert_tensor_parallel_degree",
     "nothing: expert tensor parallelism is gone from ParallelismConfig"},
    {"parallelism.expert_parallel_comm_backend",
     "the model spec's moe_comm_backend (a config function, not an option)"},
};

/// The options of b5bcd76c66d0 that v0.2.2 did not have and that bmpipe reads.
constexpr std::string_view kNewOptions[] = {
    "training.num_tokens_per_microbatch_per_dp_rank",
    "training.num_tokens_per_train_step",
    "training.max_context_length",
    "training.disable_cuda_graphs",
    "parallelism.num_pp_microbatches",
    "parallelism.enable_sequence_parallel",
    "parallelism.spmd_backend",
    "compile.enable_async_tensor_parallel",
};

bool is_integer(const std::string& v) {
  const std::size_t start = !v.empty() && (v[0] == '-' || v[0] == '+') ? 1 : 0;
  return v.size() > start && v.size() - start <= 18 &&
         std::all_of(v.begin() + static_cast<std::ptrdiff_t>(start), v.end(),
                     [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

/// `v` as a TOML basic string.
std::string quoted(const std::string& v) {
  std::string out = "\"";
  for (const char c : v) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20 || u == 0x7F) {
      static const char* hex = "0123456789ABCDEF";
      out += "\\u00";
      out += hex[u >> 4];
      out += hex[u & 15];
    } else {
      out += c;
    }
  }
  return out + "\"";
}

class Command {
 public:
  Command(std::string file, ImportedJob& job) : file_(std::move(file)), job_(job) {}

  [[noreturn]] void fail(int line, const std::string& key, const std::string& message) const {
    throw ImportError(file_, line, 0, key, message);
  }

  void read(const std::vector<ShellWord>& words) {
    // The words torchtitan's train.py is given: after `torchtitan.train` (python -m or
    // torchrun -m) or run_train.sh; before it, the launcher's and the environment's.
    std::size_t begin = 0;
    for (std::size_t i = 0; i < words.size(); ++i) {
      const std::string& w = words[i].text;
      if (w == "torchtitan.train" || w == "torchtitan/train.py" || w == "run_train.sh" ||
          (w.size() > 13 && w.compare(w.size() - 13, 13, "/run_train.sh") == 0)) {
        begin = i + 1;
        break;
      }
    }
    for (std::size_t i = 0; i < begin; ++i) environment(words[i]);
    if (begin == 0)  // no launcher: leading VAR=value words are the environment
      while (begin < words.size() && environment(words[begin])) ++begin;
    for (std::size_t i = begin; i < words.size(); ++i) {
      const ShellWord& w = words[i];
      if (w.boundary) break;  // "| tee log", "2>&1", "; echo done": past the command
      if (w.expansion)
        fail(w.line, w.text,
             "a shell expansion ($ or `), which bmpipe does not perform; write the value");
      std::string flag = w.text, value;
      bool has_value = false;
      if (const std::size_t eq = flag.find('='); flag.rfind("--", 0) == 0 && eq != flag.npos) {
        value = flag.substr(eq + 1);
        flag.resize(eq);
        has_value = true;
      } else if (i + 1 < words.size() && !words[i + 1].boundary &&
                 words[i + 1].text.rfind("--", 0) != 0) {
        value = words[i + 1].text;
        has_value = true;
        if (words[i + 1].expansion)
          fail(words[i + 1].line, flag,
               "a shell expansion ($ or `), which bmpipe does not perform; write the value");
      }
      if (flag == "--module" || flag == "--config") {
        if (!has_value || value.empty())
          fail(w.line, flag,
               flag.substr(2) +
                   " requires a value (torchtitan's --module llama3 --config "
                   "llama3_8b)");
        if (w.text == flag) ++i;
        (flag == "--module" ? module_ : config_) = {value, w.line};
        continue;
      }
      const bool top = flag == "--hf_assets_path" || flag == "--dump_folder";
      if (!top && (flag.rfind("--", 0) != 0 || flag.find('.') == flag.npos || flag.size() < 5))
        fail(w.line, flag,
             "expected --module NAME, --config FUNCTION or an option --section.option [VALUE] "
             "(torchtitan's command line), got '" +
                 w.text + "'");
      if (has_value && w.text == flag) ++i;
      option(flag.substr(2), has_value ? std::optional<std::string>(value) : std::nullopt, w.line);
    }
  }

  /// The TOML of the job and, per line of it, where that line came from.
  std::string toml(std::vector<From>& lines) {
    const TorchTitanRegistryEntry& entry = find_entry();
    // The registry's values first, then the command's, which take precedence [R-manager].
    for (const TorchTitanSetting& s : entry.settings)
      apply(std::string(s.key), std::string(s.value),
            From{config_.line, "--config " + config_.text,
                 "torchtitan's " + std::string(entry.config) + ": " + std::string(s.key) + " " +
                     std::string(s.value)});
    for (const auto& [key, s] : pending_) apply(key, s.literal, s.from);
    derive();

    std::map<std::string, std::vector<std::pair<std::string, const Setting*>>> sections;
    for (const auto& [key, s] : settings_) {
      const std::size_t dot = key.rfind('.');
      sections[key.substr(0, dot)].emplace_back(key.substr(dot + 1), &s);
    }
    std::string out;
    lines.assign(1, From{config_.line, "--config " + config_.text, ""});  // line 0
    for (const auto& [section, keys] : sections) {
      out += "[" + section + "]\n";
      lines.push_back(keys.front().second->from);
      for (const auto& [leaf, s] : keys) {
        out += leaf + " = " + s->literal + "\n";
        lines.push_back(s->from);
      }
    }
    return out;
  }

  /// What bmpipe does with CUDA graphs, after the TOML reader has read the job [R-trainer].
  void cuda_graphs(ImportedJob& job) const {
    if (disable_graphs_) return;
    const int pp = integer_of("parallelism.pipeline_parallel_degree", 1);
    const int ep = integer_of("parallelism.expert_parallel_degree", 1);
    const From where = graphs_from_.line > 0 ? graphs_from_ : From{config_.line, "--config", ""};
    // Blame the flag the command gave: --training.disable_cuda_graphs false, or the degree.
    const auto blame = [&](const std::string& key) -> const From& {
      return graphs_from_.key.rfind("--", 0) == 0 && graphs_from_.key.find(' ') == std::string::npos
                 ? graphs_from_
                 : settings_.at(key).from;
    };
    // torchtitan's rule (frameworks/torchtitan/rules.cpp), blamed on the command's flags.
    const FrameworkRule& rule = rule_by_id(torchtitan_rules(), "torchtitan.cuda-graphs");
    Config probe;
    probe.training.cuda_graphs = "full_iteration";
    probe.training.pp = pp;
    if (rule.check(probe))
      fail(blame("parallelism.pipeline_parallel_degree").line,
           blame("parallelism.pipeline_parallel_degree").key,
           "CUDA graphs do not support pipeline parallelism yet. Set "
           "--training.disable_cuda_graphs (torchtitan's check, trainer.py)");
    probe.training.pp = 1;
    probe.training.ep = ep;  // the registry's dispatcher is the standard one
    if (rule.check(probe))
      fail(blame("parallelism.expert_parallel_degree").line,
           blame("parallelism.expert_parallel_degree").key,
           "CUDA graphs support only expert parallel token dispatcher configurations without "
           "CPU synchronization; set --training.disable_cuda_graphs (torchtitan's check, "
           "trainer.py)");
    job.cuda_graphs = "full_iteration";
    job.from("training.cuda_graphs",
             Origin{file_, where.line, 0, "training.disable_cuda_graphs",
                    "training.disable_cuda_graphs false: the forward+backward step is one CUDA "
                    "graph"});
  }

 private:
  struct Word {
    std::string text;
    int line = 0;
  };

  /// A VAR=value word before the command: run_train.sh's MODULE, CONFIG and NGPU.
  bool environment(const ShellWord& w) {
    const std::size_t eq = w.text.find('=');
    if (eq == std::string::npos || eq == 0 || w.text[0] == '-') return false;
    const std::string var = w.text.substr(0, eq), value = w.text.substr(eq + 1);
    if (!std::all_of(var.begin(), var.end(), [](char c) {
          return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
        }))
      return false;
    if (var == "MODULE") module_ = {value, w.line};
    if (var == "CONFIG") config_ = {value, w.line};
    if (var == "NGPU")
      job_.ignore("NGPU=" + value + " (the devices come from --devices or --cluster)");
    return true;
  }

  /// An option of the command line: `key` without its dashes, its value if any.
  void option(const std::string& key, const std::optional<std::string>& value, int line) {
    const std::string flag = "--" + key;
    // Trainer.Config's fields that v0.2.2's TOML did not have [R-trainer-config]: paths and
    // the components that cannot change time or memory are listed as not modelled; the
    // loss's options and the code overrides can, and bmpipe does not model them.
    for (const std::string_view inert :
         {"hf_assets_path", "dump_folder", "profiler.", "tokenizer.", "dataloader.", "validator."})
      if (key == inert || (inert.back() == '.' && key.rfind(inert, 0) == 0)) {
        if (!value && (key == "hf_assets_path" || key == "dump_folder"))
          fail(line, flag, "expected a value after " + flag);
        job_.ignore(key + " (not modelled)");
        return;
      }
    for (const std::string_view part : {"loss.", "override."})
      if (key.rfind(part, 0) == 0) {
        job_.unmodelled.push_back(Unmodelled{
            Origin{file_, line, 0, flag, ""}, flag + (value ? " " + *value : ""),
            part == "loss."
                ? "the loss's options (its chunking changes the logits' memory), which bmpipe "
                  "does not model"
                : "modules imported in place of torchtitan's (kernels bmpipe does not cost)"});
        return;
      }
    if (key.rfind("model.", 0) == 0)
      fail(line, flag,
           "not an option of torchtitan's command line at " + std::string(kCommit) +
               ": Trainer.Config.model_spec is tyro.conf.Suppress, so the model, its flavor "
               "and converters come from the --config function");
    std::string k = key, v;
    if (value) {
      v = *value;
    } else {
      // tyro's bool flags: --compile.enable, --compile.no-enable (or no_enable).
      const std::size_t dot = k.rfind('.');
      const std::string leaf = k.substr(dot + 1);
      if (leaf.rfind("no-", 0) == 0 || leaf.rfind("no_", 0) == 0) {
        const std::string positive = k.substr(0, dot + 1) + leaf.substr(3);
        if (known(positive)) {
          k = positive;
          v = "false";
        }
      }
      if (v.empty()) v = "true";
    }
    if (!known(k)) {
      for (const auto& [old, now] : kRenamed)
        if (k == old)
          fail(line, flag,
               "not an option of torchtitan at " + std::string(kCommit) +
                   " (it was in v0.2.2's job TOML); torchtitan says it with " + std::string(now));
      std::vector<std::string> names(std::begin(kNewOptions), std::end(kNewOptions));
      for (const VocabularyEntry& e : torchtitan_vocabulary().entries())
        if (e.name.find('.') != std::string::npos) names.push_back(e.name);
      fail(line, flag, "unknown option: torchtitan has no --" + k + did_you_mean(k, names));
    }
    if (!value && !is_bool_option(k)) fail(line, flag, "expected a value after " + flag);
    pending_[k] = Setting{v, From{line, flag, ""}};
  }

  static bool known(const std::string& key) {
    for (const std::string_view n : kNewOptions)
      if (key == n) return true;
    for (const auto& [old, now] : kRenamed)
      if (key == old) return false;
    const VocabularyEntry* e = torchtitan_vocabulary().find(key);
    return e && !is_section(key);
  }
  static bool is_section(const std::string& key) {
    for (const VocabularyEntry& e : torchtitan_vocabulary().entries())
      if (e.name.size() > key.size() && e.name.compare(0, key.size() + 1, key + ".") == 0)
        return true;
    return false;
  }
  /// The options a bare flag sets to true: v0.2.2's and the new boolean ones.
  static bool is_bool_option(const std::string& key) {
    static const char* kBools[] = {"training.disable_cuda_graphs",
                                   "parallelism.enable_sequence_parallel",
                                   "compile.enable_async_tensor_parallel",
                                   "compile.enable",
                                   "training.compile",
                                   "training.enable_cpu_offload",
                                   "parallelism.disable_loss_parallel",
                                   "parallelism.enable_compiled_autograd"};
    for (const char* b : kBools)
      if (key == b) return true;
    // An inert option: its value does not matter to bmpipe.
    const VocabularyEntry* e = torchtitan_vocabulary().find(key);
    return e && e->treatment == Treatment::inert;
  }

  /// A whole number of a new option [R-configs], at least `lo`.
  long long number(const std::string& v, const From& from, long long lo) const {
    if (!is_integer(v)) fail(from.line, from.key, "expected an integer, got '" + v + "'");
    const long long n = std::stoll(v);
    if (n < lo)
      fail(from.line, from.key,
           "must be at least " + std::to_string(lo) + ", got " + std::to_string(n));
    // Past int: no job bmpipe can simulate, and products of two stay within long long.
    if (n > INT_MAX)
      fail(from.line, from.key,
           "must be at most " + std::to_string(INT_MAX) + ", got " + std::to_string(n));
    return n;
  }
  bool truth(const std::string& v, const From& from) const {
    if (v == "true" || v == "True") return true;
    if (v == "false" || v == "False") return false;
    fail(from.line, from.key, "expected true or false, got '" + v + "'");
  }

  /// Sets `key` (a 2026 option, or one of keys.tsv) to the command-line value `v`.
  void apply(const std::string& key, const std::string& v, const From& from) {
    if (key == "training.max_context_length") {
      context_ = {number(v, from, 1), from};
    } else if (key == "training.num_tokens_per_microbatch_per_dp_rank") {
      tokens_ = {number(v, from, 1), from};
    } else if (key == "training.num_tokens_per_train_step") {
      const long long n = number(v, from, -1);
      if (n == 0)
        fail(from.line, from.key, "num_tokens_per_train_step must be -1 or greater than 0.");
      step_tokens_ = {n, from};
    } else if (key == "parallelism.num_pp_microbatches") {
      microbatches_ = {number(v, from, 1), from};
    } else if (key == "training.disable_cuda_graphs") {
      disable_graphs_ = truth(v, from);
      graphs_from_ = from;
    } else if (key == "parallelism.enable_sequence_parallel") {
      if (!truth(v, from))
        job_.unmodelled.push_back(Unmodelled{Origin{file_, from.line, 0, from.key, ""},
                                             from.key + " false",
                                             "tensor parallelism without sequence parallelism "
                                             "(bmpipe's tensor parallelism is sequence parallel)"});
    } else if (key == "parallelism.spmd_backend") {
      if (v != "partial_dtensor" && v != "spmd_types")
        fail(from.line, from.key, "expected partial_dtensor or spmd_types, got '" + v + "'");
      job_.ignore(key + " (not modelled)");
    } else if (key == "compile.enable_async_tensor_parallel") {
      settings_["parallelism.enable_async_tensor_parallel"] =
          Setting{truth(v, from) ? "true" : "false", from};
    } else if (key == "compile.components" || key == "model.converters") {
      std::string list = "[";
      std::size_t start = 0;
      while (start <= v.size()) {
        const std::size_t comma = std::min(v.find(',', start), v.size());
        if (list.size() > 1) list += ", ";
        list += quoted(v.substr(start, comma - start));
        start = comma + 1;
      }
      settings_[key] = Setting{list + "]", from};
    } else if (key == "activation_checkpoint.selective_ac_option" ||
               !(is_integer(v) || v == "true" || v == "false" || v == "True" || v == "False")) {
      settings_[key] = Setting{quoted(v), from};
    } else if (v == "True" || v == "False") {
      settings_[key] = Setting{v == "True" ? "true" : "false", from};
    } else {
      settings_[key] = Setting{v, from};
    }
  }

  int integer_of(const std::string& key, int fallback) const {
    const auto it = settings_.find(key);
    if (it == settings_.end() || !is_integer(it->second.literal)) return fallback;
    const long long n = std::stoll(it->second.literal);
    return n > 0 && n < 1000000 ? static_cast<int>(n) : fallback;
  }

  /// The batch in v0.2.2's words: sequences of max_context_length, a micro-batch of
  /// num_tokens_per_microbatch_per_dp_rank tokens, num_pp_microbatches of them a pass
  /// under pipeline parallelism, num_tokens_per_train_step tokens a step [R-configs].
  void derive() {
    const long long len = context_.value, tokens = tokens_.value;
    const From len_from = context_.from.line ? context_.from : config_origin_;
    const From tokens_from = tokens_.from.line ? tokens_.from : config_origin_;
    // A misfit names the flag the command gave, if it gave one of the two.
    const From& misfit = context_.from.key.find(' ') == std::string::npos &&
                                 !context_.from.key.empty() &&
                                 tokens_.from.key.find(' ') != std::string::npos
                             ? context_.from
                             : tokens_from;
    settings_["training.seq_len"] = Setting{std::to_string(len), len_from};
    if (tokens % len != 0)
      fail(misfit.line, misfit.key,
           "bmpipe models whole sequences of max_context_length: " + std::to_string(tokens) +
               " tokens a micro-batch are not a multiple of " + std::to_string(len));
    const long long per = tokens / len;
    From why = tokens_from;
    why.why = "num_tokens_per_microbatch_per_dp_rank / max_context_length";
    if (integer_of("parallelism.pipeline_parallel_degree", 1) > 1) {
      settings_["parallelism.pipeline_parallel_microbatch_size"] =
          Setting{std::to_string(per), why};
      From local = microbatches_.from.line ? microbatches_.from : tokens_from;
      local.why = "num_pp_microbatches x the micro-batch's sequences";
      settings_["training.local_batch_size"] =
          Setting{std::to_string(per * microbatches_.value), local};
    } else {
      if (microbatches_.from.line)
        job_.ignore("parallelism.num_pp_microbatches (no pipeline parallelism)");
      settings_["training.local_batch_size"] = Setting{std::to_string(per), why};
    }
    if (step_tokens_.value > 0) {
      if (step_tokens_.value % len != 0)
        fail(step_tokens_.from.line, step_tokens_.from.key,
             "bmpipe models whole sequences of max_context_length: " +
                 std::to_string(step_tokens_.value) + " tokens a step are not a multiple of " +
                 std::to_string(len));
      From g = step_tokens_.from;
      g.why = "num_tokens_per_train_step / max_context_length";
      settings_["training.global_batch_size"] =
          Setting{std::to_string(step_tokens_.value / len), g};
    }
  }

  const TorchTitanRegistryEntry& find_entry() {
    if (module_.text.empty())
      fail(config_.line, "--module",
           "--module is required. Example: --module llama3 --config llama3_8b");
    if (config_.text.empty())
      fail(module_.line, "--config",
           "--config is required. Example: --module llama3 --config llama3_8b");
    config_origin_ = From{config_.line, "--config " + config_.text, ""};
    const std::string m = short_module(module_.text);
    if (m != "llama3" && m != "deepseek_v3") {
      const bool torchtitans =
          std::find(std::begin(kModules), std::end(kModules), m) != std::end(kModules);
      fail(module_.line, "--module",
           torchtitans ? "bmpipe carries the config registries of llama3 and deepseek_v3, not " + m
                       : "Cannot import module '" + module_.text +
                             "' (torchtitan's short names: deepseek_v3, flux, gpt_oss, "
                             "kimi_k2_7, llama3, muse_glimmer, qwen3, qwen3_5)" +
                             did_you_mean(m, std::vector<std::string>(std::begin(kModules),
                                                                      std::end(kModules))));
    }
    if (const TorchTitanRegistryEntry* e = find_torchtitan_config(m, config_.text)) return *e;
    std::vector<std::string> carried;
    for (const TorchTitanRegistryEntry& e : kRegistry)
      if (e.module == m) carried.emplace_back(e.config);
    std::string list;
    for (const std::string& c : carried) list += (list.empty() ? "" : ", ") + c;
    if (std::find(std::begin(kNotCarried), std::end(kNotCarried), config_.text) !=
        std::end(kNotCarried))
      fail(config_.line, "--config",
           "torchtitan registers " + config_.text +
               ", but bmpipe has no table of it (a debug model, or a change in the model spec "
               "bmpipe does not read); it carries " +
               list);
    fail(config_.line, "--config",
         "Config function '" + config_.text + "' not found in torchtitan.models." + m +
             ".config_registry" + did_you_mean(config_.text, carried) + " (bmpipe carries " + list +
             ")");
  }

  struct Number {
    long long value;
    From from;
  };

  std::string file_;
  ImportedJob& job_;
  Word module_, config_;
  From config_origin_;
  std::map<std::string, Setting> pending_, settings_;
  Number context_{2048, {}}, tokens_{16384, {}}, step_tokens_{-1, {}}, microbatches_{1, {}};
  bool disable_graphs_ = false;
  From graphs_from_;
};

}  // namespace

std::span<const TorchTitanRegistryEntry> torchtitan_registry() {
  return kRegistry;
}

const TorchTitanRegistryEntry* find_torchtitan_config(std::string_view module,
                                                      std::string_view config) {
  const std::string m = short_module(module);
  for (const TorchTitanRegistryEntry& e : kRegistry)
    if (e.module == m && e.config == config) return &e;
  return nullptr;
}

bool is_torchtitan_command(const std::string& text) {
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    if (i < text.size() && text[i] == '#') {  // a comment, TOML's or the shell's
      while (i < text.size() && text[i] != '\n') ++i;
      continue;
    }
    const std::size_t start = i;
    while (i < text.size() && !std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    const std::string_view w(text.data() + start, i - start);
    if (w == "--module" || w == "--config" || w.rfind("--module=", 0) == 0 ||
        w.rfind("--config=", 0) == 0 || w.rfind("MODULE=", 0) == 0 || w.rfind("CONFIG=", 0) == 0)
      return true;
  }
  return false;
}

ImportedJob read_torchtitan_command(const std::string& text, const std::string& name) {
  const std::string file = shown_path(name);
  ImportedJob job;
  Command command(file, job);
  command.read(split_shell_words(text, name));
  std::vector<From> lines;
  const std::string toml = command.toml(lines);
  const auto at = [&](int line) -> const From& {
    return line > 0 && static_cast<std::size_t>(line) < lines.size()
               ? lines[static_cast<std::size_t>(line)]
               : lines[0];
  };
  ImportedJob read;
  try {
    read = read_torchtitan_toml(toml, name);
  } catch (const ImportError& e) {
    const From& f = at(e.line());
    // The reader's key when it is not the flag the command gave ("training.seq_len" of
    // --training.max_context_length, or any of the registry's).
    std::string message = e.message();
    if (!e.key().empty() && "--" + e.key() != f.key) message += " (read as " + e.key() + ")";
    throw ImportError(file, f.line, 0, f.key, message);
  }
  // Where the values came from: the command's lines and flags, not the TOML's.
  for (auto& [key, o] : read.origin) {
    if (o.file != file) continue;
    const From& f = at(o.line);
    if (o.why.empty()) o.why = f.why.empty() ? "" : f.why;
    o.line = f.line;
    o.column = 0;
    o.key = f.key;
  }
  for (Unmodelled& u : read.unmodelled) {
    const From& f = at(u.origin.line);
    u.origin = Origin{file, f.line, 0, f.key, ""};
  }
  for (Unmodelled& u : job.unmodelled) read.unmodelled.push_back(u);
  for (const std::string& i : job.ignored) read.ignore(i);
  command.cuda_graphs(read);
  read.framework =
      "torchtitan command line, config registry at pytorch/torchtitan " + std::string(kCommit);
  return read;
}

ImportedJob read_torchtitan(const std::string& text, const std::string& name) {
  return is_torchtitan_command(text) ? read_torchtitan_command(text, name)
                                     : read_torchtitan_toml(text, name);
}

}  // namespace bmpipe
