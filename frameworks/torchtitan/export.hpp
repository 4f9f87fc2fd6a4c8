#pragma once
/// \file
/// A plan in torchtitan's words: its job TOML. Pure functions of the layout and the job;
/// nothing here simulates.

#include <string>
#include <string_view>
#include <vector>

#include "experiment/config.hpp"
#include "frameworks/common/export_layout.hpp"  // ExportLayout, ExportJob

namespace bmpipe {

/// What torchtitan's TOML states of a plan, before it is written out.
struct TorchTitanExport {
  /// The plan the TOML describes: the layout's partition and placement, and one
  /// [activation_checkpoint] rule for every layer.
  ExportLayout expressed;
  bool exact = true;  ///< `expressed` is the layout
  std::string note;   ///< why not, when not
  /// [activation_checkpoint]: mode "none", "full" or "selective", and selective_ac_option
  /// ("op" or a layer frequency; empty when mode is not selective).
  std::string mode = "none", option;
};
TorchTitanExport torchtitan_plan(const ExportLayout& layout);

/// One key of the job TOML: its [section], its name and its value as a TOML literal.
struct TorchTitanKey {
  std::string section, key, literal;
};

/// The keys of torchtitan_job_toml, in its order: what both of torchtitan's forms state of
/// the job (the registry's command line says them as options, frameworks/torchtitan/
/// registry.hpp).
std::vector<TorchTitanKey> torchtitan_job_keys(const TorchTitanExport& x, const ExportJob& job,
                                               std::string_view schedule);

/// The whole job as a torchtitan TOML for bmpipe's schedule `schedule` (one torchtitan runs):
/// [model] (name, flavor, converters), [training] (local and global batch, seq_len, dtype),
/// [parallelism], [activation_checkpoint], [compile] and the converter's section.
std::string torchtitan_job_toml(const TorchTitanExport& x, const ExportJob& job,
                                std::string_view schedule);

/// Whether torchtitan's TOML states `layout` exactly (`plan --expressible torchtitan`).
bool torchtitan_states(const ExportLayout& layout);

/// The recompute rules the TOML states for a partition of one stage per rank: none, op
/// selective, full, and full on every n-th layer a rank builds.
std::vector<std::vector<Recompute>> torchtitan_recompute_choices(const std::vector<int>& partition);

/// Why `form` ("torchtitan's TOML", "torchtitan's config registry") cannot state the model of
/// `config` (an empty string when it can): torchtitan names a model by [model] name and
/// flavor only.
std::string torchtitan_refusal(const Config& config, const std::string& form);

/// `config` as torchtitan's TOML states it: what torchtitan cannot say is set to what it
/// runs instead, one sentence each in `dropped` (ZeRO-1/2 and DDP of dp > 1 as FSDP,
/// Megatron-only overlaps and CUDA graphs off, FP8 recipes torchtitan lacks as bf16, ...).
Config torchtitan_restated(const Config& config, std::vector<std::string>& dropped);

}  // namespace bmpipe
