#pragma once
/// \file
/// A plan as torchtitan's 2026 launch command: a function of its config registry
/// (`--module MODULE --config FUNCTION`, frameworks/torchtitan/registry.hpp) and the
/// `--section.option VALUE` overrides that make that function's job the plan's. What the
/// command can state is what the job TOML can (frameworks/torchtitan/export.hpp), less what
/// the 2026 options lost: the model spec (model, flavor, converters, token dispatcher) is the
/// function's, expert tensor parallelism is gone, and a pipeline split is stated by how many
/// layers fewer the first and last stages hold. Pure functions; nothing here simulates.

#include <string>
#include <string_view>
#include <vector>

#include "experiment/config.hpp"
#include "frameworks/common/export_layout.hpp"
#include "frameworks/torchtitan/export.hpp"

namespace bmpipe {

/// Why the registry's command line cannot state `config`'s model (an empty string when it
/// can): it names a model by a registered function of its flavor, and the one of the 405B
/// flavor converts its linears to float8 rowwise, which the command cannot turn off and bmpipe
/// does not cost.
std::string torchtitan_registry_refusal(const Config& config);

/// `config` as the command states it: torchtitan_restated, and then the CUDA graph of the
/// whole step where torchtitan captures one, no FP8, the standard token dispatcher and no
/// expert tensor parallelism, each dropped setting one sentence in `dropped`.
Config torchtitan_registry_restated(const Config& config, std::vector<std::string>& dropped);

/// What the command states of `layout`: the TOML's plan, with the split moved to the nearest
/// torchtitan builds from pipeline_parallel_first_stage_less_layers and
/// pipeline_parallel_last_stage_less_layers when the layout's is none of them.
TorchTitanExport torchtitan_registry_plan(const ExportLayout& layout);

/// The launch command (run_train.sh's form) for the job: the registered function of the
/// job's flavor, and every option whose value is not that function's.
std::string torchtitan_registry_command(const TorchTitanExport& x, const ExportJob& job,
                                        std::string_view schedule);

}  // namespace bmpipe
