#pragma once
/// \file
/// torchtitan's rules (experiment/framework_rules.hpp): what torchtitan asserts of a job
/// (its ParallelDims, its async TP, its trainer's CUDA graphs). `import torchtitan`,
/// `export --format torchtitan` (both forms) and `plan --expressible torchtitan` consult this
/// table (frameworks/framework_rules.hpp); what its TOML or command line merely cannot state
/// stays in frameworks/exporters.cpp.

#include <span>

#include "experiment/framework_rules.hpp"

namespace bmpipe {

std::span<const FrameworkRule> torchtitan_rules();

}  // namespace bmpipe
