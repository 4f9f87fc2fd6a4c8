// The unfused attention core (model.flash_attention false: Megatron-Core's local
// DotProductAttention, or TransformerEngine's UnfusedDotProductAttention, which
// `bmpipe import megatron` reads from --attention-backend local / unfused) worked out by
// hand on the tiny layer (h 8, 2 heads of 4) at s = 64, micro-batch 1, bf16:
//   T = 64 tokens, q and kv columns 2 x 4 = 8, scores S2 = heads x s x s = 2 x 64 x 64 = 8192.
//   QK^T and PV are two batched GEMMs of 2 x T x s x 8 = 65,536 FLOPs each over the full
//   s x s (the causal mask is applied to the scores, not skipped), each moving
//   2 x (T x (8 + 8) + S2) = 18,432 bytes (its inputs and the score tensor).
//   Forward: the two GEMMs, and one fused scale-mask-softmax pass reading the scores and
//   writing the probabilities, 2 x 2 x S2 = 32,768 bytes.
//   Backward: four GEMMs (dP = dO V^T, dV = P^T dO, dQ = dS K, dK = dS^T Q) and the softmax
//   backward reading the probabilities and their gradient and writing the scores' gradient,
//   3 x 2 x S2 = 49,152 bytes.
//   Dropout on the probabilities (model.dropout): (2 x 2 + 1) x S2 = 40,960 bytes each way
//   (read and write the probabilities, a 1-byte mask).
// On the unit device (1e12 FLOP/s, 1e12 bytes/s, free launches) a sub-op takes max(FLOPs,
// bytes) picoseconds; with HBM at 1e11 bytes/s the GEMMs turn memory-bound.
#include <gtest/gtest.h>

#include "sim/cost/cost_model.hpp"
#include "support/round_device.hpp"
#include "support/sub_op.hpp"
#include "support/tiny_shape.hpp"

namespace bmpipe {
namespace unfused_attention_test {

constexpr double kPs = 1e-12;

ModelShape unfused(bool dropout = false) {
  ModelShape m = test::tiny_shape(0);
  m.flash_attention = false;
  m.dropout = dropout;
  check_shape(m);
  return m;
}

CostSettings settings() {
  CostSettings st = test::tiny_settings();
  st.seq_length = 64;
  return st;
}

TEST(UnfusedAttention, CoreByHandComputeBound) {
  const LayerCost c = decoder_layer_cost(unfused(), test::unit_device(), settings());
  const SubOpCost& a = test::op(c, "attention");
  // Two GEMMs of 65,536 FLOPs (above their 18,432 bytes) and the softmax's 32,768 bytes.
  EXPECT_NEAR(a.forward_s, (2 * 65536.0 + 32768.0) * kPs, 1e-18);
  // Four GEMMs and the softmax backward's 49,152 bytes.
  EXPECT_NEAR(a.backward_input_s, (4 * 65536.0 + 49152.0) * kPs, 1e-18);
  EXPECT_EQ(a.backward_weight_s, 0.0);
  EXPECT_EQ(a.forward_flops, 131072.0);
}

TEST(UnfusedAttention, DropoutAddsItsPassEachWay) {
  const LayerCost c = decoder_layer_cost(unfused(true), test::unit_device(), settings());
  const SubOpCost& a = test::op(c, "attention");
  EXPECT_NEAR(a.forward_s, (2 * 65536.0 + 32768.0 + 40960.0) * kPs, 1e-18);
  EXPECT_NEAR(a.backward_input_s, (4 * 65536.0 + 49152.0 + 40960.0) * kPs, 1e-18);
}

TEST(UnfusedAttention, CoreByHandMemoryBound) {
  HardwareSpec hw = test::unit_device();
  hw.hbm_GBps = 100;  // 1e11 bytes/s: 10 ps a byte
  const LayerCost c = decoder_layer_cost(unfused(), hw, settings());
  const SubOpCost& a = test::op(c, "attention");
  // Each GEMM: 18,432 bytes x 10 ps = 184,320 ps, above its 65,536 FLOPs.
  EXPECT_NEAR(a.forward_s, (2 * 184320.0 + 327680.0) * kPs, 1e-17);
  EXPECT_NEAR(a.backward_input_s, (4 * 184320.0 + 491520.0) * kPs, 1e-17);
}

// A sliding window saves the unfused core nothing: it forms every score and masks after.
TEST(UnfusedAttention, AWindowSavesItNothing) {
  ModelShape windowed = unfused();
  windowed.sliding_window = 8;
  windowed.sliding_every = 1;
  check_shape(windowed);
  const LayerCost c = decoder_layer_cost(windowed, test::unit_device(), settings());
  const SubOpCost& a = test::op(c, "attention");
  EXPECT_NEAR(a.forward_s, (2 * 65536.0 + 32768.0) * kPs, 1e-18);
  EXPECT_NEAR(a.backward_input_s, (4 * 65536.0 + 49152.0) * kPs, 1e-18);
}

}  // namespace unfused_attention_test
}  // namespace bmpipe
