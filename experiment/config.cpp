#include "experiment/config.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <numeric>
#include <set>
#include <sstream>
#include <string_view>

#include "schedules/registry.hpp"
#include "experiment/yaml_reader.hpp"

namespace bmpipe {

ConfigError::ConfigError(std::string file, int line, std::string key, std::string message)
    : std::runtime_error(file + (line > 0 ? ":" + std::to_string(line) : std::string()) + ": " +
                         (key.empty() ? std::string() : key + ": ") + message),
      file_(std::move(file)),
      line_(line),
      key_(std::move(key)),
      message_(std::move(message)) {}

int ModelConfig::num_layers() const {
  if (shape) return shape->num_layers;
  int n = 0;
  for (const auto& g : layers) n += g.count;
  return n;
}

void Config::fail(const std::string& key, const std::string& message) const {
  auto it = lines.find(key);
  if (it != lines.end() && it->second == 0)  // set by a command-line override
    throw ConfigError(file, 0, key + " (from the command line)", message);
  throw ConfigError(file, it == lines.end() ? 0 : it->second, key, message);
}

namespace {

using detail::Reader;

// `preset`: the device preset's link, which makes the key and its fields optional.
void read_link(Reader& rd, const YAML::Node& cluster, const char* name, bool required,
               const LinkSpec* preset, LinkSpec& out) {
  if (preset) out = *preset;
  YAML::Node n = rd.child(cluster, "cluster", name, required && !preset);
  if (!n.IsDefined()) return;
  const std::string key = std::string("cluster.") + name;
  rd.expect_map(n, key, {"bandwidth_GBps", "latency_us"});
  out.bandwidth_GBps = rd.number(n, key, "bandwidth_GBps", !preset, out.bandwidth_GBps, 0, true);
  out.latency_us = rd.number(n, key, "latency_us", !preset, out.latency_us, 0, false);
}

double read_efficiency(Reader& rd, const YAML::Node& dev, const char* name, double fallback) {
  const double v = rd.number(dev, "cluster.device", name, false, fallback, 0, true);
  if (v > 1.0)
    rd.fail(dev[name], std::string("cluster.device.") + name, "is a fraction of peak: at most 1");
  return v;
}

void read_cluster(Reader& rd, const YAML::Node& root, Config& c) {
  YAML::Node n = rd.child(root, "", "cluster", true);
  rd.expect_map(n, "cluster", {"nodes", "devices_per_node", "device", "intra_node", "inter_node"});
  c.cluster.nodes = rd.small_int(n, "cluster", "nodes", true, 1, 1);
  // Optional with a device preset, which knows the usual node size.
  c.cluster.devices_per_node = rd.small_int(n, "cluster", "devices_per_node", false, 0, 1);
  YAML::Node dev = rd.child(n, "cluster", "device", true);
  const std::string key = "cluster.device";
  rd.expect_map(dev, key,
                {"preset", "name", "memory_GiB", "reserved_GiB", "peak_tflops", "hbm_GBps",
                 "matmul_efficiency", "matmul_backward_efficiency", "attention_efficiency",
                 "attention_backward_efficiency", "memory_efficiency", "collective_efficiency",
                 "kernel_launch_us", "intra_node_mesh"});
  // A preset fills every value; any key written beside it wins.
  const HardwareSpec* preset = nullptr;
  const std::string preset_name = rd.string(dev, key, "preset", false, "");
  if (!preset_name.empty()) {
    preset = find_hardware_preset(preset_name);
    if (!preset)
      rd.fail(
          dev["preset"], key + ".preset",
          "unknown hardware preset '" + preset_name + "' (known: " + hardware_preset_names() + ")");
  }
  c.device.name = rd.string(dev, key, "name", false, preset ? preset->name : "device");
  c.device.memory_GiB =
      rd.number(dev, key, "memory_GiB", !preset, preset ? preset->memory_GiB : 0, 0, true);
  c.device.reserved_GiB =
      rd.number(dev, key, "reserved_GiB", false, preset ? preset->reserved_GiB : 0, 0, false);
  if (c.cluster.devices_per_node == 0) {
    if (!preset) rd.fail(n, "cluster.devices_per_node", "missing required key");
    c.cluster.devices_per_node = preset->devices_per_node;
  }
  // Compute figures: only needed by the analytic model, so optional unless started.
  const bool compute = preset || dev["peak_tflops"].IsDefined() || dev["hbm_GBps"].IsDefined();
  if (compute) {
    HardwareSpec hw = preset ? *preset : HardwareSpec{};
    hw.name = c.device.name;
    hw.memory_GiB = c.device.memory_GiB;
    hw.reserved_GiB = c.device.reserved_GiB;
    hw.peak_tflops = rd.number(dev, key, "peak_tflops", !preset, hw.peak_tflops, 0, true);
    hw.hbm_GBps = rd.number(dev, key, "hbm_GBps", !preset, hw.hbm_GBps, 0, true);
    hw.matmul_efficiency = read_efficiency(rd, dev, "matmul_efficiency", hw.matmul_efficiency);
    hw.matmul_backward_efficiency =
        read_efficiency(rd, dev, "matmul_backward_efficiency", hw.matmul_backward_efficiency);
    hw.attention_efficiency =
        read_efficiency(rd, dev, "attention_efficiency", hw.attention_efficiency);
    hw.attention_backward_efficiency =
        read_efficiency(rd, dev, "attention_backward_efficiency", hw.attention_backward_efficiency);
    hw.memory_efficiency = read_efficiency(rd, dev, "memory_efficiency", hw.memory_efficiency);
    hw.collective_efficiency =
        read_efficiency(rd, dev, "collective_efficiency", hw.collective_efficiency);
    hw.kernel_launch_us =
        rd.number(dev, key, "kernel_launch_us", false, hw.kernel_launch_us, 0, false);
    hw.intra_node_mesh = rd.boolean(dev, key, "intra_node_mesh", hw.intra_node_mesh);
    c.device.hardware = hw;
  } else {
    for (const char* k : {"matmul_efficiency", "matmul_backward_efficiency", "attention_efficiency",
                          "attention_backward_efficiency", "memory_efficiency",
                          "collective_efficiency", "kernel_launch_us", "intra_node_mesh"})
      if (dev[k].IsDefined())
        rd.fail(dev[k], key + "." + k,
                "needs the device's compute figures: give preset (known: " +
                    hardware_preset_names() + ") or peak_tflops and hbm_GBps");
  }
  // Intra-node links are needed as soon as a node holds two devices; inter-node links as
  // soon as there are two nodes. A device preset supplies both.
  read_link(rd, n, "intra_node", c.cluster.devices_per_node > 1,
            preset ? &preset->intra_node : nullptr, c.cluster.intra_node);
  read_link(rd, n, "inter_node", c.cluster.nodes > 1, preset ? &preset->inter_node : nullptr,
            c.cluster.inter_node);
  if (c.device.hardware) {
    c.device.hardware->intra_node = c.cluster.intra_node;
    c.device.hardware->inter_node = c.cluster.inter_node;
  }
}

// The analytic forms of model: preset, hf_config, or explicit shape keys (which also
// override a preset's or an HF config's values).
void read_shape(Reader& rd, const YAML::Node& n, Config& c) {
  const std::string key = "model";
  ModelShape m;
  const bool has_preset = n["preset"].IsDefined(), has_hf = n["hf_config"].IsDefined();
  if (has_preset && has_hf)
    rd.fail(n["hf_config"], "model.hf_config", "give either preset or hf_config, not both");
  if (has_preset) {
    const std::string name = rd.string(n, key, "preset", true, "");
    const ModelShape* p = find_model_preset(name);
    if (!p)
      rd.fail(n["preset"], "model.preset",
              "unknown model preset '" + name + "' (known: " + model_preset_names() + ")");
    m = *p;
  } else if (has_hf) {
    const std::string rel = rd.string(n, key, "hf_config", true, "");
    // Relative to the folder of the YAML file, so an experiment can ship with its model.
    std::filesystem::path path(rel);
    if (path.is_relative()) path = std::filesystem::path(c.file).parent_path() / path;
    try {
      m = read_hf_config(path.string());
    } catch (const ShapeError& e) {
      rd.fail(n["hf_config"], "model.hf_config", e.what());
    }
  }
  const bool base = has_preset || has_hf;
  const std::string arch =
      rd.choice(n, key, "architecture", to_string(m.architecture), {"llama", "gpt"});
  m.architecture = arch == "gpt" ? Architecture::gpt : Architecture::llama;
  m.num_layers = rd.small_int(n, key, "num_layers", !base, m.num_layers, 1);
  m.hidden_size = rd.small_int(n, key, "hidden_size", !base, m.hidden_size, 1);
  m.num_attention_heads =
      rd.small_int(n, key, "num_attention_heads", !base, m.num_attention_heads, 1);
  m.num_kv_heads =
      rd.small_int(n, key, "num_kv_heads", false, base ? m.num_kv_heads : m.num_attention_heads, 1);
  m.ffn_hidden_size = rd.small_int(n, key, "ffn_hidden_size", !base, m.ffn_hidden_size, 1);
  m.vocab_size = rd.small_int(n, key, "vocab_size", !base, m.vocab_size, 1);
  m.tied_embeddings = rd.boolean(n, key, "tied_embeddings", m.tied_embeddings);
  m.flash_attention = rd.boolean(n, key, "flash_attention", m.flash_attention);
  m.dropout = rd.boolean(n, key, "dropout", m.dropout);
  try {
    check_shape(m);
  } catch (const ShapeError& e) {
    rd.fail(n, "model", e.what());
  }
  if (!base) m.name = "model";
  m.name = rd.string(n, key, "name", false, m.name);
  c.model.name = m.name;
  c.model.shape = m;
}

void read_model(Reader& rd, const YAML::Node& root, Config& c) {
  YAML::Node n = rd.child(root, "", "model", true);
  rd.expect_map(n, "model",
                {"name", "layers", "preset", "hf_config", "architecture", "num_layers",
                 "hidden_size", "num_attention_heads", "num_kv_heads", "ffn_hidden_size",
                 "vocab_size", "tied_embeddings", "flash_attention", "dropout"});
  if (!n["layers"].IsDefined()) {
    bool analytic = false;
    for (const char* k : {"preset", "hf_config", "num_layers", "hidden_size"})
      analytic = analytic || n[k].IsDefined();
    if (!analytic)
      rd.fail(n, "model",
              "give measured layers (model.layers), a preset (known: " + model_preset_names() +
                  "), hf_config, or the shape keys (num_layers, hidden_size, ...)");
    read_shape(rd, n, c);
    return;
  }
  for (const char* k : {"preset", "hf_config", "architecture", "num_layers", "hidden_size",
                        "num_attention_heads", "num_kv_heads", "ffn_hidden_size", "vocab_size",
                        "tied_embeddings", "flash_attention", "dropout"})
    if (n[k].IsDefined())
      rd.fail(n[k], std::string("model.") + k,
              "cannot be combined with model.layers (measured costs): use one form or the other");
  c.model.name = rd.string(n, "model", "name", false, "model");
  YAML::Node layers = rd.child(n, "model", "layers", true);
  if (!layers.IsSequence() || layers.size() == 0)
    rd.fail(layers, "model.layers", "expected a non-empty list of layer groups");
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const std::string key = "model.layers[" + std::to_string(i) + "]";
    const YAML::Node g = layers[i];
    rd.expect_map(g, key,
                  {"name", "count", "forward_ms", "backward_input_ms", "backward_weight_ms",
                   "recompute_ms", "activation_bytes", "weight_grad_retained_bytes", "output_bytes",
                   "param_bytes", "grad_bytes", "optimizer_bytes"});
    LayerGroup lg;
    lg.name = rd.string(g, key, "name", true, "");
    lg.count = rd.small_int(g, key, "count", false, 1, 1);
    lg.forward_ms = rd.number(g, key, "forward_ms", true, 0, 0, false);
    lg.backward_input_ms = rd.number(g, key, "backward_input_ms", true, 0, 0, false);
    lg.backward_weight_ms = rd.number(g, key, "backward_weight_ms", true, 0, 0, false);
    lg.recompute_ms = rd.number(g, key, "recompute_ms", false, 0, 0, false);
    lg.activation_bytes = rd.integer(g, key, "activation_bytes", true, 0, 0);
    if (g["weight_grad_retained_bytes"].IsDefined())
      lg.weight_grad_retained_bytes = rd.integer(g, key, "weight_grad_retained_bytes", true, 0, 0);
    if (lg.weight_grad_retained_bytes && *lg.weight_grad_retained_bytes > lg.activation_bytes)
      rd.fail(g["weight_grad_retained_bytes"], key + ".weight_grad_retained_bytes",
              "cannot exceed activation_bytes (" + std::to_string(lg.activation_bytes) + ")");
    lg.output_bytes = rd.integer(g, key, "output_bytes", true, 0, 0);
    lg.param_bytes = rd.integer(g, key, "param_bytes", true, 0, 0);
    lg.grad_bytes = rd.integer(g, key, "grad_bytes", false, 0, 0);
    lg.optimizer_bytes = rd.integer(g, key, "optimizer_bytes", false, 0, 0);
    c.model.layers.push_back(lg);
  }
}

Recompute recompute_value(Reader& rd, const YAML::Node& v, const std::string& path) {
  if (!v.IsScalar()) rd.fail(v, path, "expected none, selective or full");
  const auto r = parse_recompute(v.Scalar());
  if (!r)
    rd.fail(v, path,
            "unknown recompute mode '" + v.Scalar() + "' (expected none, selective or full)");
  rd.mark(v, path);
  return *r;
}

// {index: mode} for recompute.stages / recompute.layers.
void read_recompute_map(Reader& rd, const YAML::Node& n, const std::string& path,
                        std::map<int, Recompute>& out) {
  if (!n.IsMap())
    rd.fail(n, path, "expected a mapping of index: mode, e.g. {0: full, 3: selective}");
  for (const auto& kv : n) {
    const int index = static_cast<int>(rd.integer_value(kv.first, path, 0));
    const std::string entry = path + "." + std::to_string(index);
    out[index] = recompute_value(rd, kv.second, entry);
  }
}

// Keys that only the analytic cost model uses.
void read_analytic_training(Reader& rd, const YAML::Node& n, Config& c) {
  TrainingConfig& t = c.training;
  if (!c.model.analytic())
    for (const char* k : {"dtype", "sequence_parallel", "optimizer", "recompute"})
      if (n[k].IsDefined())
        rd.fail(n[k], std::string("training.") + k,
                "applies only to an analytic model (model.preset, model.hf_config or shape "
                "keys); measured layers carry their own costs");
  t.dtype = rd.choice(n, "training", "dtype", "bf16", {"bf16", "fp16"});
  t.sequence_parallel = rd.boolean(n, "training", "sequence_parallel", false);
  YAML::Node opt = rd.child(n, "training", "optimizer", false);
  if (opt.IsDefined()) {
    const std::string key = "training.optimizer";
    rd.expect_map(opt, key, {"type", "zero_stage", "master_weights", "grad_dtype"});
    rd.choice(opt, key, "type", "adam", {"adam"});
    const std::int64_t zero = rd.integer(opt, key, "zero_stage", false, 0, 0);
    if (zero > 1)
      rd.fail(opt["zero_stage"], key + ".zero_stage",
              "must be 0 or 1 (ZeRO-1 shards optimizer state over dp)");
    t.optimizer.zero_stage = static_cast<int>(zero);
    t.optimizer.master_weights = rd.boolean(opt, key, "master_weights", true);
    t.optimizer.grad_bytes =
        rd.choice(opt, key, "grad_dtype", "fp32", {"fp32", "bf16", "fp16"}) == "fp32" ? 4 : 2;
  }
  YAML::Node rc = rd.child(n, "training", "recompute", false);
  if (rc.IsDefined()) {
    const std::string key = "training.recompute";
    if (rc.IsScalar()) {
      t.recompute.global = recompute_value(rd, rc, key);
    } else {
      rd.expect_map(rc, key, {"default", "stages", "layers"});
      if (rc["default"].IsDefined())
        t.recompute.global = recompute_value(rd, rc["default"], key + ".default");
      if (rc["stages"].IsDefined())
        read_recompute_map(rd, rc["stages"], key + ".stages", t.recompute.stages);
      if (rc["layers"].IsDefined())
        read_recompute_map(rd, rc["layers"], key + ".layers", t.recompute.layers);
    }
  }
}

void read_training(Reader& rd, const YAML::Node& root, Config& c) {
  YAML::Node n = rd.child(root, "", "training", true);
  rd.expect_map(n, "training",
                {"schedule", "pp", "vpp", "tp", "dp", "microbatches", "partition", "overlap_factor",
                 "overlap_ms", "activation_limit_microbatches", "seq_length", "micro_batch_size",
                 "global_batch_size", "dtype", "sequence_parallel", "optimizer", "recompute"});
  TrainingConfig& t = c.training;
  t.schedule = rd.string(n, "training", "schedule", false, "1f1b");
  t.pp = rd.small_int(n, "training", "pp", true, 1, 1);
  t.vpp = rd.small_int(n, "training", "vpp", false, 1, 1);
  t.tp = rd.small_int(n, "training", "tp", false, 1, 1);
  if (n["dp"].IsDefined()) t.dp = rd.small_int(n, "training", "dp", true, 0, 1);
  t.microbatches_given = n["microbatches"].IsDefined();
  t.microbatches = rd.small_int(n, "training", "microbatches", false, 1, 1);
  if (n["seq_length"].IsDefined()) t.seq_length = rd.small_int(n, "training", "seq_length", true, 0, 1);
  t.micro_batch_size = rd.small_int(n, "training", "micro_batch_size", false, 1, 1);
  if (n["global_batch_size"].IsDefined())
    t.global_batch_size = rd.small_int(n, "training", "global_batch_size", true, 0, 1);
  read_analytic_training(rd, n, c);
  t.overlap_factor = rd.number(n, "training", "overlap_factor", false, 1.0, 0.0, true);
  if (n["overlap_ms"].IsDefined() && rd.number(n, "training", "overlap_ms", true, 0.0, 0.0, false) > 0)
    t.overlap_ms = rd.number(n, "training", "overlap_ms", true, 0.0, 0.0, false);
  if (n["activation_limit_microbatches"].IsDefined())
    t.activation_limit_microbatches =
        rd.small_int(n, "training", "activation_limit_microbatches", true, 0, 1);
  YAML::Node part = rd.child(n, "training", "partition", false);
  if (part.IsDefined()) {
    if (!part.IsSequence()) rd.fail(part, "training.partition", "expected a list of layer counts");
    for (std::size_t i = 0; i < part.size(); ++i)
      t.partition.push_back(static_cast<int>(
          rd.integer_value(part[i], "training.partition[" + std::to_string(i) + "]", 0)));
  }
}

}  // namespace

void check_config(const Config& c) {
  const TrainingConfig& t = c.training;
  if (!find_schedule(t.schedule))
    c.fail("training.schedule",
           "unknown schedule '" + t.schedule + "' (known: " + schedule_names() + ")");
  const int devices = c.cluster.nodes * c.cluster.devices_per_node;
  if (devices % t.pp != 0)
    c.fail("training.pp", "pp = " + std::to_string(t.pp) + " does not divide the " +
                              std::to_string(devices) + " devices of the cluster");
  if (devices % (t.pp * t.tp) != 0)
    c.fail("training.tp", "pp * tp = " + std::to_string(t.pp * t.tp) + " does not divide the " +
                              std::to_string(devices) + " devices");
  if (t.dp && t.pp * t.tp * *t.dp != devices)
    c.fail("training.dp", "pp * tp * dp = " + std::to_string(t.pp * t.tp * *t.dp) +
                              " but the cluster has " + std::to_string(devices) + " devices");
  if (t.microbatches < 1) c.fail("training.microbatches", "must be at least 1");
  const int stages = t.pp * t.vpp;
  const int layers = c.model.num_layers();
  if (c.model.analytic()) {
    const ModelShape& m = *c.model.shape;
    if (!t.seq_length)
      c.fail("training", "the analytic model needs training.seq_length (tokens per sample)");
    if (!c.device.hardware)
      c.fail("cluster.device",
             "the analytic model needs the device's compute figures: give "
             "preset (known: " +
                 hardware_preset_names() + ") or peak_tflops and hbm_GBps");
    if (m.num_attention_heads % t.tp != 0)
      c.fail("training.tp", "tp = " + std::to_string(t.tp) + " does not divide the " +
                                std::to_string(m.num_attention_heads) + " attention heads of " +
                                m.name);
    if (m.ffn_hidden_size % t.tp != 0)
      c.fail("training.tp", "tp = " + std::to_string(t.tp) + " does not divide ffn_hidden_size = " +
                                std::to_string(m.ffn_hidden_size) + " of " + m.name);
    for (const auto& [s, mode] : t.recompute.stages)
      if (s >= stages)
        c.fail("training.recompute.stages." + std::to_string(s),
               "stage " + std::to_string(s) + " does not exist: there are " +
                   std::to_string(stages) + " stages (pp " + std::to_string(t.pp) + " x vpp " +
                   std::to_string(t.vpp) + ")");
    for (const auto& [l, mode] : t.recompute.layers)
      if (l >= layers)
        c.fail("training.recompute.layers." + std::to_string(l),
               "layer " + std::to_string(l) + " does not exist: the model has " +
                   std::to_string(layers) + " layers");
  }
  if (!t.partition.empty()) {
    if (static_cast<int>(t.partition.size()) != stages)
      c.fail("training.partition", "has " + std::to_string(t.partition.size()) +
                                       " entries but there are " + std::to_string(stages) +
                                       " stages (pp " + std::to_string(t.pp) + " x vpp " +
                                       std::to_string(t.vpp) + ")");
    const int sum = std::accumulate(t.partition.begin(), t.partition.end(), 0);
    if (sum != layers)
      c.fail("training.partition", "adds up to " + std::to_string(sum) +
                                       " layers but the model has " + std::to_string(layers));
  } else if (layers < stages) {
    c.fail("training.pp", "the model's " + std::to_string(layers) + " layers cannot fill " +
                              std::to_string(stages) + " stages");
  }
}

void resolve_batch(Config& c) {
  TrainingConfig& t = c.training;
  const int devices = c.cluster.nodes * c.cluster.devices_per_node;
  if (t.pp < 1 || t.tp < 1 || devices % (t.pp * t.tp) != 0) return;  // check_config reports it
  const int dp = t.data_parallel(devices);
  if (t.global_batch_size) {
    const std::int64_t per = static_cast<std::int64_t>(t.micro_batch_size) * dp;
    const std::string per_text = "micro_batch_size x dp = " + std::to_string(t.micro_batch_size) +
                                 " x " + std::to_string(dp) + " = " + std::to_string(per);
    if (*t.global_batch_size % per != 0)
      c.fail("training.global_batch_size",
             "global_batch_size = " + std::to_string(*t.global_batch_size) +
                 " is not a multiple of " + per_text);
    const int m = static_cast<int>(*t.global_batch_size / per);
    if (t.microbatches_given && t.microbatches != m)
      c.fail("training.microbatches", "microbatches = " + std::to_string(t.microbatches) +
                                          " contradicts global_batch_size / (" + per_text +
                                          ") = " + std::to_string(*t.global_batch_size) + " / " +
                                          std::to_string(per) + " = " + std::to_string(m));
    t.microbatches = m;
  } else if (!t.microbatches_given) {
    auto it = c.lines.find("training");
    throw ConfigError(c.file, it == c.lines.end() ? 0 : it->second, "training.microbatches",
                      "missing required key (or give global_batch_size)");
  }
}

Config parse_config(const std::string& yaml_text, const std::string& name) {
  Config c;
  c.file = name;
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    throw ConfigError(name, e.mark.line + 1, "", "malformed YAML: " + e.msg);
  }
  Reader rd(c);
  if (!root.IsMap())
    throw ConfigError(name, 0, "", "expected a mapping with cluster, model and training");
  try {
    rd.expect_map(root, "", {"cluster", "model", "training"});
    read_cluster(rd, root, c);
    read_model(rd, root, c);
    read_training(rd, root, c);
  } catch (const YAML::Exception& e) {  // a conversion yaml-cpp refused
    throw ConfigError(name, e.mark.line + 1, "", e.msg);
  }
  resolve_batch(c);
  check_config(c);
  return c;
}

Config load_config(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError(path, 0, "", "cannot open the file");
  std::stringstream text;
  text << in.rdbuf();
  return parse_config(text.str(), path);
}

void apply_overrides(Config& c, const Overrides& o) {
  auto mark = [&](const char* key) { c.lines[key] = 0; };
  if (o.schedule) c.training.schedule = *o.schedule, mark("training.schedule");
  if (o.pp) c.training.pp = *o.pp, mark("training.pp");
  if (o.vpp) c.training.vpp = *o.vpp, mark("training.vpp");
  if (o.microbatches) {
    // The override wins over a global_batch_size from the file.
    c.training.microbatches = *o.microbatches, mark("training.microbatches");
    c.training.microbatches_given = true;
    c.training.global_batch_size.reset();
  }
  auto positive = [&](const std::optional<int>& v, const char* flag) {
    if (v && *v < 1) throw ConfigError(c.file, 0, flag, "must be at least 1");
  };
  positive(o.pp, "--pp");
  positive(o.vpp, "--vpp");
  positive(o.microbatches, "--microbatches");
  resolve_batch(c);
  check_config(c);
}

}  // namespace bmpipe
