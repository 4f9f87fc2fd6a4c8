// Unit checks of the analytic model's parts: preset shapes and parameter counts, how tensor
// and sequence parallelism divide the work, collectives, static bytes and the dp tail.
#include <gtest/gtest.h>

#include <cmath>

#include "experiment/experiment.hpp"

namespace bmpipe {
namespace {

long long total_params(const ModelShape& m, int seq) {
  long long p = m.num_layers * m.layer_params() + m.embedding_params(seq) + m.hidden_size;
  if (!m.tied_embeddings) p += static_cast<long long>(m.vocab_size) * m.hidden_size;
  return p;
}

TEST(Presets, ParameterCountsMatchThePublishedSizes) {
  // Published totals: Llama 2 7B 6.74e9, 13B 13.02e9, 70B 68.98e9; Llama 3 8B 8.03e9,
  // 70B 70.55e9 (HF model cards); GPT-3 175B 174.6e9 (Brown et al. 2020).
  const std::pair<const char*, double> expected[] = {
      {"llama2-7b", 6.738e9}, {"llama2-13b", 13.016e9}, {"llama2-70b", 68.977e9},
      {"llama3-8b", 8.030e9}, {"llama3-70b", 70.554e9}, {"gpt3-175b", 174.6e9}};
  for (const auto& [name, params] : expected) {
    const ModelShape* m = find_model_preset(name);
    ASSERT_NE(m, nullptr) << name;
    EXPECT_NEAR(static_cast<double>(total_params(*m, 2048)), params, 0.005 * params) << name;
  }
  EXPECT_EQ(find_model_preset("gpt-5"), nullptr);
  EXPECT_EQ(model_preset_names(),
            "llama2-7b, llama2-13b, llama2-70b, llama3-8b, llama3-70b, gpt3-175b");
}

TEST(Presets, HardwareFigures) {
  EXPECT_EQ(hardware_preset_names(),
            "ascend-910b, ascend-910c, a100-80g, b200, b300, gb200, gb300, h100-sxm, h200, h800");
  EXPECT_DOUBLE_EQ(find_hardware_preset("ascend-910b")->memory_GiB, 64);
  EXPECT_TRUE(find_hardware_preset("ascend-910b")->intra_node_mesh);
  EXPECT_DOUBLE_EQ(find_hardware_preset("a100-80g")->peak_tflops, 312);
  EXPECT_DOUBLE_EQ(find_hardware_preset("h100-sxm")->peak_tflops, 989);
  EXPECT_DOUBLE_EQ(find_hardware_preset("h200")->hbm_GBps, 4800);
  EXPECT_EQ(find_hardware_preset("b400"), nullptr);
}

TEST(Presets, BlackwellUltraFigures) {
  // HGX B300 datasheet, per GPU of the 8: BF16 36 and FP8 72 PFLOPS sparse, as HGX B200;
  // FP4 108 PFLOPS dense / 8 = 13.5 PFLOPS; 2.3 TB / 8 = 288 GB; ConnectX-8 at 800 Gb/s.
  const HardwareSpec& b300 = *find_hardware_preset("b300");
  EXPECT_DOUBLE_EQ(b300.peak_tflops, 2250);
  EXPECT_DOUBLE_EQ(b300.fp8_peak_tflops, 4500);
  EXPECT_DOUBLE_EQ(b300.fp4_peak_tflops, 13500);
  EXPECT_DOUBLE_EQ(b300.inter_node.bandwidth_GBps, 100);
  EXPECT_GT(b300.memory_GiB, 260);  // 288 GB = 268 GiB ... 288 GiB
  EXPECT_LE(b300.memory_GiB, 288);
  EXPECT_EQ(b300.devices_per_node, 8);
  // GB300 NVL72 datasheet, per GPU of the 72: 360 / 720 PFLOPS sparse BF16 / FP8 = 2.5 / 5
  // dense; FP4 1080 PFLOPS dense / 72 = 15; 576 TB/s / 72 = 8 TB/s; one NVLink domain.
  const HardwareSpec& gb300 = *find_hardware_preset("gb300");
  EXPECT_DOUBLE_EQ(gb300.peak_tflops, 2500);
  EXPECT_DOUBLE_EQ(gb300.fp8_peak_tflops, 5000);
  EXPECT_DOUBLE_EQ(gb300.fp4_peak_tflops, 15000);
  EXPECT_DOUBLE_EQ(gb300.hbm_GBps, 8000);
  EXPECT_EQ(gb300.devices_per_node, 4);
  EXPECT_EQ(gb300.scale_up_domain, 72);
  // FP4 on Blackwell only: B200 72 PFLOPS dense / 8 = 9, GB200 720 / 72 = 10.
  EXPECT_DOUBLE_EQ(find_hardware_preset("b200")->fp4_peak_tflops, 9000);
  EXPECT_DOUBLE_EQ(find_hardware_preset("gb200")->fp4_peak_tflops, 10000);
  EXPECT_DOUBLE_EQ(find_hardware_preset("h100-sxm")->fp4_peak_tflops, 0);
}

TEST(Presets, BlackwellAndSuperPodFigures) {
  // HGX B200 datasheet, per GPU of the 8: BF16 36 PFLOPS sparse / 8 / 2 = 2250 TFLOPS dense;
  // 64 TB/s / 8 = 8 TB/s HBM3e; NVLink 5 1.8 TB/s both ways = 900 GB/s one way.
  const HardwareSpec& b200 = *find_hardware_preset("b200");
  EXPECT_DOUBLE_EQ(b200.peak_tflops, 2250);
  EXPECT_DOUBLE_EQ(b200.hbm_GBps, 8000);
  EXPECT_DOUBLE_EQ(b200.intra_node.bandwidth_GBps, 900);
  EXPECT_EQ(b200.devices_per_node, 8);
  EXPECT_GT(b200.memory_GiB, 160);  // 180 GB
  EXPECT_LE(b200.memory_GiB, 180);
  // GB200 NVL72 datasheet, per GPU of the 72: 360 PFLOPS sparse / 72 / 2 = 2500 dense;
  // 13.4 TB / 72 = 186 GB; 576 TB/s / 72 = 8 TB/s. Four GPUs per compute tray.
  const HardwareSpec& gb200 = *find_hardware_preset("gb200");
  EXPECT_DOUBLE_EQ(gb200.peak_tflops, 2500);
  EXPECT_DOUBLE_EQ(gb200.hbm_GBps, 8000);
  EXPECT_DOUBLE_EQ(gb200.intra_node.bandwidth_GBps, 900);
  EXPECT_EQ(gb200.devices_per_node, 4);
  EXPECT_GT(gb200.memory_GiB, 170);
  EXPECT_LE(gb200.memory_GiB, 186);
  // Ascend 910C (CloudMatrix384 paper): two dies of 376 TFLOPS BF16, 64 GB, 1.6 TB/s each;
  // 392 GB/s of UB one way through switches (not a mesh); 8 NPUs per node.
  const HardwareSpec& c = *find_hardware_preset("ascend-910c");
  EXPECT_DOUBLE_EQ(c.peak_tflops, 752);
  EXPECT_DOUBLE_EQ(c.memory_GiB, 128);
  EXPECT_DOUBLE_EQ(c.hbm_GBps, 3200);
  EXPECT_DOUBLE_EQ(c.intra_node.bandwidth_GBps, 392);
  EXPECT_FALSE(c.intra_node_mesh);
  EXPECT_EQ(c.devices_per_node, 8);
  // Efficiencies: Blackwell (b200, gb200) and Blackwell Ultra (b300, gb300) each have their
  // own fit on their generation's published runs (bench/fidelity/fit.py; sim/cost/hardware.cpp
  // gives the figures); 910C carries 910B's.
  const HardwareSpec& b = *find_hardware_preset("ascend-910b");
  for (const HardwareSpec* s : {&b200, &gb200}) {
    EXPECT_DOUBLE_EQ(s->matmul_efficiency, 0.55) << s->name;
    EXPECT_DOUBLE_EQ(s->weight_grad_efficiency(), 0.55) << s->name;
    EXPECT_DOUBLE_EQ(s->attention_efficiency, 0.40) << s->name;
    EXPECT_DOUBLE_EQ(s->fp4_matmul_scale, 1.30) << s->name;
    EXPECT_EQ(s->sm_count, 148) << s->name;
  }
  for (const char* name : {"b300", "gb300"}) {
    const HardwareSpec& s = *find_hardware_preset(name);
    EXPECT_DOUBLE_EQ(s.matmul_efficiency, 0.63) << name;
    EXPECT_DOUBLE_EQ(s.attention_efficiency, 0.48) << name;
    EXPECT_DOUBLE_EQ(s.fp8_matmul_scale, 1.10) << name;
    EXPECT_EQ(s.sm_count, 160) << name;
  }
  EXPECT_DOUBLE_EQ(c.matmul_efficiency, b.matmul_efficiency);
  EXPECT_DOUBLE_EQ(c.attention_efficiency, b.attention_efficiency);
  EXPECT_DOUBLE_EQ(c.collective_efficiency, b.collective_efficiency);
}

CostSettings settings(int tp, bool sp) {
  CostSettings st;
  st.seq_length = 4096;
  st.micro_batch_size = 1;
  st.tp = tp;
  st.sequence_parallel = sp;
  return st;
}

TEST(CostModel, TensorParallelismSplitsWorkAndAddsCollectives) {
  const ModelShape& m = *find_model_preset("llama2-13b");
  const HardwareSpec& hw = *find_hardware_preset("h200");
  const LayerCost one = decoder_layer_cost(m, hw, settings(1, false));
  const LayerCost four = decoder_layer_cost(m, hw, settings(4, false));
  EXPECT_NEAR(four.forward_flops, one.forward_flops / 4, 1e-6 * one.forward_flops);
  EXPECT_EQ(four.param_count, (one.param_count - 2 * 5120) / 4 + 2 * 5120);  // norms replicated
  // The matmul part shrinks 4x; norms stay replicated and two all-reduces appear.
  EXPECT_LT(four.forward_s, one.forward_s / 2);
  EXPECT_GT(four.forward_s, one.forward_s / 4);
  int collectives = 0;
  for (const auto& op : four.ops) collectives += op.name.find("all_reduce") != std::string::npos;
  EXPECT_EQ(collectives, 2);
  // Sequence parallelism shards the replicated norms: fewer activation bytes, same flops.
  const LayerCost sp = decoder_layer_cost(m, hw, settings(4, true));
  EXPECT_LT(sp.activation_bytes[Recompute::none], four.activation_bytes[Recompute::none]);
  EXPECT_EQ(sp.activation_bytes[Recompute::full] * 4, four.activation_bytes[Recompute::full]);
  EXPECT_DOUBLE_EQ(sp.forward_flops, four.forward_flops);
  EXPECT_LT(sp.forward_s, four.forward_s);
}

TEST(CostModel, RecomputeModesOrderAndCost) {
  const ModelShape& m = *find_model_preset("gpt3-175b");
  const LayerCost c = decoder_layer_cost(m, *find_hardware_preset("a100-80g"), settings(8, false));
  EXPECT_GT(c.activation_bytes[Recompute::none], c.activation_bytes[Recompute::selective]);
  EXPECT_GT(c.activation_bytes[Recompute::selective], c.activation_bytes[Recompute::full]);
  EXPECT_EQ(c.recompute_extra_s[Recompute::none], 0.0);
  EXPECT_GT(c.recompute_extra_s[Recompute::selective], 0.0);
  // gpt runs as Megatron-LM does: its reentrant checkpoint re-runs the whole forward.
  EXPECT_DOUBLE_EQ(c.recompute_extra_s[Recompute::full], c.forward_s);
  EXPECT_DOUBLE_EQ(c.recompute_flops[Recompute::full], c.forward_flops);
  EXPECT_LT(c.recompute_extra_s[Recompute::selective], 0.2 * c.forward_s);  // selective is cheap
}

const SubOpCost& op_named(const LayerCost& c, const std::string& name) {
  for (const auto& op : c.ops)
    if (op.name == name) return op;
  ADD_FAILURE() << "no sub-op " << name;
  return c.ops.front();
}

TEST(CostModel, FullRecomputeStopsAtTheLastSavedTensor) {
  // llama runs as HF does under torch.utils.checkpoint (non-reentrant): recomputation
  // stops once the down projection's input, the last tensor the backward needs, is back;
  // the down projection itself, the residual add and (with tp) the collective after it
  // are not re-run.
  const ModelShape& m = *find_model_preset("llama2-13b");
  const HardwareSpec& hw = *find_hardware_preset("h200");
  for (const bool sp : {false, true}) {
    const int tp = sp ? 4 : 1;
    const LayerCost c = decoder_layer_cost(m, hw, settings(tp, sp));
    double skipped = op_named(c, "down_proj").forward_s + op_named(c, "residual_2").forward_s;
    if (sp) skipped += op_named(c, "mlp_reduce_scatter").forward_s;
    EXPECT_NEAR(c.recompute_extra_s[Recompute::full], c.forward_s - skipped, 1e-12) << "tp " << tp;
    EXPECT_DOUBLE_EQ(c.recompute_extra_s[Recompute::selective], op_named(c, "attention").forward_s);
    // FLOPs: the forward's less the down projection, 2 T f h (f this device's share).
    const double T = 4096, f = 13824.0 / tp, h = 5120;
    EXPECT_NEAR(c.recompute_flops[Recompute::full], c.forward_flops - 2 * T * f * h,
                1e-9 * c.forward_flops);
    // Each sub-op's share adds up to the layer's.
    double full = 0, selective = 0;
    for (const auto& op : c.ops) {
      full += op.recompute_s[Recompute::full];
      selective += op.recompute_s[Recompute::selective];
      EXPECT_EQ(op.recompute_s[Recompute::none], 0.0);
    }
    EXPECT_NEAR(full, c.recompute_extra_s[Recompute::full], 1e-12);
    EXPECT_DOUBLE_EQ(selective, c.recompute_extra_s[Recompute::selective]);
  }
}

// A device where every time is easy to write down.
HardwareSpec plain_device(double peak_tflops, double hbm_GBps = 1000) {
  HardwareSpec hw;
  hw.peak_tflops = peak_tflops;
  hw.hbm_GBps = hbm_GBps;
  hw.memory_efficiency = 0.5;
  hw.kernel_launch_us = 2;
  return hw;
}

TEST(CostModel, WeightGradAccumulationMovesBytesPerParameter) {
  // Llama-2-7B layer: 2 h q + 2 h kv + 3 h f weights in 7 tensors (q, k, v, o, gate, up,
  // down) and two RMSNorm scales of h: 202,383,360 parameters (HF's count).
  const ModelShape& m = *find_model_preset("llama2-7b");
  const double h = 4096, f = 11008;
  const double weights = 4 * h * h + 3 * h * f, norms = 2 * h;
  ASSERT_EQ(weights + norms, 202383360.0);
  // 600 TFLOP/s on GEMMs against 5 TB/s: every GEMM of the layer is compute-bound, even
  // with the fused buffer traffic (the largest, qkv: 0.69 ms of FLOPs, 0.11 ms of bytes).
  const HardwareSpec hw = plain_device(1000, 10000);
  const double bw = 5000e9, launch = 2e-6, e = 2;
  CostSettings st = settings(1, false);
  st.grad_accumulation = GradAccumulation::overwrite;
  const double fresh = decoder_layer_cost(m, hw, st).backward_weight_s;
  for (const int g : {2, 4}) {
    st.grad_bytes = g;
    // add: per parameter read the buffer (g) and the new gradient (e), write the buffer
    // (g); one kernel per tensor.
    st.grad_accumulation = GradAccumulation::add;
    EXPECT_NEAR(decoder_layer_cost(m, hw, st).backward_weight_s - fresh,
                (2 * g + e) * (weights + norms) / bw + 9 * launch, 1e-12)
        << "grad_bytes " << g;
    // fused, compute-bound GEMMs: the buffer traffic hides under the FLOPs; only the norm
    // scales still take separate adds.
    st.grad_accumulation = GradAccumulation::fused;
    EXPECT_NEAR(decoder_layer_cost(m, hw, st).backward_weight_s - fresh,
                (2 * g + e) * norms / bw + 2 * launch, 1e-12)
        << "grad_bytes " << g;
  }
  // fused on memory-bound GEMMs (a device of unbounded FLOPs): the GEMM reads and writes
  // the buffer (2 g) instead of writing a fresh gradient (e).
  const HardwareSpec fast = plain_device(1e9);
  const double fast_bw = 500e9;
  st.grad_bytes = 4;
  st.grad_accumulation = GradAccumulation::overwrite;
  const double fresh_fast = decoder_layer_cost(m, fast, st).backward_weight_s;
  st.grad_accumulation = GradAccumulation::fused;
  EXPECT_NEAR(decoder_layer_cost(m, fast, st).backward_weight_s - fresh_fast,
              (2 * 4 - e) * weights / fast_bw + (2 * 4 + e) * norms / fast_bw + 2 * launch, 1e-12);
}

TEST(CostModel, WeightGradAccumulationDefaultsFollowTheFramework) {
  const HardwareSpec hw = plain_device(1000);
  CostSettings st = settings(1, false);
  for (const char* name : {"llama2-7b", "gpt3-175b"}) {
    const ModelShape& m = *find_model_preset(name);
    const GradAccumulation expected =
        m.architecture == Architecture::llama ? GradAccumulation::add : GradAccumulation::fused;
    st.grad_accumulation.reset();
    const double by_default = decoder_layer_cost(m, hw, st).backward_weight_s;
    st.grad_accumulation = expected;
    EXPECT_DOUBLE_EQ(decoder_layer_cost(m, hw, st).backward_weight_s, by_default) << name;
  }
}

TEST(CostModel, EmbeddingGradientIsDenseAndAccumulated) {
  // The table's gradient: zero-filled (e V h), scatter-added (3 e T h), then, with
  // accumulation, added to the buffer ((2 g + e) V h, one more kernel).
  const ModelShape& m = *find_model_preset("llama2-7b");
  const HardwareSpec hw = plain_device(1000);
  const double V = 32000, h = 4096, T = 4096, e = 2, g = 4, bw = 500e9, launch = 2e-6;
  CostSettings st = settings(1, false);
  st.grad_accumulation = GradAccumulation::overwrite;
  const double fresh = embedding_cost(m, hw, st).backward_weight_s;
  EXPECT_NEAR(fresh, (3 * e * T * h + e * V * h) / bw + 3 * launch, 1e-12);
  st.grad_accumulation = GradAccumulation::add;
  EXPECT_NEAR(embedding_cost(m, hw, st).backward_weight_s - fresh,
              (2 * g + e) * V * h / bw + launch, 1e-12);
}

TEST(CostModel, WeightGradEfficiencyFallsBackToTheBackwardOne) {
  HardwareSpec hw;
  hw.matmul_backward_efficiency = 0.5;
  EXPECT_DOUBLE_EQ(hw.weight_grad_efficiency(), 0.5);
  hw.matmul_weight_grad_efficiency = 0.7;
  EXPECT_DOUBLE_EQ(hw.weight_grad_efficiency(), 0.7);
  // Only W uses it: a compute-bound layer's input-grad is unchanged, its weight-grad
  // GEMMs speed up by 0.7 / 0.5.
  const ModelShape& m = *find_model_preset("llama2-7b");
  hw.peak_tflops = 1000;
  hw.hbm_GBps = 1e9;  // no memory-bound time
  hw.kernel_launch_us = 0;
  HardwareSpec slow = hw;
  slow.matmul_weight_grad_efficiency.reset();
  CostSettings st = settings(1, false);
  st.grad_accumulation = GradAccumulation::overwrite;
  const LayerCost a = decoder_layer_cost(m, slow, st), b = decoder_layer_cost(m, hw, st);
  EXPECT_DOUBLE_EQ(a.backward_input_s, b.backward_input_s);
  // (to 1e-6: the norm scales' gradients are a few bytes of memory-bound work)
  EXPECT_NEAR(b.backward_weight_s, a.backward_weight_s * 0.5 / 0.7, 1e-6 * a.backward_weight_s);
}

TEST(CostModel, CollectiveTimes) {
  HardwareSpec hw;
  hw.collective_efficiency = 1.0;
  hw.intra_node = {100, 0};
  hw.inter_node = {10, 0};
  // Ring all-reduce: 2 (k-1)/k of the buffer per device.
  EXPECT_DOUBLE_EQ(collective_time_s(hw, Collective::all_reduce, 4, 4e9, false),
                   2 * 0.75 * 4e9 / 100e9);
  EXPECT_DOUBLE_EQ(collective_time_s(hw, Collective::all_gather, 4, 4e9, true), 0.75 * 4e9 / 10e9);
  EXPECT_DOUBLE_EQ(collective_time_s(hw, Collective::all_reduce, 1, 4e9, false), 0.0);
  // A full-mesh node (HCCS) drives k-1 links at once.
  hw.intra_node_mesh = true;
  EXPECT_DOUBLE_EQ(collective_time_s(hw, Collective::all_reduce, 4, 4e9, false),
                   2 * 0.75 * 4e9 / 300e9);
}

TEST(CostModel, StaticBytesWithZero1) {
  OptimizerSettings adam;  // fp32 grads, master weights, zero 0: 2 + 4 + 12 = 18 bytes/param
  EXPECT_EQ(static_bytes(1000, 2, adam, 8), 18000);
  adam.zero_stage = 1;  // optimizer state over dp 8: 2 + 4 + 12/8
  EXPECT_EQ(static_bytes(1000, 2, adam, 8), 7500);
  adam.grad_bytes = 2;
  adam.master_weights = false;  // 2 + 2 + 8/8
  EXPECT_EQ(static_bytes(1000, 2, adam, 8), 5000);
}

TEST(CostModel, DpTailCrossesNodesOnlyWhenTheGroupDoes) {
  // pp 2 x dp 8 on two nodes of 8: each pipeline rank's dp group is one node (NVLink).
  const Config c = parse_config(
      "cluster: {nodes: 2, devices_per_node: 8, device: {preset: h200}}\n"
      "model: {preset: llama2-7b}\n"
      "training: {pp: 2, seq_length: 4096, global_batch_size: 64}\n",
      "t.yaml");
  const Time in_node = stage_grad_reduce_time(*prepare(c), 0, 1'000'000'000);
  Config wide = c;
  wide.cluster.devices_per_node = 4;  // now the dp group of 8 spans two nodes (NICs)
  wide.cluster.nodes = 4;
  const Time across = stage_grad_reduce_time(*prepare(wide), 0, 1'000'000'000);
  // In a node: NVLink SHARP (sim/cost/collectives.hpp), 4e9 bytes / (450 GB/s x 0.61) +
  // 6 x 5 us. Across two nodes of 4: NVLS inside each, then the tree over the two nodes on
  // 4 NICs a node (each carries 1/4 of the buffer, at 50 x 0.96 GB/s), at 0.92:
  // 4e9 / (min(274.5, 4 x 48) x 0.92 GB/s) + 30 us + 2 x 1 x 10 us. (Before the
  // hierarchical model the 8 ran one ring at one NIC's 37.5 GB/s: over 5 x in_node.)
  EXPECT_EQ(in_node, s_to_ns(4e9 / (450e9 * 0.61) + 30e-6));
  EXPECT_EQ(across, s_to_ns(4e9 / (192e9 * 0.92) + 50e-6));
  EXPECT_GT(across, in_node);
  Config zero = c;
  zero.training.optimizer.zero_stage = 1;
  // ZeRO-1 reduce-scatters: half of an all-reduce's traffic.
  EXPECT_LT(stage_grad_reduce_time(*prepare(zero), 0, 1'000'000'000), in_node);
}

}  // namespace
}  // namespace bmpipe
