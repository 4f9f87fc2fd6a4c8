// docs/config.md is generated from the field tables (experiment/config_fields.hpp) by
// bmpipe_config_reference: the checked-in page must be that program's output, so a key,
// range, unit or default cannot change in the code without the page changing with it.
#include <gtest/gtest.h>

#include <string>

#include "support/support.hpp"

namespace bmpipe {
namespace {

constexpr const char* kRegenerate =
    "build/experiment/bmpipe_config_reference > docs/config.md";

::testing::AssertionResult has(const std::string& page, const std::string& line) {
  if (page.find(line) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "the page has no\n  " << line;
}

std::string generated() {
  const test::ScratchDir dir;
  const std::string out = dir.file("config.md");
  const std::string cmd = std::string(BMPIPE_CONFIG_REFERENCE) + " > '" + out + "'";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  return test::slurp(out);
}

TEST(ConfigReference, CheckedInPageIsTheGeneratorsOutput) {
  const std::string page = test::slurp(std::string(BMPIPE_SOURCE_DIR) + "/docs/config.md");
  const std::string fresh = generated();
  ASSERT_FALSE(fresh.empty());
  EXPECT_TRUE(page == fresh)
      << "docs/config.md differs from what experiment/config_fields.hpp declares; regenerate "
         "it from the source root with:\n  "
      << kRegenerate;
}

// The page shows what the tables hold, with values worked out by hand from the rows: a
// required key, an open range with its unit and low bound, an optional key's default from
// its struct, a choice list, and a form restriction.
TEST(ConfigReference, RowsCarryTheTablesFacts) {
  const std::string page = generated();
  EXPECT_TRUE(has(page, "| `pp` | integer | [1, 2147483647] | required |  |  | pipeline devices |"));
  EXPECT_TRUE(has(page, "| `bandwidth_GBps` | number | (0, 1000000] GB/s (max: 1 PB/s); at "
                              "least 1e-09 (1 byte/s) | required unless a preset gives it |"));
  EXPECT_TRUE(has(page, "| `matmul_efficiency` | number | (0, 1] (max: a fraction of peak) | "
                              "optional | `0.7` | analytic model only"));
  EXPECT_TRUE(has(page, "| `dtype` | one of `bf16`, `fp16` |  | optional | `bf16` | analytic "
                              "model only |"));
  EXPECT_TRUE(has(page, "| `forward_ms` | number | [0, 86400000] ms (max: a day) | required |"));
  // num_kv_heads' member default (0) is a sentinel outside [1, 65536]: no default shown.
  EXPECT_TRUE(has(page, "| `num_kv_heads` | integer | [1, 65536] | optional |  |"));
  for (const char* section : {"## `cluster`", "## `cluster.device`", "## `model.layers[i]`",
                              "## `training`", "## `training.optimizer`", "## `training.recompute`"})
    EXPECT_TRUE(has(page, section)) << section;
}

}  // namespace
}  // namespace bmpipe
