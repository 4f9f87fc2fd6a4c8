#include "frameworks/common/import_common.hpp"
#include "io/read_file.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <functional>
#include <sstream>

#include "experiment/experiment.hpp"
#include "experiment/layer_layout.hpp"
#include "experiment/suggest.hpp"
#include "schedules/registry.hpp"
#include "sim/cost/hardware.hpp"

namespace bmpipe {

namespace {

std::string what_of(const ConfigError& e, int column) {
  std::string out = e.file();
  if (e.line() > 0) {
    out += ":" + std::to_string(e.line());
    if (column > 0) out += ":" + std::to_string(column);
  }
  if (!e.key().empty()) out += (out.empty() ? "" : ": ") + e.key();
  return out + (out.empty() ? "" : ": ") + e.message();
}

/// One line of text for a comment: control characters (a newline would end the comment and
/// start YAML) become '?'.
std::string comment_text(std::string_view s) {
  std::string out;
  for (char c : s) out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? '?' : c;
  return out;
}

std::string quoted(const std::string& s) {
  YAML::Emitter e;
  e << YAML::DoubleQuoted << s;
  return e.c_str();
}

/// The shortest text that reads back as the same double.
std::string number(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

/// `lines` of the header, each cut to about 90 columns at a ", " boundary.
void wrap_list(std::ostringstream& out, const std::string& lead,
               const std::vector<std::string>& items) {
  std::string line = "# " + lead;
  for (std::size_t i = 0; i < items.size(); ++i) {
    const std::string item = comment_text(items[i]) + (i + 1 < items.size() ? "," : "");
    if (line.size() + 1 + item.size() > 92 && line.size() > 2 + lead.size()) {
      out << line << "\n";
      line = "#  ";
    }
    line += " " + item;
  }
  out << line << "\n";
}

/// Writes key: value lines with the origin of each key as a comment beside it.
class YamlOut {
 public:
  explicit YamlOut(const ImportedJob& job) : job_(job) {}

  void section(const std::string& name) { out_ << name << ":\n"; }
  /// `key` at `depth` (1 = under a top-level section) with path `path`.
  void value(int depth, const std::string& key, const std::string& text, const std::string& path) {
    const std::string indent(2 * depth, ' ');
    std::string line = indent + key + ": " + text;
    const std::string c = comment(path);
    // A value that spans lines or runs long gets its comment on the line above.
    if (!c.empty() && (line.size() > 60 || text.find('\n') != std::string::npos)) {
      out_ << indent << "# " << c << "\n" << line << "\n";
      return;
    }
    if (!c.empty()) {
      if (line.size() < 38) line.resize(38, ' ');
      line += "  # " + c;
    }
    out_ << line << "\n";
  }
  void raw(const std::string& text) { out_ << text; }
  /// `# key: value  (origin)`: a value the config leaves to bmpipe's default, shown.
  void commented(int depth, const std::string& key, const std::string& text,
                 const std::string& path, const std::string& why) {
    const std::string c = comment(path);
    out_ << std::string(2 * depth, ' ') << "# " << key << ": " << text
         << (c.empty() ? "" : " (" + c + ")") << ": " << why << "\n";
  }
  std::string str() const { return out_.str(); }

 private:
  std::string comment(const std::string& path) const {
    const auto it = job_.origin.find(path);
    if (it == job_.origin.end()) return {};
    const Origin& o = it->second;
    if (!o.why.empty()) return comment_text(o.why);
    std::string c = comment_text(o.key);
    if (o.line > 0 && o.column > 0)
      c += " (row " + std::to_string(o.line) + ", column " + std::to_string(o.column) + ")";
    else if (o.line > 0)
      c += " (line " + std::to_string(o.line) + ")";
    return c;
  }

  const ImportedJob& job_;
  std::ostringstream out_;
};

/// `modes` as training.recompute: one mode, or the most common as the default and the
/// others by layer, wrapped eight to a line.
std::string recompute_text(const std::vector<Recompute>& modes, int indent) {
  PerMode<int> count;
  for (Recompute r : modes) ++count[r];
  Recompute common = Recompute::none;
  for (Recompute r : kAllRecompute)
    if (count[r] > count[common]) common = r;
  if (count[common] == static_cast<int>(modes.size())) return std::string(recompute_name(common));
  std::string out = "{default: " + std::string(recompute_name(common)) + ", layers: {";
  int written = 0;
  for (std::size_t l = 0; l < modes.size(); ++l) {
    if (modes[l] == common) continue;
    if (written > 0) out += written % 8 == 0 ? ",\n" + std::string(indent, ' ') : ", ";
    out += std::to_string(l) + ": " + std::string(recompute_name(modes[l]));
    ++written;
  }
  return out + "}}";
}

std::string int_flow(const std::vector<int>& v) {
  std::string out = "[";
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out + "]";
}

std::string mode_costs(const LayerModeCosts& m) {
  std::string out = "{recompute_ms: " + number(m.recompute_ms) +
                    ", activation_bytes: " + std::to_string(m.activation_bytes);
  if (m.weight_grad_retained_bytes)
    out += ", weight_grad_retained_bytes: " + std::to_string(*m.weight_grad_retained_bytes);
  return out + "}";
}

/// model.moe of an MoE shape. Which layers are MoE is written in the shortest form that
/// gives the same layers: nothing (every layer), first_dense_layers k (the first k dense),
/// layer_freq N (i % N == 0), or layer_freq as a 0/1 list.
void write_moe(YamlOut& y, const ModelShape& m) {
  const MoeShape& moe = m.moe;
  y.raw("  moe:\n");
  y.value(2, "num_experts", std::to_string(moe.num_experts), "model.moe.num_experts");
  y.value(2, "top_k", std::to_string(moe.top_k), "model.moe.top_k");
  y.value(2, "expert_ffn_hidden_size", std::to_string(moe.expert_ffn),
          "model.moe.expert_ffn_hidden_size");
  if (moe.shared_ffn > 0)
    y.value(2, "shared_expert_ffn_hidden_size", std::to_string(moe.shared_ffn),
            "model.moe.shared_expert_ffn_hidden_size");
  std::vector<int> pattern;
  for (int i = 0; i < m.num_layers; ++i) pattern.push_back(m.is_moe_layer(i) ? 1 : 0);
  const auto first_moe = std::find(pattern.begin(), pattern.end(), 1);
  const bool dense_then_moe = std::find(first_moe, pattern.end(), 0) == pattern.end();
  const int every = [&] {
    for (int n = 1; n <= m.num_layers; ++n) {
      bool same = true;
      for (int i = 0; i < m.num_layers && same; ++i) same = pattern[i] == (i % n == 0 ? 1 : 0);
      if (same) return n;
    }
    return 0;
  }();
  // A hybrid model's MoE layers are the E of its pattern (model.hybrid_pattern): no key.
  const bool hybrid = m.is_hybrid();
  if (!hybrid && every > 1) {
    y.value(2, "layer_freq", std::to_string(every), "model.moe.layer_freq");
  } else if (!hybrid && every == 0 && dense_then_moe) {
    y.value(2, "first_dense_layers", std::to_string(first_moe - pattern.begin()),
            "model.moe.layer_freq");
  } else if (!hybrid && every == 0) {
    y.value(2, "layer_freq", int_flow(pattern), "model.moe.layer_freq");
  }
  if (moe.load_imbalance != 1.0)
    y.value(2, "load_imbalance", number(moe.load_imbalance), "model.moe.load_imbalance");
  if (moe.latent_size > 0)
    y.value(2, "latent_size", std::to_string(moe.latent_size), "model.moe.latent_size");
  if (moe.router_groups > 0) {
    y.value(2, "router_groups", std::to_string(moe.router_groups), "model.moe.router_groups");
    y.value(2, "router_group_top_k", std::to_string(moe.router_group_top_k),
            "model.moe.router_group_top_k");
  }
}

/// `cluster_yaml` with cluster.device.memory_GiB set to `GiB`, its origin beside it.
std::string with_device_memory(const std::string& cluster_yaml, double GiB,
                               const ImportedJob& job) {
  YAML::Node root = YAML::Load(cluster_yaml);
  root["cluster"]["device"]["memory_GiB"] = GiB;
  YAML::Emitter e;
  e << root;
  std::string text = std::string(e.c_str()) + "\n";
  // The emitter writes the device's keys four spaces in: the comment goes on that line.
  const std::string line = "\n    memory_GiB: ";
  const auto it = job.origin.find("cluster.device.memory_GiB");
  if (const std::size_t at = text.find(line); at != std::string::npos && it != job.origin.end()) {
    const std::size_t end = text.find('\n', at + 1);
    const Origin& o = it->second;
    text.insert(end, "  # " + comment_text(o.key) +
                         (o.line > 0 ? " (line " + std::to_string(o.line) + ")" : "") +
                         (o.why.empty() ? "" : ": " + comment_text(o.why)));
  }
  return text;
}

/// The origin of `key` or of its nearest parent ("a.b[2].c" -> "a.b[2]" -> "a.b" -> "a").
const Origin* origin_of(const ImportedJob& job, std::string key) {
  while (true) {
    if (auto it = job.origin.find(key); it != job.origin.end()) return &it->second;
    const auto cut = key.find_last_of(".[");
    if (cut == std::string::npos) return nullptr;
    key.resize(cut);
  }
}

}  // namespace

ImportError::ImportError(std::string file, int line, int column, std::string key,
                         std::string message)
    : ConfigError(std::move(file), line, std::move(key), std::move(message)), column_(column) {
  what_ = what_of(*this, column_);
}

// ---- the vocabulary ------------------------------------------------------------------------

Vocabulary::Vocabulary(std::string_view text, std::string_view source) {
  int line = 0;
  std::size_t columns = 0;  // the first row's, which every row has
  auto bad = [&](const std::string& why) {
    throw std::logic_error(std::string(source) + ":" + std::to_string(line) + ": " + why);
  };
  for (std::size_t pos = 0; pos < text.size();) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view row = text.substr(pos, end - pos);
    pos = end + 1;
    ++line;
    if (!row.empty() && row.back() == '\r') row.remove_suffix(1);
    if (row.empty() || row.front() == '#') continue;
    std::vector<std::string_view> cells;
    for (std::size_t from = 0;;) {
      const std::size_t tab = row.find('\t', from);
      cells.push_back(row.substr(from, tab == std::string_view::npos ? row.npos : tab - from));
      if (tab == std::string_view::npos) break;
      from = tab + 1;
    }
    if (cells.size() != 4 && cells.size() != 5)
      bad("expected 4 or 5 tab-separated columns, got " + std::to_string(cells.size()));
    if (columns == 0) columns = cells.size();
    if (cells.size() != columns)
      bad("expected " + std::to_string(columns) + " columns, as in the first row, got " +
          std::to_string(cells.size()));
    VocabularyEntry e;
    e.name = std::string(cells[0]);
    if (e.name.empty() || e.name == "-") bad("a row without a name");
    if (cells[1] == "modelled")
      e.treatment = Treatment::modelled;
    else if (cells[1] == "inert")
      e.treatment = Treatment::inert;
    else if (cells[1] == "unmodelled")
      e.treatment = Treatment::unmodelled;
    else if (cells[1] == "obsolete")
      e.treatment = Treatment::obsolete;
    else
      bad("unknown class '" + std::string(cells[1]) + "'");
    if (cells[2] != "-") e.harmless = std::string(cells[2]);
    if (cells[3] != "-") e.reason = std::string(cells[3]);
    if (cells.size() == 5) {
      const std::string_view v = cells[4];
      int n = -1;
      const auto r = std::from_chars(v.data(), v.data() + v.size(), n);
      if (v == "+")
        e.values = std::pair{1, -1};
      else if (v == "*")
        e.values = std::pair{0, -1};
      else if (v == "?")
        e.values = std::pair{0, 1};
      else if (!v.empty() && r.ec == std::errc() && r.ptr == v.data() + v.size() && n >= 0)
        e.values = std::pair{n, n};
      else
        bad(e.name + ": VALUES must be a count, '+', '*' or '?', got '" + std::string(v) + "'");
    }
    const bool needs_reason =
        e.treatment == Treatment::unmodelled || e.treatment == Treatment::obsolete;
    if (needs_reason == e.reason.empty())
      bad(e.name + ": a reason goes with unmodelled and obsolete rows only");
    if (e.harmless && e.treatment != Treatment::unmodelled)
      bad(e.name + ": a harmless value goes with unmodelled rows only");
    if (!index_.emplace(e.name, entries_.size()).second) bad(e.name + " is listed twice");
    names_.push_back(e.name);
    entries_.push_back(std::move(e));
  }
}

bool VocabularyEntry::harmless_value(std::string_view value) const {
  if (!harmless) return false;
  // A number matches by value ("0." is "0"), anything else by its text.
  auto number = [](std::string_view t) -> std::optional<double> {
    double v = 0;
    const auto r = std::from_chars(t.data(), t.data() + t.size(), v);
    if (t.empty() || r.ec != std::errc() || r.ptr != t.data() + t.size()) return std::nullopt;
    return v;
  };
  const std::optional<double> given = number(value);
  std::string_view rest = *harmless;
  while (true) {
    const std::size_t bar = rest.find('|');
    const std::string_view h = rest.substr(0, bar);
    if (h == value) return true;
    if (const std::optional<double> n = number(h); n && given && *n == *given) return true;
    if (bar == std::string_view::npos) return false;
    rest.remove_prefix(bar + 1);
  }
}

const VocabularyEntry* Vocabulary::find(std::string_view name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &entries_[it->second];
}

std::string Vocabulary::suggestion(std::string_view name) const {
  return did_you_mean(name, names_);
}

ImportError unmodelled_error(const std::vector<Unmodelled>& u) {
  const Origin& o = u.front().origin;
  std::string message =
      "not modelled yet; the simulated job would differ from yours (" + u.front().reason + ")";
  if (u.size() > 1) {
    message += "; also not modelled:";
    for (std::size_t i = 1; i < u.size(); ++i)
      message += (i > 1 ? ", " : " ") + u[i].origin.key +
                 (u[i].origin.line > 0 ? " (line " + std::to_string(u[i].origin.line) + ")" : "");
  }
  message +=
      ". To import it anyway, with a warning, give --allow-unmodelled "
      "(Python: allow_unmodelled=True)";
  return ImportError(o.file, o.line, o.column, o.key, message);
}

std::string unmodelled_warning(const Unmodelled& u) {
  return u.given + " is not modelled; the simulated job differs from yours (" + u.reason + ")";
}

void ImportedJob::ignore(const std::string& what) {
  if (std::find(ignored.begin(), ignored.end(), what) == ignored.end()) ignored.push_back(what);
}

std::string shown_path(const std::string& path) {
  return path == "-" ? "<stdin>" : path;
}

std::string read_input(const std::string& path, std::size_t max_bytes) {
  try {
    return read_untrusted_file(path, max_bytes, "file to import");
  } catch (const ReadFileError& e) {
    throw ImportError(shown_path(path), 0, 0, "", e.what());
  }
}

// ---- the cluster ---------------------------------------------------------------------------

namespace {

// A stand-in model and training that any valid cluster accepts, so that the cluster file is
// checked by the config loader itself, its lines and messages unchanged.
constexpr const char* kClusterProbe =
    "model:\n"
    "  layers:\n"
    "    - {name: probe, forward_ms: 1, backward_input_ms: 1, backward_weight_ms: 1,\n"
    "       activation_bytes: 0, output_bytes: 0, param_bytes: 0}\n"
    "training:\n"
    "  pp: 1\n"
    "  microbatches: 1\n";

}  // namespace

ImportCluster cluster_from_file(const std::string& path) {
  const std::string text = read_input(path, 1u << 20);
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw ImportError(path, std::max(e.mark.line + 1, 1), 0, "", "malformed YAML: " + e.msg);
  }
  if (!root.IsMap()) throw ImportError(path, 1, 0, "", "expected a mapping with one key, cluster");
  int cluster_line = 1;
  for (const auto& kv : root) {
    const std::string k = kv.first.IsScalar() ? kv.first.Scalar() : std::string("?");
    if (k == "cluster") cluster_line = kv.first.Mark().line + 1;
    if (k != "cluster")
      throw ImportError(path, kv.first.Mark().line + 1, 0, k,
                        "unknown key: a cluster file holds only the cluster: section of a "
                        "bmpipe config");
  }
  if (!root["cluster"].IsDefined())
    throw ImportError(path, 1, 0, "cluster", "missing required section (the devices and links)");

  // Appended after the file's own text, the stand-in sections keep the file's line numbers
  // in every message about the cluster; a file written as one flow mapping is re-emitted.
  std::string probe = text;
  if (root.Style() == YAML::EmitterStyle::Flow) {
    YAML::Emitter e;
    e << YAML::BeginMap << YAML::Key << "cluster" << YAML::Value << root["cluster"] << YAML::EndMap;
    probe = e.c_str();
  }
  if (!probe.empty() && probe.back() != '\n') probe += '\n';
  probe += kClusterProbe;
  Config c;
  try {
    c = parse_config(probe, path);
  } catch (const ConfigError& e) {
    if (e.key().rfind("cluster", 0) == 0) throw;
    throw ImportError(path, 0, 0, "",
                      "could not be read as a cluster section (" + e.message() + ")");
  }

  ImportCluster out;
  YAML::Emitter e;
  e << YAML::BeginMap << YAML::Key << "cluster" << YAML::Value << root["cluster"] << YAML::EndMap;
  out.yaml = std::string(e.c_str()) + "\n";
  out.devices = static_cast<long long>(c.cluster.nodes) * c.cluster.devices_per_node;
  out.has_compute = c.device.hardware.has_value();
  out.memory_GiB = c.device.memory_GiB;
  out.description = "cluster from " + path + " (" + std::to_string(c.cluster.nodes) + " x " +
                    std::to_string(c.cluster.devices_per_node) + " " + c.device.name + ")";
  out.origin = Origin{path, cluster_line, 0, "cluster", ""};
  return out;
}

ImportCluster cluster_from_preset(const std::string& name, long long devices) {
  const HardwareSpec* hw = find_hardware_preset(name);
  if (!hw)
    throw ImportError(
        "", 0, 0, "--preset",
        "unknown hardware preset '" + name + "' (known: " + hardware_preset_names() + ")");
  if (devices < 1)
    throw ImportError("", 0, 0, "--devices", "must be at least 1, got " + std::to_string(devices));
  const long long per_node = hw->devices_per_node;
  long long nodes = 1, dpn = devices;
  ImportCluster out;
  if (devices > per_node) {
    // Devices that are not whole nodes: the nodes that hold them, the rest idle
    // (training.devices).
    nodes = (devices + per_node - 1) / per_node;
    dpn = per_node;
    if (devices % per_node != 0) out.job_devices = devices;
  }
  out.yaml = "cluster:\n  nodes: " + std::to_string(nodes) +
             "\n  devices_per_node: " + std::to_string(dpn) + "\n  device:\n    preset: " + name +
             "\n";
  out.devices = nodes * dpn;
  out.has_compute = true;
  out.memory_GiB = hw->memory_GiB;
  out.description = std::to_string(devices) + " " + name + " devices (--preset " + name +
                    " --devices " + std::to_string(devices) + ")";
  if (out.job_devices)
    out.description += " on " + std::to_string(nodes) + " nodes of " + std::to_string(dpn) + ", " +
                       std::to_string(nodes * dpn - devices) + " idle";
  out.origin = Origin{"", 0, 0, "--devices", ""};
  return out;
}

// ---- the YAML ------------------------------------------------------------------------------

std::string imported_yaml(const ImportedJob& job, const ImportCluster& cluster,
                          const std::string& out_name, std::span<const FrameworkRule> rules) {
  const std::string source = shown_path(job.source);
  if (job.shape && !cluster.has_compute)
    throw ImportError(cluster.origin.file, cluster.origin.line, 0, "cluster.device",
                      "the imported model is analytic (the cost model derives its layer costs), "
                      "which needs the device's compute figures: give cluster.device.preset, or "
                      "peak_tflops and hbm_GBps");

  std::ostringstream head;
  head << "# Imported by bmpipe from " << comment_text(source) << " (" << job.framework << ").\n";
  head << "# Cluster: " << comment_text(cluster.description) << ".\n";
  head << "# Beside each value, the flag or key it came from.\n";
  for (const std::string& n : job.notes) head << "# Note: " << comment_text(n) << "\n";
  for (const Unmodelled& u : job.unmodelled)
    head << "# Warning: " << comment_text(unmodelled_warning(u)) << "\n";
  // A cap on the device's memory counts when it is below the device's own.
  const bool capped = job.device_memory_GiB && *job.device_memory_GiB < cluster.memory_GiB;
  if (job.device_memory_GiB && !capped) {
    const auto it = job.origin.find("cluster.device.memory_GiB");
    head << "# Note: " << (it == job.origin.end() ? "the memory cap" : comment_text(it->second.key))
         << " (" << number(*job.device_memory_GiB) << " GiB) is not below the device's "
         << number(cluster.memory_GiB) << " GiB, which stays the limit.\n";
  }
  if (!job.ignored.empty()) wrap_list(head, "Not modelled (ignored):", job.ignored);

  YamlOut y(job);
  y.raw(head.str());
  y.raw(capped ? with_device_memory(cluster.yaml, *job.device_memory_GiB, job) : cluster.yaml);

  y.section("model");
  y.value(1, "name", quoted(job.model_name), "model.name");
  if (job.shape) {
    const ModelShape& m = *job.shape;
    y.value(1, "architecture", to_string(m.architecture), "model.architecture");
    y.value(1, "num_layers", std::to_string(m.num_layers), "model.num_layers");
    y.value(1, "hidden_size", std::to_string(m.hidden_size), "model.hidden_size");
    y.value(1, "num_attention_heads", std::to_string(m.num_attention_heads),
            "model.num_attention_heads");
    y.value(1, "num_kv_heads", std::to_string(m.num_kv_heads), "model.num_kv_heads");
    if (m.explicit_head_dim > 0)
      y.value(1, "head_dim", std::to_string(m.explicit_head_dim), "model.head_dim");
    y.value(1, "ffn_hidden_size", std::to_string(m.ffn_hidden_size), "model.ffn_hidden_size");
    if (m.mlp_activation != MlpActivation::swiglu)
      y.value(1, "mlp_activation", "relu2", "model.mlp_activation");
    if (!m.rotary) y.value(1, "rotary", "false", "model.rotary");
    y.value(1, "vocab_size", std::to_string(m.vocab_size), "model.vocab_size");
    y.value(1, "tied_embeddings", m.tied_embeddings ? "true" : "false", "model.tied_embeddings");
    if (job.flash_attention)
      y.value(1, "flash_attention", *job.flash_attention ? "true" : "false",
              "model.flash_attention");
    if (job.dropout) y.value(1, "dropout", *job.dropout ? "true" : "false", "model.dropout");
    if (m.is_moe()) write_moe(y, m);
    if (m.is_mla()) {
      y.raw("  mla:\n");
      if (m.mla.q_lora_rank > 0)
        y.value(2, "q_lora_rank", std::to_string(m.mla.q_lora_rank), "model.mla.q_lora_rank");
      y.value(2, "kv_lora_rank", std::to_string(m.mla.kv_lora_rank), "model.mla.kv_lora_rank");
      y.value(2, "qk_head_dim", std::to_string(m.mla.qk_nope_head_dim), "model.mla.qk_head_dim");
      y.value(2, "qk_pos_emb_head_dim", std::to_string(m.mla.qk_rope_head_dim),
              "model.mla.qk_pos_emb_head_dim");
      y.value(2, "v_head_dim", std::to_string(m.mla.v_head_dim), "model.mla.v_head_dim");
    }
    if (m.is_dsa()) {
      y.raw("  dsa:\n");
      y.value(2, "indexer_n_heads", std::to_string(m.dsa.index_heads), "model.dsa.indexer_n_heads");
      y.value(2, "indexer_head_dim", std::to_string(m.dsa.index_head_dim),
              "model.dsa.indexer_head_dim");
      y.value(2, "indexer_topk", std::to_string(m.dsa.index_topk), "model.dsa.indexer_topk");
      y.value(2, "indexer_loss", m.dsa.indexer_loss ? "true" : "false", "model.dsa.indexer_loss");
    }
    if (m.has_windows()) {
      y.value(1, "sliding_window", std::to_string(m.sliding_window), "model.sliding_window");
      if (m.full_every > 0)
        y.value(1, "full_every", std::to_string(m.full_every), "model.full_every");
      else
        y.value(1, "sliding_every", std::to_string(m.sliding_every), "model.sliding_every");
      if (m.chunked_window) y.value(1, "chunked_window", "true", "model.chunked_window");
    }
    if (m.mtp_layers > 0)
      y.value(1, "mtp_layers", std::to_string(m.mtp_layers), "model.mtp_layers");
    if (m.is_hybrid()) {
      // Quoted: a pattern may start with '*', YAML's alias.
      y.value(1, "hybrid_pattern", quoted(m.hybrid_pattern), "model.hybrid_pattern");
      if (!m.mtp_pattern.empty())
        y.value(1, "mtp_pattern", quoted(m.mtp_pattern), "model.mtp_pattern");
      if (m.mtp_shared) y.value(1, "mtp_shared", "true", "model.mtp_shared");
      if (m.mamba.num_heads > 0) {
        const MambaShape& x = m.mamba;
        y.raw("  mamba:\n");
        y.value(2, "num_heads", std::to_string(x.num_heads), "model.mamba.num_heads");
        y.value(2, "head_dim", std::to_string(x.head_dim), "model.mamba.head_dim");
        y.value(2, "state_dim", std::to_string(x.state_dim), "model.mamba.state_dim");
        y.value(2, "groups", std::to_string(x.groups), "model.mamba.groups");
        y.value(2, "conv_kernel", std::to_string(x.conv_kernel), "model.mamba.conv_kernel");
        y.value(2, "chunk_size", std::to_string(x.chunk_size), "model.mamba.chunk_size");
      }
    }
  } else {
    y.raw("  layers:\n");
    for (std::size_t i = 0; i < job.layers.size(); ++i) {
      const LayerGroup& g = job.layers[i];
      const std::string p = "model.layers[" + std::to_string(i) + "]";
      y.raw("    - name: " + quoted(g.name) + "\n");
      y.value(3, "count", std::to_string(g.count), p + ".count");
      y.value(3, "forward_ms", number(g.forward_ms), p + ".forward_ms");
      y.value(3, "backward_input_ms", number(g.backward_input_ms), p + ".backward_input_ms");
      y.value(3, "backward_weight_ms", number(g.backward_weight_ms), p + ".backward_weight_ms");
      if (g.recompute_ms != 0)
        y.value(3, "recompute_ms", number(g.recompute_ms), p + ".recompute_ms");
      y.value(3, "activation_bytes", std::to_string(g.activation_bytes), p + ".activation_bytes");
      if (g.weight_grad_retained_bytes)
        y.value(3, "weight_grad_retained_bytes", std::to_string(*g.weight_grad_retained_bytes),
                p + ".weight_grad_retained_bytes");
      y.value(3, "output_bytes", std::to_string(g.output_bytes), p + ".output_bytes");
      y.value(3, "param_bytes", std::to_string(g.param_bytes), p + ".param_bytes");
      if (g.grad_bytes != 0)
        y.value(3, "grad_bytes", std::to_string(g.grad_bytes), p + ".grad_bytes");
      if (g.optimizer_bytes != 0)
        y.value(3, "optimizer_bytes", std::to_string(g.optimizer_bytes), p + ".optimizer_bytes");
      if (std::any_of(kRecomputingModes.begin(), kRecomputingModes.end(),
                      [&](Recompute r) { return g.recompute[r].has_value(); })) {
        y.raw("      recompute:\n");
        for (Recompute r : kRecomputingModes)
          if (g.recompute[r])
            y.value(4, std::string(recompute_name(r)), mode_costs(*g.recompute[r]),
                    p + ".recompute." + std::string(recompute_name(r)));
      }
    }
  }

  y.section("training");
  y.value(1, "schedule", job.schedule, "training.schedule");
  y.value(1, "pp", std::to_string(job.pp), "training.pp");
  y.value(1, "vpp", std::to_string(job.vpp), "training.vpp");
  y.value(1, "tp", std::to_string(job.tp), "training.tp");
  if (job.dp) y.value(1, "dp", std::to_string(*job.dp), "training.dp");
  if (job.devices) y.value(1, "devices", std::to_string(*job.devices), "training.devices");
  if (job.ep) y.value(1, "ep", std::to_string(*job.ep), "training.ep");
  if (job.etp) y.value(1, "etp", std::to_string(*job.etp), "training.etp");
  if (job.cp) y.value(1, "cp", std::to_string(*job.cp), "training.cp");
  if (job.cp_comm_type) y.value(1, "cp_comm_type", *job.cp_comm_type, "training.cp_comm_type");
  if (!job.cp_hierarchy.empty()) {
    std::string sizes;
    for (int n : job.cp_hierarchy)
      sizes.append(sizes.empty() ? "[" : ", ").append(std::to_string(n));
    y.value(1, "cp_hierarchy", sizes + "]", "training.cp_hierarchy");
  }
  if (job.microbatches)
    y.value(1, "microbatches", std::to_string(*job.microbatches), "training.microbatches");
  if (job.seq_length)
    y.value(1, "seq_length", std::to_string(*job.seq_length), "training.seq_length");
  if (job.micro_batch_size)
    y.value(1, "micro_batch_size", std::to_string(*job.micro_batch_size),
            "training.micro_batch_size");
  if (job.global_batch_size)
    y.value(1, "global_batch_size", std::to_string(*job.global_batch_size),
            "training.global_batch_size");
  if (job.dtype) y.value(1, "dtype", *job.dtype, "training.dtype");
  if (job.kernels) y.value(1, "kernels", *job.kernels, "training.kernels");
  if (job.sequence_parallel)
    y.value(1, "sequence_parallel", *job.sequence_parallel ? "true" : "false",
            "training.sequence_parallel");
  if (job.tp_comm_overlap)
    y.value(1, "tp_comm_overlap", *job.tp_comm_overlap ? "true" : "false",
            "training.tp_comm_overlap");
  if (job.fsdp) y.value(1, "fsdp", *job.fsdp ? "true" : "false", "training.fsdp");
  if (job.moe_overlap)
    y.value(1, "moe_overlap", *job.moe_overlap ? "true" : "false", "training.moe_overlap");
  if (job.moe_dispatcher)
    y.value(1, "moe_dispatcher", *job.moe_dispatcher, "training.moe_dispatcher");
  if (job.moe_capacity_factor)
    y.value(1, "moe_capacity_factor", number(*job.moe_capacity_factor),
            "training.moe_capacity_factor");
  if (job.vocab_parallel)
    y.value(1, "vocab_parallel", *job.vocab_parallel ? "true" : "false", "training.vocab_parallel");
  if (job.fp8) y.value(1, "fp8", *job.fp8, "training.fp8");
  if (job.fp8_recipe) y.value(1, "fp8_recipe", *job.fp8_recipe, "training.fp8_recipe");
  if (job.fp8_param_gather)
    y.value(1, "fp8_param_gather", *job.fp8_param_gather ? "true" : "false",
            "training.fp8_param_gather");
  if (job.cuda_graphs) y.value(1, "cuda_graphs", *job.cuda_graphs, "training.cuda_graphs");
  if (job.recompute_modules)
    y.value(1, "recompute_modules", *job.recompute_modules, "training.recompute_modules");
  if (job.offload_modules)
    y.value(1, "offload_modules", *job.offload_modules, "training.offload_modules");
  if (job.offload_layers)
    y.value(1, "offload_layers", std::to_string(*job.offload_layers), "training.offload_layers");
  if (job.shard_copies && *job.shard_copies > 1) {
    // dp x cp: the dp given times cp, or the devices over pp x tp (dp then counts cp's).
    const long long group = job.dp ? static_cast<long long>(*job.dp) * job.cp.value_or(1)
                                   : cluster.devices / (static_cast<long long>(job.pp) * job.tp);
    if (group % *job.shard_copies != 0) {
      const Origin* o = origin_of(job, "training.fsdp_shard_group");
      throw ImportError(
          o ? o->file : "", o ? o->line : 0, o ? o->column : 0,
          o ? o->key : "training.fsdp_shard_group",
          std::to_string(*job.shard_copies) +
              " copies of the sharded state do not divide dp x cp = " + std::to_string(group) +
              " (Megatron-LM: \"Data parallel size should be divisible by partial "
              "DistOpt shard factor\")");
    }
    y.value(1, "fsdp_shard_group", std::to_string(group / *job.shard_copies),
            "training.fsdp_shard_group");
  }
  if (job.fsdp_reshard_after_forward)
    y.value(1, "fsdp_reshard_after_forward", *job.fsdp_reshard_after_forward ? "true" : "false",
            "training.fsdp_reshard_after_forward");
  if (job.fsdp_all_reduce_every_microbatch)
    y.value(1, "fsdp_all_reduce_every_microbatch",
            *job.fsdp_all_reduce_every_microbatch ? "true" : "false",
            "training.fsdp_all_reduce_every_microbatch");
  if (job.zero_stage || job.grad_dtype || job.overlap_grad_reduce || job.overlap_param_gather ||
      job.optimizer_offload_fraction) {
    y.raw("  optimizer:\n");
    if (job.zero_stage)
      y.value(2, "zero_stage", std::to_string(*job.zero_stage), "training.optimizer.zero_stage");
    if (job.grad_dtype) y.value(2, "grad_dtype", *job.grad_dtype, "training.optimizer.grad_dtype");
    if (job.overlap_grad_reduce)
      y.value(2, "overlap_grad_reduce", *job.overlap_grad_reduce ? "true" : "false",
              "training.optimizer.overlap_grad_reduce");
    if (job.overlap_param_gather)
      y.value(2, "overlap_param_gather", *job.overlap_param_gather ? "true" : "false",
              "training.optimizer.overlap_param_gather");
    if (job.optimizer_offload_fraction)
      y.value(2, "offload_fraction", number(*job.optimizer_offload_fraction),
              "training.optimizer.offload_fraction");
  }
  // An even split is bmpipe's default one. Left out, it lets a schedule with another stage
  // count (`compare`, `plan --schedule auto`) split the layers its own way.
  const bool even =
      !job.partition.empty() && std::adjacent_find(job.partition.begin(), job.partition.end(),
                                                   std::not_equal_to<>()) == job.partition.end();
  // A layout with a stage of no decoder layers, or MTP layers before the last stage, places
  // every layer itself (separate_end_layout): it is the partition.
  const bool layout_places =
      job.megatron_layout &&
      !folded_layout_mismatch(parse_layer_layout(*job.megatron_layout)).empty();
  if (layout_places)
    y.commented(1, "partition", int_flow(job.partition), "training.partition",
                "decoder layers per stage; training.megatron_layout places every layer");
  else if (even)
    y.commented(1, "partition", int_flow(job.partition), "training.partition",
                "bmpipe's default too, so left to it");
  else if (!job.partition.empty())
    y.value(1, "partition", int_flow(job.partition), "training.partition");
  // The layout as given, for `bmpipe plan`'s megatron-layout baseline.
  if (job.megatron_layout)
    y.value(1, "megatron_layout", quoted(*job.megatron_layout), "training.megatron_layout");
  if (!job.recompute.empty())
    y.value(1, "recompute", recompute_text(job.recompute, 6), "training.recompute");
  const std::string text = y.str();

  // The config must run as `bmpipe simulate` runs it: loaded (parse_config), its
  // experiment built (prepare: the cost model's checks) and its schedule's rules met
  // (check_params: the micro-batches and stages the schedule takes). What any of them
  // refuses is the user's value, so it is reported against the user's flag or key and line,
  // never against a line of this YAML, which the user never wrote.
  auto refuse = [&](const std::string& key, const std::string& message,
                    const std::string& also) -> ImportError {
    // A cluster key is the cluster's, unless the job set it (the device memory).
    const Origin* o = key.rfind("cluster", 0) == 0 && !job.origin.count(key) ? &cluster.origin
                                                                             : origin_of(job, key);
    if (!o)
      return ImportError(
          source, 0, 0, "",
          "the imported config does not run: " + message + " (bmpipe's " + key + ")" + also);
    return ImportError(o->file, o->line, o->column, o->key,
                       message + " (bmpipe's " + key + ")" + also);
  };
  try {
    const Config c = parse_config(text, out_name);
    // The framework's own rules, beside the loader's (Megatron-LM's, in check_config).
    apply_rules(rules, c);
    const ScheduleInfo& info = require_schedule(c, c.training.schedule, "training.schedule");
    try {
      check_params(info,
                   ScheduleParams{c.training.pp, c.training.microbatches, c.training.vpp, {}, {}});
    } catch (const ScheduleError& e) {
      // The schedule's rules are about the micro-batches, pp and vpp together: the error
      // names the value it is about, and the others' origins follow.
      const std::string msg = e.what();
      const bool about_vpp = msg.find("vpp") != std::string::npos;
      std::string first = about_vpp ? "training.vpp" : "training.microbatches";
      // Megatron-LM's micro-batches are the global batch's: --global-batch-size.
      if (!job.origin.count(first) && job.origin.count("training.global_batch_size"))
        first = "training.global_batch_size";
      std::string also;
      for (const char* k : {"training.pp", "training.vpp", "training.schedule"}) {
        const Origin* o = origin_of(job, k);
        if (!o || k == first || o->key.empty()) continue;
        also += (also.empty() ? "; from your " : ", ") + comment_text(o->key) +
                (o->line > 0 ? " (line " + std::to_string(o->line) + ")" : "") + " for " +
                std::string(k).substr(9);
      }
      throw refuse(first, msg, also + "; `bmpipe simulate` would refuse the config");
    }
    prepare(c);
  } catch (const ImportError&) {
    throw;
  } catch (const ConfigError& e) {
    throw refuse(e.key(), e.message(), "");
  }
  return text;
}

std::string model_name_of(const std::string& path, const std::string& fallback) {
  if (path == "-") return fallback;
  const std::string stem = std::filesystem::path(path).stem().string();
  return stem.empty() ? fallback : stem;
}

}  // namespace bmpipe
