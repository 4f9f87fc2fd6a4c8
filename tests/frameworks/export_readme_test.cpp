// The worked workflow (docs/workflow.md), import -> plan -> export, for the shipped Megatron-LM
// launch script and the shipped MindFormers YAML: the commands it shows, the figures it
// quotes, the export outputs it prints (read from docs/workflow.md itself), and that the exported
// text, given back to the framework's file and imported again, simulates to the same time.
#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "support/framework_files.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace {

using test::run_cli;

std::string source(const std::string& path) {
  return std::string(BMPIPE_SOURCE_DIR) + "/" + path;
}

std::string three_decimals(const nlohmann::json& ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", ms.get<double>());
  return buf;
}

/// docs/workflow.md's fenced block whose first line is `first_line`, without the fences
/// ("" if there is none).
std::string readme_block(const std::string& first_line) {
  const std::string readme = test::slurp(source("docs/workflow.md"));
  const std::size_t at = readme.find("```\n" + first_line + "\n");
  if (at == std::string::npos) return "";
  const std::size_t begin = at + 4;
  const std::size_t end = readme.find("\n```\n", begin);
  return end == std::string::npos ? "" : readme.substr(begin, end + 1 - begin);
}

/// Everything after the first line (which names the file exported).
std::string body(const std::string& text) {
  return text.substr(text.find('\n') + 1);
}

double simulated_ms(const std::string& config) {
  const test::CliRun r = run_cli("simulate '" + config + "' --json");
  EXPECT_EQ(r.code, 0) << r.err;
  return r.code == 0 ? nlohmann::json::parse(r.out)["iteration_time_ms"].get<double>() : -1;
}

// docs/workflow.md, steps 2, 5 and 6.
TEST(ReadmeWorkflow, MegatronImportPlanExport) {
  const test::ScratchDir dir;
  const std::string args = source("configs/examples/llama2_13b_megatron_args.txt");
  const std::string cluster = source("configs/clusters/h100_2x8.yaml");
  const std::string job = dir.file("job.yaml"), plan = dir.file("plan.yaml");
  ASSERT_EQ(run_cli("import megatron " + args + " --cluster " + cluster + " --out " + job).code, 0);
  EXPECT_EQ(three_decimals(simulated_ms(job)), "6334.341");
  const test::CliRun planned = run_cli("plan " + job + " --schedule auto --quiet --out " + plan);
  ASSERT_EQ(planned.code, 0) << planned.err;
  const test::CliRun exported = run_cli("export " + plan + " --format megatron");
  ASSERT_EQ(exported.code, 0) << exported.err;
  const std::string shown = readme_block("# bmpipe export megatron of plan.yaml");
  ASSERT_FALSE(shown.empty()) << "docs/workflow.md shows no megatron export of plan.yaml";
  EXPECT_EQ(body(exported.out), body(shown));
  // "bmpipe import megatron of the result simulates to 5933.892 ms again."
  const std::string script = test::write_file(
      dir.file("args.txt"), test::script_with_export(test::slurp(args), exported.out));
  const std::string again = dir.file("again.yaml");
  const test::CliRun imported =
      run_cli("import megatron " + script + " --cluster " + cluster + " --out " + again);
  ASSERT_EQ(imported.code, 0) << imported.err;
  EXPECT_EQ(three_decimals(simulated_ms(again)), "5933.892");
}

// docs/workflow.md, "The same from a MindFormers job".
TEST(ReadmeWorkflow, MindFormersImportPlanExport) {
  const test::ScratchDir dir;
  const std::string run = source("configs/examples/mindformers/llama2_13b.yaml");
  const std::string job = dir.file("mfjob.yaml"), autoplan = dir.file("mfauto.yaml"),
                    plan = dir.file("mfplan.yaml");
  const std::string cluster = " --preset ascend-910b --devices 16";
  ASSERT_EQ(run_cli("import mindformers " + run + cluster + " --out " + job).code, 0);
  // The same job as ascend910b_llama2_13b_analytic.yaml.
  EXPECT_EQ(three_decimals(simulated_ms(job)), "5804.063");
  EXPECT_EQ(simulated_ms(job),
            simulated_ms(test::examples() + "ascend910b_llama2_13b_analytic.yaml"));

  const test::CliRun best =
      run_cli("plan " + job + " --schedule auto --quiet --json --out " + autoplan);
  ASSERT_EQ(best.code, 0) << best.err;
  const auto b = nlohmann::json::parse(best.out);
  EXPECT_EQ(b["plan"]["schedule"], "zb-v");
  EXPECT_EQ(three_decimals(b["plan"]["iteration_time_ms"]), "4439.809");
  const test::CliRun inexact = run_cli("export " + autoplan + " --format mindformers --json");
  ASSERT_EQ(inexact.code, 0) << inexact.err;
  const auto x = nlohmann::json::parse(inexact.out);
  EXPECT_FALSE(x["exact"].get<bool>());
  EXPECT_EQ(x["schedule"], "interleaved");
  EXPECT_EQ(three_decimals(x["iteration_time_ms"]), "5464.733");

  const test::CliRun planned =
      run_cli("plan " + job + " --schedule interleaved --vpp 3 --quiet --json --out " + plan);
  ASSERT_EQ(planned.code, 0) << planned.err;
  EXPECT_EQ(three_decimals(nlohmann::json::parse(planned.out)["plan"]["iteration_time_ms"]),
            "4575.276");
  const test::CliRun exported = run_cli("export " + plan + " --format mindformers");
  ASSERT_EQ(exported.code, 0) << exported.err;
  const std::string shown = readme_block("# bmpipe export mindformers of mfplan.yaml");
  ASSERT_FALSE(shown.empty()) << "docs/workflow.md shows no mindformers export of mfplan.yaml";
  EXPECT_EQ(body(exported.out), body(shown));
  // "bmpipe import mindformers of the result simulates to 4575.276 ms again."
  const std::string merged =
      test::write_file(dir.file("run.yaml"), test::yaml_with_export(run, exported.out));
  const std::string again = dir.file("again.yaml");
  ASSERT_EQ(run_cli("import mindformers " + merged + cluster + " --out " + again).code, 0);
  EXPECT_EQ(three_decimals(simulated_ms(again)), "4575.276");
}

}  // namespace
}  // namespace bmpipe
