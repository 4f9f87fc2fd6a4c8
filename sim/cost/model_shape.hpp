#pragma once
/// \file
/// The shape of a decoder-only transformer: what the analytic cost model needs instead of
/// measured layer timings. Comes from a preset, from explicit YAML fields, or from a
/// HuggingFace config.json (experiment/hf_config.hpp reads those).

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace bmpipe {

/// llama: RMSNorm, RoPE, SwiGLU MLP (gate, up, down), grouped-query attention, no biases or
/// dropout; layers as HF transformers' LlamaDecoderLayer runs them (unfused norms).
/// gpt: LayerNorm, learned positions, GeLU MLP, biases and dropout; layers as Megatron-LM
/// runs them (fused LayerNorm, bias-GeLU and bias-dropout-add kernels).
enum class Architecture { llama, gpt };

std::string to_string(Architecture a);

/// The mixture-of-experts MLP of a decoder layer (num_experts 0: every layer is dense).
/// Which layers are MoE: layer i (0-based) when i >= first_dense_layers, (i + sparse_offset)
/// is a multiple of sparse_step and i is not in dense_layers. HF Qwen2-MoE / Qwen3-MoE:
/// offset 1 (`(layer_idx + 1) % decoder_sparse_step == 0`, `mlp_only_layers`); DeepSeek-V3:
/// offset 0 (`layer_idx >= first_k_dense_replace and layer_idx % moe_layer_freq == 0`).
struct MoeShape {
  int num_experts = 0;       ///< routed experts
  int top_k = 0;             ///< experts per token
  int expert_ffn = 0;        ///< one routed expert's intermediate size (gate, up, down)
  int shared_ffn = 0;        ///< all shared experts' intermediate size together (0: none)
  bool shared_gate = false;  ///< Qwen2-MoE: a sigmoid gate h -> 1 on the shared expert
  bool router_bias = false;  ///< gpt-oss: the router linear has a bias
  bool expert_bias = false;  ///< gpt-oss: gate_up and down carry biases
  /// DeepSeek-V3: the router's e_score_correction_bias, one value per expert.
  bool router_score_bias = false;
  int first_dense_layers = 0;
  int sparse_step = 1;
  int sparse_offset = 0;
  std::vector<int> dense_layers;  ///< Qwen mlp_only_layers
  /// max / mean tokens per expert: the busiest expert's GEMM sets the time (1: balanced).
  double load_imbalance = 1.0;
  /// Group-limited routing (DeepSeek-V3's n_group / topk_group; Megatron-LM's
  /// --moe-router-num-groups / --moe-router-group-topk): the experts form router_groups
  /// equal groups of consecutive experts and each token picks its top_k experts inside
  /// router_group_top_k of them. 0: routing over all experts. Only the deepep dispatcher's
  /// volume depends on it (CostSettings::moe_dispatcher).
  int router_groups = 0;
  int router_group_top_k = 0;
  /// A latent mixture of experts (Nemotron 3 Super's LatentMoE; Megatron-Core's
  /// moe_latent_size, HF moe_latent_size), 0: none. Megatron-Core's MoELayer (NVIDIA/
  /// Megatron-LM d98e8a64 megatron/core/transformer/moe/moe_layer.py) routes on the hidden
  /// state, then projects the tokens down, fc1_latent_proj h -> latent_size, before the
  /// dispatch; the routed experts run in the latent width (experts.py: linear_fc1
  /// latent_size -> ffn, linear_fc2 ffn -> latent_size); the all-to-all carries latent rows;
  /// fc2_latent_proj latent_size -> h follows the combine. Both projections are
  /// "duplicated" (every tp rank holds them whole, on its own tokens) and not experts'
  /// parameters; the shared experts stay in the hidden width (mlp.py: use_latent_size only
  /// when is_expert). Between 1 and hidden_size - 1.
  int latent_size = 0;
  /// The width the routed experts and the dispatch run in: latent_size, or `hidden`.
  int routed_width(int hidden) const { return latent_size > 0 ? latent_size : hidden; }
};

/// DeepSeek's multi-head latent attention (q_lora_rank 0: q is projected directly).
struct MlaShape {
  int q_lora_rank = 0;
  int kv_lora_rank = 0;  ///< 0: not MLA
  int qk_nope_head_dim = 0;
  int qk_rope_head_dim = 0;
  int v_head_dim = 0;
};

/// DeepSeek Sparse Attention (DeepSeek-V3.2-Exp and V3.2; DeepSeek-AI 2025, "DeepSeek-V3.2",
/// arXiv 2512.02556, sec. 2.1, eq. 1-2): MLA whose core attends, per query, only to the
/// index_topk keys a "lightning indexer" scores highest. The indexer (Megatron-Core's
/// DSAIndexer, NVIDIA/Megatron-LM d98e8a64 megatron/core/transformer/
/// experimental_attention_variant/dsa.py) projects the q latent to index_heads heads of
/// index_head_dim (linear_wq_b, q_lora_rank -> heads x dim; the hidden state when
/// q_lora_rank is 0), the hidden state to one shared key (linear_wk, h -> dim, then a
/// LayerNorm of dim) and to a weight per head (linear_weights_proj, h -> heads); RoPE on the
/// first qk_rope_head_dim of q and k, a Hadamard rotation; then
/// I(t, s) = sum_j w(t, j) ReLU(q(t, j) . k(s)) over every earlier key and a top-k. All three
/// projections are "duplicated": every tp rank holds them whole and runs them on all its
/// tokens. HF config.json: index_n_heads, index_head_dim, index_topk (V3.2: 64, 128, 2048);
/// Megatron-Core: dsa_indexer_n_heads, dsa_indexer_head_dim, dsa_indexer_topk.
struct DsaShape {
  int index_heads = 0;  ///< 0: no DSA (dense MLA)
  int index_head_dim = 0;
  int index_topk = 0;  ///< keys each query attends to (V3.2: 2048)
  /// The indexer trains by its own KL loss against the main attention over the selected keys,
  /// its input detached (the paper's sparse training stage; Megatron-Core's
  /// dsa_indexer_loss_coeff > 0 with dsa_indexer_use_sparse_loss). False: the top-k is found
  /// under no_grad and the indexer gets no gradient (its weights frozen, coeff 0).
  bool indexer_loss = true;
  /// The indexer's parameters in one layer: linear_wq_b, linear_wk, the key LayerNorm (scale
  /// and bias) and linear_weights_proj; `q_in` the width of linear_wq_b's input.
  long long params(long long hidden, long long q_in) const {
    const long long H = index_heads, d = index_head_dim;
    return q_in * H * d + hidden * d + 2 * d + hidden * H;
  }
};

/// The Mamba-2 mixer of a hybrid model's M layers (Dao and Gu 2024, "Transformers are SSMs",
/// arXiv 2405.21060; Megatron-Core's MambaMixer, NVIDIA/Megatron-LM d98e8a64
/// megatron/core/ssm/mamba_mixer.py). d_inner = num_heads x head_dim; in_proj h ->
/// [z, x, B, C, dt] = 2 d_inner + 2 groups x state_dim + num_heads columns; a causal conv1d
/// of conv_kernel taps over x, B and C; the SSD scan in chunks of chunk_size tokens; a gated
/// RMSNorm over d_inner (groups of d_inner / groups); out_proj d_inner -> h.
struct MambaShape {
  int num_heads = 0;     ///< 0: no Mamba layers (HF mamba_num_heads, Megatron --mamba-num-heads)
  int head_dim = 64;     ///< HF mamba_head_dim, Megatron --mamba-head-dim
  int state_dim = 128;   ///< HF ssm_state_size, Megatron --mamba-state-dim
  int groups = 8;        ///< HF n_groups, Megatron --mamba-num-groups
  int conv_kernel = 4;   ///< HF conv_kernel (Megatron's d_conv)
  int chunk_size = 128;  ///< HF chunk_size (Megatron's MambaMixer chunk_size)
  long long d_inner() const { return static_cast<long long>(num_heads) * head_dim; }
  /// in_proj's output columns: z, x (d_inner each), B, C (groups x state_dim each), dt.
  long long in_proj_cols() const { return 2 * d_inner() + 2LL * groups * state_dim + num_heads; }
  /// conv1d's channels: x, B and C.
  long long conv_channels() const { return d_inner() + 2LL * groups * state_dim; }
};

/// The Gated DeltaNet mixer of a hybrid model's G layers (Yang, Kautz and Hatamizadeh 2025,
/// "Gated Delta Networks", arXiv 2412.06464; HF transformers' Qwen3NextGatedDeltaNet, read):
/// key heads of key_head_dim and value heads of value_head_dim (each key head shared by
/// value_heads / key_heads of them); in_proj_qkvz h -> 2 key_dim + 2 value_dim (q, k, v and
/// the output gate z), in_proj_ba h -> 2 value_heads (the beta and decay gates); a causal
/// conv1d without bias over q, k and v; the chunked gated delta rule in chunks of chunk_size
/// (flash-linear-attention's chunk_gated_delta_rule: 64); a gated RMSNorm a value head wide;
/// out_proj value_dim -> h.
struct GdnShape {
  int key_heads = 0;         ///< 0: no G layers (HF linear_num_key_heads)
  int key_head_dim = 128;    ///< HF linear_key_head_dim
  int value_heads = 0;       ///< HF linear_num_value_heads
  int value_head_dim = 128;  ///< HF linear_value_head_dim
  int conv_kernel = 4;       ///< HF linear_conv_kernel_dim
  int chunk_size = 64;       ///< flash-linear-attention's chunk (BT = 64)
  long long key_dim() const { return static_cast<long long>(key_heads) * key_head_dim; }
  long long value_dim() const { return static_cast<long long>(value_heads) * value_head_dim; }
};

/// A vision encoder feeding the LLM (a vision-language model; `layers` 0: none). A ViT
/// (Dosovitskiy et al. 2021, arXiv 2010.11929) as Qwen2.5-VL builds it (Bai et al. 2025,
/// arXiv 2502.13923, sec. 2.1; HF transformers' Qwen2_5_VisionTransformerPretrainedModel,
/// read): a patch embedding (a Conv3d whose stride is its kernel, in_channels x
/// temporal_patch x patch_size^2 -> hidden_size, no bias: one GEMM a patch), `layers`
/// pre-norm blocks (RMSNorm, qkv and proj with biases, bidirectional attention over one
/// image's patches or over a window of them, RMSNorm, an MLP with biases), then the
/// projector (Qwen2.5-VL's PatchMerger, LLaVA's MLP projector): RMSNorm, spatial_merge^2
/// neighbouring patches concatenated, fc1 -> projector_ffn, GELU, fc2 -> the LLM's hidden
/// size. Each image gives image_tokens LLM tokens, so image_tokens x spatial_merge^2
/// patches; the LLM's sequence (training.seq_length) holds the images_per_sample x
/// image_tokens image tokens with the text.
struct VisionShape {
  int layers = 0;           ///< encoder blocks (HF vision_config.depth)
  int hidden_size = 0;      ///< HF vision_config.hidden_size
  int num_heads = 0;        ///< HF vision_config.num_heads (head width hidden_size / num_heads)
  int ffn_hidden_size = 0;  ///< HF vision_config.intermediate_size
  /// The MLP: gated (SwiGLU: gate and up h -> ffn, down; Qwen2.5-VL) or fc1, GELU, fc2
  /// (ViT, CLIP, SigLIP).
  bool gated_mlp = true;
  int patch_size = 14;     ///< pixels a patch side (HF patch_size)
  int temporal_patch = 1;  ///< frames a patch spans (HF temporal_patch_size; Qwen2.5-VL 2)
  int in_channels = 3;     ///< HF in_chans
  int spatial_merge = 1;   ///< the projector merges merge x merge patches (HF spatial_merge_size)
  /// Window attention (Qwen2.5-VL): a window is window_size x window_size pixels, so
  /// (window_size / patch_size)^2 patches, and each patch attends to those of its window;
  /// the layers of full_attention_layers attend to the whole image. 0: every layer full.
  int window_size = 0;
  std::vector<int> full_attention_layers;  ///< HF fullatt_block_indexes (0-based)
  int projector_ffn = 0;  ///< the projector's fc1 width; 0: spatial_merge^2 x hidden_size
  int images_per_sample = 0;
  int image_tokens = 0;  ///< LLM tokens an image gives after the projector
  /// tp splits the encoder's heads and MLP and the projector's fc1 as Megatron-Core's
  /// layers do (true), or every tp rank runs the whole vision model on all the patches, as
  /// Megatron-Bridge runs HF's Qwen2.5-VL tower (false; NVIDIA-NeMo/Megatron-Bridge 067f987d
  /// src/megatron/bridge/models/qwen_vl/modeling_qwen25_vl.py builds
  /// Qwen2_5_VisionTransformerPretrainedModel on the first stage and hooks its parameters
  /// for tp gradient sync).
  bool tensor_parallel = true;

  bool enabled() const { return layers > 0; }
  long long merge2() const { return static_cast<long long>(spatial_merge) * spatial_merge; }
  long long patches_per_image() const { return image_tokens * merge2(); }
  long long patches_per_sample() const { return images_per_sample * patches_per_image(); }
  long long image_tokens_per_sample() const {
    return static_cast<long long>(images_per_sample) * image_tokens;
  }
  /// Patches of one window (window_size / patch_size a side); 0 without windows.
  long long window_patches() const {
    const long long side = window_size > 0 ? window_size / patch_size : 0;
    return side * side;
  }
  /// Whether encoder layer `i` attends within windows (not one of full_attention_layers).
  bool is_windowed_layer(int i) const;
  /// The keys each patch attends to in encoder layer `i`: its image's patches, or its
  /// window's (at most the image's).
  long long keys_per_patch(int i) const;
  long long projector_width() const {
    return projector_ffn > 0 ? projector_ffn : merge2() * hidden_size;
  }
  /// Parameters: the patch embedding; one encoder block (two RMSNorm scales, qkv and
  /// proj with biases, the MLP with biases); the projector into an LLM of `llm_hidden`
  /// (its RMSNorm, fc1 and fc2 with biases); all of it.
  long long patch_embed_params() const;
  long long encoder_layer_params() const;
  long long projector_params(int llm_hidden) const;
  long long params(int llm_hidden) const;
  /// Layer-table rows the vision model adds before the LLM's: its blocks and the projector.
  int rows() const { return enabled() ? layers + 1 : 0; }
};

/// The MLP's activation (llama architecture): swiglu, the gated SiLU of gate and up (an MLP
/// of h -> 2 ffn -> h); relu2, squared ReLU without a gate (h -> ffn -> h: Nemotron-H and
/// Nemotron 3, HF mlp_hidden_act "relu2", Megatron --squared-relu). Also the experts' and the
/// shared expert's.
enum class MlpActivation { swiglu, relu2 };

/// The kind of one layer of a hybrid model, by its symbol in the pattern (Megatron-Core's
/// hybrid_layer_allocation.Symbols, NVIDIA/Megatron-LM d98e8a64
/// megatron/core/models/hybrid/hybrid_layer_allocation.py): each such layer is one block
/// with its own pre-norm and residual add.
enum class HybridKind : char { mamba = 'M', attention = '*', mlp = '-', moe = 'E', gdn = 'G' };
/// "M*-EG": the symbols bmpipe models (Megatron's D and + are refused by name).
inline constexpr const char* kHybridSymbols = "M*-EG";
inline constexpr std::size_t kHybridKinds = std::string_view(kHybridSymbols).size();

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

  /// Mixture of experts (num_experts 0: dense), multi-latent attention (kv_lora_rank 0:
  /// not MLA).
  MoeShape moe;
  MlaShape mla;
  /// DeepSeek Sparse Attention over the MLA (index_heads 0: dense MLA).
  DsaShape dsa;
  /// q, k, v and output projections with biases (gpt-oss); q/k/v biases only (Qwen2).
  bool attention_bias = false;
  bool qkv_bias = false;
  /// Per-head RMSNorm of q and k (Qwen3): head_dim scales each.
  bool qk_norm = false;
  /// gpt-oss: a learned sink logit per head.
  bool attention_sinks = false;
  /// Sliding-window attention width in tokens (0: none) and which layers use it: every
  /// `sliding_every`-th layer counted from layer 0 (gpt-oss alternates: 2; 1: all of them,
  /// as Mistral 7B v0.1 and Mixtral's config give it). A query sees itself and the
  /// sliding_window - 1 tokens before it: HF transformers' sliding mask (kv_idx > q_idx -
  /// sliding_window), which Megatron-Core writes as --window-size sliding_window - 1,0
  /// (Megatron-Bridge 067f987d, models/conversion/utils.py mcore_to_hf_window_size).
  int sliding_window = 0;
  int sliding_every = 0;
  /// The other way to pick the windowed layers: layer i attends to the whole sequence when
  /// (i + 1) % full_every == 0 and through the window otherwise (0: sliding_every picks).
  /// Gemma 3: 6, five local layers to one global (HF Gemma3TextConfig.sliding_window_pattern);
  /// Llama 4: 4, the NoPE layers global (HF Llama4TextConfig.no_rope_layer_interval);
  /// Megatron's --window-attn-skip-freq N (is_layer_window_attention: layer_number % N != 0,
  /// 1-based). At most one of sliding_every and full_every is set.
  int full_every = 0;
  /// The window is chunked rather than sliding (Llama 4's attention_chunk_size): the sequence
  /// splits into aligned chunks of sliding_window tokens, and a query sees the keys of its own
  /// chunk up to itself (HF transformers' chunked causal mask: kv_idx // W == q_idx // W).
  bool chunked_window = false;
  /// Two more RMSNorms a decoder layer, of the attention output and of the MLP output, each
  /// before its residual add (Gemma 2 and 3's post_attention_layernorm and
  /// post_feedforward_layernorm beside input_layernorm and pre_feedforward_layernorm; HF
  /// transformers' Gemma3DecoderLayer): a scale of hidden_size each, and two more
  /// memory-bound passes over the hidden state. Llama architecture, not hybrid.
  bool post_norms = false;
  /// DeepSeek-V3's multi-token-prediction modules (num_nextn_predict_layers): each is one
  /// more decoder layer (MoE where the model's last layer is) plus two RMSNorms and an
  /// eh_proj 2h -> h; it shares the embedding and the output head with the main model.
  /// A hybrid model's (mtp_pattern): the depths its MTP block runs (Megatron-Core's
  /// mtp_num_layers).
  int mtp_layers = 0;
  /// A hybrid model's MTP block (Megatron-Core's mtp_hybrid_override_pattern, HF NemotronH's
  /// mtp_hybrid_override_pattern; NVIDIA/Megatron-LM d98e8a64 megatron/core/models/hybrid/
  /// hybrid_layer_specs.py _hybrid_mtp_block_spec): enorm, hnorm and eh_proj as DeepSeek-V3's
  /// module, then one block of each symbol of this pattern ("*E": an attention block and an
  /// MoE block), then its final norm and the shared head. Empty: the DeepSeek-V3 module
  /// (a non-hybrid model).
  std::string mtp_pattern;
  /// The MTP depths share one block's weights (Megatron-Core's mtp_use_repeated_layer,
  /// multi_token_prediction.py: one layer built, applied mtp_layers times; Megatron-Bridge's
  /// NemotronHBridge turns it on unless the HF config says otherwise): the parameters are
  /// counted once, the time mtp_layers times.
  bool mtp_shared = false;

  /// A hybrid model's layers, one symbol each (HybridKind; Megatron-LM's
  /// --hybrid-override-pattern, HF NemotronH's hybrid_override_pattern): "MEM*EM..." has
  /// num_layers symbols. Empty: every layer is a transformer decoder layer (attention + MLP).
  std::string hybrid_pattern;
  MambaShape mamba;
  GdnShape gdn;
  /// A vision-language model's vision encoder and projector (vision.layers 0: none).
  VisionShape vision;
  /// A sigmoid gate on the attention output, from a second half of q_proj (Qwen3-Next's
  /// attn_output_gate: q_proj h -> 2 x heads x head_dim).
  bool attention_output_gate = false;
  MlpActivation mlp_activation = MlpActivation::swiglu;
  /// RoPE on q and k (llama architecture). Nemotron-H has no position embedding
  /// (Megatron-Bridge's NemotronHBridge sets position_embedding_type "none").
  bool rotary = true;

  bool is_hybrid() const { return !hybrid_pattern.empty(); }
  /// Layer `i`'s kind in a hybrid model (is_hybrid()).
  HybridKind hybrid_kind(int i) const { return static_cast<HybridKind>(hybrid_pattern.at(i)); }
  /// Columns of an MLP's first GEMM per intermediate column: 2 gated (gate and up), 1 not.
  int mlp_in_factor() const { return mlp_activation == MlpActivation::swiglu ? 2 : 1; }
  /// Parameters of one Mamba layer: its pre-norm, in_proj, conv1d (weights and bias),
  /// dt_bias, A_log, D (one a head), the gated norm's scale and out_proj.
  long long mamba_layer_params() const;
  /// Parameters of one Gated DeltaNet layer: its pre-norm, in_proj_qkvz, in_proj_ba, conv1d
  /// (no bias), dt_bias and A_log (one a value head), the gated norm's scale (a value head
  /// wide) and out_proj.
  long long gdn_layer_params() const;

  /// Whether decoder layer `i` (0-based) attends through the sliding window: i a multiple of
  /// sliding_every. HF GptOssConfig.layer_types is "sliding_attention" at even layers and
  /// "full_attention" at odd ones (sliding_every 2); MistralConfig and MixtralConfig window
  /// every layer (1). (Hybrid models' attention layers are full: the config refuses a window
  /// on them.)
  /// With full_every (Gemma 3, Llama 4): every layer but those with (i + 1) % full_every == 0.
  bool is_windowed_layer(int i) const {
    if (sliding_window <= 0) return false;
    if (full_every > 0) return (i + 1) % full_every != 0;
    return sliding_every > 0 && i % sliding_every == 0;
  }
  bool has_windows() const { return sliding_window > 0 && (sliding_every > 0 || full_every > 0); }
  bool is_moe() const { return moe.num_experts > 0; }
  bool is_mla() const { return mla.kv_lora_rank > 0; }
  bool is_dsa() const { return dsa.index_heads > 0; }
  /// Whether decoder layer `i` (0-based) has the MoE MLP.
  /// A hybrid model: layer `i` is an E layer.
  bool is_moe_layer(int i) const;
  /// Parameters of the attention block (projections, biases, sinks, q/k norms, and the
  /// input norm), of a dense MLP block (with its norm), and of an MoE block: every expert
  /// (`active` false) or the top_k a token runs through plus the shared ones (true);
  /// router, shared experts and the block's norm counted in both.
  long long attention_params() const;
  long long dense_mlp_params() const;
  long long moe_mlp_params(bool active) const;
  /// Decoder layer `i`, all of it or what one token runs through.
  long long decoder_layer_params(int i, bool active) const;
  /// One block of kind `kind` of a hybrid model (its norm included), all of it or what one
  /// token runs through.
  long long hybrid_block_params(HybridKind kind, bool active) const;
  /// One MTP module (its own decoder layer, or a hybrid model's blocks of mtp_pattern, its
  /// norms and eh_proj; not the shared embedding and head).
  long long mtp_module_params(bool active) const;
  /// The parameters of the MTP modules together: mtp_module_params once a depth, or once
  /// for all of them when they share one block's weights (mtp_shared); 0 without MTP.
  long long mtp_params(bool active) const;
  /// The whole model without the MTP modules: embedding, decoder layers, final norm and
  /// output head (counted once when tied), and a vision model's encoder and projector. `active`:
  /// what one token runs through, both embedding matrices counted. gpt's learned positions count
  /// `seq_length` rows, as embedding_params does.
  long long total_params(bool active, int seq_length = 0) const;

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
/// check_shape's part for hybrid models: the pattern's symbols and length, experts for its E
/// layers, the Mamba mixer's sizes for its M layers; the MTP block's pattern (mtp_pattern)
/// likewise, and given whenever a hybrid model has MTP depths (and only for hybrid models).
void check_hybrid(const ModelShape& shape);
/// check_shape's part for the vision encoder (ModelShape::vision): positive sizes, heads
/// that divide the width, windows of whole merged patches, full-attention layers that
/// exist. Throws ShapeError whose message starts with the vision key at fault
/// ("vision.num_heads: ...").
void check_vision(const ModelShape& shape);

}  // namespace bmpipe
