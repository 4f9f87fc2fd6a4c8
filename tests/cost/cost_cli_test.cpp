// `bmpipe cost CONFIG --json`: the JSON contract (layers with times, activation bytes per
// recompute mode, recompute cost, parameters; static_bytes_per_stage) and its exit codes.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "support/support.hpp"

namespace {

using bmpipe::test::CliRun;

// stdout and stderr together: the messages tested here go to either.
CliRun run(const std::string& args) {
  CliRun r = bmpipe::test::run_cli(args);
  r.out += r.err;
  return r;
}

using bmpipe::test::kExamples;

TEST(CostCli, JsonContract) {
  const CliRun r = run("cost " + kExamples + "gpt3_175b_a100.yaml --json");
  ASSERT_EQ(r.code, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j["layers"].is_array());
  ASSERT_EQ(j["layers"].size(), 3u);
  for (const auto& l : j["layers"]) {
    for (const char* k : {"name", "forward_ms", "backward_input_ms", "backward_weight_ms",
                          "activation_bytes", "recompute_extra_ms", "param_count"})
      EXPECT_TRUE(l.contains(k)) << k;
    for (const char* k : {"none", "selective", "full"})
      EXPECT_TRUE(l["activation_bytes"].contains(k));
    for (const char* k : {"selective", "full"}) EXPECT_TRUE(l["recompute_extra_ms"].contains(k));
  }
  EXPECT_EQ(j["layers"][1]["name"], "decoder");
  EXPECT_EQ(j["layers"][1]["count"], 96);
  ASSERT_EQ(j["static_bytes_per_stage"].size(), 16u);
  // The stages holding the embedding and the head hold more than the middle ones.
  EXPECT_GT(j["static_bytes_per_stage"][0].get<double>(),
            j["static_bytes_per_stage"][1].get<double>());
  EXPECT_GT(j["static_bytes_per_stage"][15].get<double>(),
            j["static_bytes_per_stage"][1].get<double>());
  // What each stage's static bytes hold, adding up to them.
  ASSERT_EQ(j["static_parts_per_stage"].size(), 16u);
  for (std::size_t s = 0; s < 16; ++s) {
    const nlohmann::json& p = j["static_parts_per_stage"][s];
    EXPECT_EQ(p["weight_bytes"].get<long long>() + p["grad_bytes"].get<long long>() +
                  p["optimizer_bytes"].get<long long>() + p["other_bytes"].get<long long>(),
              j["static_bytes_per_stage"][s].get<long long>());
    EXPECT_GT(p["weight_bytes"].get<long long>(), 0);
  }
}

TEST(CostCli, OpsCarryTheirKernelClass) {
  // --ops: each op's kind, and each layer's time by class adding up to its own.
  const CliRun r = run("cost " + kExamples + "h100_mixtral_8x7b_ep8.yaml --json --ops");
  ASSERT_EQ(r.code, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  for (const auto& l : j["layers"]) {
    double forward = 0;
    for (const auto& [kind, ms] : l["by_kernel_class"].items())
      forward += ms["forward_ms"].get<double>();
    EXPECT_NEAR(forward, l["forward_ms"].get<double>(), 1e-9) << l["name"];
    for (const auto& op : l["ops"]) EXPECT_TRUE(op.contains("kind")) << op["name"];
  }
  const auto& moe = j["layers"][1];
  ASSERT_EQ(moe["name"], "moe_decoder");
  EXPECT_TRUE(moe["by_kernel_class"].contains("grouped_gemm"));
  EXPECT_TRUE(moe["by_kernel_class"].contains("collective"));  // the ep 8 all-to-all
  const CliRun text = run("cost " + kExamples + "h100_mixtral_8x7b_ep8.yaml --ops");
  EXPECT_NE(text.out.find("  grouped_gemm\n"), std::string::npos) << text.out;
}

TEST(CostCli, ParametersOfTheWholeModel) {
  // Meta-Llama-3-8B: 32 x (2 x 4096^2 + 2 x 4096 x 1024 + 3 x 4096 x 14336 + 2 x 4096)
  // + 2 x 128256 x 4096 + 4096 = 8,030,261,248, the figure HF transformers reports for
  // the checkpoint. A dense model runs every parameter for every token.
  const CliRun r = run("cost " + kExamples + "h200_llama3_8b_hf.yaml --json");
  ASSERT_EQ(r.code, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["parameters_total"], 8'030'261'248LL);
  EXPECT_EQ(j["parameters_active"], 8'030'261'248LL);
}

TEST(CostCli, TableAndErrors) {
  const CliRun table = run("cost " + kExamples + "ascend910b_llama2_13b_analytic.yaml");
  EXPECT_EQ(table.code, 0) << table.out;
  EXPECT_NE(table.out.find("decoder"), std::string::npos);
  EXPECT_NE(table.out.find("lm_head"), std::string::npos);
  const CliRun measured = run("cost " + kExamples + "tiny.yaml");
  EXPECT_EQ(measured.code, 2);
  EXPECT_NE(measured.out.find("needs an analytic model"), std::string::npos);
  EXPECT_EQ(run("cost").code, 2);
  EXPECT_EQ(run("cost --help").code, 0);
}

// The header says which kernels llama layers are costed with (training.kernels); gpt
// layers have one set and no line.
TEST(CostCli, NamesTheKernelsOfLlamaLayers) {
  const CliRun eager = run("cost " + kExamples + "ascend910b_llama2_13b_analytic.yaml");
  EXPECT_NE(eager.out.find("\nkernels eager (HF transformers;"), std::string::npos) << eager.out;
  const CliRun fused = run("cost " + kExamples + "h100_llama3_70b_fp8.yaml");
  EXPECT_NE(fused.out.find("\nkernels fused (Megatron-Core"), std::string::npos) << fused.out;
  const CliRun gpt = run("cost " + kExamples + "gpt3_175b_a100.yaml");
  EXPECT_EQ(gpt.code, 0) << gpt.out;
  EXPECT_EQ(gpt.out.find("\nkernels "), std::string::npos) << gpt.out;
}

// The header says when the tp collectives are overlapped (training.tp_comm_overlap).
TEST(CostCli, SaysWhenTheTpCollectivesAreOverlapped) {
  const std::string yaml = kExamples + "h100_llama3_70b_fp8.yaml";
  const CliRun on = run("cost " + yaml);
  EXPECT_NE(on.out.find("tp 4 (sequence parallel, collectives overlapped)   dp 2\n"),
            std::string::npos)
      << on.out;
  const CliRun off = run("cost " + yaml + " --set training.tp_comm_overlap=false");
  EXPECT_NE(off.out.find("tp 4 (sequence parallel)   dp 2\n"), std::string::npos) << off.out;
}

}  // namespace
