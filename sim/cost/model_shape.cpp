#include "sim/cost/model_shape.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

namespace bmpipe {

std::string to_string(Architecture a) {
  return a == Architecture::llama ? "llama" : "gpt";
}

long long ModelShape::layer_params() const {
  const long long h = hidden_size, f = ffn_hidden_size;
  const long long q = static_cast<long long>(num_attention_heads) * head_dim();
  const long long kv = static_cast<long long>(num_kv_heads) * head_dim();
  if (architecture == Architecture::llama)
    // q, o: h x q; k, v: h x kv; gate, up, down: h x f; two RMSNorm scales.
    return 2 * h * q + 2 * h * kv + 3 * h * f + 2 * h;
  // qkv with biases, o with bias, fc1/fc2 with biases, two LayerNorms (scale + bias).
  return (h * (q + 2 * kv) + q + 2 * kv) + (q * h + h) + (h * f + f) + (f * h + h) + 4 * h;
}

long long ModelShape::embedding_params(int seq_length) const {
  long long p = static_cast<long long>(vocab_size) * hidden_size;
  if (architecture == Architecture::gpt) p += static_cast<long long>(seq_length) * hidden_size;
  return p;
}

namespace {

ModelShape llama(const char* name, int layers, int h, int heads, int kv, int ffn, int vocab) {
  ModelShape m;
  m.name = name;
  m.architecture = Architecture::llama;
  m.num_layers = layers;
  m.hidden_size = h;
  m.num_attention_heads = heads;
  m.num_kv_heads = kv;
  m.ffn_hidden_size = ffn;
  m.vocab_size = vocab;
  return m;
}

const std::array<ModelShape, 6>& presets() {
  static const std::array<ModelShape, 6> table = [] {
    // Shapes from the models' HuggingFace config.json files (meta-llama/Llama-2-7b-hf,
    // Llama-2-13b-hf, Llama-2-70b-hf, Meta-Llama-3-8B, Meta-Llama-3-70B).
    std::array<ModelShape, 6> t{llama("llama2-7b", 32, 4096, 32, 32, 11008, 32000),
                                llama("llama2-13b", 40, 5120, 40, 40, 13824, 32000),
                                llama("llama2-70b", 80, 8192, 64, 8, 28672, 32000),
                                llama("llama3-8b", 32, 4096, 32, 8, 14336, 128256),
                                llama("llama3-70b", 80, 8192, 64, 8, 28672, 128256),
                                ModelShape{}};
    // GPT-3 175B: Brown et al. 2020, table 2.1 (96 layers, d_model 12288, 96 heads);
    // ffn 4h; vocabulary 51200 = GPT-2's 50257 padded as in Narayanan et al. 2021.
    // Megatron-LM of that time: unfused attention core, dropout, tied embeddings.
    ModelShape g;
    g.name = "gpt3-175b";
    g.architecture = Architecture::gpt;
    g.num_layers = 96;
    g.hidden_size = 12288;
    g.num_attention_heads = 96;
    g.num_kv_heads = 96;
    g.ffn_hidden_size = 4 * 12288;
    g.vocab_size = 51200;
    g.tied_embeddings = true;
    g.flash_attention = false;
    g.dropout = true;
    t[5] = g;
    return t;
  }();
  return table;
}

// Messages name a field by its JSON Pointer (RFC 6901), "/num_hidden_layers": the form
// jq and editors use. HF field names hold no '/' or '~' to escape.
std::string where(const std::string& path, const char* field) {
  return path + ": /" + field;
}

int get_int(const nlohmann::json& j, const std::string& path, const char* field) {
  auto it = j.find(field);
  if (it == j.end() || it->is_null())
    throw ShapeError(path + ": HF config lacks the field '" + field + "'");
  if (!it->is_number_integer())
    throw ShapeError(where(path, field) + ": HF config field '" + field +
                     "' must be a positive integer, got " + it->type_name());
  // An unsigned value above INT64_MAX must not wrap into a small signed one.
  const bool fits = it->is_number_unsigned()
                        ? it->get<std::uint64_t>() <= 100'000'000u
                        : it->get<std::int64_t>() >= 1 && it->get<std::int64_t>() <= 100'000'000;
  if (!fits || it->get<std::int64_t>() < 1)
    throw ShapeError(where(path, field) + ": HF config field '" + field +
                     "' must be a positive integer, at most 100000000");
  return static_cast<int>(it->get<std::int64_t>());
}

// Optional fields that HF itself defaults when absent or null (n_inner, num_key_value_heads).
bool given(const nlohmann::json& j, const char* field) {
  auto it = j.find(field);
  return it != j.end() && !it->is_null();
}

bool get_bool(const nlohmann::json& j, const std::string& path, const char* field, bool fallback) {
  auto it = j.find(field);
  if (it == j.end()) return fallback;
  if (!it->is_boolean())
    throw ShapeError(where(path, field) + ": expected true or false, got " + it->type_name());
  return it->get<bool>();
}

double get_number(const nlohmann::json& j, const std::string& path, const char* field,
                  double fallback) {
  auto it = j.find(field);
  if (it == j.end()) return fallback;
  if (!it->is_number())
    throw ShapeError(where(path, field) + ": expected a number, got " + it->type_name());
  return it->get<double>();
}

std::string get_string(const nlohmann::json& j, const std::string& path, const char* field) {
  auto it = j.find(field);
  if (it == j.end()) return {};
  if (!it->is_string())
    throw ShapeError(where(path, field) + ": expected a string, got " + it->type_name());
  return it->get<std::string>();
}

// The whole file, or a ShapeError: a directory, an unreadable or empty file, or one far
// larger than any config.json (a wrong path to a checkpoint) never reaches the parser.
std::string read_text(const std::string& path) {
  constexpr std::size_t kMaxBytes = 4u << 20;
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw ShapeError(path + ": is a directory, not an HF config.json");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ShapeError(path + ": cannot open the HF config file");
  std::string text;
  char buf[1 << 16];
  while (in.read(buf, sizeof buf), in.gcount() > 0) {
    text.append(buf, static_cast<std::size_t>(in.gcount()));
    if (text.size() > kMaxBytes)
      throw ShapeError(path + ": larger than 4 MiB, which no HF config.json is");
  }
  if (in.bad()) throw ShapeError(path + ": cannot read the HF config file");
  return text;
}

// A mixture-of-experts model has expert MLPs and a router in place of the dense MLP that
// bmpipe's cost model builds: reading its shared fields would cost another model.
// The expert counts by family: num_local_experts (Mixtral), num_experts (Qwen2-MoE,
// Qwen3-MoE, OLMoE), n_routed_experts (DeepSeek-V2/V3), moe_num_experts; and
// num_experts_per_tok, the experts each token is routed to.
void refuse_mixture_of_experts(const nlohmann::json& j, const std::string& path,
                               const std::string& type) {
  for (const char* field : {"num_local_experts", "num_experts", "n_routed_experts",
                            "moe_num_experts", "num_experts_per_tok"}) {
    if (!given(j, field)) continue;
    const nlohmann::json& v = j[field];
    if (!v.is_number_integer())
      throw ShapeError(where(path, field) + ": expected an integer, got " + v.type_name());
    const std::uint64_t big = static_cast<std::uint64_t>(INT64_MAX);
    const std::int64_t n = v.is_number_unsigned()
                               ? static_cast<std::int64_t>(std::min(v.get<std::uint64_t>(), big))
                               : v.get<std::int64_t>();
    const bool per_token = std::string(field) == "num_experts_per_tok";
    if (per_token ? n > 0 : n > 1)
      throw ShapeError(where(path, field) + ": a mixture-of-experts config (" + field + " = " +
                       v.dump() + "); bmpipe's cost model has dense decoder layers only");
  }
  if (type == "mixtral" || type.find("moe") != std::string::npos ||
      type.rfind("deepseek_v", 0) == 0)
    throw ShapeError(where(path, "model_type") + ": '" + type +
                     "' is a mixture-of-experts family; bmpipe's cost model has dense decoder "
                     "layers only");
}

}  // namespace

const ModelShape* find_model_preset(const std::string& name) {
  for (const auto& p : presets())
    if (p.name == name) return &p;
  return nullptr;
}

std::string model_preset_names() {
  std::string out;
  for (const auto& p : presets()) out += (out.empty() ? "" : ", ") + p.name;
  return out;
}

ModelShape read_hf_config(const std::string& path) {
  return parse_hf_config(read_text(path), path);
}

ModelShape parse_hf_config(const std::string& text, const std::string& path) {
  if (text.find_first_not_of(" \t\r\n") == std::string::npos)
    throw ShapeError(path + ": the HF config file is empty");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw ShapeError(path + ": not valid JSON: " + e.what());
  }
  if (!j.is_object()) throw ShapeError(path + ": expected a JSON object, got " + j.type_name());
  ModelShape m;
  const std::string type = get_string(j, path, "model_type");
  refuse_mixture_of_experts(j, path, type);
  // Only a name for outputs: anything but a string is ignored.
  m.name = j.contains("_name_or_path") && j["_name_or_path"].is_string()
               ? j["_name_or_path"].get<std::string>()
               : (type.empty() ? std::string("hf-model") : type);
  if (type == "gpt2") {
    m.architecture = Architecture::gpt;
    m.num_layers = get_int(j, path, "n_layer");
    m.hidden_size = get_int(j, path, "n_embd");
    m.num_attention_heads = get_int(j, path, "n_head");
    m.num_kv_heads = m.num_attention_heads;
    m.ffn_hidden_size = given(j, "n_inner")
                            ? get_int(j, path, "n_inner")
                            : 4 * m.hidden_size;  // HF GPT2MLP: n_inner None means 4 * n_embd
    m.vocab_size = get_int(j, path, "vocab_size");
    m.tied_embeddings = get_bool(j, path, "tie_word_embeddings", true);
    m.dropout =
        get_number(j, path, "attn_pdrop", 0.0) > 0 || get_number(j, path, "resid_pdrop", 0.0) > 0;
  } else {
    // llama and its relatives (mistral, qwen2, gemma, gemma2, ...): the same field names.
    // Not modelled: Qwen2's q/k/v biases (3 x h + 2 x kv values per layer, under 0.01 % of
    // its weights, added inside the projections), Mistral's and Gemma 2's sliding-window
    // attention (full causal attention is costed), Gemma 2's extra norms and soft-capping.
    m.architecture = Architecture::llama;
    m.num_layers = get_int(j, path, "num_hidden_layers");
    m.hidden_size = get_int(j, path, "hidden_size");
    m.num_attention_heads = get_int(j, path, "num_attention_heads");
    // HF LlamaConfig: num_key_value_heads defaults to num_attention_heads when absent.
    m.num_kv_heads = given(j, "num_key_value_heads") ? get_int(j, path, "num_key_value_heads")
                                                     : m.num_attention_heads;
    // HF's attention modules take head_dim from the config when it has one (GemmaConfig
    // always does; LlamaConfig, MistralConfig since transformers 4.4x) and
    // hidden_size // num_attention_heads otherwise. Kept implicit when the two agree, so
    // that shape keys overriding the heads in YAML still derive it.
    if (given(j, "head_dim")) {
      const int d = get_int(j, path, "head_dim");
      if (m.hidden_size % m.num_attention_heads != 0 || d != m.hidden_size / m.num_attention_heads)
        m.explicit_head_dim = d;
    }
    m.ffn_hidden_size = get_int(j, path, "intermediate_size");
    m.vocab_size = get_int(j, path, "vocab_size");
    // HF GemmaConfig and Gemma2Config default tie_word_embeddings to true (the published
    // configs leave it out); LlamaConfig, MistralConfig and Qwen2Config to false.
    const bool ties_by_default = type == "gemma" || type == "gemma2";
    m.tied_embeddings = get_bool(j, path, "tie_word_embeddings", ties_by_default);
  }
  try {
    check_shape(m);
  } catch (const ShapeError& e) {
    throw ShapeError(path + ": " + e.what());
  }
  return m;
}

void check_shape(const ModelShape& m) {
  auto positive = [](int v, const char* field) {
    if (v < 1) throw ShapeError(std::string(field) + " must be at least 1");
  };
  positive(m.num_layers, "num_layers");
  positive(m.hidden_size, "hidden_size");
  positive(m.num_attention_heads, "num_attention_heads");
  positive(m.num_kv_heads, "num_kv_heads");
  positive(m.ffn_hidden_size, "ffn_hidden_size");
  positive(m.vocab_size, "vocab_size");
  if (m.explicit_head_dim < 0)
    throw ShapeError("head_dim must be at least 1, got " + std::to_string(m.explicit_head_dim));
  // The q projection is num_attention_heads x head_dim wide: held to the hidden size's
  // bound, so that parameter counts and byte totals stay far inside int64.
  constexpr long long kMaxWidth = 1'048'576;
  if (static_cast<long long>(m.num_attention_heads) * m.explicit_head_dim > kMaxWidth)
    throw ShapeError(
        "num_attention_heads x head_dim = " +
        std::to_string(static_cast<long long>(m.num_attention_heads) * m.explicit_head_dim) +
        " is wider than any model's attention (at most 1048576)");
  if (m.explicit_head_dim == 0 && m.hidden_size % m.num_attention_heads != 0)
    throw ShapeError("num_attention_heads = " + std::to_string(m.num_attention_heads) +
                     " does not divide hidden_size = " + std::to_string(m.hidden_size));
  if (m.num_attention_heads % m.num_kv_heads != 0)
    throw ShapeError(
        "num_kv_heads = " + std::to_string(m.num_kv_heads) +
        " does not divide num_attention_heads = " + std::to_string(m.num_attention_heads));
}

}  // namespace bmpipe
