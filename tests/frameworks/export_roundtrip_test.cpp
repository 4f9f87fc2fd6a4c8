// `bmpipe export` round trips, through the command line only: a plan (1f1b, interleaved
// v2, zb-h2, dualpipe-v, --schedule auto) or a search's --out file is exported, the text
// goes back into the framework's own file (appended to the Megatron-LM launch script, with
// the flags it says to remove taken out; merged into the MindFormers YAML), `bmpipe
// import` reads that file on the same cluster, and `bmpipe simulate` of the import must
// give the time the export quoted, to the digit. Nothing here computes an expected time:
// both sides are bmpipe's own outputs, joined only by the framework's text.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/framework_files.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace export_roundtrip_test {

using test::run_cli;

std::string source(const std::string& path) {
  return std::string(BMPIPE_SOURCE_DIR) + "/" + path;
}

const std::string kMegatronArgs = source("configs/examples/llama2_13b_megatron_args.txt");
const std::string kH100Cluster = source("configs/clusters/h100_2x8.yaml");
const std::string kMindFormers = source("configs/examples/mindformers/llama2_13b.yaml");

nlohmann::json json_of(const test::CliRun& r, const std::string& what) {
  EXPECT_EQ(r.code, 0) << what << ": " << r.err;
  try {
    return nlohmann::json::parse(r.out);
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": not JSON: " << r.out << r.err;
    return nlohmann::json::object();
  }
}

struct Roundtrip {
  double quoted_ms = 0;        ///< the export's iteration_time_ms
  double reimported_ms = -1;   ///< simulate of the re-imported file
  nlohmann::json exported;     ///< export --json
  std::string framework_file;  ///< the script or YAML given back to import
};

/// Exports `config` as `format`, puts the text back into the framework's file, imports
/// and simulates it.
Roundtrip round_trip(const test::ScratchDir& dir, const std::string& config,
                     const std::string& format) {
  Roundtrip r;
  r.exported = json_of(run_cli("export '" + config + "' --format " + format + " --json"),
                       "export " + format);
  if (!r.exported.contains("text")) return r;
  const std::string text = r.exported["text"].get<std::string>();
  r.quoted_ms = r.exported["iteration_time_ms"].get<double>();
  std::string import_args;
  if (format == "megatron") {
    // The script also carries flags the export must say to remove where it does not set
    // them: recompute every layer, the selective switch, and a vpp flag (which Megatron-LM
    // refuses beside a layout).
    const std::string script = test::slurp(kMegatronArgs) +
                               "  --recompute-activations --recompute-granularity full "
                               "--recompute-method uniform --recompute-num-layers 1 \\\n"
                               "  --num-virtual-stages-per-pipeline-rank 2\n";
    r.framework_file =
        test::write_file(dir.file("args_exported.txt"), test::script_with_export(script, text));
    import_args = "import megatron '" + r.framework_file + "' --cluster '" + kH100Cluster + "'";
  } else {
    r.framework_file =
        test::write_file(dir.file("mf_exported.yaml"), test::yaml_with_export(kMindFormers, text));
    import_args = "import mindformers '" + r.framework_file + "' --preset ascend-910b --devices 16";
  }
  const std::string reimported = dir.file("reimported.yaml");
  const test::CliRun imported = run_cli(import_args + " --out '" + reimported + "'");
  EXPECT_EQ(imported.code, 0) << imported.err << "\n" << test::slurp(r.framework_file);
  const nlohmann::json sim =
      json_of(run_cli("simulate '" + reimported + "' --json"), "simulate the import");
  if (sim.contains("iteration_time_ms")) r.reimported_ms = sim["iteration_time_ms"].get<double>();
  return r;
}

/// The framework's job as bmpipe reads it: the shipped Megatron-LM script on two H100
/// nodes, or the shipped MindFormers YAML on 16 Ascend 910B.
std::string imported_job(const test::ScratchDir& dir, const std::string& format) {
  const std::string job = dir.file("job.yaml");
  const test::CliRun r = format == "megatron"
                             ? run_cli("import megatron '" + kMegatronArgs + "' --cluster '" +
                                       kH100Cluster + "' --out '" + job + "'")
                             : run_cli("import mindformers '" + kMindFormers +
                                       "' --preset ascend-910b --devices 16 --out '" + job + "'");
  EXPECT_EQ(r.code, 0) << r.err;
  return job;
}

struct Case {
  const char* name;
  const char* format;
  const char* command;  ///< plan or search arguments after the job, writing --out
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.name;
}

class ExportRoundTrip : public ::testing::TestWithParam<Case> {};

TEST_P(ExportRoundTrip, ReimportedTextSimulatesToTheQuotedTime) {
  const Case& c = GetParam();
  test::ScratchDir dir;
  const std::string job = imported_job(dir, c.format);
  const std::string planned = dir.file("planned.yaml");
  const test::CliRun made = run_cli(
      std::string(c.command).replace(std::string(c.command).find("JOB"), 3, "'" + job + "'") +
      " --quiet --out '" + planned + "'");
  ASSERT_EQ(made.code, 0) << made.err;
  const Roundtrip r = round_trip(dir, planned, c.format);
  EXPECT_GT(r.quoted_ms, 0);
  // To the digit: both are the same nanosecond count printed the same way.
  EXPECT_EQ(r.reimported_ms, r.quoted_ms)
      << r.exported["text"].get<std::string>() << "\n--- given back to import:\n"
      << test::slurp(r.framework_file);
}

// Small budgets keep these fast; the round trip does not depend on how good the plan is.
INSTANTIATE_TEST_SUITE_P(
    Plans, ExportRoundTrip,
    ::testing::Values(
        Case{"megatron_1f1b", "megatron", "plan JOB --schedule 1f1b --max-evals 300"},
        Case{"megatron_interleaved_v2", "megatron",
             "plan JOB --schedule interleaved --vpp 2 --max-evals 300"},
        Case{"megatron_zb_h2", "megatron", "plan JOB --schedule zb-h2 --max-evals 300"},
        Case{"megatron_dualpipe_v", "megatron", "plan JOB --schedule dualpipe-v --max-evals 300"},
        Case{"megatron_auto", "megatron", "plan JOB --schedule auto --max-evals 200"},
        Case{"megatron_search", "megatron",
             "search JOB --tp 2,4 --pp 2,4 --micro-batch-size 1 --schedules 1f1b,interleaved "
             "--vpp 2"},
        Case{"mindformers_1f1b", "mindformers", "plan JOB --schedule 1f1b --max-evals 300"},
        Case{"mindformers_interleaved_v2", "mindformers",
             "plan JOB --schedule interleaved --vpp 2 --max-evals 300"},
        Case{"mindformers_zb_h2", "mindformers", "plan JOB --schedule zb-h2 --max-evals 300"},
        Case{"mindformers_dualpipe_v", "mindformers",
             "plan JOB --schedule dualpipe-v --max-evals 300"},
        Case{"mindformers_auto", "mindformers", "plan JOB --schedule auto --max-evals 200"},
        Case{"mindformers_search", "mindformers",
             "search JOB --tp 1,2 --pp 4,8 --micro-batch-size 1 --schedules 1f1b,interleaved "
             "--vpp 2"}),
    [](const ::testing::TestParamInfo<Case>& p) { return std::string(p.param.name); });

}  // namespace export_roundtrip_test
}  // namespace bmpipe
