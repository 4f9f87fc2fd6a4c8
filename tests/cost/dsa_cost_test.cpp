// DeepSeek sparse attention (ModelShape::dsa) in the cost model's decoder layers: the
// lightning indexer's sub-ops worked out by hand on a tiny shape (the unit device: 1e12
// FLOP/s and 1e12 bytes/s at full efficiency, free launches, so a sub-op takes max(FLOPs,
// bytes) picoseconds), the sparse core's FLOPs at s = k and s = 4k against the dense MLA
// core, what the indexer keeps for backward, and its parameters. DSA's core is MLA's
// absorbed form (Megatron-Core's AbsorbedMLASelfAttention: MQA over the latent, q' and k of
// kv_lora + qk_rope = 6 columns a head, v and the output kv_lora = 4), against the dense
// MLA's q and k of qk = 4 and v of 2.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "sim/cost/cost_model.hpp"
#include "support/round_device.hpp"
#include "support/sub_op.hpp"
#include "support/tiny_shape.hpp"

namespace bmpipe {
namespace dsa_cost_test {

constexpr double kPs = 1e-12;

using test::unit_device;

/// tiny_shape's layer (h 8, 2 heads, ffn 16) with mla_cost_test's MLA (q_lora 4, kv_lora 4,
/// qk_nope 2, qk_rope 2, v 2) and an indexer of 2 heads of 4 keeping `topk` keys (0: dense).
ModelShape tiny(int topk, bool loss = true) {
  ModelShape m = test::tiny_shape(0);
  m.mla = {.q_lora_rank = 4,
           .kv_lora_rank = 4,
           .qk_nope_head_dim = 2,
           .qk_rope_head_dim = 2,
           .v_head_dim = 2};
  if (topk > 0)
    m.dsa = {.index_heads = 2, .index_head_dim = 4, .index_topk = topk, .indexer_loss = loss};
  check_shape(m);
  return m;
}

CostSettings settings(int s) {
  CostSettings st;
  st.seq_length = s;
  st.micro_batch_size = 1;
  st.grad_accumulation = GradAccumulation::overwrite;
  return st;
}

using test::op;

bool has(const LayerCost& c, const std::string& name) {
  return std::any_of(c.ops.begin(), c.ops.end(),
                     [&](const SubOpCost& o) { return o.name == name; });
}

/// What the absorbed core keeps beyond the dense MLA's at T = 4, 2 heads, bf16: q' 4 x 2 x 6,
/// the shared k 4 x 6, the latent output 4 x 2 x 4, q_nope (q_absorb's input) 4 x 2 x 2 and
/// v_up's output (out_proj's input) 4 x 2 x 2 = 136 elements, against q, k 4 x 2 x 4 each,
/// v and the output 4 x 2 x 2 each = 96: 40 elements, 80 bytes.
constexpr long long kAbsorbedExtra = 80;

const char* const kIndexerOps[] = {"indexer_wq_b",      "indexer_wk",     "indexer_weights_proj",
                                   "indexer_rope_norm", "indexer_scores", "indexer_topk",
                                   "indexer_loss"};

TEST(DsaCost, IndexerByHand) {
  // s = 4 tokens (T = 4), top-k 2, bf16 (e = 2).
  const LayerCost c = decoder_layer_cost(tiny(2), unit_device(), settings(4));
  // indexer_wq_b, q latent 4 -> 2 heads x 4: 2 x 4 x 4 x 8 = 256 FLOPs (bytes 2 x (16 + 32
  // + 32) = 160). Its input is detached: no input-grad; the weight-grad (KL loss) 256.
  EXPECT_NEAR(op(c, "indexer_wq_b").forward_s, 256 * kPs, 1e-20);
  EXPECT_EQ(op(c, "indexer_wq_b").backward_input_s, 0.0);
  EXPECT_NEAR(op(c, "indexer_wq_b").backward_weight_s, 256 * kPs, 1e-20);
  // indexer_wk, h 8 -> 4: 2 x 4 x 8 x 4 = 256 FLOPs; indexer_weights_proj 8 -> 2: 128.
  EXPECT_NEAR(op(c, "indexer_wk").forward_s, 256 * kPs, 1e-20);
  EXPECT_NEAR(op(c, "indexer_weights_proj").forward_s, 128 * kPs, 1e-20);
  EXPECT_EQ(op(c, "indexer_weights_proj").backward_input_s, 0.0);
  // The scores over half of T x s = 8 pairs, 2 Hi (di + 1) = 2 x 2 x 5 = 20 FLOPs each:
  // 160 FLOPs. Bytes: q 4 x 2 x 4 and k 4 x 4 in bf16 (2 x 48 = 96), the fp32 weights 4 x 2
  // x 4 = 32, the fp32 scores 4 x 4 x 4 = 64: 192, which bounds it.
  EXPECT_DOUBLE_EQ(op(c, "indexer_scores").forward_flops, 160.0);
  EXPECT_NEAR(op(c, "indexer_scores").forward_s, 192 * kPs, 1e-20);
  // Its gradient over the selected pairs: query i keeps min(i + 1, 2) keys, 1 + 2 + 2 + 2 =
  // 7 of the 10 causal pairs; 2 x 160 x 0.7 = 224 FLOPs. Bytes: q, k, the weights and
  // their gradients 2 x (96 + 32) = 256 and the int64 indices 8 x 4 x 2 = 64: 320.
  EXPECT_NEAR(op(c, "indexer_scores").backward_input_s, 320 * kPs, 1e-20);
  // top-k: read the fp32 scores (64), write the indices (64); no backward.
  EXPECT_NEAR(op(c, "indexer_topk").forward_s, 128 * kPs, 1e-20);
  EXPECT_EQ(op(c, "indexer_topk").backward_input_s, 0.0);
  // The KL target: the main logits at the 8 x 0.7 = 5.6 selected pairs over 2 heads of the
  // absorbed q' . k, 6 wide: 2 x 5.6 x 2 x 6 = 134.4 FLOPs; bytes q' 2 x 4 x 2 x 6 = 96 and
  // the shared k 2 x 4 x 6 = 48, the fp32 logits at 4 x 2 selected keys written, read and
  // written again 3 x 4 x 8 = 96: 240.
  EXPECT_DOUBLE_EQ(op(c, "indexer_loss").forward_flops, 134.4);
  EXPECT_NEAR(op(c, "indexer_loss").forward_s, 240 * kPs, 1e-20);
  EXPECT_EQ(op(c, "indexer_loss").backward_input_s, 0.0);
  // tp 1: no gather of the hidden state, no all-reduce of the target.
  EXPECT_FALSE(has(c, "indexer_all_gather"));
  EXPECT_FALSE(has(c, "indexer_loss_all_reduce"));
}

TEST(DsaCost, FrozenIndexerHasNoBackward) {
  const LayerCost c = decoder_layer_cost(tiny(2, false), unit_device(), settings(4));
  for (const char* name : {"indexer_wq_b", "indexer_wk", "indexer_weights_proj",
                           "indexer_rope_norm", "indexer_scores", "indexer_topk"}) {
    EXPECT_EQ(op(c, name).backward_input_s, 0.0) << name;
    EXPECT_EQ(op(c, name).backward_weight_s, 0.0) << name;
  }
  EXPECT_FALSE(has(c, "indexer_loss"));
  // Only the int64 indices stay for the sparse core's backward, 8 x 4 x 2 = 64 bytes, beside
  // the absorbed core's tensors' kAbsorbedExtra.
  const LayerCost dense = decoder_layer_cost(tiny(0), unit_device(), settings(4));
  EXPECT_EQ(c.activation_bytes[Recompute::none] - dense.activation_bytes[Recompute::none],
            64 + kAbsorbedExtra);
}

TEST(DsaCost, SparseCoreFlopsAtKAndFourK) {
  // Dense MLA core: 2 T s heads (qk + dv) / 2 = T s x 12 FLOPs (heads 2, qk 4, dv 2).
  // Absorbed: 2 T s heads (kvl + dr + kvl) / 2 = T s x 20 (kvl 4, dr 2), 10/6 of it a pair.
  // k = 4. At s = k = 4 every query keeps all its keys: dense 4 x 4 x 12 = 192 FLOPs,
  // sparse 4 x 4 x 20 = 320.
  const auto core = [](int topk, int s) {
    return op(decoder_layer_cost(tiny(topk), unit_device(), settings(s)), "attention")
        .forward_flops;
  };
  EXPECT_DOUBLE_EQ(core(0, 4), 192.0);
  EXPECT_DOUBLE_EQ(core(4, 4), 320.0);
  // s = 4k = 16: query i keeps min(i + 1, 4) keys, 1 + 2 + 3 + 4 x 13 = 58 pairs of the
  // causal 16 x 17 / 2 = 136. Dense 16 x 16 x 12 = 3072 FLOPs; sparse 16 x 16 x 20 x 58 / 136.
  EXPECT_DOUBLE_EQ(core(0, 16), 3072.0);
  EXPECT_NEAR(core(4, 16), 5120.0 * 58 / 136, 1e-9);
}

TEST(DsaCost, WithinTopKEqualsDenseMlaAbsorbedPlusTheIndexer) {
  // s = k = 64: the sparse layer is the dense one, sub-op for sub-op, but for the absorbed
  // form's (kv_b_proj split into q_absorb and v_up, the concat, the core) and plus the
  // indexer's sub-ops.
  const LayerCost dense = decoder_layer_cost(tiny(0), unit_device(), settings(64));
  const LayerCost dsa = decoder_layer_cost(tiny(64), unit_device(), settings(64));
  double flops = 0;
  for (const char* name : kIndexerOps) flops += op(dsa, name).forward_flops;
  const std::set<std::string> absorbed = {"kv_b_proj", "qk_concat", "attention"};
  for (const SubOpCost& o : dense.ops) {
    if (absorbed.count(o.name)) continue;
    EXPECT_DOUBLE_EQ(op(dsa, o.name).forward_s, o.forward_s) << o.name;
    EXPECT_DOUBLE_EQ(op(dsa, o.name).backward_input_s, o.backward_input_s) << o.name;
    EXPECT_DOUBLE_EQ(op(dsa, o.name).backward_weight_s, o.backward_weight_s) << o.name;
  }
  EXPECT_FALSE(has(dsa, "kv_b_proj"));
  // The two einsums do kv_b_proj's FLOPs, 2 x 64 x 4 x 2 x (2 + 2) = 4096: q_nope . k_up
  // 2 x 64 x 2 x 2 x 4 = 2048, and the latent output . v_up 2 x 64 x 2 x 4 x 2 = 2048.
  EXPECT_DOUBLE_EQ(op(dense, "kv_b_proj").forward_flops, 4096.0);
  EXPECT_DOUBLE_EQ(op(dsa, "q_absorb").forward_flops, 2048.0);
  EXPECT_DOUBLE_EQ(op(dsa, "v_up").forward_flops, 2048.0);
  EXPECT_EQ(dsa.ops.size(), dense.ops.size() + 1 + std::size(kIndexerOps));
  // The cores: dense 2 x 64 x 64 x 2 x 6 / 2 = 49152 FLOPs; absorbed 2 x 64 x 64 x 2 x 10 / 2
  // = 81920.
  EXPECT_DOUBLE_EQ(op(dense, "attention").forward_flops, 49152.0);
  EXPECT_DOUBLE_EQ(op(dsa, "attention").forward_flops, 81920.0);
  EXPECT_NEAR(dsa.forward_flops, dense.forward_flops + flops + 81920 - 49152, 1e-6);
  // The indexer's FLOPs: the GEMMs 2 x 64 x (4 x 8 + 8 x 4 + 8 x 2) = 10240, the scores
  // 2 x 2048 pairs x 2 x 5 = 40960, the target 2 x 2048 x 2 x 6 = 49152.
  EXPECT_DOUBLE_EQ(flops, 10240.0 + 40960.0 + 49152.0);
}

TEST(DsaCost, SavedActivationsAndParameters) {
  const LayerCost dense = decoder_layer_cost(tiny(0), unit_device(), settings(4));
  const LayerCost dsa = decoder_layer_cost(tiny(2), unit_device(), settings(4));
  // Kept by the core attention module (recompute's core_attn frees them): the int64
  // indices 8 x 4 x 2 = 64, the indexer's q 2 x 4 x 2 x 4 = 64 and k 2 x 4 x 4 = 32 in
  // bf16, the fp32 weights 4 x 4 x 2 = 32: 192 bytes; and the absorbed core's 80 more.
  EXPECT_EQ(dsa.activation_bytes[Recompute::none] - dense.activation_bytes[Recompute::none],
            192 + kAbsorbedExtra);
  // Full recompute keeps the layer input alone, as without DSA.
  EXPECT_EQ(dsa.activation_bytes[Recompute::full], dense.activation_bytes[Recompute::full]);
  // Parameters: wq_b 4 x 8, wk 8 x 4, the key norm's scale and bias 2 x 4, weights_proj
  // 8 x 2: 32 + 32 + 8 + 16 = 88, on the layer and in ModelShape's count.
  EXPECT_EQ(dsa.param_count - dense.param_count, 88);
  EXPECT_EQ(tiny(2).attention_params() - tiny(0).attention_params(), 88);
}

TEST(DsaCost, SelectiveCoreAttnFreesTheIndexerTensors) {
  CostSettings st = settings(4);
  st.recompute_modules = module_bit(RecomputeModule::core_attn);
  const LayerCost dense = decoder_layer_cost(tiny(0), unit_device(), st);
  const LayerCost dsa = decoder_layer_cost(tiny(2), unit_device(), st);
  // (the absorbed core's inputs and outputs stay: they are the module's inputs and output)
  EXPECT_EQ(dsa.activation_bytes[Recompute::selective],
            dense.activation_bytes[Recompute::selective] + kAbsorbedExtra);
  // ... and re-runs the indexer with the core: its forward FLOPs (GEMMs 2 x 4 x (32 + 32 + 16) =
  // 640, scores 160, target 134.4), and the absorbed sparse core's 320 x 0.7 = 224 against
  // the dense core's 192.
  EXPECT_NEAR(
      dsa.recompute_flops[Recompute::selective] - dense.recompute_flops[Recompute::selective],
      640 + 160 + 134.4 + 224 - 192, 1e-9);
}

TEST(DsaCost, ScoresInFp8UnderAnFp8Run) {
  // s = 64 (T = 64), k = 64: 2048 pairs x 2 x 2 x 5 = 40960 FLOPs. bf16 on the unit device:
  // 40960 ps. FP8 at 2 TFLOPS: 20480 ps, above its bytes (FP8 q and k 64 x (8 + 4) = 768,
  // fp32 weights 64 x 2 x 4 = 512, fp32 scores 64 x 64 x 4 = 16384: 17664).
  HardwareSpec hw = unit_device();
  const double bf16 =
      op(decoder_layer_cost(tiny(64), hw, settings(64)), "indexer_scores").forward_s;
  EXPECT_NEAR(bf16, 40960 * kPs, 1e-18);
  hw.fp8_peak_tflops = 2;
  CostSettings st = settings(64);
  EXPECT_NEAR(op(decoder_layer_cost(tiny(64), hw, st), "indexer_scores").forward_s, bf16, 1e-18);
  st.fp8 = Fp8::e4m3;
  EXPECT_NEAR(op(decoder_layer_cost(tiny(64), hw, st), "indexer_scores").forward_s, 20480 * kPs,
              1e-18);
}

TEST(DsaCost, SequenceParallelGathersTheHiddenStateForwardOnly) {
  CostSettings st = settings(4);
  st.tp = 2;
  st.sequence_parallel = true;
  const LayerCost dense = decoder_layer_cost(tiny(0), unit_device(), st);
  const LayerCost dsa = decoder_layer_cost(tiny(2), unit_device(), st);
  // Every tp rank runs the whole indexer on all 4 tokens: the gather of x, forward only
  // (the input is detached), and the target's all-reduce over tp.
  EXPECT_GT(op(dsa, "indexer_all_gather").forward_s, 0.0);
  EXPECT_EQ(op(dsa, "indexer_all_gather").backward_input_s, 0.0);
  EXPECT_GT(op(dsa, "indexer_loss_all_reduce").forward_s, 0.0);
  EXPECT_NEAR(op(dsa, "indexer_wq_b").forward_s, 256 * kPs, 1e-20);  // not split by tp
  // Kept: tp 1's 192 bytes and the gathered x, 2 x 4 x 8 = 64, which the weight-grads of
  // indexer_wk and indexer_weights_proj read (so the weight-grad keeps it too); and the
  // absorbed core's tensors on 1 head a rank: q' 4 x 6, k 4 x 6, the latent output 4 x 4,
  // q_nope and v_up's output 4 x 2 each = 80 elements against the dense 4 x (4 + 4 + 2 + 2)
  // = 48, 64 bytes more.
  EXPECT_EQ(dsa.activation_bytes[Recompute::none] - dense.activation_bytes[Recompute::none],
            256 + 64);
  EXPECT_EQ(dsa.weight_grad_bytes[Recompute::none] - dense.weight_grad_bytes[Recompute::none], 64);
  // The indexer is whole on each rank: its 88 parameters on both.
  EXPECT_EQ(dsa.param_count - dense.param_count, 88);
}

TEST(DsaCost, ContextParallelismIsRefused) {
  CostSettings st = settings(8);
  st.cp = 2;
  EXPECT_THROW(decoder_layer_cost(tiny(2), unit_device(), st), ShapeError);
}

}  // namespace dsa_cost_test
}  // namespace bmpipe
