#include "frameworks/mindformers/import.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <climits>
#include <cmath>
#include <filesystem>
#include <initializer_list>
#include <string_view>

#include "experiment/config_fields.hpp"
#include "experiment/suggest.hpp"
#include "experiment/yaml_reader.hpp"
#include "frameworks/mindformers/formats.hpp"
#include "frameworks/mindformers/rules.hpp"
#include "frameworks/mindformers/schedules.hpp"
#include "schedules/registry.hpp"
#include "sim/offload.hpp"

// Sources (read, not copied), MindFormers (github.com/mindspore-lab/mindformers) at
// fd4deebc1, cited by these short names:
//  [MF-layer]   mindformers/models/utils.py, class LayerSetting: offset (_check_inputs,
//               the broadcast to (pp_interleave_num, pipeline_stage)), the recompute lists
//               (_format_recompute_list, _alloc_recompute_layer, _format_recompute_dict,
//               _check_layer_rule: the first n layers of a stage), and pp_interleave_num
//               reset to 1 without the pipeline_interleave context.
//  [MF-ffn]     mindformers/models/llama/llama_layer.py, LlamaFeedForward.__init__, with
//               hidden_dim = 4 * hidden_size (llama_transformer.py): without
//               intermediate_size, hidden_dim = int((ffn_dim_multiplier + 0.01) *
//               hidden_dim) when the multiplier is set, then int(2 * hidden_dim / 3), then
//               rounded up to a multiple of multiple_of (default 256).
//  [MF-config]  mindformers/models/llama/llama_config.py, LlamaConfig: the defaults
//               (n_kv_heads None = num_heads, multiple_of 256, compute_dtype float16,
//               use_flash_attention False, tie_word_embeddings False, offset 0,
//               pp_interleave_num 1).
//  [MF-batch]   mindformers/trainer/base_trainer.py,
//               _check_global_batch_size_for_auto_parallel: with pipeline stages,
//               micro_batch_num micro-batches of runner_config.batch_size and no gradient
//               accumulation; without, gradient_accumulation_steps micro-batches.
//  [MF-card]    docs/feature_cards/Offset_Recompute.md: pp_interleave_num only with
//               pipeline_stage > 1; full recompute wins over select recompute.
//  [MF-swap]    mindformers/modules/transformer/transformer.py, TransformerSwapConfig
//               (_initialize_swap: swap True with neither layer_swap nor op_swap swaps
//               r'.*\.flash_attention' in every layer at default_prefetch; layer_swap and
//               op_swap a dict or a list of dicts; op_name a string or a list of them),
//               mindformers/tools/register/template.py SwapConfig (swap False, layer_swap
//               and op_swap None, default_prefetch 1), and [MF-layer] LayerSetting
//               (set_swap: layer_swap offloads the whole layer cell, op_swap the cells or
//               operators its pattern names, split on '\.'; per pattern the first entry
//               naming a layer counts; with swap True recompute and select_recompute are
//               True, False or decoder-layer indices, _format_recompute_list_select_layer_index;
//               a layer or operator both recomputed and swapped is recomputed,
//               _check_swap_recompute_conflict). MindSpore docs, "Fine-Grained Activations
//               SWAP" (mindspore-ai/docs 156e3e403eb9, docs/mindformers/docs/source_en/function/
//               fine_grained_activations_swap.md): Llama-family dense models only.
// and at r1.5.0 (ece44cc45, the last release shipping DeepSeek-V3's pretraining YAML):
//  [MF-ds3]     research/deepseek3/deepseek3_config.py, DeepseekV3Config.__init__: the MLA
//               widths' defaults (kv_lora_rank 512, q_lora_rank 1536, qk_rope_head_dim 64,
//               v_head_dim 128, qk_nope_head_dim 128), mtp_depth 0, compute_dtype
//               bfloat16; research/deepseek3/deepseek2_model.py, DeepseekV2Model.__init__:
//               LayerSetting(num_layers + mtp_depth, offset, ...) and one decoder layer per
//               index up to num_layers + mtp_depth, so the MTP layers are the last entries of
//               the partition the offset splits; DeepSeekV2Attention: q2l_proj always built.

namespace bmpipe {

namespace {

/// A scalar as MindFormers' Python would see it.
enum class Scalar { integer, boolean, string, null };

Scalar scalar_kind(const YAML::Node& n) {
  if (n.IsNull()) return Scalar::null;
  if (n.Tag() == "!") return Scalar::string;  // quoted
  long long i = 0;
  if (YAML::convert<long long>::decode(n, i)) return Scalar::integer;
  bool b = false;
  if (YAML::convert<bool>::decode(n, b)) return Scalar::boolean;
  return Scalar::string;
}

class Mf {
 public:
  Mf(std::string file, ImportedJob& job) : file_(std::move(file)), job_(job) {}

  static int line(const YAML::Node& n) {
    return n.IsDefined() && n.Mark().line >= 0 ? n.Mark().line + 1 : 0;
  }
  [[noreturn]] void fail(const YAML::Node& n, const std::string& key,
                         const std::string& message) const {
    throw ImportError(file_, line(n), 0, key, message);
  }
  Origin origin(const YAML::Node& n, const std::string& key, std::string why = {}) const {
    return Origin{file_, line(n), 0, key, std::move(why)};
  }

  /// map[name] when given and not null, else an undefined node.
  static YAML::Node child(const YAML::Node& map, const char* name) {
    if (!map.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
    const YAML::Node n = map[name];
    if (!n.IsDefined() || n.IsNull()) return YAML::Node(YAML::NodeType::Undefined);
    return n;
  }

  /// A section: a mapping, or an error naming `key`.
  YAML::Node section(const YAML::Node& map, const char* name, const std::string& key) const {
    YAML::Node n = child(map, name);
    if (n.IsDefined() && !n.IsMap()) fail(n, key, "expected a mapping of keys");
    return n;
  }

  long long integer(const YAML::Node& n, const std::string& key, long long lo,
                    long long hi = INT_MAX) const {
    if (!n.IsScalar() || scalar_kind(n) != Scalar::integer)
      fail(n, key, "expected an integer, got " + shown(n));
    const long long v = n.as<long long>();
    if (v < lo) fail(n, key, "must be at least " + std::to_string(lo) + ", got " + n.Scalar());
    if (v > hi) fail(n, key, "must be at most " + std::to_string(hi) + ", got " + n.Scalar());
    return v;
  }
  /// The integer at map[name], or `fallback` when absent or null.
  long long integer_or(const YAML::Node& map, const char* name, const std::string& key,
                       long long lo, long long fallback) const {
    const YAML::Node n = child(map, name);
    return n.IsDefined() ? integer(n, key, lo) : fallback;
  }
  bool boolean(const YAML::Node& n, const std::string& key) const {
    if (!n.IsScalar() || scalar_kind(n) != Scalar::boolean)
      fail(n, key, "expected True or False, got " + shown(n));
    return n.as<bool>();
  }
  double real(const YAML::Node& n, const std::string& key) const {
    double v = 0;
    if (!n.IsScalar() || !YAML::convert<double>::decode(n, v) || !std::isfinite(v))
      fail(n, key, "expected a number, got " + shown(n));
    return v;
  }
  std::string text(const YAML::Node& n, const std::string& key) const {
    if (!n.IsScalar()) fail(n, key, "expected a string, got " + shown(n));
    return n.Scalar();
  }

  /// Checks every key of `map` (at `path`, "" for the top level) against the table
  /// (frameworks/mindformers/keys.tsv): an unknown key is an error naming the closest
  /// known one; inert keys are listed as not modelled; unmodelled ones go to
  /// job.unmodelled unless given a harmless value. `read` are the keys the caller reads,
  /// which must be exactly the table's modelled keys of `path` (a bug in bmpipe otherwise).
  void check_keys(const YAML::Node& map, const std::string& path,
                  std::initializer_list<std::string_view> read) const {
    const Vocabulary& table = mindformers_vocabulary();
    const std::string prefix = path.empty() ? "" : path + ".";
    std::vector<std::string> siblings;
    for (const VocabularyEntry& e : table.entries()) {
      if (e.name.compare(0, prefix.size(), prefix) != 0) continue;
      const std::string last = e.name.substr(prefix.size());
      if (last.find('.') != std::string::npos) continue;
      siblings.push_back(last);
      const bool reads = std::find(read.begin(), read.end(), last) != read.end();
      if (reads != (e.treatment == Treatment::modelled))
        throw std::logic_error("frameworks/mindformers/keys.tsv and the importer disagree on " +
                               e.name);
    }
    if (!map.IsDefined() || !map.IsMap()) return;
    for (const auto& kv : map) {
      const std::string k = kv.first.IsScalar() ? kv.first.Scalar() : "?";
      const std::string key = prefix + k;
      const VocabularyEntry* e = table.find(key);
      if (!e || std::find(siblings.begin(), siblings.end(), k) == siblings.end())
        fail(kv.first, key,
             "unknown key: MindFormers has no " +
                 (path.empty() ? "top-level key '" + k + "'" : "key '" + k + "' in " + path) +
                 did_you_mean(k, siblings));
      switch (e->treatment) {
        case Treatment::modelled:
          break;
        case Treatment::inert:
          job_.ignore(key + " (not modelled)");
          break;
        case Treatment::obsolete:
          fail(kv.first, key, e->reason);
        case Treatment::unmodelled:
          if (kv.second.IsScalar() && e->harmless_value(kv.second.Scalar()))
            job_.ignore(key + " (not modelled)");
          else
            job_.unmodelled.push_back(
                Unmodelled{origin(kv.first, key),
                           kv.second.IsScalar() ? key + ": " + shown(kv.second) : key, e->reason});
          break;
      }
    }
  }

  /// A node as the config loader's messages show it.
  static std::string shown(const YAML::Node& n) { return detail::Reader::shown(n); }

  const std::string& file() const { return file_; }

 private:
  std::string file_;
  ImportedJob& job_;
};

constexpr int kAllLayers = INT_MAX;  // [MF-layer]: True in a list stands for MAX_INT32

/// Layers per stage that recompute (fully, or selectively for one pattern), from one value
/// of recompute_config: [MF-layer] _format_recompute_list, with counts capped at the
/// stage's layers and a flat list spread over the interleaves.
std::vector<int> recompute_counts(const Mf& mf, const YAML::Node& n, const std::string& key,
                                  const std::vector<int>& partition, int pp, int vpp) {
  const std::size_t stages = partition.size();
  if (n.IsScalar()) {
    if (scalar_kind(n) != Scalar::boolean)
      mf.fail(n, key, "expected True, False or a list of counts per stage, got " + Mf::shown(n));
    return n.as<bool>() ? partition : std::vector<int>(stages, 0);
  }
  if (!n.IsSequence()) mf.fail(n, key, "expected True, False or a list of counts per stage");
  bool flat = true, strings = n.size() > 0;
  for (const auto& item : n) {
    flat = flat && item.IsScalar();
    strings = strings && item.IsScalar() && scalar_kind(item) == Scalar::string;
  }
  // A list of operator names recomputes them in every layer.
  if (strings) return partition;
  auto count_of = [&](const YAML::Node& item, const std::string& k, int cap) {
    if (item.IsScalar() && scalar_kind(item) == Scalar::boolean) return item.as<bool>() ? cap : 0;
    return static_cast<int>(std::min<long long>(mf.integer(item, k, 0), cap));
  };
  if (flat) {
    if (n.size() != static_cast<std::size_t>(pp))
      mf.fail(n, key,
              "has " + std::to_string(n.size()) + " entries; a flat list has one per " +
                  "pipeline stage (pipeline_stage = " + std::to_string(pp) + ")");
    std::vector<int> per_rank;
    for (std::size_t j = 0; j < n.size(); ++j)
      per_rank.push_back(count_of(n[j], key + "[" + std::to_string(j) + "]", kAllLayers));
    return mindformers_spread_counts(partition, pp, vpp, per_rank);
  }
  if (n.size() != static_cast<std::size_t>(vpp))
    mf.fail(n, key,
            "has " + std::to_string(n.size()) +
                " rows; a 2-D list has one per "
                "interleave (pp_interleave_num = " +
                std::to_string(vpp) + ")");
  std::vector<int> counts(stages, 0);
  for (int v = 0; v < vpp; ++v) {
    const YAML::Node row = n[v];
    const std::string rk = key + "[" + std::to_string(v) + "]";
    if (row.IsScalar()) {
      const int all = count_of(row, rk, kAllLayers);
      for (int j = 0; j < pp; ++j)
        counts[static_cast<std::size_t>(v) * pp + j] =
            all ? partition[static_cast<std::size_t>(v) * pp + j] : 0;
      continue;
    }
    if (!row.IsSequence() || row.size() != static_cast<std::size_t>(pp))
      mf.fail(row, rk,
              "expected a list of " + std::to_string(pp) +
                  " counts, one per pipeline stage, or True/False");
    for (int j = 0; j < pp; ++j) {
      const std::size_t s = static_cast<std::size_t>(v) * pp + j;
      counts[s] = count_of(row[j], rk + "[" + std::to_string(j) + "]", partition[s]);
    }
  }
  return counts;
}

/// What the sections of the reader share: the file, the job they fill in, and what an
/// earlier section read that a later one needs, set in this order.
struct Reading {
  Reading(const Mf& reader, ImportedJob& filled, const std::string& given, YAML::Node document)
      : mf(reader), job(filled), name(given), root(std::move(document)) {}

  const Mf& mf;
  ImportedJob& job;
  const std::string& name;  ///< the file as given ("-": stdin)
  YAML::Node root;
  // parallel_config
  int pp = 1;
  int micro_batch_num = 1;
  Origin micro_batch_num_origin;
  // parallel.pipeline_config
  YAML::Node pipe, scheduler_node;
  bool interleave = false;
  std::string scheduler = "1f1b";
  // parallel.enable_alltoall (MindSpore's default False)
  YAML::Node alltoall_node;
  bool alltoall = false;
  // parallel_config.vocab_emb_dp
  YAML::Node vocab_emb_dp_node;
  // model.model_config
  YAML::Node mc;
  // interleave and offset
  int vpp = 1;
  std::vector<int> partition;
  // swap_config.swap (template.py SwapConfig: False)
  YAML::Node swap_node;
  bool swap = false;
};

/// The document, which must be a mapping; its top-level keys bmpipe does not read are
/// listed as ignored.
YAML::Node load_root(const Mf& mf, const std::string& text) {
  const std::string& file = mf.file();
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw ImportError(file, std::max(e.mark.line + 1, 1), 0, "", "malformed YAML: " + e.msg);
  }
  if (!root.IsMap())
    throw ImportError(file, 1, 0, "",
                      "expected a MindFormers config: a mapping with "
                      "parallel_config, model and recompute_config");
  mf.check_keys(root, "",
                {"parallel_config", "model", "recompute_config", "runner_config", "parallel",
                 "moe_config", "context", "swap_config"});
  return root;
}

/// moe_config and swap_config, checked against the key table (Mf::check_keys); the experts
/// are read by read_moe_config, swap_config.swap here and the rest of it by read_swap.
void check_moe_and_swap(Reading& ctx) {
  const Mf& mf = ctx.mf;
  mf.check_keys(mf.section(ctx.root, "moe_config", "moe_config"), "moe_config",
                {"expert_num", "num_experts_chosen", "shared_expert_num", "first_k_dense_replace",
                 "moe_intermediate_size", "capacity_factor", "use_gmm"});
  const YAML::Node sc = mf.section(ctx.root, "swap_config", "swap_config");
  mf.check_keys(sc, "swap_config", {"swap", "layer_swap", "op_swap", "default_prefetch"});
  if (const YAML::Node n = Mf::child(sc, "swap"); n.IsDefined()) {
    ctx.swap_node = n;
    ctx.swap = mf.boolean(n, "swap_config.swap");
  }
}

/// context, MindSpore's set_context: max_device_memory ("58GB") caps the memory of every
/// device, so it becomes the device's memory in the imported config.
void read_context(const Reading& ctx) {
  const Mf& mf = ctx.mf;
  ImportedJob& job = ctx.job;
  const YAML::Node context = mf.section(ctx.root, "context", "context");
  mf.check_keys(context, "context", {"max_device_memory"});
  const YAML::Node m = Mf::child(context, "max_device_memory");
  if (!m.IsDefined()) return;
  const std::string key = "context.max_device_memory";
  // MindSpore's form: a number and "GB", which MindSpore counts in units of 2^30 bytes
  // (mindspore-ai/mindspore, mindspore/ccsrc/backend/common/mem_reuse/
  // mem_dynamic_allocator.cc: kGBToByte = 1024 << 20).
  const std::string text = m.IsScalar() ? m.Scalar() : "";
  double GiB = 0;
  const bool gb = text.size() > 2 && text.compare(text.size() - 2, 2, "GB") == 0;
  const char* end = text.data() + (gb ? text.size() - 2 : 0);
  const auto r = std::from_chars(text.data(), end, GiB);
  if (!gb || r.ec != std::errc() || r.ptr != end || !std::isfinite(GiB) ||
      !std::isdigit(static_cast<unsigned char>(text[0])))
    mf.fail(m, key, "expected a size like \"58GB\" (MindSpore's form), got " + Mf::shown(m));
  if (GiB <= 0) mf.fail(m, key, "must be more than 0GB, got " + Mf::shown(m));
  job.device_memory_GiB = GiB;
  job.from("cluster.device.memory_GiB", mf.origin(m, key));
}

/// parallel_config.context_parallel (default 1) and context_parallel_algo (colossalai_cp,
/// the default, a ring of key/value blocks: training.cp_comm_type p2p; ulysses_cp: a2a).
/// MindFormers' OpParallelConfig documents these two algorithms
/// (mindspore.cn/mindformers/docs/en/r1.7.0/modules/mindformers.modules.OpParallelConfig.html);
/// another one (hybrid_cp) is refused as unmodelled.
void read_context_parallel(const Mf& mf, const YAML::Node& pc, ImportedJob& job) {
  const YAML::Node cp = Mf::child(pc, "context_parallel");
  if (cp.IsDefined()) {
    job.cp = static_cast<int>(mf.integer(cp, "parallel_config.context_parallel", 1));
    job.from("training.cp", mf.origin(cp, "parallel_config.context_parallel"));
  }
  const YAML::Node algo = Mf::child(pc, "context_parallel_algo");
  if (!algo.IsDefined()) return;
  const std::string key = "parallel_config.context_parallel_algo";
  const std::string name = mf.text(algo, key);
  if (name == "colossalai_cp" || name == "ulysses_cp") {
    job.cp_comm_type = name == "ulysses_cp" ? "a2a" : "p2p";
    job.from("training.cp_comm_type", mf.origin(algo, key));
  } else {
    job.unmodelled.push_back(
        Unmodelled{mf.origin(algo, key), key + ": " + name,
                   "the " + name +
                       " context-parallel algorithm: bmpipe models colossalai_cp (a ring) and "
                       "ulysses_cp (all-to-alls)"});
  }
}

/// parallel_config: dp, tp, pp, micro_batch_num and sequence parallelism.
void read_parallel_config(Reading& ctx) {
  const Mf& mf = ctx.mf;
  ImportedJob& job = ctx.job;
  const YAML::Node& root = ctx.root;
  const YAML::Node pc = mf.section(root, "parallel_config", "parallel_config");
  mf.check_keys(
      pc, "parallel_config",
      {"data_parallel", "model_parallel", "pipeline_stage", "micro_batch_num", "use_seq_parallel",
       "expert_parallel", "context_parallel", "context_parallel_algo", "vocab_emb_dp"});
  auto pc_int = [&](const char* k, const char* why_default) {
    const YAML::Node n = Mf::child(pc, k);
    const std::string key = std::string("parallel_config.") + k;
    if (n.IsDefined()) return std::pair{static_cast<int>(mf.integer(n, key, 1)), mf.origin(n, key)};
    return std::pair{1, mf.origin(pc, key, why_default)};
  };
  const auto [dp, dp_origin] = pc_int("data_parallel", "parallel_config.data_parallel: default 1");
  const auto [tp, tp_origin] =
      pc_int("model_parallel", "parallel_config.model_parallel: default 1");
  const auto [pp, pp_origin] =
      pc_int("pipeline_stage", "parallel_config.pipeline_stage: default 1");
  const auto [micro_batch_num, mbn_origin] =
      pc_int("micro_batch_num", "parallel_config.micro_batch_num: default 1");
  job.dp = dp;
  job.tp = tp;
  job.pp = pp;
  // Every training key without an origin of its own falls back to the section, so that a
  // refusal of the imported config names a line of this file, never one of the YAML bmpipe
  // writes (which the user never saw).
  job.from("training", mf.origin(pc.IsDefined() ? pc : root, "parallel_config"));
  job.from("training.dp", dp_origin);
  job.from("training.tp", tp_origin);
  job.from("training.pp", pp_origin);
  if (const YAML::Node sp = Mf::child(pc, "use_seq_parallel"); sp.IsDefined()) {
    job.sequence_parallel = mf.boolean(sp, "parallel_config.use_seq_parallel");
    job.from("training.sequence_parallel", mf.origin(sp, "parallel_config.use_seq_parallel"));
  }
  read_context_parallel(mf, pc, job);
  ctx.vocab_emb_dp_node = Mf::child(pc, "vocab_emb_dp");
  ctx.pp = pp;
  ctx.micro_batch_num = micro_batch_num;
  ctx.micro_batch_num_origin = mbn_origin;
}

/// parallel, MindSpore's auto-parallel context: pipeline interleave and scheduler, and the
/// parallel optimizer.
void read_parallel(Reading& ctx) {
  const Mf& mf = ctx.mf;
  ImportedJob& job = ctx.job;
  const YAML::Node& root = ctx.root;
  const YAML::Node par = mf.section(root, "parallel", "parallel");
  mf.check_keys(par, "parallel",
                {"pipeline_config", "enable_parallel_optimizer", "enable_alltoall"});
  ctx.alltoall_node = Mf::child(par, "enable_alltoall");
  ctx.alltoall =
      ctx.alltoall_node.IsDefined() && mf.boolean(ctx.alltoall_node, "parallel.enable_alltoall");
  const YAML::Node pipe = mf.section(par, "pipeline_config", "parallel.pipeline_config");
  mf.check_keys(pipe, "parallel.pipeline_config", {"pipeline_interleave", "pipeline_scheduler"});
  const YAML::Node interleave_node = Mf::child(pipe, "pipeline_interleave");
  const bool interleave =
      interleave_node.IsDefined() &&
      mf.boolean(interleave_node, "parallel.pipeline_config.pipeline_interleave");
  std::string scheduler = "1f1b";
  const YAML::Node scheduler_node = Mf::child(pipe, "pipeline_scheduler");
  if (scheduler_node.IsDefined())
    scheduler = mf.text(scheduler_node, "parallel.pipeline_config.pipeline_scheduler");
  const YAML::Node optimizer_node = Mf::child(par, "enable_parallel_optimizer");
  const bool parallel_optimizer = optimizer_node.IsDefined() &&
                                  mf.boolean(optimizer_node, "parallel.enable_parallel_optimizer");
  job.zero_stage = parallel_optimizer ? 1 : 0;
  job.from("training.optimizer.zero_stage",
           mf.origin(optimizer_node.IsDefined() ? optimizer_node : par,
                     "parallel.enable_parallel_optimizer",
                     parallel_optimizer ? "parallel.enable_parallel_optimizer: optimizer state "
                                          "sharded over dp (MindSpore shards more)"
                                        : "no parallel optimizer"));
  ctx.pipe = pipe;
  ctx.scheduler_node = scheduler_node;
  ctx.interleave = interleave;
  ctx.scheduler = scheduler;
}

/// runner_config: the micro-batch size and, without pipeline stages, the micro-batches.
void read_runner_config(const Reading& ctx) {
  const Mf& mf = ctx.mf;
  ImportedJob& job = ctx.job;
  const YAML::Node& root = ctx.root;
  const int pp = ctx.pp;
  const int micro_batch_num = ctx.micro_batch_num;
  const Origin& mbn_origin = ctx.micro_batch_num_origin;
  const YAML::Node runner = mf.section(root, "runner_config", "runner_config");
  mf.check_keys(runner, "runner_config", {"batch_size", "gradient_accumulation_steps"});
  {
    const YAML::Node b = Mf::child(runner, "batch_size");
    job.micro_batch_size =
        b.IsDefined() ? static_cast<int>(mf.integer(b, "runner_config.batch_size", 1)) : 1;
    job.from("training.micro_batch_size",
             b.IsDefined() ? mf.origin(b, "runner_config.batch_size")
                           : mf.origin(runner, "runner_config.batch_size", "default 1"));
  }
  const YAML::Node ga_node = Mf::child(runner, "gradient_accumulation_steps");
  const int ga =
      ga_node.IsDefined()
          ? static_cast<int>(mf.integer(ga_node, "runner_config.gradient_accumulation_steps", 1))
          : 1;
  // [MF-batch]: pipeline stages take micro_batch_num micro-batches and no accumulation.
  if (pp > 1) {
    job.microbatches = micro_batch_num;
    job.from("training.microbatches", mbn_origin);
    if (ga > 1)
      job.notes.push_back(
          "runner_config.gradient_accumulation_steps has no effect with "
          "pipeline stages (MindFormers uses micro_batch_num then).");
  } else {
    job.microbatches = ga;
    job.from("training.microbatches",
             ga_node.IsDefined()
                 ? mf.origin(ga_node, "runner_config.gradient_accumulation_steps")
                 : mf.origin(runner, "runner_config.gradient_accumulation_steps",
                             "no pipeline stages, no gradient accumulation: one micro-batch"));
  }
}

/// The MLP's width: intermediate_size, or MindFormers' Llama rule from the hidden size.
void read_mlp_width(const Reading& ctx, const YAML::Node& mc, ModelShape& m) {
  const Mf& mf = ctx.mf;
  ImportedJob& job = ctx.job;
  const std::string mk = "model.model_config.";
  if (const YAML::Node ffn = Mf::child(mc, "intermediate_size"); ffn.IsDefined()) {
    m.ffn_hidden_size = static_cast<int>(mf.integer(ffn, mk + "intermediate_size", 1));
    job.from("model.ffn_hidden_size", mf.origin(ffn, mk + "intermediate_size"));
  } else {
    // [MF-ffn]
    const YAML::Node mo = Mf::child(mc, "multiple_of");
    const YAML::Node mul = Mf::child(mc, "ffn_dim_multiplier");
    const long long multiple_of = mo.IsDefined() ? mf.integer(mo, mk + "multiple_of", 1) : 256;
    long long hidden_dim = 4LL * m.hidden_size;
    std::string why = "no intermediate_size: MindFormers' Llama rule from hidden_size";
    if (mul.IsDefined()) {
      const double f = mf.real(mul, mk + "ffn_dim_multiplier");
      if (f <= 0 || f > 100)
        mf.fail(mul, mk + "ffn_dim_multiplier", "must be between 0 and 100, got " + mul.Scalar());
      hidden_dim = static_cast<long long>((f + 0.01) * static_cast<double>(hidden_dim));
      why += ", ffn_dim_multiplier";
    }
    hidden_dim = (2 * hidden_dim) / 3;
    hidden_dim = multiple_of * ((hidden_dim + multiple_of - 1) / multiple_of);
    if (hidden_dim > INT_MAX) mf.fail(mc, mk + "hidden_size", "gives too large an MLP");
    m.ffn_hidden_size = static_cast<int>(hidden_dim);
    job.from("model.ffn_hidden_size",
             mf.origin(mo.IsDefined() ? mo : mc, mk + "multiple_of",
                       why + " and multiple_of " + std::to_string(multiple_of)));
  }
}

/// Whether model_config.type names MindFormers' DeepSeek-V3 config ([MF-ds3]).
bool deepseek_v3(const YAML::Node& mc) {
  const YAML::Node t = Mf::child(mc, "type");
  return t.IsDefined() && t.IsScalar() && t.Scalar() == "DeepseekV3Config";
}

/// DeepseekV3Config's multi-latent attention and multi-token prediction ([MF-ds3]): the
/// five MLA widths, each with the config's default when absent (kv_lora_rank 512,
/// q_lora_rank 1536, qk_rope_head_dim 64, v_head_dim 128, qk_nope_head_dim 128), and
/// mtp_depth (default 0) MTP layers. DeepSeekV2Attention always builds the q latent
/// (q2l_proj, hidden_size -> q_lora_rank), so q_lora_rank is at least 1. Another config
/// type has no MLA: the keys there are refused rather than read as a Llama shape.
void read_latent_attention(const Reading& ctx, const YAML::Node& mc, ModelShape& m) {
  const Mf& mf = ctx.mf;
  ImportedJob& job = ctx.job;
  const std::string mk = "model.model_config.";
  struct Key {
    const char* name;   // MindFormers' key
    const char* field;  // bmpipe's model.mla key
    int fallback;       // DeepseekV3Config's default
    int MlaShape::*slot;
  };
  const Key keys[] = {{"q_lora_rank", "q_lora_rank", 1536, &MlaShape::q_lora_rank},
                      {"kv_lora_rank", "kv_lora_rank", 512, &MlaShape::kv_lora_rank},
                      {"qk_nope_head_dim", "qk_head_dim", 128, &MlaShape::qk_nope_head_dim},
                      {"qk_rope_head_dim", "qk_pos_emb_head_dim", 64, &MlaShape::qk_rope_head_dim},
                      {"v_head_dim", "v_head_dim", 128, &MlaShape::v_head_dim}};
  if (!deepseek_v3(mc)) {
    for (const char* k : {"q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim",
                          "v_head_dim", "mtp_depth"})
      if (const YAML::Node n = Mf::child(mc, k); n.IsDefined())
        mf.fail(n, mk + k,
                "is a DeepseekV3Config key (multi-latent attention, multi-token prediction); "
                "model_config.type is not DeepseekV3Config, whose model alone reads it");
    return;
  }
  for (const Key& k : keys) {
    const YAML::Node n = Mf::child(mc, k.name);
    const long long v =
        n.IsDefined() ? mf.integer(n, mk + k.name, 1, static_cast<long long>(detail::kHeads.max))
                      : k.fallback;
    m.mla.*k.slot = static_cast<int>(v);
    job.from(std::string("model.mla.") + k.field,
             n.IsDefined() ? mf.origin(n, mk + k.name)
                           : mf.origin(mc, mk + k.name,
                                       std::string("DeepseekV3Config's default: ") +
                                           std::to_string(k.fallback)));
    const bool rank = k.slot == &MlaShape::q_lora_rank || k.slot == &MlaShape::kv_lora_rank;
    if (rank && v > m.hidden_size)
      mf.fail(n.IsDefined() ? n : mc, mk + k.name,
              std::to_string(v) + " is wider than hidden_size " + std::to_string(m.hidden_size) +
                  ": the latent must compress the hidden state");
  }
  if (const YAML::Node d = Mf::child(mc, "mtp_depth"); d.IsDefined()) {
    m.mtp_layers = static_cast<int>(
        mf.integer(d, mk + "mtp_depth", 0, static_cast<long long>(detail::kMtpLayers.max)));
    job.from("model.mtp_layers", mf.origin(d, mk + "mtp_depth"));
  }
}

/// Tied embeddings, flash attention and the compute dtype, with LlamaConfig's defaults.
void read_embeddings_and_kernels(const Reading& ctx, const YAML::Node& mc, ModelShape& m) {
  const Mf& mf = ctx.mf;
  ImportedJob& job = ctx.job;
  const std::string mk = "model.model_config.";
  if (const YAML::Node tie = Mf::child(mc, "tie_word_embeddings"); tie.IsDefined()) {
    m.tied_embeddings = mf.boolean(tie, mk + "tie_word_embeddings");
    job.from("model.tied_embeddings", mf.origin(tie, mk + "tie_word_embeddings"));
  } else {
    m.tied_embeddings = false;
    job.from("model.tied_embeddings",
             mf.origin(mc, mk + "tie_word_embeddings", "LlamaConfig's default: untied"));
  }
  if (const YAML::Node fa = Mf::child(mc, "use_flash_attention"); fa.IsDefined()) {
    job.flash_attention = mf.boolean(fa, mk + "use_flash_attention");
    job.from("model.flash_attention", mf.origin(fa, mk + "use_flash_attention"));
  } else {
    job.flash_attention = false;
    job.from("model.flash_attention", mf.origin(mc, mk + "use_flash_attention",
                                                "LlamaConfig's default: no flash attention"));
  }
  {
    const YAML::Node d = Mf::child(mc, "compute_dtype");
    // [MF-ds3]: DeepseekV3Config computes in bfloat16 by default, LlamaConfig in float16.
    const bool ds3 = deepseek_v3(mc);
    const std::string dtype = d.IsDefined() ? mf.text(d, mk + "compute_dtype")
                              : ds3         ? "bfloat16"
                                            : "float16";
    if (dtype == "bfloat16")
      job.dtype = "bf16";
    else if (dtype == "float16")
      job.dtype = "fp16";
    else
      mf.fail(d, mk + "compute_dtype",
              "unknown value '" + dtype + "' (bmpipe models bfloat16 and float16)");
    job.from("training.dtype", d.IsDefined()
                                   ? mf.origin(d, mk + "compute_dtype")
                                   : mf.origin(mc, mk + "compute_dtype",
                                               ds3 ? "DeepseekV3Config's default: bfloat16"
                                                   : "LlamaConfig's default: float16"));
  }
}

/// model.model_config: the shape (job.shape), with LlamaConfig's defaults, and the dtype.
void read_model_config(Reading& ctx) {
  const Mf& mf = ctx.mf;
  ImportedJob& job = ctx.job;
  const std::string& file = ctx.mf.file();
  const YAML::Node& root = ctx.root;
  const YAML::Node model = mf.section(root, "model", "model");
  if (!model.IsDefined()) throw ImportError(file, 1, 0, "model", "missing required section");
  mf.check_keys(model, "model", {"model_config"});
  const YAML::Node mc = mf.section(model, "model_config", "model.model_config");
  if (!mc.IsDefined())
    mf.fail(model, "model.model_config", "missing required section (the model's shape)");
  const std::string mk = "model.model_config.";
  mf.check_keys(mc, "model.model_config",
                {"type",
                 "num_layers",
                 "hidden_size",
                 "num_heads",
                 "n_kv_heads",
                 "head_dim",
                 "intermediate_size",
                 "multiple_of",
                 "ffn_dim_multiplier",
                 "vocab_size",
                 "seq_length",
                 "offset",
                 "pp_interleave_num",
                 "compute_dtype",
                 "use_flash_attention",
                 "tie_word_embeddings",
                 "q_lora_rank",
                 "kv_lora_rank",
                 "qk_nope_head_dim",
                 "qk_rope_head_dim",
                 "v_head_dim",
                 "mtp_depth"});
  auto required = [&](const char* k, const char* what) {
    const YAML::Node n = Mf::child(mc, k);
    if (!n.IsDefined()) mf.fail(mc, mk + k, std::string("missing: ") + what);
    return n;
  };
  job.from("model", mf.origin(mc, "model.model_config"));  // as job.from("training") above
  ModelShape m;
  job.model_name = model_name_of(ctx.name, "mindformers-job");
  m.name = job.model_name;
  m.architecture = Architecture::llama;
  job.from("model.name", mf.origin(root, "", "the YAML file's name"));
  if (const YAML::Node t = Mf::child(mc, "type"); t.IsDefined()) {
    const std::string type = mf.text(t, mk + "type");
    job.from("model.architecture", mf.origin(t, mk + "type", type + ": a Llama-family model"));
    if (type == "DeepseekV3Config")
      job.notes.push_back(
          "model_config.type DeepseekV3Config is read as a Llama-family decoder (RMSNorm, "
          "RoPE, SwiGLU) with multi-latent attention and mtp_depth MTP layers.");
    else if (type != "LlamaConfig")
      job.notes.push_back("model_config.type " + type +
                          " is read as a Llama-family decoder "
                          "(RMSNorm, RoPE, SwiGLU, grouped-query attention).");
  }
  const YAML::Node layers_node = required("num_layers", "the number of decoder layers");
  const YAML::Node hidden_node = required("hidden_size", "the hidden size");
  const YAML::Node heads_node = required("num_heads", "the number of attention heads");
  const YAML::Node vocab_node = required("vocab_size", "the vocabulary size");
  const YAML::Node seq_node = required("seq_length", "the sequence length");
  // The config's own bound on model.num_layers, before anything per layer is built.
  m.num_layers = static_cast<int>(
      mf.integer(layers_node, mk + "num_layers", 1, static_cast<long long>(detail::kLayers.max)));
  m.hidden_size = static_cast<int>(mf.integer(hidden_node, mk + "hidden_size", 1));
  m.num_attention_heads = static_cast<int>(mf.integer(heads_node, mk + "num_heads", 1));
  m.vocab_size = static_cast<int>(mf.integer(vocab_node, mk + "vocab_size", 1));
  job.seq_length = static_cast<int>(mf.integer(seq_node, mk + "seq_length", 1));
  job.from("model.num_layers", mf.origin(layers_node, mk + "num_layers"));
  job.from("model.hidden_size", mf.origin(hidden_node, mk + "hidden_size"));
  job.from("model.num_attention_heads", mf.origin(heads_node, mk + "num_heads"));
  job.from("model.vocab_size", mf.origin(vocab_node, mk + "vocab_size"));
  job.from("training.seq_length", mf.origin(seq_node, mk + "seq_length"));
  if (const YAML::Node kv = Mf::child(mc, "n_kv_heads"); kv.IsDefined()) {
    m.num_kv_heads = static_cast<int>(mf.integer(kv, mk + "n_kv_heads", 1));
    job.from("model.num_kv_heads", mf.origin(kv, mk + "n_kv_heads"));
  } else {
    m.num_kv_heads = m.num_attention_heads;  // [MF-config]: None means num_heads
    job.from("model.num_kv_heads",
             mf.origin(mc, mk + "n_kv_heads", "no n_kv_heads: one kv head per attention head"));
  }
  // head_dim: LlamaConfig's own head width (None: hidden_size / num_heads), which the
  // attention's q, k, v and output projections take (issue 41).
  if (const YAML::Node hd = Mf::child(mc, "head_dim"); hd.IsDefined() && !hd.IsNull()) {
    const long long d =
        mf.integer(hd, mk + "head_dim", 1, static_cast<long long>(detail::kHeads.max));
    if (m.hidden_size % m.num_attention_heads != 0 || d != m.hidden_size / m.num_attention_heads)
      m.explicit_head_dim = static_cast<int>(d);
    job.from("model.head_dim", mf.origin(hd, mk + "head_dim"));
  }
  read_mlp_width(ctx, mc, m);
  read_embeddings_and_kernels(ctx, mc, m);
  read_latent_attention(ctx, mc, m);
  job.shape = m;
  ctx.mc = mc;
}

/// parallel_config.vocab_emb_dp (MindFormers at fd4deebc1): True, its default
/// (mindformers/tools/register/template.py ParallelConfig: vocab_emb_dp = True;
/// modules/transformer/transformer.py TransformerOpParallelConfig.__init__:
/// vocab_emb_dp=True), shards the embedding lookup over data parallelism only
/// (models/llama/llama_layer.py LlamaEmbedding.shard: gather.shard(((1, 1), (dp, cp))), the
/// table whole on every device) and the LM head too (models/llama/llama.py:
/// lm_head.shard(strategy_matmul=((dp * cp, 1), (1, 1)))), while the loss keeps
/// model_parallel: training.vocab_parallel false. But build_parallel_config
/// (core/parallel_config.py) resets it to False when pipeline_stage > 1 ("vocab_emd_dp
/// will be reset to False"), so it counts only without pipeline stages.
void read_vocab_emb_dp(const Reading& ctx) {
  const Mf& mf = ctx.mf;
  ImportedJob& job = ctx.job;
  const YAML::Node& n = ctx.vocab_emb_dp_node;
  const std::string key = "parallel_config.vocab_emb_dp";
  const bool asked = n.IsDefined() ? mf.boolean(n, key) : true;
  // models/llama/llama.py: a vocabulary model_parallel does not divide replicates the head
  // whatever vocab_emb_dp says, and computes the loss unsplit (loss_parallel_config
  // model_parallel 1), which bmpipe's head does not have.
  if (job.tp > 1 && job.shape->vocab_size % job.tp != 0) {
    const Origin& o = job.origin.at("model.vocab_size");
    job.unmodelled.push_back(Unmodelled{
        o,
        "vocab_size " + std::to_string(job.shape->vocab_size) + " with model_parallel " +
            std::to_string(job.tp),
        "a vocabulary model_parallel does not divide: MindFormers then keeps the LM head and "
        "the loss whole on every device, which bmpipe does not model"});
  }
  if (ctx.pp > 1) {
    if (asked && n.IsDefined())
      job.notes.push_back(
          "parallel_config.vocab_emb_dp: True has no effect with pipeline_stage > 1: "
          "MindFormers resets it to False (build_parallel_config), so the embedding and the "
          "LM head are split over model_parallel.");
    return;
  }
  if (!asked || job.tp == 1) return;  // split over tp, or no tp to split over: the default
  job.vocab_parallel = false;
  job.from("training.vocab_parallel",
           n.IsDefined() ? mf.origin(n, key)
                         : mf.origin(ctx.root, key,
                                     "parallel_config.vocab_emb_dp: MindFormers' default True"));
}

/// moe_config.capacity_factor and use_gmm (MindFormers at fd4deebc1, template.py MoEConfig:
/// capacity_factor 1.1, use_gmm False). Without use_gmm the experts are MoEV2
/// (models/llama/llama_transformer.py LLamaDecodeLayer; modules/transformer/moe.py), whose
/// TopkRouterV2 dispatches every expert a static (capacity) slice: with capacity_factor > 0,
/// capacity = ceil(top_k x tokens x capacity_factor / experts) (calculate_expert_capacity_v2,
/// at most the tokens, rounded up to a multiple of model_parallel, which bmpipe leaves
/// out), tokens beyond dropped and the rest padded: training.moe_capacity_factor. With
/// capacity_factor <= 0 the capacity is the busiest expert's load
/// (_calculate_expert_capacity_dynamic), which balanced routing makes the mean: no padding.
/// With use_gmm the experts are MoEV3's grouped matmuls, dropless: the factor is unused.
void read_capacity(const Reading& ctx, const YAML::Node& moe) {
  const Mf& mf = ctx.mf;
  ImportedJob& job = ctx.job;
  const YAML::Node gmm = Mf::child(moe, "use_gmm");
  const YAML::Node cf = Mf::child(moe, "capacity_factor");
  if (gmm.IsDefined() && mf.boolean(gmm, "moe_config.use_gmm")) {
    if (cf.IsDefined())
      job.ignore("moe_config.capacity_factor (unused by use_gmm's dropless grouped matmuls)");
    return;
  }
  const double factor = cf.IsDefined() ? mf.real(cf, "moe_config.capacity_factor") : 1.1;
  if (factor <= 0) {
    job.notes.push_back(
        "moe_config.capacity_factor <= 0: MindFormers pads every expert to the busiest one's "
        "load, which bmpipe's balanced routing (model.moe.load_imbalance 1) makes the mean.");
    return;
  }
  if (factor > 1024) mf.fail(cf, "moe_config.capacity_factor", "must be at most 1024");
  job.moe_capacity_factor = factor;
  job.from("training.moe_capacity_factor",
           cf.IsDefined()
               ? mf.origin(cf, "moe_config.capacity_factor",
                           "MoEV2 (no use_gmm) pads every expert to its capacity")
               : mf.origin(moe, "moe_config.capacity_factor",
                           "MoEConfig's default 1.1; MoEV2 (no use_gmm) pads to capacity"));
}

/// moe_config (MindFormers at fd4deebc1: mindformers/tools/register/template.py MoEConfig
/// and its defaults, mindformers/modules/transformer/moe.py MoEConfig's checks, and
/// mindformers/models/llama/llama_transformer.py and llama_layer.py, which build the MoE
/// layer): expert_num > 1 makes every decoder layer MoE, num_experts_chosen (default 1,
/// at most expert_num) experts per token, each as wide as the model's intermediate size,
/// and shared_expert_num shared experts of that width together (LlamaFeedForwardWithMoE:
/// intermediate_size * shared_expert_num). moe_intermediate_size and an integer
/// first_k_dense_replace are DeepSeek-V3's (its models read them; the template's defaults,
/// 1407 and True, are not given values), read when written. parallel_config.expert_parallel
/// is training.ep.
void read_moe_config(Reading& ctx) {
  const Mf& mf = ctx.mf;
  ImportedJob& job = ctx.job;
  const YAML::Node moe = mf.section(ctx.root, "moe_config", "moe_config");
  const YAML::Node pc = mf.section(ctx.root, "parallel_config", "parallel_config");
  const YAML::Node ep_node = Mf::child(pc, "expert_parallel");
  const YAML::Node experts = Mf::child(moe, "expert_num");
  const int expert_num =
      experts.IsDefined() ? static_cast<int>(mf.integer(experts, "moe_config.expert_num", 1)) : 1;
  if (expert_num <= 1) {
    for (const char* k : {"num_experts_chosen", "shared_expert_num", "first_k_dense_replace",
                          "moe_intermediate_size", "capacity_factor", "use_gmm"})
      if (Mf::child(moe, k).IsDefined())
        job.ignore("moe_config." + std::string(k) + " (no effect without expert_num > 1)");
    if (ep_node.IsDefined()) {
      if (mf.integer(ep_node, "parallel_config.expert_parallel", 1) != 1)
        mf.fail(ep_node, "parallel_config.expert_parallel",
                "is more than 1, but the model has no experts (moe_config.expert_num)");
      job.ignore("parallel_config.expert_parallel (no effect without experts)");
    }
    return;
  }
  ModelShape& m = *job.shape;
  MoeShape& e = m.moe;
  e.num_experts = expert_num;
  job.from("model.moe.num_experts", mf.origin(experts, "moe_config.expert_num"));
  const YAML::Node chosen = Mf::child(moe, "num_experts_chosen");
  e.top_k = chosen.IsDefined()
                ? static_cast<int>(mf.integer(chosen, "moe_config.num_experts_chosen", 1))
                : 1;
  job.from("model.moe.top_k", chosen.IsDefined()
                                  ? mf.origin(chosen, "moe_config.num_experts_chosen")
                                  : mf.origin(moe, "moe_config.num_experts_chosen",
                                              "moe_config.num_experts_chosen: default 1"));
  // MindFormers at fd4deebc1, mindformers/modules/transformer/moe.py:162-164,
  // MoEConfig.__init__: raise ValueError("'num_experts_chosen' must not be larger than
  // 'expert_num', but got {num_experts_chosen}.").
  if (e.top_k > e.num_experts)
    mf.fail(chosen, "moe_config.num_experts_chosen",
            std::to_string(e.top_k) + " experts per token, but expert_num is " +
                std::to_string(e.num_experts) +
                ": MindFormers refuses it (\"'num_experts_chosen' must not be larger than "
                "'expert_num'\", mindformers/modules/transformer/moe.py:162 at fd4deebc1; "
                "expected at most " +
                std::to_string(e.num_experts) + ")");
  e.expert_ffn = m.ffn_hidden_size;
  job.from("model.moe.expert_ffn_hidden_size",
           mf.origin(ctx.mc, "model.model_config.intermediate_size",
                     "each expert as wide as the model's intermediate size"));
  if (const YAML::Node w = Mf::child(moe, "moe_intermediate_size"); w.IsDefined()) {
    e.expert_ffn = static_cast<int>(mf.integer(w, "moe_config.moe_intermediate_size", 1));
    job.from("model.moe.expert_ffn_hidden_size", mf.origin(w, "moe_config.moe_intermediate_size"));
  }
  if (const YAML::Node sh = Mf::child(moe, "shared_expert_num"); sh.IsDefined()) {
    // MindFormers r1.5.0 (ece44cc4) keeps the value as written (MoEConfig.__init__,
    // mindformers/modules/transformer/moe.py:187, with no check) and multiplies it in:
    // int(intermediate_size * moe_config.shared_expert_num) (mindformers/models/llama/
    // llama_layer.py:821). Its own Qwen2-57B YAML writes 8.0 (research/qwen2/qwen2_57b/
    // pretrain_qwen2_57b.yaml:42), which is 8 experts' width; a fraction (8.5) is a width
    // no whole number of experts makes, which bmpipe's import and export do not state.
    long long count = 0;
    double given = 0;
    if (sh.IsScalar() && sh.Tag() != "!" && scalar_kind(sh) == Scalar::string &&
        YAML::convert<double>::decode(sh, given) && std::isfinite(given) && given >= 0 &&
        given <= INT_MAX) {
      if (given != std::floor(given))
        mf.fail(sh, "moe_config.shared_expert_num",
                "expected a whole number of experts (8 or 8.0), got '" + sh.Scalar() +
                    "': MindFormers would build a shared FFN of int(intermediate_size x " +
                    sh.Scalar() +
                    ") (mindformers/models/llama/llama_layer.py:821 at r1.5.0), which bmpipe's "
                    "MindFormers import does not read");
      count = static_cast<long long>(given);
    } else {
      count = mf.integer(sh, "moe_config.shared_expert_num", 0);
    }
    const long long shared = count * e.expert_ffn;
    if (shared > INT_MAX) mf.fail(sh, "moe_config.shared_expert_num", "is too large");
    e.shared_ffn = static_cast<int>(shared);
    job.from("model.moe.shared_expert_ffn_hidden_size",
             mf.origin(sh, "moe_config.shared_expert_num",
                       "shared_expert_num x the experts' intermediate size"));
  }
  if (const YAML::Node k = Mf::child(moe, "first_k_dense_replace");
      k.IsDefined() && !(k.IsScalar() && scalar_kind(k) == Scalar::boolean)) {
    e.first_dense_layers = static_cast<int>(mf.integer(k, "moe_config.first_k_dense_replace", 0));
    if (e.first_dense_layers >= m.num_layers)
      mf.fail(k, "moe_config.first_k_dense_replace",
              "leaves no MoE layer of the " + std::to_string(m.num_layers));
    job.from("model.moe.layer_freq", mf.origin(k, "moe_config.first_k_dense_replace"));
  }
  read_capacity(ctx, moe);
  if (m.architecture != Architecture::llama)
    mf.fail(experts, "moe_config.expert_num",
            "the MoE layer is costed for Llama-family models only");
  job.ep = ep_node.IsDefined()
               ? static_cast<int>(mf.integer(ep_node, "parallel_config.expert_parallel", 1))
               : 1;
  job.from("training.ep", ep_node.IsDefined()
                              ? mf.origin(ep_node, "parallel_config.expert_parallel")
                              : mf.origin(pc, "parallel_config.expert_parallel",
                                          "parallel_config.expert_parallel: default 1"));
  // parallel.enable_alltoall: MindSpore's set_auto_parallel_context (docs of
  // mindspore.set_auto_parallel_context, enable_alltoall: "If its value is False, there will
  // be a combination of operators such as AllGather, Split and Concat instead of AllToAll";
  // default False). The experts' dispatch over ep is the all-to-all bmpipe costs only when
  // it is on; off, at ep > 1, the dispatch gathers every device's tokens instead.
  if (job.ep > 1 && !ctx.alltoall)
    job.unmodelled.push_back(Unmodelled{
        ctx.alltoall_node.IsDefined() ? mf.origin(ctx.alltoall_node, "parallel.enable_alltoall")
                                      : mf.origin(ep_node, "parallel_config.expert_parallel"),
        ctx.alltoall_node.IsDefined() ? "parallel.enable_alltoall: False"
                                      : "parallel.enable_alltoall absent (False)",
        "expert parallelism without all-to-all: MindSpore dispatches the experts' tokens with "
        "AllGather, Split and Concat, which bmpipe does not model (set it True)"});
}

/// pp_interleave_num and offset: the virtual stages and the partition.
void read_partition(Reading& ctx) {
  const Mf& mf = ctx.mf;
  ImportedJob& job = ctx.job;
  const YAML::Node& mc = ctx.mc;
  const std::string mk = "model.model_config.";
  const bool interleave = ctx.interleave;
  const int pp = ctx.pp;
  int vpp = 1;
  const YAML::Node pin = Mf::child(mc, "pp_interleave_num");
  if (pin.IsDefined()) {
    const int asked = static_cast<int>(mf.integer(pin, mk + "pp_interleave_num", 1));
    // [MF-layer]: without the pipeline_interleave context LayerSetting resets it to 1.
    if (asked > 1 && !interleave)
      job.notes.push_back("pp_interleave_num " + std::to_string(asked) +
                          " takes effect only with parallel.pipeline_config.pipeline_interleave: "
                          "True, which is not set; MindFormers runs one stage per rank.");
    else
      vpp = asked;
  }
  // [MF-card]: interleaving needs pipeline stages (frameworks/mindformers/rules.cpp).
  Config probe;
  probe.training.vpp = vpp;
  probe.training.pp = pp;
  if (rule_by_id(mindformers_rules(), "mindformers.interleave-pipeline").check(probe))
    mf.fail(pin, mk + "pp_interleave_num", "needs parallel_config.pipeline_stage > 1");
  job.vpp = vpp;
  job.from("training.vpp", pin.IsDefined() ? mf.origin(pin, mk + "pp_interleave_num")
                                           : mf.origin(mc, mk + "pp_interleave_num", "default 1"));

  // [MF-ds3]: the partition splits the decoder layers and then the MTP layers.
  const int mtp = job.shape->mtp_layers;
  const int L = job.shape->num_layers + mtp;
  const YAML::Node off = Mf::child(mc, "offset");
  const std::string ok = mk + "offset";
  // [MF-layer]: each stage gets num_layers // stages layers plus its offset, so with more
  // stages than layers every stage but those an offset list fills is empty, and an offset
  // given once (an integer) cannot add up. Only a list naming every stage can place the
  // layers; without one the count is refused here, before anything per stage is built, so
  // that a stage count of billions is an error and not an allocation.
  const long long stage_count = static_cast<long long>(pp) * vpp;
  if (stage_count > L) {
    bool listed = off.IsDefined() && off.IsSequence() && off.size() > 0;
    if (listed && off[0].IsSequence()) {
      listed = off.size() == static_cast<std::size_t>(vpp);
      for (std::size_t v = 0; listed && v < off.size(); ++v)
        listed = off[v].IsSequence() && off[v].size() == static_cast<std::size_t>(pp);
    } else if (listed) {
      listed = vpp == 1 && off.size() == static_cast<std::size_t>(pp);
    }
    if (!listed) {
      const Origin& o = job.origin.at(vpp > 1 ? "training.vpp" : "training.pp");
      throw ImportError(
          o.file, o.line, 0, o.key,
          "parallel_config.pipeline_stage x pp_interleave_num = " + std::to_string(pp) + " x " +
              std::to_string(vpp) + " = " + std::to_string(stage_count) + " stages for num_layers" +
              std::string(mtp ? " + mtp_depth" : "") + " = " + std::to_string(L) +
              ": MindFormers gives each stage num_layers // stages = 0 layers "
              "plus its offset, so more stages than layers need an offset list "
              "with an entry for every stage (model.model_config.offset)");
    }
  }
  const int stages = static_cast<int>(stage_count);
  std::vector<int> offset(static_cast<std::size_t>(stages), 0);
  if (off.IsDefined()) {
    // [MF-layer] _check_inputs on the offset as given, then np.broadcast_to
    // (pp_interleave_num, pipeline_stage).
    long long sum = 0;
    if (off.IsScalar()) {
      const long long c = mf.integer(off, ok, INT_MIN);
      sum = c;
      std::fill(offset.begin(), offset.end(), static_cast<int>(c));
    } else if (off.IsSequence() && off.size() > 0 && off[0].IsSequence()) {
      if (off.size() != static_cast<std::size_t>(vpp))
        mf.fail(off, ok,
                "has " + std::to_string(off.size()) +
                    " rows; a 2-D offset has one per "
                    "interleave (pp_interleave_num = " +
                    std::to_string(vpp) + ")");
      for (int v = 0; v < vpp; ++v) {
        const YAML::Node row = off[v];
        if (!row.IsSequence() || row.size() != static_cast<std::size_t>(pp))
          mf.fail(row, ok,
                  "each row needs " + std::to_string(pp) +
                      " entries, one per pipeline "
                      "stage (pipeline_stage = " +
                      std::to_string(pp) + ")");
        for (int j = 0; j < pp; ++j) {
          const long long c = mf.integer(row[j], ok, INT_MIN);
          offset[static_cast<std::size_t>(v) * pp + j] = static_cast<int>(c);
          sum += c;
        }
      }
    } else if (off.IsSequence()) {
      if (off.size() != static_cast<std::size_t>(pp))
        mf.fail(off, ok,
                "has " + std::to_string(off.size()) +
                    " entries; MindFormers wants one "
                    "per pipeline stage (pipeline_stage = " +
                    std::to_string(pp) + ")");
      for (int j = 0; j < pp; ++j) {
        const long long c = mf.integer(off[j], ok, INT_MIN);
        for (int v = 0; v < vpp; ++v)
          offset[static_cast<std::size_t>(v) * pp + j] = static_cast<int>(c);
        sum += c;
      }
    } else {
      mf.fail(off, ok, "expected an integer or a list of integers per stage");
    }
    if (sum != L % stages)
      mf.fail(off, ok,
              "the offsets add up to " + std::to_string(sum) + "; MindFormers requires " +
                  (mtp ? "(num_layers + mtp_depth)" : "num_layers") +
                  " % (pipeline_stage * pp_interleave_num) = " + std::to_string(L) + " % " +
                  std::to_string(stages) + " = " + std::to_string(L % stages));
  }
  std::vector<int> partition;
  try {
    partition = mindformers_partition(L, pp, vpp, offset);
  } catch (const FormatError& e) {
    mf.fail(off.IsDefined() ? off : mc, ok, e.what());
  }
  if (mtp > 0) {
    // [MF-ds3]: the last mtp_depth layers are the MTP layers; bmpipe runs them on the last
    // stage, after its decoder layers.
    if (partition.back() < mtp)
      mf.fail(off.IsDefined() ? off : mc, ok,
              "leaves the last stage " + std::to_string(partition.back()) + " of the " +
                  std::to_string(L) + " layers (num_layers + mtp_depth), fewer than the " +
                  std::to_string(mtp) +
                  " MTP layers MindFormers puts last; bmpipe models them on the last stage");
    partition.back() -= mtp;
  }
  job.partition = partition;
  job.from("training.partition",
           off.IsDefined() ? mf.origin(off, ok, "num_layers // stages + offset")
                           : mf.origin(mc, ok, "no offset: num_layers // stages per stage"));
  ctx.vpp = vpp;
  ctx.partition = partition;
}

/// The schedule, from parallel.pipeline_config.pipeline_scheduler and the interleave.
void read_schedule(const Reading& ctx) {
  const Mf& mf = ctx.mf;
  ImportedJob& job = ctx.job;
  const YAML::Node& root = ctx.root;
  const std::string& scheduler = ctx.scheduler;
  const YAML::Node& scheduler_node = ctx.scheduler_node;
  const YAML::Node& pipe = ctx.pipe;
  const int vpp = ctx.vpp;
  // mindformers_schedules() says which bmpipe schedule each pipeline_scheduler runs: the
  // schedule table's row with that name, interleaved (a loop placement) when pp_interleave_num > 1.
  const ScheduleInfo* row = nullptr;
  bool known = false;
  for (const ScheduleInfo& info : builtin_schedules()) {
    if (mindformers_scheduler(info.name) != scheduler) continue;
    known = true;
    if ((info.placement == Placement::kLoop) == (vpp > 1)) row = &info;
  }
  if (row) {
    job.schedule = std::string(row->name);
  } else if (known) {
    mf.fail(scheduler_node, "parallel.pipeline_config.pipeline_scheduler",
            scheduler + " runs one stage per rank; pp_interleave_num must be 1");
  } else {
    job.schedule = vpp > 1 ? "interleaved" : "1f1b";
    job.notes.push_back("pipeline_scheduler " + scheduler + " is not modelled; simulated as " +
                        job.schedule + ".");
  }
  job.from("training.schedule",
           scheduler_node.IsDefined()
               ? mf.origin(scheduler_node, "parallel.pipeline_config.pipeline_scheduler")
               : mf.origin(pipe.IsDefined() ? pipe : root,
                           "parallel.pipeline_config.pipeline_scheduler", "MindSpore's 1F1B"));
}

/// With swap_config.swap True ([MF-swap]): True (every decoder layer), False (none) or a
/// list of decoder-layer indices, each below `layers`; per layer whether it is named.
std::vector<bool> layers_named(const Mf& mf, const YAML::Node& n, const std::string& key,
                               int layers) {
  const std::string expected = "expected True, False or a list of decoder-layer indices (0 to " +
                               std::to_string(layers - 1) + ")";
  if (n.IsScalar() && scalar_kind(n) == Scalar::boolean)
    return std::vector<bool>(static_cast<std::size_t>(layers), n.as<bool>());
  if (!n.IsSequence()) mf.fail(n, key, expected + ", got " + Mf::shown(n));
  std::vector<bool> named(static_cast<std::size_t>(layers), false);
  for (std::size_t i = 0; i < n.size(); ++i) {
    const std::string k = key + "[" + std::to_string(i) + "]";
    if (!n[i].IsScalar() || scalar_kind(n[i]) != Scalar::integer)
      mf.fail(n[i], k, expected + ", got " + Mf::shown(n[i]));
    const long long l = n[i].as<long long>();
    if (l < 0 || l >= layers)
      mf.fail(n[i], k,
              "layer " + n[i].Scalar() + " is out of range: the model has " +
                  std::to_string(layers) + " decoder layers (0 to " + std::to_string(layers - 1) +
                  ")");
    named[static_cast<std::size_t>(l)] = true;
  }
  return named;
}

/// recompute_config with swap_config.swap True ([MF-swap]): recompute and select_recompute
/// (or each of its patterns) name decoder layers, stage-agnostic.
void read_recompute_by_layer(const Reading& ctx) {
  const Mf& mf = ctx.mf;
  ImportedJob& job = ctx.job;
  int layers = 0;
  for (int c : ctx.partition) layers += c;
  const std::string rk = "recompute_config";
  const YAML::Node rc = Mf::child(ctx.root, "recompute_config");
  std::vector<bool> full(static_cast<std::size_t>(layers), false), select = full;
  Origin origin = mf.origin(ctx.root, rk, "no recompute_config: no recompute");
  if (rc.IsDefined() && rc.IsScalar()) {
    full = layers_named(mf, rc, rk, layers);
    origin = mf.origin(rc, rk);
  } else if (rc.IsDefined()) {
    if (!rc.IsMap()) mf.fail(rc, rk, "expected a mapping (recompute, select_recompute, ...)");
    mf.check_keys(rc, rk, {"recompute", "select_recompute"});
    if (const YAML::Node r = Mf::child(rc, "recompute"); r.IsDefined()) {
      full = layers_named(mf, r, rk + ".recompute", layers);
      origin = mf.origin(r, rk + ".recompute", "layer indices, as with swap_config.swap True");
    }
    if (const YAML::Node sr = Mf::child(rc, "select_recompute"); sr.IsDefined()) {
      const std::string sk = rk + ".select_recompute";
      if (sr.IsMap()) {
        for (const auto& kv : sr) {
          const std::string pattern = kv.first.IsScalar() ? kv.first.Scalar() : "?";
          const std::vector<bool> named = layers_named(mf, kv.second, sk + "." + pattern, layers);
          for (std::size_t l = 0; l < named.size(); ++l) select[l] = select[l] || named[l];
        }
        job.notes.push_back(
            "select_recompute names operator patterns; bmpipe's selective mode "
            "re-runs the attention core on every layer any pattern covers.");
      } else {
        select = layers_named(mf, sr, sk, layers);
      }
      origin = mf.origin(sr, sk, "layer indices, as with swap_config.swap True");
    }
  }
  job.recompute.assign(static_cast<std::size_t>(layers), Recompute::none);
  for (std::size_t l = 0; l < job.recompute.size(); ++l)
    job.recompute[l] = full[l]     ? Recompute::full
                       : select[l] ? Recompute::selective
                                   : Recompute::none;
  if (std::count(job.recompute.begin(), job.recompute.end(), Recompute::selective) > 0 &&
      !(rc.IsMap() && Mf::child(rc, "select_recompute").IsMap()))
    job.notes.push_back(
        "select_recompute recomputes MindFormers' default operators (the MLP activation), "
        "while bmpipe's selective mode re-runs the attention core.");
  job.from("training.recompute", origin);
}

/// MindFormers' swap op names and the offload modules (sim/offload.hpp) holding the same
/// tensors: the attention cell saves its qkv projection's input, q, k and v and the core's
/// output; flash attention its inputs q, k, v and its output.
constexpr std::array<std::pair<std::string_view, std::string_view>, 3> kSwapOps = {{
    {"attention", "qkv_linear,core_attn,attn_proj"},
    {R"(.*\.flash_attention)", "core_attn,attn_proj"},
    {R"(attention\.flash_attention)", "core_attn,attn_proj"},
}};

/// swap_config with swap True ([MF-swap]) as offload layers: each op_swap entry's layers
/// offload the modules of its op_name (kSwapOps), or with neither layer_swap nor op_swap
/// every layer offloads flash attention's (MindFormers' default strategy). bmpipe reads
/// every backward_prefetch (how many operators ahead of the backward the copy back starts)
/// as offload_lead 1, as it reads Megatron-Core's reloads: the copy back starts while the op
/// before the backward runs. A layer recomputed in full keeps recomputing (MindFormers'
/// recompute wins); one recomputed selectively and swapped is refused.
void read_swap(const Reading& ctx) {
  if (!ctx.swap) return;
  const Mf& mf = ctx.mf;
  ImportedJob& job = ctx.job;
  const YAML::Node sc = Mf::child(ctx.root, "swap_config");
  const std::string sk = "swap_config";
  if (job.shape && (job.shape->is_moe() || job.shape->is_mla()))
    mf.fail(ctx.swap_node, sk + ".swap",
            "MindFormers' fine-grained activation swap supports Llama-family dense models "
            "only (its docs); this model has " +
                std::string(job.shape->is_moe() ? "experts" : "multi-latent attention"));
  if (const YAML::Node ls = Mf::child(sc, "layer_swap"); ls.IsDefined())
    mf.fail(ls, sk + ".layer_swap",
            "swaps whole layers, the MLP's activations too, which bmpipe's offload modules "
            "do not state; expected op_swap of attention (qkv_linear,core_attn,attn_proj) or "
            R"(.*\.flash_attention (core_attn,attn_proj))");
  const int layers = static_cast<int>(job.recompute.size());
  auto positive = [&](const YAML::Node& n, const std::string& key, const YAML::Node& parent) {
    if (!n.IsDefined() || n.IsNull())
      mf.fail(parent, key,
              "is missing: expected a positive integer (operators ahead of the backward)");
    if (!n.IsScalar() || scalar_kind(n) != Scalar::integer || n.as<long long>() < 1)
      mf.fail(n, key,
              "expected a positive integer (operators ahead of the backward), got " + Mf::shown(n));
  };
  // Per layer, the modules it offloads.
  std::vector<OffloadModules> modules(static_cast<std::size_t>(layers), 0);
  YAML::Node where = ctx.swap_node;
  std::string where_key = sk + ".swap";
  const YAML::Node os = Mf::child(sc, "op_swap");
  if (!os.IsDefined()) {
    // [MF-swap] _initialize_swap: flash attention in every layer at default_prefetch.
    if (const YAML::Node d = Mf::child(sc, "default_prefetch"); d.IsDefined())
      positive(d, sk + ".default_prefetch", sc);
    std::fill(modules.begin(), modules.end(),
              parse_offload_modules("core_attn,attn_proj", nullptr));
  } else {
    where = os;
    where_key = sk + ".op_swap";
    if (!os.IsMap() && !os.IsSequence())
      mf.fail(os, where_key, "expected a list of {op_name, backward_prefetch, layers}");
    std::vector<YAML::Node> entries;
    if (os.IsMap())
      entries.push_back(os);
    else
      for (const auto& e : os) entries.push_back(e);
    // [MF-layer] _set_op_swap: per op name, the first entry naming a layer counts.
    std::vector<std::pair<std::string, std::vector<bool>>> taken;
    for (std::size_t i = 0; i < entries.size(); ++i) {
      const YAML::Node& e = entries[i];
      const std::string ek =
          where_key + (os.IsMap() ? std::string() : "[" + std::to_string(i) + "]");
      if (!e.IsMap()) mf.fail(e, ek, "expected a mapping {op_name, backward_prefetch, layers}");
      for (const auto& kv : e) {
        const std::string k = kv.first.IsScalar() ? kv.first.Scalar() : "?";
        if (k != "op_name" && k != "backward_prefetch" && k != "layers")
          mf.fail(kv.first, ek + "." + k,
                  "unknown key: an op_swap entry has op_name, backward_prefetch and layers" +
                      did_you_mean(
                          k, std::vector<std::string>{"op_name", "backward_prefetch", "layers"}));
      }
      positive(e["backward_prefetch"], ek + ".backward_prefetch", e);
      const YAML::Node ln = e["layers"];
      if (!ln.IsDefined() || ln.IsNull())
        mf.fail(e, ek + ".layers", "is missing: expected True or a list of decoder-layer indices");
      const std::vector<bool> named = layers_named(mf, ln, ek + ".layers", layers);
      const YAML::Node on = e["op_name"];
      std::vector<YAML::Node> names;
      if (on.IsDefined() && on.IsSequence())
        for (const auto& n : on) names.push_back(n);
      else
        names.push_back(on);
      for (std::size_t j = 0; j < names.size(); ++j) {
        const YAML::Node& n = names[j];
        const std::string nk =
            ek + ".op_name" + (on.IsSequence() ? "[" + std::to_string(j) + "]" : "");
        if (!n.IsDefined() || !n.IsScalar() || scalar_kind(n) != Scalar::string)
          mf.fail(n.IsDefined() ? n : e, nk, "expected an operator name, got " + Mf::shown(n));
        const auto op = std::find_if(kSwapOps.begin(), kSwapOps.end(),
                                     [&](const auto& o) { return o.first == n.Scalar(); });
        if (op == kSwapOps.end())
          mf.fail(n, nk,
                  "'" + n.Scalar() +
                      "' is no operator whose tensors bmpipe's offload modules state: expected "
                      "attention (qkv_linear,core_attn,attn_proj) or "
                      R"(.*\.flash_attention)"
                      " (core_attn,attn_proj)");
        auto seen = std::find_if(taken.begin(), taken.end(),
                                 [&](const auto& t) { return t.first == n.Scalar(); });
        if (seen == taken.end()) {
          taken.emplace_back(n.Scalar(), std::vector<bool>(static_cast<std::size_t>(layers)));
          seen = std::prev(taken.end());
        }
        const OffloadModules set = parse_offload_modules(op->second, nullptr);
        for (std::size_t l = 0; l < named.size(); ++l)
          if (named[l] && !seen->second[l]) {
            seen->second[l] = true;
            modules[l] |= set;
          }
      }
    }
  }
  // bmpipe offloads one module set (training.offload_modules) in every offload layer.
  OffloadModules one = 0;
  bool every_other = true;  // every layer not recomputed in full swaps
  int swapped = 0;
  for (int l = 0; l < layers; ++l) {
    const OffloadModules m = modules[static_cast<std::size_t>(l)];
    const Recompute mode = job.recompute[static_cast<std::size_t>(l)];
    if (m == 0) {
      every_other = every_other && mode == Recompute::full;
      continue;
    }
    if (one != 0 && m != one)
      mf.fail(where, where_key,
              "swaps " + offload_modules_text(one) + " in some layers and " +
                  offload_modules_text(m) + " in layer " + std::to_string(l) +
                  "; bmpipe offloads one module set (training.offload_modules) in every "
                  "offload layer: expected the same operators in every swapped layer");
    one = m;
    swapped += mode != Recompute::full;
  }
  if (swapped == 0) {
    if (one != 0)
      job.notes.push_back(
          "swap_config.swap is True, but every swapped layer recomputes in full, which "
          "MindFormers runs instead: nothing is offloaded.");
    return;
  }
  // Every layer but the full ones swapping is bmpipe's job-wide form (training.offload_modules
  // without an offload layer: selective layers move the modules too). Else each swapped layer
  // not recomputed is an offload layer, and each swapped layer that recomputes selectively a
  // selective_offload layer.
  if (!every_other)
    for (int l = 0; l < layers; ++l) {
      if (modules[static_cast<std::size_t>(l)] == 0) continue;
      Recompute& mode = job.recompute[static_cast<std::size_t>(l)];
      if (mode == Recompute::selective) mode = Recompute::selective_offload;
      if (mode == Recompute::none) mode = Recompute::offload;
    }
  if (!every_other)
    job.from("training.recompute",
             mf.origin(where, where_key, "recompute_config with the swapped layers offloading"));
  job.offload_modules = offload_modules_text(one);
  job.from("training.offload_modules", mf.origin(where, where_key));
  job.notes.push_back(
      "swap_config: backward_prefetch (operators ahead of the backward) is read as "
      "training.offload_lead 1, the copy back starting while the op before the backward "
      "runs.");
}

/// recompute_config as a mode per layer.
void read_recompute(const Reading& ctx) {
  const Mf& mf = ctx.mf;
  ImportedJob& job = ctx.job;
  const YAML::Node& root = ctx.root;
  const std::vector<int>& partition = ctx.partition;
  const int pp = ctx.pp;
  const int vpp = ctx.vpp;
  std::vector<int> full(partition.size(), 0), select(partition.size(), 0);
  const std::string rk = "recompute_config";
  YAML::Node rc = Mf::child(root, "recompute_config");
  Origin recompute_origin = mf.origin(root, rk, "no recompute_config: no recompute");
  if (ctx.swap) {
    read_recompute_by_layer(ctx);
    return;
  }
  if (rc.IsDefined() && rc.IsScalar()) {
    full = recompute_counts(mf, rc, rk, partition, pp, vpp);
    recompute_origin = mf.origin(rc, rk);
  } else if (rc.IsDefined()) {
    if (!rc.IsMap()) mf.fail(rc, rk, "expected a mapping (recompute, select_recompute, ...)");
    mf.check_keys(rc, rk, {"recompute", "select_recompute"});
    if (const YAML::Node r = Mf::child(rc, "recompute"); r.IsDefined()) {
      full = recompute_counts(mf, r, rk + ".recompute", partition, pp, vpp);
      recompute_origin = mf.origin(r, rk + ".recompute");
    }
    if (const YAML::Node s = Mf::child(rc, "select_recompute"); s.IsDefined()) {
      const std::string sk = rk + ".select_recompute";
      if (s.IsMap()) {
        // [MF-layer] _format_recompute_dict: a count list per operator pattern; bmpipe has
        // one selective mode, which covers the layers any pattern names.
        for (const auto& kv : s) {
          const std::string pattern = kv.first.IsScalar() ? kv.first.Scalar() : "?";
          const std::vector<int> c =
              recompute_counts(mf, kv.second, sk + "." + pattern, partition, pp, vpp);
          for (std::size_t i = 0; i < c.size(); ++i) select[i] = std::max(select[i], c[i]);
        }
        job.notes.push_back(
            "select_recompute names operator patterns; bmpipe's selective mode "
            "re-runs the attention core on every layer any pattern covers.");
      } else {
        select = recompute_counts(mf, s, sk, partition, pp, vpp);
      }
      recompute_origin = Mf::child(rc, "recompute").IsDefined()
                             ? mf.origin(rc, rk, "recompute_config.recompute and select_recompute")
                             : mf.origin(s, sk);
    }
  }
  job.recompute = modes_from_prefix_counts(partition, full, select);
  if (std::count(job.recompute.begin(), job.recompute.end(), Recompute::selective) > 0 &&
      !(rc.IsMap() && Mf::child(rc, "select_recompute").IsMap()))
    job.notes.push_back(
        "select_recompute as counts recomputes MindFormers' default operators (the MLP "
        "activation), while bmpipe's selective mode re-runs the attention core.");
  job.from("training.recompute", recompute_origin);
}

}  // namespace

const Vocabulary& mindformers_vocabulary() {
  static const Vocabulary table(mindformers_keys_text(), "frameworks/mindformers/keys.tsv");
  return table;
}

/// Unmodelled keys that the rest of the YAML leaves without effect, listed as ignored with
/// the reason (mindspore-lab/mindformers r1.5.0, ece44cc4):
/// - model.model_config.softmax_compute_type is the dtype of the softmax of the attention's
///   own score path, _attn (mindformers/models/llama/llama_transformer.py:734,
///   llama_interleave.py:538), which use_flash_attention: True replaces by the
///   FlashAttentionScore op (llama_transformer.py:551, llama_interleave.py:443);
/// - recompute_config.recompute_slice_activation is passed to layer.recompute() only when
///   recompute is the boolean True (mindformers/models/utils.py:403-405 and 428-430); a
///   list of layers recomputes without it, and False recomputes nothing.
void ignore_keys_without_effect(const Reading& ctx) {
  ImportedJob& job = ctx.job;
  const YAML::Node rc = Mf::child(ctx.root, "recompute_config");
  const YAML::Node full = rc.IsMap() ? Mf::child(rc, "recompute") : YAML::Node();
  const bool recompute_all = full.IsDefined() && full.IsScalar() &&
                             scalar_kind(full) == Scalar::boolean && full.as<bool>();
  std::vector<Unmodelled> kept;
  for (Unmodelled& u : job.unmodelled) {
    if (u.origin.key == "model.model_config.softmax_compute_type" && job.flash_attention &&
        *job.flash_attention) {
      job.ignore(u.given + " (no effect: use_flash_attention runs FlashAttentionScore)");
      continue;
    }
    if (u.origin.key == "recompute_config.recompute_slice_activation" && !recompute_all) {
      job.ignore(u.given + " (no effect: recompute_config.recompute is not True)");
      continue;
    }
    kept.push_back(std::move(u));
  }
  job.unmodelled = std::move(kept);
}

ImportedJob read_mindformers_yaml(const std::string& text, const std::string& name) {
  ImportedJob job;
  job.source = name;
  job.framework = "MindFormers YAML";
  const Mf mf(shown_path(name), job);
  Reading ctx(mf, job, name, load_root(mf, text));
  check_moe_and_swap(ctx);
  read_context(ctx);
  read_parallel_config(ctx);
  read_parallel(ctx);
  read_runner_config(ctx);
  read_model_config(ctx);
  read_vocab_emb_dp(ctx);
  read_moe_config(ctx);
  read_partition(ctx);
  read_schedule(ctx);
  read_recompute(ctx);
  read_swap(ctx);
  ignore_keys_without_effect(ctx);
  return job;
}

}  // namespace bmpipe
