#include "sim/config/config.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <initializer_list>
#include <numeric>
#include <set>
#include <sstream>
#include <string_view>

#include "schedules/registry.hpp"
#include "sim/config/yaml_reader.hpp"

namespace bmpipe {

ConfigError::ConfigError(std::string file, int line, std::string key, std::string message)
    : std::runtime_error(file + (line > 0 ? ":" + std::to_string(line) : std::string()) + ": " +
                         (key.empty() ? std::string() : key + ": ") + message),
      file_(std::move(file)),
      line_(line),
      key_(std::move(key)),
      message_(std::move(message)) {}

int ModelConfig::num_layers() const {
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

void read_link(Reader& rd, const YAML::Node& cluster, const char* name, bool required,
               LinkSpec& out) {
  YAML::Node n = rd.child(cluster, "cluster", name, required);
  if (!n.IsDefined()) return;
  const std::string key = std::string("cluster.") + name;
  rd.expect_map(n, key, {"bandwidth_GBps", "latency_us"});
  out.bandwidth_GBps = rd.number(n, key, "bandwidth_GBps", true, 0, 0, true);
  out.latency_us = rd.number(n, key, "latency_us", true, 0, 0, false);
}

void read_cluster(Reader& rd, const YAML::Node& root, Config& c) {
  YAML::Node n = rd.child(root, "", "cluster", true);
  rd.expect_map(n, "cluster", {"nodes", "devices_per_node", "device", "intra_node", "inter_node"});
  c.cluster.nodes = rd.small_int(n, "cluster", "nodes", true, 1, 1);
  c.cluster.devices_per_node = rd.small_int(n, "cluster", "devices_per_node", true, 1, 1);
  YAML::Node dev = rd.child(n, "cluster", "device", true);
  rd.expect_map(dev, "cluster.device", {"name", "memory_GiB", "reserved_GiB"});
  c.device.name = rd.string(dev, "cluster.device", "name", false, "device");
  c.device.memory_GiB = rd.number(dev, "cluster.device", "memory_GiB", true, 0, 0, true);
  c.device.reserved_GiB = rd.number(dev, "cluster.device", "reserved_GiB", false, 0, 0, false);
  // Intra-node links are needed as soon as a node holds two devices; inter-node links as
  // soon as there are two nodes.
  read_link(rd, n, "intra_node", c.cluster.devices_per_node > 1, c.cluster.intra_node);
  read_link(rd, n, "inter_node", c.cluster.nodes > 1, c.cluster.inter_node);
}

void read_model(Reader& rd, const YAML::Node& root, Config& c) {
  YAML::Node n = rd.child(root, "", "model", true);
  rd.expect_map(n, "model", {"name", "layers"});
  c.model.name = rd.string(n, "model", "name", false, "model");
  YAML::Node layers = rd.child(n, "model", "layers", true);
  if (!layers.IsSequence() || layers.size() == 0)
    rd.fail(layers, "model.layers", "expected a non-empty list of layer groups");
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const std::string key = "model.layers[" + std::to_string(i) + "]";
    const YAML::Node g = layers[i];
    rd.expect_map(g, key,
                  {"name", "count", "forward_ms", "backward_input_ms", "backward_weight_ms",
                   "recompute_ms", "activation_bytes", "weight_grad_retained_bytes",
                   "output_bytes", "param_bytes", "grad_bytes", "optimizer_bytes"});
    LayerGroup lg;
    lg.name = rd.string(g, key, "name", true, "");
    lg.count = rd.small_int(g, key, "count", false, 1, 1);
    lg.forward_ms = rd.number(g, key, "forward_ms", true, 0, 0, false);
    lg.backward_input_ms = rd.number(g, key, "backward_input_ms", true, 0, 0, false);
    lg.backward_weight_ms = rd.number(g, key, "backward_weight_ms", true, 0, 0, false);
    lg.recompute_ms = rd.number(g, key, "recompute_ms", false, 0, 0, false);
    lg.activation_bytes = rd.integer(g, key, "activation_bytes", true, 0, 0);
    lg.weight_grad_retained_bytes = rd.integer(g, key, "weight_grad_retained_bytes", false, -1, 0);
    if (lg.weight_grad_retained_bytes > lg.activation_bytes)
      rd.fail(g["weight_grad_retained_bytes"], key + ".weight_grad_retained_bytes",
              "cannot exceed activation_bytes (" + std::to_string(lg.activation_bytes) + ")");
    lg.output_bytes = rd.integer(g, key, "output_bytes", true, 0, 0);
    lg.param_bytes = rd.integer(g, key, "param_bytes", true, 0, 0);
    lg.grad_bytes = rd.integer(g, key, "grad_bytes", false, 0, 0);
    lg.optimizer_bytes = rd.integer(g, key, "optimizer_bytes", false, 0, 0);
    c.model.layers.push_back(lg);
  }
}

void read_training(Reader& rd, const YAML::Node& root, Config& c) {
  YAML::Node n = rd.child(root, "", "training", true);
  rd.expect_map(n, "training",
                {"schedule", "pp", "vpp", "tp", "dp", "microbatches", "partition", "overlap_factor",
                 "overlap_ms", "activation_limit_microbatches"});
  TrainingConfig& t = c.training;
  t.schedule = rd.string(n, "training", "schedule", false, "1f1b");
  t.pp = rd.small_int(n, "training", "pp", true, 1, 1);
  t.vpp = rd.small_int(n, "training", "vpp", false, 1, 1);
  t.tp = rd.small_int(n, "training", "tp", false, 1, 1);
  t.dp = rd.small_int(n, "training", "dp", false, 0, 1);
  t.microbatches = rd.small_int(n, "training", "microbatches", true, 1, 1);
  t.overlap_factor = rd.number(n, "training", "overlap_factor", false, 1.0, 0.0, true);
  t.overlap_ms = rd.number(n, "training", "overlap_ms", false, 0.0, 0.0, false);
  t.activation_limit_microbatches =
      rd.small_int(n, "training", "activation_limit_microbatches", false, 0, 1);
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
  if (t.dp != 0 && t.pp * t.tp * t.dp != devices)
    c.fail("training.dp", "pp * tp * dp = " + std::to_string(t.pp * t.tp * t.dp) + " but the cluster has " +
                              std::to_string(devices) + " devices");
  const int stages = t.pp * t.vpp;
  const int layers = c.model.num_layers();
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
    c.fail("training.pp", "the model's " + std::to_string(layers) +
                              " layers cannot fill " + std::to_string(stages) + " stages");
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
  if (!root.IsMap()) throw ConfigError(name, 0, "", "expected a mapping with cluster, model and training");
  try {
    rd.expect_map(root, "", {"cluster", "model", "training"});
    read_cluster(rd, root, c);
    read_model(rd, root, c);
    read_training(rd, root, c);
  } catch (const YAML::Exception& e) {  // a conversion yaml-cpp refused
    throw ConfigError(name, e.mark.line + 1, "", e.msg);
  }
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
  if (o.microbatches) c.training.microbatches = *o.microbatches, mark("training.microbatches");
  auto positive = [&](const std::optional<int>& v, const char* flag) {
    if (v && *v < 1) throw ConfigError(c.file, 0, flag, "must be at least 1");
  };
  positive(o.pp, "--pp");
  positive(o.vpp, "--vpp");
  positive(o.microbatches, "--microbatches");
  check_config(c);
}

}  // namespace bmpipe
