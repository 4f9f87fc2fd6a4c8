#pragma once
/// \file
/// `bmpipe import torchtitan` of torchtitan's 2026 launch form: no job TOML, but a config
/// registry (torchtitan/config/manager.py, ConfigManager) that builds a run from a Python
/// function named by `--module MODULE --config FUNCTION`, with `--section.option VALUE`
/// overrides after it. The functions bmpipe knows are a table of their job settings
/// (torchtitan_registry()), stated in the words the v0.2.2 TOML reader reads; the overrides
/// go through the same vocabulary (frameworks/torchtitan/keys.tsv), with the flags torchtitan
/// renamed since translated, and the job is then read as that TOML
/// (frameworks/torchtitan/import.hpp). Errors and the YAML's comments name the command's own
/// lines and flags.

#include <span>
#include <string>
#include <string_view>

#include "frameworks/common/import_common.hpp"

namespace bmpipe {

/// The torchtitan commit whose config registry bmpipe carries (pytorch/torchtitan).
inline constexpr std::string_view kTorchTitanRegistryCommit = "b5bcd76c66d0";

/// One setting of a registered config, as its function sets it: the 2026 option's dotted
/// name and its value as the command line spells it ("8", "true", "model,loss").
struct TorchTitanSetting {
  std::string_view key;
  std::string_view value;
};

/// A config function of a model's config_registry.py.
struct TorchTitanRegistryEntry {
  std::string_view module;  ///< --module: "llama3"
  std::string_view config;  ///< --config: "llama3_8b"
  std::span<const TorchTitanSetting> settings;
};

/// The registry's functions bmpipe carries (pytorch/torchtitan at b5bcd76c66d0).
std::span<const TorchTitanRegistryEntry> torchtitan_registry();

/// The registry entry `module`/`config`, or nullptr. `module` may be the short name
/// ("llama3") or the module path ("torchtitan.models.llama3[.config_registry]").
const TorchTitanRegistryEntry* find_torchtitan_config(std::string_view module,
                                                      std::string_view config);

/// Whether `text` is a torchtitan command line (a word `--module`, `--module=...`,
/// `--config`, `--config=...`, or run_train.sh's `MODULE=...`/`CONFIG=...`) rather than a
/// job TOML.
bool is_torchtitan_command(const std::string& text);

/// Reads the command line in `text` (the contents of `name`): shell words as a launch
/// script has them (frameworks/common/shell_words.hpp), the words after
/// `torchtitan.train` or `run_train.sh` when one is there, else all of them. Throws
/// ImportError naming the file, the line and the flag for an unknown module, config or
/// option, a malformed value, or a value torchtitan or bmpipe refuses.
ImportedJob read_torchtitan_command(const std::string& text, const std::string& name);

/// `bmpipe import torchtitan`: a command line when is_torchtitan_command, else a job TOML.
ImportedJob read_torchtitan(const std::string& text, const std::string& name);

}  // namespace bmpipe
