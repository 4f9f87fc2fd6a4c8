// The kernel model (sim/cost/kernels.hpp): a GEMM's shape against its device (tile and wave
// quantization, the tile's intensity, the k loop's share), pinned on hand-worked shapes and
// on DeepGEMM's published H800 table; the head dimension's effect on fused attention; CUDA
// graphs removing launches; NVFP4's bytes and its refusal on a device without FP4.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "experiment/config.hpp"
#include "experiment/layer_table.hpp"
#include "sim/cost/cost_model.hpp"
#include "sim/cost/kernels.hpp"

namespace bmpipe {
namespace gemm_shape_test {

/// A device of `sms` SMs whose shape model has no k-loop cost and no tile-intensity limit
/// unless set: every factor can be worked by hand.
HardwareSpec toy(int sms, double k_half = 0, double intensity = 0) {
  HardwareSpec h = *find_hardware_preset("h100-sxm");
  h.sm_count = sms;
  h.gemm_k_half = k_half;
  h.gemm_tile_intensity = intensity;
  return h;
}

TEST(GemmShape, FillingEverySmIsWhole) {
  // 256 x 256 on 4 SMs: four 128 x 128 tiles, one wave, nothing idle.
  const GemmShapeFit fit = gemm_shape(toy(4), 256, 256, 4096);
  EXPECT_DOUBLE_EQ(fit.efficiency, 1.0);
  EXPECT_DOUBLE_EQ(fit.wave, 1.0);
}

TEST(GemmShape, OneRowMoreCostsAWave) {
  // 257 x 256 on 4 SMs. The best tile is 64 x 64: 5 x 4 = 20 tiles, 5 waves of 4, so
  // 257 x 256 useful of 5 x 4 x 64 x 64 = 65792 / 81920. (128 x 128 needs 3 x 2 = 6 tiles,
  // 2 waves: 65792 / 131072; 64 x 128 needs 10 tiles, 3 waves: 65792 / 98304.)
  const GemmShapeFit fit = gemm_shape(toy(4), 257, 256, 4096);
  EXPECT_NEAR(fit.efficiency, 65792.0 / 81920.0, 1e-12);
  EXPECT_EQ(fit.tile_m, 64);
  EXPECT_EQ(fit.tile_n, 64);
  // Steps, not a slope: 320 rows (5 tiles of 64) still take the same 5 waves.
  EXPECT_NEAR(gemm_shape(toy(4), 320, 256, 4096).efficiency, 1.0, 1e-12);
}

TEST(GemmShape, SmallTilesStarveTheTensorCores) {
  // Intensity 160 FLOP/byte: a 64 x 64 tile loads 64 + 64 values a step for 2 x 64 x 64
  // FLOPs, 64 per value: 64 / 160 = 0.4 of a large tile's rate. Here it is the only tile
  // that fits 64 x 64 without waste, and a 128 x 128 one (intensity 128: 0.8) at 1/4 fill
  // loses to it: 0.4 x 1 > 0.8 x 0.25.
  const GemmShapeFit fit = gemm_shape(toy(1, 0, 160), 64, 64, 4096);
  EXPECT_NEAR(fit.tile, 0.4, 1e-12);
  EXPECT_NEAR(fit.efficiency, 0.4, 1e-12);
}

TEST(GemmShape, DepthIsTheKLoopsShare) {
  // k_half 256 (bf16 elements): k = 1024 gives 1024 / 1280 = 0.8; an FP8 loop (speed 2)
  // runs twice as fast, so the fixed part is 512 elements' worth: 1024 / 1536.
  EXPECT_NEAR(gemm_shape(toy(4, 256), 256, 256, 1024).efficiency, 0.8, 1e-12);
  EXPECT_NEAR(gemm_shape(toy(4, 256), 256, 256, 1024, 1, 2).efficiency, 1024.0 / 1536.0, 1e-12);
}

TEST(GemmShape, GroupedWeightGradDependsOnTokensPerExpert) {
  // The experts' weight-grad GEMM reduces each expert's rows: on b200, 8192 rows spread
  // over 256 experts (32 each) reduce over k = 32, over 8 experts (1024 each) over 1024.
  // The k loop's share: 32 / (32 + 275) against 1024 / (1024 + 275). Output 2048 x 7168
  // per expert either way, many waves: the depth decides.
  const HardwareSpec& b200 = *find_hardware_preset("b200");
  ASSERT_GT(b200.sm_count, 0);
  const double fine = gemm_shape_efficiency(b200, 256 * 2048.0, 7168, 32, 256);
  const double coarse = gemm_shape_efficiency(b200, 8 * 2048.0, 7168, 1024, 8);
  const double depth_fine = 32 / (32 + kGemmKHalfFit), depth_coarse = 1024 / (1024 + kGemmKHalfFit);
  EXPECT_NEAR(gemm_shape(b200, 256 * 2048.0, 7168, 32, 256).depth, depth_fine, 1e-12);
  EXPECT_NEAR(gemm_shape(b200, 8 * 2048.0, 7168, 1024, 8).depth, depth_coarse, 1e-12);
  EXPECT_LT(fine, 0.5 * coarse);
}

TEST(GemmShape, DevicesWithoutSmsKeepTheFlatFraction) {
  // The Hopper, Ampere and Ascend presets' efficiencies were fitted flat: no shape model.
  for (const char* name : {"h200", "h100-sxm", "h800", "a100-80g", "ascend-910b"}) {
    EXPECT_EQ(find_hardware_preset(name)->sm_count, 0) << name;
    EXPECT_DOUBLE_EQ(gemm_shape_efficiency(*find_hardware_preset(name), 64, 64, 64), 1.0) << name;
  }
}

TEST(GemmShape, DeepGemmH800Table) {
  // deepseek-ai/DeepGEMM@327ec92's FP8 table on H800 (tests/data/deepgemm_h800_fp8.json),
  // against max(FLOPs / (1979 TFLOPS x 0.80 x shape), bytes / (3.35 TB/s x 0.8)) with the
  // fitted constants: mean |error| 8.5 %, max 28.6 %.
  std::ifstream in(std::string(BMPIPE_TEST_DATA_DIR) + "/deepgemm_h800_fp8.json");
  ASSERT_TRUE(in.good());
  const nlohmann::json doc = nlohmann::json::parse(in);
  const HardwareSpec h800 = toy(132, kGemmKHalfFit, kGemmTileIntensityFit);
  double sum = 0, worst = 0;
  int n = 0;
  for (const auto& row : doc["rows"]) {
    const double g = row["groups"], m = row["m"], nn = row["n"], k = row["k"];
    const double flops = 2 * m * nn * k;
    const double bytes = m * k + g * k * nn + 2 * m * nn;  // FP8 inputs, bf16 output
    const double t =
        std::max(flops / (1979e12 * 0.80 * gemm_shape_efficiency(h800, m, nn, k, g, 2)),
                 bytes / (3350e9 * 0.8));
    const double err = flops / t / 1e12 / row["tflops"].get<double>() - 1;
    sum += std::abs(err);
    worst = std::max(worst, std::abs(err));
    ++n;
  }
  ASSERT_EQ(n, 22);
  EXPECT_LT(sum / n, 0.09);
  EXPECT_LT(worst, 0.29);
}

TEST(AttentionHeadDim, CudnnFigures) {
  // FA3 paper, Figure 5, cuDNN at 4k: 408 TFLOPS at head dim 64, 609 at 128.
  EXPECT_NEAR(attention_head_dim_factor(64), 408.0 / 609.0, 1e-12);
  EXPECT_NEAR(attention_head_dim_factor(32), 408.0 / 609.0, 1e-12);
  EXPECT_DOUBLE_EQ(attention_head_dim_factor(128), 1.0);
  EXPECT_DOUBLE_EQ(attention_head_dim_factor(192), 1.0);
  // Half-way in log2 between 64 and 128.
  EXPECT_NEAR(attention_head_dim_factor(std::sqrt(64.0 * 128.0)), (408.0 / 609.0 + 1) / 2, 1e-12);
}

/// Layer 0 of `yaml`'s model with its config's settings.
LayerCost layer_of(const std::string& yaml) {
  const Config c = parse_config(yaml, "gemm_shape_test.yaml");
  return decoder_layer_cost(*c.model.shape, *c.device.hardware, cost_settings(c));
}

std::string llama_on_b200(const std::string& training_extra, const std::string& device_extra = "") {
  return "cluster:\n  nodes: 1\n  device:\n    preset: b200\n" + device_extra +
         "model:\n  preset: llama3-8b\ntraining:\n  pp: 1\n  seq_length: 4096\n"
         "  micro_batch_size: 1\n  global_batch_size: 8\n  kernels: fused\n" +
         training_extra;
}

TEST(CudaGraphs, FullIterationRemovesEveryLaunch) {
  const LayerCost none = layer_of(llama_on_b200(""));
  const LayerCost graphs = layer_of(llama_on_b200("  cuda_graphs: full_iteration\n"));
  const LayerCost free = layer_of(llama_on_b200("", "    kernel_launch_us: 0\n"));
  EXPECT_DOUBLE_EQ(graphs.forward_s, free.forward_s);
  EXPECT_DOUBLE_EQ(graphs.backward_input_s, free.backward_input_s);
  EXPECT_DOUBLE_EQ(graphs.backward_weight_s, free.backward_weight_s);
  EXPECT_LT(graphs.forward_s, none.forward_s);
}

TEST(CudaGraphs, AttnScopeRemovesTheAttentionBlocksLaunches) {
  // A fused llama layer's attention block launches 7 kernels forward: the norm, the qkv
  // GEMM, RoPE on q and on k, attention, the output GEMM and the residual add.
  const std::string dev = "    kernel_launch_us: 10\n";
  const LayerCost none = layer_of(llama_on_b200("", dev));
  const LayerCost attn = layer_of(llama_on_b200("  cuda_graphs: attn\n", dev));
  EXPECT_NEAR(none.forward_s - attn.forward_s, 7 * 10e-6, 1e-12);
  const LayerCost both = layer_of(llama_on_b200("  cuda_graphs: attn,mlp\n", dev));
  // The MLP block: norm, gate/up GEMM, SwiGLU, down GEMM, residual add: 5 more.
  EXPECT_NEAR(none.forward_s - both.forward_s, 12 * 10e-6, 1e-12);
}

TEST(CudaGraphs, AnUnknownScopeIsRefused) {
  try {
    parse_config(llama_on_b200("  cuda_graphs: attn,layers\n"), "g.yaml");
    FAIL() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "training.cuda_graphs");
    EXPECT_EQ(e.line(), 13);
    EXPECT_NE(e.message().find("'layers'"), std::string::npos) << e.message();
  }
}

TEST(Nvfp4, FourBitValuesAndTheirScales) {
  // NVFP4 keeps 0.5 byte a value plus an E4M3 scale per 16: 0.5625 bytes; MXFP8 1 + 1/32.
  const LayerCost fp8 = layer_of(llama_on_b200("  fp8: e4m3\n  fp8_recipe: delayed\n"));
  const LayerCost fp4 = layer_of(llama_on_b200("  fp8: e4m3\n  fp8_recipe: nvfp4\n"));
  const LayerCost mx = layer_of(llama_on_b200("  fp8: e4m3\n  fp8_recipe: mxfp8\n"));
  ASSERT_GT(fp8.fp8_weight_bytes, 0);
  EXPECT_NEAR(fp4.fp8_weight_bytes / fp8.fp8_weight_bytes, 0.5625, 1e-12);
  EXPECT_NEAR(mx.fp8_weight_bytes / fp8.fp8_weight_bytes, 1.03125, 1e-12);
  // The FP4 GEMMs run at b200's 9 PFLOPS FP4 peak against 4.5 FP8: the layer is faster,
  // its saved GEMM inputs smaller.
  EXPECT_LT(fp4.forward_s, fp8.forward_s);
  EXPECT_LT(fp4.activation_bytes[Recompute::none], fp8.activation_bytes[Recompute::none]);
}

TEST(Nvfp4, BlockwiseScalesToo) {
  // Blockwise FP8 keeps an fp32 scale per 128 values: 1 + 4/128 bytes an element.
  const LayerCost fp8 = layer_of(llama_on_b200("  fp8: e4m3\n  fp8_recipe: delayed\n"));
  const LayerCost block = layer_of(llama_on_b200("  fp8: e4m3\n  fp8_recipe: blockwise\n"));
  EXPECT_NEAR(block.fp8_weight_bytes / fp8.fp8_weight_bytes, 1 + 4.0 / 128, 1e-12);
}

TEST(AttentionTime, FlashAttentionOnAHandWorkedShape) {
  // llama3-8b at s = 4096, micro-batch 1, tp 1 on b200: causal flash attention forward is
  // 2 x 2 x T x s x (32 heads x 128) x 0.5 = 1.374e11 FLOPs at 2250 TFLOPS x 0.40 (the
  // Blackwell fit), plus one launch of 4 us; its q, k, v and output, 2 x 4096 x (2 x 4096 +
  // 2 x 1024) bytes, take 11.7 us at 8 TB/s x 0.9, under the compute.
  const LayerCost c = layer_of(llama_on_b200(""));
  const double flops = 2.0 * 2 * 4096 * 4096 * 4096 * 0.5;
  for (const SubOpCost& op : c.ops)
    if (op.name == "attention") {
      EXPECT_NEAR(op.forward_s, flops / (2250e12 * 0.40) + 4e-6, 1e-12);
      // Backward: 2.5 x the FLOPs at 0.28.
      EXPECT_NEAR(op.backward_input_s, 2.5 * flops / (2250e12 * 0.28) + 2 * 4e-6, 1e-12);
      return;
    }
  FAIL() << "no attention sub-op";
}

TEST(Nvfp4, AScaleBeyondThePeakIsRefused) {
  // b200's GEMMs at 0.55 of the bf16 peak: an fp4_matmul_scale of 2 would put an NVFP4
  // GEMM at 1.1 of the FP4 peak.
  try {
    parse_config(llama_on_b200("", "    fp4_matmul_scale: 2\n"), "fp4_scale.yaml");
    FAIL() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "cluster.device.fp4_matmul_scale");
    EXPECT_NE(e.message().find("puts an NVFP4 GEMM at 1.1 of the FP4 peak"), std::string::npos)
        << e.message();
  }
}

TEST(Nvfp4, RefusedWithoutFp4TensorCores) {
  const std::string yaml =
      "cluster:\n  nodes: 1\n  device:\n    preset: h100-sxm\nmodel:\n  preset: llama3-8b\n"
      "training:\n  pp: 1\n  seq_length: 4096\n  micro_batch_size: 1\n  global_batch_size: 8\n"
      "  fp8: e4m3\n  fp8_recipe: nvfp4\n";
  try {
    parse_config(yaml, "h100_nvfp4.yaml");
    FAIL() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "training.fp8_recipe");
    EXPECT_EQ(e.line(), 13);
    EXPECT_NE(e.message().find("no FP4 peak"), std::string::npos) << e.message();
  }
}

}  // namespace gemm_shape_test
}  // namespace bmpipe

namespace bmpipe {
namespace gemm_shape_test {

TEST(HostBound, APassTakesItsKernelsTimesTheHostsIssueTime) {
  // 1 ms of host time a kernel, far above the GPU's: a fused llama layer's forward issues
  // 12 kernels (attention block 7, MLP block 5: CudaGraphs above), so it takes 12 ms; its
  // backward 21 (input-grad 13: the norms, qkv, RoPE on q and k, attention's two, out_proj,
  // the residual, gate/up, SwiGLU, down, the residual; weight-grad 8: six GEMMs' and the two
  // norm scales' accumulation), so input-grad + weight-grad take 21 ms.
  const std::string dev = "    kernel_launch_us: 1\n    host_launch_us: 1000\n";
  const LayerCost c = layer_of(llama_on_b200("", dev));
  EXPECT_NEAR(c.forward_s, 12e-3, 1e-12);
  EXPECT_NEAR(c.backward_input_s + c.backward_weight_s, 21e-3, 1e-12);
  // Under a full CUDA graph the host issues nothing: the GPU's time stands.
  const LayerCost graphs = layer_of(llama_on_b200("  cuda_graphs: full_iteration\n", dev));
  const LayerCost gpu = layer_of(llama_on_b200("", "    kernel_launch_us: 0\n"));
  EXPECT_DOUBLE_EQ(graphs.forward_s, gpu.forward_s);
  // And with a host faster than the GPU nothing changes.
  const LayerCost fast =
      layer_of(llama_on_b200("", "    kernel_launch_us: 1\n    host_launch_us: 1\n"));
  const LayerCost none = layer_of(llama_on_b200("", "    kernel_launch_us: 1\n"));
  EXPECT_DOUBLE_EQ(fast.forward_s, none.forward_s);
  EXPECT_DOUBLE_EQ(fast.backward_input_s, none.backward_input_s);
}

}  // namespace gemm_shape_test
}  // namespace bmpipe

namespace bmpipe {
namespace gemm_shape_test {

TEST(KernelClasses, EverySubOpHasItsClass) {
  // An MoE layer on 8 H100 (ep 8): each sub-op's kernel class, and the classes add up to
  // the layer's time.
  const std::string yaml =
      "cluster:\n  nodes: 1\n  devices_per_node: 8\n  device:\n    preset: h100-sxm\n"
      "model:\n  architecture: llama\n  num_layers: 1\n  hidden_size: 4096\n"
      "  num_attention_heads: 32\n  ffn_hidden_size: 14336\n  vocab_size: 32000\n"
      "  moe: {num_experts: 8, top_k: 2}\n"
      "training:\n  pp: 1\n  ep: 8\n  seq_length: 4096\n  micro_batch_size: 1\n"
      "  global_batch_size: 8\n  kernels: fused\n";
  const Config c = parse_config(yaml, "kinds.yaml");
  const LayerCost layer =
      moe_decoder_layer_cost(*c.model.shape, *c.device.hardware, cost_settings(c));
  const std::map<std::string, std::string> expected = {{"input_norm", "memory"},
                                                       {"qkv_proj", "gemm"},
                                                       {"attention", "attention"},
                                                       {"out_proj", "gemm"},
                                                       {"router", "gemm"},
                                                       {"router_topk", "memory"},
                                                       {"permute", "permute"},
                                                       {"a2a-dispatch", "collective"},
                                                       {"experts_gate_up", "grouped_gemm"},
                                                       {"experts_swiglu", "memory"},
                                                       {"experts_down", "grouped_gemm"},
                                                       {"a2a-combine", "collective"},
                                                       {"unpermute", "permute"}};
  std::map<std::string, double> forward;
  for (const SubOpCost& op : layer.ops) {
    forward[kernel_class_name(op.kind)] += op.forward_s;
    if (expected.count(op.name)) {
      EXPECT_EQ(kernel_class_name(op.kind), expected.at(op.name)) << op.name;
    }
  }
  double sum = 0;
  for (const auto& [kind, s] : forward) sum += s;
  EXPECT_NEAR(sum, layer.forward_s, 1e-12);
  EXPECT_GT(forward["grouped_gemm"], forward["gemm"]);  // 2 of 8 experts of 14336 a token
}

}  // namespace gemm_shape_test
}  // namespace bmpipe
