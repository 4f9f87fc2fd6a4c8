#pragma once
// For the Megatron-LM interop tests of one feature: a script through the CLI and back.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "support/support.hpp"

namespace bmpipe::test {

struct MegatronRoundTrip {
  std::string yaml;       ///< the first import's config file
  nlohmann::json first;   ///< `simulate --json` of it
  std::string exported;   ///< `export --format megatron` of it
  nlohmann::json second;  ///< `simulate --json` of the exported flags imported again
};

/// Imports `model` + `flags` on `devices` devices of `preset`, simulates it, exports it as
/// Megatron-LM flags, imports those (after `model`) and simulates that. Each step must
/// succeed (ADD_FAILURE otherwise; the fields after it are then empty).
inline MegatronRoundTrip megatron_round_trip(const ScratchDir& dir, const std::string& model,
                                             const std::string& flags, const std::string& preset,
                                             int devices) {
  MegatronRoundTrip out;
  const std::string where = " --preset " + preset + " --devices " + std::to_string(devices);
  const std::string script = write_file(dir.file("job.sh"), model + flags);
  out.yaml = dir.file("job.yaml");
  const auto imported = run_cli("import megatron " + script + where + " --out " + out.yaml);
  if (imported.code != 0) {
    ADD_FAILURE() << imported.all();
    return out;
  }
  out.first = run_json("simulate " + out.yaml + " --json");
  const auto exported = run_cli("export " + out.yaml + " --format megatron");
  if (exported.code != 0) {
    ADD_FAILURE() << exported.all();
    return out;
  }
  out.exported = exported.out;
  const std::string again = write_file(dir.file("again.sh"), model + exported.out);
  const std::string yaml2 = dir.file("again.yaml");
  const auto back = run_cli("import megatron " + again + where + " --out " + yaml2);
  if (back.code != 0) {
    ADD_FAILURE() << back.all();
    return out;
  }
  out.second = run_json("simulate " + yaml2 + " --json");
  return out;
}

}  // namespace bmpipe::test
