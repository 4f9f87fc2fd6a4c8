// Vision-language models (ModelShape::vision, issue 40): the ViT encoder block, the patch
// embedding and the projector on a tiny shape worked out by hand; the tokens through
// encoder, projector and LLM; the layer table's vision rows; Qwen2.5-VL-72B's parameters
// from its shipped config.json; and every bad input refused with exit 2 at FILE:LINE:key.
// The expected values are worked out in the comments, never taken from the code under test.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "experiment/experiment.hpp"
#include "experiment/hf_config.hpp"
#include "sim/cost/cost_model.hpp"
#include "support/round_device.hpp"
#include "support/sub_op.hpp"
#include "support/support.hpp"
#include "support/tiny_shape.hpp"

namespace bmpipe::vision_layers_test {
namespace {

constexpr double kPs = 1e-12;

using test::op;
using test::unit_device;

/// test::tiny_shape's LLM (h 8) with a vision encoder of 2 blocks, h_v 8, 2 heads of 4,
/// a gated MLP of 16, patches of 2 x 2 pixels of 1 channel and 1 frame (4 pixels a patch),
/// 2 x 2 merging, windows of 4 pixels (2 x 2 = 4 patches) in block 0, block 1 full; one
/// image of 2 LLM tokens a sample, so 2 x 4 = 8 patches.
ModelShape tiny_vlm() {
  ModelShape m = test::tiny_shape(0);
  VisionShape& v = m.vision;
  v.layers = 2;
  v.hidden_size = 8;
  v.num_heads = 2;
  v.ffn_hidden_size = 16;
  v.gated_mlp = true;
  v.patch_size = 2;
  v.temporal_patch = 1;
  v.in_channels = 1;
  v.spatial_merge = 2;
  v.window_size = 4;
  v.full_attention_layers = {1};
  v.images_per_sample = 1;
  v.image_tokens = 2;
  check_shape(m);
  return m;
}

// On the unit device a GEMM or a memory-bound sub-op takes max(FLOPs, bytes) picoseconds.
// T = 8 patches, h_v = 8, q_cols = 8, f = 16, e = 2 bytes.
TEST(VisionLayers, TheEncoderBlockByHand) {
  const ModelShape m = tiny_vlm();
  const CostSettings st = test::tiny_settings();
  const LayerCost full = vision_encoder_layer_cost(m, unit_device(), st, false);
  const LayerCost window = vision_encoder_layer_cost(m, unit_device(), st, true);
  EXPECT_EQ(full.name, "vision");
  EXPECT_EQ(window.name, "vision.window");
  // Block 0 attends within windows of (4 / 2)^2 = 4 patches, block 1 to the image's 8.
  EXPECT_TRUE(m.vision.is_windowed_layer(0));
  EXPECT_FALSE(m.vision.is_windowed_layer(1));
  EXPECT_EQ(m.vision.keys_per_patch(0), 4);
  EXPECT_EQ(m.vision.keys_per_patch(1), 8);
  // qkv_proj [8 x 8] x [8 x 24]: 2 x 8 x 8 x 24 = 3072 FLOPs (bytes 2 x (64 + 192 + 192) =
  // 896); out_proj [8 x 8] x [8 x 8]: 1024; fc1 (gate and up) [8 x 8] x [8 x 32]: 4096;
  // fc2 [8 x 16] x [16 x 8]: 2048.
  EXPECT_NEAR(op(full, "qkv_proj").forward_s, 3072 * kPs, 1e-20);
  EXPECT_NEAR(op(full, "out_proj").forward_s, 1024 * kPs, 1e-20);
  EXPECT_NEAR(op(full, "fc1").forward_s, 4096 * kPs, 1e-20);
  EXPECT_NEAR(op(full, "fc2").forward_s, 2048 * kPs, 1e-20);
  // Bidirectional attention: each of the 8 patches scores all 8 of its image (64 pairs,
  // where a causal core over 8 tokens has 8 x 9 / 2 = 36), QK^T and PV over 8 columns:
  // 4 x 8 x 8 x 8 = 2048 FLOPs. The windowed block: 4 keys a patch, 1024. Head width 4
  // runs at 408/609 of the attention efficiency (attention_head_dim_factor, held below 64),
  // and the bytes (q, k, v, output: 2 x 8 x 32 = 512) are below the FLOPs.
  EXPECT_NEAR(op(full, "attention").forward_s, 2048.0 * 609 / 408 * kPs, 1e-18);
  EXPECT_NEAR(op(window, "attention").forward_s, 1024.0 * 609 / 408 * kPs, 1e-18);
  // Model FLOPs: 3072 + 2048 + 1024 + 4096 + 2048 = 12288; windowed 12288 - 1024 = 11264.
  EXPECT_DOUBLE_EQ(full.forward_flops, 12288);
  EXPECT_DOUBLE_EQ(window.forward_flops, 11264);
  // Saved, none: 4 e Hs + 8 Ts + 4 e T q_cols + 4 heads T + (2 e + e) F
  //   = 4 x 2 x 64 + 8 x 8 + 4 x 2 x 8 x 8 + 4 x 2 x 8 + 6 x 128
  //   = 512 + 64 + 512 + 64 + 768 = 1920 bytes;
  // selective (core_attn, the default module) frees the logsumexp, 64: 1856; full keeps
  // the input, e Hs = 128. The weight-grad needs 2 e Hs + e T q_cols + e F = 256 + 128 +
  // 256 = 640.
  EXPECT_EQ(full.activation_bytes[Recompute::none], 1920);
  EXPECT_EQ(full.activation_bytes[Recompute::selective], 1856);
  EXPECT_EQ(full.activation_bytes[Recompute::full], 128);
  EXPECT_EQ(full.weight_grad_bytes[Recompute::none], 640);
  // Selective re-runs the attention core: its 2048 FLOPs; full the whole block's 12288.
  EXPECT_DOUBLE_EQ(full.recompute_flops[Recompute::selective], 2048);
  EXPECT_DOUBLE_EQ(full.recompute_flops[Recompute::full], 12288);
  // The block hands on its hidden states, e T h_v = 128 bytes.
  EXPECT_EQ(full.output_bytes, 128);
  // Parameters: 2 norms 16, qkv 192 + 24, proj 64 + 8, gate and up 2 x (128 + 16), down
  // 128 + 8: 16 + 216 + 72 + 288 + 136 = 728.
  EXPECT_EQ(full.param_count, 728);
  EXPECT_EQ(m.vision.encoder_layer_params(), 728);
}

TEST(VisionLayers, ThePatchEmbeddingAndTheProjectorByHand) {
  const ModelShape m = tiny_vlm();
  const CostSettings st = test::tiny_settings();
  // Patch embedding: [8 patches x 4 pixels] x [4 x 8]: 2 x 8 x 4 x 8 = 512 FLOPs (bytes
  // 2 x (32 + 32 + 64) = 256); saves its pixels, 2 x 8 x 4 = 64 bytes; 32 parameters.
  const LayerCost p = vision_patch_embed_cost(m, unit_device(), st);
  EXPECT_NEAR(op(p, "patch_embed").forward_s, 512 * kPs, 1e-20);
  EXPECT_DOUBLE_EQ(p.forward_flops, 512);
  EXPECT_EQ(p.activation_bytes[Recompute::none], 64);
  EXPECT_EQ(p.param_count, 32);
  // Projector: the 8 patches merged 2 x 2 into Tm = 2 tokens of 4 x 8 = 32; fc1
  // [2 x 32] x [32 x 32]: 4096 FLOPs; fc2 [2 x 32] x [32 x 8] into the LLM's h = 8: 1024.
  const LayerCost j = vision_projector_cost(m, unit_device(), st);
  EXPECT_NEAR(op(j, "fc1").forward_s, 4096 * kPs, 1e-20);
  EXPECT_NEAR(op(j, "fc2").forward_s, 1024 * kPs, 1e-20);
  EXPECT_DOUBLE_EQ(j.forward_flops, 5120);
  // Saved: the norm's input and rstd 2 x 64 + 4 x 8, fc1's input 2 x 64, GELU's and fc2's
  // inputs 2 x 2 x 2 x 32: 128 + 32 + 128 + 256 = 544; full: 128.
  EXPECT_EQ(j.activation_bytes[Recompute::none], 544);
  EXPECT_EQ(j.activation_bytes[Recompute::selective], 544);
  EXPECT_EQ(j.activation_bytes[Recompute::full], 128);
  // Output: the 2 image tokens' hidden states in the LLM's width, 2 x 2 x 8 = 32 bytes.
  EXPECT_EQ(j.output_bytes, 32);
  // 8 (norm) + 32 x 32 + 32 + 32 x 8 + 8 = 1328 parameters.
  EXPECT_EQ(j.param_count, 1328);
  EXPECT_EQ(m.vision.projector_params(8), 1328);
}

// tp 2 with sequence parallelism: the heads, the MLP and fc1 split, the norms run on T / 2
// patches; the qkv GEMM [8 x 8] x [8 x 12]: 1536 FLOPs; the core 4 x 8 x 8 x 4 = 1024.
TEST(VisionLayers, TensorParallelismSplitsTheBlock) {
  const ModelShape m = tiny_vlm();
  CostSettings st = test::tiny_settings();
  st.tp = 2;
  st.sequence_parallel = true;
  const LayerCost c = vision_encoder_layer_cost(m, unit_device(), st, false);
  EXPECT_NEAR(op(c, "qkv_proj").forward_s, 1536 * kPs, 1e-20);
  EXPECT_DOUBLE_EQ(op(c, "attention").forward_flops, 1024);
  // Full recompute keeps the block's input, its share: 2 x 8 / 2 x 8 = 64 bytes.
  EXPECT_EQ(c.activation_bytes[Recompute::full], 64);
  // Parameters a device: qkv 96 + 12, proj 32, gate and up 2 x (64 + 8), down 64; whole: 2
  // norms, proj's and down's biases, 4 x 8: 108 + 32 + 144 + 64 + 32 = 380.
  EXPECT_EQ(c.param_count, 380);
  // Replicated over tp (Megatron-Bridge's HF tower): each rank runs the whole block, the
  // qkv GEMM's 3072 FLOPs and all 728 parameters, with no tp collective.
  ModelShape whole = m;
  whole.vision.tensor_parallel = false;
  const LayerCost w = vision_encoder_layer_cost(whole, unit_device(), st, false);
  EXPECT_NEAR(op(w, "qkv_proj").forward_s, 3072 * kPs, 1e-20);
  EXPECT_EQ(w.param_count, 728);
  for (const SubOpCost& o : w.ops) EXPECT_NE(o.kind, KernelClass::collective) << o.name;
}

// ---- through the config ------------------------------------------------------------------

/// A small VLM written as YAML on 8 devices (pp 2, tp 2, dp 2): the LLM of 4 layers, a
/// vision encoder of 3 blocks; line 10 is the first line of `vision`'s keys.
std::string vlm_yaml(const std::string& vision_keys, const std::string& training_keys = "",
                     int seq_length = 1024) {
  return "cluster: {nodes: 1, devices_per_node: 8, device: {preset: h100-sxm}}\n"   // 1
         "model:\n  num_layers: 4\n  hidden_size: 256\n  num_attention_heads: 4\n"  // 2-5
         "  num_kv_heads: 2\n  ffn_hidden_size: 512\n  vocab_size: 1000\n"          // 6-8
         "  vision:\n" +                                                            // 9
         vision_keys +
         "training:\n  pp: 2\n  tp: 2\n  seq_length: " + std::to_string(seq_length) +
         "\n  micro_batch_size: 1\n  global_batch_size: 4\n  kernels: fused\n" + training_keys;
}

const std::string kVision =
    "    layers: 3\n    hidden_size: 64\n    num_heads: 4\n    ffn_hidden_size: 128\n"  // 10-13
    "    spatial_merge: 2\n    images_per_sample: 2\n    image_tokens: 256\n";          // 14-16

// The tokens through encoder, projector and LLM: 2 images of 256 LLM tokens are 2 x 256 x
// 2^2 = 2048 patches a sample for the encoder (not the 1024 of seq_length), 512 image
// tokens out of the projector, and the LLM runs its 1024-token sequence, which holds them.
TEST(VisionLayers, TokensThroughEncoderProjectorAndLlm) {
  const test::ScratchDir dir;
  const auto e = prepare(load_config(test::write_file(dir.file("vlm.yaml"), vlm_yaml(kVision))));
  const LayerTable& t = e->layers;
  // 3 blocks, the projector, 4 decoder layers: 8 rows, and the partition counts them all.
  ASSERT_EQ(t.layers.size(), 8u);
  EXPECT_EQ(e->config.model.num_layers(), 8);
  EXPECT_EQ(t.layers[0].name, "vision.0+patch_embed");
  EXPECT_EQ(t.layers[2].name, "vision.2");
  EXPECT_EQ(t.layers[3].name, "projector");
  EXPECT_EQ(t.layers[4].name, "decoder.0+embedding");
  EXPECT_EQ(t.layers[7].name, "decoder.3+lm_head");
  for (int l = 0; l < 4; ++l) EXPECT_EQ(t.layers[l].kind, LayerKind::vision) << l;
  // tp 2, no sequence parallelism, bf16: an encoder block hands on 2048 patches x 64 x 2
  // bytes = 262144; the projector 512 image tokens x 256 x 2 = 262144; a decoder layer its
  // 1024 tokens x 256 x 2 = 524288.
  EXPECT_EQ(t.layers[1].output_bytes, 2048 * 64 * 2);
  EXPECT_EQ(t.layers[3].output_bytes, 512 * 256 * 2);
  EXPECT_EQ(t.layers[5].output_bytes, 1024 * 256 * 2);
  // The encoder's work follows the patches, not seq_length: the qkv GEMM of a block is
  // 2 x 2048 x 64 x (3 x 64 / 2) FLOPs a device, the core 4 x 2048 x 1024 keys x 32.
  const AnalyticCosts& a = *e->analytic;
  EXPECT_DOUBLE_EQ(op(*a.vision, "qkv_proj").forward_flops, 2.0 * 2048 * 64 * 96);
  EXPECT_DOUBLE_EQ(op(*a.vision, "attention").forward_flops, 4.0 * 2048 * 1024 * 32);
  // Doubling seq_length leaves the encoder's rows as they are.
  const auto longer =
      prepare(load_config(test::write_file(dir.file("long.yaml"), vlm_yaml(kVision, "", 2048))));
  EXPECT_EQ(longer->layers.layers[1].forward, t.layers[1].forward);
  EXPECT_GT(longer->layers.layers[5].forward, t.layers[5].forward);
}

TEST(VisionLayers, BadInputsExitTwoAtTheirKey) {
  const test::ScratchDir dir;
  struct Case {
    std::string vision, training, expect;
  };
  const std::vector<Case> cases{
      // 2 x 600 image tokens do not fit a 1024-token sequence.
      {"    layers: 3\n    hidden_size: 64\n    num_heads: 4\n    ffn_hidden_size: 128\n"
       "    spatial_merge: 2\n    images_per_sample: 2\n    image_tokens: 600\n",
       "", "vlm.yaml:16: model.vision.image_tokens: images_per_sample x image_tokens = 2 x 600"},
      {kVision + "    patches: 4\n", "", "vlm.yaml:17: model.vision.patches: unknown key"},
      {"    layers: 3\n    hidden_size: 0\n    num_heads: 4\n    ffn_hidden_size: 128\n"
       "    images_per_sample: 2\n    image_tokens: 256\n",
       "", "vlm.yaml:11: model.vision.hidden_size:"},
      {"    layers: 3\n    hidden_size: 64\n    num_heads: 4\n    ffn_hidden_size: 128\n"
       "    images_per_sample: 0\n    image_tokens: 256\n",
       "", "vlm.yaml:14: model.vision.images_per_sample:"},
      {"    layers: 3\n    hidden_size: 64\n    num_heads: 4\n    ffn_hidden_size: 128\n"
       "    images_per_sample: 1\n",
       "", "model.vision.image_tokens: missing required key"},
      {"    layers: 3\n    hidden_size: 64\n    num_heads: 5\n    ffn_hidden_size: 128\n"
       "    images_per_sample: 1\n    image_tokens: 256\n",
       "", "vlm.yaml:12: model.vision.num_heads: 5 does not divide vision.hidden_size = 64"},
      {"    layers: 3\n    hidden_size: 64\n    num_heads: 2\n    ffn_hidden_size: 128\n"
       "    images_per_sample: 1\n    image_tokens: 256\n    window_size: 30\n",
       "", "vlm.yaml:16: model.vision.window_size: 30 pixels is not a whole number"},
      {"    layers: 3\n    hidden_size: 64\n    num_heads: 2\n    ffn_hidden_size: 128\n"
       "    images_per_sample: 1\n    image_tokens: 256\n    window_size: 112\n"
       "    full_attention_layers: [1, 3]\n",
       "", "vlm.yaml:17: model.vision.full_attention_layers: layer 3 does not exist"},
      // tp 2 does not split 3 heads.
      {"    layers: 3\n    hidden_size: 96\n    num_heads: 3\n    ffn_hidden_size: 128\n"
       "    images_per_sample: 1\n    image_tokens: 256\n",
       "", "vlm.yaml:12: model.vision.num_heads: 3 is not split evenly by training.tp = 2"},
      {kVision, "  cp: 2\n", "training.cp: context parallelism with a vision encoder"},
  };
  for (const auto& c : cases) {
    const auto r = test::run_cli(
        "cost '" + test::write_file(dir.file("vlm.yaml"), vlm_yaml(c.vision, c.training)) + "'");
    EXPECT_EQ(r.code, 2) << c.expect << "\n" << r.all();
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << c.expect << "\n  got: " << r.err;
  }
  // An HF config with a vision encoder needs the images a sample carries.
  const auto r = test::run_cli(
      "cost '" +
      test::write_file(dir.file("hf.yaml"),
                       "cluster: {nodes: 1, devices_per_node: 8, device: {preset: h100-sxm}}\n"
                       "model:\n  hf_config: " +
                           std::string(BMPIPE_SOURCE_DIR) +
                           "/configs/presets/hf/qwen2.5-vl-72b-instruct.json\n"
                           "training: {pp: 1, tp: 8, seq_length: 4096, global_batch_size: 8}\n") +
      "'");
  EXPECT_EQ(r.code, 2) << r.all();
  EXPECT_NE(r.err.find("hf.yaml:3: model.vision: the model has a vision encoder"),
            std::string::npos)
      << r.err;
}

// Qwen2.5-VL-72B-Instruct's config.json, counted by hand (HF's model card gives 73.4B
// parameters: the safetensors' count, every weight, both embedding matrices):
//   LLM, a layer: q 8192^2 + 8192, k and v 2 x (8192 x 1024 + 1024), o 8192^2, MLP
//     3 x 8192 x 29568, two norms 2 x 8192: 877 684 736; x 80 = 70 214 778 880;
//     embedding and output 2 x 152064 x 8192 = 2 491 416 576; final norm 8192:
//     72 706 203 648.
//   Vision: patch embedding 3 x 2 x 14 x 14 x 1280 = 1 505 280; a block: norms 2560, qkv
//     1280 x 3840 + 3840, proj 1280^2 + 1280, gate and up 2 x (1280 x 3456 + 3456), down
//     3456 x 1280 + 1280: 19 840 512; x 32 = 634 896 384; merger: ln_q 1280, fc1
//     5120^2 + 5120, fc2 5120 x 8192 + 8192: 68 172 032. 704 573 696 in all.
//   Total 73 410 777 344 (the card's 73.4B).
TEST(VisionLayers, Qwen25Vl72bParametersFromItsConfig) {
  const ModelShape m = read_hf_config(std::string(BMPIPE_SOURCE_DIR) +
                                      "/configs/presets/hf/qwen2.5-vl-72b-instruct.json");
  EXPECT_EQ(m.vision.layers, 32);
  EXPECT_EQ(m.vision.window_patches(), 64);  // 112 / 14 = 8 patches a side
  EXPECT_EQ(m.vision.params(m.hidden_size), 704'573'696);
  EXPECT_EQ(m.total_params(false), 73'410'777'344);
  EXPECT_NEAR(m.total_params(false) / 73.4e9, 1.0, 0.01);
}

// transformers 4.5x re-saves the language model under text_config: read there too; a
// merger whose output is not the LLM's width is refused at its field.
TEST(VisionLayers, TheNestedTextConfigFormAndAWrongMergerWidth) {
  const std::string vision =
      R"("vision_config": {"depth": 2, "hidden_size": 32, "num_heads": 4,
          "intermediate_size": 64, "out_hidden_size": 64, "fullatt_block_indexes": [1]})";
  const std::string text =
      R"("text_config": {"hidden_size": 64, "num_hidden_layers": 3, "num_attention_heads": 4,
          "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 512})";
  const ModelShape m = parse_hf_config(
      R"({"model_type": "qwen2_5_vl", )" + text + ", " + vision + "}", "nested.json");
  EXPECT_EQ(m.num_layers, 3);
  EXPECT_EQ(m.hidden_size, 64);
  EXPECT_EQ(m.vision.layers, 2);
  EXPECT_EQ(m.vision.window_size, 112);  // Qwen2_5_VLVisionConfig's default
  EXPECT_EQ(m.vision.full_attention_layers, std::vector<int>{1});
  EXPECT_FALSE(m.vision.tensor_parallel);
  std::string wrong = vision;
  wrong.replace(wrong.find("\"out_hidden_size\": 64"), 21, "\"out_hidden_size\": 96");
  try {
    parse_hf_config(R"({"model_type": "qwen2_5_vl", )" + text + ", " + wrong + "}", "nested.json");
    ADD_FAILURE() << "a merger into 96 columns for an LLM of 64 was accepted";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "nested.json#/vision_config/out_hidden_size: 96 is not the language model's "
                  "hidden_size 64"),
              std::string::npos)
        << e.what();
  }
}

const std::string kExample =
    std::string(BMPIPE_SOURCE_DIR) + "/configs/examples/h100_qwen25_vl_72b.yaml";

// The example: Qwen2.5-VL-72B on 128 H100 (tp 8, pp 4, dp 4, Megatron's placement 53/20/20/
// 20 rows), one 1024-token image in each 4096-token sample, 256 samples a step. Its model
// FLOPs a token, by hand (forward, then x 3):
//   LLM GEMMs: 2 x (80 x (8192^2 + 2 x 8192 x 1024 + 8192^2 + 3 x 8192 x 29568) + 152064 x
//     8192) = 142.917 G; causal attention 80 x 2 x 4096 x 8192 = 5.369 G;
//   vision, a patch (4096 a sample, as many as the sample's tokens): blocks 32 x 2 x
//     (3 x 1280^2 + 1280^2 + 3 x 1280 x 3456) = 1.2688 G; attention 4 full blocks x 4 x 4096
//     x 1280 + 28 windowed x 4 x 64 x 1280 = 0.0931 G; patch embedding 2 x 1176 x 1280 =
//     0.0030 G; projector 2 x (5120^2 + 5120 x 8192) / 4 = 0.0341 G: 1.3990 G;
//   (142.917 + 5.369 + 1.399) x 3 = 449.06 GFLOP a token.
// bmpipe simulates 9869.724 ms a step: 830.01 tokens/s a GPU, so MFU = 449.06e9 x 830.01 /
// 989e12 = 37.69 %.
TEST(VisionLayers, TheQwen25Vl72bExample) {
  const nlohmann::json s = test::run_json("simulate '" + kExample + "' --json");
  EXPECT_TRUE(s["fits"].get<bool>());
  EXPECT_EQ(s["microbatches"], 64);  // 256 / dp 4
  EXPECT_NEAR(s["iteration_time_ms"].get<double>(), 9869.724, 1e-3);
  const double per_gpu = s["tokens_per_s"].get<double>() / 128;
  EXPECT_NEAR(per_gpu, 830.01, 0.01);
  EXPECT_NEAR(s["mfu"].get<double>(), 449.06e9 * per_gpu / 989e12, 1e-4);
}

// Megatron's placement (the vision rows on stage 0, the 80 decoder layers split evenly) is
// the megatron-* baselines' split; the planner starts from it and does better.
TEST(VisionLayers, ThePlannerBeatsMegatronsPlacement) {
  const nlohmann::json j = test::run_json("plan '" + kExample + "' --max-evals 50 --json");
  const nlohmann::json& b = j["baselines"][0];
  EXPECT_EQ(b["name"], "megatron-no-recompute");
  EXPECT_EQ(b["partition"], nlohmann::json::array({53, 20, 20, 20}));
  EXPECT_LT(j["plan"]["iteration_time_ms"].get<double>(), b["iteration_time_ms"].get<double>());
}

// No exporter writes a vision encoder: an export would hand the user a text-only job.
TEST(VisionLayers, ExportRefusesAVisionModel) {
  for (const char* format : {"megatron", "mindformers"}) {
    const test::CliRun r =
        test::run_cli("export '" + kExample + "' --format " + std::string(format));
    EXPECT_EQ(r.code, 2) << format << "\n" << r.out;
    EXPECT_EQ(r.out, "");
    EXPECT_NE(r.err.find("export does not state a vision-language model's vision encoder and "
                         "projector (model.vision)"),
              std::string::npos)
        << format << "\n"
        << r.err;
  }
}

}  // namespace
}  // namespace bmpipe::vision_layers_test
