// Sliding-window attention in the cost model (issue 40, "Sliding windows"): a windowed layer's
// causal core does only the query-key pairs inside its window, a model whose layers differ
// gets one cost per kind, and the config refuses what cannot be a window. Expected values are
// closed forms worked by hand below, never taken from the code under test.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "experiment/experiment.hpp"
#include "experiment/hf_config.hpp"
#include "sim/cost/cost_model.hpp"
#include "sim/cost/hardware.hpp"
#include "support/round_device.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace {

using test::round_device;

const std::string kGptOss =
    std::string(BMPIPE_SOURCE_DIR) + "/configs/presets/hf/gpt-oss-120b.json";

// Llama 3 8B (32 heads of 128) at s = 4096, one sequence, tp 1.
CostSettings settings(int seq, int cp = 1, CpComm comm = CpComm::p2p) {
  CostSettings st;
  st.seq_length = seq;
  st.micro_batch_size = 1;
  st.grad_accumulation = GradAccumulation::overwrite;
  st.cp = cp;
  st.cp_comm = comm;
  return st;
}

ModelShape windowed_llama(int window, int every) {
  ModelShape m = *find_model_preset("llama3-8b");
  m.sliding_window = window;
  m.sliding_every = every;
  return m;
}

const SubOpCost& op(const LayerCost& c, const std::string& name) {
  for (const auto& o : c.ops)
    if (o.name == name) return o;
  ADD_FAILURE() << "no sub-op " << name;
  return c.ops.front();
}

TEST(SlidingWindow, PairsCountedByHand) {
  // s = 8, W = 3: queries 0..7 see 1, 2, 3, 3, 3, 3, 3, 3 keys = 21 = 3 x 8 - 3 x 2 / 2.
  EXPECT_DOUBLE_EQ(causal_attention_pairs(8, 3), 21.0);
  // No window, or one at least as long as the sequence: 1 + 2 + ... + 8 = 36.
  EXPECT_DOUBLE_EQ(causal_attention_pairs(8, 0), 36.0);
  EXPECT_DOUBLE_EQ(causal_attention_pairs(8, 8), 36.0);
  EXPECT_DOUBLE_EQ(causal_attention_pairs(8, 100), 36.0);
  // W = 1: every query sees itself only.
  EXPECT_DOUBLE_EQ(causal_attention_pairs(8, 1), 8.0);
}

// The windowed core's FLOPs (what selective recompute re-runs: recompute_flops[selective])
// against full attention's: the same at s = W, the ratio of the pairs at s = 4W.
TEST(SlidingWindow, CoreFlopsAtOneAndFourWindows) {
  const HardwareSpec hw = round_device(100, 0);
  const ModelShape full = *find_model_preset("llama3-8b");
  // Full causal core at s = 4096: 2 x 2 x T x s x q_cols / 2 = 2 x 4096^3 = 137,438,953,472.
  const LayerCost f = decoder_layer_cost(full, hw, settings(4096));
  EXPECT_DOUBLE_EQ(f.recompute_flops[Recompute::selective], 137'438'953'472.0);
  // s = W = 4096: every query's keys fit in the window, the same work to the FLOP and second.
  const LayerCost same = decoder_layer_cost(windowed_llama(4096, 1), hw, settings(4096), true);
  EXPECT_DOUBLE_EQ(same.recompute_flops[Recompute::selective],
                   f.recompute_flops[Recompute::selective]);
  EXPECT_DOUBLE_EQ(same.forward_flops, f.forward_flops);
  EXPECT_DOUBLE_EQ(op(same, "attention").forward_s, op(f, "attention").forward_s);
  // s = 4W, W = 1024: pairs W s - W (W - 1) / 2 = 4,194,304 - 523,776 = 3,670,528 against
  // s (s + 1) / 2 = 8,390,656: 3,670,528 / 8,390,656 = 7169 / 16388 ((7W + 1) / (16W + 4)),
  // 0.43745... of the full core: 137,438,953,472 x 7169 / 16388 = 60,123,252,223.6
  const LayerCost w = decoder_layer_cost(windowed_llama(1024, 1), hw, settings(4096), true);
  EXPECT_NEAR(w.recompute_flops[Recompute::selective], 137'438'953'472.0 * 7169 / 16388, 1.0);
  EXPECT_NEAR(w.recompute_flops[Recompute::selective], 60'123'252'223.6, 1.0);
  // Everything but the core is unchanged: the layer's FLOPs drop by the core's difference.
  EXPECT_NEAR(f.forward_flops - w.forward_flops, 137'438'953'472.0 * (1 - 7169.0 / 16388), 1.0);
  // Bytes are unchanged (q, k, v and the output once each; the logsumexp per query).
  EXPECT_EQ(w.activation_bytes[Recompute::none], f.activation_bytes[Recompute::none]);
  EXPECT_EQ(w.param_count, f.param_count);
  // A layer not marked windowed ignores the model's window.
  EXPECT_DOUBLE_EQ(decoder_layer_cost(windowed_llama(1024, 1), hw, settings(4096))
                       .recompute_flops[Recompute::selective],
                   f.recompute_flops[Recompute::selective]);
  // Selective recompute re-runs the windowed core: its recompute time is the core's forward.
  EXPECT_DOUBLE_EQ(w.recompute_extra_s[Recompute::selective], op(w, "attention").forward_s);
  EXPECT_LT(op(w, "attention").forward_s, op(f, "attention").forward_s);
}

// Ulysses (a2a) gives each cp rank all s tokens of heads / cp: the window's pairs, split by
// cp exactly. The load-balanced ring (p2p) is refused: TransformerEngine's context-parallel
// attention asserts sliding windows run only with a2a or all_gather.
TEST(SlidingWindow, ContextParallelUlyssesSplitsTheWindowedCoreAndTheRingIsRefused) {
  const HardwareSpec hw = round_device(100, 0);
  const LayerCost one = decoder_layer_cost(windowed_llama(1024, 1), hw, settings(4096), true);
  const LayerCost two =
      decoder_layer_cost(windowed_llama(1024, 1), hw, settings(4096, 2, CpComm::a2a), true);
  EXPECT_DOUBLE_EQ(two.recompute_flops[Recompute::selective],
                   one.recompute_flops[Recompute::selective] / 2);
  EXPECT_THROW(decoder_layer_cost(windowed_llama(1024, 1), hw, settings(4096, 2), true),
               ShapeError);
  // A window the sequence does not exceed masks nothing: the ring runs it as full attention.
  EXPECT_NO_THROW(decoder_layer_cost(windowed_llama(4096, 1), hw, settings(4096, 2), true));
}

TEST(SlidingWindow, GptOssAlternatesWindowedAndFullLayersFromLayerZero) {
  const ModelShape m = read_hf_config(kGptOss);
  ASSERT_EQ(m.num_layers, 36);
  int windowed = 0;
  for (int i = 0; i < m.num_layers; ++i) windowed += m.is_windowed_layer(i) ? 1 : 0;
  EXPECT_EQ(windowed, 18);
  // HF GptOssConfig.layer_types: sliding_attention at layer 0, full_attention at layer 1.
  EXPECT_TRUE(m.is_windowed_layer(0));
  EXPECT_FALSE(m.is_windowed_layer(1));
  EXPECT_TRUE(m.is_windowed_layer(34));
  EXPECT_FALSE(m.is_windowed_layer(35));
  // A layer_types list bmpipe would cost otherwise is refused at its field.
  nlohmann::json j = nlohmann::json::parse(test::slurp(kGptOss));
  j["layer_types"][1] = "sliding_attention";
  const test::ScratchDir dir;
  const std::string odd = test::write_file(dir.file("odd.json"), j.dump());
  try {
    read_hf_config(odd);
    ADD_FAILURE() << "layer 1 windowed was read";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find(": /layer_types: layer 1 is \"sliding_attention\""),
              std::string::npos)
        << e.what();
  }
  // Mistral 7B v0.1 windows every layer at 4096 tokens (its config.json's sliding_window).
  const ModelShape mistral =
      read_hf_config(std::string(BMPIPE_TEST_DATA_DIR) + "/hf/mistral_7b_v0.1_config.json");
  EXPECT_EQ(mistral.sliding_window, 4096);
  EXPECT_EQ(mistral.sliding_every, 1);
  // sliding_every 1: every layer; no window: none.
  EXPECT_TRUE(windowed_llama(128, 1).is_windowed_layer(5));
  EXPECT_FALSE(windowed_llama(0, 0).is_windowed_layer(0));
}

TEST(SlidingWindow, GptOssLayerTableHasWindowedAndFullMoeKinds) {
  const test::ScratchDir dir;
  const std::string yaml = test::write_file(
      dir.file("oss.yaml"),
      "cluster: {nodes: 8, devices_per_node: 8, device: {preset: h100-sxm}}\n"
      "model: {hf_config: \"" +
          kGptOss +
          "\"}\n"
          "training: {pp: 4, ep: 8, seq_length: 4096, global_batch_size: 64, kernels: fused}\n");
  const auto e = prepare(load_config(yaml));
  const auto kinds = e->analytic->layer_kinds(*e->config.model.shape);
  ASSERT_EQ(kinds.size(), 2u);
  EXPECT_EQ(kinds[0].first->name, "moe_decoder");
  EXPECT_EQ(kinds[0].second, 18);
  EXPECT_EQ(kinds[1].first->name, "moe_decoder.swa");
  EXPECT_EQ(kinds[1].second, 18);
  // pp 4: 9 layers a stage; the rows are named by kind, layer 0 windowed.
  const LayerTable& t = e->layers;
  ASSERT_EQ(t.layers.size(), 36u);
  EXPECT_EQ(t.layers[0].name, "moe_decoder.swa.0+embedding");
  EXPECT_EQ(t.layers[1].name, "moe_decoder.1");
  EXPECT_EQ(t.layers[34].name, "moe_decoder.swa.34");
  EXPECT_EQ(t.layers[35].name, "moe_decoder.35+lm_head");
  EXPECT_LT(t.layers[34].forward, t.layers[33].forward);
}

// configs/examples/b200_gpt_oss_120b.yaml is Megatron-Bridge's 64-GPU B200 BF16 run (26.04.01,
// 13 568 tokens/s/GPU published) written as bench/fidelity writes that row, so it reads what
// the fidelity table's row reads: 21 170 tokens/s/GPU, a time 35.9 % short of the published
// one (docs/cost-model.md, "The fidelity table"). An iteration is the global batch, 1280 x
// 4096 = 5 242 880 tokens; MFU is model FLOPs over B200's 2250 TFLOP/s dense BF16 peak.
TEST(SlidingWindow, GptOssExampleIsThePublishedB200Run) {
  const test::CliRun r = test::run_cli("simulate '" + std::string(BMPIPE_SOURCE_DIR) +
                                       "/configs/examples/b200_gpt_oss_120b.yaml' --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  const double tokens_per_gpu = j["tokens_per_s"].get<double>() / 64;
  EXPECT_NEAR(j["tokens_per_s"].get<double>() * j["iteration_time_ms"].get<double>() / 1000,
              1280.0 * 4096, 1.0);
  EXPECT_NEAR(tokens_per_gpu, 21170, 1.0);
  EXPECT_NEAR(13568 / tokens_per_gpu - 1, -0.359, 0.001);  // the published time, read short
  EXPECT_NEAR(j["mfu"].get<double>(), 0.308, 0.001);
  EXPECT_TRUE(j["fits"].get<bool>());
}

}  // namespace
}  // namespace bmpipe
