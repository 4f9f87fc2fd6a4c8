#include "sim/cost/kernels.hpp"

#include <algorithm>
#include <array>
#include <cmath>

namespace bmpipe {

namespace {

// The output tiles a GEMM library chooses from: CUTLASS's and DeepGEMM's Hopper and
// Blackwell kernels block M by 64, 128 or 256 and N by 16 to 256 (DeepGEMM's heuristics
// pick block_n among multiples of 16 to fill the SMs); 64 to 256 by 32 stands for them.
constexpr std::array<int, 3> kTileM{64, 128, 256};
constexpr std::array<int, 7> kTileN{64, 96, 128, 160, 192, 224, 256};

}  // namespace

GemmShapeFit gemm_shape(const HardwareSpec& hw, double m, double n, double k, double groups,
                        double speed) {
  GemmShapeFit best;
  if (hw.sm_count <= 0 || m <= 0 || n <= 0 || k <= 0) return best;
  const double g = std::max(1.0, groups);
  const double rows = m / g;  // each group's (balanced) rows
  const double sms = hw.sm_count;
  const double depth = k / (k + hw.gemm_k_half * std::max(1.0, speed));
  best.efficiency = 0;
  for (int tm : kTileM)
    for (int tn : kTileN) {
      const double tiles = g * std::ceil(rows / tm) * std::ceil(n / tn);
      const double waves = std::ceil(tiles / sms);
      const double wave = g * rows * n / (waves * sms * tm * tn);
      const double intensity = 2.0 * tm * tn / (tm + tn);
      const double tile =
          hw.gemm_tile_intensity > 0 ? std::min(1.0, intensity / hw.gemm_tile_intensity) : 1.0;
      const double e = wave * tile * depth;
      if (e > best.efficiency) best = {e, wave, tile, depth, tm, tn};
    }
  return best;
}

double attention_head_dim_factor(double head_dim) {
  // Shah et al. 2024, Figure 5 (H100 SXM5, BF16 forward, sequence 4k): cuDNN 408 TFLOPS
  // at head dim 64, 609 at 128.
  constexpr double kAt64 = 408.0 / 609.0;
  if (!(head_dim < 128)) return 1.0;
  if (head_dim <= 64) return kAt64;
  return kAt64 + (1.0 - kAt64) * std::log2(head_dim / 64.0);
}

std::vector<std::string> graph_scope_names(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    std::string name = text.substr(start, comma - start);
    name.erase(0, name.find_first_not_of(" \t"));
    name.erase(name.find_last_not_of(" \t") + 1);
    start = comma + 1;
    if (!name.empty() && name != "none") out.push_back(std::move(name));
  }
  return out;
}

std::uint8_t parse_graph_scopes(const std::string& text, std::string* unknown) {
  std::uint8_t out = 0;
  for (const std::string& name : graph_scope_names(text)) {
    if (name == "attn")
      out |= static_cast<std::uint8_t>(GraphScope::attn);
    else if (name == "mlp")
      out |= static_cast<std::uint8_t>(GraphScope::mlp);
    else if (name == "moe")
      out |= static_cast<std::uint8_t>(GraphScope::moe);
    else if (name == "moe_router")
      out |= static_cast<std::uint8_t>(GraphScope::moe_router);
    else if (name == "moe_preprocess")
      out |= static_cast<std::uint8_t>(GraphScope::moe_preprocess);
    else if (name == "mamba")
      out |= static_cast<std::uint8_t>(GraphScope::mamba);
    else if (name == "full_iteration")
      out |= static_cast<std::uint8_t>(GraphScope::full);
    else if (unknown != nullptr && unknown->empty())
      *unknown = name;
  }
  return out;
}

double gemm_shape_efficiency(const HardwareSpec& hw, double m, double n, double k, double groups,
                             double speed) {
  return gemm_shape(hw, m, n, k, groups, speed).efficiency;
}

}  // namespace bmpipe
