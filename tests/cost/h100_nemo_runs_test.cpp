// The h100-sxm preset against NVIDIA's published NeMo 24.07 pre-training runs on DGX-H100
// (FP8; configs/calibration/h100_nemo_*.yaml, each citing its row). A reading, not a fit:
// the preset's fractions of peak are still the h200 fit's, carried over.
//
// The rows are Megatron-Core jobs, so the configs say training.kernels: fused. Run with
// HF's eager kernels (bmpipe's default for llama layers) the same rows read 10-32 % slow;
// with fused kernels 2-16 %, either way (docs/cost-model.md, "H100 FP8 runs of NeMo"):
//   row (config)              published   eager          fused
//   h100_nemo_llama2_7b        3.890 s    4.785 +23.0 %  3.404 -12.5 %
//   h100_nemo_llama2_13b       3.790 s    4.417 +16.5 %  3.252 -14.2 %
//   h100_nemo_llama2_70b       4.799 s    6.309 +31.5 %  5.038  +5.0 %
//   h100_nemo_llama3_8b       10.890 s   11.969  +9.9 %  9.175 -15.7 %
//   h100_nemo_llama3_70b      10.688 s   13.545 +26.7 %  10.948 +2.4 %
//   mean |error|                         21.5 %         10.0 %
// (+: bmpipe too slow.) The tp 1 rows now read 12-16 % fast and the tp 4 rows 2-5 % slow:
// what is left is not one constant (NeMo overlaps the tp collectives with the GEMMs, which
// bmpipe leaves exposed, so a lower FP8 GEMM fraction fitted to the tp 1 rows would make
// the tp 4 rows 15 % slow). The claims pinned: with fused kernels every row within 17 %
// and the mean |error| under half of the eager one.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "experiment/experiment.hpp"
#include "support/run_config.hpp"

namespace bmpipe {
namespace h100_nemo_runs_test {

struct PublishedRun {
  const char* config;       ///< under configs/calibration/, without .yaml
  double tokens_per_s_gpu;  ///< published
};

// NeMo 24.07 performance summary, Pretraining, DGX-H100, FP8 (see each config).
constexpr PublishedRun kRuns[] = {
    {"h100_nemo_llama2_7b", 16847}, {"h100_nemo_llama2_13b", 8646}, {"h100_nemo_llama2_70b", 1707},
    {"h100_nemo_llama3_8b", 12036}, {"h100_nemo_llama3_70b", 1533},
};

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// predicted / published - 1 for the iteration time of `text` (the config, maybe edited).
double error_of(const std::string& text, const std::string& name, double tokens_per_s_gpu) {
  const Config c = parse_config(text, name);
  const test::Prepared prepared = test::prepare_run(c);
  const SimResult r = simulate(prepared.input, prepared.schedule);
  EXPECT_TRUE(r.ok) << name << ": " << r.error;
  const double tokens = static_cast<double>(*c.training.global_batch_size) * *c.training.seq_length;
  const double published = tokens / (tokens_per_s_gpu * prepared.info.devices);
  const double predicted = static_cast<double>(r.iteration_time) * 1e-9;
  std::printf("%-24s %8.3f s published  %8.3f s predicted  %+6.1f %%\n", name.c_str(), published,
              predicted, 100 * (predicted / published - 1));
  return predicted / published - 1;
}

TEST(H100NemoRuns, FusedKernelsReadEveryRowWithinSeventeenPercent) {
  double fused_sum = 0, eager_sum = 0;
  for (const PublishedRun& run : kRuns) {
    const std::string path =
        std::string(BMPIPE_SOURCE_DIR) + "/configs/calibration/" + run.config + ".yaml";
    const std::string text = read(path);
    const std::string key = "  kernels: fused\n";
    ASSERT_NE(text.find(key), std::string::npos) << run.config;
    std::string eager = text;
    eager.replace(eager.find(key), key.size(), "  kernels: eager\n");
    const double fused_error =
        error_of(text, std::string(run.config) + " fused", run.tokens_per_s_gpu);
    const double eager_error =
        error_of(eager, std::string(run.config) + " eager", run.tokens_per_s_gpu);
    EXPECT_LE(std::abs(fused_error), 0.17) << run.config;
    fused_sum += std::abs(fused_error);
    eager_sum += std::abs(eager_error);
  }
  const double n = static_cast<double>(std::size(kRuns));
  std::printf("mean |error|: eager %.1f %%, fused %.1f %%\n", 100 * eager_sum / n,
              100 * fused_sum / n);
  EXPECT_LT(fused_sum, eager_sum / 2);
}

}  // namespace h100_nemo_runs_test
}  // namespace bmpipe
