// Sliding-window attention through the config (issue 40): model.sliding_window and
// sliding_every make the layer table's windowed kinds, and every bad input exits 2 naming
// FILE:LINE:key.
#include <gtest/gtest.h>

#include <string>

#include "experiment/experiment.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace {

// A dense model with alternating windows: a kind per (dense or MoE) x (windowed or full), each
// with its count, and rows named by their kind.
TEST(SlidingWindowConfig, LayerTableOfAnAlternatingModelHasBothKinds) {
  const test::ScratchDir dir;
  const std::string yaml = test::write_file(
      dir.file("swa.yaml"),
      "cluster: {nodes: 1, devices_per_node: 8, device: {preset: h100-sxm}}\n"
      "model: {preset: llama3-8b, sliding_window: 1024, sliding_every: 2}\n"
      "training: {pp: 4, seq_length: 4096, global_batch_size: 16, kernels: fused}\n");
  const auto e = prepare(load_config(yaml));
  const AnalyticCosts& a = *e->analytic;
  const auto kinds = a.layer_kinds(*e->config.model.shape);
  ASSERT_EQ(kinds.size(), 2u);
  EXPECT_EQ(kinds[0].first->name, "decoder");
  EXPECT_EQ(kinds[0].second, 16);
  EXPECT_EQ(kinds[1].first->name, "decoder.swa");
  EXPECT_EQ(kinds[1].second, 16);
  const LayerTable t = layer_costs(e->config, &a);
  ASSERT_EQ(t.layers.size(), 32u);
  EXPECT_EQ(t.layers[0].name, "decoder.swa.0+embedding");
  EXPECT_EQ(t.layers[1].name, "decoder.1");
  EXPECT_EQ(t.layers[2].name, "decoder.swa.2");
  EXPECT_EQ(t.layers[31].name, "decoder.31+lm_head");
  EXPECT_LT(t.layers[2].forward, t.layers[1].forward);
  EXPECT_LT(t.layers[2].forward_flops, t.layers[1].forward_flops);
}

/// A llama3-8b config on 8 devices; `model_extra` goes on lines 4.., training after it.
std::string swa_yaml(const std::string& model_extra, const std::string& training = "") {
  return "cluster: {nodes: 1, devices_per_node: 8, device: {preset: h100-sxm}}\n"  // 1
         "model:\n"                                                                // 2
         "  preset: llama3-8b\n" +                                                 // 3
         model_extra +                                                             // 4..
         "training:\n"
         "  pp: 2\n"
         "  seq_length: 4096\n"
         "  global_batch_size: 16\n" +
         training;
}

TEST(SlidingWindowConfig, BadInputsNameFileLineAndKey) {
  const test::ScratchDir dir;
  struct Case {
    std::string yaml;
    std::string expect;
  };
  const Case cases[] = {
      // A window beyond the sequence masks nothing: a mistaken unit or sequence, not a model.
      {swa_yaml("  sliding_window: 8192\n"), ":4: model.sliding_window: 8192 tokens"},
      {swa_yaml("  sliding_every: 2\n"), ":4: model.sliding_every: "},
      {swa_yaml("  sliding_window: -1\n"), ":4: model.sliding_window"},
      {swa_yaml("  sliding_window: 128\n  sliding_every: -2\n"), ":5: model.sliding_every"},
      // Line 4 window, 5 training, 6 pp, 7 seq_length, 8 global_batch_size, 9 cp.
      {swa_yaml("  sliding_window: 128\n", "  cp: 2\n"), ":9: training.cp: "},
      {swa_yaml("  sliding_window: 128\n", "  cp: 2\n  cp_comm_type: p2p\n"),
       ":10: training.cp_comm_type: "},
  };
  int n = 0;
  for (const Case& c : cases) {
    const std::string path = test::write_file(dir.file(std::to_string(n++) + ".yaml"), c.yaml);
    const test::CliRun r = test::run_cli("cost " + path);
    EXPECT_EQ(r.code, 2) << c.yaml << r.out;
    EXPECT_NE(r.err.find(path + c.expect), std::string::npos) << r.err;
  }
  // A hybrid model's attention layers are costed full: a window on one is refused.
  const std::string hybrid = test::write_file(
      dir.file("hybrid.yaml"),
      "cluster: {nodes: 1, devices_per_node: 8, device: {preset: h100-sxm}}\n"
      "model:\n"
      "  hf_config: \"" +
          std::string(BMPIPE_SOURCE_DIR) +
          "/configs/presets/hf/nemotron-3-nano-30b-a3b.json\"\n"
          "  sliding_window: 128\n"
          "training: {pp: 2, seq_length: 4096, global_batch_size: 16, kernels: fused}\n");
  const test::CliRun h = test::run_cli("cost " + hybrid);
  EXPECT_EQ(h.code, 2);
  EXPECT_NE(h.err.find(hybrid + ":4: model.sliding_window: sliding-window attention in a hybrid"),
            std::string::npos)
      << h.err;
  // The same window under Ulysses runs.
  const std::string ok = test::write_file(
      dir.file("a2a.yaml"), swa_yaml("  sliding_window: 128\n", "  cp: 2\n  cp_comm_type: a2a\n"));
  const test::CliRun r = test::run_cli("cost " + ok);
  EXPECT_EQ(r.code, 0) << r.err;
}

}  // namespace
}  // namespace bmpipe
