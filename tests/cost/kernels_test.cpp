// training.kernels (issue 19, published-run fidelity): llama layers with HF's eager kernels
// (the default, what the h200 profiles measured) or with Megatron-Core's fused ones
// (TransformerEngine RMSNorm, fused RoPE and SwiGLU). Expected values are worked by hand
// from Llama-3-8B's shape at s = 4096, micro-batch 1, tp 1, on a device of round figures.
#include <gtest/gtest.h>

#include "experiment/config_cases.hpp"
#include "experiment/experiment.hpp"
#include "support/round_device.hpp"
#include "support/sub_op.hpp"

namespace bmpipe {
namespace kernels_test {

// The round device (support/round_device.hpp: 1000 GB/s of HBM all reached, GEMMs at half
// of 1000 TFLOPS) with `launch_us` per kernel; tp 1, so its links carry nothing.
HardwareSpec round_device(double launch_us) {
  HardwareSpec hw = test::round_device(100, 0);
  hw.kernel_launch_us = launch_us;
  return hw;
}

CostSettings settings(Kernels kernels) {
  CostSettings st;
  st.seq_length = 4096;
  st.micro_batch_size = 1;
  st.kernels = kernels;
  return st;
}

using test::op;

// Llama-3-8B, T = 4096 tokens: the hidden tensor is 4096 x 4096 = 16,777,216 elements of
// 2 bytes; RoPE runs on q (4096 columns) and k (8 kv heads x 128 = 1024): 4096 x 5120 =
// 20,971,520 elements; SwiGLU's output is 4096 x 14336 = 58,720,256 elements.
constexpr double kHidden = 16777216, kRope = 20971520, kGlu = 58720256, kE = 2;

// At 1000 GB/s a byte takes 1e-12 s. Eager RMSNorm: 18 bytes an element forward, 36
// input-grad; fused: 2 (read, write) and 3 (read the gradient and the input, write).
// Eager RoPE: 10 and 8 bytes an element (five kernels each on q and k); fused: 2 and 2.
// Eager SwiGLU: 5 and 9 bytes an element of its output; fused: 3 (read gate and up, write)
// and 5 (read the gradient, gate and up; write both gradients).
TEST(Kernels, FusedNormRopeAndSwigluMoveTheBytesOfOneKernelEach) {
  const ModelShape& m = *find_model_preset("llama3-8b");
  const HardwareSpec hw = round_device(0);
  const LayerCost eager = decoder_layer_cost(m, hw, settings(Kernels::eager));
  const LayerCost fused = decoder_layer_cost(m, hw, settings(Kernels::fused));
  const struct {
    const char* name;
    double elements, eager_f, eager_i, fused_f, fused_i;
  } rows[] = {
      {"input_norm", kHidden, 18 * kE, 36 * kE, 2 * kE, 3 * kE},
      {"post_norm", kHidden, 18 * kE, 36 * kE, 2 * kE, 3 * kE},
      {"rope", kRope, 10 * kE, 8 * kE, 2 * kE, 2 * kE},
      {"swiglu", kGlu, 5 * kE, 9 * kE, 3 * kE, 5 * kE},
  };
  for (const auto& r : rows) {
    EXPECT_NEAR(op(eager, r.name).forward_s, r.elements * r.eager_f * 1e-12, 1e-12) << r.name;
    EXPECT_NEAR(op(eager, r.name).backward_input_s, r.elements * r.eager_i * 1e-12, 1e-12)
        << r.name;
    EXPECT_NEAR(op(fused, r.name).forward_s, r.elements * r.fused_f * 1e-12, 1e-12) << r.name;
    EXPECT_NEAR(op(fused, r.name).backward_input_s, r.elements * r.fused_i * 1e-12, 1e-12)
        << r.name;
  }
  // input_norm forward: 2 x 2 x 16,777,216 bytes = 67.108864 us, against 603.979776 us.
  EXPECT_NEAR(op(fused, "input_norm").forward_s, 67.108864e-6, 1e-12);
  EXPECT_NEAR(op(eager, "input_norm").forward_s, 603.979776e-6, 1e-12);
}

// One kernel each way for a fused norm, six forward and ten backward for HF's; two RoPE
// kernels (q and k) for fused, ten forward for eager; one fused qkv GEMM, three for HF's
// separate q, k and v projections. At 1 us a launch the differences are those counts.
TEST(Kernels, FusedKernelsLaunchOnceWhereEagerOnesLaunchSeveralTimes) {
  const ModelShape& m = *find_model_preset("llama3-8b");
  const LayerCost eager0 = decoder_layer_cost(m, round_device(0), settings(Kernels::eager));
  const LayerCost eager1 = decoder_layer_cost(m, round_device(1), settings(Kernels::eager));
  const LayerCost fused0 = decoder_layer_cost(m, round_device(0), settings(Kernels::fused));
  const LayerCost fused1 = decoder_layer_cost(m, round_device(1), settings(Kernels::fused));
  const auto launches = [](const LayerCost& with, const LayerCost& without, const char* name) {
    return (op(with, name).forward_s - op(without, name).forward_s) * 1e6;
  };
  EXPECT_NEAR(launches(fused1, fused0, "input_norm"), 1, 1e-9);
  EXPECT_NEAR(launches(eager1, eager0, "input_norm"), 6, 1e-9);
  EXPECT_NEAR(launches(fused1, fused0, "rope"), 2, 1e-9);
  EXPECT_NEAR(launches(eager1, eager0, "rope"), 10, 1e-9);
  EXPECT_NEAR(launches(fused1, fused0, "swiglu"), 1, 1e-9);
  EXPECT_NEAR(launches(eager1, eager0, "swiglu"), 2, 1e-9);
  EXPECT_NEAR(launches(eager1, eager0, "qkv_proj") - launches(fused1, fused0, "qkv_proj"), 2, 1e-9);
}

// Activations (no recompute), per layer: eager keeps the layer input and, per RMSNorm, an
// fp32 copy of its input and the bf16 normalized tensor (4 + 2 bytes an element); fused
// keeps each norm's input (2 bytes; the first one's is the layer input). Both keep an fp32
// rsqrt per token. So eager holds (2 + 2 x 6 - 2 x 2) = 10 bytes more per hidden element,
// and silu(gate) (2 bytes per SwiGLU output element): 10 x 16,777,216 + 2 x 58,720,256 =
// 285,212,672 bytes.
TEST(Kernels, FusedNormsAndSwigluKeepNoFp32CopyAndNoSiluOutput) {
  const ModelShape& m = *find_model_preset("llama3-8b");
  const HardwareSpec hw = round_device(0);
  const LayerCost eager = decoder_layer_cost(m, hw, settings(Kernels::eager));
  const LayerCost fused = decoder_layer_cost(m, hw, settings(Kernels::fused));
  for (Recompute r : {Recompute::none, Recompute::selective})
    EXPECT_EQ(eager.activation_bytes[r] - fused.activation_bytes[r], 285212672)
        << recompute_name(r);
  EXPECT_EQ(eager.activation_bytes[Recompute::full], fused.activation_bytes[Recompute::full]);
}

// Full recompute: HF's early-stopping checkpoint stops at the last op that saves a tensor
// (down_proj, whose input is saved), so it skips down_proj and the residual after it;
// Megatron's reentrant checkpoint re-runs the whole layer.
TEST(Kernels, FusedFullRecomputeReRunsTheWholeLayer) {
  const ModelShape& m = *find_model_preset("llama3-8b");
  const HardwareSpec hw = round_device(0);
  const LayerCost eager = decoder_layer_cost(m, hw, settings(Kernels::eager));
  const LayerCost fused = decoder_layer_cost(m, hw, settings(Kernels::fused));
  EXPECT_NEAR(fused.recompute_extra_s[Recompute::full], fused.forward_s, 1e-12);
  EXPECT_NEAR(
      eager.recompute_extra_s[Recompute::full],
      eager.forward_s - op(eager, "down_proj").forward_s - op(eager, "residual_2").forward_s,
      1e-12);
  EXPECT_DOUBLE_EQ(fused.recompute_flops[Recompute::full], fused.forward_flops);
}

// Megatron-LM accumulates weight gradients in the GEMM's epilogue unless told not to: with
// fused kernels that is the default, as it is for gpt layers; eager llama adds apart.
TEST(Kernels, FusedKernelsAccumulateGradientsInTheGemm) {
  const ModelShape& m = *find_model_preset("llama3-8b");
  const HardwareSpec hw = round_device(0);
  CostSettings explicit_fused = settings(Kernels::fused);
  explicit_fused.grad_accumulation = GradAccumulation::fused;
  CostSettings explicit_add = settings(Kernels::eager);
  explicit_add.grad_accumulation = GradAccumulation::add;
  EXPECT_DOUBLE_EQ(decoder_layer_cost(m, hw, settings(Kernels::fused)).backward_weight_s,
                   decoder_layer_cost(m, hw, explicit_fused).backward_weight_s);
  EXPECT_DOUBLE_EQ(decoder_layer_cost(m, hw, settings(Kernels::eager)).backward_weight_s,
                   decoder_layer_cost(m, hw, explicit_add).backward_weight_s);
}

// gpt layers are Megatron's fused kernels already: the key changes nothing there.
TEST(Kernels, GptLayersAreTheSameEitherWay) {
  const ModelShape& m = *find_model_preset("gpt3-175b");
  const HardwareSpec hw = round_device(1);
  CostSettings st = settings(Kernels::eager);
  st.seq_length = 2048;
  st.tp = 8;
  const LayerCost eager = decoder_layer_cost(m, hw, st);
  st.kernels = Kernels::fused;
  const LayerCost fused = decoder_layer_cost(m, hw, st);
  EXPECT_DOUBLE_EQ(eager.forward_s, fused.forward_s);
  EXPECT_DOUBLE_EQ(eager.backward_input_s, fused.backward_input_s);
  EXPECT_EQ(eager.activation_bytes[Recompute::none], fused.activation_bytes[Recompute::none]);
}

// Line 9 holds training.kernels.
std::string config(const std::string& model, const std::string& kernels) {
  return "cluster:\n  nodes: 1\n  device: {preset: h100-sxm}\nmodel: {preset: " + model +
         "}\ntraining:\n  schedule: 1f1b\n  pp: 2\n  seq_length: 2048\n  kernels: " + kernels +
         "\n  micro_batch_size: 1\n  global_batch_size: 16\n";
}

TEST(Kernels, TheKeyIsCheckedAndReachesTheLayers) {
  const ConfigError gpt = test::config_error(config("gpt3-175b", "eager"));
  EXPECT_EQ(gpt.key(), "training.kernels");
  EXPECT_EQ(gpt.line(), 9);
  EXPECT_TRUE(test::has(gpt.message(), "fused kernels only")) << gpt.message();
  const ConfigError typo = test::config_error(config("llama3-8b", "fuse"));
  EXPECT_EQ(typo.key(), "training.kernels");
  EXPECT_TRUE(test::has(typo.message(), "eager")) << typo.message();
  EXPECT_NO_THROW(parse_config(config("gpt3-175b", "fused"), "gpt.yaml"));
  const auto eager = prepare(parse_config(config("llama3-8b", "eager"), "a.yaml"));
  const auto fused = prepare(parse_config(config("llama3-8b", "fused"), "b.yaml"));
  EXPECT_LT(fused->layers.layers[1].forward, eager->layers.layers[1].forward);
  EXPECT_LT(fused->layers.layers[1].modes[Recompute::none]->activation_bytes,
            eager->layers.layers[1].modes[Recompute::none]->activation_bytes);
}

}  // namespace kernels_test
}  // namespace bmpipe
