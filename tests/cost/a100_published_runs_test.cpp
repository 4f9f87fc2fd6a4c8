// The a100-80g preset and the analytic model against published Megatron-LM iteration
// times on DGX A100 (Selene). Each row is a config under configs/calibration/ (or the
// GPT-3 example) whose comment gives the source, the table and the exact layout; the
// published figure is an iteration time, given as such (MT-NLG) or turned from the
// published TFLOP/s per GPU with the sources' own FLOP count (Narayanan et al. 2021,
// appendix, full recompute): 96 B s l h^2 (1 + s / 6h + V / 16 l h) / (TFLOP/s x GPUs).
//
// These rows are the calibration set. Korthikanti et al. 2022 ("Reducing Activation
// Recomputation in Large Transformer Models") is the held-out set of issue 19 and is not
// used here, neither to fit nor to check.
//
// Every row is tp 8, full recompute, micro-batch 1, non-interleaved 1F1B (the published
// layouts): it checks the dense GEMMs at tp 8, the tp collectives, the pipeline's p2p over
// the NICs at pp 12-35 and the bubble; it does not check pp 1, larger micro-batches,
// selective recompute or the interleaved schedule (no public A100 row with a fully
// stated layout was found for those).
//
// Errors (predicted / published - 1, iteration time; + = bmpipe too slow). "before" is
// main at 5d65ec9, "after" adds Megatron-LM's scatter/gather of pipeline sends
// (sim/cost/cost_model.cpp, stage_output_bytes); docs/cost-model.md has the same table.
//   row (config)                 published   before          after
//   gpt3_175b_a100 (1024 GPUs)     31.92 s   30.85 s -3.4 %  30.80 s -3.5 %
//   megatron_175b_384              76.78 s   76.99 s +0.3 %  76.95 s +0.2 %
//   megatron_175b_768              39.42 s   39.97 s +1.4 %  39.94 s +1.3 %
//   megatron_175b_1536             20.83 s   21.47 s +3.1 %  21.43 s +2.9 %
//   megatron_530b_560             206.22 s  213.12 s +3.3 % 212.92 s +3.3 %
//   megatron_530b_1120            105.58 s  110.11 s +4.3 % 109.92 s +4.1 %
//   megatron_530b_2240             55.45 s   58.61 s +5.7 %  58.41 s +5.4 %
//   mtnlg_530b_2240                60.1 s    51.24 s -14.7 % 51.04 s -15.1 %
//   mtnlg_530b_2800                50.2 s    42.41 s -15.5 % 42.21 s -15.9 %
//   mtnlg_530b_3360                44.4 s    36.53 s -17.7 % 36.33 s -18.2 %
//   Megatron-LM rows: mean |error| 3.1 % -> 2.9 %, worst 5.7 % -> 5.4 %;
//   all ten: mean 6.9 % -> 7.0 %, worst 17.7 % -> 18.2 %.
// The MT-NLG rows ran DeepSpeed's pipeline engine with Megatron's layers, a framework
// bmpipe does not model (taken here as Megatron-LM's 1F1B and p2p): at the same 2240 GPUs and tp 8
// / pp 35 Megatron-LM reached 159 TFLOP/s (Table 2) and MT-NLG 126. They stay in the table as a
// reading, with a loose bound; they were not fitted. The claims pinned: every Megatron-LM row
// within 7 %, their mean |error| within 5 % (issue 19's target), the MT-NLG rows within 20 %.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "experiment/experiment.hpp"
#include "support/run_config.hpp"

namespace bmpipe {
namespace {

struct PublishedRun {
  const char* config;  ///< under configs/, without .yaml
  double seconds;      ///< published iteration time; 0: from tflops
  double tflops;       ///< published model TFLOP/s per GPU (with recompute); 0: none
  bool megatron;       ///< Megatron-LM's own pipeline (false: DeepSpeed's, MT-NLG)
};

// Narayanan et al. 2021, appendix (full recompute: 4 passes): FLOPs of one iteration.
double megatron_flops(double batch, double seq, double layers, double hidden, double vocab) {
  return 96.0 * batch * seq * layers * hidden * hidden *
         (1.0 + seq / (6.0 * hidden) + vocab / (16.0 * layers * hidden));
}

constexpr PublishedRun kRuns[] = {
    // Megatron-LM README weak-scaling row / Narayanan et al. 2021: GPT-3 175B, 1024 GPUs.
    {"examples/gpt3_175b_a100", 0, 138, true},
    // Narayanan et al. 2021, Table 2, PTD-P, 175B (tp 8, pp 12, batch 1536).
    {"calibration/a100_megatron_175b_384", 0, 153, true},
    {"calibration/a100_megatron_175b_768", 0, 149, true},
    {"calibration/a100_megatron_175b_1536", 0, 141, true},
    // Narayanan et al. 2021, Table 2, PTD-P, 530B (tp 8, pp 35, batch 2240).
    {"calibration/a100_megatron_530b_560", 0, 171, true},
    {"calibration/a100_megatron_530b_1120", 0, 167, true},
    {"calibration/a100_megatron_530b_2240", 0, 159, true},
    // Smith et al. 2022 (MT-NLG 530B), sec. 2.4: tp 8, pp 35, batch 1920.
    {"calibration/a100_mtnlg_530b_2240", 60.1, 0, false},
    {"calibration/a100_mtnlg_530b_2800", 50.2, 0, false},
    {"calibration/a100_mtnlg_530b_3360", 44.4, 0, false},
};

TEST(A100PublishedRuns, MegatronRowsWithinSevenPercentMeanFive) {
  std::printf("%-38s %10s %10s %8s\n", "run", "predicted", "published", "error");
  double sum = 0, worst = 0, all_sum = 0, all_worst = 0;
  int count = 0;
  for (const PublishedRun& run : kRuns) {
    const Config c =
        load_config(std::string(BMPIPE_SOURCE_DIR) + "/configs/" + run.config + ".yaml");
    ASSERT_EQ(c.device.hardware->name, "a100-80g") << run.config;
    const test::Prepared prepared = test::prepare_run(c);
    const SimResult r = simulate(prepared.input, prepared.schedule);
    ASSERT_TRUE(r.ok) << run.config << ": " << r.error;
    const ModelShape& m = *c.model.shape;
    const int devices = prepared.info.devices;
    double published = run.seconds;
    if (published == 0)
      published = megatron_flops(*c.training.global_batch_size, *c.training.seq_length,
                                 m.num_layers, m.hidden_size, m.vocab_size) /
                  (run.tflops * 1e12 * devices);
    const double predicted = static_cast<double>(r.iteration_time) * 1e-9;
    const double error = predicted / published - 1;
    std::printf("%-38s %9.2fs %9.2fs %+7.1f%%\n", run.config, predicted, published, 100 * error);
    all_sum += std::abs(error);
    all_worst = std::max(all_worst, std::abs(error));
    if (run.megatron) {
      sum += std::abs(error);
      worst = std::max(worst, std::abs(error));
      ++count;
    }
    EXPECT_LE(std::abs(error), run.megatron ? 0.07 : 0.20) << run.config;
  }
  const double mean = sum / count;
  std::printf("Megatron-LM rows: mean |error| %.1f %%, worst %.1f %%; all rows: %.1f %%, %.1f %%\n",
              100 * mean, 100 * worst, 100 * all_sum / static_cast<double>(std::size(kRuns)),
              100 * all_worst);
  EXPECT_EQ(count, 7);
  EXPECT_LE(mean, 0.05);
}

TEST(PipelineScatterGather, EachRankSendsItsSliceOfTheStageOutput) {
  // Narayanan et al. 2021, sec. 4.1: without sequence parallelism each of the t ranks sends
  // 1/t of the s x b x h output (Megatron-LM's scatter/gather, gpt layers); llama layers
  // (Megatron-Core) send it whole; with sequence parallelism every rank holds its own 1/t.
  // Hand figures: s 2048, b 1, h 12288, 2 bytes = 50331648 bytes; / 8 = 6291456.
  const ModelShape& gpt = *find_model_preset("gpt3-175b");
  const HardwareSpec& a100 = *find_hardware_preset("a100-80g");
  CostSettings st;
  st.seq_length = 2048;
  st.tp = 8;
  EXPECT_EQ(decoder_layer_cost(gpt, a100, st).output_bytes, 6291456);
  EXPECT_EQ(embedding_cost(gpt, a100, st).output_bytes, 6291456);
  ModelShape llama = gpt;
  llama.architecture = Architecture::llama;
  EXPECT_EQ(decoder_layer_cost(llama, a100, st).output_bytes, 50331648);
  st.sequence_parallel = true;
  EXPECT_EQ(decoder_layer_cost(llama, a100, st).output_bytes, 6291456);
  EXPECT_EQ(decoder_layer_cost(gpt, a100, st).output_bytes, 6291456);
  st.sequence_parallel = false;
  st.tp = 1;
  EXPECT_EQ(decoder_layer_cost(gpt, a100, st).output_bytes, 50331648);
}

}  // namespace
}  // namespace bmpipe
