#include "experiment/config.hpp"
#include "io/read_file.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>

#include "experiment/config_fields.hpp"
#include "experiment/hf_config.hpp"
#include "experiment/suggest.hpp"

namespace bmpipe {

namespace {

// Input bytes reach messages (unknown keys, values, paths). Invalid UTF-8 and control
// characters become \xNN, so a message is always valid UTF-8 and one line, whatever the
// file held: a JSON writer or a terminal downstream gets nothing it can choke on.
std::string printable(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  const auto hex = [&out](unsigned char c) {
    constexpr char kDigits[] = "0123456789abcdef";
    out += "\\x";
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  };
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      if (c < 0x20 || c == 0x7f)
        hex(c);
      else
        out += static_cast<char>(c);
      ++i;
      continue;
    }
    // The well-formed sequences of Unicode 15, table 3-7: no overlong forms, no
    // surrogates, nothing above U+10FFFF.
    const std::size_t len = c >= 0xC2 && c <= 0xDF   ? 2
                            : c >= 0xE0 && c <= 0xEF ? 3
                            : c >= 0xF0 && c <= 0xF4 ? 4
                                                     : 0;
    bool ok = len > 0 && i + len <= s.size();
    if (ok) {
      const auto c1 = static_cast<unsigned char>(s[i + 1]);
      const unsigned char lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80;
      const unsigned char hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
      ok = c1 >= lo && c1 <= hi;
      for (std::size_t k = 2; ok && k < len; ++k)
        ok = (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80;
    }
    if (!ok) {
      hex(c);
      ++i;
      continue;
    }
    out.append(s.substr(i, len));
    i += len;
  }
  return out;
}

std::string what_of(const std::string& file, int line, const std::string& key,
                    const std::string& message) {
  return file + (line > 0 ? ":" + std::to_string(line) : std::string()) + ": " +
         (key.empty() ? std::string() : key + ": ") + message;
}

}  // namespace

ConfigError::ConfigError(std::string file, int line, std::string key, std::string message)
    : std::runtime_error(what_of(printable(file), line, printable(key), printable(message))),
      file_(printable(file)),
      line_(line),
      key_(printable(key)),
      message_(printable(message)) {}

int ModelConfig::num_layers() const {
  // A vision model's encoder blocks and projector are rows of the table before the LLM's.
  if (shape) return shape->num_layers + shape->vision.rows();
  std::int64_t n = 0;
  for (const auto& g : layers) n += g.count;
  // The reader caps the total far below; a Config built by hand saturates, so that
  // check_config can still report it.
  return static_cast<int>(std::min<std::int64_t>(n, std::numeric_limits<int>::max()));
}

LayerGroup LayerGroup::in_mode(Recompute mode) const {
  if (mode == Recompute::none) return *this;
  const std::optional<LayerModeCosts>& m = recompute[mode];
  if (!m)
    throw std::invalid_argument("layer group '" + name + "' has no " +
                                std::string(recompute_name(mode)) + " recompute costs");
  LayerGroup g = *this;
  g.recompute_ms = m->recompute_ms;
  g.activation_bytes = m->activation_bytes;
  g.weight_grad_retained_bytes = m->weight_grad_retained_bytes;
  return g;
}

void Config::fail(const std::string& key, const std::string& message) const {
  if (auto it = lines.find(key); it != lines.end()) {
    if (it->second == 0)  // set by a command-line override
      throw ConfigError(file, 0, key + " (from the command line)", message);
    throw ConfigError(file, it->second, key, message);
  }
  // A key left at its default: point at the section it belongs to.
  for (std::string k = key;;) {
    const auto cut = k.find_last_of(".[");
    if (cut == std::string::npos) break;
    k.resize(cut);
    if (auto it = lines.find(k); it != lines.end() && it->second > 0)
      throw ConfigError(file, it->second, key, message);
  }
  throw ConfigError(file, lines.empty() ? 0 : 1, key, message);
}

namespace {

using detail::Form;
using detail::read_fields;
using detail::Reader;

constexpr unsigned kAllForms = ~0u;
constexpr unsigned form_bit(Form f) {
  return static_cast<unsigned>(f);
}

// `preset`: the device preset's link, which makes the key and its fields optional.
void read_link(Reader& rd, const YAML::Node& cluster, const char* name, bool required,
               const LinkSpec* preset, LinkSpec& out) {
  if (preset) out = *preset;
  YAML::Node n = rd.child(cluster, "cluster", name, required && !preset);
  if (!n.IsDefined()) return;
  read_fields(rd, n, std::string("cluster.") + name, detail::kLinkFields, out,
              {.base = preset != nullptr, .forms = kAllForms, .refusal = ""});
}

void read_device(Reader& rd, const YAML::Node& cluster, Config& c) {
  const std::string key = "cluster.device";
  YAML::Node dev = rd.child(cluster, "cluster", "device", true);
  rd.expect_map(dev, key, detail::names_of(detail::kDeviceFields));
  // A preset fills every value; any key written beside it wins.
  const HardwareSpec* preset = nullptr;
  if (YAML::Node p = rd.child(dev, key, "preset", false); p.IsDefined()) {
    const std::string name = rd.text(p, key + ".preset");
    preset = find_hardware_preset(name);
    if (!preset)
      rd.fail(p, key + ".preset",
              "unknown hardware preset " + Reader::shown(p) +
                  did_you_mean(name, split_names(hardware_preset_names())) +
                  " (known: " + hardware_preset_names() + ")");
  }
  HardwareSpec hw = preset ? *preset : HardwareSpec{};
  if (!preset) hw.name = "device";
  // Compute figures are only needed by the analytic model, so optional unless started.
  const bool compute =
      preset || Reader::present(dev, "peak_tflops") || Reader::present(dev, "hbm_GBps");
  read_fields(rd, dev, key, detail::kDeviceFields, hw,
              {.base = preset != nullptr,
               .forms = compute ? kAllForms : 0u,
               .refusal = "needs the device's compute figures: give preset (known: " +
                          hardware_preset_names() + ") or peak_tflops and hbm_GBps"});
  c.device.name = hw.name;
  c.device.memory_GiB = hw.memory_GiB;
  c.device.reserved_GiB = hw.reserved_GiB;
  c.device.allocator_overhead = hw.allocator_overhead;
  if (compute) c.device.hardware = hw;
}

void read_cluster(Reader& rd, const YAML::Node& root, Config& c) {
  YAML::Node n = rd.child(root, "", "cluster", true);
  rd.expect_map(n, "cluster", detail::names_of(detail::kClusterFields));
  read_device(rd, n, c);
  // The device preset, if any, knows the usual node size and the links.
  const HardwareSpec* preset = nullptr;
  if (Reader::present(n["device"], "preset"))
    preset = find_hardware_preset(n["device"]["preset"].Scalar());
  read_fields(rd, n, "cluster", detail::kClusterFields, c.cluster,
              {.base = preset != nullptr, .forms = kAllForms, .refusal = ""});
  if (preset && !Reader::present(n, "devices_per_node"))
    c.cluster.devices_per_node = preset->devices_per_node;
  // The scale-up domain holds whole nodes and divides the devices, so that every domain is
  // alike. A preset's domain (gb200's 72 GPUs) is capped at the cluster: 16 GB200 are one
  // domain of 16.
  const int dpn = c.cluster.devices_per_node;
  const std::int64_t devices = static_cast<std::int64_t>(c.cluster.nodes) * dpn;
  const auto domain_problem = [&](std::int64_t d) -> std::string {
    if (d < dpn)
      return "expected at least devices_per_node = " + std::to_string(dpn) +
             " devices (a domain holds whole nodes)";
    if (d % dpn != 0)
      return "expected a multiple of devices_per_node = " + std::to_string(dpn) +
             " (a domain holds whole nodes)";
    if (devices % d != 0)
      return "expected a divisor of nodes x devices_per_node = " + std::to_string(c.cluster.nodes) +
             " x " + std::to_string(dpn) + " = " + std::to_string(devices) + " devices";
    return "";
  };
  if (Reader::present(n, "scale_up_domain")) {  // 0: the node, as when absent
    const std::string problem =
        c.cluster.scale_up_domain == 0 ? "" : domain_problem(c.cluster.scale_up_domain);
    if (!problem.empty())
      rd.fail(n["scale_up_domain"], "cluster.scale_up_domain",
              problem + ", got " + std::to_string(c.cluster.scale_up_domain));
  } else if (preset && preset->scale_up_domain > dpn) {
    const std::int64_t d = std::min<std::int64_t>(preset->scale_up_domain, devices);
    const std::string problem = domain_problem(d);
    if (!problem.empty())
      rd.fail(n["device"], "cluster.scale_up_domain",
              "absent, so the " + preset->name + " preset's domain of " +
                  std::to_string(preset->scale_up_domain) + " devices (capped at the " +
                  std::to_string(devices) + " devices: " + std::to_string(d) + ") applies, but " +
                  problem + "; give cluster.scale_up_domain");
    c.cluster.scale_up_domain = static_cast<int>(d);
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

// model.moe over the shape read so far (a preset's, an HF config's, or the shape keys'):
// each key given overrides; on a dense base num_experts and top_k are required and make the
// model a mixture of experts.
void read_moe(Reader& rd, const YAML::Node& mo, ModelShape& m) {
  const std::string key = "model.moe";
  rd.expect_map(mo, key, detail::names_of(detail::kMoeFields));
  const bool base = m.is_moe();
  if (!base && !Reader::present(mo, "num_experts") && Reader::present(mo, "latent_size"))
    rd.fail(mo["latent_size"], key + ".latent_size",
            m.name +
                " has no experts: a latent projection of the routed experts' tokens needs a "
                "mixture of experts (give model.moe.num_experts and top_k)");
  if (!base && !Reader::present(mo, "num_experts"))
    rd.fail(mo, key,
            m.name +
                " has no experts: model.moe is for mixture-of-experts models (give "
                "model.moe.num_experts and top_k to make it one)");
  MoeShape& moe = m.moe;
  read_fields(rd, mo, key, detail::kMoeFields, moe,
              {.base = base, .forms = kAllForms, .refusal = ""});
  if (!base && !Reader::present(mo, "expert_ffn_hidden_size")) moe.expert_ffn = m.ffn_hidden_size;
  if (moe.top_k > moe.num_experts)
    rd.fail(Reader::present(mo, "top_k") ? mo["top_k"] : mo["num_experts"], key + ".top_k",
            std::to_string(moe.top_k) + " experts per token, but the model has " +
                std::to_string(moe.num_experts) + " (num_experts)");
  // Group-limited routing: both numbers or neither; the groups split the experts evenly,
  // and the groups a token picks hold at least its top_k experts (DeepSeek-V3's
  // MoEGate.forward; Megatron-Core's group_limited_topk asserts the same).
  const bool groups_given = Reader::present(mo, "router_groups");
  const bool group_k_given = Reader::present(mo, "router_group_top_k");
  if (groups_given || group_k_given) {
    const YAML::Node groups_at = groups_given ? mo["router_groups"] : mo["router_group_top_k"];
    const YAML::Node group_k_at = group_k_given ? mo["router_group_top_k"] : mo["router_groups"];
    if ((moe.router_groups > 0) != (moe.router_group_top_k > 0))
      rd.fail(moe.router_groups > 0 ? group_k_at : groups_at,
              key + (moe.router_groups > 0 ? ".router_group_top_k" : ".router_groups"),
              "group-limited routing takes both router_groups and router_group_top_k, but "
              "only " +
                  std::string(moe.router_groups > 0 ? "router_groups" : "router_group_top_k") +
                  " is set (0 for both turns it off)");
    if (moe.router_groups > 0 && moe.num_experts % moe.router_groups != 0)
      rd.fail(groups_at, key + ".router_groups",
              std::to_string(moe.router_groups) + " groups do not split the " +
                  std::to_string(moe.num_experts) +
                  " experts evenly (expected a divisor of num_experts)");
    if (moe.router_group_top_k > moe.router_groups)
      rd.fail(group_k_at, key + ".router_group_top_k",
              std::to_string(moe.router_group_top_k) + " groups a token, but there are " +
                  std::to_string(moe.router_groups) + " (expected at most router_groups)");
    if (moe.router_groups > 0) {
      const int per_group = moe.num_experts / moe.router_groups;
      if (static_cast<long long>(moe.router_group_top_k) * per_group < moe.top_k)
        rd.fail(group_k_at, key + ".router_group_top_k",
                std::to_string(moe.router_group_top_k) + " groups of " + std::to_string(per_group) +
                    " experts hold fewer than the top_k = " + std::to_string(moe.top_k) +
                    " experts a token picks");
    }
  }
  if (YAML::Node f = rd.child(mo, key, "layer_freq", false); f.IsDefined()) {
    // Megatron-LM's --moe-layer-freq (megatron/training/arguments.py, commit d98e8a64ddf3,
    // and TransformerConfig.moe_layer_freq): an int N makes layer i MoE when i % N == 0,
    // a list gives 1 (MoE) or 0 (dense) per layer. It replaces the base's pattern.
    const std::string fkey = key + ".layer_freq";
    moe.sparse_offset = 0;
    moe.dense_layers.clear();
    if (f.IsSequence()) {
      if (static_cast<int>(f.size()) != m.num_layers)
        rd.fail(f, fkey,
                "a list gives one 0 (dense) or 1 (MoE) per layer: expected " +
                    std::to_string(m.num_layers) + " entries (num_layers), got " +
                    std::to_string(f.size()));
      moe.sparse_step = 1;
      for (std::size_t i = 0; i < f.size(); ++i)
        if (rd.whole(f[i], fkey + "[" + std::to_string(i) + "]", detail::kMoeBit) == 0)
          moe.dense_layers.push_back(static_cast<int>(i));
    } else {
      moe.sparse_step = static_cast<int>(rd.whole(f, fkey, detail::kLayerFreq, INT_MAX));
    }
  }
  int sparse = 0;
  for (int i = 0; i < m.num_layers; ++i) sparse += m.is_moe_layer(i) ? 1 : 0;
  if (sparse == 0)
    rd.fail(mo, key,
            "no decoder layer of the " + std::to_string(m.num_layers) +
                " is MoE (first_dense_layers " + std::to_string(moe.first_dense_layers) +
                ", layer_freq): a model with experts needs at least one MoE layer");
}

// A hybrid model (model.hybrid_pattern) over the shape read so far: the pattern's symbols
// and length, experts for its E layers and model.mamba for its M layers, each refusal at the
// key that can fix it (check_hybrid says what).
void read_hybrid(Reader& rd, const YAML::Node& n, const ModelShape& m) {
  if (!m.is_hybrid()) {
    if (Reader::present(n, "mamba"))
      rd.fail(n["mamba"], "model.mamba",
              "is for a hybrid model's Mamba layers: give model.hybrid_pattern with M layers");
    if (Reader::present(n, "gdn"))
      rd.fail(n["gdn"], "model.gdn",
              "is for a hybrid model's Gated DeltaNet layers: give model.hybrid_pattern with G "
              "layers");
    return;
  }
  if (m.architecture != Architecture::llama)
    rd.fail(Reader::present(n, "architecture") ? n["architecture"] : n, "model.architecture",
            "a hybrid model's layers are costed llama-style (RMSNorm, Megatron-Core's fused "
            "kernels): expected llama");
  try {
    check_hybrid(m);
  } catch (const ShapeError& e) {
    const std::string what = e.what();
    const bool mamba =
        what.rfind("mamba.", 0) == 0 || what.find("model.mamba") != std::string::npos;
    const bool gdn = what.rfind("gdn.", 0) == 0 || what.find("model.gdn") != std::string::npos;
    const bool mtp = what.rfind("mtp_pattern", 0) == 0;
    const char* at = mamba && Reader::present(n, "mamba")       ? "mamba"
                     : gdn && Reader::present(n, "gdn")         ? "gdn"
                     : mtp && Reader::present(n, "mtp_pattern") ? "mtp_pattern"
                     : Reader::present(n, "hybrid_pattern")     ? "hybrid_pattern"
                     : Reader::present(n, "hf_config")          ? "hf_config"
                                                                : "preset";
    const YAML::Node node = Reader::present(n, at) ? n[at] : n;
    rd.fail(node, std::string("model.") + at, what);
  }
}

// A hybrid model's MTP block (model.mtp_pattern, mtp_shared) over the shape read so far:
// the pattern belongs to a hybrid model with MTP depths, and a hybrid model's depths need
// it (check_hybrid checks its symbols and the kinds' settings); each refusal at the key
// that can fix it.
void read_mtp(Reader& rd, const YAML::Node& n, const ModelShape& m) {
  const bool pattern_given = Reader::present(n, "mtp_pattern");
  if (pattern_given && !m.is_hybrid())
    rd.fail(n["mtp_pattern"], "model.mtp_pattern",
            "is a hybrid model's MTP block: give model.hybrid_pattern (DeepSeek-V3's MTP "
            "module needs only model.mtp_layers)");
  if (pattern_given && m.mtp_layers == 0)
    rd.fail(n["mtp_pattern"], "model.mtp_pattern",
            "'" + m.mtp_pattern +
                "' runs no depth: give model.mtp_layers (Megatron's --mtp-num-layers), at least "
                "1");
  if (Reader::present(n, "mtp_shared") && m.mtp_shared && m.mtp_layers == 0)
    rd.fail(n["mtp_shared"], "model.mtp_shared",
            "shares the MTP depths' weights, but the model has none: give model.mtp_layers");
  if (m.is_hybrid() && m.mtp_layers > 0 && m.mtp_pattern.empty())
    rd.fail(Reader::present(n, "mtp_layers") ? n["mtp_layers"] : n, "model.mtp_pattern",
            "a hybrid model's " + std::to_string(m.mtp_layers) +
                " MTP depths need the MTP block's layers: give model.mtp_pattern (\"*E\": an "
                "attention block and an MoE block, Nemotron 3 Super's)");
}

// model.vision over the shape read so far (an HF config's vision_config, or none), each
// refusal at the key that can fix it (check_vision names it).
void read_vision(Reader& rd, const YAML::Node& v, ModelShape& m) {
  const std::string key = "model.vision";
  const bool base = m.vision.enabled();
  rd.expect_map(v, key, detail::names_of(detail::kVisionFields));
  read_fields(rd, v, key, detail::kVisionFields, m.vision,
              {.base = base, .forms = kAllForms, .refusal = ""});
  if (YAML::Node f = rd.child(v, key, "full_attention_layers", false); f.IsDefined()) {
    const std::string fkey = key + ".full_attention_layers";
    if (!f.IsSequence())
      rd.fail(f, fkey, "expected a list of encoder layer indices (0-based), e.g. [7, 15]");
    m.vision.full_attention_layers.clear();
    for (std::size_t i = 0; i < f.size(); ++i)
      m.vision.full_attention_layers.push_back(static_cast<int>(
          rd.whole(f[i], fkey + "[" + std::to_string(i) + "]", detail::kLayers0, INT_MAX)));
  }
  try {
    check_vision(m);
  } catch (const ShapeError& e) {
    // "vision.<field>: ..." names the field at fault.
    const std::string what = e.what();
    const std::size_t colon = what.find(':');
    const std::string field = what.rfind("vision.", 0) == 0 && colon != std::string::npos
                                  ? what.substr(7, colon - 7)
                                  : std::string();
    const bool here = !field.empty() && Reader::present(v, field);
    rd.fail(here ? v[field] : v, here ? key + "." + field : key,
            colon != std::string::npos ? what.substr(colon + 2) : what);
  }
}

// model.mla over the shape read so far, as read_moe does.
void read_mla(Reader& rd, const YAML::Node& ml, ModelShape& m) {
  const std::string key = "model.mla";
  const bool base = m.is_mla();
  read_fields(rd, ml, key, detail::kMlaFields, m.mla,
              {.base = base, .forms = kAllForms, .refusal = ""});
  for (const char* rank : {"q_lora_rank", "kv_lora_rank"}) {
    const int v = std::string_view(rank) == "q_lora_rank" ? m.mla.q_lora_rank : m.mla.kv_lora_rank;
    if (v > m.hidden_size)
      rd.fail(Reader::present(ml, rank) ? ml[rank] : ml, key + "." + rank,
              std::to_string(v) + " is wider than hidden_size = " + std::to_string(m.hidden_size) +
                  ": the latent must compress the hidden state");
  }
}

// model.dsa over the shape read so far (an HF config's DSA, or none), after model.mla.
void read_dsa(Reader& rd, const YAML::Node& d, ModelShape& m) {
  const std::string key = "model.dsa";
  read_fields(rd, d, key, detail::kDsaFields, m.dsa,
              {.base = m.is_dsa(), .forms = kAllForms, .refusal = ""});
  if (!m.is_mla())
    rd.fail(d, key,
            "DeepSeek sparse attention is built on multi-latent attention (Megatron-Core runs "
            "DSAttention only under MLA): give model.mla, or an hf_config with kv_lora_rank");
  if (m.dsa.index_head_dim < m.mla.qk_rope_head_dim)
    rd.fail(Reader::present(d, "indexer_head_dim") ? d["indexer_head_dim"] : d,
            key + ".indexer_head_dim",
            std::to_string(m.dsa.index_head_dim) + " is narrower than model.mla's " +
                "qk_pos_emb_head_dim = " + std::to_string(m.mla.qk_rope_head_dim) +
                ": the indexer rotates the first qk_pos_emb_head_dim of each head (expected at "
                "least " +
                std::to_string(m.mla.qk_rope_head_dim) + ")");
}

// model.sliding_window / sliding_every / full_every / chunked_window over the shape read so
// far (an HF config's windows, or none): a window given without sliding_every or full_every
// windows every layer (Mistral's convention), either picker needs a window, the YAML's
// picker replaces an HF config's, and a window of 0 over an HF config's turns its windows
// off. Hybrid models' attention layers are costed full, so a window on one is refused rather
// than ignored.
void read_window(Reader& rd, const YAML::Node& n, ModelShape& m) {
  const bool every_given = Reader::present(n, "sliding_every");
  const bool full_given = Reader::present(n, "full_every");
  if (every_given && full_given && m.sliding_every > 0 && m.full_every > 0)
    rd.fail(n["full_every"], "model.full_every",
            "picks the windowed layers beside model.sliding_every; give one of the two");
  if (every_given && m.sliding_every > 0 && !full_given) m.full_every = 0;
  if (full_given && m.full_every > 0 && !every_given) m.sliding_every = 0;
  if (m.sliding_window == 0) {
    for (const char* key : {"sliding_every", "full_every"}) {
      const int v = std::string(key) == "full_every" ? m.full_every : m.sliding_every;
      if (Reader::present(n, key) && v > 0)
        rd.fail(n[key], std::string("model.") + key,
                std::to_string(v) +
                    " picks the windowed layers, but the model has no window: give "
                    "model.sliding_window (tokens)");
    }
    if (Reader::present(n, "chunked_window") && m.chunked_window)
      rd.fail(n["chunked_window"], "model.chunked_window",
              "true chunks the window, but the model has no window: give "
              "model.sliding_window (tokens per chunk)");
    m.sliding_every = 0;
    m.full_every = 0;
    m.chunked_window = false;
    return;
  }
  if (m.full_every == 1)
    rd.fail(full_given ? n["full_every"] : n, "model.full_every",
            "1 makes every layer global and windows none: expected 2 or more (Gemma 3: 6), "
            "or model.sliding_window: 0 for none");
  if (m.sliding_every == 0 && m.full_every == 0) {
    if (every_given)
      rd.fail(n["sliding_every"], "model.sliding_every",
              "0 windows no layer: expected 1 (every layer) or more, or model.sliding_window: "
              "0 for none");
    m.sliding_every = 1;
  }
  if (m.is_hybrid()) {
    const char* at = Reader::present(n, "sliding_window") ? "sliding_window" : "hybrid_pattern";
    rd.fail(Reader::present(n, at) ? n[at] : n, std::string("model.") + at,
            "sliding-window attention in a hybrid model's attention layers is not modelled "
            "(expected no sliding_window with hybrid_pattern)");
  }
}

// The analytic forms of model: preset, hf_config, or explicit shape keys (which also
// override a preset's or an HF config's values).
void read_shape(Reader& rd, const YAML::Node& n, Config& c) {
  const std::string key = "model";
  ModelShape m;
  const bool has_preset = Reader::present(n, "preset"), has_hf = Reader::present(n, "hf_config");
  if (has_preset && has_hf)
    rd.fail(n["hf_config"], "model.hf_config", "give either preset or hf_config, not both");
  if (has_preset) {
    const YAML::Node p = rd.child(n, key, "preset", true);
    const std::string name = rd.text(p, "model.preset");
    const ModelShape* found = find_model_preset(name);
    if (!found)
      rd.fail(p, "model.preset",
              "unknown model preset " + Reader::shown(p) +
                  did_you_mean(name, split_names(model_preset_names())) +
                  " (known: " + model_preset_names() + ")");
    m = *found;
  } else if (has_hf) {
    const YAML::Node h = rd.child(n, key, "hf_config", true);
    // Relative to the folder of the YAML file, so an experiment can ship with its model.
    std::filesystem::path path(rd.text(h, "model.hf_config"));
    if (path.is_relative()) path = std::filesystem::path(c.file).parent_path() / path;
    try {
      m = read_hf_config(path.string());
    } catch (const ShapeError& e) {
      rd.fail(h, "model.hf_config", e.what());
    }
    // The HF file did not pass through the field table: hold its values to the same ranges.
    for (const auto& f : detail::kModelFields)
      if (const auto* member = std::get_if<int ModelShape::*>(&f.slot))
        if (auto why = detail::out_of_range(f, m.**member))
          rd.fail(h, "model.hf_config",
                  path.string() + " gives " + std::string(f.name) + " = " +
                      std::to_string(m.**member) + ", which " + *why);
  }
  const bool base = has_preset || has_hf;
  if (!base) m.name = "model";
  read_fields(rd, n, key, detail::kModelFields, m,
              {.base = base, .forms = form_bit(Form::analytic), .refusal = ""});
  if (YAML::Node a = rd.child(n, key, "architecture", false); a.IsDefined())
    m.architecture = rd.text(a, "model.architecture", detail::kArchitectures) == "gpt"
                         ? Architecture::gpt
                         : Architecture::llama;
  if (!base && !Reader::present(n, "num_kv_heads")) m.num_kv_heads = m.num_attention_heads;
  read_window(rd, n, m);
  if (YAML::Node mo = rd.child(n, key, "moe", false); mo.IsDefined()) read_moe(rd, mo, m);
  if (YAML::Node ml = rd.child(n, key, "mla", false); ml.IsDefined()) read_mla(rd, ml, m);
  if (YAML::Node d = rd.child(n, key, "dsa", false); d.IsDefined()) read_dsa(rd, d, m);
  if (YAML::Node a = rd.child(n, key, "mlp_activation", false); a.IsDefined())
    m.mlp_activation = rd.text(a, "model.mlp_activation", detail::kMlpActivations) == "relu2"
                           ? MlpActivation::relu2
                           : MlpActivation::swiglu;
  if (YAML::Node ma = rd.child(n, key, "mamba", false); ma.IsDefined()) {
    const bool mamba_base = m.mamba.num_heads > 0;
    rd.expect_map(ma, "model.mamba", detail::names_of(detail::kMambaFields));
    read_fields(rd, ma, "model.mamba", detail::kMambaFields, m.mamba,
                {.base = mamba_base, .forms = kAllForms, .refusal = ""});
  }
  if (YAML::Node g = rd.child(n, key, "gdn", false); g.IsDefined()) {
    const bool gdn_base = m.gdn.key_heads > 0;
    rd.expect_map(g, "model.gdn", detail::names_of(detail::kGdnFields));
    read_fields(rd, g, "model.gdn", detail::kGdnFields, m.gdn,
                {.base = gdn_base, .forms = kAllForms, .refusal = ""});
  }
  if (YAML::Node v = rd.child(n, key, "vision", false); v.IsDefined())
    read_vision(rd, v, m);
  else if (m.vision.enabled())
    rd.fail(has_hf ? n["hf_config"] : n, "model.vision",
            "the model has a vision encoder: give model.vision with images_per_sample and "
            "image_tokens (the images each sample carries and the LLM tokens each gives)");
  read_mtp(rd, n, m);
  read_hybrid(rd, n, m);
  if (m.moe.latent_size > 0 && m.moe.latent_size >= m.hidden_size) {
    // Given here, or from the HF config under a hidden_size given here.
    const YAML::Node mo = n["moe"];
    const bool given = mo.IsDefined() && Reader::present(mo, "latent_size");
    rd.fail(given                               ? mo["latent_size"]
            : Reader::present(n, "hidden_size") ? n["hidden_size"]
                                                : n,
            given                               ? "model.moe.latent_size"
            : Reader::present(n, "hidden_size") ? "model.hidden_size"
                                                : "model",
            "latent_size = " + std::to_string(m.moe.latent_size) +
                " is not narrower than hidden_size = " + std::to_string(m.hidden_size) +
                ": the latent projection must compress the hidden state (expected at most " +
                std::to_string(m.hidden_size - 1) + ")");
  }
  if (m.is_moe() && m.architecture != Architecture::llama)
    rd.fail(Reader::present(n, "architecture") ? n["architecture"] : n["moe"], "model.architecture",
            "the mixture-of-experts layer is costed for llama only (RMSNorm, SwiGLU experts)");
  try {
    check_shape(m);
  } catch (const ShapeError& e) {
    rd.fail(n, "model", e.what());
  }
  // Multi-latent attention (read_hf_config's MlaShape) is costed by the cost model's
  // decoder layers (sim/cost/cost_model.cpp: q_a/q_b, kv_a/kv_b, latent norms, RoPE).
  c.model.name = m.name;
  c.model.shape = m;
}

// A group's `recompute` map: the modes other than none (the group's own keys are none).
void read_layer_modes(Reader& rd, const YAML::Node& g, const std::string& key, LayerGroup& lg) {
  const YAML::Node rc = rd.child(g, key, "recompute", false);
  if (!rc.IsDefined()) return;
  const std::string rkey = key + ".recompute";
  static constexpr std::array<std::string_view, kRecomputeModes - 1> kModeKeys = [] {
    std::array<std::string_view, kRecomputeModes - 1> names{};
    for (std::size_t i = 1; i < kRecomputeModes; ++i)
      names[i - 1] = recompute_name(kAllRecompute[i]);
    return names;
  }();
  if (rc.IsMap())
    for (const auto& kv : rc)
      if (kv.first.IsScalar() && kv.first.Scalar() == recompute_name(Recompute::none))
        rd.fail(kv.first, rkey + ".none",
                "the group's own keys (recompute_ms, activation_bytes, ...) are its none mode; "
                "this map holds only the others: " +
                    Reader::list(kModeKeys));
  rd.expect_map(rc, rkey, kModeKeys);
  for (std::size_t i = 1; i < kRecomputeModes; ++i) {
    const Recompute mode = kAllRecompute[i];
    const std::string name(recompute_name(mode));
    const YAML::Node node = rd.child(rc, rkey, name, false);
    if (!node.IsDefined()) continue;
    const std::string mkey = rkey + "." + name;
    LayerModeCosts costs;
    read_fields(rd, node, mkey, detail::kLayerModeFields, costs);
    if (costs.activation_bytes > lg.activation_bytes)
      rd.fail(node["activation_bytes"], mkey + ".activation_bytes",
              "cannot exceed the group's activation_bytes (" + std::to_string(lg.activation_bytes) +
                  "), what it keeps without recompute, got " +
                  std::to_string(costs.activation_bytes));
    if (costs.weight_grad_retained_bytes &&
        *costs.weight_grad_retained_bytes > costs.activation_bytes)
      rd.fail(node["weight_grad_retained_bytes"], mkey + ".weight_grad_retained_bytes",
              "cannot exceed this mode's activation_bytes (" +
                  std::to_string(costs.activation_bytes) + ")");
    lg.recompute[mode] = costs;
  }
}

void read_layers(Reader& rd, const YAML::Node& n, Config& c) {
  YAML::Node layers = rd.child(n, "model", "layers", true);
  if (!layers.IsSequence() || layers.size() == 0)
    rd.fail(layers, "model.layers", "expected a non-empty list of layer groups");
  std::int64_t total = 0;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const std::string key = "model.layers[" + std::to_string(i) + "]";
    const YAML::Node g = layers[i];
    LayerGroup lg;
    read_fields(rd, g, key, detail::kLayerFields, lg);
    if (lg.weight_grad_retained_bytes && *lg.weight_grad_retained_bytes > lg.activation_bytes)
      rd.fail(g["weight_grad_retained_bytes"], key + ".weight_grad_retained_bytes",
              "cannot exceed activation_bytes (" + std::to_string(lg.activation_bytes) + ")");
    // Each count is bounded, so the running sum cannot overflow before it is caught.
    total += lg.count;
    if (total > detail::kLayers.max)
      rd.fail(Reader::present(g, "count") ? g["count"] : g, key + ".count",
              "the layer groups up to here add up to " + std::to_string(total) +
                  " layers; a model has at most " + detail::format_number(detail::kLayers.max));
    read_layer_modes(rd, g, key, lg);
    c.model.layers.push_back(std::move(lg));
  }
}

void read_model(Reader& rd, const YAML::Node& root, Config& c) {
  YAML::Node n = rd.child(root, "", "model", true);
  rd.expect_map(n, "model", detail::names_of(detail::kModelFields));
  if (!Reader::present(n, "layers")) {
    bool analytic = false;
    for (const char* k : {"preset", "hf_config", "num_layers", "hidden_size"})
      analytic = analytic || Reader::present(n, k);
    if (!analytic)
      rd.fail(n, "model",
              "give measured layers (model.layers), a preset (known: " + model_preset_names() +
                  "), hf_config, or the shape keys (num_layers, hidden_size, ...)");
    read_shape(rd, n, c);
    return;
  }
  ModelShape named;
  read_fields(
      rd, n, "model", detail::kModelFields, named,
      {.base = false,
       .forms = form_bit(Form::measured),
       .refusal =
           "cannot be combined with model.layers (measured costs): use one form or the other"});
  c.model.name = named.name;
  read_layers(rd, n, c);
}

Recompute recompute_value(Reader& rd, const YAML::Node& v, const std::string& path) {
  if (!v.IsScalar()) rd.fail(v, path, "expected " + recompute_names(" or "));
  const auto r = parse_recompute(v.Scalar());
  if (!r)
    rd.fail(v, path,
            "unknown recompute mode " + Reader::shown(v) + " (expected " + recompute_names(" or ") +
                ")");
  rd.mark(v, path);
  return *r;
}

// {index: mode} for recompute.stages / recompute.layers. `what`: "stage" or "layer".
void read_recompute_map(Reader& rd, const YAML::Node& n, const std::string& path, const char* what,
                        std::map<int, Recompute>& out) {
  if (!n.IsMap())
    rd.fail(n, path, "expected a mapping of index: mode, e.g. {0: full, 3: selective}");
  std::map<int, int> seen;  // index -> line, to name both lines of a duplicate
  for (const auto& kv : n) {
    const int index = static_cast<int>(rd.whole(kv.first, path, detail::kCount0, INT_MAX));
    const std::string entry = path + "." + std::to_string(index);
    const int line = Reader::line_of(kv.first);
    // 3 and 03 are the same index: a duplicate yaml-cpp cannot see.
    if (auto [it, fresh] = seen.emplace(index, line); !fresh)
      rd.fail(kv.first, entry,
              std::string(what) + " " + std::to_string(index) + " is given twice, on lines " +
                  std::to_string(it->second) + " and " + std::to_string(line));
    out[index] = recompute_value(rd, kv.second, entry);
  }
}

void read_recompute(Reader& rd, const YAML::Node& rc, TrainingConfig& t) {
  const std::string key = "training.recompute";
  if (rc.IsScalar()) {
    t.recompute.global = recompute_value(rd, rc, key);
    return;
  }
  read_fields(rd, rc, key, detail::kRecomputeFields, t.recompute);
  if (YAML::Node d = rd.child(rc, key, "default", false); d.IsDefined())
    t.recompute.global = recompute_value(rd, d, key + ".default");
  if (YAML::Node s = rd.child(rc, key, "stages", false); s.IsDefined())
    read_recompute_map(rd, s, key + ".stages", "stage", t.recompute.stages);
  if (YAML::Node l = rd.child(rc, key, "layers", false); l.IsDefined())
    read_recompute_map(rd, l, key + ".layers", "layer", t.recompute.layers);
}

void read_training(Reader& rd, const YAML::Node& root, Config& c) {
  YAML::Node n = rd.child(root, "", "training", true);
  TrainingConfig& t = c.training;
  read_fields(rd, n, "training", detail::kTrainingFields, t,
              {.base = false,
               .forms = c.model.analytic() ? kAllForms : form_bit(Form::measured),
               .refusal = "applies only to an analytic model (model.preset, model.hf_config or "
                          "shape keys); measured layers carry their own costs"});
  t.microbatches_given = Reader::present(n, "microbatches");
  if (t.overlap_ms && *t.overlap_ms == 0) t.overlap_ms.reset();  // 0: use overlap_factor
  if (YAML::Node opt = rd.child(n, "training", "optimizer", false); opt.IsDefined()) {
    const std::string key = "training.optimizer";
    read_fields(rd, opt, key, detail::kOptimizerFields, t.optimizer);
    if (YAML::Node g = rd.child(opt, key, "grad_dtype", false); g.IsDefined())
      t.optimizer.grad_bytes =
          rd.text(g, key + ".grad_dtype", detail::kGradDtypes) == "fp32" ? 4 : 2;
  }
  if (t.fsdp) {
    // FSDP shards the parameters (ZeRO-3), or with Megatron-FSDP's optim_grads only the
    // gradients and optimizer state (ZeRO-2); it never leaves the gradients whole.
    YAML::Node opt = rd.child(n, "training", "optimizer", false);
    if (opt.IsDefined() && Reader::present(opt, "zero_stage")) {
      if (t.optimizer.zero_stage < 2)
        rd.fail(opt["zero_stage"], "training.optimizer.zero_stage",
                "is " + std::to_string(t.optimizer.zero_stage) +
                    " but training.fsdp is true: fsdp shards parameters (zero_stage 3) or at "
                    "least gradients (2); drop zero_stage or give 2 or 3");
    } else {
      t.optimizer.zero_stage = 3;
    }
  }
  if (YAML::Node g = rd.child(n, "training", "grad_accumulation", false); g.IsDefined()) {
    const std::string mode = rd.text(g, "training.grad_accumulation", detail::kGradAccumulations);
    t.grad_accumulation = mode == "overwrite" ? GradAccumulation::overwrite
                          : mode == "add"     ? GradAccumulation::add
                                              : GradAccumulation::fused;
  }
  if (YAML::Node rc = rd.child(n, "training", "recompute", false); rc.IsDefined())
    read_recompute(rd, rc, t);
  if (YAML::Node h = rd.child(n, "training", "cp_hierarchy", false); h.IsDefined()) {
    if (!h.IsSequence())
      rd.fail(h, "training.cp_hierarchy", "expected a list of sizes, [a2a ranks, ring ranks]");
    for (std::size_t i = 0; i < h.size(); ++i)
      t.cp_hierarchy.push_back(static_cast<int>(rd.whole(
          h[i], "training.cp_hierarchy[" + std::to_string(i) + "]", detail::kCount, INT_MAX)));
  }
  if (YAML::Node part = rd.child(n, "training", "partition", false); part.IsDefined()) {
    if (!part.IsSequence()) rd.fail(part, "training.partition", "expected a list of layer counts");
    for (std::size_t i = 0; i < part.size(); ++i)
      t.partition.push_back(static_cast<int>(rd.whole(
          part[i], "training.partition[" + std::to_string(i) + "]", detail::kCount0, INT_MAX)));
  }
}

// Overrides without the checks, which the callers run once afterwards.
void apply_only(Config& c, const Overrides& o) {
  auto positive = [&](const std::optional<int>& v, const char* flag) {
    if (v && *v < 1)
      throw ConfigError(c.file, 0, flag, "must be at least 1, got " + std::to_string(*v));
  };
  positive(o.pp, "--pp");
  positive(o.vpp, "--vpp");
  positive(o.microbatches, "--microbatches");
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
  if (o.limits) c.limits = *o.limits;
}

/// Writes the command line's key paths into the document (see Overrides::set).
void apply_sets(YAML::Node& root, const std::string& name, const Overrides& o) {
  for (const auto& [path, value] : o.set) {
    std::vector<std::string> keys;
    std::size_t from = 0;
    while (true) {
      const std::size_t dot = path.find('.', from);
      keys.push_back(path.substr(from, dot == std::string::npos ? std::string::npos : dot - from));
      if (dot == std::string::npos) break;
      from = dot + 1;
    }
    for (const std::string& k : keys)
      if (k.empty())
        throw ConfigError(name, 0, "--set " + path, "expected a key path like training.tp");
    YAML::Node parsed;
    try {
      parsed = YAML::Load(value);
    } catch (const YAML::Exception& e) {
      throw ConfigError(name, 0, "--set " + path, "malformed value '" + value + "': " + e.msg);
    }
    // Walk (and make) the mappings down to the last key. yaml-cpp nodes are handles, so
    // each step is kept in a vector rather than reassigned.
    std::vector<YAML::Node> chain{root};
    for (std::size_t i = 0; i + 1 < keys.size(); ++i) {
      YAML::Node next = chain.back()[keys[i]];
      if (!next.IsDefined() || next.IsNull()) {
        chain.back()[keys[i]] = YAML::Node(YAML::NodeType::Map);
        next = chain.back()[keys[i]];
      }
      if (!next.IsMap())
        throw ConfigError(
            name, 0, "--set " + path,
            keys[i] + " is not a mapping in the file, so it has no key " + keys[i + 1]);
      chain.push_back(next);
    }
    chain.back()[keys.back()] = parsed;
    // A batch given on the command line wins over the other form in the file.
    if (path == "training.global_batch_size" && root["training"].IsMap())
      root["training"].remove("microbatches");
  }
}

/// True when `key` is `path` or lies under it.
bool under(const std::string& key, const std::string& path) {
  return key == path || (key.size() > path.size() && key.compare(0, path.size(), path) == 0 &&
                         key[path.size()] == '.');
}

}  // namespace

Config parse_config(const std::string& yaml_text, const std::string& name, const Overrides& o) {
  Config c;
  c.file = name;
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    throw ConfigError(name, std::max(e.mark.line + 1, 1), "", "malformed YAML: " + e.msg);
  }
  if (!root.IsMap())
    throw ConfigError(name, 1, "",
                      std::string(root.IsNull() ? "the file is empty: " : "") +
                          "expected a mapping with cluster, model and training");
  // A missing section is a fact about the whole file: line 1.
  for (const auto& f : detail::kRootFields)
    if (!Reader::present(root, f.name))
      throw ConfigError(name, 1, std::string(f.name),
                        "missing required section (" + std::string(f.help) + ")");
  apply_sets(root, name, o);
  Reader rd(c);
  try {
    read_fields(rd, root, "", detail::kRootFields, c);
    read_cluster(rd, root, c);
    read_model(rd, root, c);
    read_training(rd, root, c);
  } catch (const YAML::Exception& e) {  // a conversion yaml-cpp refused
    throw ConfigError(name, std::max(e.mark.line + 1, 1), "", e.msg);
  } catch (const ConfigError& e) {
    // A value from the command line has no line in the file: say where it came from.
    for (const auto& set : o.set)
      if (under(e.key(), set.first))
        throw ConfigError(name, 0, e.key() + " (from the command line)", e.message());
    throw;
  }
  for (const auto& set : o.set)
    for (auto& [key, line] : c.lines)
      if (under(key, set.first)) line = 0;
  apply_only(c, o);
  resolve_batch(c);
  check_config(c);
  return c;
}

Config load_config(const std::string& path, const Overrides& overrides) {
  // A config is a few KiB; a bound keeps a wrong path (a disk image, /dev/zero) harmless.
  std::string text;
  try {
    text = read_untrusted_file(path, std::size_t{16} << 20, "config");
  } catch (const ReadFileError& e) {
    throw ConfigError(path, 0, "", e.what());
  }
  return parse_config(text, path, overrides);
}

void apply_overrides(Config& c, const Overrides& o) {
  apply_only(c, o);
  resolve_batch(c);
  check_config(c);
}

}  // namespace bmpipe
