// DeepSeek-V3 in the layout of Megatron-Bridge's recipe (NVIDIA-NeMo/Megatron-Bridge
// 067f987d src/megatron/bridge/recipes/deepseek/h100/deepseek_v3.py: tp 2, pp 16, ep 64,
// etp 1, sequence parallel, layout [embedding + 4 decoders] [4 decoders] x 14 [1 decoder +
// mtp + loss]) on 2048 GPUs (dp 64), distributed optimizer: bmpipe's memory breakdown, term
// by term against Megatron-LM's theoretical_memory_usage.py (NVIDIA/Megatron-LM d98e8a64).
// The terms that agree are pinned here by closed forms worked from the model's shape;
// docs/cost-model.md ("Memory as the frameworks measure it") explains the ones that do not.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "support/support.hpp"

namespace bmpipe {
namespace deepseek_v3_memory_test {

using test::kExamples;

const std::string kLayout =
    " --set training.tp=2 --set training.etp=1 --set training.ep=64 --set training.pp=16"
    " --set training.schedule=1f1b --set training.sequence_parallel=true"
    " --set training.kernels=fused --set training.recompute=selective"
    " --partition 4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,1";

using test::run_json;

// h 7168, 128 heads, q_lora_rank 1536, kv_lora_rank 512, qk 128 + rope 64, v 128, 256
// experts of 2048 (top 8) and a shared one of 2048 (HF config.json).
constexpr long long h = 7168, heads = 128, ql = 1536, kvl = 512, qk = 128, rope = 64, dv = 128;
constexpr long long E = 256, ef = 2048, sf = 2048, tp = 2, ep = 64, dp = 64, pp = 16;

// One MoE layer's parameters on one device.
//   Routed experts: Megatron's routed_expert_params (theoretical_memory_usage.py:110-112,
//   2 x h x ffn x E x 3/2) over ep x etp (:256-259): 3 x 7168 x 2048 x 256 / 64.
constexpr long long kExperts = 3 * h * ef * E / ep;
//   The rest: the shared expert over tp (:104, :215-218), the router h x E and the two
//   RMSNorms replicated (:127-131, :219-229) as Megatron counts them, plus what its formula
//   leaves out: MLA's down projections and their norms, which Megatron-Core holds whole on
//   every tp rank (multi_latent_attention.py:527, :574 'duplicated') while the formula
//   divides all of the attention by tp (:248-252), and the router's score-correction bias
//   (e_score_correction_bias, 256 values; a buffer in Megatron-Core, a parameter here).
constexpr long long kDownProjections = h * ql + ql + h * (kvl + rope) + kvl;
constexpr long long kSplitAttention =
    ql * heads * (qk + rope) + kvl * heads * (qk + dv) + heads * dv * h;
constexpr long long kDense =
    kDownProjections + kSplitAttention / tp + 2 * h + h * E + E + 3 * h * sf / tp;

TEST(DeepSeekV3Memory, AStageOfFourMoeLayersHoldsWhatMegatronCountsPerParameter) {
  const nlohmann::json c = run_json("cost " + kExamples + "h800_deepseek_v3.yaml --json" + kLayout);
  EXPECT_EQ(c["dp"], dp);
  EXPECT_EQ(c["edp"], 2);  // Megatron's world / (etp x ep x pp) (:212): 2048 / (64 x 16)
  EXPECT_EQ(test::cost_layer(c, "moe_decoder")["param_count"], kDense + kExperts);
  // Stage 1: four MoE layers. Bytes a parameter, Megatron's num_bytes_per_parameter
  // (:293-296) with the distributed optimizer: 6 + 12 / dp for the dense parameters and
  // 6 + 12 / edp for the experts', as bf16 weights (2), fp32 main gradients (4) and fp32
  // master weights, Adam m and v (12) sharded over the group.
  const long long dense = 4 * kDense, experts = 4 * kExperts;
  const nlohmann::json& parts = c["static_parts_per_stage"][1];
  EXPECT_EQ(parts["weight_bytes"], 2 * (dense + experts));
  EXPECT_EQ(parts["grad_bytes"], 4 * (dense + experts));
  EXPECT_EQ(parts["optimizer_bytes"], 12 * dense / dp + 12 * experts / 2);
  EXPECT_EQ(parts["other_bytes"], 0);
  EXPECT_EQ(c["static_bytes_per_stage"][1], 6 * (dense + experts) + 12 * dense / dp + 6 * experts);
  // = 11,549,313,216 bytes; Megatron's rule on its own count of the same four layers, without
  // the duplicated down projections' other half and the score bias, holds
  // 4 x (h_d / 2 + 256) x 6.1875 bytes less: 187,374,528.
  const long long megatron_dense = dense - 4 * (kDownProjections / 2 + E);
  EXPECT_EQ(6 * (dense + experts) + 12 * dense / dp + 6 * experts -
                (6 * (megatron_dense + experts) + 12 * megatron_dense / dp + 6 * experts),
            187'374'528);
}

// What one MoE layer keeps for backward under selective recompute, per micro-batch of 4096
// tokens, on a device of tp 2 with sequence parallelism (T / tp = 2048 tokens before the
// gathers), bf16 (e 2), term by term. Megatron's formula (:317-319, Korthikanti et al. 2022
// Table 2) charges s b h (18 + 4 ffn / h) / tp = 4096 x 7168 x (18 + 4 x 18432 / 7168) / 2 =
// 415,236,096 bytes a layer, whatever the layer; the first five terms below are its LN
// inputs (4 sbh / tp) and its QKV and MLP inputs (2 sbh / tp each): norms (less their fp32
// rsqrt, 4 x 2 x Ts), down_input and router_input, 8 sbh / tp = 117,440,512 bytes, agree;
// the others are MLA's and the experts', which it does not see.
TEST(DeepSeekV3Memory, AnMoeLayerKeepsItsTermsAndNotTheExpertOutputs) {
  const nlohmann::json c = run_json("cost " + kExamples + "h800_deepseek_v3.yaml --json" + kLayout);
  constexpr long long T = 4096, Ts = T / tp, e = 2, k = 8, local_heads = heads / tp;
  constexpr long long Hs = T * h / tp;
  constexpr long long norms = 2 * (e * Hs + 4 * Ts);  // the two RMSNorms' inputs, fp32 rsqrt
  constexpr long long down_input = e * Hs;    // q / kv down projections' input (the LN output)
  constexpr long long router_input = e * Hs;  // router's (and the shared expert's fc1's)
  constexpr long long router = 4 * Ts * E + 12 * Ts * k;  // fp32 scores; top-k ids, weights
  constexpr long long rows = e * Ts * k * h;              // the experts' input rows (fc1's)
  constexpr long long swiglu = 2 * e * Ts * k * ef + e * Ts * k * ef;  // its input; fc2's
  constexpr long long weights = 4 * Ts * k;            // what the scaled activation keeps, fp32
  constexpr long long shared = 3 * e * T * (sf / tp);  // shared expert: SwiGLU in, fc2 in
  constexpr long long latents = e * Ts * (ql + kvl) + 4 * Ts * 2 + e * T * (ql + kvl);
  constexpr long long qkv = e * T * local_heads * (2 * (qk + rope) + dv);
  constexpr long long core_out = e * T * local_heads * dv;
  EXPECT_EQ(test::cost_layer(c, "moe_decoder")["activation_bytes"]["selective"],
            norms + down_input + router_input + router + rows + swiglu + weights + shared +
                latents + qkv + core_out);
}

// cluster.device.allocator_overhead f: simulate reports the tensors' peak (allocated, what
// torch.cuda.max_memory_allocated prints) and what the caching allocator reserves for them
// ((1 + f) x allocated, max_memory_reserved); the device's peak adds reserved_GiB (2 GiB on
// the h200 preset), which lies outside the allocator. At the default 0 nothing moves.
TEST(DeepSeekV3Memory, TheAllocatorsOverheadIsReportedAndCounted) {
  const std::string yaml = kExamples + "h200_llama2_7b.yaml --json";
  const nlohmann::json plain = run_json("simulate " + yaml);
  const nlohmann::json over =
      run_json("simulate " + yaml + " --set cluster.device.allocator_overhead=0.18");
  constexpr long long kReserve = 2LL << 30;
  for (std::size_t r = 0; r < plain["devices"].size(); ++r) {
    const nlohmann::json& a = plain["devices"][r];
    const nlohmann::json& b = over["devices"][r];
    const long long allocated =
        a["static_bytes"].get<long long>() - kReserve + a["peak_activation_bytes"].get<long long>();
    EXPECT_EQ(a["peak_allocated_bytes"], allocated);
    EXPECT_EQ(a["peak_reserved_bytes"], allocated);
    EXPECT_EQ(a["peak_memory_bytes"], kReserve + allocated);
    EXPECT_EQ(b["peak_allocated_bytes"], allocated);
    const long long reserved = allocated + std::llround(0.18 * static_cast<double>(allocated));
    EXPECT_EQ(b["peak_reserved_bytes"], reserved);
    EXPECT_EQ(b["peak_memory_bytes"], kReserve + reserved);
  }
  // The text table has both columns.
  const test::CliRun text = test::run_cli("simulate " + kExamples + "h200_llama2_7b.yaml");
  EXPECT_NE(text.out.find("allocated     reserved     peak mem"), std::string::npos) << text.out;
}

}  // namespace deepseek_v3_memory_test
}  // namespace bmpipe
