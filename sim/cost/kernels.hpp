#pragma once
/// \file
/// The kernel model: what the shape of one GEMM costs on a device beyond the flat fraction
/// of peak (HardwareSpec::matmul_efficiency and its kinds), and CUDA graphs' scopes.
///
/// A GEMM [m x k] x [k x n] (g of them in a grouped GEMM) reaches, of what a large square
/// one reaches, the best over the tiles a library picks from (tm in 64, 128, 256; tn in 64
/// to 256 by 32) of
///   wave x tile x depth, with
///   wave  = g m n / (waves x SMs x tm x tn): the tile slots the output fills, with
///           tiles = g ceil(m / tm) ceil(n / tn) and waves = ceil(tiles / SMs) (tile and
///           wave quantization);
///   tile  = min(1, I / gemm_tile_intensity), I = 2 tm tn / (tm + tn) the tile's FLOPs per
///           byte it loads: a small tile cannot feed its tensor cores;
///   depth = k / (k + gemm_k_half x speed): the fixed prologue and epilogue of a tile against
///           its k loop, where speed is the precision's peak over the bf16 peak (an FP8 loop
///           runs twice as fast, so the same fixed time is twice the k).
/// The large-GEMM end of the curve is 1, so the device's efficiencies stay what a large
/// GEMM reaches. Calibrated on DeepGEMM's table of FP8 GEMMs on H800
/// (deepseek-ai/DeepGEMM@327ec92 README, "Normal GEMMs for dense models" and "Grouped GEMMs
/// for MoE models (contiguous layout)": 22 shapes; tests/cost/kernels_test.cpp).
/// A device with sm_count 0 has no shape model: every GEMM runs at the flat fraction.

#include <cstdint>
#include <string>
#include <vector>

#include "sim/cost/hardware.hpp"

namespace bmpipe {

/// gemm_shape_efficiency's three factors for the tile it picks, and the tile.
struct GemmShapeFit {
  double efficiency = 1;  ///< wave x tile x depth, in (0, 1]
  double wave = 1, tile = 1, depth = 1;
  int tile_m = 0, tile_n = 0;
};

/// The shape's fraction of a large GEMM's throughput on `hw` (see the file comment); `groups`
/// GEMMs of m / groups rows each share the waves; `speed`: this precision's peak over the
/// bf16 peak (1 for bf16, 2 for FP8, 4 for FP4 on Blackwell).
GemmShapeFit gemm_shape(const HardwareSpec& hw, double m, double n, double k, double groups = 1,
                        double speed = 1);
double gemm_shape_efficiency(const HardwareSpec& hw, double m, double n, double k,
                             double groups = 1, double speed = 1);

/// Fused attention's throughput at head dimension `head_dim`, as a fraction of its
/// throughput at 128 (the head dimension every fit was made on). cuDNN's fused attention
/// (what TransformerEngine runs) on H100 at sequence 4k: 408 TFLOPS at head dim 64 against
/// 609 at 128 (Shah et al., "FlashAttention-3", arXiv 2407.08608, Figure 5, cuDNN bars), so
/// 0.67 at 64, linear in log2(head_dim) between 64 and 128 and held at 0.67 below. From 128
/// up the factor stays 1: the same figure has cuDNN at 483 TFLOPS at head dim 256 (0.79),
/// but no kernel timing at hand pins MLA's 192 and applying it would move every MLA figure
/// unchecked. The backward takes the forward's factor (no backward figure was read).
double attention_head_dim_factor(double head_dim);

/// The scopes CUDA graphs capture (Megatron-LM's --cuda-graph-modules, once --cuda-graph-scope;
/// NeMo's cuda_graph_scope): a captured kernel is replayed from the graph, so its launch costs
/// nothing (CostSettings::cuda_graphs).
enum class GraphScope : std::uint8_t {
  attn = 1,            ///< the attention block, its norm to its output projection
  mlp = 2,             ///< a dense MLP block, its norm to its down projection
  moe_router = 4,      ///< the router GEMM, its softmax and top-k
  moe_preprocess = 8,  ///< the permute of the tokens before the dispatch
  moe = 16,            ///< the whole MoE block (experts and dispatch included)
  full = 32,           ///< every kernel (Megatron's full_iteration)
  other = 64,          ///< embedding, head and loss: captured only by full
  mamba = 128,         ///< a hybrid model's Mamba block (Megatron's CudaGraphModule mamba)
};

/// The scopes of `text`: comma-separated names from attn, mlp, moe, moe_router,
/// moe_preprocess, mamba, full_iteration (or "none", or empty). Unknown names go to `unknown`.
std::uint8_t parse_graph_scopes(const std::string& text, std::string* unknown);
/// The scope names of training.cuda_graphs's comma list as written, each trimmed, without
/// empty entries and "none" (what parse_graph_scopes reads; the Megatron export writes
/// them back).
std::vector<std::string> graph_scope_names(const std::string& text);

/// A set of GraphScope bits.
using GraphScopes = std::uint8_t;

inline bool captured(GraphScopes scopes, GraphScope s) {
  return (scopes & static_cast<GraphScopes>(GraphScope::full)) != 0 ||
         (scopes & static_cast<GraphScopes>(s)) != 0;
}

}  // namespace bmpipe
