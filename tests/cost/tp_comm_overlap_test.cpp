// training.tp_comm_overlap (issue 19, published-run fidelity; Megatron-LM's --tp-comm-overlap):
// TransformerEngine's userbuffers hide the sequence-parallel collectives behind the dense
// GEMMs beside them. Expected values are worked by hand from Llama-3-8B's shape at s = 4096,
// micro-batch 1, tp 4 with sequence parallelism and fused kernels, on a device of round
// figures (support/round_device.hpp): GEMMs at 500 TFLOPS, 1000 GB/s of HBM, no launch cost,
// a link of 100 GB/s with no latency.
#include <gtest/gtest.h>

#include <string>

#include "experiment/config_cases.hpp"
#include "experiment/experiment.hpp"
#include "frameworks/megatron/import.hpp"
#include "support/round_device.hpp"
#include "support/sub_op.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace tp_comm_overlap_test {

using test::op;

/// The round device (support/round_device.hpp) with a link of `link_GBps`, no latency.
HardwareSpec round_device(double link_GBps) {
  return test::round_device(link_GBps, 0);
}

CostSettings settings(bool overlap) {
  CostSettings st;
  st.seq_length = 4096;
  st.micro_batch_size = 1;
  st.tp = 4;
  st.sequence_parallel = true;
  st.kernels = Kernels::fused;
  st.tp_comm_overlap = overlap;
  return st;
}

// The hidden tensor is 4096 x 4096 x 2 bytes = 33,554,432 bytes; an all-gather or a
// reduce-scatter over 4 devices moves 3/4 of it, 25,165,824 bytes, over one 100 GB/s link:
// C = 251.65824 us. Per device (tp 4): qkv_proj is 4096 x 4096 x (1024 + 2 x 256) = 2 x
// 4096 x 4096 x 1536 FLOPs = 51,539,607,552 at 500 TFLOPS = 103.079215104 us (its 58.7 MB
// take 58.7 us: compute-bound); out_proj 2 x 4096 x 1024 x 4096 = 34,359,738,368 FLOPs =
// 68.719476736 us; gate_up_proj (2 x 14336 / 4 = 7168 columns) 240,518,168,576 FLOPs =
// 481.036337152 us; down_proj (3584 rows) half of that, 240.518168576 us. Every pass of
// each GEMM takes as long.
constexpr double kC = 25165824.0 / 100e9;
constexpr double kQkv = 51539607552.0 / 500e12, kOut = 34359738368.0 / 500e12,
                 kGateUp = 240518168576.0 / 500e12, kDown = kGateUp / 2;

TEST(TpCommOverlap, TheGemmsTakeTheirHandWorkedTimes) {
  const LayerCost c =
      decoder_layer_cost(*find_model_preset("llama3-8b"), round_device(100), settings(true));
  EXPECT_NEAR(op(c, "qkv_proj").forward_s, kQkv, 1e-12);
  EXPECT_NEAR(op(c, "qkv_proj").backward_weight_s, kQkv, 1e-12);
  EXPECT_NEAR(op(c, "out_proj").backward_input_s, kOut, 1e-12);
  EXPECT_NEAR(op(c, "gate_up_proj").backward_weight_s, kGateUp, 1e-12);
  EXPECT_NEAR(op(c, "down_proj").forward_s, kDown, 1e-12);
  EXPECT_NEAR(op(c, "down_proj").backward_input_s, kDown, 1e-12);
  const LayerCost off =
      decoder_layer_cost(*find_model_preset("llama3-8b"), round_device(100), settings(false));
  for (const char* name :
       {"qkv_all_gather", "out_reduce_scatter", "mlp_all_gather", "mlp_reduce_scatter"}) {
    EXPECT_NEAR(op(off, name).forward_s, kC, 1e-12) << name;
    EXPECT_NEAR(op(off, name).backward_input_s, kC, 1e-12) << name;
  }
}

// Pipelined (ring exchange): the GEMM's last t - 1 of t chunks hide the collective, which
// leaves C - 3/4 G. Bulk (the column-parallel GEMM's input-grad reduce-scatter beside its
// weight-grad GEMM): C - G_w. gate_up_proj (3/4 x 481 us > C) hides its all-gather whole;
// down_proj (3/4 x 240.5 us < C) leaves 71.270 us of its reduce-scatter.
TEST(TpCommOverlap, EachCollectiveCostsWhatItsGemmCannotHide) {
  const LayerCost c =
      decoder_layer_cost(*find_model_preset("llama3-8b"), round_device(100), settings(true));
  EXPECT_NEAR(op(c, "qkv_all_gather").forward_s, kC - 0.75 * kQkv, 1e-12);      // 174.349 us
  EXPECT_NEAR(op(c, "qkv_all_gather").backward_input_s, kC - kQkv, 1e-12);      // 148.579 us
  EXPECT_NEAR(op(c, "out_reduce_scatter").forward_s, kC - 0.75 * kOut, 1e-12);  // 200.119 us
  EXPECT_NEAR(op(c, "out_reduce_scatter").backward_input_s, kC - 0.75 * kOut, 1e-12);
  EXPECT_EQ(op(c, "mlp_all_gather").forward_s, 0.0);
  EXPECT_EQ(op(c, "mlp_all_gather").backward_input_s, 0.0);
  EXPECT_NEAR(op(c, "mlp_reduce_scatter").forward_s, kC - 0.75 * kDown, 1e-12);
  EXPECT_NEAR(op(c, "mlp_reduce_scatter").backward_input_s, kC - 0.75 * kDown, 1e-12);
  // The layer's totals lose exactly what was hidden, and full recompute (the whole forward
  // under fused kernels) re-runs only the exposed part.
  const LayerCost off =
      decoder_layer_cost(*find_model_preset("llama3-8b"), round_device(100), settings(false));
  const double hidden_f = 0.75 * kQkv + 0.75 * kOut + kC + 0.75 * kDown;
  const double hidden_i = kQkv + 0.75 * kOut + kC + 0.75 * kDown;
  EXPECT_NEAR(off.forward_s - c.forward_s, hidden_f, 1e-12);
  EXPECT_NEAR(off.backward_input_s - c.backward_input_s, hidden_i, 1e-12);
  EXPECT_DOUBLE_EQ(off.backward_weight_s, c.backward_weight_s);
  EXPECT_NEAR(c.recompute_extra_s[Recompute::full], c.forward_s, 1e-12);
  EXPECT_EQ(off.activation_bytes[Recompute::none], c.activation_bytes[Recompute::none]);
}

// On links 100 times faster (C = 2.5 us) every collective hides whole; with none to hide
// behind (tp 1) the key changes nothing.
TEST(TpCommOverlap, FastLinksHideEverythingAndTp1HasNothingToHide) {
  const ModelShape& m = *find_model_preset("llama3-8b");
  const LayerCost fast = decoder_layer_cost(m, round_device(10000), settings(true));
  for (const char* name :
       {"qkv_all_gather", "out_reduce_scatter", "mlp_all_gather", "mlp_reduce_scatter"}) {
    EXPECT_EQ(op(fast, name).forward_s, 0.0) << name;
    EXPECT_EQ(op(fast, name).backward_input_s, 0.0) << name;
  }
  CostSettings one = settings(true);
  one.tp = 1;
  const LayerCost on = decoder_layer_cost(m, round_device(100), one);
  one.tp_comm_overlap = false;
  const LayerCost off = decoder_layer_cost(m, round_device(100), one);
  EXPECT_EQ(on.forward_s, off.forward_s);
  EXPECT_EQ(on.backward_input_s, off.backward_input_s);
}

// Line 9 holds training.sequence_parallel, line 10 training.tp_comm_overlap.
std::string config(bool sequence_parallel) {
  return std::string(
             "cluster:\n  nodes: 1\n  device: {preset: h100-sxm}\nmodel: {preset: "
             "llama3-8b}\ntraining:\n  schedule: 1f1b\n  pp: 2\n  tp: 4\n"
             "  sequence_parallel: ") +
         (sequence_parallel ? "true" : "false") +
         "\n  tp_comm_overlap: true\n  kernels: fused\n  seq_length: 4096\n"
         "  micro_batch_size: 1\n  global_batch_size: 16\n";
}

TEST(TpCommOverlap, TheKeyNeedsSequenceParallelismAndReachesTheLayers) {
  const ConfigError e = test::config_error(config(false));
  EXPECT_EQ(e.key(), "training.tp_comm_overlap");
  EXPECT_EQ(e.line(), 10);
  EXPECT_TRUE(test::has(e.message(), "sequence_parallel")) << e.message();
  Config on = parse_config(config(true), "on.yaml");
  Config off = on;
  off.training.tp_comm_overlap = false;
  const auto a = prepare(std::move(on));
  const auto b = prepare(std::move(off));
  EXPECT_LT(a->layers.layers[1].forward, b->layers.layers[1].forward);
  EXPECT_LT(a->layers.layers[1].backward_input, b->layers.layers[1].backward_input);
}

// Llama-2-7B's shape at tp 4; line 3 holds the flag under test.
const std::string kArgs =
    "--num-layers 32 --hidden-size 4096 --ffn-hidden-size 11008 --num-attention-heads 32 \\\n"
    "  --seq-length 4096 --vocab-size 32000 --swiglu --micro-batch-size 1 --bf16 \\\n"
    "  --tensor-model-parallel-size 4 ";

std::string import_error(const std::string& args) {
  try {
    read_megatron_args(args, "args.txt");
  } catch (const ImportError& e) {
    return e.what();
  }
  return "<accepted>";
}

TEST(TpCommOverlap, MegatronsFlagIsReadAndItsPreconditionChecked) {
  const ImportedJob job =
      read_megatron_args(kArgs + "--sequence-parallel --tp-comm-overlap\n", "args.txt");
  ASSERT_TRUE(job.tp_comm_overlap.has_value());
  EXPECT_TRUE(*job.tp_comm_overlap);
  EXPECT_TRUE(job.unmodelled.empty());
  EXPECT_TRUE(test::has(import_error(kArgs + "--tp-comm-overlap\n"),
                        "args.txt:3: --tp-comm-overlap: needs --sequence-parallel"))
      << import_error(kArgs + "--tp-comm-overlap\n");
  // At tp 1 Megatron-LM turns sequence parallelism off, then asserts it.
  std::string tp1 = kArgs;
  tp1.replace(tp1.find("parallel-size 4"), 15, "parallel-size 1");
  EXPECT_TRUE(
      test::has(import_error(tp1 + "--sequence-parallel --tp-comm-overlap\n"), "needs tp > 1"));
  // A part of the overlap turned off is a different job: refused as unmodelled.
  const ImportedJob part = read_megatron_args(
      kArgs + "--sequence-parallel --tp-comm-overlap --disable-tp-comm-bulk-wgrad\n", "args.txt");
  ASSERT_EQ(part.unmodelled.size(), 1u);
  EXPECT_EQ(part.unmodelled[0].origin.key, "--disable-tp-comm-bulk-wgrad");
}

// The exporter writes the flag for a config that sets the key, and lists it among the flags
// to remove for one that does not (no flag below undoes it).
TEST(TpCommOverlap, TheKeyExportsAsMegatronsFlag) {
  const std::string example =
      std::string(BMPIPE_SOURCE_DIR) + "/configs/examples/h100_llama3_70b_fp8.yaml";
  const test::CliRun on = test::run_cli("export '" + example +
                                        "' --format megatron --set training.tp_comm_overlap=true");
  ASSERT_EQ(on.code, 0) << on.err;
  EXPECT_TRUE(test::has(on.out, "\n--sequence-parallel\n--tp-comm-overlap\n")) << on.out;
  EXPECT_FALSE(test::has(on.out, "#   --tp-comm-overlap\n")) << on.out;
  const test::CliRun off = test::run_cli(
      "export '" + example + "' --format megatron --set training.tp_comm_overlap=false");
  ASSERT_EQ(off.code, 0) << off.err;
  EXPECT_TRUE(test::has(off.out, "#   --tp-comm-overlap\n")) << off.out;
  EXPECT_FALSE(test::has(off.out, "\n--tp-comm-overlap\n")) << off.out;
}

}  // namespace tp_comm_overlap_test
}  // namespace bmpipe
