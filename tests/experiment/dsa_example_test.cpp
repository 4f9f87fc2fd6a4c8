// configs/examples/h800_deepseek_v32_16k.yaml, pinned by the numbers it prints (simulate
// --json) and against the same job on DeepSeek-V3's dense MLA, which its comment compares.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "support/support.hpp"

namespace bmpipe {
namespace dsa_example_test {

using test::kExamples;
using test::run_json;

const std::string kYaml = kExamples + "h800_deepseek_v32_16k.yaml";

TEST(DsaExample, DeepSeekV32OnH800At16K) {
  const nlohmann::json c = run_json("cost " + kYaml + " --json");
  // DeepSeek-V3's 671 026 419 200 and 37 552 297 472 (moe_examples_test) + 61 layers' indexers
  // of 13 959 424 (hf_dsa_test), which every token runs through.
  EXPECT_EQ(c["parameters_total"], 671'026'419'200LL + 61 * 13'959'424LL);
  EXPECT_EQ(c["parameters_active"], 37'552'297'472LL + 61 * 13'959'424LL);
  // The header: at s = 16384 and k = 2048 the core keeps 2048 x 16384 - 2048 x 2047 / 2 =
  // 31 458 304 of the 16384 x 16385 / 2 = 134 225 920 causal pairs, 23.4 %.
  const test::CliRun text = test::run_cli("cost " + kYaml);
  EXPECT_NE(text.out.find("\nsparse attention: indexer 64 heads of 128, top 2048 keys: the core "
                          "keeps 23.4 % of the causal pairs; indexer trained (its KL loss)\n"),
            std::string::npos)
      << text.out;
  const nlohmann::json s = run_json("simulate " + kYaml + " --json");
  EXPECT_NEAR(s["iteration_time_ms"].get<double>(), 68043.997864, 1e-3);
  EXPECT_NEAR(s["mfu"].get<double>(), 0.200571, 1e-6);
  EXPECT_EQ(s["microbatches"], 32);
}

// Megatron-Core's DSA core is MLA's absorbed form (3.4x the FLOPs a pair of the dense MLA
// core): at 16K its quarter of the pairs and the indexer come to about the dense core's
// time, at 4K (three quarters of the pairs) to a fifth more a step.
TEST(DsaExample, AbsorbedSparseCoreAgainstDenseMlaAt16KAnd4K) {
  test::ScratchDir dir;
  std::string text = test::slurp(kYaml);
  const auto swap = [&text](const std::string& from, const std::string& to) {
    const std::size_t at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
  };
  swap("../presets/hf/", std::string(BMPIPE_SOURCE_DIR) + "/configs/presets/hf/");
  const std::string sparse16 = text;
  swap("deepseek-v3.2-exp.json", "deepseek-v3.json");
  const std::string dense16 = text;
  const auto time = [&dir](const std::string& name, const std::string& yaml) {
    return run_json("simulate " + test::write_file(dir.file(name), yaml) +
                    " --json")["iteration_time_ms"]
        .get<double>();
  };
  EXPECT_NEAR(time("dense16.yaml", dense16), 66115.184, 1e-3);
  EXPECT_NEAR(time("sparse16.yaml", sparse16), 68043.998, 1e-3);
  // At the V3 example's 4096 tokens, 15360 a step.
  std::string sparse4 = sparse16, dense4 = dense16;
  for (std::string* t : {&sparse4, &dense4}) {
    t->replace(t->find("seq_length: 16384"), 17, "seq_length: 4096");
    t->replace(t->find("global_batch_size: 4096"), 23, "global_batch_size: 15360");
  }
  EXPECT_NEAR(time("dense4.yaml", dense4), 44368.429, 1e-3);  // h800_deepseek_v3.yaml's
  EXPECT_NEAR(time("sparse4.yaml", sparse4), 54032.938, 1e-3);
}

}  // namespace dsa_example_test
}  // namespace bmpipe
