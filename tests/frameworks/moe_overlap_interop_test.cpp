// training.moe_overlap through Megatron-LM's --overlap-moe-expert-parallel-comm, both ways:
// the importer turns the flag into the key (the same job as the example with the key set),
// and the exporter writes the flag back for a config that sets it. Megatron-Core needs
// virtual stages for it under a pipeline (the Mixtral job's pp 4: interleaved, vpp 2), and
// refuses it without them: so does the import, at the flag.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "experiment/config.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace moe_overlap_interop_test {

using test::run_cli;

const std::string kMixtralArgs =
    std::string(BMPIPE_TEST_DATA_DIR) + "/megatron/mixtral_8x7b_args.txt";
const std::string kMixtralExample =
    std::string(BMPIPE_SOURCE_DIR) + "/configs/examples/h100_mixtral_8x7b_ep8.yaml";

TEST(MegatronMoeOverlap, TheFlagImportsAsTheKey) {
  test::ScratchDir dir;
  const std::string script =
      test::write_file(dir.file("args.txt"), test::slurp(kMixtralArgs) +
                                                 "  --overlap-moe-expert-parallel-comm "
                                                 "--num-layers-per-virtual-pipeline-stage 4\n");
  const std::string job = dir.file("job.yaml");
  const test::CliRun r = run_cli("import megatron '" + script +
                                 "' --preset h100-sxm --devices 64 --out '" + job + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(load_config(job).training.moe_overlap);
  const nlohmann::json a = nlohmann::json::parse(run_cli("simulate '" + job + "' --json").out);
  const nlohmann::json b = nlohmann::json::parse(
      run_cli("simulate '" + kMixtralExample +
              "' --json --set training.moe_overlap=true --set training.kernels=fused --set "
              "training.schedule=interleaved --set training.vpp=2")
          .out);
  EXPECT_EQ(a["iteration_time_ms"], b["iteration_time_ms"]);
}

TEST(MegatronMoeOverlap, TheKeyExportsAsTheFlag) {
  const test::CliRun on = run_cli("export '" + kMixtralExample +
                                  "' --format megatron --set training.moe_overlap=true --set "
                                  "training.schedule=interleaved --set training.vpp=2");
  ASSERT_EQ(on.code, 0) << on.err;
  EXPECT_NE(on.out.find("\n--overlap-moe-expert-parallel-comm\n"), std::string::npos) << on.out;
  const test::CliRun off = run_cli("export '" + kMixtralExample + "' --format megatron");
  ASSERT_EQ(off.code, 0) << off.err;
  EXPECT_EQ(off.out.find("--overlap-moe-expert-parallel-comm"), std::string::npos) << off.out;
}

TEST(MegatronMoeOverlap, WithoutVirtualStagesUnderAPipelineTheImportRefusesTheFlag) {
  // Megatron-LM d98e8a64, transformer_config.py:3007: "If enabling EP A2A overlap,
  // virtual_pipeline_model_parallel_size must be specified when pipeline_model_parallel_size
  // > 1". The Mixtral script is pp 4, without virtual stages; the flag is on line 15.
  test::ScratchDir dir;
  const std::string script = test::write_file(
      dir.file("args.txt"), test::slurp(kMixtralArgs) + "  --overlap-moe-expert-parallel-comm\n");
  const test::CliRun r = run_cli("import megatron '" + script + "' --preset h100-sxm --devices 64");
  EXPECT_EQ(r.code, 2) << r.all();
  EXPECT_NE(
      r.err.find(
          script +
          ":15: --overlap-moe-expert-parallel-comm: Megatron-LM's "
          "all-to-all overlap at pp 4 with schedule 1f1b and no virtual stages: Megatron-Core "
          "refuses it (\"If enabling EP A2A overlap, "
          "virtual_pipeline_model_parallel_size must be specified"),
      std::string::npos)
      << r.err;
}

}  // namespace moe_overlap_interop_test
}  // namespace bmpipe
