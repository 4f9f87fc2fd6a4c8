#pragma once
/// \file
/// What activation offload moves to the host: Megatron-Core's fine-grained offload modules
/// (NVIDIA/Megatron-LM d98e8a64ddf34856e74b24714e3bedb2f5a39553,
/// megatron/core/transformer/transformer_config.py, offload_modules and its __post_init__
/// checks; docs/user-guide/features/fine_grained_activation_offloading.md). Each module
/// offloads its input to pinned host memory after its forward and reloads it before its
/// backward. A set of them is a bit mask (OffloadModules), empty by default.
///   attn_norm    the input norm's input, where the norm is a module of its own (MLA's;
///                fused into the qkv projection elsewhere, an IdentityOp Megatron skips)
///   qkv_linear   the qkv projection's input (MLA: the down projections')
///   core_attn    the attention core's input: q, k and v
///   attn_proj    the output projection's input, the core's output (only with core_attn:
///                the core's backward reads it too)
///   mlp_norm     the pre-MLP norm's input, where the norm is a module of its own (MoE
///                layers' router norm)
///   expert_fc1   the routed experts' input rows
///   moe_act      the routed experts' activation input
/// Megatron's fused_group_mlp and gdp_qkv are not modelled.

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "sim/recompute.hpp"

namespace bmpipe {

enum class OffloadModule : std::uint8_t {
  attn_norm = 1,
  qkv_linear = 2,
  core_attn = 4,
  attn_proj = 8,
  mlp_norm = 16,
  expert_fc1 = 32,
  moe_act = 64,
};
using OffloadModules = std::uint8_t;
inline constexpr std::size_t kOffloadModuleCount = 7;
inline constexpr std::array<std::pair<OffloadModule, std::string_view>, kOffloadModuleCount>
    kOffloadModuleNames = {{{OffloadModule::attn_norm, "attn_norm"},
                            {OffloadModule::qkv_linear, "qkv_linear"},
                            {OffloadModule::core_attn, "core_attn"},
                            {OffloadModule::attn_proj, "attn_proj"},
                            {OffloadModule::mlp_norm, "mlp_norm"},
                            {OffloadModule::expert_fc1, "expert_fc1"},
                            {OffloadModule::moe_act, "moe_act"}}};

constexpr OffloadModules offload_bit(OffloadModule m) {
  return static_cast<OffloadModules>(m);
}
constexpr bool offloads(OffloadModules set, OffloadModule m) {
  return (set & offload_bit(m)) != 0;
}

/// The offload modules a list names ("none" or empty: nothing).
inline OffloadModules parse_offload_modules(std::string_view text, std::string* unknown) {
  return parse_named_set<OffloadModules>(text, kOffloadModuleNames, unknown);
}

/// The set's names, comma-separated in kOffloadModuleNames' order; "none" when empty.
inline std::string offload_modules_text(OffloadModules set) {
  return named_set_text(set, kOffloadModuleNames);
}

}  // namespace bmpipe
