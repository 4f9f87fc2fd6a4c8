#include "experiment/hf_config.hpp"
#include "io/read_file.hpp"

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>

namespace bmpipe {

namespace {

// Messages name a field by its JSON Pointer (RFC 6901), "/num_hidden_layers": the form
// jq and editors use. HF field names hold no '/' or '~' to escape. A nested object (Llama
// 4's text_config) is read with `path` as a URI fragment, "config.json#/text_config", and
// its fields are named in that form too: "config.json#/text_config/hidden_size".
std::string where(const std::string& path, const char* field) {
  if (path.find('#') != std::string::npos) return path + "/" + field;
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
  try {
    return read_untrusted_file(path, std::size_t{4} << 20, "HF config.json");
  } catch (const ReadFileError& e) {
    throw ShapeError(path + ": " + e.what());
  }
}

// The mixture-of-experts families read below; any other config with expert fields, or of
// another MoE family, is refused rather than costed as a dense model.
bool supported_moe_family(const std::string& type) {
  return type == "mixtral" || type == "qwen2_moe" || type == "qwen3_moe" || type == "deepseek_v3" ||
         type == "deepseek_v32" || type == "gpt_oss" || type == "llama4_text" ||
         type == "nemotron_h" || type == "qwen3_next";
}

// The expert counts by family: num_local_experts (Mixtral, gpt-oss), num_experts
// (Qwen2-MoE, Qwen3-MoE, OLMoE), n_routed_experts (DeepSeek-V2/V3), moe_num_experts; and
// num_experts_per_tok, the experts each token is routed to.
void refuse_mixture_of_experts(const nlohmann::json& j, const std::string& path,
                               const std::string& type) {
  if (supported_moe_family(type)) return;
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
                       v.dump() + ") of model_type '" + type +
                       "'; bmpipe reads the mixture-of-experts families mixtral, qwen2_moe, "
                       "qwen3_moe, deepseek_v3, deepseek_v32, gpt_oss and llama4");
  }
  if (type.find("moe") != std::string::npos || type.rfind("deepseek_v", 0) == 0 ||
      type.rfind("llama4", 0) == 0)
    throw ShapeError(where(path, "model_type") + ": '" + type +
                     "' is a mixture-of-experts family bmpipe does not read (it reads "
                     "mixtral, qwen2_moe, qwen3_moe, deepseek_v3, deepseek_v32, gpt_oss and "
                     "llama4)");
}

// A non-negative integer, `fallback` when absent or null.
int get_count(const nlohmann::json& j, const std::string& path, const char* field, int fallback) {
  auto it = j.find(field);
  if (it == j.end() || it->is_null()) return fallback;
  if (it->is_number_integer() && !it->is_number_unsigned() && it->get<std::int64_t>() == 0)
    return 0;
  if (it->is_number_unsigned() && it->get<std::uint64_t>() == 0) return 0;
  return get_int(j, path, field);
}

// A config's layer_types list, when it has one, held to the windowed layers `m` has
// (ModelShape::is_windowed_layer, which `rule` states for the message) -- a list bmpipe would
// cost otherwise is refused, not guessed at. `windowed_name` is what the list calls a
// windowed layer ("sliding_attention"; "chunked_attention" in Llama 4's).
void check_layer_types(const nlohmann::json& j, const std::string& path, const ModelShape& m,
                       const std::string& rule, const char* windowed_name) {
  if (!given(j, "layer_types")) return;
  const nlohmann::json& v = j["layer_types"];
  if (!v.is_array() || static_cast<int>(v.size()) != m.num_layers)
    throw ShapeError(where(path, "layer_types") + ": expected a list of " +
                     std::to_string(m.num_layers) + " layer types (num_hidden_layers)");
  for (int i = 0; i < m.num_layers; ++i) {
    const std::string want = m.is_windowed_layer(i) ? windowed_name : "full_attention";
    if (!v[i].is_string() || v[i].get<std::string>() != want)
      throw ShapeError(where(path, "layer_types") + ": layer " + std::to_string(i) + " is " +
                       v[i].dump() + "; bmpipe windows the layers i with " + rule +
                       " here (expected \"" + want + "\")");
  }
}

// The sliding window of a family that windows every `every`-th layer from layer 0:
// sliding_window (null or absent: none), and layer_types held to that pattern. HF
// transformers v4.57: GptOssConfig and Gemma2Config default layer_types to
// "sliding_attention" at even layers, "full_attention" at odd ones; MistralAttention and
// MixtralAttention window every layer.
void read_sliding_window(const nlohmann::json& j, const std::string& path, int every,
                         ModelShape& m) {
  m.sliding_window = get_count(j, path, "sliding_window", 0);
  m.sliding_every = m.sliding_window > 0 ? every : 0;
  check_layer_types(j, path, m, "i % " + std::to_string(every) + " == 0", "sliding_attention");
}

/// Gemma3ForCausalLM (model_type gemma3_text), as HF transformers builds it
/// (huggingface/transformers d98ac17c src/transformers/models/gemma3/configuration_gemma3.py
/// and modeling_gemma3.py, read): Gemma3Attention slides its window over the layers with
/// (layer_idx + 1) % sliding_window_pattern != 0 (is_sliding) and attends globally on the
/// rest, five to one; q_norm and k_norm RMSNorm each head (head_dim wide, and head_dim is the
/// config's own: 27B has 32 heads of 128 over a hidden size of 5376). What the config leaves
/// out is Gemma3TextConfig's default there: vocab_size 262208, head_dim 256,
/// tie_word_embeddings true, sliding_window 4096, sliding_window_pattern 6 (google/gemma-3-27b-it's
/// text_config gives neither vocab_size nor the pattern). A later layer_types list is held
/// to the pattern. Gemma3DecoderLayer's four RMSNorms: input_layernorm and
/// pre_feedforward_layernorm, and post_attention_layernorm and post_feedforward_layernorm on
/// the attention's and the MLP's outputs (ModelShape::post_norms). Not modelled: the MLP's
/// gate is GELU (tanh) where SwiGLU's is SiLU (the same GEMMs and an elementwise op of the
/// same bytes), and the embedding's scaling by sqrt(hidden_size) (one elementwise pass).
void gemma3_defaults(nlohmann::json& j) {
  if (!given(j, "vocab_size")) j["vocab_size"] = 262208;
  if (!given(j, "head_dim")) j["head_dim"] = 256;
  if (!j.contains("sliding_window")) j["sliding_window"] = 4096;
}

// ModelShape::full_every from `field` (`fallback` when absent): 1 would make every layer
// global, windowing none, which `window_field` null says instead.
int read_full_every(const nlohmann::json& j, const std::string& path, const char* field,
                    int fallback, const char* window_field) {
  const int k = given(j, field) ? get_int(j, path, field) : fallback;
  if (k == 1)
    throw ShapeError(where(path, field) + ": 1 makes every layer global and windows none; " +
                     "expected 2 or more (" + std::to_string(fallback) + " by default), or " +
                     window_field + " null for no window");
  return k;
}

void read_gemma3_window(const nlohmann::json& j, const std::string& path, ModelShape& m) {
  m.qk_norm = true;
  m.post_norms = true;
  m.sliding_window = get_count(j, path, "sliding_window", 0);
  if (m.sliding_window == 0) return;
  m.full_every = read_full_every(j, path, "sliding_window_pattern", 6, "sliding_window");
  check_layer_types(j, path, m, "(i + 1) % " + std::to_string(m.full_every) + " != 0",
                    "sliding_attention");
}

// The MoE and attention fields of the families above, as HF transformers' modeling files
// read them (transformers v4.57: models/mixtral, qwen2_moe, qwen3_moe, deepseek_v3,
// gpt_oss; read, not copied).
/// NemotronHForCausalLM (model_type nemotron_h: Nemotron-H, Nemotron Nano 2, Nemotron 3), as
/// Megatron-Bridge maps it onto Megatron-Core's HybridModel (NVIDIA-NeMo/Megatron-Bridge
/// 067f987d src/megatron/bridge/models/nemotronh/nemotron_h_bridge.py: CONFIG_MAPPING and
/// provider_bridge; read, not copied): hybrid_override_pattern is the layer pattern;
/// mamba_num_heads, mamba_head_dim, ssm_state_size, n_groups, chunk_size the mixer;
/// squared-ReLU MLPs without a gate (mlp_hidden_act relu2); E layers of n_routed_experts of
/// moe_intermediate_size with one shared MLP of moe_shared_expert_intermediate_size (the
/// total, mapped one to one), a sigmoid router with an expert bias. No position embedding
/// (RoPE is not run: Megatron-Bridge sets position_embedding_type none). Nemotron 3 Super's
/// latent MoE: moe_latent_size (provider.moe_latent_size, mapped one to one; null: none),
/// held between 1 and hidden_size - 1 and only with E layers. Its MTP block (_hf_mtp_config
/// and provider_bridge): num_nextn_predict_layers depths of mtp_hybrid_override_pattern's
/// blocks, which a config with depths must give, sharing one block's weights unless
/// mtp_use_repeated_layer says false (the bridge's default: true).
void read_nemotron_h(const nlohmann::json& j, const std::string& path, ModelShape& m) {
  m.hybrid_pattern = get_string(j, path, "hybrid_override_pattern");
  if (m.hybrid_pattern.empty())
    throw ShapeError(where(path, "hybrid_override_pattern") +
                     ": a nemotron_h config needs its layer pattern");
  m.mtp_layers = get_count(j, path, "num_nextn_predict_layers", 0);
  if (m.mtp_layers > 0) {
    m.mtp_pattern = get_string(j, path, "mtp_hybrid_override_pattern");
    if (m.mtp_pattern.empty())
      throw ShapeError(where(path, "mtp_hybrid_override_pattern") +
                       ": num_nextn_predict_layers = " + std::to_string(m.mtp_layers) +
                       " MTP depths need the MTP block's layer pattern (Megatron-Bridge's "
                       "NemotronHBridge refuses the config without it)");
    m.mtp_shared = get_bool(j, path, "mtp_use_repeated_layer", true);
  }
  const std::string act = get_string(j, path, "mlp_hidden_act");
  if (!act.empty() && act != "relu2")
    throw ShapeError(where(path, "mlp_hidden_act") + ": '" + act +
                     "'; bmpipe models nemotron_h's squared-ReLU MLP (relu2)");
  m.mlp_activation = MlpActivation::relu2;
  m.rotary = false;
  MambaShape& x = m.mamba;
  if (m.hybrid_pattern.find('M') != std::string::npos ||
      m.mtp_pattern.find('M') != std::string::npos) {
    x.num_heads = get_int(j, path, "mamba_num_heads");
    x.head_dim = get_int(j, path, "mamba_head_dim");
    x.state_dim = get_int(j, path, "ssm_state_size");
    x.groups = get_int(j, path, "n_groups");
    // HF NemotronHConfig's defaults: conv_kernel 4, chunk_size 128.
    x.conv_kernel = given(j, "conv_kernel") ? get_int(j, path, "conv_kernel") : 4;
    x.chunk_size = given(j, "chunk_size") ? get_int(j, path, "chunk_size") : 128;
  }
  const bool latent = given(j, "moe_latent_size");
  const bool experts = m.hybrid_pattern.find('E') != std::string::npos ||
                       m.mtp_pattern.find('E') != std::string::npos;
  if (latent && !experts)
    throw ShapeError(where(path, "moe_latent_size") +
                     ": a latent projection of the routed experts' tokens, but the pattern has "
                     "no MoE layers (E)");
  if (!experts) return;
  MoeShape& moe = m.moe;
  if (latent) {
    moe.latent_size = get_int(j, path, "moe_latent_size");
    if (moe.latent_size >= m.hidden_size)
      throw ShapeError(where(path, "moe_latent_size") + ": " + std::to_string(moe.latent_size) +
                       " is not narrower than hidden_size = " + std::to_string(m.hidden_size) +
                       ": the latent projection must compress the hidden state");
  }
  moe.num_experts = get_int(j, path, "n_routed_experts");
  moe.top_k = get_int(j, path, "num_experts_per_tok");
  moe.expert_ffn = get_int(j, path, "moe_intermediate_size");
  moe.shared_ffn = get_count(j, path, "moe_shared_expert_intermediate_size", 0);
  moe.router_score_bias = true;  // moe_router_enable_expert_bias
  if (get_count(j, path, "n_group", 1) > 1) {
    moe.router_groups = get_int(j, path, "n_group");
    moe.router_group_top_k = get_int(j, path, "topk_group");
  }
  if (moe.top_k > moe.num_experts)
    throw ShapeError(where(path, "num_experts_per_tok") + ": " + std::to_string(moe.top_k) +
                     " experts per token, but the model has " + std::to_string(moe.num_experts));
}

/// Qwen3NextForCausalLM (model_type qwen3_next: Qwen3-Next-80B-A3B, Qwen3-Coder-Next), as HF
/// transformers' modeling_qwen3_next builds it (read): each of num_hidden_layers decoder
/// layers is a token mixer -- a Gated DeltaNet (layer_types "linear_attention") or gated
/// attention ("full_attention": q_proj doubled for a sigmoid output gate, q and k RMSNormed
/// per head) -- then a sparse MoE block (num_experts of moe_intermediate_size, a shared expert
/// of shared_expert_intermediate_size behind a sigmoid gate), or a dense MLP of
/// intermediate_size on mlp_only_layers. Without layer_types, layer i is full attention when
/// (i + 1) % full_attention_interval == 0 (Qwen3NextConfig's default, 4). bmpipe writes it as
/// a hybrid of single blocks, G or * then E or -, so num_layers is twice HF's (as Megatron's
/// hybrid pattern counts them). Not modelled: partial rotary (RoPE on a quarter of the head,
/// costed whole) and the MTP module (mtp_num_hidden_layers, refused).
void read_qwen3_next(const nlohmann::json& j, const std::string& path, ModelShape& m) {
  const int layers = m.num_layers;
  if (get_count(j, path, "mtp_num_hidden_layers", 0) > 0)
    throw ShapeError(where(path, "mtp_num_hidden_layers") +
                     ": Qwen3-Next's MTP module, which bmpipe does not model yet");
  std::vector<bool> full(static_cast<std::size_t>(layers), false);
  if (given(j, "layer_types")) {
    const nlohmann::json& v = j["layer_types"];
    if (!v.is_array() || static_cast<int>(v.size()) != layers)
      throw ShapeError(where(path, "layer_types") + ": expected a list of " +
                       std::to_string(layers) + " layer types (num_hidden_layers)");
    for (std::size_t i = 0; i < v.size(); ++i) {
      const std::string t = v[i].is_string() ? v[i].get<std::string>() : "";
      if (t != "linear_attention" && t != "full_attention")
        throw ShapeError(where(path, "layer_types") + ": entry " + std::to_string(i) + " is " +
                         v[i].dump() + "; expected \"linear_attention\" or \"full_attention\"");
      full[i] = t == "full_attention";
    }
  } else {
    const int interval =
        given(j, "full_attention_interval") ? get_int(j, path, "full_attention_interval") : 4;
    for (int i = 0; i < layers; ++i) full[static_cast<std::size_t>(i)] = (i + 1) % interval == 0;
  }
  std::vector<bool> dense(static_cast<std::size_t>(layers), false);
  if (given(j, "mlp_only_layers")) {
    const nlohmann::json& v = j["mlp_only_layers"];
    if (!v.is_array())
      throw ShapeError(where(path, "mlp_only_layers") + ": expected a list of layer indices");
    for (const auto& x : v) {
      if (!x.is_number_integer() || x.get<std::int64_t>() < 0 || x.get<std::int64_t>() >= layers)
        throw ShapeError(where(path, "mlp_only_layers") +
                         ": expected layer indices from 0 to num_hidden_layers - 1 = " +
                         std::to_string(layers - 1) + ", got " + x.dump());
      dense[static_cast<std::size_t>(x.get<std::int64_t>())] = true;
    }
  }
  const int step = given(j, "decoder_sparse_step") ? get_int(j, path, "decoder_sparse_step") : 1;
  m.hybrid_pattern.clear();
  for (int i = 0; i < layers; ++i) {
    m.hybrid_pattern += full[static_cast<std::size_t>(i)] ? '*' : 'G';
    const bool sparse = !dense[static_cast<std::size_t>(i)] && (i + 1) % step == 0;
    m.hybrid_pattern += sparse ? 'E' : '-';
  }
  m.num_layers = 2 * layers;
  m.qk_norm = true;
  m.attention_output_gate = get_bool(j, path, "attn_output_gate", true);
  m.attention_bias = get_bool(j, path, "attention_bias", false);
  GdnShape& g = m.gdn;
  g.key_heads = get_int(j, path, "linear_num_key_heads");
  g.key_head_dim = get_int(j, path, "linear_key_head_dim");
  g.value_heads = get_int(j, path, "linear_num_value_heads");
  g.value_head_dim = get_int(j, path, "linear_value_head_dim");
  g.conv_kernel =
      given(j, "linear_conv_kernel_dim") ? get_int(j, path, "linear_conv_kernel_dim") : 4;
  MoeShape& moe = m.moe;
  moe.num_experts = get_int(j, path, "num_experts");
  moe.top_k = get_int(j, path, "num_experts_per_tok");
  moe.expert_ffn = get_int(j, path, "moe_intermediate_size");
  moe.shared_ffn = get_count(j, path, "shared_expert_intermediate_size", 0);
  moe.shared_gate = moe.shared_ffn > 0;
  if (moe.top_k > moe.num_experts)
    throw ShapeError(where(path, "num_experts_per_tok") + ": " + std::to_string(moe.top_k) +
                     " experts per token, but the model has " + std::to_string(moe.num_experts));
}

/// Llama 4's chunked attention (huggingface/transformers b17cfe48 src/transformers/models/
/// llama4/configuration_llama4.py Llama4TextConfig and modeling_llama4.py, read): the RoPE
/// layers attend within aligned chunks of attention_chunk_size tokens (default 8192; null:
/// none), and the NoPE layers, no_rope_layers[i] == 0, attend to the whole sequence;
/// no_rope_layers defaults to int((i + 1) % no_rope_layer_interval != 0), interval 4
/// (Llama4TextDecoderLayer.use_chunked_attention "<=> use rope"). A no_rope_layers or
/// layer_types list is held to that pattern. Not modelled: the NoPE layers skip RoPE, an
/// elementwise pass over q and k that is costed on them too, and their attention
/// temperature tuning (a scale of q).
void read_llama4_attention(const nlohmann::json& j, const std::string& path, ModelShape& m) {
  const auto c = j.find("attention_chunk_size");
  if (c != j.end() && c->is_null()) return;
  m.sliding_window = c == j.end() ? 8192 : get_int(j, path, "attention_chunk_size");
  m.chunked_window = true;
  m.full_every = read_full_every(j, path, "no_rope_layer_interval", 4, "attention_chunk_size");
  const std::string rule = "(i + 1) % " + std::to_string(m.full_every) + " != 0";
  if (given(j, "no_rope_layers") && !j["no_rope_layers"].empty()) {
    const nlohmann::json& v = j["no_rope_layers"];
    if (!v.is_array() || static_cast<int>(v.size()) != m.num_layers)
      throw ShapeError(where(path, "no_rope_layers") + ": expected a list of " +
                       std::to_string(m.num_layers) + " flags (num_hidden_layers), 1 for RoPE");
    for (int i = 0; i < m.num_layers; ++i) {
      const int want = m.is_windowed_layer(i) ? 1 : 0;
      if (!v[i].is_number_integer() || v[i].get<std::int64_t>() != want)
        throw ShapeError(where(path, "no_rope_layers") + ": layer " + std::to_string(i) + " is " +
                         v[i].dump() + "; bmpipe chunks the RoPE layers i with " + rule +
                         " (no_rope_layer_interval " + std::to_string(m.full_every) +
                         "; expected " + std::to_string(want) + ")");
    }
  }
  check_layer_types(j, path, m, rule, "chunked_attention");
}

void read_moe_family(const nlohmann::json& j, const std::string& path, const std::string& type,
                     ModelShape& m) {
  // Megatron-Bridge maps moe_latent_size for NemotronH alone (nemotron_h_bridge.py at
  // 067f987d): another family's would be a latent MoE costed as a plain one.
  if (type != "nemotron_h" && given(j, "moe_latent_size"))
    throw ShapeError(where(path, "moe_latent_size") + ": a latent mixture of experts in a '" +
                     type +
                     "' config; bmpipe reads moe_latent_size for nemotron_h (Nemotron 3 "
                     "Super) only");
  if (type == "nemotron_h") return read_nemotron_h(j, path, m);
  if (type == "qwen3_next") return read_qwen3_next(j, path, m);
  MoeShape& moe = m.moe;
  moe.top_k = get_int(j, path, "num_experts_per_tok");
  if (type == "mixtral" || type == "gpt_oss") {
    // Every layer is sparse; intermediate_size is one expert's.
    moe.num_experts = get_int(j, path, "num_local_experts");
    moe.expert_ffn = m.ffn_hidden_size;
    if (type == "gpt_oss") {
      // GptOssAttention: q/k/v/o with biases (attention_bias true), a sink logit per
      // head; GptOssTopKRouter: a linear with a bias; GptOssExperts: gate_up_proj and
      // down_proj with biases. layer_types alternates sliding_attention and
      // full_attention from layer 0.
      m.attention_bias = get_bool(j, path, "attention_bias", true);
      m.attention_sinks = true;
      moe.router_bias = true;
      moe.expert_bias = true;
      read_sliding_window(j, path, 2, m);
    } else {
      read_sliding_window(j, path, 1, m);
    }
  } else if (type == "qwen2_moe" || type == "qwen3_moe") {
    // Qwen2MoeDecoderLayer: sparse when layer_idx is not in mlp_only_layers and
    // (layer_idx + 1) % decoder_sparse_step == 0; otherwise a dense MLP of
    // intermediate_size. Qwen2-MoE adds a shared expert of
    // shared_expert_intermediate_size with a sigmoid gate h -> 1, and q/k/v biases;
    // Qwen3-MoE has no shared expert and RMSNorms q and k per head.
    moe.num_experts = get_int(j, path, "num_experts");
    moe.expert_ffn = get_int(j, path, "moe_intermediate_size");
    moe.sparse_step = given(j, "decoder_sparse_step") ? get_int(j, path, "decoder_sparse_step") : 1;
    moe.sparse_offset = 1;
    if (given(j, "mlp_only_layers")) {
      const nlohmann::json& v = j["mlp_only_layers"];
      if (!v.is_array())
        throw ShapeError(where(path, "mlp_only_layers") +
                         ": expected a list of layer indices, got " + v.type_name());
      for (const auto& x : v) {
        if (!x.is_number_integer() || x.get<std::int64_t>() < 0 ||
            x.get<std::int64_t>() >= m.num_layers)
          throw ShapeError(where(path, "mlp_only_layers") +
                           ": expected layer indices from 0 to num_hidden_layers - 1 = " +
                           std::to_string(m.num_layers - 1) + ", got " + x.dump());
        moe.dense_layers.push_back(static_cast<int>(x.get<std::int64_t>()));
      }
    }
    if (type == "qwen2_moe") {
      moe.shared_ffn = get_count(j, path, "shared_expert_intermediate_size", 0);
      moe.shared_gate = moe.shared_ffn > 0;
      m.qkv_bias = true;
    } else {
      m.qk_norm = true;
      m.attention_bias = get_bool(j, path, "attention_bias", false);
    }
  } else if (type == "llama4_text") {
    // Llama4TextDecoderLayer: a Llama4TextMoe when layer_idx is in moe_layers (by default
    // range(interleave_moe_layer_step - 1, num_hidden_layers, interleave_moe_layer_step),
    // Llama4TextConfig), otherwise a dense Llama4TextMLP of intermediate_size_mlp.
    // Llama4TextMoe: num_local_experts experts of intermediate_size (gate_up_proj fused,
    // down_proj), a router linear h -> experts without a bias (sigmoid scores scale the
    // routed input), and one shared expert, a Llama4TextMLP of intermediate_size, added
    // without a gate. Attention: read_llama4_attention. Not modelled: the weightless L2
    // norm of q and k (use_qk_norm), a memory-bound op of a few per cent of the norms'
    // traffic.
    moe.num_experts = get_int(j, path, "num_local_experts");
    moe.expert_ffn = m.ffn_hidden_size;  // intermediate_size
    moe.shared_ffn = m.ffn_hidden_size;
    const int step =
        given(j, "interleave_moe_layer_step") ? get_int(j, path, "interleave_moe_layer_step") : 1;
    if (given(j, "moe_layers")) {
      // An explicit list: every other layer is dense.
      const nlohmann::json& v = j["moe_layers"];
      if (!v.is_array())
        throw ShapeError(where(path, "moe_layers") + ": expected a list of layer indices, got " +
                         v.type_name());
      std::vector<bool> sparse(static_cast<std::size_t>(m.num_layers), false);
      for (const auto& x : v) {
        if (!x.is_number_integer() || x.get<std::int64_t>() < 0 ||
            x.get<std::int64_t>() >= m.num_layers)
          throw ShapeError(where(path, "moe_layers") +
                           ": expected layer indices from 0 to num_hidden_layers - 1 = " +
                           std::to_string(m.num_layers - 1) + ", got " + x.dump());
        sparse[static_cast<std::size_t>(x.get<std::int64_t>())] = true;
      }
      for (int i = 0; i < m.num_layers; ++i)
        if (!sparse[static_cast<std::size_t>(i)]) moe.dense_layers.push_back(i);
    } else {
      moe.sparse_step = step;
      moe.sparse_offset = 1;
    }
    bool any_dense = !moe.dense_layers.empty();
    for (int i = 0; i < m.num_layers && !any_dense; ++i) any_dense = !m.is_moe_layer(i);
    // The dense layers' MLP; read only when some layer is dense (Scout has none).
    if (any_dense) m.ffn_hidden_size = get_int(j, path, "intermediate_size_mlp");
    m.attention_bias = get_bool(j, path, "attention_bias", false);
    read_llama4_attention(j, path, m);
  } else {  // deepseek_v3, deepseek_v32
    // DeepseekV3DecoderLayer: MoE when layer_idx >= first_k_dense_replace (and
    // layer_idx % moe_layer_freq == 0); DeepseekV3MoE: n_routed_experts of
    // moe_intermediate_size, n_shared_experts fused into one MLP of
    // n_shared_experts x moe_intermediate_size, a router gate with an
    // e_score_correction_bias per expert (topk_method noaux_tc).
    moe.num_experts = get_int(j, path, "n_routed_experts");
    moe.expert_ffn = get_int(j, path, "moe_intermediate_size");
    moe.shared_ffn = get_count(j, path, "n_shared_experts", 0) * moe.expert_ffn;
    moe.first_dense_layers = get_count(j, path, "first_k_dense_replace", 0);
    moe.sparse_step = given(j, "moe_layer_freq") ? get_int(j, path, "moe_layer_freq") : 1;
    moe.router_score_bias = get_string(j, path, "topk_method") == "noaux_tc";
    // MoEGate's group-limited routing: n_group groups of experts, the top topk_group of
    // them per token (DeepSeek-V3: 8 and 4, one group a node of its EP group).
    moe.router_groups = get_count(j, path, "n_group", 0);
    moe.router_group_top_k = get_count(j, path, "topk_group", 0);
    if (moe.router_groups > 0 && moe.num_experts % moe.router_groups != 0)
      throw ShapeError(
          where(path, "n_group") + ": " + std::to_string(moe.router_groups) +
          " groups do not split n_routed_experts = " + std::to_string(moe.num_experts) + " evenly");
    if (moe.router_group_top_k > moe.router_groups)
      throw ShapeError(where(path, "topk_group") + ": " + std::to_string(moe.router_group_top_k) +
                       " is more than n_group = " + std::to_string(moe.router_groups));
    if (moe.router_groups > 0 &&
        static_cast<long long>(moe.router_group_top_k) * (moe.num_experts / moe.router_groups) <
            moe.top_k)
      throw ShapeError(
          where(path, "topk_group") + ": " + std::to_string(moe.router_group_top_k) +
          " groups of " + std::to_string(moe.num_experts / moe.router_groups) +
          " experts hold fewer than num_experts_per_tok = " + std::to_string(moe.top_k));
    MlaShape& mla = m.mla;
    mla.q_lora_rank = get_count(j, path, "q_lora_rank", 0);
    mla.kv_lora_rank = get_int(j, path, "kv_lora_rank");
    mla.qk_nope_head_dim = get_int(j, path, "qk_nope_head_dim");
    mla.qk_rope_head_dim = get_int(j, path, "qk_rope_head_dim");
    mla.v_head_dim = get_int(j, path, "v_head_dim");
    m.mtp_layers = get_count(j, path, "num_nextn_predict_layers", 0);
    if (mla.kv_lora_rank > m.hidden_size)
      throw ShapeError(where(path, "kv_lora_rank") + ": " + std::to_string(mla.kv_lora_rank) +
                       " is wider than hidden_size = " + std::to_string(m.hidden_size) +
                       ": the latent must compress the hidden state");
    if (mla.q_lora_rank > m.hidden_size)
      throw ShapeError(where(path, "q_lora_rank") + ": " + std::to_string(mla.q_lora_rank) +
                       " is wider than hidden_size = " + std::to_string(m.hidden_size) +
                       ": the latent must compress the hidden state");
    // DeepseekV32ForCausalLM (DeepSeek-V3.2-Exp, V3.2): DeepSeek-V3's layers with the
    // lightning indexer of DeepSeek sparse attention (DsaShape), whose sizes its config.json
    // gives as index_n_heads, index_head_dim and index_topk (deepseek-ai/DeepSeek-V3.2-Exp's
    // inference/config_671B_v3.2.json: 64, 128, 2048).
    if (type == "deepseek_v32") {
      m.dsa.index_heads = get_int(j, path, "index_n_heads");
      m.dsa.index_head_dim = get_int(j, path, "index_head_dim");
      m.dsa.index_topk = get_int(j, path, "index_topk");
    }
  }
  if (moe.top_k > moe.num_experts)
    throw ShapeError(where(path, "num_experts_per_tok") + ": " + std::to_string(moe.top_k) +
                     " experts per token, but the model has " + std::to_string(moe.num_experts));
}

/// Qwen2_5_VLForConditionalGeneration (model_type qwen2_5_vl), as HF transformers'
/// modeling_qwen2_5_vl builds it (read): the language model is Qwen2's decoder (q, k, v
/// biases), its fields at the top level (the published configs) or in text_config
/// (transformers 4.5x's re-saved ones); vision_config is the ViT (VisionShape):
/// depth blocks of hidden_size with num_heads, a gated MLP of intermediate_size with
/// biases, Conv3d patches of in_chans x temporal_patch_size x patch_size^2, window attention
/// of window_size pixels except at fullatt_block_indexes, and the PatchMerger of
/// spatial_merge_size^2 patches into out_hidden_size, which must be the LLM's hidden size.
/// The images a sample carries are the experiment's (model.vision.images_per_sample,
/// image_tokens), not the model's.
ModelShape read_qwen2_5_vl(const nlohmann::json& j, const std::string& path) {
  const auto text = j.find("text_config");
  const bool nested = !given(j, "num_hidden_layers") && text != j.end() && text->is_object();
  nlohmann::json inner = nested ? *text : j;
  for (const char* top : {"tie_word_embeddings", "_name_or_path"})
    if (!inner.contains(top) && j.contains(top)) inner[top] = j[top];
  inner.erase("vision_config");
  inner.erase("text_config");
  inner["model_type"] = "qwen2";
  ModelShape m = parse_hf_config(inner.dump(), nested ? path + "#/text_config" : path);
  m.qkv_bias = true;  // Qwen2_5_VLAttention: q_proj, k_proj, v_proj with bias, o_proj without
  const auto vc = j.find("vision_config");
  if (vc == j.end() || !vc->is_object())
    throw ShapeError(where(path, "vision_config") +
                     ": a qwen2_5_vl config needs its vision encoder's vision_config object");
  const std::string vpath = path + "#/vision_config";
  const nlohmann::json& v = *vc;
  VisionShape& x = m.vision;
  x.layers = get_int(v, vpath, "depth");
  x.hidden_size = get_int(v, vpath, "hidden_size");
  x.num_heads = get_int(v, vpath, "num_heads");
  x.ffn_hidden_size = get_int(v, vpath, "intermediate_size");
  x.gated_mlp = true;  // Qwen2_5_VLMLP: gate_proj, up_proj, down_proj, all with biases
  // Megatron-Bridge trains this tower as HF builds it, whole on every tp rank
  // (VisionShape::tensor_parallel); its MLP of 3420 splits over no tp of 8 anyway.
  x.tensor_parallel = false;
  // Qwen2_5_VLVisionConfig's defaults for what a config leaves out.
  x.patch_size = given(v, "patch_size") ? get_int(v, vpath, "patch_size") : 14;
  x.temporal_patch = given(v, "temporal_patch_size") ? get_int(v, vpath, "temporal_patch_size") : 2;
  x.in_channels = given(v, "in_chans") ? get_int(v, vpath, "in_chans") : 3;
  x.spatial_merge = given(v, "spatial_merge_size") ? get_int(v, vpath, "spatial_merge_size") : 2;
  x.window_size = given(v, "window_size") ? get_int(v, vpath, "window_size") : 112;
  if (given(v, "fullatt_block_indexes")) {
    const nlohmann::json& f = v["fullatt_block_indexes"];
    if (!f.is_array())
      throw ShapeError(where(vpath, "fullatt_block_indexes") + ": expected a list of layers");
    for (const auto& i : f) {
      if (!i.is_number_integer() || i.get<std::int64_t>() < 0 || i.get<std::int64_t>() >= x.layers)
        throw ShapeError(where(vpath, "fullatt_block_indexes") + ": expected layers 0 to " +
                         std::to_string(x.layers - 1) + ", got " + i.dump());
      x.full_attention_layers.push_back(static_cast<int>(i.get<std::int64_t>()));
    }
  }
  const int out = get_int(v, vpath, "out_hidden_size");
  if (out != m.hidden_size)
    throw ShapeError(where(vpath, "out_hidden_size") + ": " + std::to_string(out) +
                     " is not the language model's hidden_size " + std::to_string(m.hidden_size) +
                     " (the merger feeds its tokens)");
  // images_per_sample and image_tokens stay 0: the YAML gives them (model.vision).
  m.name = j.contains("_name_or_path") && j["_name_or_path"].is_string()
               ? j["_name_or_path"].get<std::string>()
               : std::string("qwen2_5_vl");
  return m;
}

/// A multimodal wrapper's language model: its text_config object, of model_type `text_type`
/// (given, or implied when absent), read as that family's own config.json with its fields
/// named inside it ("config.json#/text_config/hidden_size"). tie_word_embeddings and
/// _name_or_path may sit at the top level instead (Llama4Config and Llama4TextConfig both
/// take tie_word_embeddings, both defaulting to false; Gemma3Config passes it on to
/// PretrainedConfig, its text config defaulting to true).
ModelShape read_text_config(const nlohmann::json& j, const std::string& path,
                            const std::string& type, const char* text_type) {
  auto text_config = j.find("text_config");
  if (text_config == j.end() || !text_config->is_object())
    throw ShapeError(where(path, "text_config") + ": a " + type +
                     " config needs its language model's text_config object");
  nlohmann::json inner = *text_config;
  if (!inner.contains("model_type")) inner["model_type"] = text_type;
  for (const char* top : {"tie_word_embeddings", "_name_or_path"})
    if (!inner.contains(top) && j.contains(top)) inner[top] = j[top];
  if (get_string(inner, path + "#/text_config", "model_type") != text_type)
    throw ShapeError(where(path + "#/text_config", "model_type") + ": expected '" + text_type +
                     "'");
  return parse_hf_config(inner.dump(), path + "#/text_config");
}

}  // namespace

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
  // Llama4ForConditionalGeneration's config.json: Llama4ForCausalLM is built from its
  // text_config (llama4_text). Gemma3ForConditionalGeneration's (Gemma3Config): likewise
  // gemma3_text. Neither vision_config (Llama 4's vision tower, Gemma 3's SigLIP) is read.
  if (type == "llama4") return read_text_config(j, path, type, "llama4_text");
  if (type == "gemma3") return read_text_config(j, path, type, "gemma3_text");
  if (type == "gemma3_text") gemma3_defaults(j);
  if (type == "qwen2_5_vl") return read_qwen2_5_vl(j, path);
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
    // its weights, added inside the projections), Gemma 2's extra norms and soft-capping.
    // Mistral's and Gemma 2's sliding windows are read (read_sliding_window).
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
    const bool ties_by_default = type == "gemma" || type == "gemma2" || type == "gemma3_text";
    m.tied_embeddings = get_bool(j, path, "tie_word_embeddings", ties_by_default);
    if (type == "mistral" || type == "gemma2")
      read_sliding_window(j, path, type == "mistral" ? 1 : 2, m);
    if (type == "gemma3_text") read_gemma3_window(j, path, m);
    if (supported_moe_family(type)) read_moe_family(j, path, type, m);
  }
  try {
    check_shape(m);
  } catch (const ShapeError& e) {
    throw ShapeError(path + ": " + e.what());
  }
  return m;
}

}  // namespace bmpipe
