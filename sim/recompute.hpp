#pragma once
/// \file
/// Activation recomputation modes, and arrays indexed by them. The set is closed, so it is
/// an enum; the names below are the only spelling of the modes anywhere (YAML, JSON,
/// traces, exports).
///   none       keep every activation a layer's backward needs
///   selective  drop the activations of the chosen modules and re-run them in the
///              backward: by default the attention core (Korthikanti et al. 2022, "Reducing
///              Activation Recomputation in Large Transformer Models", section 5), or
///              Megatron-Core's other recompute modules (RecomputeModule below)
///   full       keep only the layer input and re-run the whole forward in the backward
///   offload    keep what none keeps, but move the inputs of training.offload_modules'
///              modules to host memory between the forward and the backward
///              (sim/offload.hpp): a layer mode beside the three recompute modes, so that
///              recompute and offload are chosen per layer (issue 43). The cost model
///              computes the three recompute modes (kAllRecompute); the layer table adds
///              offload from none when training.recompute names it (layer_costs,
///              RecomputeSpec::names_offload in experiment/config.hpp).
///   selective_offload
///              keep what selective keeps, and move to host memory the inputs of
///              training.offload_modules' modules that selective still keeps: Megatron-Core
///              runs both at once (--recompute-granularity selective with
///              --fine-grained-activation-offloading; NVIDIA/Megatron-LM d98e8a64ddf3,
///              docs/user-guide/features/fine_grained_activation_offloading.md, "--recompute-
///              modules layernorm moe_act ... --offload-modules core_attn attn_proj
///              expert_fc1"). A checkpointed module's offload does nothing there: with
///              core_attn in recompute_modules, Attention.forward (megatron/core/transformer/
///              attention.py:1555-1606 at d98e8a64) runs the checkpoint outside the core_attn
///              offload context, so q, k and v stay (LayerCost::offload_bytes[selective]
///              counts what moves). The layer table adds it from selective as offload from
///              none (layer_costs).

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace bmpipe {

enum class Recompute : unsigned char {
  none = 0,
  selective = 1,
  full = 2,
  offload = 3,
  selective_offload = 4
};
/// The recompute modes the cost model computes (none, selective, full).
inline constexpr std::size_t kRecomputeModes = 3;
/// Every layer mode, the three recompute modes and the two offload modes (PerMode's size).
inline constexpr std::size_t kLayerModes = 5;
/// Every recompute mode, in order from the most memory to the least.
inline constexpr std::array<Recompute, kRecomputeModes> kAllRecompute = {
    Recompute::none, Recompute::selective, Recompute::full};
/// Every layer mode: kAllRecompute, then offload and selective_offload.
inline constexpr std::array<Recompute, kLayerModes> kAllModes = {
    Recompute::none, Recompute::selective, Recompute::full, Recompute::offload,
    Recompute::selective_offload};
/// The layer modes that move activations to the host (kOffloadModes[k] keeps what
/// kOffloadModes[k]'s device_mode keeps).
inline constexpr std::array<Recompute, 2> kOffloadModes = {Recompute::offload,
                                                           Recompute::selective_offload};
/// Whether the mode moves offload modules' inputs to the host (offload, selective_offload).
constexpr bool is_offload_mode(Recompute r) {
  return r == Recompute::offload || r == Recompute::selective_offload;
}
/// The recompute mode a layer mode runs on the device: none for offload, selective for
/// selective_offload, the mode itself for the others.
constexpr Recompute device_mode(Recompute r) {
  return r == Recompute::offload             ? Recompute::none
         : r == Recompute::selective_offload ? Recompute::selective
                                             : r;
}
/// The modes that recompute something (every recompute mode but none), in the same order:
/// the ones that carry recompute costs. Code that lists them loops over this, so a new mode
/// is found everywhere it must be.
inline constexpr std::array<Recompute, kRecomputeModes - 1> kRecomputingModes = {
    Recompute::selective, Recompute::full};

/// "none", "selective", "full", "offload" or "selective_offload".
constexpr std::string_view recompute_name(Recompute r) {
  constexpr std::array<std::string_view, kLayerModes> kNames = {"none", "selective", "full",
                                                                "offload", "selective_offload"};
  return kNames[static_cast<std::size_t>(r)];
}
/// The mode's name in a table's narrow column: "none", "sel", "full", "off" or "s+off".
constexpr std::string_view recompute_column(Recompute r) {
  return r == Recompute::selective           ? "sel"
         : r == Recompute::offload           ? "off"
         : r == Recompute::selective_offload ? "s+off"
                                             : recompute_name(r);
}
/// Every layer mode's name in kAllModes' order, joined: "none, selective, full, offload,
/// selective_offload" (with `last` ", " between the last two unless given, e.g. " or "), for
/// messages that list what a mode may be, so that a new mode is listed everywhere.
inline std::string recompute_names(std::string_view last = ", ") {
  std::string out;
  for (std::size_t k = 0; k < kAllModes.size(); ++k) {
    if (k > 0) out += k + 1 == kAllModes.size() ? last : std::string_view(", ");
    out += recompute_name(kAllModes[k]);
  }
  return out;
}
/// The mode called `text`, or nullopt.
constexpr std::optional<Recompute> parse_recompute(std::string_view text) {
  for (Recompute r : kAllModes)
    if (recompute_name(r) == text) return r;
  return std::nullopt;
}

/// A value per layer mode, indexed by the mode itself (never by a bare 0/1/2/3).
template <typename T>
struct PerMode {
  std::array<T, kLayerModes> values{};

  constexpr T& operator[](Recompute r) { return values[static_cast<std::size_t>(r)]; }
  constexpr const T& operator[](Recompute r) const { return values[static_cast<std::size_t>(r)]; }
  constexpr void fill(const T& v) { values.fill(v); }
  friend constexpr bool operator==(const PerMode&, const PerMode&) = default;
};

/// What selective recompute re-runs: Megatron-Core's recompute modules (NVIDIA/Megatron-LM
/// d98e8a64ddf34856e74b24714e3bedb2f5a39553, megatron/core/transformer/transformer_config.py,
/// recompute_modules; its docstring and __post_init__'s allowed set), the ones a cost can
/// name. A set of them is a bit mask (RecomputeModules); Megatron's default is core_attn.
///   core_attn       the attention core (normal checkpoint)
///   layernorm       the input and pre-MLP norms where they are modules of their own (not
///                   fused into the next linear, an IdentityOp there): MoE layers' pre-MLP
///                   norm and MLA's input norm (output-discarding)
///   mla_up_proj     MLA's up projections, latent norms and RoPE (output-discarding)
///   mlp             a dense MLP block (normal checkpoint; not MoE layers)
///   moe             the whole MoE block, dispatch and combine included (normal checkpoint)
///   moe_act         the routed experts' activation (output-discarding)
///   shared_experts  the shared expert (normal checkpoint)
/// Megatron's gdn_norm_out, gdp_in_proj, gdp_qkv and mhc are not modelled.
enum class RecomputeModule : std::uint8_t {
  core_attn = 1,
  layernorm = 2,
  mla_up_proj = 4,
  mlp = 8,
  moe = 16,
  moe_act = 32,
  shared_experts = 64,
};
using RecomputeModules = std::uint8_t;
inline constexpr std::size_t kRecomputeModuleCount = 7;
inline constexpr std::array<std::pair<RecomputeModule, std::string_view>, kRecomputeModuleCount>
    kRecomputeModuleNames = {{{RecomputeModule::core_attn, "core_attn"},
                              {RecomputeModule::layernorm, "layernorm"},
                              {RecomputeModule::mla_up_proj, "mla_up_proj"},
                              {RecomputeModule::mlp, "mlp"},
                              {RecomputeModule::moe, "moe"},
                              {RecomputeModule::moe_act, "moe_act"},
                              {RecomputeModule::shared_experts, "shared_experts"}}};
/// Megatron-Core's default set (recompute_modules None becomes ["core_attn"]).
inline constexpr RecomputeModules kDefaultRecomputeModules =
    static_cast<RecomputeModules>(RecomputeModule::core_attn);

constexpr RecomputeModules module_bit(RecomputeModule m) {
  return static_cast<RecomputeModules>(m);
}
constexpr bool has_module(RecomputeModules set, RecomputeModule m) {
  return (set & module_bit(m)) != 0;
}

/// A set of named bits (recompute modules here, offload modules in sim/offload.hpp) from a
/// comma- (or space-) separated list of `names`' spellings ("none" or an empty list: the
/// empty set); the first unknown name goes to `unknown`, when given, and is skipped.
template <typename Set, typename Bit, std::size_t N>
Set parse_named_set(std::string_view text,
                    const std::array<std::pair<Bit, std::string_view>, N>& names,
                    std::string* unknown) {
  Set out = 0;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t end = std::min(text.find_first_of(", \t", start), text.size());
    const std::string_view name = text.substr(start, end - start);
    start = end + 1;
    if (name.empty() || name == "none") continue;
    bool found = false;
    for (const auto& [bit, spelled] : names)
      if (spelled == name) {
        out = static_cast<Set>(out | static_cast<Set>(bit));
        found = true;
      }
    if (!found && unknown != nullptr && unknown->empty()) *unknown = std::string(name);
  }
  return out;
}

/// The set's names, comma-separated in `names`' order; "none" when empty.
template <typename Set, typename Bit, std::size_t N>
std::string named_set_text(Set set, const std::array<std::pair<Bit, std::string_view>, N>& names) {
  std::string out;
  for (const auto& [bit, spelled] : names)
    if ((set & static_cast<Set>(bit)) != 0) {
      if (!out.empty()) out += ",";
      out += spelled;
    }
  return out.empty() ? "none" : out;
}

/// The recompute modules a list names (Megatron's recompute_modules [] for "none").
inline RecomputeModules parse_recompute_modules(std::string_view text, std::string* unknown) {
  return parse_named_set<RecomputeModules>(text, kRecomputeModuleNames, unknown);
}

/// The set's names, comma-separated in kRecomputeModuleNames' order; "none" when empty.
inline std::string recompute_modules_text(RecomputeModules set) {
  return named_set_text(set, kRecomputeModuleNames);
}

}  // namespace bmpipe
