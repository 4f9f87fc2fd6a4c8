#pragma once
/// \file
/// MindFormers' rules (experiment/framework_rules.hpp): what MindFormers refuses, or runs
/// otherwise than a bmpipe config states, whatever its YAML says. `import mindformers`,
/// `export --format mindformers` and `plan --expressible mindformers` consult this table
/// (frameworks/framework_rules.hpp); what MindFormers' keys merely cannot state (a format
/// limit) stays in frameworks/exporters.cpp.

#include <span>

#include "experiment/framework_rules.hpp"

namespace bmpipe {

std::span<const FrameworkRule> mindformers_rules();

}  // namespace bmpipe
