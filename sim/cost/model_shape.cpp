#include "sim/cost/model_shape.hpp"

#include <algorithm>
#include <array>
#include <string_view>

namespace bmpipe {

std::string to_string(Architecture a) {
  return a == Architecture::llama ? "llama" : "gpt";
}

long long ModelShape::layer_params() const {
  const long long h = hidden_size, f = ffn_hidden_size;
  const long long q = static_cast<long long>(num_attention_heads) * head_dim();
  const long long kv = static_cast<long long>(num_kv_heads) * head_dim();
  if (architecture == Architecture::llama)
    // q, o: h x q; k, v: h x kv; gate, up (or fc1), down: h x f; two RMSNorm scales.
    return 2 * h * q + 2 * h * kv + (mlp_in_factor() + 1) * h * f + (post_norms ? 4 : 2) * h;
  // qkv with biases, o with bias, fc1/fc2 with biases, two LayerNorms (scale + bias).
  return (h * (q + 2 * kv) + q + 2 * kv) + (q * h + h) + (h * f + f) + (f * h + h) + 4 * h;
}

long long ModelShape::embedding_params(int seq_length) const {
  long long p = static_cast<long long>(vocab_size) * hidden_size;
  if (architecture == Architecture::gpt) p += static_cast<long long>(seq_length) * hidden_size;
  return p;
}

bool ModelShape::is_moe_layer(int i) const {
  if (is_hybrid()) return moe.num_experts > 0 && hybrid_kind(i) == HybridKind::moe;
  if (moe.num_experts <= 0 || i < moe.first_dense_layers) return false;
  if ((i + moe.sparse_offset) % std::max(moe.sparse_step, 1) != 0) return false;
  return std::find(moe.dense_layers.begin(), moe.dense_layers.end(), i) == moe.dense_layers.end();
}

long long ModelShape::attention_params() const {
  const long long h = hidden_size;
  const bool llama = architecture == Architecture::llama;
  // RMSNorm scale (and post_norms' second); LayerNorm scale and bias.
  const long long norm = llama ? (post_norms ? 2 * h : h) : 2 * h;
  if (is_mla()) {
    // HF DeepseekV3Attention: q_a_proj (h -> q_lora_rank), q_a_layernorm, q_b_proj
    // (-> heads x (nope + rope)), or q_proj when q_lora_rank is 0; kv_a_proj_with_mqa
    // (h -> kv_lora_rank + rope), kv_a_layernorm, kv_b_proj (-> heads x (nope + v));
    // o_proj (heads x v -> h).
    const long long heads = num_attention_heads, ql = mla.q_lora_rank, kvl = mla.kv_lora_rank;
    const long long qk = mla.qk_nope_head_dim + mla.qk_rope_head_dim;
    const long long q = ql > 0 ? h * ql + ql + ql * heads * qk : h * heads * qk;
    const long long kv = h * (kvl + mla.qk_rope_head_dim) + kvl +
                         kvl * heads * (mla.qk_nope_head_dim + mla.v_head_dim);
    // DSA (ModelShape::dsa): the indexer's weights beside them.
    const long long indexer = is_dsa() ? dsa.params(h, ql > 0 ? ql : h) : 0;
    return q + kv + heads * mla.v_head_dim * h + norm + indexer;
  }
  const long long q = static_cast<long long>(num_attention_heads) * head_dim();
  const long long kv = static_cast<long long>(num_kv_heads) * head_dim();
  long long p = 2 * h * q + 2 * h * kv + norm;
  if (attention_output_gate) p += h * q;  // q_proj's gate half
  if (!llama || attention_bias)
    p += q + 2 * kv + h;  // q, k, v and output biases
  else if (qkv_bias)
    p += q + 2 * kv;
  if (qk_norm) p += 2LL * head_dim();
  if (attention_sinks) p += num_attention_heads;
  return p;
}

long long ModelShape::dense_mlp_params() const {
  const long long h = hidden_size, f = ffn_hidden_size;
  if (architecture == Architecture::llama)  // gate and up (or fc1), down; norm
    return (mlp_in_factor() + 1) * h * f + (post_norms ? 2 * h : h);
  return (h * f + f) + (f * h + h) + 2 * h;  // fc1, fc2; LayerNorm
}

long long ModelShape::moe_mlp_params(bool active) const {
  const long long h = hidden_size, e = moe.num_experts, ef = moe.expert_ffn;
  long long router = h * e + (moe.router_bias ? e : 0) + (moe.router_score_bias ? e : 0);
  const long long in = mlp_in_factor();
  // A latent MoE's experts read and write latent_size columns (MoeShape::latent_size), and
  // fc1_latent_proj (h -> latent) and fc2_latent_proj (latent -> h), without biases
  // (Nemotron 3 Super's add_bias_linear false), sit beside the router.
  const long long x = moe.routed_width(hidden_size);
  const long long expert = (in + 1) * x * ef + (moe.expert_bias ? in * ef + x : 0);
  const long long shared = (in + 1) * h * moe.shared_ffn + (moe.shared_gate ? h : 0);
  const long long latent = moe.latent_size > 0 ? 2 * h * moe.latent_size : 0;
  // + the pre-MLP norm (and post_norms' norm of the MLP output)
  return router + latent + (active ? moe.top_k : e) * expert + shared + (post_norms ? 2 * h : h);
}

long long ModelShape::mamba_layer_params() const {
  const long long h = hidden_size, di = mamba.d_inner(), heads = mamba.num_heads;
  // Megatron-Core's MambaMixer (d98e8a64 megatron/core/ssm/mamba_mixer.py): in_proj without
  // bias (HF mamba_proj_bias false), conv1d weight [channels, 1, conv_kernel] and bias,
  // dt_bias, A_log and D one a head (D_has_hdim false), the gated RMSNorm's scale.
  return h + h * mamba.in_proj_cols() + mamba.conv_channels() * (mamba.conv_kernel + 1) +
         3 * heads + di + di * h;
}

long long ModelShape::gdn_layer_params() const {
  const long long h = hidden_size, kd = gdn.key_dim(), vd = gdn.value_dim(), vh = gdn.value_heads;
  // HF transformers' Qwen3NextGatedDeltaNet (read): in_proj_qkvz, in_proj_ba, conv1d over
  // q, k, v without bias, dt_bias and A_log, Qwen3NextRMSNormGated(head_v_dim), out_proj.
  return h + h * (2 * kd + 2 * vd) + h * 2 * vh + (2 * kd + vd) * gdn.conv_kernel + 2 * vh +
         gdn.value_head_dim + vd * h;
}

long long ModelShape::hybrid_block_params(HybridKind kind, bool active) const {
  switch (kind) {
    case HybridKind::mamba:
      return mamba_layer_params();
    case HybridKind::attention:
      return attention_params();
    case HybridKind::mlp:
      return dense_mlp_params();
    case HybridKind::moe:
      return moe_mlp_params(active);
    case HybridKind::gdn:
      return gdn_layer_params();
  }
  return 0;
}

long long ModelShape::decoder_layer_params(int i, bool active) const {
  if (is_hybrid()) return hybrid_block_params(hybrid_kind(i), active);
  return attention_params() + (is_moe_layer(i) ? moe_mlp_params(active) : dense_mlp_params());
}

long long ModelShape::mtp_module_params(bool active) const {
  // DeepSeek-V3 (HF checkpoint, model.layers.61): enorm, hnorm, eh_proj (2h -> h), one
  // decoder layer shaped like the last, and shared_head.norm; embed_tokens and
  // shared_head.head are the main model's. A hybrid model's block (Megatron-Bridge
  // 067f987d nemotron_h_bridge.py, mapping_registry's MTP entries: eh_proj, enorm, hnorm,
  // the blocks of mtp_hybrid_override_pattern, final_layernorm): the same norms and
  // eh_proj around one block a symbol of mtp_pattern.
  const long long h = hidden_size;
  long long layer = 0;
  if (!mtp_pattern.empty())
    for (const char symbol : mtp_pattern)
      layer += hybrid_block_params(static_cast<HybridKind>(symbol), active);
  else
    layer = decoder_layer_params(num_layers - 1, active);
  return layer + 3 * h + 2 * h * h;
}

long long ModelShape::mtp_params(bool active) const {
  if (mtp_layers <= 0) return 0;
  return (mtp_shared ? 1 : mtp_layers) * mtp_module_params(active);
}

long long ModelShape::total_params(bool active, int seq_length) const {
  const long long h = hidden_size, v = vocab_size;
  long long p = embedding_params(seq_length) + (architecture == Architecture::llama ? h : 2 * h);
  if (!tied_embeddings) p += v * h;
  for (int i = 0; i < num_layers; ++i) p += decoder_layer_params(i, active);
  return p + (vision.enabled() ? vision.params(hidden_size) : 0);
}

bool VisionShape::is_windowed_layer(int i) const {
  return window_size > 0 && std::find(full_attention_layers.begin(), full_attention_layers.end(),
                                      i) == full_attention_layers.end();
}

long long VisionShape::keys_per_patch(int i) const {
  return is_windowed_layer(i) ? std::min(window_patches(), patches_per_image())
                              : patches_per_image();
}

long long VisionShape::patch_embed_params() const {
  // Qwen2.5-VL's Conv3d(in_chans, hidden, kernel = stride = (temporal, patch, patch),
  // bias=False).
  return static_cast<long long>(in_channels) * temporal_patch * patch_size * patch_size *
         hidden_size;
}

long long VisionShape::encoder_layer_params() const {
  const long long h = hidden_size, f = ffn_hidden_size;
  const long long mlp = gated_mlp ? 2 * (h * f + f) + (f * h + h) : (h * f + f) + (f * h + h);
  return 2 * h + (3 * h * h + 3 * h) + (h * h + h) + mlp;
}

long long VisionShape::projector_params(int llm_hidden) const {
  const long long in = merge2() * hidden_size, w = projector_width(), out = llm_hidden;
  return hidden_size + (in * w + w) + (w * out + out);
}

long long VisionShape::params(int llm_hidden) const {
  return patch_embed_params() + layers * encoder_layer_params() + projector_params(llm_hidden);
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
  if (m.post_norms && (m.architecture != Architecture::llama || m.is_hybrid()))
    throw ShapeError(
        "post_norms (Gemma's norms of the attention and MLP outputs) are modelled for llama "
        "decoder layers alone, not for a gpt or hybrid model");
  if (m.is_moe()) {
    positive(m.moe.top_k, "num_experts_per_tok");
    positive(m.moe.expert_ffn, "moe_intermediate_size");
    positive(m.moe.sparse_step, "decoder_sparse_step");
    if (m.moe.top_k > m.moe.num_experts)
      throw ShapeError("num_experts_per_tok = " + std::to_string(m.moe.top_k) +
                       " is more than the " + std::to_string(m.moe.num_experts) + " experts");
    if (m.moe.shared_ffn < 0 || m.moe.first_dense_layers < 0)
      throw ShapeError("shared expert size and first dense layers cannot be negative");
    if (!(m.moe.load_imbalance >= 1.0 && m.moe.load_imbalance <= 1e6))
      throw ShapeError("load_imbalance (max / mean expert load) must be at least 1");
    // Megatron-LM's arguments.py asserts moe_latent_size > 0; a latent as wide as the
    // hidden state compresses nothing.
    if (m.moe.latent_size < 0 || m.moe.latent_size >= m.hidden_size)
      throw ShapeError(
          "latent_size = " + std::to_string(m.moe.latent_size) +
          " must be between 1 and hidden_size - 1 = " + std::to_string(m.hidden_size - 1) +
          ": the latent projection must compress the hidden state");
  } else if (m.moe.latent_size != 0) {
    throw ShapeError("latent_size = " + std::to_string(m.moe.latent_size) +
                     " projects the routed experts' tokens, but the model has no experts");
  }
  if (m.is_mla()) {
    positive(m.mla.qk_nope_head_dim, "qk_nope_head_dim");
    positive(m.mla.qk_rope_head_dim, "qk_rope_head_dim");
    positive(m.mla.v_head_dim, "v_head_dim");
    if (m.mla.q_lora_rank < 0) throw ShapeError("q_lora_rank must be 0 (no q compression) or more");
    if (m.mla.kv_lora_rank > m.hidden_size || m.mla.q_lora_rank > m.hidden_size)
      throw ShapeError("kv_lora_rank = " + std::to_string(m.mla.kv_lora_rank) +
                       " and q_lora_rank = " + std::to_string(m.mla.q_lora_rank) +
                       " must not exceed hidden_size = " + std::to_string(m.hidden_size) +
                       ": a low-rank projection narrower than what it compresses");
  }
  if (m.is_dsa() || m.dsa.index_head_dim != 0 || m.dsa.index_topk != 0) {
    // Megatron-Core builds DSA only over MLA (DSAttention under AbsorbedMLASelfAttention,
    // experimental_attention_variant_module_specs.py get_dsa_module_spec_for_backend).
    if (!m.is_mla())
      throw ShapeError(
          "dsa: DeepSeek sparse attention is built on multi-latent attention "
          "(model.mla with kv_lora_rank), which the model does not have");
    positive(m.dsa.index_heads, "dsa.index_n_heads");
    positive(m.dsa.index_head_dim, "dsa.index_head_dim");
    positive(m.dsa.index_topk, "dsa.index_topk");
    // DSAIndexer._apply_rope splits each head into the rotary part and the rest.
    if (m.dsa.index_head_dim < m.mla.qk_rope_head_dim)
      throw ShapeError(
          "dsa.index_head_dim = " + std::to_string(m.dsa.index_head_dim) +
          " is narrower than qk_rope_head_dim = " + std::to_string(m.mla.qk_rope_head_dim) +
          ": the indexer rotates the first qk_rope_head_dim of each head");
  }
  if (m.num_attention_heads % m.num_kv_heads != 0)
    throw ShapeError(
        "num_kv_heads = " + std::to_string(m.num_kv_heads) +
        " does not divide num_attention_heads = " + std::to_string(m.num_attention_heads));
  check_hybrid(m);
  check_vision(m);
}

void check_vision(const ModelShape& m) {
  const VisionShape& v = m.vision;
  if (!v.enabled()) return;
  const auto positive = [](long long value, const char* field) {
    if (value < 1)
      throw ShapeError("vision." + std::string(field) + ": must be at least 1, got " +
                       std::to_string(value));
  };
  positive(v.hidden_size, "hidden_size");
  positive(v.num_heads, "num_heads");
  positive(v.ffn_hidden_size, "ffn_hidden_size");
  positive(v.patch_size, "patch_size");
  positive(v.temporal_patch, "temporal_patch");
  positive(v.in_channels, "in_channels");
  positive(v.spatial_merge, "spatial_merge");
  positive(v.images_per_sample, "images_per_sample");
  positive(v.image_tokens, "image_tokens");
  if (v.hidden_size % v.num_heads != 0)
    throw ShapeError("vision.num_heads: " + std::to_string(v.num_heads) +
                     " does not divide vision.hidden_size = " + std::to_string(v.hidden_size));
  if (v.window_size < 0) throw ShapeError("vision.window_size: must be 0 (none) or more pixels");
  // Qwen2.5-VL's get_window_index tiles windows of whole merged patches
  // (vit_merger_window_size = window_size // spatial_merge_size // patch_size).
  const long long unit = static_cast<long long>(v.patch_size) * v.spatial_merge;
  if (v.window_size > 0 && v.window_size % unit != 0)
    throw ShapeError("vision.window_size: " + std::to_string(v.window_size) +
                     " pixels is not a whole number of merged patches (patch_size x "
                     "spatial_merge = " +
                     std::to_string(unit) + " pixels)");
  if (v.window_size == 0 && !v.full_attention_layers.empty())
    throw ShapeError(
        "vision.full_attention_layers: names the layers that attend to the whole image, but "
        "there are no windows: give vision.window_size, or leave the list out");
  for (int i : v.full_attention_layers)
    if (i < 0 || i >= v.layers)
      throw ShapeError("vision.full_attention_layers: layer " + std::to_string(i) +
                       " does not exist (the encoder has layers 0 to " +
                       std::to_string(v.layers - 1) + ")");
}

void check_hybrid(const ModelShape& m) {
  if (!m.is_hybrid()) {
    if (!m.mtp_pattern.empty())
      throw ShapeError("mtp_pattern '" + m.mtp_pattern +
                       "' is a hybrid model's MTP block: give hybrid_pattern, or leave it out "
                       "for DeepSeek-V3's MTP module");
    return;
  }
  const std::string& p = m.hybrid_pattern;
  for (std::size_t i = 0; i < p.size(); ++i)
    if (std::string_view(kHybridSymbols).find(p[i]) == std::string_view::npos) {
      // Megatron-Core's other symbols (hybrid_layer_allocation.Symbols at d98e8a64), named.
      // D is an MLA block with DeepSeek sparse attention: model.dsa costs it in decoder
      // layers, but a hybrid's attention blocks are not MLA (+ below).
      const char* known = p[i] == 'D'   ? " (DeepSeek sparse attention over MLA: modelled in "
                                          "decoder layers, model.dsa, not as a hybrid block, "
                                          "whose attention is not MLA)"
                          : p[i] == '+' ? " (MLA in a hybrid, not modelled yet)"
                          : p[i] == '|' ? " (pipeline stage boundaries: use training.partition)"
                          : p[i] == '/' ? " (MTP patterns: use model.mtp_layers)"
                                        : "";
      throw ShapeError("hybrid_pattern: symbol '" + std::string(1, p[i]) + "' at position " +
                       std::to_string(i) + known +
                       " is not one of M (Mamba-2), * (attention), "
                       "- (MLP), E (MoE), G (Gated DeltaNet)");
    }
  if (static_cast<int>(p.size()) != m.num_layers)
    throw ShapeError("hybrid_pattern has " + std::to_string(p.size()) +
                     " symbols but num_layers = " + std::to_string(m.num_layers) +
                     ": one symbol a layer");
  // The MTP block's pattern: the same symbols, its kinds held to the same checks below.
  const std::string& q = m.mtp_pattern;
  for (std::size_t i = 0; i < q.size(); ++i)
    if (std::string_view(kHybridSymbols).find(q[i]) == std::string_view::npos)
      throw ShapeError("mtp_pattern: symbol '" + std::string(1, q[i]) + "' at position " +
                       std::to_string(i) +
                       " is not one of M (Mamba-2), * (attention), - (MLP), E (MoE), G (Gated "
                       "DeltaNet)");
  if (m.mtp_layers > 0 && q.empty())
    throw ShapeError("mtp_layers = " + std::to_string(m.mtp_layers) +
                     " in a hybrid model needs the MTP block's layers: give mtp_pattern (HF "
                     "mtp_hybrid_override_pattern, Megatron's --mtp-hybrid-override-pattern)");
  const auto has = [&](char c) {
    return p.find(c) != std::string::npos || q.find(c) != std::string::npos;
  };
  if (has('E') && !m.is_moe())
    throw ShapeError(
        std::string(p.find('E') != std::string::npos ? "hybrid_pattern" : "mtp_pattern") +
        " has MoE layers (E) but the model has no experts (give model.moe)");
  if (has('M')) {
    const MambaShape& x = m.mamba;
    if (x.num_heads < 1 || x.head_dim < 1 || x.state_dim < 1 || x.groups < 1 || x.conv_kernel < 1 ||
        x.chunk_size < 1)
      throw ShapeError(
          "hybrid_pattern has Mamba layers (M): model.mamba needs num_heads, "
          "head_dim, state_dim, groups, conv_kernel and chunk_size of at least 1");
    // MambaMixer.__init__'s assertions (d98e8a64 megatron/core/ssm/mamba_mixer.py).
    if (x.num_heads % x.groups != 0)
      throw ShapeError("mamba.groups = " + std::to_string(x.groups) +
                       " does not divide mamba.num_heads = " + std::to_string(x.num_heads) +
                       " (Megatron: nheads must be evenly divisible by ngroups)");
  }
  if (has('G')) {
    const GdnShape& g = m.gdn;
    if (g.key_heads < 1 || g.key_head_dim < 1 || g.value_heads < 1 || g.value_head_dim < 1 ||
        g.conv_kernel < 1 || g.chunk_size < 1)
      throw ShapeError(
          "hybrid_pattern has Gated DeltaNet layers (G): model.gdn needs key_heads, "
          "key_head_dim, value_heads, value_head_dim, conv_kernel and chunk_size of "
          "at least 1");
    // Qwen3NextGatedDeltaNet repeats each key head over value_heads / key_heads value heads.
    if (g.value_heads % g.key_heads != 0)
      throw ShapeError("gdn.key_heads = " + std::to_string(g.key_heads) +
                       " does not divide gdn.value_heads = " + std::to_string(g.value_heads) +
                       " (each key head serves value_heads / key_heads value heads)");
  }
}

}  // namespace bmpipe
