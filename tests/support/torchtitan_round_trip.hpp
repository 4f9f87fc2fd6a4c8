#pragma once
// The round trip of torchtitan's exports (tests/frameworks/torchtitan_test.cpp for the job
// TOML, torchtitan_registry_export_test.cpp for the registry's command line): every shipped
// example goes out with `bmpipe export --format FORMAT`, comes back with `bmpipe import
// torchtitan` on the example's own cluster, and must simulate to the exported time, to the
// digit.
#include <gtest/gtest.h>

#include <yaml-cpp/yaml.h>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "support/support.hpp"

namespace bmpipe::test {

/// Round-trips every example of configs/examples through `format`; an export that exits 2
/// must say `refusal` (any message when empty), or for an example `named` lists, its own.
/// Returns the examples' names it stated.
inline std::set<std::string> torchtitan_round_trips(
    const std::string& format, const std::string& refusal,
    const std::map<std::string, std::string>& named = {}) {
  namespace fs = std::filesystem;
  ScratchDir dir;
  std::set<std::string> stated;
  for (const auto& entry :
       fs::directory_iterator(std::string(BMPIPE_SOURCE_DIR) + "/configs/examples")) {
    if (entry.path().extension() != ".yaml") continue;
    const std::string name = entry.path().stem().string();
    const CliRun x =
        run_cli("export '" + entry.path().string() + "' --format " + format + " --json");
    if (x.code == 2) {
      const auto own = named.find(name);
      EXPECT_NE(x.err.find(own == named.end() ? refusal : own->second), std::string::npos)
          << name << ": " << x.err;
      continue;
    }
    EXPECT_EQ(x.code, 0) << name << ": " << x.err;
    if (x.code != 0) continue;
    stated.insert(name);
    const nlohmann::json j = nlohmann::json::parse(x.out);
    const std::string text = write_file(dir.file(name + ".txt"), j["text"].get<std::string>());
    // The example's cluster: section alone, as `import --cluster` takes it.
    YAML::Node only;
    only["cluster"] = YAML::LoadFile(entry.path().string())["cluster"];
    YAML::Emitter out;
    out << only;
    const std::string cluster =
        write_file(dir.file(name + "_cluster.yaml"), std::string(out.c_str()) + "\n");
    const std::string back = dir.file(name + "_back.yaml");
    const CliRun imported = run_cli("import torchtitan '" + text + "' --cluster '" + cluster +
                                    "' --out '" + back + "'");
    EXPECT_EQ(imported.code, 0) << name << ": " << imported.err << "\n" << j["text"];
    if (imported.code != 0) continue;
    const CliRun sim = run_cli("simulate '" + back + "' --json");
    EXPECT_EQ(sim.code, 0) << name << ": " << sim.err;
    if (sim.code != 0) continue;
    EXPECT_EQ(nlohmann::json::parse(sim.out)["iteration_time_ms"].get<double>(),
              j["iteration_time_ms"].get<double>())
        << name << "\n"
        << j["text"].get<std::string>();
  }
  return stated;
}

}  // namespace bmpipe::test
