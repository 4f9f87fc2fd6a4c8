#include "frameworks/megatron/import.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <climits>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string_view>

#include "experiment/config_fields.hpp"
#include "frameworks/megatron/formats.hpp"
#include "sim/offload.hpp"

// Sources (read, not copied), all Megatron-LM at d98e8a64ddf3, cited by these short names:
//  [MG-args]   megatron/training/arguments.py: the flags (_add_*_args; the parser is built
//              with allow_abbrev=False) and validate_args.
//  [MG-au]     megatron/training/argument_utils.py: the flags generated from the config
//              dataclasses, and core_transformer_config_from_args.
//  [MG-config] megatron/core/transformer/transformer_config.py: defaults (attention_dropout
//              and hidden_dropout 0.1) and __post_init__ checks.
//  [MG-block]  megatron/core/transformer/transformer_block.py: get_num_layers_to_build.
//  [MG-vocab]  megatron/training/vocab_utils.py and
//              megatron/core/tokenizers/utils/build_tokenizer.py: vocab_size_with_padding.
//  [MG-optim]  megatron/core/optimizer/__init__.py (the HybridDeviceOptimizer under
//              optimizer_cpu_offload; "--use-precision-aware-optimizer only supported with
//              distributed optimizer"), optimizer_config.py (store_param_remainders), and
//              cpu_offloading/hybrid_optimizer.py.
//  [MG-hybrid] megatron/core/models/hybrid/hybrid_layer_allocation.py (Symbols, the pattern's
//              layer and segment counts, parse_hybrid_pattern, select_pipeline_segment),
//              validate_args' "Hybrid layer pattern" block in [MG-args], hybrid_builders.py
//              (the hybrid model needs --spec) and megatron/core/models/hybrid/
//              hybrid_layer_specs.py (hybrid_stack_spec; mamba_layer_specs re-exports it).
//  [MG-mamba]  megatron/core/ssm/mamba_mixer.py (MambaMixer.__init__: expand 2, d_conv 4,
//              chunk_size 128, none of them a flag; nheads = d_inner / headdim without
//              --mamba-num-heads; its asserts) and megatron/core/ssm/mamba_layer.py (d_model is
//              the hidden size, no expand passed).
//  [MG-moe]    megatron/core/transformer/moe/ (moe_utils.py, router.py, token_dispatcher.py)
//              with transformer_config.py's MoE checks.
//  [MG-lm]     megatron/core/models/common/language_module/language_module.py:
//              _set_attention_backend (the TransformerEngine attention switches each
//              --attention-backend sets).

namespace bmpipe {

// ---- flags -------------------------------------------------------------------------------

namespace {

enum class Kind { integer, boolean, choice, text, real, list };

struct FlagSpec {
  std::string_view name;
  Kind kind;
  std::span<const std::string_view> choices = {};
};

constexpr std::string_view kGranularity[] = {"full", "selective"};
constexpr std::string_view kMethod[] = {"uniform", "block"};
constexpr std::string_view kDispatcher[] = {"allgather", "alltoall", "flex"};
// [MG-args]'s experimental_attention_variant (TransformerConfig at d98e8a64): bmpipe models
// dsa; gdn, gdn2 and gated_delta_net are refused by read_sparse_attention.
constexpr std::string_view kAttentionVariant[] = {"dsa", "gdn", "gdn2", "gated_delta_net"};
// Megatron-FSDP's --data-parallel-sharding-strategy: what is sharded over dp, in ZeRO order.
constexpr std::string_view kShardingStrategy[] = {"no_shard", "optim", "optim_grads",
                                                  "optim_grads_params"};
constexpr std::string_view kFp8Format[] = {"e4m3", "hybrid"};
// Megatron-LM's --fp4-format and --fp4-recipe (megatron/training/arguments.py: choices
// e2m1 and nvfp4).
constexpr std::string_view kFp4Format[] = {"e2m1"};
constexpr std::string_view kFp4Recipe[] = {"nvfp4"};
// --cuda-graph-impl: TransformerConfig.cuda_graph_impl's Literal at d98e8a64
// (megatron/core/transformer/transformer_config.py), which the parser's choices come from.
constexpr std::string_view kGraphImpl[] = {"none", "local", "transformer_engine", "full_iteration"};
// --position-embedding-type: megatron/training/models/gpt.py's Literal at d98e8a64
// (learned_absolute, rope, mrope, yarn, none), the parser's choices.
constexpr std::string_view kPositionEmbedding[] = {"learned_absolute", "rope", "mrope", "yarn",
                                                   "none"};
// --normalization: TransformerConfig.normalization's Literal at d98e8a64, which the parser's
// choices come from ([MG-au]).
constexpr std::string_view kNormalization[] = {"LayerNorm", "RMSNorm"};
// --attention-backend: AttnBackend's names at d98e8a64 (megatron/core/transformer/enums.py),
// which the parser takes (AttnBackend[name]).
constexpr std::string_view kAttentionBackend[] = {"flash", "fused", "unfused", "local", "auto"};

// The flags bmpipe reads; [MG-args] and [MG-au] give their kinds. Every other flag is
// treated as frameworks/megatron/flags.tsv says (its modelled rows are these).
constexpr FlagSpec kFlags[] = {
    // model
    {"--num-layers", Kind::integer},
    {"--hidden-size", Kind::integer},
    {"--ffn-hidden-size", Kind::integer},
    {"--num-attention-heads", Kind::integer},
    {"--kv-channels", Kind::integer},
    {"--group-query-attention", Kind::boolean},
    {"--num-query-groups", Kind::integer},
    {"--seq-length", Kind::integer},
    {"--vocab-size", Kind::integer},
    {"--make-vocab-size-divisible-by", Kind::integer},
    {"--swiglu", Kind::boolean},
    {"--squared-relu", Kind::boolean},
    {"--normalization", Kind::choice, kNormalization},
    {"--position-embedding-type", Kind::choice, kPositionEmbedding},
    {"--untie-embeddings-and-output-weights", Kind::boolean},
    {"--attention-dropout", Kind::real},
    {"--hidden-dropout", Kind::real},
    {"--use-flash-attn", Kind::boolean},
    {"--attention-backend", Kind::choice, kAttentionBackend},
    // mixture of experts, multi-latent attention, multi-token prediction
    {"--num-experts", Kind::integer},
    {"--moe-router-topk", Kind::integer},
    {"--moe-ffn-hidden-size", Kind::integer},
    {"--moe-shared-expert-intermediate-size", Kind::integer},
    {"--moe-layer-freq", Kind::text},
    {"--moe-token-dispatcher-type", Kind::choice, kDispatcher},
    {"--moe-enable-deepep", Kind::boolean},
    {"--moe-flex-dispatcher-backend", Kind::text},
    {"--moe-router-num-groups", Kind::integer},
    {"--moe-router-group-topk", Kind::integer},
    {"--moe-grouped-gemm", Kind::boolean},
    {"--moe-expert-capacity-factor", Kind::real},
    {"--moe-pad-expert-input-to-capacity", Kind::boolean},
    {"--moe-router-load-balancing-type", Kind::list},
    {"--moe-latent-size", Kind::integer},
    {"--multi-latent-attention", Kind::boolean},
    {"--q-lora-rank", Kind::integer},
    {"--kv-lora-rank", Kind::integer},
    {"--qk-head-dim", Kind::integer},
    {"--qk-pos-emb-head-dim", Kind::integer},
    {"--v-head-dim", Kind::integer},
    {"--experimental-attention-variant", Kind::choice, kAttentionVariant},
    {"--dsa-indexer-n-heads", Kind::integer},
    {"--dsa-indexer-head-dim", Kind::integer},
    {"--dsa-indexer-topk", Kind::integer},
    {"--dsa-indexer-loss-coeff", Kind::real},
    {"--dsa-indexer-use-sparse-loss", Kind::boolean},
    {"--mtp-num-layers", Kind::integer},
    {"--mtp-hybrid-override-pattern", Kind::text},
    {"--mtp-use-repeated-layer", Kind::boolean},
    // hybrid models ([MG-hybrid])
    {"--hybrid-layer-pattern", Kind::text},
    {"--hybrid-override-pattern", Kind::text},
    {"--is-hybrid-model", Kind::boolean},
    {"--mamba-num-heads", Kind::integer},
    {"--mamba-head-dim", Kind::integer},
    {"--mamba-state-dim", Kind::integer},
    {"--mamba-num-groups", Kind::integer},
    {"--spec", Kind::list},
    {"--window-size", Kind::text},
    {"--window-attn-skip-freq", Kind::text},
    // batch and parallelism
    {"--micro-batch-size", Kind::integer},
    {"--global-batch-size", Kind::integer},
    {"--tensor-model-parallel-size", Kind::integer},
    {"--pipeline-model-parallel-size", Kind::integer},
    {"--num-layers-per-virtual-pipeline-stage", Kind::integer},
    {"--num-virtual-stages-per-pipeline-rank", Kind::integer},
    {"--sequence-parallel", Kind::boolean},
    {"--tp-comm-overlap", Kind::boolean},
    {"--expert-model-parallel-size", Kind::integer},
    {"--expert-tensor-parallel-size", Kind::integer},
    {"--overlap-moe-expert-parallel-comm", Kind::boolean},
    // recompute
    {"--recompute-granularity", Kind::choice, kGranularity},
    {"--recompute-method", Kind::choice, kMethod},
    {"--recompute-num-layers", Kind::integer},
    {"--recompute-activations", Kind::boolean},
    {"--recompute-modules", Kind::list},
    // partition
    {"--decoder-first-pipeline-num-layers", Kind::integer},
    {"--decoder-last-pipeline-num-layers", Kind::integer},
    {"--pipeline-model-parallel-layout", Kind::text},
    {"--account-for-embedding-in-pipeline-split", Kind::boolean},
    {"--account-for-loss-in-pipeline-split", Kind::boolean},
    // precision and optimizer
    {"--use-distributed-optimizer", Kind::boolean},
    {"--bf16", Kind::boolean},
    {"--fp16", Kind::boolean},
    {"--accumulate-allreduce-grads-in-fp32", Kind::boolean},
    {"--grad-reduce-in-bf16", Kind::boolean},
    {"--overlap-grad-reduce", Kind::boolean},
    // sharded data parallelism
    {"--use-megatron-fsdp", Kind::boolean},
    {"--use-torch-fsdp2", Kind::boolean},
    {"--data-parallel-sharding-strategy", Kind::choice, kShardingStrategy},
    {"--overlap-param-gather", Kind::boolean},
    {"--num-distributed-optimizer-instances", Kind::integer},
    {"--torch-fsdp2-no-reshard-after-forward", Kind::boolean},
    // activation offload
    {"--fine-grained-activation-offloading", Kind::boolean},
    {"--offload-modules", Kind::list},
    {"--cpu-offloading-num-layers", Kind::integer},
    // optimizer offload
    {"--optimizer-cpu-offload", Kind::boolean},
    {"--optimizer-offload-fraction", Kind::real},
    {"--use-precision-aware-optimizer", Kind::boolean},
    {"--no-pin-cpu-grads", Kind::boolean},
    {"--no-pin-cpu-params", Kind::boolean},
    // context parallelism and FP8
    {"--context-parallel-size", Kind::integer},
    {"--cp-comm-type", Kind::list},
    {"--hierarchical-context-parallel-sizes", Kind::list},
    {"--fp8-format", Kind::choice, kFp8Format},
    {"--fp8-recipe", Kind::text},
    {"--fp4-format", Kind::choice, kFp4Format},
    {"--fp4-recipe", Kind::choice, kFp4Recipe},
    {"--fp8-param-gather", Kind::boolean},
    {"--fp4-param-gather", Kind::boolean},
    // CUDA graphs
    {"--cuda-graph-impl", Kind::choice, kGraphImpl},
    {"--cuda-graph-modules", Kind::list},
    {"--cuda-graph-scope", Kind::list},
    {"--enable-cuda-graph", Kind::boolean},
    {"--external-cuda-graph", Kind::boolean},
};

const FlagSpec* find_flag(std::string_view name) {
  for (const FlagSpec& f : kFlags)
    if (f.name == name) return &f;
  return nullptr;
}

/// The last use of a flag (argparse keeps the last) and how often it was given.
struct Use {
  std::vector<ShellWord> values;
  int line = 0;
  std::vector<int> lines;
};

std::string format_number(double v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

std::string shown(const std::string& s) {
  return "'" + (s.size() > 60 ? s.substr(0, 60) + "..." : s) + "'";
}

class Args {
 public:
  Args(std::string file, std::map<std::string, Use> used)
      : file_(std::move(file)), used_(std::move(used)) {}

  [[noreturn]] void fail(const std::string& flag, const std::string& message) const {
    const auto it = used_.find(flag);
    throw ImportError(file_, it == used_.end() ? 0 : it->second.line, 0, flag, message);
  }
  bool given(const std::string& flag) const { return used_.count(flag) > 0; }
  int line(const std::string& flag) const {
    const auto it = used_.find(flag);
    return it == used_.end() ? 0 : it->second.line;
  }
  Origin origin(const std::string& flag, std::string why = {}) const {
    return Origin{file_, line(flag), 0, flag, std::move(why)};
  }

  /// The one value of `flag`, if given; an error if it has none, several or an expansion.
  std::optional<std::string> single(const std::string& flag) const {
    const auto it = used_.find(flag);
    if (it == used_.end()) return std::nullopt;
    const std::vector<ShellWord>& v = it->second.values;
    if (v.empty()) fail(flag, "expects a value");
    if (v.size() > 1)
      fail(flag, "takes one value, got " + std::to_string(v.size()) + " (" + shown(v[0].text) +
                     ", " + shown(v[1].text) + (v.size() > 2 ? ", ..." : "") + ")");
    if (v[0].expansion)
      fail(flag, "the value " + shown(v[0].text) +
                     " is a shell expansion, which bmpipe does not run: write the value itself");
    return v[0].text;
  }

  std::optional<int> integer(const std::string& flag, int lo) const {
    const auto text = single(flag);
    if (!text) return std::nullopt;
    // argparse's int(): an optional sign, then digits.
    long long v = 0;
    const char* b = text->data();
    const char* e = b + text->size();
    if (b != e && *b == '+') ++b;
    const auto r = std::from_chars(b, e, v);
    if (b == e || r.ec == std::errc::invalid_argument || r.ptr != e)
      fail(flag, "expected an integer, got " + shown(*text));
    if (r.ec == std::errc::result_out_of_range || v > INT_MAX)
      fail(flag, "must be at most " + std::to_string(INT_MAX) + ", got " + shown(*text));
    if (v < lo) fail(flag, "must be at least " + std::to_string(lo) + ", got " + *text);
    return static_cast<int>(v);
  }

  std::optional<double> real(const std::string& flag, double lo, double hi) const {
    const auto text = single(flag);
    if (!text) return std::nullopt;
    double v = 0;
    const auto r = std::from_chars(text->data(), text->data() + text->size(), v);
    if (r.ec != std::errc() || r.ptr != text->data() + text->size() || !std::isfinite(v))
      fail(flag, "expected a number, got " + shown(*text));
    if (v < lo || v > hi)
      fail(flag,
           "must be between " + format_number(lo) + " and " + format_number(hi) + ", got " + *text);
    return v;
  }

  bool boolean(const std::string& flag) const {
    const auto it = used_.find(flag);
    if (it == used_.end()) return false;
    if (!it->second.values.empty())
      fail(flag, "takes no value (it is a switch), got " + shown(it->second.values[0].text));
    return true;
  }

  std::optional<std::string> choice(const std::string& flag) const {
    const auto text = single(flag);
    if (!text) return std::nullopt;
    const FlagSpec* spec = find_flag(flag);
    if (std::find(spec->choices.begin(), spec->choices.end(), *text) == spec->choices.end()) {
      std::string known;
      for (auto c : spec->choices) known += (known.empty() ? "" : ", ") + std::string(c);
      fail(flag, "unknown value " + shown(*text) + " (expected " + known + ")");
    }
    return text;
  }

  std::vector<std::string> list(const std::string& flag) const {
    std::vector<std::string> out;
    const auto it = used_.find(flag);
    if (it == used_.end()) return out;
    if (it->second.values.empty()) fail(flag, "expects at least one value");
    for (const ShellWord& w : it->second.values) out.push_back(w.text);
    return out;
  }

  const std::map<std::string, Use>& used() const { return used_; }

 private:
  std::string file_;
  std::map<std::string, Use> used_;
};

// ---- the reader, by section ---------------------------------------------------------------

/// The launcher's words, [first, second): from the command word before the first Python
/// script ("torchrun --nproc_per_node 8 pretrain_gpt.py ...") up to the script; empty when
/// there is no script, or when its command starts with a flag (a value that names a .py file
/// is no script). Flags there are the launcher's, not Megatron-LM's.
std::pair<std::size_t, std::size_t> launcher_words(const std::vector<ShellWord>& words) {
  std::size_t from = 0;
  for (std::size_t i = 0; i < words.size(); ++i) {
    const std::string& t = words[i].text;
    if (words[i].boundary) {
      from = i + 1;
      continue;
    }
    if (t.size() > 3 && t[0] != '-' && t.compare(t.size() - 3, 3, ".py") == 0)
      return from < i && words[from].text.rfind("--", 0) != 0
                 ? std::pair{from, i}
                 : std::pair{std::size_t{0}, std::size_t{0}};
  }
  return {0, 0};
}

/// The words of `text` as flags: the last use of each flag bmpipe reads (argparse keeps the
/// last), with the values that follow it. Every flag is looked up in the table
/// (frameworks/megatron/flags.tsv): an unknown one is an error with the closest known name,
/// an obsolete one an error naming its replacement; inert flags, the launcher's flags and
/// words outside a flag are listed in job.ignored; flags that change time or memory in a way
/// bmpipe does not model go to job.unmodelled, unless given their harmless value. Repeated
/// flags and shell expansions get a note.
std::map<std::string, Use> flags_of(const std::string& text, const std::string& name,
                                    const std::string& file, ImportedJob& job) {
  const Vocabulary& vocabulary = megatron_vocabulary();
  std::map<std::string, Use> used;
  // Unmodelled flags, by first appearance, and their last use.
  std::vector<std::string> unmodelled_order;
  std::map<std::string, Use> unmodelled;
  std::string current;  // the flag whose values follow; empty: none
  std::map<std::string, Use>* current_map = nullptr;
  std::string expansion;       // the first shell expansion outside a flag, for the note
  int step_schedule_line = 0;  // --step-batch-size-schedule's line, 0 if not given
  const std::vector<ShellWord> words = split_shell_words(text, name);
  const auto [launcher_from, script] = launcher_words(words);
  // The flag whose values are being counted: Megatron-LM's parser (argparse) stops with
  // "expected one argument" when a flag that takes values is followed by another flag, the
  // end of the command or nothing ([MG-args]; flags.tsv's VALUES column), so the job never
  // starts. Checked for every flag of the table, read or not.
  struct Pending {
    std::string flag;
    int line = 0;
    int need = 0;
    int got = 0;
  };
  std::optional<Pending> pending;
  auto settle = [&](const ShellWord* next) {
    if (!pending) return;
    const Pending p = *pending;
    pending.reset();
    if (p.got >= p.need) return;
    const std::string wanted =
        p.need == 1 ? "a value" : std::to_string(p.need) + " values, got " + std::to_string(p.got);
    std::string after = "but nothing follows it";
    if (next && next->boundary)
      after = "but the command ends there (at '" + next->text + "')";
    else if (next)
      after = "but " + shown(next->text) + " follows it" +
              (next->line != p.line ? " (line " + std::to_string(next->line) + ")" : "");
    throw ImportError(file, p.line, 0, p.flag,
                      "expects " + wanted + ", " + after +
                          ": Megatron-LM's parser stops there (\"expected " +
                          (p.need == 1 ? "one argument" : std::to_string(p.need) + " arguments") +
                          "\"), so the job would not start");
  };
  for (std::size_t i = 0; i < words.size(); ++i) {
    const ShellWord& w = words[i];
    if (w.boundary || w.text == "--") {
      settle(&w);
      current.clear();
      continue;
    }
    if (w.text.size() > 2 && w.text.compare(0, 2, "--") == 0) {
      settle(&w);
      std::string flag = w.text;
      std::optional<ShellWord> inline_value;
      if (const auto eq = flag.find('='); eq != std::string::npos) {
        ShellWord v = w;
        v.text = flag.substr(eq + 1);
        inline_value = v;
        flag.resize(eq);
      }
      current = flag;
      current_map = nullptr;
      const VocabularyEntry* entry = vocabulary.find(flag);
      const bool launchers = i >= launcher_from && i < script;
      if (entry && entry->values && !launchers)
        pending = Pending{flag, w.line, entry->values->first, inline_value ? 1 : 0};
      if (launchers) {
        job.ignore(flag + " (not modelled)");  // the launcher's (torchrun's) flag
      } else if (!entry) {
        throw ImportError(file, w.line, 0, flag,
                          "unknown flag: Megatron-LM's arguments.py has no such flag, and its "
                          "parser takes no abbreviations" +
                              vocabulary.suggestion(flag));
      } else if (entry->treatment == Treatment::obsolete) {
        throw ImportError(file, w.line, 0, flag, entry->reason);
      } else if (entry->treatment == Treatment::modelled ||
                 entry->treatment == Treatment::unmodelled) {
        const bool modelled = entry->treatment == Treatment::modelled;
        current_map = modelled ? &used : &unmodelled;
        if (!modelled && !unmodelled.count(flag)) unmodelled_order.push_back(flag);
        Use& u = (*current_map)[flag];
        u.values.clear();
        u.line = w.line;
        u.lines.push_back(w.line);
        if (inline_value) u.values.push_back(*inline_value);
      } else {
        if (flag == "--step-batch-size-schedule") step_schedule_line = w.line;
        job.ignore(flag + " (not modelled)");
      }
      // "--flag=value" holds its value; what follows is not its.
      if (inline_value) {
        current.clear();
        settle(nullptr);
      }
      continue;
    }
    if (pending && !current.empty()) ++pending->got;
    if (current.empty()) {
      job.ignore(shown(w.text) + " (not a flag)");
      if (w.expansion && expansion.empty()) expansion = w.text;
      continue;
    }
    if (current_map)
      if (auto it = current_map->find(current); it != current_map->end())
        it->second.values.push_back(w);
  }
  settle(nullptr);
  // [MG-args] validate_args (arguments.py:698-701 at d98e8a64): a batch size schedule beside
  // a global batch size given is a ValueError, so the job never starts. Megatron-LM's own
  // examples/gpt3/train_gpt3_175b_distributed.sh gives both there (tests/data/megatron).
  if (step_schedule_line > 0 && used.count("--global-batch-size"))
    throw ImportError(file, step_schedule_line, 0, "--step-batch-size-schedule",
                      "given beside --global-batch-size (line " +
                          std::to_string(used.at("--global-batch-size").line) +
                          "), which Megatron-LM refuses (\"Cannot specify both "
                          "--step-batch-size-schedule and --global-batch-size\"), so the job "
                          "would not start; expected one of them (bmpipe times the one global "
                          "batch: give --global-batch-size alone)");
  for (const std::string& flag : unmodelled_order) {
    const Use& u = unmodelled.at(flag);
    const VocabularyEntry& entry = *vocabulary.find(flag);
    std::string given = flag;
    for (const ShellWord& v : u.values) given += " " + v.text;
    // Megatron-LM's own default, given explicitly, changes nothing.
    if (u.values.size() == 1 && entry.harmless_value(u.values[0].text)) {
      job.ignore(given + " (Megatron-LM's default)");
      continue;
    }
    // masked_softmax_fusion is read by Megatron-Core's own DotProductAttention alone
    // (megatron/core/transformer/dot_product_attention.py:104 at d98e8a64, its
    // FusedScaleMaskSoftmax); TransformerEngine's attention (--transformer-impl
    // transformer_engine, the default, with any --attention-backend but local, which
    // megatron/training/models/gpt.py:302 swaps for DotProductAttention) never reads it.
    if (flag == "--no-masked-softmax-fusion" && !used.count("--spec") &&
        !(used.count("--attention-backend") && !used.at("--attention-backend").values.empty() &&
          used.at("--attention-backend").values.back().text == "local")) {
      const auto impl = unmodelled.find("--transformer-impl");
      if (impl == unmodelled.end() || (impl->second.values.size() == 1 &&
                                       impl->second.values[0].text == "transformer_engine")) {
        job.ignore(given + " (no effect: TransformerEngine's attention does not read it)");
        continue;
      }
    }
    job.unmodelled.push_back(Unmodelled{Origin{file, u.line, 0, flag, ""}, given, entry.reason});
  }
  for (const auto& [flag, u] : used)
    if (u.lines.size() > 1)
      job.notes.push_back(flag + " is given " + std::to_string(u.lines.size()) +
                          " times (last on line " + std::to_string(u.lines.back()) +
                          "); the last one counts, as in Megatron-LM's argparse parser.");
  if (!expansion.empty())
    job.notes.push_back("the file names shell variables outside flags (" + expansion +
                        "); bmpipe expands none, so paste the flags they hold into the file.");
  return used;
}

/// --tensor-model-parallel-size (default 1): the model's vocabulary padding and the
/// training layout both need it.
int tensor_parallel_size(const Args& a) {
  return a.integer("--tensor-model-parallel-size", 1).value_or(1);
}

/// What the sections share: the file as messages name it, the flags as given, and the job
/// they fill in, section by section in this order (a later section reads what an earlier
/// one set: the partition needs the model's layers and pp, the recompute the partition).
struct Reading {
  const std::string& file;
  const Args& a;
  ImportedJob& job;

  int require_int(const char* flag, int lo, const char* why) const {
    const auto v = a.integer(flag, lo);
    if (!v) throw ImportError(file, 0, 0, flag, std::string("missing: ") + why);
    return *v;
  }
};

/// A hybrid model's layer pattern as given: the flag it came from, its layers without the
/// '|' separators, and the layers of each '|'-delimited pipeline segment.
struct HybridPattern {
  std::string flag;
  std::string layers;
  std::vector<int> segments;
  /// The multi-token prediction block after '/', one symbol a block, and how many depths
  /// ('/'-separated copies) run it; empty and 0 without MTP.
  std::string mtp;
  int mtp_depths = 0;
};

/// A layer pattern's symbols as [MG-hybrid] _validate_pattern checks them: Symbols.
/// VALID_LAYERS, and '|' in the main pattern only. `which` is "main" or "MTP", as in its
/// message.
void check_pattern_symbols(const Args& a, const std::string& flag, const std::string& text,
                           const char* which, bool pipes) {
  for (const char c : text)
    if (std::string_view("MG*D+-E").find(c) == std::string_view::npos && !(pipes && c == '|'))
      a.fail(flag, std::string("In ") + which + " pattern, '" + std::string(1, c) +
                       "' is not a valid layer symbol (Megatron-LM's message; its symbols are "
                       "M, G, *, D, +, -, E" +
                       (pipes ? " and the stage separator |)" : ")"));
}

/// --hybrid-layer-pattern, or its deprecated spelling --hybrid-override-pattern, as
/// [MG-args] validate_args and [MG-hybrid] read it; nullopt for a transformer model. The
/// symbols are Megatron-Core's (Symbols.VALID_LAYERS and '|'); which of them bmpipe models is
/// check_hybrid's to say, once the shape is read (read_hybrid_model).
std::optional<HybridPattern> hybrid_pattern(const Args& a) {
  const bool deprecated = a.given("--hybrid-override-pattern");
  if (deprecated && a.given("--hybrid-layer-pattern"))
    a.fail("--hybrid-override-pattern",
           "cannot be given with --hybrid-layer-pattern (Megatron-LM asserts: "
           "\"--hybrid-override-pattern and --hybrid-layer-pattern cannot both be specified. "
           "--hybrid-override-pattern is deprecated; use --hybrid-layer-pattern instead.\")");
  const std::string flag = deprecated ? "--hybrid-override-pattern" : "--hybrid-layer-pattern";
  const std::optional<std::string> text = a.single(flag);
  if (!text) return std::nullopt;
  // [MG-hybrid] parse_hybrid_pattern: '/' starts the multi-token-prediction patterns, one a
  // depth ("M*M*/MM/MM": main "M*M*", the block "MM" run at 2 depths), all alike; nothing
  // after the separators is no MTP.
  const std::size_t slash = text->find('/');
  const std::string main = text->substr(0, slash);
  HybridPattern p{flag, "", {0}, "", 0};
  if (slash != std::string::npos) {
    std::vector<std::string> depths;
    for (std::size_t at = slash; at != std::string::npos;) {
      const std::size_t next = text->find('/', at + 1);
      depths.push_back(text->substr(at + 1, next == std::string::npos ? next : next - at - 1));
      at = next;
    }
    if (!std::all_of(depths.begin(), depths.end(),
                     [](const std::string& d) { return d.empty(); })) {
      for (std::size_t i = 1; i < depths.size(); ++i)
        if (depths[i] != depths[0])
          a.fail(flag, "All MTP patterns must be identical. Pattern 1 is '" + depths[0] +
                           "', but pattern " + std::to_string(i + 1) + " is '" + depths[i] +
                           "' (Megatron-LM's message)");
      check_pattern_symbols(a, flag, depths[0], "MTP", false);
      p.mtp = depths[0];
      p.mtp_depths = static_cast<int>(depths.size());
    }
  }
  check_pattern_symbols(a, flag, main, "main", true);
  for (const char c : main) {
    if (c == '|') {  // a pipeline stage boundary
      p.segments.push_back(0);
      continue;
    }
    p.layers += c;
    ++p.segments.back();
  }
  if (p.layers.empty()) a.fail(flag, "names no layers");
  if (static_cast<long long>(p.layers.size()) > detail::kLayers.max)
    a.fail(flag, "holds " + std::to_string(p.layers.size()) + " layers; at most " +
                     std::to_string(static_cast<long>(detail::kLayers.max)) + " (" +
                     std::string(detail::kLayers.max_note) + ")");
  return p;
}

/// The flag a hybrid model's pattern was given by.
std::string pattern_flag(const Args& a) {
  return a.given("--hybrid-override-pattern") ? "--hybrid-override-pattern"
                                              : "--hybrid-layer-pattern";
}

/// The layers and the attention: layers (--num-layers, or a hybrid model's pattern), hidden
/// size, heads, the head width (--kv-channels), and kv heads from the query groups.
void read_layers_and_attention(const Reading& ctx, ModelShape& m) {
  const Args& a = ctx.a;
  ImportedJob& job = ctx.job;
  m.name = job.model_name;
  if (const std::optional<HybridPattern> hybrid = hybrid_pattern(a)) {
    // [MG-args]: the pattern sets the layer count; a --num-layers that disagrees is
    // ignored with a warning ("--hybrid-layer-pattern is set; ignoring --num-layers").
    m.hybrid_pattern = hybrid->layers;
    m.num_layers = static_cast<int>(hybrid->layers.size());
    job.from("model.num_layers", a.origin(hybrid->flag, "the " + std::to_string(m.num_layers) +
                                                            " layers of " + hybrid->flag));
    job.from("model.hybrid_pattern", a.origin(hybrid->flag));
    if (hybrid->mtp_depths > 0) {
      m.mtp_pattern = hybrid->mtp;
      m.mtp_layers = hybrid->mtp_depths;
      job.from("model.mtp_pattern", a.origin(hybrid->flag, "the block after its '/'"));
      job.from("model.mtp_layers", a.origin(hybrid->flag, "its " + std::to_string(m.mtp_layers) +
                                                              " '/'-separated MTP patterns"));
    }
    if (const auto n = a.integer("--num-layers", 1); n && *n != m.num_layers)
      job.notes.push_back("--num-layers " + std::to_string(*n) + " is not the " +
                          std::to_string(m.num_layers) + " layers of " + hybrid->flag +
                          ": Megatron-LM warns that it ignores --num-layers and uses the "
                          "pattern's count, and so does bmpipe.");
  } else {
    m.num_layers = ctx.require_int("--num-layers", 1, "the number of decoder layers");
    // The config's own bound on model.num_layers, checked before anything per layer is built
    // (a count of billions would be an allocation, not an error).
    if (m.num_layers > detail::kLayers.max)
      a.fail("--num-layers",
             "must be at most " + std::to_string(static_cast<long>(detail::kLayers.max)) + " (" +
                 std::string(detail::kLayers.max_note) + "), got " + std::to_string(m.num_layers));
    job.from("model.num_layers", a.origin("--num-layers"));
  }
  m.hidden_size = ctx.require_int("--hidden-size", 1, "the hidden size");
  m.num_attention_heads =
      ctx.require_int("--num-attention-heads", 1, "the number of attention heads");
  job.from("model.hidden_size", a.origin("--hidden-size"));
  job.from("model.num_attention_heads", a.origin("--num-attention-heads"));
  // [MG-args]: kv_channels, one attention head's width, defaults to hidden_size //
  // num_attention_heads, which must then divide; given, it is the width of every head (the
  // q projection is heads x kv_channels wide, megatron/core/transformer/attention.py). MLA
  // passes its own widths to the core attention (--qk-head-dim, --qk-pos-emb-head-dim,
  // --v-head-dim; megatron/core/transformer/multi_latent_attention.py), so there it has no
  // effect.
  const auto kv = a.integer("--kv-channels", 1);
  const bool mla = a.boolean("--multi-latent-attention");
  if ((!kv || mla) && m.hidden_size % m.num_attention_heads != 0)
    a.fail("--num-attention-heads",
           std::to_string(m.num_attention_heads) + " does not divide --hidden-size " +
               std::to_string(m.hidden_size) +
               " (Megatron-LM derives the head dimension as their quotient without "
               "--kv-channels)");
  if (kv && mla) {
    job.ignore("--kv-channels (no effect with --multi-latent-attention)");
  } else if (kv && (m.hidden_size % m.num_attention_heads != 0 ||
                    *kv != m.hidden_size / m.num_attention_heads)) {
    m.explicit_head_dim = *kv;
    job.from("model.head_dim", a.origin("--kv-channels"));
  }

  // [MG-au] core_transformer_config_from_args: num_query_groups counts only with
  // --group-query-attention (argparse default 1); without it every head has its own kv.
  const bool gqa = a.boolean("--group-query-attention");
  const auto groups = a.integer("--num-query-groups", 1);
  if (gqa) {
    m.num_kv_heads = groups.value_or(1);
    job.from("model.num_kv_heads",
             groups ? a.origin("--num-query-groups")
                    : a.origin("--group-query-attention",
                               "--group-query-attention without --num-query-groups: 1 group "
                               "(Megatron-LM's default)"));
    if (m.num_attention_heads % m.num_kv_heads != 0)
      a.fail(groups ? "--num-query-groups" : "--group-query-attention",
             std::to_string(m.num_kv_heads) + " query groups do not divide the " +
                 std::to_string(m.num_attention_heads) + " attention heads");
  } else {
    m.num_kv_heads = m.num_attention_heads;
    job.from("model.num_kv_heads",
             a.origin("--group-query-attention",
                      "no --group-query-attention: one kv head per attention head"));
    if (groups)
      job.notes.push_back(
          "--num-query-groups has no effect without --group-query-attention "
          "(Megatron-LM then uses one kv head per attention head).");
  }
}

/// The MLP: --swiglu, --squared-relu and --normalization pick the layer style and the
/// activation; the width, or Megatron-LM's default for it.
///  - --swiglu: llama-style layers (RMSNorm is assumed, as before), the gated SiLU MLP.
///  - --squared-relu (which [MG-au] core_transformer_config_from_args asserts is not given
///    with --swiglu): squared ReLU without a gate, as Nemotron-H's scripts run it, with
///    --normalization RMSNorm: llama-style layers with mlp_activation relu2. With LayerNorm
///    (Megatron-LM's default) the layers are gpt-style with squared ReLU, which bmpipe does
///    not model (its gpt layers are GeLU).
///  - neither: GeLU, gpt-style layers; for a hybrid model, whose layers bmpipe costs as
///    llama-style ones, unmodelled when it has MLP layers.
/// A hybrid model's layers are RMSNorm ones in bmpipe: LayerNorm is unmodelled there.
void read_mlp(const Reading& ctx, ModelShape& m) {
  const Args& a = ctx.a;
  ImportedJob& job = ctx.job;
  const bool swiglu = a.boolean("--swiglu");
  const bool relu2 = a.boolean("--squared-relu");
  if (swiglu && relu2)
    a.fail("--squared-relu",
           "cannot be given with --swiglu (Megatron-LM's core_transformer_config_from_args "
           "asserts not args.swiglu beside --squared-relu)");
  const std::optional<std::string> norm = a.choice("--normalization");
  const bool rms = norm == "RMSNorm";
  const bool hybrid = m.is_hybrid();
  const std::string norm_given =
      norm ? "--normalization " + *norm : "no --normalization (Megatron-LM's default LayerNorm)";
  const bool llama = swiglu || hybrid || (relu2 && rms);
  m.architecture = llama ? Architecture::llama : Architecture::gpt;
  if (swiglu)
    job.from("model.architecture",
             a.origin("--swiglu", "--swiglu: gated SiLU MLP, llama-style layers"));
  else if (relu2 && llama)
    job.from("model.architecture",
             a.origin("--squared-relu", hybrid ? "a hybrid model's llama-style layers"
                                               : "--squared-relu with --normalization RMSNorm: "
                                                 "llama-style layers"));
  else if (hybrid)
    job.from("model.architecture",
             a.origin(pattern_flag(a), "a hybrid model's llama-style layers"));
  else
    job.from("model.architecture", a.origin("--swiglu", "no --swiglu: GeLU MLP, gpt-style layers"));
  if (relu2 && llama) {
    m.mlp_activation = MlpActivation::relu2;
    job.from("model.mlp_activation", a.origin("--squared-relu"));
  } else if (relu2) {
    // Allowed, it is costed as the gpt-style layers bmpipe has: GeLU.
    job.unmodelled.push_back(Unmodelled{
        a.origin("--squared-relu"), "--squared-relu with " + norm_given,
        "squared ReLU in gpt-style (LayerNorm) layers: bmpipe models squared ReLU in "
        "llama-style layers (give --normalization RMSNorm, as Nemotron-H's scripts do) and "
        "GeLU in gpt-style ones"});
  }
  if (hybrid) {
    const bool has_mlp = m.hybrid_pattern.find_first_of("-E") != std::string::npos;
    if (!swiglu && !relu2 && has_mlp) {
      // The nearest bmpipe has: an ungated MLP of the same width (h -> ffn -> h).
      m.mlp_activation = MlpActivation::relu2;
      job.from("model.mlp_activation",
               a.origin("--swiglu", "no --swiglu or --squared-relu: GeLU, costed as relu2"));
      job.unmodelled.push_back(Unmodelled{
          a.origin(pattern_flag(a)), "a hybrid model without --swiglu or --squared-relu",
          "the GeLU MLP of its - and E layers: bmpipe costs a hybrid model's MLPs as squared "
          "ReLU (--squared-relu) or SwiGLU (--swiglu)"});
    }
    if (!rms)
      job.unmodelled.push_back(Unmodelled{
          a.origin(norm ? std::string("--normalization") : pattern_flag(a)),
          "a hybrid model with " + norm_given,
          "LayerNorm in a hybrid model: bmpipe costs its layers with RMSNorm, as Nemotron-H's "
          "scripts run them (--normalization RMSNorm)"});
  }
  // The norm is read where it picks the layers (squared ReLU, a hybrid model); elsewhere it
  // is ignored, as before: --swiglu's layers are RMSNorm ones.
  if (norm && !relu2 && !hybrid) job.ignore("--normalization (not modelled)");
  if (llama) {
    // Megatron-LM runs llama-style layers with its fused kernels (TransformerEngine's
    // RMSNorm, fused RoPE and SwiGLU, fused qkv and fc1 GEMMs; the flags that turn one off,
    // --no-rope-fusion and the like, are refused as unmodelled), not HF's eager ones,
    // bmpipe's default for llama layers.
    job.kernels = "fused";
    job.from("training.kernels",
             a.origin(swiglu ? "--swiglu" : (relu2 ? "--squared-relu" : pattern_flag(a)),
                      "Megatron-LM's fused kernels for llama-style layers"));
  }
  if (const auto ffn = a.integer("--ffn-hidden-size", 1)) {
    m.ffn_hidden_size = *ffn;
    job.from("model.ffn_hidden_size", a.origin("--ffn-hidden-size"));
  } else {
    // [MG-args]: int((4 * h * 2 / 3) / 64) * 64 with --swiglu, else 4 * h. The float
    // expression is floor(h / 24) * 64 exactly: 8h/3 is never within rounding of a
    // multiple of 64 it does not reach.
    const long long ffn_default =
        swiglu ? (static_cast<long long>(m.hidden_size) / 24) * 64 : 4LL * m.hidden_size;
    if (ffn_default < 1 || ffn_default > INT_MAX)
      a.fail("--hidden-size", "gives no usable default --ffn-hidden-size; give it");
    m.ffn_hidden_size = static_cast<int>(ffn_default);
    job.from("model.ffn_hidden_size",
             a.origin("--ffn-hidden-size",
                      swiglu ? "Megatron-LM's default with --swiglu: int(4h * 2/3 / 64) * 64"
                             : "Megatron-LM's default: 4 * hidden size"));
  }
}

/// The vocabulary, padded as Megatron-LM pads it, and whether the output layer shares the
/// embedding.
void read_vocabulary(const Reading& ctx, ModelShape& m) {
  const Args& a = ctx.a;
  ImportedJob& job = ctx.job;
  const std::string& file = ctx.file;
  const int tp = tensor_parallel_size(a);
  {
    const auto vocab = a.integer("--vocab-size", 1);
    if (!vocab)
      throw ImportError(file, 0, 0, "--vocab-size",
                        "missing: Megatron-LM takes the vocabulary from the tokenizer "
                        "(--tokenizer-type, --tokenizer-model), which bmpipe cannot read; add "
                        "--vocab-size N with the tokenizer's size");
    // [MG-vocab]: padded up to a multiple of make_vocab_size_divisible_by (default 128)
    // times the tensor-parallel size.
    const int divisible = a.integer("--make-vocab-size-divisible-by", 1).value_or(128);
    const long long multiple = static_cast<long long>(divisible) * tp;
    const long long padded = (*vocab + multiple - 1) / multiple * multiple;
    if (padded > INT_MAX) a.fail("--vocab-size", "is too large once padded");
    m.vocab_size = static_cast<int>(padded);
    job.from("model.vocab_size",
             a.origin("--vocab-size", padded == *vocab
                                          ? ""
                                          : "--vocab-size " + std::to_string(*vocab) +
                                                " padded to a multiple of " +
                                                std::to_string(divisible) + " x tp " +
                                                std::to_string(tp) + ", as Megatron-LM pads it"));
  }
  m.tied_embeddings = !a.boolean("--untie-embeddings-and-output-weights");
  job.from("model.tied_embeddings",
           a.origin("--untie-embeddings-and-output-weights",
                    m.tied_embeddings ? "tied: no --untie-embeddings-and-output-weights" : ""));
}

/// The experts: --num-experts makes the model a mixture of experts (Megatron-LM: None means
/// dense), with Megatron-LM's defaults for the rest ([MG-args] _add_moe_args and
/// validate_args, TransformerConfig): top-k 2, the experts as wide as --ffn-hidden-size,
/// no shared expert, every layer MoE (--moe-layer-freq 1), the allgather dispatcher.
/// Token dropping ([MG-moe] transformer_config.py __post_init__, moe_utils.py get_capacity
/// and apply_router_token_dropping, token_dispatcher.py drop_and_pad, at d98e8a64):
/// --moe-expert-capacity-factor (a negative one is None: dropless) caps each expert at
/// ceil(tokens x topk / experts x factor) tokens; with --moe-pad-expert-input-to-capacity
/// every expert's input is padded to that: training.moe_capacity_factor. Without the
/// padding, tokens over capacity are dropped, which with bmpipe's balanced routing drops
/// none: nothing to cost. Megatron-LM's own refusals are kept: the padding needs the
/// factor, the factor a load balancing of aux_loss, seq_aux_loss, global_aux_loss or none,
/// and DeepEP does not pad.
void read_capacity(const Reading& ctx, bool deepep) {
  const Args& a = ctx.a;
  ImportedJob& job = ctx.job;
  const char* cf = "--moe-expert-capacity-factor";
  const char* pad = "--moe-pad-expert-input-to-capacity";
  const std::optional<double> given = a.real(cf, -1e9, 1024);
  const double value = given.value_or(-1);
  if (given && value < 0) job.ignore(std::string(cf) + " (negative: None, dropless)");
  const bool factor = value >= 0;
  if (a.boolean(pad) && !factor)
    a.fail(pad,
           "needs --moe-expert-capacity-factor (Megatron-LM: \"moe_expert_capacity_factor "
           "must be set to use moe_pad_expert_input_to_capacity\")");
  if (!factor) {
    if (a.given("--moe-router-load-balancing-type"))
      job.ignore("--moe-router-load-balancing-type (not modelled)");
    return;
  }
  std::vector<std::string> balancing = a.list("--moe-router-load-balancing-type");
  if (balancing.empty()) balancing.push_back("aux_loss");  // TransformerConfig's default
  for (const std::string& type : balancing)
    if (type != "aux_loss" && type != "seq_aux_loss" && type != "global_aux_loss" && type != "none")
      a.fail("--moe-router-load-balancing-type",
             type +
                 " with --moe-expert-capacity-factor (Megatron-LM: "
                 "\"moe_expert_capacity_factor only works with aux_loss, seq_aux_loss, "
                 "global_aux_loss or none load balancing\")");
  if (!a.boolean(pad)) {
    job.notes.push_back(
        "--moe-expert-capacity-factor without --moe-pad-expert-input-to-capacity drops the "
        "tokens over capacity only; with bmpipe's balanced routing (model.moe.load_imbalance "
        "1) none are over it, so nothing changes.");
    return;
  }
  if (deepep)
    a.fail(pad,
           "with the flex dispatcher's deepep backend (Megatron-LM: \"Flex token "
           "dispatcher with deepep backend does not support "
           "moe_pad_expert_input_to_capacity\")");
  if (value == 0) a.fail(cf, "must be more than 0 to pad to capacity");
  job.moe_capacity_factor = value;
  job.from("training.moe_capacity_factor", a.origin(cf, "with --moe-pad-expert-input-to-capacity"));
}

void read_experts(const Reading& ctx, ModelShape& m) {
  const Args& a = ctx.a;
  ImportedJob& job = ctx.job;
  const char* moe_flags[] = {"--moe-router-topk",
                             "--moe-ffn-hidden-size",
                             "--moe-shared-expert-intermediate-size",
                             "--moe-layer-freq",
                             "--moe-token-dispatcher-type",
                             "--moe-grouped-gemm",
                             "--moe-enable-deepep",
                             "--moe-flex-dispatcher-backend",
                             "--moe-router-num-groups",
                             "--moe-router-group-topk",
                             "--moe-expert-capacity-factor",
                             "--moe-pad-expert-input-to-capacity",
                             "--moe-router-load-balancing-type",
                             "--moe-latent-size"};
  const auto experts = a.integer("--num-experts", 1);
  if (!experts) {
    for (const char* f : moe_flags)
      if (a.given(f)) job.ignore(std::string(f) + " (no effect without --num-experts)");
    return;
  }
  if (m.architecture != Architecture::llama)
    a.fail("--num-experts",
           "bmpipe costs the mixture-of-experts layer with llama-style experts only: add "
           "--swiglu, or --squared-relu with --normalization RMSNorm");
  MoeShape& moe = m.moe;
  moe.num_experts = *experts;
  job.from("model.moe.num_experts", a.origin("--num-experts"));
  moe.top_k = a.integer("--moe-router-topk", 1).value_or(2);
  job.from("model.moe.top_k",
           a.origin("--moe-router-topk", a.given("--moe-router-topk") ? "" : "default 2"));
  if (moe.top_k > moe.num_experts)
    a.fail(a.given("--moe-router-topk") ? "--moe-router-topk" : "--num-experts",
           std::to_string(moe.top_k) + " experts per token, but --num-experts is " +
               std::to_string(moe.num_experts));
  moe.expert_ffn = a.integer("--moe-ffn-hidden-size", 1).value_or(m.ffn_hidden_size);
  job.from(
      "model.moe.expert_ffn_hidden_size",
      a.origin("--moe-ffn-hidden-size",
               a.given("--moe-ffn-hidden-size") ? "" : "Megatron-LM's default: --ffn-hidden-size"));
  moe.shared_ffn = a.integer("--moe-shared-expert-intermediate-size", 1).value_or(0);
  job.from("model.moe.shared_expert_ffn_hidden_size",
           a.origin("--moe-shared-expert-intermediate-size"));
  // [MG-args]: --moe-latent-size > 0 and only with experts (asserted); [MG-config]
  // moe_latent_size: the routed experts' tokens projected to that width and back.
  if (const auto latent = a.integer("--moe-latent-size", 1)) {
    if (*latent >= m.hidden_size)
      a.fail("--moe-latent-size", std::to_string(*latent) + " is not narrower than --hidden-size " +
                                      std::to_string(m.hidden_size) +
                                      ": the latent projection must compress the hidden state");
    moe.latent_size = static_cast<int>(*latent);
    job.from("model.moe.latent_size", a.origin("--moe-latent-size"));
  }
  if (m.is_hybrid()) {
    // [MG-hybrid]: a hybrid model's MoE layers are its E layers.
    if (a.given("--moe-layer-freq"))
      job.ignore("--moe-layer-freq (a hybrid model's MoE layers are the E of its pattern)");
  } else if (const auto freq = a.single("--moe-layer-freq")) {
    std::vector<int> pattern;
    try {
      pattern = megatron_moe_pattern(*freq, m.num_layers);
    } catch (const FormatError& e) {
      a.fail("--moe-layer-freq", e.what());
    }
    moe.sparse_step = 1;
    moe.sparse_offset = 0;
    for (int i = 0; i < m.num_layers; ++i)
      if (pattern[i] == 0) moe.dense_layers.push_back(i);
    if (std::find(pattern.begin(), pattern.end(), 1) == pattern.end())
      a.fail("--moe-layer-freq", "makes no layer an MoE layer");
    job.from("model.moe.layer_freq", a.origin("--moe-layer-freq"));
  }
  // Group-limited routing ([MG-args] --moe-router-num-groups, --moe-router-group-topk;
  // TransformerConfig asserts both or neither): the deepep dispatcher's volume reads it.
  const auto groups = a.integer("--moe-router-num-groups", 1);
  const auto group_k = a.integer("--moe-router-group-topk", 1);
  if (groups.has_value() != group_k.has_value())
    a.fail(groups ? "--moe-router-num-groups" : "--moe-router-group-topk",
           "needs " + std::string(groups ? "--moe-router-group-topk" : "--moe-router-num-groups") +
               " beside it (group-limited routing takes both)");
  if (groups) {
    if (moe.num_experts % *groups != 0)
      a.fail("--moe-router-num-groups", std::to_string(*groups) +
                                            " groups do not split --num-experts " +
                                            std::to_string(moe.num_experts) + " evenly");
    if (*group_k > *groups ||
        static_cast<long long>(*group_k) * (moe.num_experts / *groups) < moe.top_k)
      a.fail("--moe-router-group-topk", std::to_string(*group_k) + " of " +
                                            std::to_string(*groups) +
                                            " groups cannot hold the --moe-router-topk " +
                                            std::to_string(moe.top_k) + " experts a token picks");
    moe.router_groups = *groups;
    moe.router_group_top_k = *group_k;
    job.from("model.moe.router_groups", a.origin("--moe-router-num-groups"));
    job.from("model.moe.router_group_top_k", a.origin("--moe-router-group-topk"));
  }
  // The cost model's MoE layer is the alltoall dispatcher's (permute, grouped GEMMs,
  // unpermute), or DeepEP's (training.moe_dispatcher deepep): the flex dispatcher with
  // --moe-enable-deepep or --moe-flex-dispatcher-backend deepep. allgather, and flex's
  // other backends, move tokens differently.
  const std::string dispatcher = a.choice("--moe-token-dispatcher-type").value_or("allgather");
  const std::optional<std::string> backend = a.single("--moe-flex-dispatcher-backend");
  const bool deepep =
      dispatcher == "flex" && (a.boolean("--moe-enable-deepep") || backend == "deepep");
  if ((a.boolean("--moe-enable-deepep") || backend) && dispatcher != "flex")
    a.fail(
        a.boolean("--moe-enable-deepep") ? "--moe-enable-deepep" : "--moe-flex-dispatcher-backend",
        "works with --moe-token-dispatcher-type flex only (Megatron-LM's help says so), "
        "but the dispatcher is " +
            dispatcher);
  if (deepep) {
    job.moe_dispatcher = "deepep";
    job.from(
        "training.moe_dispatcher",
        a.origin(backend == "deepep" ? "--moe-flex-dispatcher-backend" : "--moe-enable-deepep"));
  } else if (dispatcher != "alltoall")
    job.unmodelled.push_back(Unmodelled{
        a.origin(a.given("--moe-token-dispatcher-type") ? "--moe-token-dispatcher-type"
                                                        : "--num-experts"),
        a.given("--moe-token-dispatcher-type")
            ? "--moe-token-dispatcher-type " + dispatcher +
                  (dispatcher == "flex" ? " (backend " + backend.value_or("none given") + ")" : "")
            : "--num-experts without --moe-token-dispatcher-type (Megatron-LM's allgather)",
        "the " + dispatcher +
            " token dispatcher: bmpipe costs the alltoall dispatcher's permute, all-to-all "
            "and unpermute, or DeepEP's; give --moe-token-dispatcher-type alltoall, or flex "
            "with --moe-flex-dispatcher-backend deepep"});
  read_capacity(ctx, deepep);
  if (!a.boolean("--moe-grouped-gemm"))
    job.notes.push_back(
        "no --moe-grouped-gemm: Megatron-LM runs the local experts one GEMM after another; "
        "bmpipe's cost model assumes grouped GEMMs, which is faster for many small experts.");
}

/// DeepSeek sparse attention (ModelShape::dsa): --experimental-attention-variant dsa over
/// --multi-latent-attention, the indexer's --dsa-indexer-n-heads, --dsa-indexer-head-dim and
/// --dsa-indexer-topk (TransformerConfig defaults them to None, which DSAIndexer cannot
/// build: required here), and whether the indexer trains: --dsa-indexer-loss-coeff > 0 (None,
/// 0: top-k under no_grad) with the sparse loss (--dsa-indexer-use-sparse-loss; the dense
/// loss over every causal pair is not modelled).
void read_sparse_attention(const Reading& ctx, ModelShape& m) {
  const Args& a = ctx.a;
  ImportedJob& job = ctx.job;
  const char* flag = "--experimental-attention-variant";
  const std::optional<std::string> variant = a.choice(flag);
  const char* sizes[] = {"--dsa-indexer-n-heads", "--dsa-indexer-head-dim", "--dsa-indexer-topk"};
  if (!variant || *variant != "dsa") {
    if (variant)
      a.fail(flag, "the attention variant " + *variant +
                       " is not one bmpipe's cost model has (it models dsa; Gated DeltaNet "
                       "layers come from a hybrid pattern's G)");
    for (const char* f : sizes)
      if (a.given(f))
        job.ignore(std::string(f) + " (no effect without --experimental-attention-variant dsa)");
    return;
  }
  if (!m.is_mla())
    a.fail(flag,
           "dsa needs --multi-latent-attention (Megatron-Core builds DSAttention under "
           "MLA only)");
  int* slots[] = {&m.dsa.index_heads, &m.dsa.index_head_dim, &m.dsa.index_topk};
  const char* keys[] = {"indexer_n_heads", "indexer_head_dim", "indexer_topk"};
  for (int i = 0; i < 3; ++i) {
    const std::optional<int> v = a.integer(sizes[i], 1);
    if (!v)
      a.fail(flag, std::string("dsa needs ") + sizes[i] +
                       " (Megatron-LM's default is None, with which the indexer is not built)");
    *slots[i] = *v;
    job.from(std::string("model.dsa.") + keys[i], a.origin(sizes[i]));
  }
  if (m.dsa.index_head_dim < m.mla.qk_rope_head_dim)
    a.fail("--dsa-indexer-head-dim",
           std::to_string(m.dsa.index_head_dim) + " is narrower than --qk-pos-emb-head-dim " +
               std::to_string(m.mla.qk_rope_head_dim) +
               ": the indexer rotates the first qk_pos_emb_head_dim of each head");
  const double coeff = a.real("--dsa-indexer-loss-coeff", 0, 1e9).value_or(0.0);
  m.dsa.indexer_loss = coeff > 0;
  if (m.dsa.indexer_loss && !a.boolean("--dsa-indexer-use-sparse-loss"))
    a.fail("--dsa-indexer-loss-coeff",
           "the dense indexer loss (over every causal pair, the paper's warm-up stage) is not "
           "modelled: bmpipe costs the sparse one, --dsa-indexer-use-sparse-loss");
  job.from("model.dsa.indexer_loss",
           a.origin("--dsa-indexer-loss-coeff",
                    a.given("--dsa-indexer-loss-coeff") ? "" : "Megatron-LM's default"));
}

/// Multi-latent attention and multi-token prediction, with Megatron-LM's defaults for the
/// ranks ([MG-args] _add_mla_args: q_lora_rank None, kv_lora_rank 32, qk_head_dim 128,
/// qk_pos_emb_head_dim 64, v_head_dim 128).
void read_latent_attention(const Reading& ctx, ModelShape& m) {
  const Args& a = ctx.a;
  ImportedJob& job = ctx.job;
  const char* mla_flags[] = {"--q-lora-rank", "--kv-lora-rank", "--qk-head-dim",
                             "--qk-pos-emb-head-dim", "--v-head-dim"};
  if (!a.boolean("--multi-latent-attention")) {
    for (const char* f : mla_flags)
      if (a.given(f)) job.ignore(std::string(f) + " (no effect without --multi-latent-attention)");
  } else {
    MlaShape& mla = m.mla;
    mla.q_lora_rank = a.integer("--q-lora-rank", 1).value_or(0);
    mla.kv_lora_rank = a.integer("--kv-lora-rank", 1).value_or(32);
    mla.qk_nope_head_dim = a.integer("--qk-head-dim", 1).value_or(128);
    mla.qk_rope_head_dim = a.integer("--qk-pos-emb-head-dim", 1).value_or(64);
    mla.v_head_dim = a.integer("--v-head-dim", 1).value_or(128);
    const std::pair<const char*, const char*> keys[] = {
        {"--q-lora-rank", "q_lora_rank"},
        {"--kv-lora-rank", "kv_lora_rank"},
        {"--qk-head-dim", "qk_head_dim"},
        {"--qk-pos-emb-head-dim", "qk_pos_emb_head_dim"},
        {"--v-head-dim", "v_head_dim"}};
    for (const auto& [flag, key] : keys)
      job.from(std::string("model.mla.") + key,
               a.origin(flag, a.given(flag) ? "" : "Megatron-LM's default"));
    for (const char* flag : {"--q-lora-rank", "--kv-lora-rank"}) {
      const int v = std::string_view(flag) == "--q-lora-rank" ? mla.q_lora_rank : mla.kv_lora_rank;
      if (v > m.hidden_size)
        a.fail(flag, std::to_string(v) + " is wider than --hidden-size " +
                         std::to_string(m.hidden_size) +
                         ": the latent must compress the hidden state");
    }
  }
  read_sparse_attention(ctx, m);
  const std::optional<long long> mtp = a.integer("--mtp-num-layers", 0);
  if (mtp && *mtp > 0 && !m.mtp_pattern.empty() && *mtp != m.mtp_layers) {
    // [MG-args]: the depths of a unified pattern win ("--mtp-num-layers (N) conflicts with
    // MTP depth count (D) ... Using the inferred value").
    job.notes.push_back("--mtp-num-layers " + std::to_string(*mtp) + " is not the " +
                        std::to_string(m.mtp_layers) + " MTP depths of " + pattern_flag(a) +
                        ": Megatron-LM warns that it uses the pattern's count, and so does "
                        "bmpipe.");
  } else if (mtp && *mtp > 0 && m.mtp_pattern.empty()) {
    m.mtp_layers = static_cast<int>(*mtp);
    job.from("model.mtp_layers", a.origin("--mtp-num-layers"));
  }
  // [MG-args]'s backward compatibility: the deprecated --mtp-hybrid-override-pattern is a
  // hybrid model's MTP block when --mtp-num-layers > 0 and the main pattern has no '/'
  // (main + "/" + block x depths); otherwise Megatron-LM ignores it, with a warning for a
  // non-hybrid model.
  if (const std::optional<std::string> legacy = a.single("--mtp-hybrid-override-pattern")) {
    if (!m.is_hybrid()) {
      job.ignore(
          "--mtp-hybrid-override-pattern (for hybrid models only: Megatron-LM ignores "
          "it for a GPT model)");
    } else if (!m.mtp_pattern.empty() || m.mtp_layers == 0) {
      job.ignore(std::string("--mtp-hybrid-override-pattern (") +
                 (m.mtp_pattern.empty() ? "no --mtp-num-layers" : "the pattern's '/' blocks win") +
                 ": Megatron-LM converts it only beside --mtp-num-layers and a pattern without "
                 "'/')");
    } else {
      check_pattern_symbols(a, "--mtp-hybrid-override-pattern", *legacy, "MTP", false);
      if (legacy->empty()) a.fail("--mtp-hybrid-override-pattern", "names no layers");
      m.mtp_pattern = *legacy;
      job.from("model.mtp_pattern",
               a.origin("--mtp-hybrid-override-pattern",
                        "the deprecated form, run at the --mtp-num-layers depths"));
    }
  }
  // [MG-config] mtp_use_repeated_layer: one MTP layer built and applied at every depth.
  if (a.boolean("--mtp-use-repeated-layer")) {
    if (m.mtp_layers == 0) {
      job.ignore("--mtp-use-repeated-layer (no MTP depths)");
    } else {
      m.mtp_shared = true;
      job.from("model.mtp_shared", a.origin("--mtp-use-repeated-layer"));
    }
  }
}

/// A hybrid model's Mamba mixer ([MG-mamba]): --mamba-head-dim, --mamba-state-dim and
/// --mamba-num-groups with TransformerConfig's defaults (64, 128, 8; [MG-config]), and
/// --mamba-num-heads, or without it d_inner / head_dim heads, d_inner being expand (2) x the
/// hidden size, as MambaMixer derives them. The conv1d's 4 taps and the scan's chunk of 128
/// are MambaMixer's own, with no flag.
void read_mamba(const Reading& ctx, ModelShape& m) {
  const Args& a = ctx.a;
  ImportedJob& job = ctx.job;
  const char* flags[] = {"--mamba-num-heads", "--mamba-head-dim", "--mamba-state-dim",
                         "--mamba-num-groups"};
  if (!m.is_hybrid() || m.hybrid_pattern.find('M') == std::string::npos) {
    for (const char* f : flags)
      if (a.given(f))
        job.ignore(std::string(f) + (m.is_hybrid()
                                         ? " (no effect: the pattern has no M layers)"
                                         : " (no effect without --hybrid-layer-pattern)"));
    return;
  }
  MambaShape& x = m.mamba;
  const auto read = [&](const char* flag, int fallback, const char* key) {
    const auto v = a.integer(flag, 1);
    job.from(std::string("model.mamba.") + key,
             a.origin(flag, v ? "" : "Megatron-LM's default " + std::to_string(fallback)));
    return v.value_or(fallback);
  };
  x.head_dim = read("--mamba-head-dim", 64, "head_dim");
  x.state_dim = read("--mamba-state-dim", 128, "state_dim");
  x.groups = read("--mamba-num-groups", 8, "groups");
  x.conv_kernel = 4;
  x.chunk_size = 128;
  const Origin mixer{ctx.file, 0, 0, "", "Megatron-Core's MambaMixer: no flag"};
  job.from("model.mamba.conv_kernel", mixer);
  job.from("model.mamba.chunk_size", mixer);
  if (const auto heads = a.integer("--mamba-num-heads", 1)) {
    x.num_heads = *heads;
    job.from("model.mamba.num_heads", a.origin("--mamba-num-heads"));
  } else {
    const long long d_inner = 2LL * m.hidden_size;
    const char* flag = a.given("--mamba-head-dim") ? "--mamba-head-dim" : "--hidden-size";
    if (d_inner % x.head_dim != 0)
      a.fail(flag,
             "without --mamba-num-heads Megatron-LM's MambaMixer takes d_inner = 2 x "
             "--hidden-size = " +
                 std::to_string(d_inner) +
                 " and asserts \"d_inner must be evenly "
                 "divisible by headdim\" (" +
                 std::to_string(x.head_dim) + "); give --mamba-num-heads");
    if (d_inner / x.head_dim > INT_MAX) a.fail(flag, "gives too many Mamba heads");
    x.num_heads = static_cast<int>(d_inner / x.head_dim);
    job.from(
        "model.mamba.num_heads",
        a.origin("--mamba-num-heads",
                 "no --mamba-num-heads: 2 x hidden size / head_dim, as MambaMixer derives it"));
  }
  // MambaMixer.__init__'s asserts.
  if (x.num_heads % x.groups != 0)
    a.fail(a.given("--mamba-num-groups") ? "--mamba-num-groups" : "--mamba-num-heads",
           std::to_string(x.groups) + " groups do not divide the " + std::to_string(x.num_heads) +
               " Mamba heads (Megatron-LM asserts \"nheads must be evenly divisible by "
               "ngroups\")");
  if (a.given("--fp8-format") && x.in_proj_cols() % 16 != 0)
    a.fail("--fp8-format", "the Mamba in_proj's " + std::to_string(x.in_proj_cols()) +
                               " output columns are not a multiple of 16 (Megatron-LM asserts "
                               "\"For FP8, the innermost dimension of the Mamba layer input "
                               "projection output tensor must be a multiple of 16.\")");
}

/// A hybrid model's checks, once its shape is read: what [MG-args] and [MG-hybrid] refuse
/// beside the pattern, and what bmpipe does not model in it (check_hybrid names the
/// symbols); --is-hybrid-model and --spec, which the pattern makes what bmpipe reads.
void read_hybrid_model(const Reading& ctx, ModelShape& m) {
  const Args& a = ctx.a;
  ImportedJob& job = ctx.job;
  const std::string flag = pattern_flag(a);
  // The stock hybrid stack ([MG-hybrid] hybrid_builders.py needs --spec; hybrid_layer_specs'
  // hybrid_stack_spec, which mamba_layer_specs re-exports as mamba_stack_spec): the layers
  // bmpipe models. Any other spec is layers bmpipe cannot see.
  if (a.given("--spec")) {
    std::string given = "--spec";
    std::vector<std::string> words;
    for (const ShellWord& w : a.used().at("--spec").values) {
      words.push_back(w.text);
      given += " " + w.text;
    }
    const bool stock =
        words == std::vector<std::string>{"megatron.core.models.hybrid.hybrid_layer_specs",
                                          "hybrid_stack_spec"} ||
        words == std::vector<std::string>{"megatron.core.models.mamba.mamba_layer_specs",
                                          "mamba_stack_spec"};
    if (m.is_hybrid() && stock)
      job.ignore(given + " (Megatron-Core's hybrid stack, the layers bmpipe models)");
    else
      job.unmodelled.push_back(Unmodelled{a.origin("--spec"), given,
                                          "a custom layer spec, whose layers bmpipe cannot see"});
  }
  if (!m.is_hybrid()) {
    // [MG-args]: the pattern is "the sole indicator that a hybrid model is being run".
    if (a.boolean("--is-hybrid-model"))
      a.fail("--is-hybrid-model",
             "makes no hybrid model alone: Megatron-LM takes a hybrid model's layers from "
             "--hybrid-layer-pattern (\"the sole indicator that a hybrid model is being run\"); "
             "give it");
    return;
  }
  if (a.boolean("--is-hybrid-model")) job.ignore("--is-hybrid-model (implied by " + flag + ")");
  if (m.mtp_layers > 0 && m.mtp_pattern.empty())
    a.fail("--mtp-num-layers",
           "a hybrid model's multi-token prediction depths need their block's layers: give "
           "them after '/' in " +
               flag +
               " (\"M*M-/*E\": the block *E at one depth; Megatron-LM warns \"Hybrid model "
               "with --mtp-num-layers but no MTP pattern\"), or the deprecated "
               "--mtp-hybrid-override-pattern");
  if (m.is_mla())
    a.fail("--multi-latent-attention",
           "in a hybrid model (Megatron-Core's + layers), which bmpipe does not model yet");
  if (m.hybrid_pattern.find('E') != std::string::npos && !m.is_moe())
    a.fail(flag,
           "has MoE layers (E) but no --num-experts: Megatron-LM builds them from the "
           "expert flags");
  if (const auto g = m.hybrid_pattern.find('G'); g != std::string::npos)
    a.fail(flag, "symbol 'G' at position " + std::to_string(g) +
                     ": Gated DeltaNet layers, whose Megatron flags this import does not read "
                     "yet (an HF config.json of the model does: model.hf_config)");
  try {
    check_hybrid(m);
  } catch (const ShapeError& e) {
    a.fail(flag, e.what());
  }
}

/// Whether llama-style layers run RoPE (ModelShape::rotary). Megatron-LM at d98e8a64: a
/// HybridModel's position_embedding_type defaults to none (megatron/training/models/hybrid.py),
/// a GPTModel's to learned_absolute (megatron/training/models/gpt.py). none turns RoPE off;
/// rope, mrope and yarn keep it (their variants are costed as RoPE); a hybrid model's
/// learned_absolute adds a position table bmpipe does not model. A transformer's default
/// learned_absolute is costed as RoPE, as before (a table lookup against RoPE's two passes).
void read_position_embedding(const Reading& ctx, ModelShape& m) {
  const Args& a = ctx.a;
  if (m.architecture != Architecture::llama) return;  // gpt: learned positions, costed as such
  const std::optional<std::string> type = a.choice("--position-embedding-type");
  const std::string value = type.value_or(m.is_hybrid() ? "none" : "learned_absolute");
  if (m.is_hybrid() && value == "learned_absolute")
    a.fail("--position-embedding-type",
           "learned_absolute in a hybrid model adds a position table bmpipe does not model "
           "(expected none, Megatron's default for HybridModel, or rope)");
  m.rotary = value != "none";
  if (!m.rotary)
    ctx.job.from("model.rotary",
                 type ? a.origin("--position-embedding-type")
                      : a.origin(pattern_flag(a),
                                 "a hybrid model without --position-embedding-type: none "
                                 "(Megatron-LM's HybridModel default)"));
}

/// Sliding-window attention ([MG-args] --window-size, a tuple_type "L,R", and
/// --window-attn-skip-freq, a moe_freq_type). Megatron-Core hands window_size to
/// TransformerEngine, where a query attends the keys i - L .. i (TE's check_set_window_size
/// sets R to 0 under the causal mask, so R changes nothing): model.sliding_window L + 1, as
/// Megatron-Bridge converts it (067f987d, models/conversion/utils.py mcore_to_hf_window_size;
/// gpt_oss_bridge.py writes HF's 128 as (127, 0)). Which layers: is_layer_window_attention
/// (megatron/core/transformer/utils.py at d98e8a64) windows every layer without the skip
/// flag; an int N windows the 1-based layer_number with layer_number % N != 0, so N = 2 is
/// model.sliding_every 2 (even 0-based layers, gpt-oss's) and N = 1 none; a list gives 1
/// (windowed) or 0 per layer. An N > 2 ((N-1):1, Gemma 3's 5:1) is model.full_every N; a
/// list that is neither every k-th layer from layer 0 nor all but every k-th counted from 1
/// is refused rather than costed otherwise.
void read_window(const Reading& ctx, ModelShape& m) {
  const Args& a = ctx.a;
  ImportedJob& job = ctx.job;
  const auto size = a.single("--window-size");
  const auto skip = a.single("--window-attn-skip-freq");
  if (!size) {
    if (skip) job.ignore("--window-attn-skip-freq (no effect without --window-size)");
    return;
  }
  std::string text = *size;
  text.erase(std::remove_if(text.begin(), text.end(),
                            [](char ch) { return ch == '(' || ch == ')' || ch == ' '; }),
             text.end());
  const auto comma = text.find(',');
  long long left = 0;
  try {
    std::size_t used = 0;
    left = std::stoll(text.substr(0, comma), &used);
    if (used != comma || comma == std::string::npos) throw std::invalid_argument("form");
    std::stoll(text.substr(comma + 1), &used);
    if (used != text.size() - comma - 1) throw std::invalid_argument("form");
  } catch (const std::exception&) {
    a.fail("--window-size",
           "expected two integers LEFT,RIGHT (Megatron-LM's tuple_type), got '" + *size + "'");
  }
  if (left == -1) {
    job.notes.push_back("--window-size " + *size + ": an infinite left window, no sliding window.");
    return;
  }
  if (left < 0 || left >= detail::kWindow.max)
    a.fail("--window-size", "the left window must be -1 (none) or from 0 to " +
                                std::to_string(static_cast<long long>(detail::kWindow.max) - 1) +
                                ", got " + std::to_string(left));
  if (m.is_mla())
    a.fail("--window-size",
           "Megatron-Core's multi-latent attention asserts window_size (-1, -1) (attention.py: "
           "\"Set config.window_size = None or use a non-MLA attention layer\")");
  m.sliding_window = static_cast<int>(left + 1);
  m.sliding_every = 1;
  job.from("model.sliding_window",
           a.origin("--window-size", "--window-size " + *size + ": " + std::to_string(left) +
                                         " keys before the query and the query itself"));
  if (!skip) {
    job.from("model.sliding_every",
             a.origin("--window-size", "no --window-attn-skip-freq: every layer windowed"));
    return;
  }
  std::vector<int> windowed(m.num_layers, 0);
  const bool whole = !skip->empty() && std::all_of(skip->begin(), skip->end(),
                                                   [](char ch) { return ch >= '0' && ch <= '9'; });
  if (whole) {
    long long n = 0;
    try {
      n = std::stoll(*skip);
    } catch (const std::exception&) {
      a.fail("--window-attn-skip-freq", "is too large: '" + *skip + "'");
    }
    if (n < 1) a.fail("--window-attn-skip-freq", "must be at least 1, got " + *skip);
    for (int i = 0; i < m.num_layers; ++i) windowed[i] = (i + 1) % n != 0 ? 1 : 0;
  } else {
    try {
      windowed = megatron_moe_pattern(*skip, m.num_layers);
    } catch (const FormatError& e) {
      // The same moe_freq_type parser; its messages name the MoE flag.
      std::string why = e.what();
      if (why.rfind("--moe-layer-freq: ", 0) == 0) why.erase(0, 18);
      a.fail("--window-attn-skip-freq", why);
    }
  }
  // The k with windowed[i] == (i % k == 0) for every layer, if there is one.
  int every = 0;
  for (int k = 1; k <= m.num_layers && every == 0; ++k) {
    bool fits = true;
    for (int i = 0; i < m.num_layers && fits; ++i) fits = windowed[i] == (i % k == 0 ? 1 : 0);
    if (fits) every = k;
  }
  if (std::find(windowed.begin(), windowed.end(), 1) == windowed.end()) {
    m.sliding_window = 0;
    m.sliding_every = 0;
    job.notes.push_back("--window-attn-skip-freq " + *skip + " windows no layer.");
    return;
  }
  // Else the k with windowed[i] == ((i + 1) % k != 0): model.full_every (Gemma 3's 6).
  int full = 0;
  for (int k = 2; k <= m.num_layers && every == 0 && full == 0; ++k) {
    bool fits = true;
    for (int i = 0; i < m.num_layers && fits; ++i) fits = windowed[i] == ((i + 1) % k != 0 ? 1 : 0);
    if (fits) full = k;
  }
  if (every == 0 && full == 0)
    a.fail("--window-attn-skip-freq",
           "'" + *skip +
               "' is neither every k-th layer from layer 0 (model.sliding_every) nor all but "
               "every k-th counted from 1 (model.full_every: an int N windows N-1 layers of N)");
  m.sliding_every = every;
  m.full_every = full;
  job.from(every > 0 ? "model.sliding_every" : "model.full_every",
           a.origin("--window-attn-skip-freq"));
}

/// The model: its shape, with Megatron-LM's defaults and checks; job.shape.
void read_model(const Reading& ctx) {
  const Args& a = ctx.a;
  ImportedJob& job = ctx.job;
  const std::string& file = ctx.file;
  ModelShape m;
  read_layers_and_attention(ctx, m);
  read_mlp(ctx, m);
  read_vocabulary(ctx, m);
  read_experts(ctx, m);
  read_latent_attention(ctx, m);
  read_mamba(ctx, m);
  read_hybrid_model(ctx, m);
  read_position_embedding(ctx, m);
  read_window(ctx, m);
  {
    // [MG-config]: attention_dropout and hidden_dropout default to 0.1.
    const auto attention = a.real("--attention-dropout", 0, 1);
    const auto hidden = a.real("--hidden-dropout", 0, 1);
    job.dropout = attention.value_or(0.1) > 0 || hidden.value_or(0.1) > 0;
    auto shown_rate = [](const std::optional<double>& v) {
      return v ? format_number(*v) : std::string("0.1 (default)");
    };
    job.from("model.dropout", a.origin(attention ? "--attention-dropout" : "--hidden-dropout",
                                       "--attention-dropout " + shown_rate(attention) +
                                           ", --hidden-dropout " + shown_rate(hidden)));
  }
  if (a.boolean("--use-flash-attn")) {
    job.flash_attention = true;
    job.from("model.flash_attention", a.origin("--use-flash-attn"));
  }
  // [MG-lm] LanguageModule._set_attention_backend at d98e8a64: flash, fused and auto leave
  // TransformerEngine a fused kernel (NVTE_FLASH_ATTN / NVTE_FUSED_ATTN 1), which bmpipe
  // costs as one flash-attention core; unfused (NVTE_UNFUSED_ATTN 1 alone: TE's
  // UnfusedDotProductAttention) and local (all three 0: Megatron-Core's DotProductAttention)
  // form the s x s scores, softmax them and keep the probabilities: model.flash_attention
  // false, Megatron's unfused core.
  if (const auto backend = a.choice("--attention-backend")) {
    job.flash_attention = *backend != "unfused" && *backend != "local";
    job.from("model.flash_attention", a.origin("--attention-backend"));
  }
  job.shape = m;
  job.from("model.name", Origin{file, 0, 0, "", "the arguments file's name"});
}

/// The parallel sizes and the batch: tp, pp, seq_length, micro- and global batch.
void read_batch_and_parallelism(const Reading& ctx) {
  const Args& a = ctx.a;
  ImportedJob& job = ctx.job;
  job.tp = tensor_parallel_size(a);
  job.from("training.tp", a.origin("--tensor-model-parallel-size",
                                   a.given("--tensor-model-parallel-size") ? "" : "default 1"));
  job.pp = a.integer("--pipeline-model-parallel-size", 1).value_or(1);
  job.from("training.pp", a.origin("--pipeline-model-parallel-size",
                                   a.given("--pipeline-model-parallel-size") ? "" : "default 1"));
  if (job.shape && job.shape->is_moe()) {
    job.ep = a.integer("--expert-model-parallel-size", 1).value_or(1);
    job.from("training.ep", a.origin("--expert-model-parallel-size",
                                     a.given("--expert-model-parallel-size") ? "" : "default 1"));
    // [MG-args] validate_args: expert_tensor_parallel_size defaults to the tp size.
    job.etp = a.integer("--expert-tensor-parallel-size", 1).value_or(job.tp);
    job.from("training.etp", a.origin("--expert-tensor-parallel-size",
                                      a.given("--expert-tensor-parallel-size")
                                          ? ""
                                          : "Megatron-LM's default: --tensor-model-parallel-size"));
  } else {
    for (const char* f : {"--expert-model-parallel-size", "--expert-tensor-parallel-size"})
      if (a.given(f)) job.ignore(std::string(f) + " (no effect without --num-experts)");
  }
  job.seq_length = ctx.require_int("--seq-length", 1, "the sequence length");
  job.from("training.seq_length", a.origin("--seq-length"));
  job.micro_batch_size = ctx.require_int("--micro-batch-size", 1, "the micro-batch size");
  job.from("training.micro_batch_size", a.origin("--micro-batch-size"));
  if (const auto gbs = a.integer("--global-batch-size", 1)) {
    job.global_batch_size = *gbs;
    job.from("training.global_batch_size", a.origin("--global-batch-size"));
    // The micro-batches are the global batch's (global / (micro-batch size x dp)): a
    // refusal of them is one of this flag.
    job.from("training.microbatches", a.origin("--global-batch-size"));
  } else {
    // [MG-args]: the global batch defaults to micro_batch_size * data_parallel_size.
    job.microbatches = 1;
    job.from("training.microbatches",
             a.origin("--global-batch-size",
                      "no --global-batch-size: micro-batch size x dp, one micro-batch"));
  }
}

/// Sharded data parallelism ([MG-args]; megatron/core/distributed/fsdp, read): torch FSDP2
/// (--use-torch-fsdp2, fully_shard with resharding after forward) shards parameters,
/// gradients and optimizer state: ZeRO-3. Megatron-FSDP (--use-megatron-fsdp) shards what
/// --data-parallel-sharding-strategy says: no_shard, optim, optim_grads, optim_grads_params
/// = zero_stage 0, 1, 2, 3 (the strategy is read only under Megatron-FSDP; its parser
/// default is no_shard). Stages 2 and 3 are written as training.fsdp with the stage; 0 and 1
/// as the stage alone (Megatron-FSDP then runs as plain or distributed-optimizer data
/// parallel). --overlap-param-gather: training.optimizer.overlap_param_gather.
void read_sharded_data_parallel(const Args& a, ImportedJob& job) {
  const bool torch_fsdp = a.boolean("--use-torch-fsdp2");
  const bool megatron_fsdp = a.boolean("--use-megatron-fsdp");
  if (torch_fsdp && megatron_fsdp)
    a.fail("--use-torch-fsdp2",
           "cannot be given with --use-megatron-fsdp (Megatron-LM asserts "
           "at most one FSDP implementation)");
  const auto strategy = a.choice("--data-parallel-sharding-strategy");
  if (torch_fsdp) {
    job.zero_stage = 3;
    job.fsdp = true;
    job.from("training.optimizer.zero_stage",
             a.origin("--use-torch-fsdp2",
                      "FSDP2: parameters, gradients and optimizer state "
                      "sharded over dp"));
    job.from("training.fsdp", a.origin("--use-torch-fsdp2"));
  } else if (megatron_fsdp) {
    const std::string s = strategy.value_or("no_shard");
    int stage = 0;
    for (int i = 0; i < 4; ++i)
      if (kShardingStrategy[i] == s) stage = i;
    job.zero_stage = stage;
    const std::string flag = strategy ? "--data-parallel-sharding-strategy" : "--use-megatron-fsdp";
    job.from("training.optimizer.zero_stage",
             a.origin(flag, "Megatron-FSDP, sharding strategy " + std::string(s)));
    if (stage >= 2) {
      job.fsdp = true;
      job.from("training.fsdp", a.origin("--use-megatron-fsdp"));
    } else {
      job.notes.push_back("--use-megatron-fsdp with sharding strategy " + std::string(s) +
                          " shards no gradients: modelled as zero_stage " + std::to_string(stage) +
                          " without training.fsdp.");
    }
  } else if (strategy) {
    job.notes.push_back("--data-parallel-sharding-strategy " + *strategy +
                        " has no effect without --use-megatron-fsdp (Megatron-LM reads it only "
                        "there).");
  }
  // Hybrid sharding (NVIDIA/Megatron-LM d98e8a64, megatron/core/parallel_state.py,
  // initialize_model_parallel): the dp x cp ranks split into
  // --num-distributed-optimizer-instances copies of consecutive ranks, each sharding the
  // state (the distributed optimizer's buckets, or Megatron-FSDP's HSDP), the copies
  // all-reducing their shards (param_and_grad_buffer.py, start_grad_sync). Without a
  // sharded optimizer the reduction runs over the whole dp group and the flag does nothing.
  if (const auto copies = a.integer("--num-distributed-optimizer-instances", 1);
      copies && *copies > 1) {
    if (job.zero_stage.value_or(0) < 1) {
      job.notes.push_back(
          "--num-distributed-optimizer-instances has no effect without a "
          "sharded optimizer (Megatron-LM reduces over the whole dp group "
          "then).");
    } else {
      job.shard_copies = static_cast<int>(*copies);
      job.from("training.fsdp_shard_group",
               a.origin("--num-distributed-optimizer-instances",
                        "dp x cp / " + std::to_string(*copies) +
                            " ranks shard the state, the copies replicate it"));
    }
  }
  // --torch-fsdp2-no-reshard-after-forward (store_false of torch_fsdp2_reshard_after_forward,
  // read by training.py into TorchFullyShardedDataParallelConfig.reshard_after_forward):
  // only FSDP2 reads it.
  if (a.boolean("--torch-fsdp2-no-reshard-after-forward")) {
    if (!torch_fsdp) {
      job.notes.push_back(
          "--torch-fsdp2-no-reshard-after-forward has no effect without "
          "--use-torch-fsdp2 (Megatron-LM reads it only there).");
    } else {
      job.fsdp_reshard_after_forward = false;
      job.from("training.fsdp_reshard_after_forward",
               a.origin("--torch-fsdp2-no-reshard-after-forward"));
    }
  }
  if (a.boolean("--overlap-param-gather")) {
    // [MG-args]: the overlap needs the distributed optimizer (or FSDP) to have a gather.
    if (job.zero_stage.value_or(0) < 1)
      a.fail("--overlap-param-gather",
             "needs --use-distributed-optimizer or FSDP (Megatron-LM asserts it): there is no "
             "parameter all-gather to overlap");
    job.overlap_param_gather = true;
    job.from("training.optimizer.overlap_param_gather", a.origin("--overlap-param-gather"));
  }
}

/// Optimizer offload ([MG-args], [MG-optim]): --optimizer-cpu-offload runs the optimizer of
/// --optimizer-offload-fraction of the parameters on the host (the parser's default 1.0;
/// without --optimizer-cpu-offload the fraction is read by nothing, so it changes nothing):
/// training.optimizer.offload_fraction. validate_args asserts --use-precision-aware-optimizer
/// beside it, which the optimizer refuses without the distributed optimizer; under offload
/// the precision-aware optimizer keeps fp32 state in the hybrid optimizer (its dtype flags
/// are read apart), which is what bmpipe models. Without offload it stores the fp32 master
/// weights as 16-bit remainders (store_param_remainders), which bmpipe does not model.
void read_optimizer_offload(const Args& a, ImportedJob& job) {
  const bool offload = a.boolean("--optimizer-cpu-offload");
  const bool precision_aware = a.boolean("--use-precision-aware-optimizer");
  const auto fraction = a.real("--optimizer-offload-fraction", 0, 1);
  // The hybrid optimizer's host buffers are pinned unless these say otherwise: the copies
  // bmpipe costs at the host link's speed are pinned ones. Without offload nothing reads them.
  for (const char* pin : {"--no-pin-cpu-grads", "--no-pin-cpu-params"}) {
    if (!a.boolean(pin)) continue;
    if (offload)
      job.unmodelled.push_back(Unmodelled{
          a.origin(pin), pin,
          "pageable host buffers for the offloaded optimizer's copies, which then run "
          "synchronously and slower than the pinned copies bmpipe costs at the host link's "
          "speed"});
    else
      job.ignore(std::string(pin) + " (not modelled)");
  }
  if (precision_aware && job.zero_stage.value_or(0) < 1)
    a.fail("--use-precision-aware-optimizer",
           "needs --use-distributed-optimizer (Megatron-LM raises \"--use-precision-aware-"
           "optimizer only supported with distributed optimizer\")");
  if (!offload) {
    if (fraction)
      job.notes.push_back(
          "--optimizer-offload-fraction has no effect without "
          "--optimizer-cpu-offload (Megatron-LM reads it only there).");
    if (precision_aware)
      job.unmodelled.push_back(Unmodelled{
          a.origin("--use-precision-aware-optimizer"), "--use-precision-aware-optimizer",
          "the precision-aware optimizer keeps the fp32 master weights as 16-bit remainders "
          "beside the bf16 ones (store_param_remainders); bmpipe models 4 bytes a master "
          "weight (modelled under --optimizer-cpu-offload, where the hybrid optimizer keeps "
          "them whole)"});
    return;
  }
  if (!precision_aware)
    a.fail("--optimizer-cpu-offload",
           "needs --use-precision-aware-optimizer (Megatron-LM asserts \"The optimizer cpu "
           "offload must be used in conjunction with `--use-precision-aware-optimizer`\")");
  job.optimizer_offload_fraction = fraction.value_or(1.0);
  job.from("training.optimizer.offload_fraction",
           a.origin(fraction ? "--optimizer-offload-fraction" : "--optimizer-cpu-offload",
                    fraction ? "" : "--optimizer-cpu-offload: Megatron-LM's default fraction 1.0"));
}

/// Activation offload: --fine-grained-activation-offloading with --offload-modules is
/// training.offload_modules (Megatron-Core's TransformerConfig at d98e8a64,
/// megatron/core/transformer/transformer_config.py __post_init__: the list must not be
/// empty, its names are from the allowed set, attn_proj needs core_attn; the config's
/// checks then refuse what bmpipe's layers lack, with the flag's line). Without the switch
/// the list is read by nothing.
void read_activation_offload(const Args& a, ImportedJob& job) {
  const std::vector<std::string> modules = a.list("--offload-modules");
  if (!a.boolean("--fine-grained-activation-offloading")) {
    if (!modules.empty())
      job.ignore("--offload-modules (only --fine-grained-activation-offloading reads it)");
    return;
  }
  if (modules.empty())
    a.fail("--fine-grained-activation-offloading",
           "needs --offload-modules (Megatron-Core asserts a non-empty offload_modules)");
  std::string text;
  std::vector<std::string> seen;
  for (const std::string& m : modules) {
    std::string unknown;
    if (parse_offload_modules(m, &unknown) != 0) {
      if (std::find(seen.begin(), seen.end(), m) == seen.end()) {
        seen.push_back(m);
        text += (text.empty() ? "" : ",") + m;
      }
    } else if (m == "fused_group_mlp" || m == "gdp_qkv") {
      job.unmodelled.push_back(Unmodelled{
          a.origin("--offload-modules"), "--offload-modules " + m,
          "offloads the fused grouped MLP or the Gated DeltaProduct mixer's input, which "
          "bmpipe's offload modules do not name"});
    } else {
      a.fail("--offload-modules",
             "unknown module " + shown(m) +
                 " (Megatron-Core's offload_modules: attn_norm, qkv_linear, core_attn, "
                 "attn_proj, mlp_norm, expert_fc1, moe_act, fused_group_mlp, gdp_qkv)");
    }
  }
  const OffloadModules set = parse_offload_modules(text, nullptr);
  if (offloads(set, OffloadModule::attn_proj) && !offloads(set, OffloadModule::core_attn))
    a.fail("--offload-modules",
           "attn_proj needs core_attn (Megatron-Core raises \"attn_proj cannot be set to "
           "offload_modules alone without core_attn\")");
  if (text.empty()) return;
  job.offload_modules = text;
  job.from("training.offload_modules", a.origin("--offload-modules"));
}

/// Whole-layer activation offload: --cpu-offloading-num-layers N (N > 0 turns
/// cpu_offloading on, megatron/training/arguments.py at d98e8a64) is
/// training.offload_layers; 0, Megatron-LM's default, offloads nothing. Megatron-Core's
/// refusals (pp > 1, recomputation, fine-grained offload beside it, N not below the
/// layers) are the config's checks, reported at this flag's line.
void read_layer_offload(const Args& a, ImportedJob& job) {
  const auto layers = a.integer("--cpu-offloading-num-layers", 0);
  if (!layers || *layers == 0) return;
  job.offload_layers = static_cast<int>(*layers);
  job.from("training.offload_layers", a.origin("--cpu-offloading-num-layers"));
}

/// Precision and optimizer: the dtype, the gradients' dtype, the distributed optimizer,
/// and sequence parallelism.
void read_precision_and_optimizer(const Reading& ctx) {
  const Args& a = ctx.a;
  ImportedJob& job = ctx.job;
  const std::string& file = ctx.file;
  const int tp = tensor_parallel_size(a);
  const bool bf16 = a.boolean("--bf16"), fp16 = a.boolean("--fp16");
  if (bf16 && fp16) a.fail("--fp16", "cannot be given with --bf16 (Megatron-LM asserts one)");
  if (!bf16 && !fp16)
    throw ImportError(file, 0, 0, "--bf16",
                      "neither --bf16 nor --fp16: Megatron-LM would train in fp32, which bmpipe "
                      "does not model; add the one the run uses");
  job.dtype = bf16 ? "bf16" : "fp16";
  job.from("training.dtype", a.origin(bf16 ? "--bf16" : "--fp16"));
  // [MG-args]: with bf16 the gradients accumulate and reduce in fp32 unless
  // --grad-reduce-in-bf16; with fp16 only with --accumulate-allreduce-grads-in-fp32.
  const bool fp32_grads = bf16 ? !a.boolean("--grad-reduce-in-bf16")
                               : a.boolean("--accumulate-allreduce-grads-in-fp32");
  job.grad_dtype = fp32_grads ? "fp32" : *job.dtype;
  job.from("training.optimizer.grad_dtype",
           a.origin(bf16 ? "--bf16" : "--fp16",
                    bf16 ? (fp32_grads ? "bf16: gradients in fp32 (Megatron-LM's default)"
                                       : "--grad-reduce-in-bf16")
                         : (fp32_grads ? "--accumulate-allreduce-grads-in-fp32"
                                       : "fp16: gradients in fp16 (Megatron-LM's default)")));
  job.zero_stage = a.boolean("--use-distributed-optimizer") ? 1 : 0;
  job.from("training.optimizer.zero_stage",
           a.origin("--use-distributed-optimizer",
                    *job.zero_stage ? "--use-distributed-optimizer: optimizer state sharded over dp"
                                    : "no --use-distributed-optimizer: replicated optimizer"));
  if (a.boolean("--overlap-grad-reduce")) {
    job.overlap_grad_reduce = true;
    job.from("training.optimizer.overlap_grad_reduce", a.origin("--overlap-grad-reduce"));
  }
  read_sharded_data_parallel(a, job);
  read_optimizer_offload(a, job);
  read_activation_offload(a, job);
  read_layer_offload(a, job);
  if (a.boolean("--overlap-moe-expert-parallel-comm")) {
    // training.moe_overlap: 1F1B and interleaved pair a backward with the next forward.
    job.moe_overlap = true;
    job.from("training.moe_overlap", a.origin("--overlap-moe-expert-parallel-comm"));
  }
  if (a.boolean("--sequence-parallel")) {
    // [MG-args]: sequence parallelism is switched off when tp is 1.
    job.sequence_parallel = tp > 1;
    job.from("training.sequence_parallel", a.origin("--sequence-parallel"));
    if (tp == 1)
      job.notes.push_back(
          "--sequence-parallel has no effect with tp 1 (Megatron-LM turns it "
          "off).");
  }
  if (a.boolean("--tp-comm-overlap")) {
    // [MG-args] validate_args asserts sequence parallelism, which it has just turned off
    // at tp 1: the job would not start.
    if (!job.sequence_parallel.value_or(false))
      a.fail("--tp-comm-overlap",
             tp == 1 ? "needs tp > 1: Megatron-LM turns --sequence-parallel off at tp 1 and "
                       "then asserts it for the overlap"
                     : "needs --sequence-parallel (Megatron-LM asserts it)");
    job.tp_comm_overlap = true;
    job.from("training.tp_comm_overlap", a.origin("--tp-comm-overlap"));
  }
}

/// Context parallelism and FP8 ([MG-args]: --context-parallel-size, default 1;
/// --cp-comm-type, one value or one per layer of p2p, a2a, allgather, a2a+p2p, default p2p;
/// --hierarchical-context-parallel-sizes, nargs '+' of int, read by a2a+p2p alone;
/// --fp8-format e4m3 or hybrid, none when absent; --fp8-recipe, default delayed). bmpipe
/// models the ring (p2p), Ulysses (a2a), the two in a hierarchy (a2a+p2p, with
/// training.cp_hierarchy), and the four recipes of training.fp8_recipe; another exchange
/// or recipe is refused as unmodelled.
void read_context_parallel_and_fp8(const Reading& ctx) {
  const Args& a = ctx.a;
  ImportedJob& job = ctx.job;
  if (const auto cp = a.integer("--context-parallel-size", 1)) {
    job.cp = *cp;
    job.from("training.cp", a.origin("--context-parallel-size"));
  }
  const std::vector<std::string> comm = a.list("--cp-comm-type");
  const bool hierarchical = !comm.empty() && comm.front() == "a2a+p2p";
  if (!comm.empty()) {
    const bool one = std::all_of(comm.begin(), comm.end(),
                                 [&](const std::string& c) { return c == comm.front(); });
    std::string given = "--cp-comm-type";
    for (const std::string& c : comm) given += " " + c;
    if (one && (comm.front() == "p2p" || comm.front() == "a2a" || hierarchical)) {
      job.cp_comm_type = comm.front();
      job.from("training.cp_comm_type", a.origin("--cp-comm-type"));
    } else {
      job.unmodelled.push_back(Unmodelled{
          a.origin("--cp-comm-type"), given,
          one ? "the " + comm.front() +
                    " context-parallel exchange: bmpipe models p2p (the ring), a2a (Ulysses) "
                    "and a2a+p2p"
              : "a context-parallel exchange per layer: bmpipe models one for every layer, "
                "p2p (the ring), a2a (Ulysses) or a2a+p2p"});
    }
  }
  // The sizes, argparse's type=int each; the config's checks hold them to Megatron-LM's
  // own (their product is cp, arguments.py:580-582) and to a2a+p2p.
  const std::string hcp = "--hierarchical-context-parallel-sizes";
  if (a.given(hcp)) {
    long long product = 1;
    for (const std::string& text : a.list(hcp)) {
      int v = 0;
      const auto r = std::from_chars(text.data(), text.data() + text.size(), v);
      if (r.ec != std::errc() || r.ptr != text.data() + text.size() || v < 1)
        a.fail(hcp, "expected sizes of at least 1, got " + shown(text));
      job.cp_hierarchy.push_back(v);
      // Held just above 2^40, more than any --context-parallel-size: levels of up to
      // INT_MAX ranks would overflow it.
      product = product > (1LL << 40) / v ? (1LL << 40) + 1 : product * v;
    }
    // Asserted whatever the exchange (arguments.py:580-582).
    if (product != job.cp.value_or(1))
      a.fail(hcp, "multiply to " +
                      (product > (1LL << 40) ? "more than " + std::to_string(1LL << 40)
                                             : std::to_string(product)) +
                      ", not --context-parallel-size " + std::to_string(job.cp.value_or(1)) +
                      " (Megatron-LM asserts context_parallel_size == "
                      "prod(hierarchical_context_parallel_sizes))");
    if (hierarchical && job.cp.value_or(1) <= 1) {
      // Sizes multiplying to cp 1: Megatron-LM runs no context parallelism, and bmpipe
      // refuses a hierarchy at cp 1 (a setting that changes nothing): the job is cp 1.
      job.cp_hierarchy.clear();
      job.cp_comm_type.reset();
      job.origin.erase("training.cp_comm_type");
      job.ignore("--cp-comm-type a2a+p2p and " + hcp +
                 " (no context parallelism at --context-parallel-size 1)");
    } else if (hierarchical) {
      job.from("training.cp_hierarchy", a.origin(hcp));
    } else {  // the groups are built and no attention reads them
      job.cp_hierarchy.clear();
      job.ignore(hcp + " (read by --cp-comm-type a2a+p2p only)");
    }
  }
  if (const auto format = a.choice("--fp8-format")) {
    job.fp8 = *format;
    job.from("training.fp8", a.origin("--fp8-format"));
  }
  if (const auto recipe = a.single("--fp8-recipe")) {
    if (*recipe == "delayed" || *recipe == "tensorwise" || *recipe == "blockwise" ||
        *recipe == "mxfp8") {
      job.fp8_recipe = *recipe;
      job.from("training.fp8_recipe", a.origin("--fp8-recipe"));
    } else {
      job.unmodelled.push_back(
          Unmodelled{a.origin("--fp8-recipe"), "--fp8-recipe " + *recipe,
                     "the " + *recipe +
                         " FP8 recipe: bmpipe models delayed, tensorwise, blockwise and mxfp8"});
    }
  }
  // NVFP4 GEMMs: bmpipe's fp8_recipe nvfp4 (on low-precision GEMMs, training.fp8 e4m3).
  if (a.choice("--fp4-format")) {
    job.fp8 = "e4m3";
    job.from("training.fp8", a.origin("--fp4-format"));
    job.fp8_recipe = "nvfp4";
    job.from("training.fp8_recipe", a.origin("--fp4-format"));
  }
  // [MG-args]: --fp8-param-gather keeps the FP8 GEMM weights alone (TransformerConfig
  // fp8_param), --fp4-param-gather the FP4 ones; each with its own format.
  const bool fp4 = job.fp8_recipe && *job.fp8_recipe == "nvfp4";
  for (const char* flag : {"--fp8-param-gather", "--fp4-param-gather"}) {
    if (!a.boolean(flag)) continue;
    const bool ours = (std::string_view(flag) == "--fp4-param-gather") == fp4;
    if (job.fp8 && ours) {
      job.fp8_param_gather = true;
      job.from("training.fp8_param_gather", a.origin(flag));
    } else {
      const bool eight = std::string_view(flag) == "--fp8-param-gather";
      job.ignore(std::string(flag) + (eight && fp4 ? " (the GEMMs are FP4: --fp4-param-gather "
                                                     "keeps their weights)"
                                      : eight      ? " (no --fp8-format: the weights stay bf16)"
                                                   : " (no --fp4-format: no FP4 weights to keep)"));
    }
  }
}

/// CUDA graphs as Megatron-LM at d98e8a64 reads them (megatron/training/arguments.py,
/// validate_args; megatron/core/transformer/cuda_graph_config.py): --cuda-graph-impl none
/// (the default), local or transformer_engine captures per layer the modules
/// --cuda-graph-modules names (attn, mlp, moe, moe_router, moe_preprocess, mamba; none: the
/// whole layer; the deprecated "full" is the same), and full_iteration the whole
/// forward-backward. --cuda-graph-scope is the modules' deprecated spelling (not with
/// --cuda-graph-modules), and its value full_iteration sets the impl; --enable-cuda-graph
/// and --external-cuda-graph are local and transformer_engine (not with --cuda-graph-impl).
/// bmpipe's training.cuda_graphs names the captured scopes: a captured kernel costs no
/// launch; the two per-layer implementations capture alike. "mamba" captures a hybrid
/// model's Mamba blocks; the whole layer (no modules) is attn, mlp and moe, plus mamba for a
/// hybrid model.
void read_cuda_graphs(const Reading& ctx) {
  const Args& a = ctx.a;
  ImportedJob& job = ctx.job;
  const bool enable = a.boolean("--enable-cuda-graph");
  const bool external = a.boolean("--external-cuda-graph");
  std::optional<std::string> impl = a.choice("--cuda-graph-impl");
  const char* impl_flag = "--cuda-graph-impl";
  if (enable || external) {
    const char* old = enable ? "--enable-cuda-graph" : "--external-cuda-graph";
    if (impl)
      a.fail(old,
             "is not given with --cuda-graph-impl (Megatron-LM's validate_args: \"Do not "
             "use --enable-cuda-graph or --external-cuda-graph with --cuda-graph-impl.\")");
    if (enable && external)
      a.fail("--external-cuda-graph",
             "is not given with --enable-cuda-graph (Megatron-LM's validate_args: they "
             "\"cannot be enabled at the same time\")");
    impl = enable ? "local" : "transformer_engine";
    impl_flag = old;
  }
  if (a.given("--cuda-graph-scope") && a.given("--cuda-graph-modules"))
    a.fail("--cuda-graph-scope",
           "is not given with --cuda-graph-modules (Megatron-LM's validate_args: \"--cuda-graph-"
           "scope and --cuda-graph-modules cannot be used together.\")");
  const char* modules_flag =
      a.given("--cuda-graph-scope") ? "--cuda-graph-scope" : "--cuda-graph-modules";
  std::vector<std::string> modules = a.list(modules_flag);
  // The deprecated spellings: "full" alone is the whole layer, "full_iteration" the impl.
  if (std::find(modules.begin(), modules.end(), "full") != modules.end()) {
    if (modules.size() > 1)
      a.fail(modules_flag,
             "\"full\" is given alone (Megatron-LM: \"full scope cannot be used "
             "with other scopes.\")");
    modules.clear();
  }
  const auto full_iteration = std::find(modules.begin(), modules.end(), "full_iteration");
  if (full_iteration != modules.end()) {
    if (impl && *impl != "none" && *impl != "local" && *impl != "full_iteration")
      a.fail(modules_flag, "full_iteration is not given with --cuda-graph-impl " + *impl +
                               " (Megatron-LM's cuda_graph_config.py)");
    modules.erase(full_iteration);
    impl = "full_iteration";
    impl_flag = modules_flag;
  }
  if (!impl || *impl == "none") {
    if (!modules.empty())
      job.ignore(std::string(modules_flag) + " (no effect without --cuda-graph-impl)");
    return;
  }
  std::vector<std::string> scopes;
  if (*impl == "full_iteration") {
    if (!modules.empty())
      a.fail(modules_flag,
             "names modules, which --cuda-graph-impl full_iteration captures all "
             "of (Megatron-LM: the modules \"must be empty\")");
    scopes = {"full_iteration"};
  } else {
    if (modules.empty()) {  // the whole layer
      modules = {"attn", "mlp", "moe"};
      if (a.given("--hybrid-layer-pattern") || a.given("--hybrid-override-pattern"))
        modules.push_back("mamba");
    }
    for (const std::string& m : modules) {
      if (m != "attn" && m != "mlp" && m != "moe" && m != "moe_router" && m != "moe_preprocess" &&
          m != "mamba")
        a.fail(modules_flag, "unknown module " + shown(m) +
                                 " (Megatron-LM's CudaGraphModule: attn, mlp, moe, moe_router, "
                                 "moe_preprocess, mamba)");
      if (std::find(scopes.begin(), scopes.end(), m) == scopes.end()) scopes.push_back(m);
    }
  }
  std::string text;
  for (const std::string& m : scopes) text += (text.empty() ? "" : ",") + m;
  job.cuda_graphs = text;
  job.from("training.cuda_graphs", a.origin(a.given(modules_flag) ? modules_flag : impl_flag));
}

/// The partition flags as given: the three ways to ask for virtual stages, the first and
/// last ranks' layers, and the embedding and the loss counted as layers.
struct PartitionFlags {
  std::optional<int> per_stage, per_rank;
  std::optional<std::string> layout;
  std::optional<int> first, last;
  bool account_embedding = false, account_loss = false;
};

/// Reads them, refusing two ways to ask for virtual stages as Megatron-LM does.
PartitionFlags partition_flags(const Args& a) {
  PartitionFlags f;
  f.per_stage = a.integer("--num-layers-per-virtual-pipeline-stage", 1);
  f.per_rank = a.integer("--num-virtual-stages-per-pipeline-rank", 1);
  f.layout = a.single("--pipeline-model-parallel-layout");
  {
    // [MG-args]: at most one of the three.
    const char* names[] = {"--num-layers-per-virtual-pipeline-stage",
                           "--num-virtual-stages-per-pipeline-rank",
                           "--pipeline-model-parallel-layout"};
    const bool set[] = {f.per_stage.has_value(), f.per_rank.has_value(), f.layout.has_value()};
    int count = 0;
    for (int k = 0; k < 3; ++k)
      if (set[k] && ++count == 2)
        a.fail(names[k],
               "give at most one of --num-layers-per-virtual-pipeline-stage, "
               "--num-virtual-stages-per-pipeline-rank and --pipeline-model-parallel-layout "
               "(Megatron-LM's arguments.py refuses two)");
  }
  f.first = a.integer("--decoder-first-pipeline-num-layers", 1);
  f.last = a.integer("--decoder-last-pipeline-num-layers", 1);
  f.account_embedding = a.boolean("--account-for-embedding-in-pipeline-split");
  f.account_loss = a.boolean("--account-for-loss-in-pipeline-split");
  return f;
}

/// Decoder layers per stage, virtual stages per rank, and where the split came from.
struct Split {
  int vpp = 1;
  std::vector<int> partition;
  Origin origin;
};

/// The split --pipeline-model-parallel-layout gives.
Split split_of_layout(const Args& a, const PartitionFlags& f, int L, int pp) {
  const auto& [per_stage, per_rank, layout, first, last, account_embedding, account_loss] = f;
  int vpp = 1;
  std::vector<int> partition;
  Origin partition_origin;
  const std::string flag = "--pipeline-model-parallel-layout";
  // [MG-config]: the layout cannot be set with other pipeline layout arguments.
  if (first || last || account_embedding || account_loss)
    a.fail(flag,
           "cannot be given with --decoder-first/last-pipeline-num-layers or "
           "--account-for-embedding/loss-in-pipeline-split (Megatron-LM refuses them "
           "together)");
  std::vector<MegatronLayoutStage> stages;
  try {
    stages = parse_megatron_layout(*layout);
  } catch (const FormatError& e) {
    a.fail(flag, e.what());
  }
  if (stages.size() % pp != 0)
    a.fail(flag, std::to_string(stages.size()) + " stages do not divide over " +
                     std::to_string(pp) + " pipeline ranks (--pipeline-model-parallel-size)");
  vpp = static_cast<int>(stages.size()) / pp;
  int decoders = 0, mtp = 0;
  for (std::size_t s = 0; s < stages.size(); ++s) {
    mtp += stages[s].mtp;
    if (stages[s].embedding && s != 0)
      a.fail(flag, "puts the embedding E on stage " + std::to_string(s) +
                       "; bmpipe's cost model runs it on the first stage");
    if (stages[s].loss && s + 1 != stages.size())
      a.fail(flag, "puts the loss L on stage " + std::to_string(s) +
                       "; bmpipe's cost model runs it on the last stage");
    decoders += stages[s].decoders;
    partition.push_back(stages[s].decoders);
  }
  if (decoders != L)
    a.fail(flag, "holds " + std::to_string(decoders) + " decoder layers (t) but --num-layers is " +
                     std::to_string(L));
  // [MG-layout] validate_layer_layout: the 'm' count is --mtp-num-layers.
  const int mtp_flag = a.integer("--mtp-num-layers", 0).value_or(0);
  if (mtp != mtp_flag)
    a.fail(flag, "holds " + std::to_string(mtp) +
                     " multi-token prediction layers (m) but --mtp-num-layers is " +
                     std::to_string(mtp_flag) + " (Megatron-LM refuses it)");
  // A stage without decoders, or MTP layers before the last stage, is the same job only on a
  // layer table with separate ends: training.megatron_layout then places every layer and
  // the config has no training.partition (imported_yaml); `partition` stays the
  // decoder split, for the recompute flags' per-stage counts.
  partition_origin = a.origin(flag);
  return Split{vpp, partition, partition_origin};
}

/// The split of the counts: virtual stages from their flags, then the first and last
/// ranks' layers, or Megatron-LM's even split.
Split split_of_counts(const Args& a, const PartitionFlags& f, int L, int pp) {
  const auto& [per_stage, per_rank, layout, first, last, account_embedding, account_loss] = f;
  int vpp = 1;
  std::vector<int> partition;
  Origin partition_origin;
  if (per_rank) vpp = *per_rank;
  if (per_stage) {
    if (first || last)
      a.fail("--num-layers-per-virtual-pipeline-stage",
             "cannot be used with --decoder-first/last-pipeline-num-layers: Megatron-LM asks "
             "for --num-virtual-stages-per-pipeline-rank then");
    // [MG-args]: vpp = ((num_layers + accounted) / pp) / num_layers_per_virtual_stage.
    const int total = L + account_embedding + account_loss;
    if (total % pp != 0)
      a.fail("--num-layers", std::to_string(total) + " layers do not divide over " +
                                 std::to_string(pp) + " pipeline ranks");
    if ((total / pp) % *per_stage != 0)
      a.fail("--num-layers-per-virtual-pipeline-stage",
             std::to_string(*per_stage) + " does not divide the " + std::to_string(total / pp) +
                 " layers of a pipeline rank");
    vpp = (total / pp) / *per_stage;
  }
  if (first || last) {
    const char* flag =
        first ? "--decoder-first-pipeline-num-layers" : "--decoder-last-pipeline-num-layers";
    if (account_embedding || account_loss)
      a.fail(flag,
             "cannot be given with --account-for-embedding/loss-in-pipeline-split "
             "(Megatron-LM refuses them together)");
    const auto built = megatron_uneven(L, pp, vpp, first, last);
    if (!built)
      a.fail(flag, "Megatron-LM refuses this split of " + std::to_string(L) + " layers over " +
                       std::to_string(pp) + " ranks" +
                       (vpp > 1 ? " x " + std::to_string(vpp) + " virtual stages" : std::string()) +
                       ": each given count must be positive" +
                       (vpp > 1 ? " and divisible by " + std::to_string(vpp) : std::string()) +
                       ", and the layers left must split evenly over the other ranks (none left "
                       "exactly when no rank is left)");
    partition = *built;
    partition_origin = a.origin(
        flag, std::string(first ? "--decoder-first-pipeline-num-layers" : "") +
                  (first && last ? ", " : "") + (last ? "--decoder-last-pipeline-num-layers" : ""));
  } else {
    try {
      partition = megatron_even(L, pp, vpp, account_embedding, account_loss);
    } catch (const FormatError& e) {
      a.fail(a.given("--pipeline-model-parallel-size") ? "--pipeline-model-parallel-size"
                                                       : "--num-layers",
             e.what());
    }
    partition_origin = a.origin(
        "--num-layers",
        std::string("Megatron-LM's even split") +
            (account_embedding || account_loss
                 ? std::string(", counting the ") + (account_embedding ? "embedding" : "") +
                       (account_embedding && account_loss ? " and the " : "") +
                       (account_loss ? "loss" : "") + " as a layer"
                 : std::string()));
  }
  return Split{vpp, partition, partition_origin};
}

/// A hybrid model's split ([MG-args] validate_args' hybrid block, [MG-hybrid]
/// select_pipeline_segment): the '|' segments of the pattern are the stages, in Megatron's
/// order (segment vp_stage x pp + pp_rank, bmpipe's interleaved order), their count a
/// multiple of pp (vpp = segments / pp); a pattern without '|' is split as Megatron-LM
/// splits --num-layers (evenly, or by the first and last ranks' counts). The other ways to
/// ask for a split are refused beside the pattern, with Megatron-LM's messages.
Split split_of_hybrid(const Args& a, const PartitionFlags& f, const HybridPattern& p, int pp) {
  const std::string& flag = p.flag;
  const int L = static_cast<int>(p.layers.size());
  if (f.per_stage)
    a.fail("--num-layers-per-virtual-pipeline-stage",
           "should not be used with --hybrid-layer-pattern (Megatron-LM asserts: \"To specify "
           "virtual pipelining, describe a number of pipeline segments in --hybrid-layer-pattern "
           "that is a multiple of --pipeline-model-parallel-size greater than 1\")");
  if (f.per_rank)
    a.fail("--num-virtual-stages-per-pipeline-rank",
           "should not be used with --hybrid-layer-pattern (Megatron-LM asserts: \"Virtual "
           "pipeline stages are derived from the number of | segments in the pattern.\")");
  if (f.layout)
    a.fail("--pipeline-model-parallel-layout",
           "should not be used with --hybrid-layer-pattern (Megatron-LM asserts: \"Pipeline "
           "stage layout is defined by | separators in the pattern.\")");
  for (const char* account :
       {"--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split"})
    if (a.boolean(account))
      a.fail(account,
             "should not be used with --hybrid-layer-pattern (Megatron-LM asserts: \"Pipeline "
             "stage layout is defined by | separators in the pattern.\")");
  const int segments = static_cast<int>(p.segments.size());
  if (segments == 1) {
    if (!f.first && !f.last && L % pp != 0)
      a.fail(flag, "Number of layers (" + std::to_string(L) +
                       ") must be evenly divisible by pipeline-model-parallel-size (" +
                       std::to_string(pp) +
                       ") when no pipe separators are specified in the pattern (Megatron-LM's "
                       "select_pipeline_segment); put '|' between the stages' layers");
    return split_of_counts(a, f, L, pp);
  }
  if (f.first || f.last)
    a.fail(f.first ? "--decoder-first-pipeline-num-layers" : "--decoder-last-pipeline-num-layers",
           "should not be specified when --hybrid-layer-pattern contains pipe separators, as "
           "the pipeline layout is explicitly defined (Megatron-LM asserts it)");
  if (segments % pp != 0)
    a.fail(flag,
           "The number of hybrid pipeline segments described by --hybrid-layer-pattern "
           "must be evenly divisible by --pipeline-model-parallel-size. Got " +
               std::to_string(segments) + " segments and " + std::to_string(pp) +
               " pipeline parallel size. (Megatron-LM's validate_args)");
  for (int s = 0; s < segments; ++s)
    if (p.segments[s] == 0)
      a.fail(flag, "segment " + std::to_string(s) +
                       " between '|' holds no layer: bmpipe's stages each run at least one");
  return Split{segments / pp, p.segments, a.origin(flag, "the layers between the '|' of " + flag)};
}

/// Virtual stages and the partition: the layout string, the first/last-rank counts or the
/// even split, or a hybrid model's '|' segments; the schedule follows from vpp.
void read_partition(const Reading& ctx) {
  const Args& a = ctx.a;
  ImportedJob& job = ctx.job;
  const std::string& file = ctx.file;
  const int L = job.shape->num_layers, pp = job.pp;
  const PartitionFlags f = partition_flags(a);
  const auto& [per_stage, per_rank, layout, first, last, account_embedding, account_loss] = f;
  const std::optional<HybridPattern> hybrid = hybrid_pattern(a);
  // [MG-config]: the layout replaces the other partition flags.
  const Split split = hybrid   ? split_of_hybrid(a, f, *hybrid, pp)
                      : layout ? split_of_layout(a, f, L, pp)
                               : split_of_counts(a, f, L, pp);
  const int vpp = split.vpp;
  // [MG-args]: the interleaved schedule needs more than one pipeline rank.
  if (vpp > 1 && pp < 2)
    a.fail(hybrid     ? hybrid->flag
           : per_rank ? "--num-virtual-stages-per-pipeline-rank"
                      : (layout ? "--pipeline-model-parallel-layout"
                                : "--num-layers-per-virtual-pipeline-stage"),
           std::to_string(vpp) + " virtual stages need --pipeline-model-parallel-size > 1");
  job.vpp = vpp;
  job.schedule = vpp > 1 ? "interleaved" : "1f1b";
  job.from("training.vpp",
           hybrid && hybrid->segments.size() > 1 ? a.origin(hybrid->flag, "its '|' segments / pp")
           : layout    ? a.origin("--pipeline-model-parallel-layout", "stages of the layout / pp")
           : per_rank  ? a.origin("--num-virtual-stages-per-pipeline-rank")
           : per_stage ? a.origin("--num-layers-per-virtual-pipeline-stage",
                                  "layers per rank / --num-layers-per-virtual-pipeline-stage")
                       : a.origin("--num-virtual-stages-per-pipeline-rank", "no virtual stages"));
  job.from("training.schedule",
           Origin{file, 0, 0, "",
                  vpp > 1 ? "Megatron-LM's interleaved 1F1B with virtual stages"
                          : "Megatron-LM's 1F1B"});
  job.partition = split.partition;
  job.from("training.partition", split.origin);
  if (layout) {
    job.megatron_layout = *layout;
    job.from("training.megatron_layout", a.origin("--pipeline-model-parallel-layout"));
  }
}

/// The recompute flags as a mode per layer.
void read_recompute(const Reading& ctx) {
  const Args& a = ctx.a;
  ImportedJob& job = ctx.job;
  const int L = job.shape->num_layers;
  const std::vector<int>& partition = job.partition;
  std::optional<std::string> granularity = a.choice("--recompute-granularity");
  std::string granularity_flag = "--recompute-granularity";
  // [MG-args]: --recompute-activations means selective granularity.
  if (a.boolean("--recompute-activations")) {
    granularity = "selective";
    granularity_flag = "--recompute-activations";
  }
  const auto method = a.choice("--recompute-method");
  const auto count = a.integer("--recompute-num-layers", 1);
  const std::vector<std::string> modules = a.list("--recompute-modules");
  std::vector<Recompute> modes(static_cast<std::size_t>(L), Recompute::none);
  Origin recompute_origin = a.origin("--recompute-granularity", "no --recompute-granularity");
  if (!granularity) {
    for (const char* f : {"--recompute-method", "--recompute-num-layers", "--recompute-modules"})
      if (a.given(f)) job.ignore(std::string(f) + " (no effect without --recompute-granularity)");
  } else if (*granularity == "selective") {
    // [MG-config]: selective takes no method and no count, and covers every layer.
    if (method)
      a.fail("--recompute-method", "is not supported with selective recompute (Megatron-LM)");
    if (count)
      a.fail("--recompute-num-layers", "must not be given with selective recompute (Megatron-LM)");
    std::fill(modes.begin(), modes.end(), Recompute::selective);
    recompute_origin = a.origin(granularity_flag);
    if (a.given("--recompute-modules")) {
      // Megatron-Core's recompute_modules (transformer_config.py at d98e8a64: the allowed
      // set in __post_init__); bmpipe's training.recompute_modules names the modelled ones.
      std::string text;
      std::vector<std::string> seen;
      for (const std::string& m : modules) {
        std::string unknown;
        if (parse_recompute_modules(m, &unknown) != 0) {
          if (std::find(seen.begin(), seen.end(), m) == seen.end()) {
            seen.push_back(m);
            text += (text.empty() ? "" : ",") + m;
          }
        } else if (m == "gdn_norm_out" || m == "gdp_in_proj" || m == "gdp_qkv" || m == "mhc") {
          job.unmodelled.push_back(Unmodelled{
              a.origin("--recompute-modules"), "--recompute-modules " + m,
              "recomputes the Gated DeltaNet / DeltaProduct or hyper-connection parts, which "
              "bmpipe's recompute modules do not name"});
        } else if (m != "none") {
          a.fail("--recompute-modules",
                 "unknown module " + shown(m) +
                     " (Megatron-Core's recompute_modules: core_attn, moe_act, layernorm, "
                     "mla_up_proj, mlp, moe, shared_experts, gdn_norm_out, gdp_in_proj, "
                     "gdp_qkv, mhc)");
        }
      }
      job.recompute_modules = text.empty() ? "none" : text;
      job.from("training.recompute_modules", a.origin("--recompute-modules"));
    }
  } else {
    // [MG-config]: full needs a method and a count.
    if (!method)
      a.fail(granularity_flag, "full recompute needs --recompute-method uniform or block");
    if (!count) a.fail(granularity_flag, "full recompute needs --recompute-num-layers");
    if (!modules.empty()) job.ignore("--recompute-modules (only selective recompute uses it)");
    if (*method == "uniform") {
      std::fill(modes.begin(), modes.end(), Recompute::full);
      if (*count > 1)
        job.notes.push_back(
            "--recompute-method uniform --recompute-num-layers " + std::to_string(*count) +
            " checkpoints one input per " + std::to_string(*count) +
            " layers; bmpipe recomputes every layer fully and keeps one input per layer, which "
            "counts more saved inputs and leaves out the transient of re-running a group.");
    } else {
      // [MG-block]: within each (virtual) stage, the first N layers recompute fully.
      const std::vector<int> n(partition.size(), *count), none(partition.size(), 0);
      modes = modes_from_prefix_counts(partition, n, none);
    }
    recompute_origin = a.origin("--recompute-granularity",
                                "--recompute-granularity full --recompute-method " + *method +
                                    " --recompute-num-layers " + std::to_string(*count));
  }
  job.recompute = modes;
  job.from("training.recompute", recompute_origin);
}

}  // namespace

const Vocabulary& megatron_vocabulary() {
  static const Vocabulary table(megatron_flags_text(), "frameworks/megatron/flags.tsv");
  return table;
}

std::vector<std::string_view> megatron_modelled_flags() {
  std::vector<std::string_view> out;
  for (const FlagSpec& f : kFlags) out.push_back(f.name);
  return out;
}

ImportedJob read_megatron_args(const std::string& text, const std::string& name) {
  const std::string file = shown_path(name);
  ImportedJob job;
  job.source = name;
  job.framework = "Megatron-LM arguments";
  job.model_name = model_name_of(name, "megatron-job");
  const Args a(file, flags_of(text, name, file, job));
  const Reading ctx{file, a, job};
  read_model(ctx);
  read_batch_and_parallelism(ctx);
  read_precision_and_optimizer(ctx);
  read_context_parallel_and_fp8(ctx);
  read_cuda_graphs(ctx);
  read_partition(ctx);
  read_recompute(ctx);
  return job;
}

}  // namespace bmpipe
