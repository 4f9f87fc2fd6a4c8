#pragma once
// For the frameworks tests of HF config.json files: each case merges a JSON patch into a
// valid config, and read_hf_config must refuse the result with a message that holds the
// written file's path followed by the case's expected text (a field's JSON Pointer and why).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "experiment/hf_config.hpp"
#include "support/support.hpp"

namespace bmpipe::test {

struct HfRefusal {
  nlohmann::json patch;  ///< RFC 7386 merge patch over the base config
  std::string expect;    ///< the message after the file's path
};

inline void expect_hf_refusals(const nlohmann::json& base, const std::vector<HfRefusal>& cases) {
  const ScratchDir dir;
  int n = 0;
  for (const HfRefusal& c : cases) {
    nlohmann::json j = base;
    j.merge_patch(c.patch);
    const std::string path = write_file(dir.file(std::to_string(n++) + ".json"), j.dump());
    try {
      read_hf_config(path);
      ADD_FAILURE() << "accepted " << c.patch.dump();
    } catch (const ShapeError& e) {
      EXPECT_NE(std::string(e.what()).find(path + c.expect), std::string::npos) << e.what();
    }
  }
}

}  // namespace bmpipe::test
