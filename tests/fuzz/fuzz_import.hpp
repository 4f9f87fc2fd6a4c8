#pragma once
// What the import targets (fuzz_megatron_args, fuzz_mindformers, fuzz_torchtitan) do with an input:
// what `bmpipe import FORMAT FILE --preset ... [--devices N]` does (api::run_import, through the
// importer table), then what `bmpipe simulate` does with the config it printed.
#include <string>

#include "api/import.hpp"
#include "frameworks/importers.hpp"
#include "fuzz_run.hpp"

namespace bmpipe::fuzz {

/// The imported config stands for a file here, as `bmpipe import ... > FILE` would write it.
inline constexpr const char* kImportedName =
    BMPIPE_SOURCE_DIR "/configs/examples/fuzz-imported.yaml";

/// Imports `text` (a file `file_tag` in the temporary folder) with `request`'s cluster, as the
/// command line would with --allow-unmodelled, then:
///   - a job with flags or keys bmpipe does not model must be refused without it;
///   - the YAML it printed must load (the importers promise to have loaded it);
///   - that config, under the fuzz limits, runs as fuzz_config runs a config.
/// The errors the command line answers with exit 2 end a run quietly (answered()).
inline void import_and_run(api::ImportRequest request, const std::string& file_tag,
                           const std::string& text) {
  const TempFile file(file_tag, text);
  request.input = file.path();
  request.out = kImportedName;
  request.allow_unmodelled = true;
  api::ImportOutcome outcome;
  if (!answered([&] { outcome = api::run_import(request); })) return;
  if (!outcome.warnings.empty()) {
    request.allow_unmodelled = false;
    bool refused = false;
    try {
      (void)api::run_import(request);
    } catch (const ConfigError&) {
      refused = true;
    }
    if (!refused)
      broken("an import with unmodelled flags or keys passed without allow_unmodelled:\n" +
             outcome.warnings.front());
  }
  try {
    (void)parse_config(outcome.yaml, kImportedName);
  } catch (const ConfigError& e) {
    broken(std::string("the imported config does not load: ") + e.what() + "\n" + outcome.yaml);
  }
  Overrides small;
  small.limits = small_limits();
  Config config;
  try {
    config = parse_config(outcome.yaml, kImportedName, small);
  } catch (const ConfigError&) {
    return;  // past the fuzz limits
  }
  run_config(config);
}

}  // namespace bmpipe::fuzz
