// Two training keys worked by hand through `bmpipe cost --json --ops`:
//  - training.moe_capacity_factor: the experts' input dropped and padded to capacity
//    (Megatron-LM d98e8a64, megatron/core/transformer/moe/moe_utils.py get_capacity:
//    ceil(tokens x top_k / experts x factor)); the expert GEMMs' FLOPs scale by the padded
//    row count.
//  - training.vocab_parallel false: the embedding table and the LM head replicated over tp
//    (MindFormers' vocab_emb_dp).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "support/support.hpp"

namespace bmpipe {
namespace capacity_vocab_test {

using test::run_json;

/// The layer named `name` of a `cost --json --ops` answer.
nlohmann::json layer(const nlohmann::json& cost, const std::string& name) {
  for (const auto& l : cost["layers"])
    if (l["name"] == name) return l;
  ADD_FAILURE() << "no layer " << name;
  return {};
}

bool has_op(const nlohmann::json& l, const std::string& name) {
  for (const auto& o : l["ops"])
    if (o["name"] == name) return true;
  return false;
}

double op_ms(const nlohmann::json& l, const std::string& name, const char* pass) {
  for (const auto& o : l["ops"])
    if (o["name"] == name) return o[pass].get<double>();
  ADD_FAILURE() << "no op " << name;
  return 0;
}

// Mixtral-8x7B on 64 H100 (configs/examples/h100_mixtral_8x7b_ep8.yaml): tp 1, a micro-batch
// of one 4096-token sequence, 8 experts, top-2, h 4096, experts 14336 wide.
const std::string kMixtral = test::kExamples + "h100_mixtral_8x7b_ep8.yaml";

nlohmann::json mixtral_moe_layer(const std::string& set) {
  return layer(run_json("cost " + kMixtral + " --json --ops" + set), "moe_decoder");
}

TEST(MoeCapacity, ExpertGemmFlopsScaleByThePaddedRows) {
  const nlohmann::json dropless = mixtral_moe_layer("");
  // Dropless: 4096 x 2 = 8192 rows. Factor 1.25: capacity ceil(8192 / 8 x 1.25) = 1280 per
  // expert, 8 x 1280 = 10240 rows; factor 1.1: ceil(1126.4) = 1127, 9016 rows. The experts'
  // forward FLOPs: 2 x rows x h x (2 x ffn) (gate and up) + 2 x rows x ffn x h (down)
  // = 6 x rows x 4096 x 14336; everything else in the layer is unchanged.
  const double per_row = 6.0 * 4096 * 14336 / 1e12;  // TFLOP
  const double base = dropless["forward_tflop"].get<double>();
  const nlohmann::json padded = mixtral_moe_layer(" --set training.moe_capacity_factor=1.25");
  EXPECT_NEAR(padded["forward_tflop"].get<double>() - base, (10240 - 8192) * per_row, 1e-9);
  const nlohmann::json ceiled = mixtral_moe_layer(" --set training.moe_capacity_factor=1.1");
  EXPECT_NEAR(ceiled["forward_tflop"].get<double>() - base, (9016 - 8192) * per_row, 1e-9);
  // The dispatch moves the padded rows too: more bytes over the same links.
  EXPECT_GT(op_ms(padded, "a2a-dispatch", "forward_ms"),
            op_ms(dropless, "a2a-dispatch", "forward_ms"));
  EXPECT_GT(op_ms(padded, "experts_gate_up", "forward_ms"),
            op_ms(dropless, "experts_gate_up", "forward_ms"));
}

TEST(MoeCapacity, PaddingHidesTheImbalance) {
  // Padded, every expert runs exactly its capacity: the busiest expert's excess is dropped.
  const nlohmann::json even = mixtral_moe_layer(" --set training.moe_capacity_factor=1.25");
  const nlohmann::json skewed = mixtral_moe_layer(
      " --set training.moe_capacity_factor=1.25 --set model.moe.load_imbalance=1.5");
  EXPECT_EQ(op_ms(skewed, "experts_gate_up", "forward_ms"),
            op_ms(even, "experts_gate_up", "forward_ms"));
  EXPECT_EQ(skewed["forward_tflop"], even["forward_tflop"]);
}

TEST(MoeCapacity, RefusedWithoutExpertsOrWithDeepEp) {
  const test::CliRun dense = test::run_cli("cost " + test::kExamples +
                                           "ascend910b_llama2_13b_analytic.yaml --set "
                                           "training.moe_capacity_factor=1.5");
  EXPECT_EQ(dense.code, 2);
  EXPECT_NE(
      dense.err.find("training.moe_capacity_factor (from the command line): pads the experts' "
                     "input, but llama2-13b has no mixture-of-experts layers"),
      std::string::npos)
      << dense.err;
  const test::CliRun deepep = test::run_cli(
      "cost " + test::kExamples + "h800_deepseek_v3.yaml --set training.moe_capacity_factor=1.5");
  EXPECT_EQ(deepep.code, 2);
  EXPECT_NE(deepep.err.find("Flex token dispatcher with deepep backend does not support "
                            "moe_pad_expert_input_to_capacity"),
            std::string::npos)
      << deepep.err;
}

// Llama-2-13B (vocabulary 32000, h 5120) on 16 Ascend 910B at tp 2, pp 1, dp 8, fp16 with
// fp32 gradients and the Adam state sharded over dp
// (configs/examples/ascend910b_llama2_13b_analytic.yaml, relaid).
const std::string kLlama = test::kExamples + "ascend910b_llama2_13b_analytic.yaml" +
                           " --set training.tp=2 --set training.pp=1 --set training.dp=8"
                           " --set training.recompute.stages={}";

TEST(VocabParallel, ReplicatedOverTpByHand) {
  const nlohmann::json split = run_json("cost " + kLlama + " --json --ops");
  const nlohmann::json whole =
      run_json("cost " + kLlama + " --set training.vocab_parallel=false --json --ops");
  // The table: 32000 x 5120 over tp 2, or whole.
  EXPECT_EQ(layer(split, "embedding")["param_count"], 32000LL * 5120 / 2);
  EXPECT_EQ(layer(whole, "embedding")["param_count"], 32000LL * 5120);
  // The head: the same matrix and the final norm's 5120 scales.
  EXPECT_EQ(layer(split, "lm_head")["param_count"], 32000LL * 5120 / 2 + 5120);
  EXPECT_EQ(layer(whole, "lm_head")["param_count"], 32000LL * 5120 + 5120);
  // The head's GEMM: 2 x 4096 tokens x 5120 x the columns on this device.
  EXPECT_NEAR(layer(split, "lm_head")["forward_tflop"].get<double>(),
              2.0 * 4096 * 5120 * 16000 / 1e12, 1e-12);
  EXPECT_NEAR(layer(whole, "lm_head")["forward_tflop"].get<double>(),
              2.0 * 4096 * 5120 * 32000 / 1e12, 1e-12);
  // No lookup collective when every device has whole rows; the head's backward gathers the
  // logits' gradient from the tp-split loss.
  EXPECT_TRUE(has_op(layer(split, "embedding"), "embed_all_reduce"));
  EXPECT_FALSE(has_op(layer(whole, "embedding"), "embed_all_reduce"));
  EXPECT_FALSE(has_op(layer(split, "lm_head"), "logits_grad_all_gather"));
  EXPECT_GT(op_ms(layer(whole, "lm_head"), "logits_grad_all_gather", "backward_input_ms"), 0.0);
  // The one stage's static memory: 2 x 16000 x 5120 more parameters, each with an fp16
  // weight (2 bytes), an fp32 gradient (4) and Adam's 12 bytes sharded over dp 8 (1.5).
  const long long more = 2LL * 16000 * 5120;
  EXPECT_EQ(whole["static_bytes_per_stage"][0].get<long long>() -
                split["static_bytes_per_stage"][0].get<long long>(),
            more * 15 / 2);
}

}  // namespace capacity_vocab_test
}  // namespace bmpipe
