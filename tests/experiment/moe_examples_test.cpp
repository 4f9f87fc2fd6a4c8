// The mixture-of-experts examples, pinned by the numbers they print (simulate --json) and
// by what can be worked out by hand: parameter counts against the model cards, and each
// example's all-to-all per MoE layer from its links.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "support/support.hpp"

namespace bmpipe {
namespace moe_examples_test {

using test::kExamples;

using test::run_json;

double op_ms(const nlohmann::json& l, const std::string& name) {
  for (const auto& o : l["ops"])
    if (o["name"] == name) return o["forward_ms"].get<double>();
  throw std::runtime_error("no op " + name);
}

TEST(MoeExamples, DeepSeekV3OnH800) {
  const std::string yaml = kExamples + "h800_deepseek_v3.yaml";
  const nlohmann::json c = run_json("cost " + yaml + " --json --ops");
  // Model card: 671B total, 37B active (both without the MTP module).
  EXPECT_EQ(c["parameters_total"], 671'026'419'200LL);
  EXPECT_EQ(c["parameters_active"], 37'552'297'472LL);
  EXPECT_EQ(c["ep"], 64);
  EXPECT_EQ(c["moe_dispatcher"], "deepep");
  // The table's header says where DeepEP sends a token: 4 of the 8 nodes (n_group 8,
  // topk_group 4), 32 x (1 - C(124, 8) / C(128, 8)) = 7.36 devices.
  const test::CliRun text = test::run_cli("cost " + yaml);
  EXPECT_NE(text.out.find("\ndispatch deepep: a token reaches 4.00 of 8 nodes and 7.36 devices\n"),
            std::string::npos)
      << text.out;
  EXPECT_EQ(c["edp"], 2);  // tp 1 x dp 128 / ep 64
  // Dispatch and combine: ep 64 spans 8 nodes of 8, so the NIC, with DeepEP's kernels
  // (training.moe_dispatcher: deepep; tests/cost/deepep_test.cpp works them out): 4096
  // tokens x 4 nodes (n_group 8, topk_group 4) x 7/8 remote x 7168 x 2 bytes =
  // 205,520,896 bytes at 50 GB/s x 0.873: 4.7083825 ms, + 10 us = 4.7183825 ms each way.
  const nlohmann::json& moe = test::cost_layer(c, "moe_decoder");
  EXPECT_EQ(moe["count"], 58);
  // The MTP module (num_nextn_predict_layers 1) has its row, just before the head.
  const nlohmann::json& mtp = test::cost_layer(c, "mtp");
  EXPECT_EQ(mtp["count"], 1);
  EXPECT_EQ(c["layers"][c["layers"].size() - 2]["name"], "mtp");
  EXPECT_NEAR(op_ms(moe, "a2a-dispatch"), 4.7183825, 1e-6);
  EXPECT_NEAR(op_ms(moe, "a2a-combine"), 4.7183825, 1e-6);
  // cost --json sums them per pass (backward: the reverse exchanges, the same volume).
  EXPECT_NEAR(moe["all_to_all_ms"]["forward"].get<double>(), 2 * 4.7183825, 1e-6);
  EXPECT_NEAR(moe["all_to_all_ms"]["backward"].get<double>(), 2 * 4.7183825, 1e-6);
  // Megatron's alltoall dispatcher sends each of a token's 8 expert copies: 4096 x 8 x 7168
  // x 2 bytes = 469,762,048, 63/64 of it = 462,422,016 bytes out at 50 GB/s x 0.8 =
  // 40e9 B/s: 11.5605504 ms, + 10 us = 11.5705504 ms.
  const nlohmann::json a2a =
      run_json("cost " + yaml + " --json --ops --set training.moe_dispatcher=alltoall");
  EXPECT_NEAR(op_ms(test::cost_layer(a2a, "moe_decoder"), "a2a-dispatch"), 11.5705504, 1e-6);
  EXPECT_FALSE(test::cost_layer(c, "decoder").contains("all_to_all_ms"));  // the 3 dense layers

  const nlohmann::json s = run_json("simulate " + yaml + " --json");
  EXPECT_EQ(s["schedule"], "dualpipe-v");
  EXPECT_EQ(s["microbatches"], 120);  // 15360 / dp 128
  EXPECT_TRUE(s["fits"].get<bool>());
  // The numbers it prints today. DualPipeV's F&B pairs are timed from their parts on two
  // streams (sim/fb_pair.hpp), hiding each pair's all-to-all behind the other half's
  // computation. Before: 61348.83899 ms while every pair took F + B with its a2a exposed;
  // 56391.986105 ms (bubble 0.251963, MFU 0.143566) with Megatron's alltoall dispatcher.
  // The bubble ratio grows as the pairs shrink and the warm-up and cool-down (F and B
  // alone, a2a exposed) do not. 44791.265858 ms (MFU 0.180749, 405,014 GPU-hours) before the
  // collectives ran by algorithm over the NICs a group drives (sim/cost/collectives.hpp):
  // the dp group's 8 members a node reduce on 8 NICs (now bound by the H800's NVLink,
  // 160 x 8 / 7 GB/s, not one NIC's 40), the edp group's 2 (64 apart) at 0.96 of a NIC,
  // 423 ms less tail.
  EXPECT_NEAR(s["iteration_time_ms"].get<double>(), 44368.429145, 1e-3);
  EXPECT_NEAR(s["bubble_ratio"].get<double>(), 0.359305, 1e-6);
  EXPECT_NEAR(s["mfu"].get<double>(), 0.182471, 1e-6);
  // GPU-hours per trillion tokens: 2048 x 44.368429145 s / 3600 / (15360 x 4096) x 1e12 =
  // 401,190 (the report: 180K in FP8; this is bf16).
  const double hours =
      2048 * s["iteration_time_ms"].get<double>() / 1000 / 3600 / (15360.0 * 4096) * 1e12;
  EXPECT_NEAR(hours, 401'190, 1);
  // As the report trained it, within what bmpipe models: Megatron-Core-style fused kernels
  // and FP8 with 1 x 128 / 128 x 128 block scales (the report's sec. 3.3; fp8_recipe
  // blockwise; dispatch in FP8, combine in bf16), on the H800's Hopper FP8 fit:
  // 34022.622 ms, 307,641 GPU-hours. (34445.459 ms, 311,464, before the collective model by
  // algorithm shrank the dp tail, sim/cost/collectives.hpp; 34070.124 ms with it but without
  // the next change. 34492.961 ms, 311,894, before the unpermute stopped scaling the rows by
  // the router's weights under fused kernels: Megatron-Core applies them in the experts'
  // activation, so its unpermute's backward no longer re-reads the 4096 x 8 rows of 7168 for
  // the weights' gradient, cost_model.cpp's mlp_block.)
  // (34485.852 ms before the blockwise scales' bytes were counted: 4 bytes per 128 values
  // of every FP8 operand, cast and saved input.)
  const nlohmann::json f = run_json("simulate " + yaml +
                                    " --json --set training.kernels=fused --set training.fp8=hybrid"
                                    " --set training.fp8_recipe=blockwise");
  EXPECT_TRUE(f["fits"].get<bool>());
  EXPECT_NEAR(f["iteration_time_ms"].get<double>(), 34022.622259, 1e-3);
  EXPECT_NEAR(2048 * f["iteration_time_ms"].get<double>() / 1000 / 3600 / (15360.0 * 4096) * 1e12,
              307'641, 1);
}

TEST(MoeExamples, Qwen3_235BOnAscend910B) {
  const std::string yaml = kExamples + "ascend910b_qwen3_235b_ep.yaml";
  const nlohmann::json c = run_json("cost " + yaml + " --json --ops");
  // Model card: 235B total, 22B active (Qwen counts both embedding matrices, as bmpipe).
  EXPECT_EQ(c["parameters_total"], 235'093'634'560LL);
  EXPECT_EQ(c["parameters_active"], 22'190'763'520LL);
  EXPECT_EQ(c["edp"], 8);  // tp 4 x dp 16 / ep 8
  // All-to-all in one node's HCCS mesh: 4096 / tp 4 (sequence parallel) = 1024 tokens x
  // top 8 x 4096 x 2 bytes = 67,108,864, 7/8 of it = 58,720,256 bytes over 7 links of
  // 28 GB/s at collective efficiency 0.5 (98e9 B/s): 0.599186 ms + 10 us = 0.609186 ms.
  EXPECT_NEAR(op_ms(test::cost_layer(c, "moe_decoder"), "a2a-dispatch"), 0.609186, 1e-6);

  const nlohmann::json s = run_json("simulate " + yaml + " --json");
  EXPECT_TRUE(s["fits"].get<bool>());
  EXPECT_EQ(s["microbatches"], 32);
  // 10176.463872 ms (MFU 0.190743) before the collectives ran over the NICs a group drives
  // (sim/cost/collectives.hpp): the dp group (tp 4 apart, 2 a node) reduces on 2 RoCE ports
  // at once, 84.7 ms less tail.
  EXPECT_NEAR(s["iteration_time_ms"].get<double>(), 10091.729792, 1e-3);
  EXPECT_NEAR(s["bubble_ratio"].get<double>(), 0.203320, 1e-6);
  EXPECT_NEAR(s["mfu"].get<double>(), 0.192345, 1e-6);
}

TEST(MoeExamples, MixtralOnH100WithItsAllToAll) {
  // Before the all-to-all was modelled the example ran 3484.626 ms per iteration; each of
  // its 32 MoE layers now adds 2 x 0.179 ms forward and again backward (moe_a2a_test.cpp):
  // 8 layers x 16 micro-batches x 0.716 ms = 91.6 ms on a rank, 108.8 ms with the fill.
  const nlohmann::json s = run_json("simulate " + kExamples + "h100_mixtral_8x7b_ep8.yaml --json");
  EXPECT_TRUE(s["fits"].get<bool>());
  // 3593.449338 ms before the collectives ran over the NICs a group drives
  // (sim/cost/collectives.hpp): the dp group of 16 (8 a node) reduces on 8 NICs, not one,
  // 88.0 ms less tail.
  EXPECT_NEAR(s["iteration_time_ms"].get<double>(), 3505.445230, 1e-3);
  EXPECT_NEAR(s["bubble_ratio"].get<double>(), 0.183282, 1e-6);
}

}  // namespace moe_examples_test
}  // namespace bmpipe
