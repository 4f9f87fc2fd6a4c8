#pragma once
/// \file
/// The shape of a decoder-only transformer: what the analytic cost model needs instead of
/// measured layer timings. Comes from a preset, from explicit YAML fields, or from a
/// HuggingFace config.json (frameworks/hf/hf_config.hpp reads those).

#include <stdexcept>
#include <string>

namespace bmpipe {

/// llama: RMSNorm, RoPE, SwiGLU MLP (gate, up, down), grouped-query attention, no biases or
/// dropout; layers as HF transformers' LlamaDecoderLayer runs them (unfused norms).
/// gpt: LayerNorm, learned positions, GeLU MLP, biases and dropout; layers as Megatron-LM
/// runs them (fused LayerNorm, bias-GeLU and bias-dropout-add kernels).
enum class Architecture { llama, gpt };

std::string to_string(Architecture a);

struct ModelShape {
  std::string name = "model";
  Architecture architecture = Architecture::llama;
  int num_layers = 0;
  int hidden_size = 0;
  int num_attention_heads = 0;
  int num_kv_heads = 0;  ///< < num_attention_heads: grouped-query attention
  int ffn_hidden_size = 0;
  int vocab_size = 0;
  bool tied_embeddings = false;
  /// Fused attention that never stores the s x s score matrix (FlashAttention, PyTorch
  /// SDPA). False: the Megatron-style unfused core (QK^T, softmax, dropout, xV) whose
  /// saved scores give Korthikanti's 5as/h term.
  bool flash_attention = true;
  /// Dropout after attention probabilities, attention output and MLP (keeps 1-byte masks).
  bool dropout = false;
  /// The width of one attention head when the model sets it apart from the hidden size
  /// (HF config.json head_dim: Gemma 7B has 16 heads of 256 over a hidden size of 3072);
  /// 0: hidden_size / num_attention_heads. The q and output projections are
  /// hidden_size x num_attention_heads * head_dim().
  int explicit_head_dim = 0;

  int head_dim() const {
    return explicit_head_dim > 0 ? explicit_head_dim : hidden_size / num_attention_heads;
  }
  /// Parameters of one decoder layer (weights, biases, norm scales).
  long long layer_params() const;
  /// Word embedding (vocab x hidden), plus learned positions for gpt at `seq_length`.
  long long embedding_params(int seq_length) const;
};

/// Thrown for an unusable shape or HF config; the config loader adds file and line.
struct ShapeError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// The preset called `name` (llama2-7b, llama2-13b, llama2-70b, llama3-8b, llama3-70b,
/// gpt3-175b), or nullptr.
const ModelShape* find_model_preset(const std::string& name);
std::string model_preset_names();

/// Checks that the numbers make a layer (positive, heads divide hidden unless the head
/// dimension is explicit, kv heads divide heads). Throws ShapeError naming the field.
void check_shape(const ModelShape& shape);

}  // namespace bmpipe
