#pragma once
/// \file
/// Every importer, in one table: `bmpipe import FORMAT` (cli/import_cmd.cpp) takes its
/// formats, their help and its checks of the options from here, and so can any other front
/// end. A new importer is one more row.

#include <span>
#include <string>
#include <string_view>

#include "experiment/framework_rules.hpp"
#include "frameworks/common/import_common.hpp"

namespace bmpipe {

struct Importer {
  std::string_view name;     ///< FORMAT: "megatron"
  std::string_view input;    ///< what INPUT is, for the help: "ARGS"
  std::string_view summary;  ///< the help's description; lines after the first are continued
  /// Reads the input's text (the contents of `name`, "-" for stdin) into a job.
  ImportedJob (*read)(const std::string& text, const std::string& name);
  /// --pp and --microbatches set the training layout: the input has none (a profile).
  bool takes_layout = false;
  /// --preset without --devices: the input says how many devices the job runs on (dp x tp
  /// x pp of its parallel settings).
  bool counts_devices = false;
  /// The framework's own rules (experiment/framework_rules.hpp): the imported config must
  /// pass them, as it must pass the loader's (none for a profile).
  std::span<const FrameworkRule> (*rules)() = nullptr;
};

/// The importers, in the order the help lists them.
std::span<const Importer> importers();

/// The importer called `name`, or nullptr.
const Importer* find_importer(std::string_view name);

/// The names as messages list them: "megatron, mindformers or profile".
std::string importer_names();

/// The "Formats:" lines of the help: each importer's name and input, then its summary, one
/// line each, continued lines indented to the summary's column.
std::string importer_help();

}  // namespace bmpipe
