#include "frameworks/torchtitan/flavors.hpp"

#include <array>
#include <tuple>

#include "experiment/hf_config.hpp"

// Sources (read, not copied), pytorch/torchtitan at v0.2.2 (73a0e6979dd1):
//  [TT-llama]  torchtitan/models/llama3/__init__.py, llama3_args: "8B" dim 4096, n_layers 32,
//              n_heads 32, n_kv_heads 8, ffn_dim_multiplier 1.3, multiple_of 1024; "70B" dim
//              8192, n_layers 80, n_heads 64, n_kv_heads 8, ffn_dim_multiplier 1.3,
//              multiple_of 4096; "405B" dim 16384, n_layers 126, n_heads 128, n_kv_heads 8,
//              ffn_dim_multiplier 1.2, multiple_of 4096; vocab_size 128256 (the default of
//              torchtitan/models/llama3/model/args.py, TransformerModelArgs); untied output.
//  [TT-ffn]    torchtitan/models/llama3/model/model.py, FeedForward: hidden_dim = 4 * dim,
//              int(2 * hidden_dim / 3), int(ffn_dim_multiplier * hidden_dim), rounded up to
//              a multiple of multiple_of: 14336 (8B), 28672 (70B), 53248 (405B).
//  [TT-dsv3]   torchtitan/models/deepseek_v3/__init__.py, deepseekv3_args: "16B" vocab 102400,
//              dim 2048, inter_dim 10944, moe_inter_dim 1408, n_layers 27, n_dense_layers 1,
//              n_heads 16, 64 experts, 2 shared, top_k 6, q_lora_rank 0, kv_lora_rank 512,
//              qk_nope_head_dim 128, qk_rope_head_dim 64, v_head_dim 128; "671B" vocab 129280,
//              dim 7168, inter_dim 18432, moe_inter_dim 2048, n_layers 61, n_dense_layers 3,
//              n_heads 128, 256 experts, 1 shared, top_k 8, num_expert_groups 8,
//              num_limited_groups 4, q_lora_rank 1536, the same MLA dims. Both use
//              attn_type "flex". torchtitan/models/moe/moe.py, MoEArgs: load_balance_coeff
//              1e-3 adds the per-expert routing bias (HF's topk_method noaux_tc). Its
//              DeepSeek-V3 has no multi-token prediction module (no MTP layers).

namespace bmpipe {

namespace {

// clang-format off
constexpr std::array kFlavors = {
    TorchTitanFlavor{"llama3", "8B", "llama3-8b",
        R"({"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32,
            "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
            "vocab_size": 128256, "tie_word_embeddings": false})", ""},
    TorchTitanFlavor{"llama3", "70B", "llama3-70b",
        R"({"model_type": "llama", "hidden_size": 8192, "num_hidden_layers": 80,
            "num_attention_heads": 64, "num_key_value_heads": 8, "intermediate_size": 28672,
            "vocab_size": 128256, "tie_word_embeddings": false})", ""},
    TorchTitanFlavor{"llama3", "405B", "llama3-405b",
        R"({"model_type": "llama", "hidden_size": 16384, "num_hidden_layers": 126,
            "num_attention_heads": 128, "num_key_value_heads": 8, "intermediate_size": 53248,
            "vocab_size": 128256, "tie_word_embeddings": false})", ""},
    TorchTitanFlavor{"deepseek_v3", "16B", "deepseek-v3-16b",
        R"({"model_type": "deepseek_v3", "hidden_size": 2048, "num_hidden_layers": 27,
            "num_attention_heads": 16, "num_key_value_heads": 16, "intermediate_size": 10944,
            "moe_intermediate_size": 1408, "vocab_size": 102400, "n_routed_experts": 64,
            "n_shared_experts": 2, "num_experts_per_tok": 6, "first_k_dense_replace": 1,
            "moe_layer_freq": 1, "topk_method": "noaux_tc", "q_lora_rank": null,
            "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
            "v_head_dim": 128, "num_nextn_predict_layers": 0, "tie_word_embeddings": false})",
        "torchtitan runs DeepSeek-V3's attention with FlexAttention (attn_type flex); bmpipe "
        "costs it as FlashAttention."},
    TorchTitanFlavor{"deepseek_v3", "671B", "deepseek-v3-671b",
        R"({"model_type": "deepseek_v3", "hidden_size": 7168, "num_hidden_layers": 61,
            "num_attention_heads": 128, "num_key_value_heads": 128, "intermediate_size": 18432,
            "moe_intermediate_size": 2048, "vocab_size": 129280, "n_routed_experts": 256,
            "n_shared_experts": 1, "num_experts_per_tok": 8, "first_k_dense_replace": 3,
            "moe_layer_freq": 1, "topk_method": "noaux_tc", "n_group": 8, "topk_group": 4,
            "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128,
            "qk_rope_head_dim": 64, "v_head_dim": 128, "num_nextn_predict_layers": 0,
            "tie_word_embeddings": false})",
        "torchtitan runs DeepSeek-V3's attention with FlexAttention (attn_type flex); bmpipe "
        "costs it as FlashAttention."},
};
// clang-format on

}  // namespace

std::span<const TorchTitanFlavor> torchtitan_flavors() {
  return kFlavors;
}

const TorchTitanFlavor* find_torchtitan_flavor(std::string_view model, std::string_view flavor) {
  for (const TorchTitanFlavor& f : kFlavors)
    if (f.model == model && f.flavor == flavor) return &f;
  return nullptr;
}

ModelShape torchtitan_shape(const TorchTitanFlavor& f) {
  ModelShape m = parse_hf_config(
      std::string(f.hf_json), "torchtitan " + std::string(f.model) + " " + std::string(f.flavor));
  m.name = std::string(f.label);
  return m;
}

namespace {

auto moe_fields(const MoeShape& e) {
  return std::tie(e.num_experts, e.top_k, e.expert_ffn, e.shared_ffn, e.shared_gate, e.router_bias,
                  e.expert_bias, e.router_score_bias, e.first_dense_layers, e.sparse_step,
                  e.sparse_offset, e.dense_layers, e.load_imbalance, e.router_groups,
                  e.router_group_top_k);
}

auto mla_fields(const MlaShape& a) {
  return std::tie(a.q_lora_rank, a.kv_lora_rank, a.qk_nope_head_dim, a.qk_rope_head_dim,
                  a.v_head_dim);
}

auto shape_fields(const ModelShape& m) {
  return std::tie(m.architecture, m.num_layers, m.hidden_size, m.num_attention_heads,
                  m.num_kv_heads, m.ffn_hidden_size, m.vocab_size, m.tied_embeddings,
                  m.flash_attention, m.dropout, m.explicit_head_dim, m.attention_bias, m.qkv_bias,
                  m.qk_norm, m.attention_sinks, m.sliding_window, m.sliding_every, m.full_every,
                  m.chunked_window, m.post_norms, m.mtp_layers, m.hybrid_pattern,
                  m.attention_output_gate, m.mlp_activation, m.rotary);
}

}  // namespace

bool same_model_shape(const ModelShape& a, const ModelShape& b) {
  return shape_fields(a) == shape_fields(b) && moe_fields(a.moe) == moe_fields(b.moe) &&
         mla_fields(a.mla) == mla_fields(b.mla) && a.mamba.num_heads == b.mamba.num_heads &&
         a.gdn.key_heads == b.gdn.key_heads;
}

const TorchTitanFlavor* torchtitan_flavor_of(const ModelShape& m) {
  for (const TorchTitanFlavor& f : kFlavors)
    if (same_model_shape(torchtitan_shape(f), m)) return &f;
  return nullptr;
}

std::string torchtitan_flavor_names() {
  std::string out;
  std::string_view model;
  for (const TorchTitanFlavor& f : kFlavors) {
    if (f.model != model) {
      out += (out.empty() ? "" : "; ") + std::string(f.model) + " ";
      model = f.model;
    } else {
      out += ", ";
    }
    out += f.flavor;
  }
  return out;
}

}  // namespace bmpipe
