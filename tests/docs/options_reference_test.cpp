// The option lists of docs/plan.md, docs/search.md and docs/python.md are generated from the
// request tables (api/request_table.hpp) by bmpipe_options_reference: each checked-in page
// must be what the generator makes of it, so an option, default or help text cannot change
// in the code without the pages changing with it.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "api/request_table.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace {

constexpr const char* kRegenerateOptions =
    "build/api/bmpipe_options_reference docs/plan.md docs/search.md docs/python.md";

TEST(OptionsReference, CheckedInPagesAreTheGeneratorsOutput) {
  for (const char* doc : {"docs/plan.md", "docs/search.md", "docs/python.md"}) {
    const std::string page = test::slurp(std::string(BMPIPE_SOURCE_DIR) + "/" + doc);
    EXPECT_NE(page.find("<!-- options: "), std::string::npos) << doc << " lists no options";
    EXPECT_EQ(api::with_option_tables(page), page)
        << doc << " is stale: run " << kRegenerateOptions;
  }
}

TEST(OptionsReference, RowsAreHandWorked) {
  // One row written out by hand: the option, its value name, the default the struct has
  // (SearchRequest::screen_evals = 64), when it applies, and a '|' escaped in a cell.
  const std::string table = api::options_markdown(api::specs(api::search_options()), false);
  EXPECT_NE(table.find("| `--screen-evals N` | 64 | with `--planner quick` | with --planner "
                       "quick: plan every layout first with N evaluations"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("| `--offload auto\\|only\\|none` |  |  | auto: "), std::string::npos)
      << table;
  const std::string python = api::options_markdown(api::specs(api::plan_options()), true);
  EXPECT_NE(python.find("| `memory_limit_GiB` |  |  | GiB a device may use"), std::string::npos)
      << python;
  EXPECT_NE(python.find("| `threads` | all cores |  |"), std::string::npos) << python;
  // The other commands' blocks (Python's keywords of simulate, export_config, cost).
  const std::string page = api::with_option_tables(
      "<!-- options: python-export -->\n<!-- /options -->\n<!-- options: cost -->\n"
      "<!-- /options -->\n<!-- options: python-simulate -->\n<!-- /options -->\n");
  EXPECT_NE(page.find("| `memory_limit_GiB` |  |  | GiB a device may use when a recompute rule "
                      "is chosen (default: its capacity) |"),
            std::string::npos)
      << page;
  EXPECT_NE(page.find("| `--vpp N` |  |  | chunks per device, overriding training.vpp |"),
            std::string::npos)
      << page;
  EXPECT_NE(page.find("| `schedule_file` |  |  | replay the op order in FILE"), std::string::npos)
      << page;
}

TEST(OptionsReference, BadBlocksAreRefused) {
  EXPECT_THROW(api::with_option_tables("<!-- options: nope -->\n<!-- /options -->\n"),
               std::invalid_argument);
  EXPECT_THROW(api::with_option_tables("<!-- options: plan -->\nno end\n"), std::invalid_argument);
  // Text around the blocks is kept as it is, and an empty block is filled.
  const std::string filled =
      api::with_option_tables("a\n<!-- options: plan -->\n<!-- /options -->\nb\n");
  EXPECT_EQ(filled.rfind("a\n<!-- options: plan -->\n| option | default |", 0), 0u) << filled;
  EXPECT_EQ(filled.substr(filled.size() - 20), "<!-- /options -->\nb\n");
}

}  // namespace
}  // namespace bmpipe
