// FP8 GEMMs (training.fp8, issue 19 item 1): GEMMs at the FP8 peak, the casts of their
// inputs as memory-bound work, the FP8 weight copies, the FP8 saved GEMM inputs (item 2),
// and the devices that refuse FP8.
// Expected values are worked by hand from the shapes below.
#include <gtest/gtest.h>

#include "experiment/config_cases.hpp"
#include "experiment/experiment.hpp"
#include "experiment/hf_config.hpp"
#include "support/round_device.hpp"
#include "support/sub_op.hpp"

namespace bmpipe {
namespace {

// The round device (support/round_device.hpp: 1000 TFLOPS bf16, GEMMs at 0.5, 1000 GB/s of
// HBM all reached, no launch cost) with 2000 TFLOPS of FP8; tp 1, so its links carry nothing.
HardwareSpec round_device() {
  HardwareSpec hw = test::round_device(100, 0);
  hw.fp8_peak_tflops = 2000;
  return hw;
}

CostSettings llama_4096(Fp8 fp8, Fp8Recipe recipe = Fp8Recipe::delayed) {
  CostSettings st;
  st.seq_length = 4096;
  st.micro_batch_size = 1;
  st.grad_accumulation = GradAccumulation::overwrite;
  st.fp8 = fp8;
  st.fp8_recipe = recipe;
  return st;
}

using test::op;

// Llama 3 8B's out_proj at s = 4096, tp 1: [4096 x 4096] x [4096 x 4096], 2 x 4096^3 =
// 137,438,953,472 FLOPs. bf16: 137.44e9 / (1000e12 x 0.5) = 274.877906944 us, against
// 3 x 4096^2 x 2 bytes / 1e12 = 100.66 us of memory: compute-bound. FP8: the FLOPs at
// 2000e12 x 0.5 = 137.438953472 us (half), the GEMM's bytes 4096^2 x (1 + 1 + 2) = 67.1 us
// (still compute-bound), plus the cast of its 4096 x 4096 bf16 input to FP8: read 2 bytes,
// write 1 = 50,331,648 bytes = 50.331648 us, a sub-op of its own ("out_proj_cast", kernel
// class cast) beside the GEMM's.
TEST(Fp8, AGemmRunsAtTheFp8PeakPlusTheCastOfItsInput) {
  const ModelShape& m = *find_model_preset("llama3-8b");
  const HardwareSpec hw = round_device();
  const LayerCost bf16 = decoder_layer_cost(m, hw, llama_4096(Fp8::none));
  const LayerCost fp8 = decoder_layer_cost(m, hw, llama_4096(Fp8::hybrid));
  EXPECT_NEAR(op(bf16, "out_proj").forward_s, 274.877906944e-6, 1e-12);
  EXPECT_NEAR(op(fp8, "out_proj").forward_s, 137.438953472e-6, 1e-12);
  EXPECT_NEAR(op(fp8, "out_proj_cast").forward_s, 50.331648e-6, 1e-12);
  EXPECT_EQ(op(fp8, "out_proj_cast").kind, KernelClass::cast);
  EXPECT_EQ(op(fp8, "out_proj").kind, KernelClass::gemm);
  // bf16 casts nothing.
  for (const SubOpCost& o : bf16.ops) EXPECT_NE(o.kind, KernelClass::cast) << o.name;
  // Input-grad: the same FLOPs at the backward fraction, plus the cast of dY (4096 x 4096).
  EXPECT_NEAR(op(fp8, "out_proj").backward_input_s, 137.438953472e-6, 1e-12);
  EXPECT_NEAR(op(fp8, "out_proj_cast").backward_input_s, 50.331648e-6, 1e-12);
  // Weight-grad: no cast of its own (X and dY came out FP8 from the casts above), and the
  // FLOPs at half the bf16 time: exactly half when compute-bound.
  EXPECT_EQ(op(fp8, "out_proj_cast").backward_weight_s, 0.0);
  EXPECT_NEAR(op(fp8, "out_proj").backward_weight_s, op(bf16, "out_proj").backward_weight_s / 2,
              1e-12);
  // The FLOPs counted are the same.
  EXPECT_DOUBLE_EQ(fp8.forward_flops, bf16.forward_flops);
}

// HardwareSpec::fp8_matmul_scale (the h100-sxm preset's one H100 fit, 0.79): at 0.5 the
// same out_proj's FP8 GEMM runs at 2000e12 x 0.5 x 0.5 = 500 TFLOPS, 274.877906944 us (its
// 67.1 us of bytes still below that), plus the same 50.331648 us cast; bf16 GEMMs do not
// move.
TEST(Fp8, Fp8MatmulScaleSlowsOnlyTheFp8Gemms) {
  const ModelShape& m = *find_model_preset("llama3-8b");
  HardwareSpec hw = round_device();
  hw.fp8_matmul_scale = 0.5;
  const LayerCost fp8 = decoder_layer_cost(m, hw, llama_4096(Fp8::hybrid));
  EXPECT_NEAR(op(fp8, "out_proj").forward_s, 274.877906944e-6, 1e-12);
  EXPECT_NEAR(op(fp8, "out_proj_cast").forward_s, 50.331648e-6, 1e-12);
  EXPECT_NEAR(op(decoder_layer_cost(m, hw, llama_4096(Fp8::none)), "out_proj").forward_s,
              274.877906944e-6, 1e-12);
  EXPECT_DOUBLE_EQ(find_hardware_preset("h100-sxm")->fp8_matmul_scale, 0.79);
  EXPECT_DOUBLE_EQ(find_hardware_preset("h800")->fp8_matmul_scale, 0.79);  // GH100 too
  // Blackwell's own fit on its published runs (bench/fidelity/fit.py blackwell).
  EXPECT_DOUBLE_EQ(find_hardware_preset("b200")->fp8_matmul_scale, 1.05);
  EXPECT_DOUBLE_EQ(find_hardware_preset("gb200")->fp8_matmul_scale, 1.05);
}

TEST(Fp8, TensorwiseScalingReadsTheInputOnceMoreForItsAmax) {
  // Current scaling: an amax pass (2 bytes an element) before the cast: 5 x 4096^2 bytes
  // = 83.88608 us of casting instead of 50.331648.
  const ModelShape& m = *find_model_preset("llama3-8b");
  const LayerCost c =
      decoder_layer_cost(m, round_device(), llama_4096(Fp8::e4m3, Fp8Recipe::tensorwise));
  EXPECT_NEAR(op(c, "out_proj").forward_s, 137.438953472e-6, 1e-12);
  EXPECT_NEAR(op(c, "out_proj_cast").forward_s, 83.88608e-6, 1e-12);
}

// Each recipe's cast of out_proj's 4096 x 4096 bf16 input (2 bytes read an element), as its
// own sub-op: delayed writes 1 byte (3 bytes an element, 50.331648 us at 1000 GB/s);
// tensorwise (current) scaling reads the input once more for its amax (5 bytes, 83.88608
// us); blockwise writes an fp32 scale per 128 values (3 + 4/128 = 3.03125 bytes, 50.855936
// us); MXFP8 an E8M0 scale per 32 (3 + 1/32, the same 50.855936 us); NVFP4 half a byte and
// an E4M3 scale per 16 after an amax pass (2 + 0.5625 + 2 = 4.5625 bytes, 76.546048 us).
TEST(Fp8, EachRecipeCastsItsGemmInputAtItsOwnBytes) {
  const ModelShape& m = *find_model_preset("llama3-8b");
  HardwareSpec hw = round_device();
  hw.fp4_peak_tflops = 4000;
  const std::vector<std::pair<Fp8Recipe, double>> expected = {{Fp8Recipe::delayed, 50.331648e-6},
                                                              {Fp8Recipe::tensorwise, 83.88608e-6},
                                                              {Fp8Recipe::blockwise, 50.855936e-6},
                                                              {Fp8Recipe::mxfp8, 50.855936e-6},
                                                              {Fp8Recipe::nvfp4, 76.546048e-6}};
  for (const auto& [recipe, cast_s] : expected) {
    const LayerCost c = decoder_layer_cost(m, hw, llama_4096(Fp8::e4m3, recipe));
    EXPECT_NEAR(op(c, "out_proj_cast").forward_s, cast_s, 1e-12) << static_cast<int>(recipe);
    // dY of out_proj is 4096 x 4096 too.
    EXPECT_NEAR(op(c, "out_proj_cast").backward_input_s, cast_s, 1e-12);
  }
}

TEST(Fp8, TheLayerHoldsAnFp8CopyOfItsGemmWeights) {
  // Llama 3 8B layer, tp 1: qkv 4096 x (4096 + 2 x 1024) = 25,165,824; out 4096^2 =
  // 16,777,216; gate+up 4096 x 2 x 14336 = 117,440,512; down 14336 x 4096 = 58,720,256:
  // 218,103,808 bytes (the layer's parameters less its two RMSNorm scales).
  const ModelShape& m = *find_model_preset("llama3-8b");
  const LayerCost fp8 = decoder_layer_cost(m, round_device(), llama_4096(Fp8::hybrid));
  EXPECT_DOUBLE_EQ(fp8.fp8_weight_bytes, 218103808.0);
  EXPECT_EQ(fp8.param_count, 218103808 + 2 * 4096);
  EXPECT_DOUBLE_EQ(decoder_layer_cost(m, round_device(), llama_4096(Fp8::none)).fp8_weight_bytes,
                   0.0);
  // The output layer stays bf16 under FP8, as Megatron runs it.
  const LayerCost head = head_cost(m, round_device(), llama_4096(Fp8::hybrid), true);
  const LayerCost head16 = head_cost(m, round_device(), llama_4096(Fp8::none), true);
  EXPECT_DOUBLE_EQ(head.forward_s, head16.forward_s);
  EXPECT_DOUBLE_EQ(head.fp8_weight_bytes, 0.0);
}

// FP8 saved activations (issue 19): a GEMM run in FP8 keeps the FP8 cast of its input for
// its weight-grad (TransformerEngine's Linear), one byte an element instead of two; the
// other saved tensors stay bf16. Llama 3 8B at s 4096, tp 1 (flash attention), delayed
// scaling: the tensors only a GEMM keeps are the qkv and gate/up inputs (4096 x 4096 each)
// and down_proj's (4096 x 14336): 2 x (2 x 16,777,216 + 58,720,256) = 184,549,376 bf16
// bytes, halved: 92,274,688 fewer. Flash attention keeps its bf16 output, out_proj's input,
// so out_proj's FP8 copy (4096 x 4096 = 16,777,216 bytes) comes beside it: 75,497,472 fewer
// in all. With the core checkpointed (selective) flash's copy goes with the checkpoint and
// out_proj's FP8 copy alone keeps the output: 16,777,216 more fewer than bf16's 2-byte
// output, 109,051,904 (FP8CoreOutput below).
TEST(Fp8, SavedGemmInputsAreKeptAsTheirFp8Casts) {
  const ModelShape& m = *find_model_preset("llama3-8b");
  ASSERT_TRUE(m.flash_attention);
  const LayerCost bf16 = decoder_layer_cost(m, round_device(), llama_4096(Fp8::none));
  const LayerCost fp8 = decoder_layer_cost(m, round_device(), llama_4096(Fp8::hybrid));
  EXPECT_EQ(bf16.activation_bytes[Recompute::none] - fp8.activation_bytes[Recompute::none],
            75'497'472);
  EXPECT_EQ(
      bf16.activation_bytes[Recompute::selective] - fp8.activation_bytes[Recompute::selective],
      109'051'904);
  // Full recompute keeps the layer input only, a bf16 residual.
  EXPECT_EQ(fp8.activation_bytes[Recompute::full], bf16.activation_bytes[Recompute::full]);
  // What the weight-grad pass still needs: the four projections' inputs, now their FP8
  // casts: (2 x 16,777,216 + 16,777,216 + 58,720,256) bytes fewer = 109,051,904.
  EXPECT_EQ(bf16.weight_grad_bytes[Recompute::none] - fp8.weight_grad_bytes[Recompute::none],
            109'051'904);
}

// The attention core's output (out_proj's input) under FP8, with and without the core
// checkpointed, as Megatron-Core keeps it (NVIDIA/Megatron-LM d98e8a64ddf3):
//   - megatron/core/transformer/attention.py:428-444: for FP8 with a recipe other than
//     delayed (TE >= 2.6) and for FP4, set_save_original_input(self.linear_proj), "the
//     output of the fused core_attn is saved by itself, and linear_proj also saves the
//     quantized tensor of this output ... save the original input tensors to avoid the extra
//     memory usage": out_proj keeps the bf16 output itself, no FP8 copy;
//   - attention.py:446-495 and 1555-1563: a checkpointed core runs in
//     tensor_parallel.checkpoint, which keeps q, k, v and none of flash's own tensors, its
//     output included.
// Llama 3 8B, s 4096, tp 1: the output is 4096 x 4096 = 16,777,216 elements, 33,554,432
// bf16 bytes; its FP8 cast 16,777,216 (delayed and tensorwise: 1 byte, one scale a tensor).
//   delayed, none:         flash's bf16 + out_proj's FP8 = 33,554,432 + 16,777,216
//   delayed, selective:    out_proj's FP8 alone          = 16,777,216
//   tensorwise, none:      the bf16 output, kept by both = 33,554,432
//   tensorwise, selective: out_proj's bf16 original      = 33,554,432
// The rest is the same under both recipes (the other GEMM inputs at 1 byte an element), so
// tensorwise - delayed is -16,777,216 (none) and +16,777,216 (selective), and selective
// frees the output's 33,554,432 under delayed beside what it frees in bf16 (the fp32
// logsumexp), nothing more under tensorwise.
TEST(Fp8CoreOutput, KeptAsMegatronKeepsItPerRecipeAndCheckpoint) {
  const ModelShape& m = *find_model_preset("llama3-8b");
  ASSERT_TRUE(m.flash_attention);
  const LayerCost bf16 = decoder_layer_cost(m, round_device(), llama_4096(Fp8::none));
  const LayerCost delayed = decoder_layer_cost(m, round_device(), llama_4096(Fp8::hybrid));
  const LayerCost current =
      decoder_layer_cost(m, round_device(), llama_4096(Fp8::hybrid, Fp8Recipe::tensorwise));
  const auto freed = [](const LayerCost& c) {
    return c.activation_bytes[Recompute::none] - c.activation_bytes[Recompute::selective];
  };
  EXPECT_EQ(current.activation_bytes[Recompute::none] - delayed.activation_bytes[Recompute::none],
            -16'777'216);
  EXPECT_EQ(current.activation_bytes[Recompute::selective] -
                delayed.activation_bytes[Recompute::selective],
            16'777'216);
  EXPECT_EQ(freed(delayed) - freed(bf16), 33'554'432);
  EXPECT_EQ(freed(current), freed(bf16));
  // Against bf16: the other GEMM inputs' 92,274,688 fewer bytes alone under tensorwise.
  for (Recompute r : {Recompute::none, Recompute::selective})
    EXPECT_EQ(bf16.activation_bytes[r] - current.activation_bytes[r], 92'274'688)
        << recompute_name(r);
  // The weight-grad pass reads out_proj's saved input: its FP8 copy under delayed, the bf16
  // original under tensorwise (16,777,216 bytes more).
  EXPECT_EQ(current.weight_grad_bytes[Recompute::none] - delayed.weight_grad_bytes[Recompute::none],
            16'777'216);
}

// GPT-3 175B's layer at s 2048, tp 1, Megatron's unfused core (nothing else keeps its
// output): all four projections' inputs halve, qkv and fc1 (2048 x 12288 each), out_proj
// (2048 x 12288) and fc2 (2048 x 49152): 25,165,824 x 3 + 100,663,296 = 176,160,768 bytes.
TEST(Fp8, AnUnfusedCoresOutputHalvesToo) {
  const ModelShape& m = *find_model_preset("gpt3-175b");
  ASSERT_FALSE(m.flash_attention);
  CostSettings st = llama_4096(Fp8::none);
  st.seq_length = 2048;
  const LayerCost bf16 = decoder_layer_cost(m, round_device(), st);
  st.fp8 = Fp8::e4m3;
  const LayerCost fp8 = decoder_layer_cost(m, round_device(), st);
  EXPECT_EQ(bf16.activation_bytes[Recompute::none] - fp8.activation_bytes[Recompute::none],
            176'160'768);
  EXPECT_EQ(
      bf16.activation_bytes[Recompute::selective] - fp8.activation_bytes[Recompute::selective],
      176'160'768);
}

// Mixtral 8x7B's MoE layer at s 4096, tp 1, ep 1: the qkv input (4096 x 4096), the experts'
// input rows (4096 x top-2 = 8192 x 4096) and experts_down's input (8192 x 14336) halve:
// (16,777,216 + 33,554,432 + 117,440,512) bytes; the router (a bf16 GEMM) keeps its bf16
// input, and out_proj's FP8 copy comes beside flash's output: less 16,777,216.
TEST(Fp8, MoeExpertInputsAreFp8TheRoutersBf16) {
  ModelShape m = read_hf_config(std::string(BMPIPE_TEST_DATA_DIR) + "/hf/mixtral_8x7b_config.json");
  m.moe.load_imbalance = 1.0;
  const LayerCost bf16 = moe_decoder_layer_cost(m, round_device(), llama_4096(Fp8::none));
  const LayerCost fp8 = moe_decoder_layer_cost(m, round_device(), llama_4096(Fp8::hybrid));
  EXPECT_EQ(bf16.activation_bytes[Recompute::none] - fp8.activation_bytes[Recompute::none],
            150'994'944);
}

TEST(Fp8, PresetsCarryTheirFp8Peaks) {
  // Datasheets, dense (half the "with sparsity" figures): H100/H200 3958 / 2; HGX B200
  // 72 PFLOPS / 8 / 2; GB200 NVL72 720 PFLOPS / 72 / 2. A100, 910B and 910C: none.
  EXPECT_DOUBLE_EQ(find_hardware_preset("h100-sxm")->fp8_peak_tflops, 1979);
  EXPECT_DOUBLE_EQ(find_hardware_preset("h200")->fp8_peak_tflops, 1979);
  EXPECT_DOUBLE_EQ(find_hardware_preset("h800")->fp8_peak_tflops, 1979);
  EXPECT_DOUBLE_EQ(find_hardware_preset("b200")->fp8_peak_tflops, 4500);
  EXPECT_DOUBLE_EQ(find_hardware_preset("gb200")->fp8_peak_tflops, 5000);
  for (const char* none : {"a100-80g", "ascend-910b", "ascend-910c"})
    EXPECT_DOUBLE_EQ(find_hardware_preset(none)->fp8_peak_tflops, 0) << none;
  EXPECT_TRUE(find_hardware_preset("b200")->mxfp8);
  EXPECT_TRUE(find_hardware_preset("gb200")->mxfp8);
  EXPECT_FALSE(find_hardware_preset("h100-sxm")->mxfp8);
}

// Line 11 holds training.fp8, line 12 training.fp8_recipe.
std::string fp8_config(const std::string& preset, const std::string& fp8,
                       const std::string& recipe) {
  return "cluster:\n  nodes: 1\n  device: {preset: " + preset +
         "}\nmodel: {preset: llama3-8b}\n"
         "training:\n"
         "  schedule: 1f1b\n"
         "  pp: 2\n"
         "  seq_length: 4096\n"
         "  micro_batch_size: 1\n"
         "  global_batch_size: 16\n"
         "  fp8: " +
         fp8 +
         "\n"
         "  fp8_recipe: " +
         recipe + "\n";
}

TEST(Fp8, DevicesWithoutFp8RefuseItNamingTheKey) {
  for (const char* device : {"a100-80g", "ascend-910b"}) {
    const ConfigError e = test::config_error(fp8_config(device, "hybrid", "delayed"));
    EXPECT_EQ(e.key(), "training.fp8") << device;
    EXPECT_EQ(e.line(), 11) << device;
    EXPECT_TRUE(test::has(e.message(), "has no FP8 peak")) << device;
  }
  const ConfigError mx = test::config_error(fp8_config("h100-sxm", "e4m3", "mxfp8"));
  EXPECT_EQ(mx.key(), "training.fp8_recipe");
  EXPECT_EQ(mx.line(), 12);
  EXPECT_TRUE(test::has(mx.message(), "mxfp8 needs block-scaled FP8 GEMMs"));
  // Accepted where the hardware has them.
  EXPECT_NO_THROW(parse_config(fp8_config("b200", "hybrid", "mxfp8"), "b200.yaml"));
  EXPECT_NO_THROW(parse_config(fp8_config("a100-80g", "none", "delayed"), "a100.yaml"));
}

// fp8_matmul_scale is a multiple of the bf16 GEMM's fraction of peak, so it may pass 1 as
// long as no GEMM passes the FP8 peak: scale x efficiency <= 1 for every GEMM kind.
TEST(Fp8, TheScaleMayPassOneButNoGemmPassesTheFp8Peak) {
  auto with_device = [](const std::string& keys) {
    return "cluster:\n  nodes: 1\n  device:\n    preset: h100-sxm\n" + keys +
           "model: {preset: llama3-8b}\ntraining: {pp: 2, seq_length: 4096, "
           "micro_batch_size: 1, global_batch_size: 16, fp8: hybrid}\n";
  };
  // 1.2 x 0.8 = 0.96 of the FP8 peak: allowed, and it reads as that fraction.
  const auto fast = prepare(
      parse_config(with_device("    matmul_efficiency: 0.8\n    matmul_backward_efficiency: 0.8\n"
                               "    fp8_matmul_scale: 1.2\n"),
                   "fast.yaml"));
  EXPECT_DOUBLE_EQ(fast->config.device.hardware->fp8_matmul_scale, 1.2);
  // 1.5 x 0.8 = 1.2 of the FP8 peak: refused on the key's line, with the largest scale.
  const ConfigError e = test::config_error(
      with_device("    matmul_efficiency: 0.8\n    matmul_backward_efficiency: 0.8\n"
                  "    fp8_matmul_scale: 1.5\n"));
  EXPECT_EQ(e.key(), "cluster.device.fp8_matmul_scale");
  EXPECT_EQ(e.line(), 7);
  EXPECT_TRUE(test::has(e.message(), "puts an FP8 GEMM at 1.2 of the FP8 peak")) << e.message();
  EXPECT_TRUE(test::has(e.message(), "expected at most 1 / 0.8 = 1.25")) << e.message();
  // The weight-grad efficiency counts too: 1.2 x 0.9 > 1.
  const ConfigError w = test::config_error(
      with_device("    matmul_efficiency: 0.8\n    matmul_backward_efficiency: 0.8\n"
                  "    matmul_weight_grad_efficiency: 0.9\n    fp8_matmul_scale: 1.2\n"));
  EXPECT_EQ(w.key(), "cluster.device.fp8_matmul_scale");
  EXPECT_TRUE(test::has(w.message(), "GEMM efficiency 0.9")) << w.message();
}

TEST(Fp8, TheStageHoldsTheFp8WeightsAndRunsFaster) {
  const auto bf16 = prepare(parse_config(fp8_config("h100-sxm", "none", "delayed"), "a.yaml"));
  const auto fp8 = prepare(parse_config(fp8_config("h100-sxm", "hybrid", "delayed"), "b.yaml"));
  EXPECT_DOUBLE_EQ(fp8->analytic->decoder.fp8_weight_bytes, 218103808.0);
  EXPECT_LT(fp8->analytic->decoder.forward_s, bf16->analytic->decoder.forward_s);
  // Every decoder row of the layer table holds the 218,103,808 bytes of FP8 weights more.
  int decoders = 0;
  for (std::size_t i = 0; i < fp8->layers.layers.size(); ++i)
    if (fp8->layers.layers[i].name.rfind("decoder", 0) == 0) {
      ++decoders;
      EXPECT_EQ(fp8->layers.layers[i].static_bytes - bf16->layers.layers[i].static_bytes,
                218103808);
    }
  EXPECT_EQ(decoders, 32);
}

// training.fp8_param_gather (Megatron-LM's --fp8-param-gather; Megatron-Bridge's FP8 and
// MXFP8 recipes set it): the GEMM weights are kept in FP8 alone. Llama 3 8B's decoder layer
// has G = 218 103 808 GEMM parameters (qkv 4096 x 6144, out 4096^2, MLP 3 x 4096 x 14336),
// whose FP8 copy is G bytes beside their 2 G of bf16. ZeRO-1 holds the weights whole: the
// layer holds 2 G = 436 207 616 bytes less. ZeRO-3 over dp 4 (8 devices, pp 2) shards them:
// the unsharded copy G (kept as TE's cache) becomes (G - 2 G) / 4 = -G / 4, i.e.
// 5 G / 4 = 272 629 760 bytes less.
TEST(Fp8, Fp8ParamGatherHoldsTheGemmWeightsInFp8Alone) {
  const std::string base = fp8_config("h100-sxm", "hybrid", "tensorwise");
  for (const auto& [stage, less] :
       {std::pair<int, std::int64_t>{1, 436207616}, std::pair<int, std::int64_t>{3, 272629760}}) {
    const std::string z = base + "  optimizer: {zero_stage: " + std::to_string(stage) + "}\n";
    const auto copy = prepare(parse_config(z, "a.yaml"));
    const auto alone = prepare(parse_config(z + "  fp8_param_gather: true\n", "b.yaml"));
    int decoders = 0;
    for (std::size_t i = 0; i < copy->layers.layers.size(); ++i)
      if (copy->layers.layers[i].name.rfind("decoder", 0) == 0) {
        ++decoders;
        EXPECT_EQ(copy->layers.layers[i].static_bytes - alone->layers.layers[i].static_bytes, less)
            << "zero_stage " << stage << " " << copy->layers.layers[i].name;
      }
    EXPECT_EQ(decoders, 32);
  }
}

// ZeRO-3 gathers FP8 weights in FP8: 1e9 GEMM parameters over 4 ranks on a 100 GB/s link
// with no latency, a ring: 3/4 x 1e9 bytes / 100e9 = 7.5 ms, against 15 ms for their bf16
// bytes. The layer's forward is 0, so its whole gather is exposed.
TEST(Fp8, Fp8ParamGatherGathersInFp8) {
  const HardwareSpec hw = test::round_device(100, 0);
  for (const bool fp8_param : {false, true}) {
    LayerCost c;
    c.param_count = 1'000'000'000;
    c.fp8_gemm_params = 1e9;
    c.fp8_weight_bytes = 1e9;
    CostSettings st = llama_4096(Fp8::hybrid, Fp8Recipe::tensorwise);
    st.param_shard_dp = 4;
    st.param_shard_dp_per_domain = 4;
    st.fp8_param = fp8_param;
    add_param_sharding_comm(c, hw, st);
    EXPECT_NEAR(op(c, "param_all_gather").forward_s, fp8_param ? 7.5e-3 : 15e-3, 1e-12);
  }
}

// ZeRO-1's all-gather after the step moves what Megatron's distributed optimizer holds in
// its parameter buffer (param_gather_bytes, ParamGatherer::distributed_optimizer; Megatron-LM
// d98e8a64, param_and_grad_buffer.py): under --fp8-param-gather the GEMM weights as uint8,
// one byte each (tensorwise) or half a byte (NVFP4, packed), scales left out; MXFP8
// weights as bf16 (the buffer shared with the gradients). Llama-2-7B on one node of 8
// B200, pp 1, dp 8, NVLink 100 GB/s, no latency, no NVLS: a ring of 8 in one domain,
// (8 - 1)/8 of the bytes over 100 GB/s. The rank holds all 32 layers' GEMM weights,
// G = 32 x (4 x 4096^2 + 3 x 4096 x 11008) = 6,476,005,376 parameters (the embedding, the
// head and the norms stay bf16). So the gather is shorter by G x (2 - v) x 7/8 / 100 GB/s:
//   tensorwise (v = 1):   6,476,005,376 x 7/8 / 1e11 s = 56.66504704 ms
//   NVFP4      (v = 0.5): 9,714,008,064 x 7/8 / 1e11 s = 84.99757056 ms
//   MXFP8      (v = 2):   0
// ZeRO-2 gathers alike. The Adam step is the same either way, so the tails differ by exactly
// that. Before the rule the ZeRO-1/2 gather moved bf16 whatever the weights: 0 for all three.
TEST(Fp8, ZeroOneGathersTheFp8WeightsAsTheDistributedOptimizerHoldsThem) {
  const auto tail = [](int zero_stage, const std::string& precision, bool fp8_param) {
    const std::string text =
        "cluster:\n"
        "  nodes: 1\n"
        "  devices_per_node: 8\n"
        "  device: {preset: b200, reserved_GiB: 0, collective_efficiency: 1, "
        "nic_efficiency: 1, nvls_efficiency: 0}\n"
        "  intra_node: {bandwidth_GBps: 100, latency_us: 0}\n"
        "model: {preset: llama2-7b}\n"
        "training:\n"
        "  pp: 1\n"
        "  seq_length: 4096\n"
        "  global_batch_size: 16\n"
        "  optimizer: {zero_stage: " +
        std::to_string(zero_stage) + "}\n" + precision +
        (fp8_param ? "  fp8_param_gather: true\n" : "");
    const auto e = prepare(parse_config(text, "zero1_fp8.yaml"));
    const Schedule schedule = make_schedule(*e);
    const SimInput in = assemble(*e, config_plan(*e, schedule.num_stages), schedule);
    return static_cast<double>(in.tail_time.at(0));
  };
  const struct {
    std::string precision;
    double shorter_ns;
  } cases[] = {
      {"  fp8: hybrid\n  fp8_recipe: tensorwise\n", 56'665'047.04},
      {"  fp8: e4m3\n  fp8_recipe: nvfp4\n", 84'997'570.56},
      {"  fp8: e4m3\n  fp8_recipe: mxfp8\n", 0.0},
  };
  for (const int stage : {1, 2})
    for (const auto& c : cases)
      EXPECT_NEAR(tail(stage, c.precision, false) - tail(stage, c.precision, true), c.shorter_ns, 2)
          << "zero_stage " << stage << c.precision;
}

TEST(Fp8, Fp8ParamGatherNeedsFp8AndAShardedOptimizer) {
  ConfigError e = test::config_error(fp8_config("h100-sxm", "none", "delayed") +
                                     "  fp8_param_gather: true\n  optimizer: {zero_stage: 1}\n");
  EXPECT_EQ(e.key(), "training.fp8_param_gather");
  EXPECT_EQ(e.line(), 13);
  EXPECT_TRUE(test::has(e.message(), "but training.fp8 is none")) << e.message();
  e = test::config_error(fp8_config("h100-sxm", "hybrid", "tensorwise") +
                         "  fp8_param_gather: true\n");
  EXPECT_EQ(e.key(), "training.fp8_param_gather");
  EXPECT_TRUE(test::has(e.message(),
                        "--fp8-param-gather only supported with distributed "
                        "optimizer"))
      << e.message();
}

}  // namespace
}  // namespace bmpipe
