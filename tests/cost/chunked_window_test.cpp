// Gemma 3's 5:1 local/global layers and Llama 4's chunked attention in the cost model (issue
// 40, "Sliding windows", "Wider MoE configs of known blocks"): a chunked core does the causal
// pairs inside each aligned chunk, a local layer the pairs of its sliding window, and the
// config refuses what cannot be either. Expected values are closed forms worked by hand
// below, never taken from the code under test.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "experiment/hf_config.hpp"
#include "sim/cost/cost_model.hpp"
#include "support/round_device.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace {

using test::round_device;

CostSettings settings(int seq) {
  CostSettings st;
  st.seq_length = seq;
  st.micro_batch_size = 1;
  st.grad_accumulation = GradAccumulation::overwrite;
  return st;
}

TEST(ChunkedWindow, PairsCountedByHand) {
  // s = 8, C = 3: chunks {0,1,2} {3,4,5} {6,7}; queries see 1,2,3, 1,2,3, 1,2 keys = 15
  // = 2 x 3 x 4 / 2 + 2 x 3 / 2 (n = 2 whole chunks, r = 2 left). A sliding window of 3 sees
  // 1,2,3,3,3,3,3,3 = 21.
  EXPECT_DOUBLE_EQ(chunked_attention_pairs(8, 3), 15.0);
  EXPECT_DOUBLE_EQ(causal_attention_pairs(8, 3), 21.0);
  // One chunk as long as the sequence or longer, or none: the causal triangle, 36.
  EXPECT_DOUBLE_EQ(chunked_attention_pairs(8, 8), 36.0);
  EXPECT_DOUBLE_EQ(chunked_attention_pairs(8, 100), 36.0);
  EXPECT_DOUBLE_EQ(chunked_attention_pairs(8, 0), 36.0);
  // Chunks of 1: each query sees itself, as a window of 1 does.
  EXPECT_DOUBLE_EQ(chunked_attention_pairs(8, 1), 8.0);
  // s = 4C, C = 1024: 4 whole chunks, 2 C (C + 1) = 2,099,200 pairs; the sliding window's
  // W s - W (W - 1) / 2 = 3,670,528 (3.5 C^2 + C / 2).
  EXPECT_DOUBLE_EQ(chunked_attention_pairs(4096, 1024), 2'099'200.0);
  EXPECT_DOUBLE_EQ(causal_attention_pairs(4096, 1024), 3'670'528.0);
}

// Llama 3 8B's layer (32 heads of 128) with its window made a chunk: at s = C the core is full
// attention's; at s = 4C it is the chunks' share of full attention's, below the sliding
// window's.
TEST(ChunkedWindow, CoreFlopsAtOneAndFourChunks) {
  const HardwareSpec hw = round_device(100, 0);
  ModelShape m = *find_model_preset("llama3-8b");
  m.sliding_window = 1024;
  m.sliding_every = 1;
  const double full =
      decoder_layer_cost(m, hw, settings(1024)).recompute_flops[Recompute::selective];
  m.chunked_window = true;
  // s = C = 1024: one chunk, the full causal core 2 x T x s x q_cols = 2 x 1024^2 x 4096.
  EXPECT_DOUBLE_EQ(
      decoder_layer_cost(m, hw, settings(1024), true).recompute_flops[Recompute::selective],
      2.0 * 1024 * 1024 * 4096);
  EXPECT_DOUBLE_EQ(full, 2.0 * 1024 * 1024 * 4096);
  // s = 4096 = 4C: full core 2 x 4096^3 = 137,438,953,472 x 2,099,200 / 8,390,656 (the chunks'
  // pairs over s (s + 1) / 2) = 140,874,927,308,800 / 4097 = 34,384,898,049.5.
  const LayerCost chunked = decoder_layer_cost(m, hw, settings(4096), true);
  EXPECT_NEAR(chunked.recompute_flops[Recompute::selective], 34'384'898'049.5, 1.0);
  m.chunked_window = false;
  const LayerCost sliding = decoder_layer_cost(m, hw, settings(4096), true);
  // The sliding window's core (sliding_window_test.cpp): 60,123,252,223.6.
  EXPECT_NEAR(sliding.recompute_flops[Recompute::selective], 60'123'252'223.6, 1.0);
  // Chunks and windows hold the same bytes: only the core's FLOPs differ.
  EXPECT_EQ(chunked.activation_bytes[Recompute::none], sliding.activation_bytes[Recompute::none]);
  EXPECT_EQ(chunked.param_count, sliding.param_count);
}

// Gemma 3 27B (configs/presets/hf/gemma-3-27b.json): 32 heads of 128, q_cols 4096, a window of
// 1024 on the local layers. At s = 8192, tp 1, the global layer's causal core is
// 2 x 8192^2 x 4096 = 549,755,813,888 FLOPs; the local one's is that x (W s - W (W - 1) / 2) /
// (s (s + 1) / 2) = x 7,864,832 / 33,558,528 = 1,055,599,882,141,696 / 8193
// = 128,841,679,743.9, 23.4 % of it. The rest of the layer is the same.
TEST(ChunkedWindow, GemmaThreeLocalLayerAgainstItsGlobalLayer) {
  const ModelShape m =
      read_hf_config(std::string(BMPIPE_SOURCE_DIR) + "/configs/presets/hf/gemma-3-27b.json");
  const HardwareSpec hw = round_device(100, 0);
  const LayerCost global = decoder_layer_cost(m, hw, settings(8192), false);
  const LayerCost local = decoder_layer_cost(m, hw, settings(8192), true);
  EXPECT_DOUBLE_EQ(global.recompute_flops[Recompute::selective], 549'755'813'888.0);
  EXPECT_NEAR(local.recompute_flops[Recompute::selective], 128'841'679'743.9, 1.0);
  EXPECT_NEAR(global.forward_flops - local.forward_flops,
              549'755'813'888.0 - 1'055'599'882'141'696.0 / 8193, 1.0);
  EXPECT_EQ(local.param_count, global.param_count);
}

// Gemma 3's norms of the attention and MLP outputs (ModelShape::post_norms): two sub-ops that
// each cost what the input norm does, a scale of 5376 each, and what each keeps for backward
// as HF's eager RMSNorm does: the fp32 copy of its input and the bf16 normalized tensor (4 + 2
// bytes an element) and an fp32 rsqrt a token. At s = 8192, tp 1: 2 x (6 x 8192 x 5376 + 4 x
// 8192) = 528,547,840 bytes more.
TEST(ChunkedWindow, GemmaThreePostNormsAreTwoMoreNorms) {
  ModelShape m =
      read_hf_config(std::string(BMPIPE_SOURCE_DIR) + "/configs/presets/hf/gemma-3-27b.json");
  const HardwareSpec hw = round_device(100, 0);
  const LayerCost with = decoder_layer_cost(m, hw, settings(8192), true);
  m.post_norms = false;
  const LayerCost without = decoder_layer_cost(m, hw, settings(8192), true);
  const SubOpCost* input = nullptr;
  for (const auto& o : with.ops)
    if (o.name == "input_norm") input = &o;
  ASSERT_NE(input, nullptr);
  int found = 0;
  for (const auto& o : with.ops) {
    if (o.name != "post_attention_norm" && o.name != "post_mlp_norm") continue;
    ++found;
    EXPECT_DOUBLE_EQ(o.forward_s, input->forward_s) << o.name;
    EXPECT_DOUBLE_EQ(o.backward_input_s, input->backward_input_s) << o.name;
    EXPECT_DOUBLE_EQ(o.backward_weight_s, input->backward_weight_s) << o.name;
  }
  EXPECT_EQ(found, 2);
  EXPECT_EQ(with.ops.size(), without.ops.size() + 2);
  EXPECT_EQ(with.param_count - without.param_count, 2 * 5376);
  EXPECT_EQ(with.activation_bytes[Recompute::none] - without.activation_bytes[Recompute::none],
            528'547'840);
  EXPECT_NEAR(with.forward_s - without.forward_s, 2 * input->forward_s, 1e-12);
}

// Llama 4 Scout at s = 32768 = 4 chunks of 8192: its chunked layers' core is 4 x C (C + 1) / 2
// / (s (s + 1) / 2) = 8193 / 32769 of the global (NoPE) layers' core.
TEST(ChunkedWindow, LlamaFourScoutChunkedLayersDoAQuarterOfTheCore) {
  const ModelShape m = read_hf_config(std::string(BMPIPE_SOURCE_DIR) +
                                      "/configs/presets/hf/llama-4-scout-17b-16e.json");
  const HardwareSpec hw = round_device(100, 0);
  CostSettings st = settings(32768);
  st.ep = 16;
  const double global =
      moe_decoder_layer_cost(m, hw, st, false).recompute_flops[Recompute::selective];
  const double chunked =
      moe_decoder_layer_cost(m, hw, st, true).recompute_flops[Recompute::selective];
  // Global: 2 x 32768^2 x (40 x 128) = 10,995,116,277,760.
  EXPECT_DOUBLE_EQ(global, 2.0 * 32768 * 32768 * 5120);
  EXPECT_NEAR(chunked, 2.0 * 32768 * 32768 * 5120 * 8193 / 32769, 1.0);
}

/// A Gemma 3 27B config on 8 H100; `model_extra` goes on lines 4.., training after it.
std::string gemma_yaml(const std::string& model_extra) {
  return "cluster: {nodes: 1, devices_per_node: 8, device: {preset: h100-sxm}}\n"  // 1
         "model:\n"                                                                // 2
         "  hf_config: \"" +
         std::string(BMPIPE_SOURCE_DIR) + "/configs/presets/hf/gemma-3-27b.json\"\n" +  // 3
         model_extra +                                                                  // 4..
         "training: {pp: 2, tp: 4, seq_length: 4096, global_batch_size: 16}\n";
}

TEST(ChunkedWindow, BadYamlNamesFileLineAndKey) {
  const test::ScratchDir dir;
  struct Case {
    std::string yaml;
    std::string expect;
  };
  const Case cases[] = {
      {gemma_yaml("  sliding_every: 2\n  full_every: 6\n"),
       ":5: model.full_every: picks the windowed layers beside model.sliding_every"},
      {gemma_yaml("  full_every: 1\n"), ":4: model.full_every: 1 makes every layer global"},
      {gemma_yaml("  full_every: -6\n"), ":4: model.full_every"},
      {gemma_yaml("  sliding_window: 0\n  full_every: 6\n"),
       ":5: model.full_every: 6 picks the windowed layers, but the model has no window"},
      {gemma_yaml("  sliding_window: 0\n  chunked_window: true\n"),
       ":5: model.chunked_window: true chunks the window, but the model has no window"},
      {gemma_yaml("  chunked_window: 2\n"), ":4: model.chunked_window"},
      // A chunk longer than the sequence masks nothing, as a window does not.
      {gemma_yaml("  sliding_window: 8192\n  chunked_window: true\n"),
       ":4: model.sliding_window: 8192 tokens"},
  };
  int n = 0;
  for (const Case& c : cases) {
    const std::string path = test::write_file(dir.file(std::to_string(n++) + ".yaml"), c.yaml);
    const test::CliRun r = test::run_cli("cost " + path);
    EXPECT_EQ(r.code, 2) << c.yaml << r.out;
    EXPECT_NE(r.err.find(path + c.expect), std::string::npos) << r.err;
  }
  // Gemma's output norms are costed in llama decoder layers alone.
  const std::string gpt =
      test::write_file(dir.file("gpt.yaml"),
                       "cluster: {nodes: 1, devices_per_node: 8, device: {preset: h100-sxm}}\n"
                       "model:\n"
                       "  preset: gpt3-175b\n"
                       "  post_norms: true\n"
                       "training: {pp: 8, seq_length: 2048, global_batch_size: 16}\n");
  const test::CliRun g = test::run_cli("cost " + gpt);
  EXPECT_EQ(g.code, 2);
  EXPECT_NE(g.err.find(gpt + ":3: model: post_norms (Gemma's norms of the attention and MLP "
                             "outputs) are modelled for llama decoder layers alone"),
            std::string::npos)
      << g.err;
  // The YAML's picker replaces the HF config's: sliding_every 2 over Gemma 3's full_every 6.
  const std::string ok = test::write_file(dir.file("ok.yaml"), gemma_yaml("  sliding_every: 2\n"));
  const test::CliRun r = test::run_cli("cost " + ok);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("decoder.swa    31"), std::string::npos) << r.out;
}

// configs/examples/h100_gemma3_27b.yaml: the numbers its comment gives, as measured when it
// was written. An iteration is the global batch, 256 x 8192 = 2 097 152 tokens over 32 GPUs.
TEST(ChunkedWindow, GemmaThreeExampleRunsAsItsCommentSays) {
  const std::string example =
      std::string(BMPIPE_SOURCE_DIR) + "/configs/examples/h100_gemma3_27b.yaml";
  const test::CliRun r = test::run_cli("simulate '" + example + "' --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_NEAR(j["tokens_per_s"].get<double>() * j["iteration_time_ms"].get<double>() / 1000,
              256.0 * 8192, 1.0);
  EXPECT_NEAR(j["iteration_time_ms"].get<double>(), 26339.4, 0.5);
  EXPECT_NEAR(j["tokens_per_s"].get<double>() / 32, 2488.1, 0.5);
  EXPECT_NEAR(j["mfu"].get<double>(), 0.419, 0.001);
  EXPECT_TRUE(j["fits"].get<bool>());
  // 52 local layers and 10 global ones, and the parameters counted by hand in
  // tests/frameworks/gemma3_llama4_import_test.cpp.
  const test::CliRun c = test::run_cli("cost '" + example + "' --json");
  ASSERT_EQ(c.code, 0) << c.err;
  const nlohmann::json k = nlohmann::json::parse(c.out);
  EXPECT_EQ(k["parameters_total"].get<long long>(), 27'009'346'304LL);
  std::vector<std::pair<std::string, int>> rows;
  for (const auto& l : k["layers"]) rows.emplace_back(l["name"], l["count"]);
  const std::vector<std::pair<std::string, int>> expected{
      {"embedding", 1}, {"decoder", 10}, {"decoder.swa", 52}, {"lm_head", 1}};
  EXPECT_EQ(rows, expected);
}

// configs/examples/h100_llama4_scout.yaml: as written it does not fit, and the plan that
// fits it is the one its comment gives. An iteration is 256 x 16384 = 4 194 304 tokens over
// 64 GPUs.
TEST(ChunkedWindow, LlamaFourScoutExampleRunsAsItsCommentSays) {
  const std::string example =
      std::string(BMPIPE_SOURCE_DIR) + "/configs/examples/h100_llama4_scout.yaml";
  const test::CliRun r = test::run_cli("simulate '" + example + "' --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_NEAR(j["tokens_per_s"].get<double>() * j["iteration_time_ms"].get<double>() / 1000,
              256.0 * 16384, 1.0);
  EXPECT_NEAR(j["iteration_time_ms"].get<double>(), 24061.7, 0.5);
  EXPECT_NEAR(j["tokens_per_s"].get<double>() / 64, 2723.7, 0.5);
  EXPECT_NEAR(j["mfu"].get<double>(), 0.308, 0.001);
  EXPECT_FALSE(j["fits"].get<bool>());
  const test::CliRun p = test::run_cli("plan '" + example + "' --json");
  ASSERT_EQ(p.code, 0) << p.err;
  const nlohmann::json plan = nlohmann::json::parse(p.out);
  EXPECT_TRUE(plan["plan"]["fits"].get<bool>());
  EXPECT_NEAR(plan["plan"]["iteration_time_ms"].get<double>(), 18415.2, 0.5);
  EXPECT_EQ(plan["speedup"]["baseline"], "megatron-first-last");
  EXPECT_NEAR(plan["speedup"]["value"].get<double>(), 1.130, 0.001);
}

}  // namespace
}  // namespace bmpipe
