#include "frameworks/torchtitan/import.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <sstream>
#include <tuple>

#include "experiment/config_fields.hpp"
#include "experiment/suggest.hpp"
#include "frameworks/torchtitan/flavors.hpp"
#include "frameworks/torchtitan/formats.hpp"
#include "frameworks/torchtitan/rules.hpp"

// Sources (read, not copied), pytorch/torchtitan (github.com/pytorch/torchtitan) at v0.2.2
// (73a0e6979dd1) unless said otherwise, cited by these short names:
//  [TT-config]  torchtitan/config/job_config.py: the keys and their defaults (Model name
//               "llama3", flavor "debugmodel", converters []; Training local_batch_size 8,
//               global_batch_size -1, seq_len 2048, dtype "float32",
//               mixed_precision_param "bfloat16"; Parallelism data_parallel_replicate_degree
//               1, data_parallel_shard_degree -1, fsdp_reshard_after_forward "default",
//               tensor_parallel_degree 1, enable_async_tensor_parallel false,
//               pipeline_parallel_degree 1, pipeline_parallel_layers_per_stage None,
//               pipeline_parallel_first_stage_less_layers 1, ..._last_stage_less_layers 1,
//               pipeline_parallel_schedule "1F1B", pipeline_parallel_microbatch_size 1,
//               context_parallel_degree 1, context_parallel_rotate_method "allgather",
//               expert_parallel_degree 1, expert_tensor_parallel_degree 1,
//               expert_parallel_comm_backend "standard"; ActivationCheckpoint mode
//               "selective", selective_ac_option "2"; Compile enable false, components
//               ["model", "loss"]; Float8Linear recipe_name None; MXLinear recipe_name
//               "mxfp8_cublas").
//  [TT-old]     torchtitan/config_manager.py at v0.1.0 (f7084fc78567): [float8] and [mx]
//               sections, converters "float8" and "mx" (components/quantization/float8.py,
//               mx.py register_model_converter), training.compile, MX recipe_name "mxfp8";
//               and at 8570415c3^ training.batch_size, which 8570415c3 ("Support gradient
//               accumulation (#1238)") renamed local_batch_size.
//  [TT-conv]    torchtitan/components/quantization/float8.py and mx.py: the converters
//               "quantize.linear.float8", "quantize.grouped_mm.float8", "quantize.linear.mx",
//               "quantize.grouped_mm.mx"; recipe_name None is torchao's tensorwise recipe
//               (e4m3 inputs and weights, e5m2 gradients: Float8LinearConfig's defaults).
//  [TT-dims]    torchtitan/distributed/parallel_dims.py, ParallelDims: dp_shard -1 takes the
//               devices left over; every other degree at least 1; fsdp_enabled = dp_shard > 1
//               or cp > 1.
//  [TT-par]     torchtitan/models/llama3/infra/parallelize.py: FSDP (fully_shard with
//               MixedPrecisionPolicy(param_dtype=mixed_precision_param, reduce_dtype=
//               mixed_precision_reduce)) when fsdp_enabled, else DDP over dp_replicate with
//               the parameters in training.dtype; reshard_after_forward "default" = not
//               pp_enabled; tensor parallelism with SequenceParallel on the norms (sequence
//               parallelism whenever tp > 1); compile per TransformerBlock when compile.enable
//               and "model" in components.
//  [TT-atp]     torchtitan/distributed/tensor_parallel.py, maybe_enable_async_tp: "Async TP
//               requires 'model' in --compile.components and --compile.enable".
//  [TT-train]   torchtitan/train.py: global_batch_size < 0 means local_batch_size x the
//               data-parallel degree; it must be a multiple of that, and the quotient is the
//               gradient accumulation steps.
//  [TT-pp]      torchtitan/distributed/pipeline_parallel.py: n_microbatches =
//               local_batch_size // pipeline_parallel_microbatch_size ("Batch size ... must be
//               divisible by microbatch_size"); the stages (frameworks/torchtitan/formats.hpp).
//  [PT-stage]   pytorch/pytorch, torch/distributed/pipelining/stage.py,
//               backward_maybe_with_nosync: an FSDP stage runs every backward with
//               set_reshard_after_backward(False) and set_requires_gradient_sync(False), and
//               reduces the gradients in a post-backward after the last one.
//  [TT-ac]      torchtitan/distributed/activation_checkpoint.py: modes none, full, selective
//               ("op", or a number: every n-th layer) and memory_budget; "Invalid selective
//               AC option" otherwise.

namespace bmpipe {

namespace {

class Tt {
 public:
  Tt(std::string file, ImportedJob& job) : file_(std::move(file)), job_(job) {}

  static int line(const toml::node* n) {
    return n && n->source().begin.line > 0 ? static_cast<int>(n->source().begin.line) : 0;
  }
  static int column(const toml::node* n) {
    return n && n->source().begin.column > 0 ? static_cast<int>(n->source().begin.column) : 0;
  }
  [[noreturn]] void fail(const toml::node* n, const std::string& key,
                         const std::string& message) const {
    throw ImportError(file_, line(n), column(n), key, message);
  }
  Origin origin(const toml::node* n, const std::string& key, std::string why = {}) const {
    return Origin{file_, line(n), 0, key, std::move(why)};
  }
  const std::string& file() const { return file_; }
  ImportedJob& job() const { return job_; }

  /// A value as the messages show it: TOML's own spelling, strings quoted.
  static std::string shown(const toml::node& n) {
    if (const auto* s = n.as_string()) return "\"" + s->get() + "\"";
    if (const auto* b = n.as_boolean()) return b->get() ? "true" : "false";
    if (const auto* i = n.as_integer()) return std::to_string(i->get());
    if (n.is_floating_point()) {
      std::ostringstream out;
      out << n.as_floating_point()->get();
      return out.str();
    }
    if (n.is_array()) return "an array";
    if (n.is_table()) return "a table";
    return "a date or time";
  }
  /// The text a harmless value is compared with (keys.tsv): a string's own text ("" for the
  /// empty one), true or false, a number.
  static std::string harmless_text(const toml::node& n) {
    if (const auto* s = n.as_string()) return s->get().empty() ? "\"\"" : s->get();
    if (n.is_array() || n.is_table()) return "\x01";  // matches no row
    return shown(n);
  }

  long long integer(const toml::node* n, const std::string& key, long long lo,
                    long long hi = INT_MAX) const {
    const auto* i = n ? n->as_integer() : nullptr;
    if (!i) fail(n, key, "expected an integer, got " + (n ? shown(*n) : std::string("nothing")));
    const long long v = i->get();
    if (v < lo) fail(n, key, "must be at least " + std::to_string(lo) + ", got " + shown(*n));
    if (v > hi) fail(n, key, "must be at most " + std::to_string(hi) + ", got " + shown(*n));
    return v;
  }
  bool boolean(const toml::node* n, const std::string& key) const {
    const auto* b = n ? n->as_boolean() : nullptr;
    if (!b) fail(n, key, "expected true or false, got " + (n ? shown(*n) : std::string("nothing")));
    return b->get();
  }
  std::string text(const toml::node* n, const std::string& key) const {
    const auto* s = n ? n->as_string() : nullptr;
    if (!s) fail(n, key, "expected a string, got " + (n ? shown(*n) : std::string("nothing")));
    return s->get();
  }
  std::vector<std::string> strings(const toml::node* n, const std::string& key) const {
    const auto* a = n ? n->as_array() : nullptr;
    if (!a) fail(n, key, "expected an array of strings, got " + (n ? shown(*n) : "nothing"));
    std::vector<std::string> out;
    for (const toml::node& item : *a) {
      if (!item.is_string()) fail(&item, key, "expected a string, got " + shown(item));
      out.push_back(item.as_string()->get());
    }
    return out;
  }

  /// Checks every key of `table` (at `path`, "" for the top level) against keys.tsv, and the
  /// tables under it: an unknown key is an error naming the closest known one of its
  /// section; inert keys are listed as not modelled; unmodelled ones go to job.unmodelled
  /// unless given a harmless value. Modelled keys are the reader's. `listed`: the section is
  /// inert and already listed, so its inert keys are not listed again.
  void check_keys(const toml::table& table, const std::string& path, bool listed = false) const {
    const Vocabulary& vocabulary = torchtitan_vocabulary();
    const std::string prefix = path.empty() ? "" : path + ".";
    std::vector<std::string> siblings;
    for (const VocabularyEntry& e : vocabulary.entries())
      if (e.name.compare(0, prefix.size(), prefix) == 0 &&
          e.name.find('.', prefix.size()) == std::string::npos)
        siblings.push_back(e.name.substr(prefix.size()));
    for (const auto& [k, v] : table) {
      const std::string name(k.str());
      const std::string key = prefix + name;
      const VocabularyEntry* e = vocabulary.find(key);
      if (!e)
        throw ImportError(
            file_, k.source().begin.line > 0 ? static_cast<int>(k.source().begin.line) : line(&v),
            static_cast<int>(k.source().begin.column), key,
            "unknown key: torchtitan has no " +
                (path.empty() ? "section or key '" + name + "'"
                              : "key '" + name + "' in [" + path + "]") +
                did_you_mean(name, siblings));
      switch (e->treatment) {
        case Treatment::modelled:
          break;
        case Treatment::inert:
          if (!listed) job_.ignore(key + " (not modelled)");
          break;
        case Treatment::obsolete:
          fail(&v, key, e->reason);
        case Treatment::unmodelled:
          if (e->harmless_value(harmless_text(v)))
            job_.ignore(key + " (not modelled)");
          else
            job_.unmodelled.push_back(
                Unmodelled{origin(&v, key), key + " = " + shown(v), e->reason});
          break;
      }
      // The keys of an inert section are checked, and listed once, with it.
      if (const toml::table* sub = v.as_table())
        check_keys(*sub, key, listed || e->treatment == Treatment::inert);
    }
  }

 private:
  std::string file_;
  ImportedJob& job_;
};

/// The table at `path` ("quantize.linear.float8"), or nullptr; a key there that is not a
/// table is an error.
const toml::table* section(const Tt& tt, const toml::table& root, const std::string& path) {
  const toml::table* at = &root;
  std::stringstream in(path);
  std::string done;
  for (std::string part; std::getline(in, part, '.');) {
    done += (done.empty() ? "" : ".") + part;
    const toml::node* n = at->get(part);
    if (!n) return nullptr;
    if (!n->is_table()) tt.fail(n, done, "expected a table ([" + done + "]), got " + Tt::shown(*n));
    at = n->as_table();
  }
  return at;
}

const toml::node* value(const toml::table* t, const char* key) {
  return t ? t->get(key) : nullptr;
}

/// What the readers share, filled in this order.
struct Reading {
  Reading(const Tt& reader, ImportedJob& filled, const toml::table& document)
      : tt(reader), job(filled), root(document) {}
  const Tt& tt;
  ImportedJob& job;
  const toml::table& root;
  const toml::table* model = nullptr;
  const toml::table* training = nullptr;
  const toml::table* parallelism = nullptr;
  int layers = 0;
  // [parallelism]
  int replicate = 1, shard = -1, cp = 1, pp = 1;
  bool fsdp = true;
  const TorchTitanSchedule* schedule = nullptr;
  int vpp = 1;
  std::vector<int> partition;
  bool compiled = false;  // compile.enable with "model"
};

/// A degree of [parallelism]: the key's integer (at least 1), or torchtitan's default 1.
int degree(const Reading& r, const char* name, Origin* o = nullptr) {
  const toml::node* n = value(r.parallelism, name);
  const std::string key = std::string("parallelism.") + name;
  if (o)
    *o =
        n ? r.tt.origin(n, key) : r.tt.origin(r.parallelism, key, key + ": torchtitan's default 1");
  return n ? static_cast<int>(r.tt.integer(n, key, 1)) : 1;
}

/// [model]: the flavor's shape and the converters.
void read_model(Reading& r) {
  const Tt& tt = r.tt;
  ImportedJob& job = r.job;
  r.model = section(tt, r.root, "model");
  const toml::node* name_node = value(r.model, "name");
  const toml::node* flavor_node = value(r.model, "flavor");
  const std::string name = name_node ? tt.text(name_node, "model.name") : "llama3";
  const std::string flavor = flavor_node ? tt.text(flavor_node, "model.flavor") : "debugmodel";
  const TorchTitanFlavor* f = find_torchtitan_flavor(name, flavor);
  if (!f) {
    bool known_model = false;
    std::vector<std::string> flavors;
    for (const TorchTitanFlavor& g : torchtitan_flavors())
      if (g.model == name) {
        known_model = true;
        flavors.emplace_back(g.flavor);
      }
    if (!known_model)
      tt.fail(name_node ? name_node : r.model, "model.name",
              "bmpipe has no shape of torchtitan's model '" + name + "' (it reads " +
                  torchtitan_flavor_names() + ")");
    tt.fail(flavor_node ? flavor_node : name_node, "model.flavor",
            "bmpipe has no shape of " + name + " flavor '" + flavor + "'" +
                did_you_mean(flavor, flavors) + " (it reads " + torchtitan_flavor_names() + ")");
  }
  ModelShape m = torchtitan_shape(*f);
  job.model_name = std::string(f->label);
  job.shape = m;
  job.flash_attention = true;  // scaled_dot_product_attention's flash kernel, or flex
  job.from("model", tt.origin(flavor_node ? flavor_node : r.model, "model.flavor",
                              "torchtitan's " + name + " " + flavor + " model args"));
  job.from("model.name", tt.origin(flavor_node ? flavor_node : r.model, "model.flavor"));
  if (!f->note.empty()) job.notes.emplace_back(f->note);
  r.layers = m.num_layers;
}

/// model.converters and the float8 and mx sections: FP8 GEMMs.
void read_converters(Reading& r) {
  const Tt& tt = r.tt;
  ImportedJob& job = r.job;
  const toml::node* conv = value(r.model, "converters");
  if (!conv) return;
  const std::vector<std::string> names = tt.strings(conv, "model.converters");
  for (const std::string& c : names) {
    const bool float8 = c == "quantize.linear.float8" || c == "float8";
    const bool mx = c == "quantize.linear.mx" || c == "mx";
    // The section of the converter: v0.1.0's [float8] / [mx] when given, else the
    // quantize.linear one.
    const std::string old_section = float8 ? "float8" : "mx";
    const std::string sk = (c == "float8" || c == "mx") && section(tt, r.root, old_section)
                               ? old_section
                               : "quantize.linear." + old_section;
    if (c == "float8" || c == "mx")
      job.notes.push_back("model.converters \"" + c +
                          "\" is the converter's name of torchtitan v0.1.0; v0.2.2 registers "
                          "only quantize.linear." +
                          c + " (its own llama3_405b.toml still says float8). Read as that.");
    if (float8) {
      // [TT-conv]: recipe_name None is torchao's tensorwise recipe: e4m3 forward, e5m2
      // gradients (Megatron's "hybrid").
      const toml::table* f8 = section(tt, r.root, sk);
      const toml::node* recipe = value(f8, "recipe_name");
      const std::string name = recipe ? tt.text(recipe, sk + ".recipe_name") : "tensorwise";
      if (name == "tensorwise") {
        job.fp8 = "hybrid";
        job.fp8_recipe = "tensorwise";
      } else if (name == "rowwise") {
        // torchao's Float8LinearRecipeName.ROWWISE: e4m3 for every operand, gradients too.
        job.fp8 = "e4m3";
        job.fp8_recipe = "rowwise";
      } else if (name == "rowwise_with_gw_hp") {
        job.unmodelled.push_back(Unmodelled{
            tt.origin(recipe, sk + ".recipe_name"), sk + ".recipe_name = \"" + name + "\"",
            "torchao's rowwise float8 with the weight-grad GEMMs in high precision, which "
            "bmpipe does not cost (it models tensorwise and rowwise float8, delayed, "
            "blockwise and mxfp8 scaling)"});
      } else {
        tt.fail(
            recipe, sk + ".recipe_name",
            "expected \"tensorwise\", \"rowwise\" or \"rowwise_with_gw_hp\", got \"" + name + "\"");
      }
      job.from("training.fp8", tt.origin(conv, "model.converters", c + ": torchao float8"));
      job.from("training.fp8_recipe",
               recipe ? tt.origin(recipe, sk + ".recipe_name")
                      : tt.origin(conv, "model.converters", "recipe_name unset: tensorwise"));
      if (const toml::node* ag = value(f8, "enable_fsdp_float8_all_gather");
          ag && tt.boolean(ag, sk + ".enable_fsdp_float8_all_gather"))
        job.notes.push_back(sk +
                            ".enable_fsdp_float8_all_gather: FSDP gathers the weights in "
                            "float8; bmpipe gathers them in bf16, twice the bytes, under the "
                            "compute of the layer before.");
    } else if (mx) {
      const toml::table* mxt = section(tt, r.root, sk);
      const toml::node* recipe = value(mxt, "recipe_name");
      const std::string name =
          recipe ? tt.text(recipe, sk + ".recipe_name") : (c == "mx" ? "mxfp8" : "mxfp8_cublas");
      if (name.rfind("mxfp8", 0) == 0 && name != "mxfp8_emulated") {
        job.fp8 = "e4m3";
        job.fp8_recipe = "mxfp8";
      } else {
        job.unmodelled.push_back(Unmodelled{
            tt.origin(recipe, sk + ".recipe_name"), sk + ".recipe_name = \"" + name + "\"",
            "an MX recipe other than MXFP8 on hardware (bmpipe models mxfp8)"});
      }
      job.from("training.fp8", tt.origin(conv, "model.converters", c + ": MXFP8"));
      job.from("training.fp8_recipe", tt.origin(conv, "model.converters", c + ": MXFP8"));
    } else if (c == "quantize.grouped_mm.float8" || c == "quantize.grouped_mm.mx") {
      job.unmodelled.push_back(Unmodelled{
          tt.origin(conv, "model.converters"), "model.converters \"" + c + "\"",
          "low-precision grouped GEMMs for the experts alone, which bmpipe does not model"});
    } else {
      tt.fail(conv, "model.converters",
              "unknown converter \"" + c +
                  "\" (torchtitan registers quantize.linear.float8, quantize.linear.mx, "
                  "quantize.grouped_mm.float8 and quantize.grouped_mm.mx; float8 and mx "
                  "before v0.2)");
    }
  }
}

/// [compile], or training.compile before it: compiled layers as fused kernels.
void read_compile(Reading& r) {
  const Tt& tt = r.tt;
  ImportedJob& job = r.job;
  const toml::table* compile = section(tt, r.root, "compile");
  const toml::node* enable = value(compile, "enable");
  const toml::node* old = value(r.training, "compile");
  bool on = false;
  const toml::node* from = nullptr;
  std::string key;
  if (enable) {
    on = tt.boolean(enable, "compile.enable");
    from = enable;
    key = "compile.enable";
    if (on) {
      const toml::node* comps = value(compile, "components");
      const std::vector<std::string> c =
          comps ? tt.strings(comps, "compile.components") : std::vector<std::string>{"model"};
      on = std::find(c.begin(), c.end(), "model") != c.end();
      if (comps) from = comps, key = "compile.components";
    }
  } else if (old) {
    on = tt.boolean(old, "training.compile");
    from = old;
    key = "training.compile";
  }
  r.compiled = on;
  job.kernels = on ? "fused" : "eager";
  job.from(
      "training.kernels",
      from ? tt.origin(from, key,
                       on ? key + ": compiled layers, costed with fused kernels"
                          : key + ": eager PyTorch layers")
           : tt.origin(compile, "compile.enable", "compile.enable: torchtitan's default false"));
}

/// [training]: batch, sequence, precision.
void read_training(Reading& r) {
  const Tt& tt = r.tt;
  ImportedJob& job = r.job;
  r.training = section(tt, r.root, "training");
  const toml::node* seq = value(r.training, "seq_len");
  job.seq_length = seq ? static_cast<int>(tt.integer(seq, "training.seq_len", 1)) : 2048;
  job.from("training.seq_length",
           seq ? tt.origin(seq, "training.seq_len")
               : tt.origin(r.training, "training.seq_len", "torchtitan's default 2048"));
  job.dtype = "bf16";
}

/// The batch: local_batch_size (batch_size before 8570415c3), global_batch_size and the
/// pipeline's micro-batch size, after [parallelism] says dp and pp.
void read_batch(Reading& r) {
  const Tt& tt = r.tt;
  ImportedJob& job = r.job;
  const toml::node* local = value(r.training, "local_batch_size");
  const toml::node* old = value(r.training, "batch_size");
  if (local && old)
    tt.fail(old, "training.batch_size",
            "given beside training.local_batch_size: batch_size is its name before torchtitan "
            "8570415c3; give one");
  const std::string lk = old ? "training.batch_size" : "training.local_batch_size";
  const toml::node* ln = local ? local : old;
  const long long lbs = ln ? tt.integer(ln, lk, 1) : 8;
  const Origin lo = ln ? tt.origin(ln, lk) : tt.origin(r.training, lk, "torchtitan's default 8");
  const toml::node* g = value(r.training, "global_batch_size");
  long long global = g ? tt.integer(g, "training.global_batch_size", LLONG_MIN) : -1;
  if (global == 0)
    tt.fail(g, "training.global_batch_size", "must be positive, or -1 (torchtitan's default)");
  const std::optional<long long> dp =
      r.shard > 0 ? std::optional<long long>(static_cast<long long>(r.replicate) * r.shard)
                  : std::nullopt;
  long long accumulation = 1;
  if (global > 0 && dp) {
    // [TT-train]
    if (global % (lbs * *dp) != 0)
      tt.fail(g, "training.global_batch_size",
              "global batch size must be multiple of local batch size times data-parallel "
              "degree (" +
                  std::to_string(global) + " % (" + std::to_string(lbs) + " * " +
                  std::to_string(*dp) + ") != 0)");
    accumulation = global / (lbs * *dp);
  }
  if (r.pp > 1) {
    // [TT-pp]: each step's local batch is one pass of the pipeline schedule.
    const toml::node* mb = value(r.parallelism, "pipeline_parallel_microbatch_size");
    const long long mbs =
        mb ? tt.integer(mb, "parallelism.pipeline_parallel_microbatch_size", 1) : 1;
    if (lbs % mbs != 0)
      tt.fail(mb, "parallelism.pipeline_parallel_microbatch_size",
              "Batch size " + std::to_string(lbs) + " must be divisible by microbatch_size " +
                  std::to_string(mbs) + " (torchtitan's check)");
    job.micro_batch_size = static_cast<int>(mbs);
    job.microbatches = static_cast<int>(lbs / mbs);
    job.from("training.micro_batch_size",
             mb ? tt.origin(mb, "parallelism.pipeline_parallel_microbatch_size")
                : tt.origin(r.parallelism, "parallelism.pipeline_parallel_microbatch_size",
                            "torchtitan's default 1"));
    Origin mo = lo;
    mo.why = lk + " / pipeline_parallel_microbatch_size";
    job.from("training.microbatches", mo);
    if (accumulation > 1)
      job.unmodelled.push_back(
          Unmodelled{tt.origin(g, "training.global_batch_size"),
                     "training.global_batch_size = " + std::to_string(global),
                     std::to_string(accumulation) +
                         " gradient accumulation steps, each a whole pass of the pipeline schedule "
                         "(bmpipe models one pass a step)"});
    else if (global > 0 && !dp)
      job.notes.push_back(
          "training.global_batch_size with data_parallel_shard_degree -1: torchtitan runs " +
          std::to_string(global) +
          " / (local batch x dp) passes of the pipeline a step; bmpipe models one pass, so "
          "the global batch must be the local batch x dp.");
    return;
  }
  if (value(r.parallelism, "pipeline_parallel_microbatch_size"))
    job.ignore("parallelism.pipeline_parallel_microbatch_size (no pipeline parallelism)");
  job.micro_batch_size = static_cast<int>(lbs);
  job.from("training.micro_batch_size", lo);
  if (global > 0) {
    job.global_batch_size = static_cast<int>(std::min<long long>(global, INT_MAX));
    job.from("training.global_batch_size", tt.origin(g, "training.global_batch_size"));
  } else {
    job.microbatches = 1;
    job.from("training.microbatches",
             tt.origin(g ? g : r.training, "training.global_batch_size",
                       "global_batch_size -1: local batch x dp, no gradient accumulation"));
  }
}

/// FSDP as bmpipe's sharding: ZeRO-3 without pipeline parallelism; under it torchtitan's
/// default keeps the gathered parameters through the step [TT-par], and
/// torch.distributed.pipelining defers the gradients' reduce-scatter to the last backward
/// ([PT-stage]), which is ZeRO-1 with the parameters gathered under the first forward.
void read_fsdp(const Reading& r, const toml::node* shard_node) {
  const Tt& tt = r.tt;
  ImportedJob& job = r.job;
  const toml::table* p = r.parallelism;
  const toml::node* rs = value(p, "fsdp_reshard_after_forward");
  const std::string key = "parallelism.fsdp_reshard_after_forward";
  const std::string policy = rs ? tt.text(rs, key) : "default";
  if (policy != "default" && policy != "always" && policy != "never")
    tt.fail(
        rs, key,
        "Invalid reshard_after_forward_policy: " + policy + " (expected default, always or never)");
  const Origin from =
      rs ? tt.origin(rs, key)
         : tt.origin(shard_node ? shard_node : p, "parallelism.data_parallel_shard_degree");
  if (r.pp > 1 && policy != "always") {
    job.zero_stage = 1;
    job.overlap_param_gather = true;
    job.overlap_grad_reduce = true;
    Origin o = from;
    o.why =
        "FSDP under pipeline parallelism: parameters gathered once a step (under the first "
        "forward), each stage's gradients reduce-scattered after its last backward";
    job.from("training.optimizer.zero_stage", o);
    job.from("training.optimizer.overlap_param_gather", o);
    job.from("training.optimizer.overlap_grad_reduce", o);
    job.notes.push_back(
        "FSDP under pipeline parallelism (fsdp_reshard_after_forward " + policy +
        ") keeps each stage's parameters gathered through the step and reduce-scatters its "
        "gradients after the stage's last backward; bmpipe models it as ZeRO-1 with both "
        "overlapped (optimizer.zero_stage 1, overlap_grad_reduce, overlap_param_gather).");
    return;
  }
  if (r.pp > 1)
    job.unmodelled.push_back(Unmodelled{
        from, key + " = \"" + policy + "\"",
        "FSDP resharding after every micro-batch's forward under pipeline parallelism, while "
        "the backward keeps them gathered, which bmpipe does not model (use \"default\")"});
  if (policy == "never") {
    // fully_shard(reshard_after_forward=False): the backward finds the parameters gathered.
    job.fsdp_reshard_after_forward = false;
    job.from("training.fsdp_reshard_after_forward", from);
  }
  job.fsdp = true;
  job.from("training.fsdp",
           tt.origin(shard_node ? shard_node : p, "parallelism.data_parallel_shard_degree",
                     "FSDP2 over the shard group: parameters, gradients and optimizer state "
                     "sharded (ZeRO-3)"));
}

/// [parallelism]: the mesh, FSDP and the precision it implies.
void read_parallelism(Reading& r) {
  const Tt& tt = r.tt;
  ImportedJob& job = r.job;
  r.parallelism = section(tt, r.root, "parallelism");
  const toml::table* p = r.parallelism;
  Origin o_rep, o_tp, o_pp, o_cp;
  r.replicate = degree(r, "data_parallel_replicate_degree", &o_rep);
  const toml::node* shard_node = value(p, "data_parallel_shard_degree");
  r.shard =
      shard_node
          ? static_cast<int>(tt.integer(shard_node, "parallelism.data_parallel_shard_degree", -1))
          : -1;
  if (r.shard == 0)  // [TT-dims]
    tt.fail(shard_node, "parallelism.data_parallel_shard_degree",
            "must be -1 (the devices left over) or at least 1, got 0");
  job.tp = degree(r, "tensor_parallel_degree", &o_tp);
  r.pp = job.pp = degree(r, "pipeline_parallel_degree", &o_pp);
  r.cp = degree(r, "context_parallel_degree", &o_cp);
  job.from("training", tt.origin(p ? p : &r.root, "parallelism"));
  job.from("training.tp", o_tp);
  job.from("training.pp", o_pp);
  if (r.cp > 1) {
    job.cp = r.cp;
    job.from("training.cp", o_cp);
    // The ring of key/value blocks torchtitan's context parallelism runs; its rotation by
    // all-gather (the default) or all-to-all is costed as Megatron's p2p ring.
    job.cp_comm_type = "p2p";
    const toml::node* rot = value(p, "context_parallel_rotate_method");
    const std::string method =
        rot ? tt.text(rot, "parallelism.context_parallel_rotate_method") : "allgather";
    if (method != "allgather" && method != "alltoall")
      tt.fail(rot, "parallelism.context_parallel_rotate_method",
              "expected \"allgather\" or \"alltoall\", got \"" + method + "\"");
    job.from("training.cp_comm_type",
             rot ? tt.origin(rot, "parallelism.context_parallel_rotate_method")
                 : tt.origin(p, "parallelism.context_parallel_rotate_method",
                             "torchtitan's default allgather: ring attention"));
    job.notes.push_back("context parallelism: torchtitan's ring attention (rotate method " +
                        method +
                        ") is costed as a ring of key/value exchanges overlapped with "
                        "attention (training.cp_comm_type p2p).");
  } else if (const toml::node* rot = value(p, "context_parallel_rotate_method")) {
    tt.text(rot, "parallelism.context_parallel_rotate_method");
    job.ignore("parallelism.context_parallel_rotate_method (no context parallelism)");
  }
  // dp: replicate x shard; shard -1 takes the devices left over [TT-dims].
  if (r.shard > 0) {
    const long long dp = static_cast<long long>(r.replicate) * r.shard;
    if (dp > INT_MAX)
      tt.fail(shard_node, "parallelism.data_parallel_shard_degree",
              "data_parallel_replicate_degree x data_parallel_shard_degree = " +
                  std::to_string(dp) + " data-parallel ranks, more than any cluster holds");
    job.dp = static_cast<int>(dp);
    job.from("training.dp", tt.origin(shard_node, "parallelism.data_parallel_shard_degree",
                                      "data_parallel_replicate_degree x "
                                      "data_parallel_shard_degree"));
  } else {
    job.from("training.dp",
             tt.origin(shard_node ? shard_node : p, "parallelism.data_parallel_shard_degree",
                       "data_parallel_shard_degree -1: the devices left over"));
  }
  // FSDP over the shard group, or DDP over the replicas [TT-par].
  r.fsdp = r.shard != 1 || r.cp > 1;
  const toml::node* mp = value(r.training, "mixed_precision_param");
  const toml::node* dt = value(r.training, "dtype");
  if (r.fsdp) {
    read_fsdp(r, shard_node);
    if (r.replicate > 1) {
      // HSDP [TT-par]: fully_shard over the dp_shard x cp mesh dimension, replicated over
      // dp_replicate: dp x cp / replicate ranks shard the state (training.fsdp_shard_group).
      job.shard_copies = r.replicate;
      Origin o = o_rep;
      o.why = "HSDP: the state sharded over dp x cp / " + std::to_string(r.replicate) +
              " ranks, replicated " + std::to_string(r.replicate) + " times";
      job.from("training.fsdp_shard_group", o);
      if (job.fsdp && *job.fsdp) {
        // FSDP2 all-reduces each backward's shard across the replicas (all_reduce_grads is
        // True unless set_requires_all_reduce(False), which torchtitan's trainer does not
        // call: every gradient-accumulation step's loss.backward() runs it).
        job.fsdp_all_reduce_every_microbatch = true;
        o.why = "HSDP under FSDP2: the replicas all-reduce every micro-batch's gradients";
        job.from("training.fsdp_all_reduce_every_microbatch", o);
      }
    }
    const std::string param = mp ? tt.text(mp, "training.mixed_precision_param") : "bfloat16";
    if (param != "bfloat16" && param != "float32")
      tt.fail(mp, "training.mixed_precision_param",
              "expected \"bfloat16\" or \"float32\", got \"" + param + "\"");
    if (param == "float32")
      job.unmodelled.push_back(Unmodelled{tt.origin(mp, "training.mixed_precision_param"),
                                          "training.mixed_precision_param = \"float32\"",
                                          "fp32 compute (bmpipe models bf16 and fp16)"});
    job.from("training.dtype",
             mp ? tt.origin(mp, "training.mixed_precision_param")
                : tt.origin(r.training, "training.mixed_precision_param",
                            "FSDP's mixed precision: torchtitan's default bfloat16"));
    if (dt) {
      tt.text(dt, "training.dtype");
      job.ignore("training.dtype (FSDP computes in mixed_precision_param)");
    }
  } else {
    job.zero_stage = 0;
    job.from("training.optimizer.zero_stage",
             tt.origin(shard_node ? shard_node : p, "parallelism.data_parallel_shard_degree",
                       r.replicate > 1 ? "DDP over the replicas: nothing sharded"
                                       : "no data parallelism"));
    if (mp) {
      tt.text(mp, "training.mixed_precision_param");
      job.ignore("training.mixed_precision_param (applies with FSDP only)");
    }
    const std::string dtype = dt ? tt.text(dt, "training.dtype") : "float32";
    if (dtype != "bfloat16" && dtype != "float32")
      tt.fail(dt, "training.dtype", "expected \"bfloat16\" or \"float32\", got \"" + dtype + "\"");
    if (dtype == "float32")
      job.unmodelled.push_back(Unmodelled{
          dt ? tt.origin(dt, "training.dtype")
             : tt.origin(shard_node ? shard_node : p, "parallelism.data_parallel_shard_degree"),
          dt ? "training.dtype = \"float32\""
             : "data_parallel_shard_degree 1 without FSDP, and training.dtype absent "
               "(\"float32\")",
          "fp32 parameters and compute: without FSDP torchtitan has no mixed precision (bmpipe "
          "models bf16 and fp16 compute)"});
    else
      job.notes.push_back(
          "training.dtype bfloat16 without FSDP: torchtitan keeps bf16 parameters and no "
          "fp32 master copy; bmpipe counts the master copy (more memory).");
    job.from("training.dtype", dt ? tt.origin(dt, "training.dtype")
                                  : tt.origin(r.training, "training.dtype", "float32"));
  }
  // Tensor parallelism: SequenceParallel on the norms whenever tp > 1 [TT-par].
  if (job.tp > 1) {
    job.sequence_parallel = true;
    job.from("training.sequence_parallel",
             Origin{o_tp.file, o_tp.line, 0, o_tp.key,
                    "torchtitan's tensor parallelism shards the norms over the sequence"});
  }
  if (const toml::node* atp = value(p, "enable_async_tensor_parallel");
      atp && tt.boolean(atp, "parallelism.enable_async_tensor_parallel")) {
    // [TT-atp], torchtitan's rule (frameworks/torchtitan/rules.cpp) on the TOML's key.
    Config probe;
    probe.training.tp_comm_overlap = true;
    probe.training.kernels = r.compiled ? "fused" : "eager";
    if (rule_by_id(torchtitan_rules(), "torchtitan.async-tp-compile").check(probe))
      tt.fail(atp, "parallelism.enable_async_tensor_parallel",
              "Async TP requires 'model' in --compile.components and --compile.enable "
              "(torchtitan's check)");
    if (job.tp > 1) {
      job.tp_comm_overlap = true;
      job.from("training.tp_comm_overlap",
               tt.origin(atp, "parallelism.enable_async_tensor_parallel"));
    } else {
      job.ignore("parallelism.enable_async_tensor_parallel (no tensor parallelism)");
    }
  }
}

/// Expert parallelism: expert_parallel_degree, expert_tensor_parallel_degree and the
/// communication backend.
void read_experts(Reading& r) {
  const Tt& tt = r.tt;
  ImportedJob& job = r.job;
  const toml::table* p = r.parallelism;
  Origin o_ep, o_etp;
  const int ep = degree(r, "expert_parallel_degree", &o_ep);
  const int etp = degree(r, "expert_tensor_parallel_degree", &o_etp);
  const toml::node* backend = value(p, "expert_parallel_comm_backend");
  const std::string comm =
      backend ? tt.text(backend, "parallelism.expert_parallel_comm_backend") : "standard";
  if (comm != "standard" && comm != "deepep")
    tt.fail(backend, "parallelism.expert_parallel_comm_backend",
            "expected \"standard\" or \"deepep\", got \"" + comm + "\"");
  if (!job.shape->is_moe()) {
    if (ep > 1)
      tt.fail(value(p, "expert_parallel_degree"), "parallelism.expert_parallel_degree",
              "is more than 1, but " + job.model_name + " has no experts");
    return;
  }
  job.ep = ep;
  job.from("training.ep", o_ep);
  // torchtitan's expert_tensor_parallel_degree is 1 or tp (ParallelDims): its rule
  // (frameworks/torchtitan/rules.cpp), blamed on the TOML's key.
  Config probe;
  probe.model.shape = *job.shape;
  probe.training.tp = job.tp;
  probe.training.etp = etp;
  if (rule_by_id(torchtitan_rules(), "torchtitan.etp-one-or-tp").check(probe))
    tt.fail(value(p, "expert_tensor_parallel_degree"), "parallelism.expert_tensor_parallel_degree",
            "must be 1 or tensor_parallel_degree (" + std::to_string(job.tp) + "), got " +
                std::to_string(etp));
  job.etp = etp;
  job.from("training.etp", o_etp);
  if (comm == "deepep") {
    job.moe_dispatcher = "deepep";
    job.from("training.moe_dispatcher",
             tt.origin(backend, "parallelism.expert_parallel_comm_backend"));
  } else {
    job.moe_dispatcher = "alltoall";
    job.from("training.moe_dispatcher",
             backend ? tt.origin(backend, "parallelism.expert_parallel_comm_backend")
                     : tt.origin(p, "parallelism.expert_parallel_comm_backend",
                                 "torchtitan's default standard: all-to-all"));
  }
}

/// module_fqns_per_model_part: the layers of every stage by name.
std::vector<int> stages_by_name(const Reading& r, const toml::node* n) {
  const Tt& tt = r.tt;
  const std::string key = "parallelism.module_fqns_per_model_part";
  const auto* outer = n->as_array();
  if (!outer || outer->empty()) tt.fail(n, key, "expected an array of arrays of module names");
  std::vector<int> partition;
  int next = 0;
  for (std::size_t s = 0; s < outer->size(); ++s) {
    const toml::node& stage = *outer->get(s);
    const std::vector<std::string> names = tt.strings(&stage, key);
    int count = 0;
    for (const std::string& m : names) {
      const bool first = s == 0, last = s + 1 == outer->size();
      if (m == "tok_embeddings" && first) continue;
      if ((m == "norm" || m == "output") && last) continue;
      if (m.rfind("layers.", 0) == 0 && m.size() > 7 &&
          m.find_first_not_of("0123456789", 7) == std::string::npos &&
          m == "layers." + std::to_string(next)) {
        ++next, ++count;
        continue;
      }
      tt.fail(&stage, key,
              "stage " + std::to_string(s) + ": \"" + m +
                  "\" is not where bmpipe can run it (it reads tok_embeddings on the first "
                  "stage, layers.0, layers.1, ... in order, and norm and output on the last; "
                  "the next layer is layers." +
                  std::to_string(next) + ")");
    }
    partition.push_back(count);
  }
  if (next != r.layers)
    tt.fail(n, key,
            "names " + std::to_string(next) + " of the model's " + std::to_string(r.layers) +
                " layers");
  return partition;
}

/// The pipeline: schedule, stages, split.
void read_pipeline(Reading& r) {
  const Tt& tt = r.tt;
  ImportedJob& job = r.job;
  const toml::table* p = r.parallelism;
  const std::string sk = "parallelism.pipeline_parallel_schedule";
  const toml::node* sn = value(p, "pipeline_parallel_schedule");
  const std::string name = sn ? tt.text(sn, sk) : "1F1B";
  const TorchTitanSchedule* s = find_torchtitan_schedule(name);
  if (!s) {
    std::vector<std::string> names;
    for (const TorchTitanSchedule& t : torchtitan_schedules()) names.emplace_back(t.name);
    tt.fail(sn, sk,
            "Unknown schedule name '" + name + "'" + did_you_mean(name, names) +
                " (torch's get_schedule_class takes 1F1B, Interleaved1F1B, GPipe, LoopedBFS, "
                "InterleavedZeroBubble, PipelineScheduleSingle, PipelineScheduleMulti, "
                "ZBVZeroBubble and DualPipeV)");
  }
  const std::vector<const char*> split_keys = {
      "pipeline_parallel_layers_per_stage", "pipeline_parallel_first_stage_less_layers",
      "pipeline_parallel_last_stage_less_layers", "module_fqns_per_model_part"};
  if (r.pp == 1) {
    job.schedule = "1f1b";
    job.from("training.schedule",
             tt.origin(p, "parallelism.pipeline_parallel_degree", "no pipeline parallelism"));
    if (sn) job.ignore(sk + " (no pipeline parallelism)");
    for (const char* k : split_keys)
      if (value(p, k)) job.ignore("parallelism." + std::string(k) + " (no pipeline parallelism)");
    return;
  }
  if (s->schedule.empty()) {
    if (s->name.rfind("PipelineSchedule", 0) == 0)
      tt.fail(sn, sk,
              name + " runs a schedule read from pipeline_parallel_schedule_csv: " +
                  std::string(s->why));
    job.unmodelled.push_back(Unmodelled{tt.origin(sn, sk), sk + " = \"" + name + "\"",
                                        std::string(s->why) + "; simulated as Interleaved1F1B"});
  }
  r.schedule = s;
  // Stages per rank [TT-pp]: pipeline_parallel_layers_per_stage, or 1 (single-stage
  // schedules) or 2.
  const toml::node* in_node = value(p, "pipeline_parallel_first_stage_less_layers");
  const toml::node* out_node = value(p, "pipeline_parallel_last_stage_less_layers");
  const int in_w = in_node
                       ? static_cast<int>(tt.integer(
                             in_node, "parallelism.pipeline_parallel_first_stage_less_layers", 0))
                       : 1;
  const int out_w = out_node
                        ? static_cast<int>(tt.integer(
                              out_node, "parallelism.pipeline_parallel_last_stage_less_layers", 0))
                        : 1;
  const toml::node* lps = value(p, "pipeline_parallel_layers_per_stage");
  const toml::node* fqns = value(p, "module_fqns_per_model_part");
  long long stages = static_cast<long long>(r.pp) * (s->multi ? 2 : 1);
  Origin split_origin = tt.origin(sn ? sn : p, sk,
                                  "torchtitan's split: 1 stage per rank for "
                                  "single-stage schedules, else 2");
  if (fqns) {
    r.partition = stages_by_name(r, fqns);
    stages = static_cast<long long>(r.partition.size());
    split_origin = tt.origin(fqns, "parallelism.module_fqns_per_model_part");
    if (lps)
      job.ignore(
          "parallelism.pipeline_parallel_layers_per_stage (module_fqns_per_model_part given)");
  } else if (lps) {
    const long long per = tt.integer(lps, "parallelism.pipeline_parallel_layers_per_stage", 1);
    stages = (static_cast<long long>(r.layers) + in_w + out_w + per - 1) / per;
    if (stages % r.pp != 0)
      tt.fail(lps, "parallelism.pipeline_parallel_layers_per_stage",
              "Number of virtual stages (" + std::to_string(stages) +
                  ") must be divisible by pipeline parallel size (" + std::to_string(r.pp) + ")");
    split_origin = tt.origin(lps, "parallelism.pipeline_parallel_layers_per_stage");
  }
  if (stages % r.pp != 0)
    tt.fail(fqns, "parallelism.module_fqns_per_model_part",
            "num_stages " + std::to_string(stages) + " must be evenly divisible by pp_degree " +
                std::to_string(r.pp));
  const long long per_rank = stages / r.pp;
  const std::string why_stages = "with " + std::to_string(per_rank) + " stages per rank";
  if (!s->multi && per_rank != 1)
    tt.fail(lps ? lps : fqns,
            lps ? "parallelism.pipeline_parallel_layers_per_stage"
                : "parallelism.module_fqns_per_model_part",
            "Single stage schedule requires exactly 1 stage per rank (" + name + " " + why_stages +
                ")");
  if (s->multi && per_rank < 2)
    tt.fail(lps ? lps : fqns,
            lps ? "parallelism.pipeline_parallel_layers_per_stage"
                : "parallelism.module_fqns_per_model_part",
            "Multi-stage schedule requires at least 2 stages per rank (" + name + " " + why_stages +
                ")");
  if (s->v && per_rank != 2)
    tt.fail(lps ? lps : fqns,
            lps ? "parallelism.pipeline_parallel_layers_per_stage"
                : "parallelism.module_fqns_per_model_part",
            "v schedules assume 2 stages per rank (" + name + " " + why_stages + ")");
  if (static_cast<long long>(r.layers) + in_w + out_w < stages || stages > 100000)
    tt.fail(lps ? lps : value(p, "pipeline_parallel_degree"),
            lps ? "parallelism.pipeline_parallel_layers_per_stage"
                : "parallelism.pipeline_parallel_degree",
            "number of stages (" + std::to_string(stages) +
                ") cannot be greater than effective layers (" +
                std::to_string(r.layers + in_w + out_w) + ")");
  if (!fqns) {
    try {
      r.partition = torchtitan_partition(r.layers, static_cast<int>(stages), in_w, out_w);
    } catch (const FormatError& e) {
      tt.fail(lps ? lps : (in_node ? in_node : out_node), split_origin.key, e.what());
    }
  }
  r.vpp = static_cast<int>(per_rank);
  job.vpp = r.vpp;
  job.schedule = s->schedule.empty() ? "interleaved" : std::string(s->schedule);
  job.partition = r.partition;
  job.from("training.schedule", tt.origin(sn ? sn : p, sk, sn ? "" : "torchtitan's default 1F1B"));
  job.from("training.vpp", split_origin);
  split_origin.why = split_origin.why.empty() ? "torchtitan's split into stages" : split_origin.why;
  job.from("training.partition", split_origin);
}

/// [activation_checkpoint]: a mode per layer.
void read_checkpointing(Reading& r) {
  const Tt& tt = r.tt;
  ImportedJob& job = r.job;
  const toml::table* ac = section(tt, r.root, "activation_checkpoint");
  const toml::node* mn = value(ac, "mode");
  const toml::node* on = value(ac, "selective_ac_option");
  const std::string mode = mn ? tt.text(mn, "activation_checkpoint.mode") : "selective";
  const std::string option = on ? tt.text(on, "activation_checkpoint.selective_ac_option") : "2";
  const int layers = r.layers;
  const Origin o = mn ? tt.origin(mn, "activation_checkpoint.mode")
                      : tt.origin(ac ? ac : &r.root, "activation_checkpoint.mode",
                                  "torchtitan's default: selective, every 2nd layer");
  job.from("training.recompute", o);
  if (mode == "none") {
    job.recompute.assign(static_cast<std::size_t>(layers), Recompute::none);
  } else if (mode == "full") {
    job.recompute.assign(static_cast<std::size_t>(layers), Recompute::full);
  } else if (mode == "memory_budget") {
    job.unmodelled.push_back(Unmodelled{
        o, "activation_checkpoint.mode = \"memory_budget\"",
        "the compiler's min-cut recompute under a memory budget, which bmpipe does not model"});
    job.recompute.assign(static_cast<std::size_t>(layers), Recompute::full);
  } else if (mode == "selective") {
    if (option == "op") {
      job.recompute.assign(static_cast<std::size_t>(layers), Recompute::selective);
      job.notes.push_back(
          "selective_ac_option \"op\" saves the attention's and every second matmul's "
          "outputs and recomputes the rest; bmpipe's selective mode, which it is read as, "
          "re-runs the attention core.");
    } else if (!option.empty() && option.find_first_not_of("0123456789") == std::string::npos &&
               option.size() < 7) {
      const int freq = std::stoi(option);
      std::vector<int> partition = r.partition.empty() ? std::vector<int>{layers} : r.partition;
      const bool v = r.schedule && r.schedule->v;
      job.recompute = torchtitan_layer_sac(partition, std::max(1, r.pp), v, freq);
      job.from("training.recompute",
               tt.origin(on ? on : (mn ? mn : ac), "activation_checkpoint.selective_ac_option",
                         freq == 0 ? "every layer checkpointed"
                                   : "every " + std::to_string(freq) +
                                         "-th layer a rank builds checkpointed"));
    } else {
      tt.fail(on, "activation_checkpoint.selective_ac_option",
              "Invalid selective AC option: " + option +
                  ". Valid options: 'op' or a positive int representing layer frequency");
    }
  } else {
    tt.fail(
        mn, "activation_checkpoint.mode",
        "expected \"none\", \"selective\", \"full\" or \"memory_budget\", got \"" + mode + "\"");
  }
  if (mode != "selective" && on)
    job.ignore("activation_checkpoint.selective_ac_option (mode " + mode + ")");
}

/// The first code point of `text` that toml++ 3.3.0 (Debian 12's libtomlplusplus-dev)
/// cannot classify without undefined behaviour, as (line, column, code point), or none.
/// Its is_non_ascii_horizontal_whitespace (toml++/impl/unicode_autogenerated.h), which the
/// parser asks of characters between tokens and in values, indexes U+00A0 to U+FEFF in
/// 64 blocks of 0x3FA and reaches TOML_UNREACHABLE for a block its bitmask leaves to a
/// switch without that case (blocks 0, 11 and 63 but for U+00A0, U+3000 and U+FEFF); the
/// fuzz target found it. A torchtitan TOML has no use for them.
std::optional<std::tuple<int, int, char32_t>> toml_pitfall(const std::string& text) {
  constexpr std::uint64_t kMask = 0x7FFFFFFFFFFFF75Eull;
  int line = 1, column = 1;
  for (std::size_t i = 0; i < text.size(); ++column) {
    const auto b = static_cast<unsigned char>(text[i]);
    char32_t c = b;
    std::size_t n = 1;
    if (b >= 0xC0 && b < 0xE0 && i + 1 < text.size()) {
      c = ((b & 0x1Fu) << 6) | (static_cast<unsigned char>(text[i + 1]) & 0x3Fu);
      n = 2;
    } else if (b >= 0xE0 && b < 0xF0 && i + 2 < text.size()) {
      c = ((b & 0x0Fu) << 12) | ((static_cast<unsigned char>(text[i + 1]) & 0x3Fu) << 6) |
          (static_cast<unsigned char>(text[i + 2]) & 0x3Fu);
      n = 3;
    }
    if (c > 0xA0 && c < 0xFEFF && c != 0x3000) {
      const std::uint64_t block = (static_cast<std::uint64_t>(c) - 0xA0) / 0x3FA;
      if (!((kMask >> block) & 1u) && block != 5 && block != 7)
        return std::tuple<int, int, char32_t>{line, column, c};
    }
    if (b == '\n') ++line, column = 0;
    i += n;
  }
  return std::nullopt;
}

}  // namespace

const Vocabulary& torchtitan_vocabulary() {
  static const Vocabulary table(torchtitan_keys_text(), "frameworks/torchtitan/keys.tsv");
  return table;
}

ImportedJob read_torchtitan_toml(const std::string& text, const std::string& name) {
  ImportedJob job;
  job.source = name;
  job.framework = "torchtitan TOML";
  const Tt tt(shown_path(name), job);
  if (const auto at = toml_pitfall(text)) {
    const auto [line, column, c] = *at;
    char code[16];
    std::snprintf(code, sizeof code, "U+%04X", static_cast<unsigned>(c));
    throw ImportError(tt.file(), line, column, "",
                      std::string("the character ") + code +
                          ": toml++ 3.3, which reads the TOML, cannot classify it safely "
                          "(a bug of that version); remove it");
  }
  toml::table root;
  try {
    root = toml::parse(text, tt.file());
  } catch (const toml::parse_error& e) {
    const auto& at = e.source().begin;
    throw ImportError(tt.file(), at.line > 0 ? static_cast<int>(at.line) : 1,
                      at.column > 0 ? static_cast<int>(at.column) : 0, "",
                      "malformed TOML: " + std::string(e.description()));
  }
  tt.check_keys(root, "");
  Reading r(tt, job, root);
  read_model(r);
  read_converters(r);
  read_training(r);
  read_compile(r);
  read_parallelism(r);
  read_experts(r);
  read_pipeline(r);
  read_batch(r);
  read_checkpointing(r);
  return job;
}

}  // namespace bmpipe
