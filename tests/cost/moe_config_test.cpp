// Mixture-of-experts models through the config and the CLI: the Mixtral example's
// parameter counts and ep-sharded static memory (closed forms worked out by hand), and the
// bad inputs of training.ep / training.etp / model.moe, each exit 2 naming FILE:LINE:key.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "experiment/experiment.hpp"
#include "sim/cost/cost_model.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace {

using test::kExamples;
const std::string kHf = std::string(BMPIPE_TEST_DATA_DIR) + "/hf/";

TEST(MoeConfig, MixtralExampleCountsAndShardsItsExpertsOverEp) {
  const test::CliRun r = test::run_cli("cost " + kExamples + "h100_mixtral_8x7b_ep8.yaml --json");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  // Counts of hf_moe_test.cpp (model card: 46.7B / 12.9B).
  EXPECT_EQ(j["parameters_total"], 46'702'792'704LL);
  EXPECT_EQ(j["parameters_active"], 12'879'925'248LL);
  EXPECT_EQ(j["ep"], 8);
  EXPECT_EQ(j["edp"], 2);             // tp 1 x dp 16 / (etp 1 x ep 8)
  ASSERT_EQ(j["layers"].size(), 3u);  // embedding, 32 MoE layers, head: no dense layer
  EXPECT_EQ(j["layers"][1]["name"], "moe_decoder");
  EXPECT_EQ(j["layers"][1]["count"], 32);
  // A middle stage holds 8 layers. Per layer and device: dense weights (attention
  // 2 x 4096^2 + 2 x 1024 x 4096, two norms 2 x 4096, router 4096 x 8) = 41,984,000 at
  // 2 + 4 + 12/16 bytes (bf16 weight, fp32 grad, Adam state over dp 16) = 283,392,000;
  // one expert (8 / ep 8) of 3 x 4096 x 14336 = 176,160,768 at 2 + 4 + 12/2 (edp 2) =
  // 2,113,929,216. 8 x 2,397,321,216 = 19,178,569,728.
  EXPECT_EQ(j["static_bytes_per_stage"][1], 19'178'569'728LL);
  // ep 1: all 8 experts (1,409,286,144) at 2 + 4 + 12/16: 9,512,681,472 per layer.
  const test::CliRun one =
      test::run_cli("cost " + kExamples + "h100_mixtral_8x7b_ep8.yaml --json --set training.ep=1");
  ASSERT_EQ(one.code, 0) << one.err;
  EXPECT_EQ(nlohmann::json::parse(one.out)["static_bytes_per_stage"][1],
            8LL * (283'392'000LL + 9'512'681'472LL));
}

TEST(MoeConfig, MixtralExampleSimulates) {
  const test::CliRun r =
      test::run_cli("simulate " + kExamples + "h100_mixtral_8x7b_ep8.yaml --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["ok"].get<bool>());
  EXPECT_TRUE(j["fits"].get<bool>());
}

/// A Mixtral config on 64 devices with `training` lines after line 8 (`pp` on line 8).
std::string mixtral_yaml(const std::string& hf, const std::string& training,
                         const std::string& model_extra = "") {
  return "cluster:\n"                      // 1
         "  nodes: 8\n"                    // 2
         "  devices_per_node: 8\n"         // 3
         "  device: {preset: h100-sxm}\n"  // 4
         "model:\n"                        // 5
         "  hf_config: \"" +
         hf + "\"\n" +  // 6
         model_extra +  // (7)
         "training:\n"
         "  seq_length: 4096\n"
         "  global_batch_size: 256\n" +
         training;
}

TEST(MoeConfig, BadExpertParallelismNamesFileLineAndKey) {
  const test::ScratchDir dir;
  const std::string mixtral = kHf + "mixtral_8x7b_config.json";
  struct Case {
    std::string yaml;
    std::string expect;
  };
  // Line numbers: training: 7, seq_length 8, global_batch_size 9, then the case's lines.
  const Case cases[] = {
      {mixtral_yaml(mixtral, "  pp: 4\n  ep: 3\n"),
       ":11: training.ep: ep = 3 does not divide the 8 experts"},
      {mixtral_yaml(mixtral, "  pp: 32\n  ep: 4\n"),  // dp 2: a stage has 2 devices
       ":11: training.ep: etp x ep = 4 is more than the tp x dp = 2 devices"},
      {mixtral_yaml(mixtral, "  pp: 8\n  etp: 7\n"),  // dp 8; 14336 = 7 x 2048
       ":11: training.etp: etp x ep = 7 does not divide the tp x dp = 8 devices"},
      {mixtral_yaml(mixtral, "  pp: 4\n  etp: 3\n"),
       ":11: training.etp: etp = 3 does not divide the experts' intermediate size 14336"},
      {mixtral_yaml(mixtral, "  pp: 4\n", "  moe: {load_imbalance: 0.5}\n"),
       ":7: model.moe.load_imbalance"},
  };
  int n = 0;
  for (const Case& c : cases) {
    const std::string path = test::write_file(dir.file(std::to_string(n++) + ".yaml"), c.yaml);
    const test::CliRun r = test::run_cli("cost " + path);
    EXPECT_EQ(r.code, 2) << c.yaml;
    EXPECT_NE(r.err.find(path + c.expect), std::string::npos) << r.err;
  }
}

TEST(MoeConfig, DenseModelsRefuseExpertKeys) {
  const test::ScratchDir dir;
  const std::string base =
      "cluster: {nodes: 1, devices_per_node: 8, device: {preset: h100-sxm}}\n"  // 1
      "model:\n"                                                                // 2
      "  preset: llama3-8b\n";                                                  // 3
  const std::string ep = test::write_file(
      dir.file("ep.yaml"),
      base + "training:\n  pp: 2\n  seq_length: 4096\n  microbatches: 4\n  ep: 2\n");
  const test::CliRun a = test::run_cli("cost " + ep);
  EXPECT_EQ(a.code, 2);
  EXPECT_NE(a.err.find(ep + ":8: training.ep: ep = 2, but llama3-8b has no experts"),
            std::string::npos)
      << a.err;
  const std::string moe =
      test::write_file(dir.file("moe.yaml"), base +
                                                 "  moe: {load_imbalance: 1.2}\ntraining:\n  pp: "
                                                 "2\n  seq_length: 4096\n  microbatches: 4\n");
  const test::CliRun b = test::run_cli("cost " + moe);
  EXPECT_EQ(b.code, 2);
  EXPECT_NE(b.err.find(moe + ":4: model.moe: llama3-8b has no experts"), std::string::npos)
      << b.err;
}

TEST(MoeConfig, TopKAboveTheExpertsIsRefusedAndLatentAttentionCosted) {
  const test::ScratchDir dir;
  nlohmann::json j = nlohmann::json::parse(test::slurp(kHf + "mixtral_8x7b_config.json"));
  j["num_experts_per_tok"] = 9;
  const std::string hf = test::write_file(dir.file("topk.json"), j.dump());
  const std::string yaml = test::write_file(dir.file("topk.yaml"), mixtral_yaml(hf, "  pp: 4\n"));
  const test::CliRun r = test::run_cli("cost " + yaml);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(yaml + ":6: model.hf_config: " + hf +
                       ": /num_experts_per_tok: 9 experts per token, but the model has 8"),
            std::string::npos)
      << r.err;
  const std::string ds = test::write_file(
      dir.file("ds.yaml"), mixtral_yaml(kHf + "deepseek_v3_config.json", "  pp: 4\n"));
  // Multi-latent attention, refused before the cost model had it, is costed now.
  const test::CliRun d = test::run_cli("cost " + ds + " --ops");
  EXPECT_EQ(d.code, 0) << d.err;
  EXPECT_NE(d.out.find("kv_b_proj"), std::string::npos) << d.out;
}

TEST(MoeConfig, ExpertGradientsReduceOverEdp) {
  // Mixtral, pp 4, dp 16, ep 8: edp 2. Dense gradients all-reduce over the dp 16 group,
  // expert gradients over edp 2, one after the other.
  const Config c = load_config(kExamples + "h100_mixtral_8x7b_ep8.yaml", {});
  const auto e = prepare(c);
  const HardwareSpec& hw = e->analytic->hardware;
  // ZeRO-1: reduce-scatters. Rank 0's dp group (devices 0, 1, ..., 15) spans two nodes
  // of 8: hierarchical (sim/cost/collectives.hpp), its 8 members a node driving their 8
  // NICs: 15/16 x 4e9 bytes / min(8 x 50 x 0.96, 450 x 0.75 x 8/7 GB/s) + 14 x 5 us on
  // NVLink + 1 x 10 us across = 9.765625 ms + 80 us. (Before the hierarchical model the
  // whole ring ran at one NIC's 37.5 GB/s: 100 ms.) The edp group's two members are etp x
  // ep = 8 devices apart: one a node, on one NIC each: 1/2 x 2e9 / 48e9 + 10 us.
  const double dense = collective_time_s(hw, Collective::reduce_scatter, {16, 8}, 1e9 * 4);
  EXPECT_NEAR(dense, 15.0 / 16 * 4e9 / 384e9 + 80e-6, 1e-12);
  const double experts = collective_time_s(hw, Collective::reduce_scatter, {2, 1}, 5e8 * 4);
  EXPECT_NEAR(experts, 0.5 * 2e9 / 48e9 + 10e-6, 1e-12);
  EXPECT_EQ(stage_grad_reduce_time(*e, 0, 1'500'000'000, 500'000'000), s_to_ns(dense + experts));
  // Without experts, the dense path as before.
  EXPECT_EQ(stage_grad_reduce_time(*e, 0, 1'000'000'000, 0), s_to_ns(dense));
}

}  // namespace
}  // namespace bmpipe
