#pragma once
/// \file
/// Megatron-LM's rules (experiment/framework_rules.hpp): the validations of Megatron-Core's
/// TransformerConfig and ModelParallelConfig, of its MoE layer, and of megatron/training/
/// arguments.py, that no single key breaks. bmpipe's YAML is Megatron-semantics by default,
/// so the loader (check_config) applies this table to every config, whichever way its keys
/// arrived (the file, a preset, an hf_config, --set, a Config changed by hand or by the
/// planner); `import megatron`, `export --format megatron` and `plan --expressible megatron`
/// consult it through frameworks/framework_rules.hpp.

#include <span>
#include <string>
#include <vector>

#include "experiment/framework_rules.hpp"

namespace bmpipe {

/// The table, in the order check_config applies it.
std::span<const FrameworkRule> megatron_rules();

/// Hierarchical cp's sizes (training.cp_hierarchy) as the config writes them: "[2, 4]".
std::string cp_hierarchy_text(const std::vector<int>& sizes);

}  // namespace bmpipe
