// The analytic model with the h200 preset against every measured row of
// tests/data/h200_llama_layer_profiles.json (copied from shared/data: HF LlamaDecoderLayer,
// SDPA attention, bf16, one NVIDIA H200; median of 10 CUDA-event timings).
// Targets (issue 4): forward within 10 %, input-grad and weight-grad within 15 %,
// activation bytes with recompute none and full within 5 %.
//
// The profile's weight-grad is taken as accumulating into bf16 `param.grad` (timings
// repeated without zeroing the gradients): of the two readings, only that one moves the
// held-out Llama-3-70B-shaped layer's weight-grad at s = 2048 (measured 20 % above the old
// model) the right way; see hardware.cpp.
//
// Full recompute's measured extra backward time (t_bwd_full_recompute - t_bwd_full) is
// 0.81-1.03x the forward over these rows (mean 0.89): 0.82, 1.03, 1.02, 0.93 (llama2-7b),
// 0.81, 0.87, 0.97, 0.83 (llama3-8b), 0.90, 0.81, 0.87, 0.87 (llama2-13b), in table order.
// The model re-runs the forward up to the down projection (torch.utils.checkpoint's early
// stop): 0.79-0.84x its forward here. Targets: every row within 25 %, the mean |error|
// within 10 %.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "sim/cost/cost_model.hpp"

namespace bmpipe {
namespace {

nlohmann::json load_profiles() {
  std::ifstream in(std::string(BMPIPE_TEST_DATA_DIR) + "/h200_llama_layer_profiles.json");
  EXPECT_TRUE(in.good());
  return nlohmann::json::parse(in);
}

ModelShape shape_of(const nlohmann::json& row) {
  ModelShape m;
  m.name = row["model"].get<std::string>();
  m.architecture = Architecture::llama;
  m.num_layers = 1;
  m.hidden_size = row["h"];
  m.num_attention_heads = row["heads"];
  m.num_kv_heads = row["kv_heads"];
  m.ffn_hidden_size = row["ffn"];
  m.vocab_size = 32000;
  return m;
}

double rel(double predicted, double measured) {
  return (predicted - measured) / measured;
}

TEST(H200Accuracy, EveryRowWithinTolerance) {
  const nlohmann::json data = load_profiles();
  const HardwareSpec& hw = *find_hardware_preset("h200");
  ASSERT_EQ(data["layers"].size(), 12u);
  double worst[6] = {0, 0, 0, 0, 0, 0};
  double recompute_abs_sum = 0;
  std::printf("%-11s %5s %3s | %7s %7s %6s | %7s %7s %6s | %7s %7s %6s | %6s %6s | %7s %7s %6s\n",
              "model", "seq", "mbs", "F ms", "meas", "err", "I ms", "meas", "err", "W ms", "meas",
              "err", "act%", "full%", "rc ms", "meas", "err");
  for (const auto& row : data["layers"]) {
    const ModelShape m = shape_of(row);
    CostSettings st;
    st.seq_length = row["seq"];
    st.micro_batch_size = row["mbs"];
    st.grad_accumulation = GradAccumulation::add;  // HF: param.grad += g, in bf16
    st.grad_bytes = 2;
    const LayerCost c = decoder_layer_cost(m, hw, st);
    EXPECT_EQ(c.param_count, row["params"].get<std::int64_t>()) << m.name;
    // Same FLOP convention as the profile: matmuls with the causal half of attention.
    EXPECT_NEAR(c.forward_flops, row["flops_fwd_causal"].get<double>(),
                1e-9 * row["flops_fwd_causal"].get<double>())
        << m.name;
    const double f = rel(c.forward_s * 1e3, row["t_fwd_ms"]);
    const double i = rel(c.backward_input_s * 1e3, row["t_bwd_input_ms"]);
    const double w = rel(c.backward_weight_s * 1e3, row["t_bwd_weight_ms"]);
    const double a =
        rel(static_cast<double>(c.activation_bytes[Recompute::none]), row["act_saved_bytes"]);
    const double r = rel(static_cast<double>(c.activation_bytes[Recompute::full]),
                         row["act_saved_recompute_bytes"]);
    const double rc_meas =
        row["t_bwd_full_recompute_ms"].get<double>() - row["t_bwd_full_ms"].get<double>();
    const double rc = rel(c.recompute_extra_s[Recompute::full] * 1e3, rc_meas);
    recompute_abs_sum += std::abs(rc);
    std::printf(
        "%-11s %5d %3d | %7.3f %7.3f %+5.1f%% | %7.3f %7.3f %+5.1f%% | %7.3f %7.3f %+5.1f%% | "
        "%+5.2f%% %+5.2f%% | %7.3f %7.3f %+5.1f%%\n",
        m.name.c_str(), st.seq_length, st.micro_batch_size, c.forward_s * 1e3,
        row["t_fwd_ms"].get<double>(), 100 * f, c.backward_input_s * 1e3,
        row["t_bwd_input_ms"].get<double>(), 100 * i, c.backward_weight_s * 1e3,
        row["t_bwd_weight_ms"].get<double>(), 100 * w, 100 * a, 100 * r,
        c.recompute_extra_s[Recompute::full] * 1e3, rc_meas, 100 * rc);
    EXPECT_LE(std::abs(f), 0.10) << m.name << " s=" << st.seq_length << " forward";
    EXPECT_LE(std::abs(i), 0.15) << m.name << " s=" << st.seq_length << " input-grad";
    EXPECT_LE(std::abs(w), 0.15) << m.name << " s=" << st.seq_length << " weight-grad";
    EXPECT_LE(std::abs(a), 0.05) << m.name << " s=" << st.seq_length << " activations, none";
    EXPECT_LE(std::abs(r), 0.05) << m.name << " s=" << st.seq_length << " activations, full";
    EXPECT_LE(std::abs(rc), 0.25) << m.name << " s=" << st.seq_length << " full recompute";
    const double errs[6] = {f, i, w, a, r, rc};
    for (int k = 0; k < 6; ++k) worst[k] = std::max(worst[k], std::abs(errs[k]));
  }
  const double recompute_mean = recompute_abs_sum / static_cast<double>(data["layers"].size());
  EXPECT_LE(recompute_mean, 0.10);
  std::printf(
      "max |error|: forward %.1f%%, input-grad %.1f%%, weight-grad %.1f%%, "
      "activations none %.2f%%, full %.2f%%; full recompute %.1f%% (mean %.1f%%)\n",
      100 * worst[0], 100 * worst[1], 100 * worst[2], 100 * worst[3], 100 * worst[4],
      100 * worst[5], 100 * recompute_mean);
}

}  // namespace
}  // namespace bmpipe
