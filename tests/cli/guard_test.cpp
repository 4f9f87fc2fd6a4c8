// Every command maps bad input to exit 2 and one message shape, "bmpipe CMD: ...", through
// one wrapper (cli/guard.hpp). Before it, each command kept its own catch list and they
// differed: search did not catch api::RequestError and cost caught only ConfigError.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/support.hpp"

namespace bmpipe {
namespace {

struct Case {
  std::string args;
  std::string prefix;  ///< how stderr must start
};

TEST(Guard, EveryCommandReportsBadInputTheSameWay) {
  test::ScratchDir dir;
  const std::string tiny = test::examples() + "tiny.yaml";
  const std::string gpt3 = test::examples() + "gpt3_175b_a100.yaml";
  const std::string missing = dir.file("missing.yaml");
  const std::string unwritable = dir.file("no/such/folder/out");
  const std::vector<Case> cases = {
      // a config that is not there (ConfigError)
      {"simulate " + missing, "bmpipe simulate: " + missing},
      {"compare " + missing + " --schedules 1f1b", "bmpipe compare: " + missing},
      {"cost " + missing, "bmpipe cost: " + missing},
      {"plan " + missing, "bmpipe plan: " + missing},
      {"search " + missing + " --quiet", "bmpipe search: " + missing},
      // a request that makes no sense (api::RequestError)
      {"plan " + tiny + " --max-evals 0", "bmpipe plan: --max-evals: "},
      {"search " + tiny + " --max-evals 0 --quiet", "bmpipe search: --max-evals: "},
      {"search " + tiny + " --planner fast --quiet", "bmpipe search: --planner: "},
      {"search " + tiny + " --quiet --expressible mindformers --format megatron",
       "bmpipe search: --expressible: 'mindformers' beside --format 'megatron'"},
      {"compare " + tiny + " --schedules ,", "bmpipe compare: --schedules: the list is empty"},
      // an output that cannot be written (OutputError)
      {"simulate " + tiny + " --trace " + unwritable, "bmpipe simulate: " + unwritable},
      {"compare " + tiny + " --schedules 1f1b --svg " + unwritable,
       "bmpipe compare: " + unwritable},
      {"plan " + tiny + " --max-evals 50 --out " + unwritable, "bmpipe plan: " + unwritable},
      {"search " + tiny + " --planner off --quiet --csv " + unwritable,
       "bmpipe search: " + unwritable},
      // a model the command cannot use (ConfigError from the api)
      {"cost " + tiny, "bmpipe cost: "},
      // no plan fits (api::NoPlanFits)
      {"plan " + gpt3 + " --memory-limit-GiB 1 --max-evals 50", "bmpipe plan: "},
  };
  for (const Case& c : cases) {
    const test::CliRun r = test::run_cli(c.args);
    EXPECT_EQ(r.code, 2) << c.args << "\n" << r.err;
    EXPECT_EQ(r.err.rfind(c.prefix, 0), 0u) << c.args << "\n" << r.err;
    EXPECT_EQ(r.err.find("internal error"), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_EQ(r.out, "") << c.args;
  }
}

}  // namespace
}  // namespace bmpipe
