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
/// tie_word_embeddings (default false; true for gemma and gemma2, as their HF config
/// classes default it); gpt2: n_embd, n_layer, n_head, n_inner, vocab_size. A
/// mixture-of-experts config (num_local_experts, num_experts, n_routed_experts, ...) is
/// refused. Throws ShapeError naming the missing or malformed field.
ModelShape read_hf_config(const std::string& path);
/// The same from the file's text; `name` stands for the file in messages.
ModelShape parse_hf_config(const std::string& text, const std::string& name);

}  // namespace bmpipe
