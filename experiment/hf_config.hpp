#pragma once
/// \file
/// HuggingFace's config.json as a ModelShape: the framework reader the config layer needs
/// to take `model: {hf_config: ...}`, so it sits below experiment/ and depends on sim/
/// only. The only nlohmann-json user among the libraries the engine and the config layer
/// link.

#include <string>

#include "sim/cost/model_shape.hpp"

namespace bmpipe {

/// Reads a HuggingFace config.json. Llama and its relatives (model_type llama, mistral,
/// qwen2, gemma, gemma2, and any other with these names): hidden_size, num_hidden_layers,
/// num_attention_heads, num_key_value_heads, head_dim, intermediate_size, vocab_size,
/// tie_word_embeddings (default false; true for gemma, gemma2 and gemma3_text, as their HF
/// config classes default it); gpt2: n_embd, n_layer, n_head, n_inner, vocab_size. Gemma 3
/// (gemma3_text, or gemma3's text_config): five sliding-window layers to one global
/// (ModelShape::full_every, sliding_window_pattern), q and k norms.
/// Mixtures of experts (ModelShape::moe): mixtral and gpt_oss (num_local_experts,
/// num_experts_per_tok; gpt_oss's biases, attention sinks and alternating sliding window),
/// llama4 (its text_config: interleaved MoE layers with a shared expert, chunked attention
/// on the RoPE layers, ModelShape::chunked_window, and global NoPE layers, full_every),
/// qwen2_moe and qwen3_moe (num_experts, moe_intermediate_size, shared expert,
/// decoder_sparse_step, mlp_only_layers), deepseek_v3 (n_routed_experts, n_shared_experts,
/// first_k_dense_replace, multi-latent attention ranks, num_nextn_predict_layers),
/// deepseek_v32 (DeepSeek-V3.2: deepseek_v3's fields and DeepSeek sparse attention's
/// index_n_heads, index_head_dim, index_topk; ModelShape::dsa). Any other
/// config with experts (num_local_experts, num_experts, n_routed_experts, ...) or of
/// another MoE family is refused. Throws ShapeError naming the missing or malformed field.
ModelShape read_hf_config(const std::string& path);
/// The same from the file's text; `name` stands for the file in messages.
ModelShape parse_hf_config(const std::string& text, const std::string& name);

}  // namespace bmpipe
