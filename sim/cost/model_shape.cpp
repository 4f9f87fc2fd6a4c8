#include "sim/cost/model_shape.hpp"

#include <array>

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
