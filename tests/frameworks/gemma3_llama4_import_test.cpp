// Gemma 3 and Llama 4 from their HuggingFace config.json (configs/presets/hf, sources in
// configs/presets/README.md): Gemma 3's five local layers to one global and its own head
// width, Llama 4's chunked RoPE layers and global NoPE layers, the parameter counts against
// closed forms worked by hand and the model cards, and every malformed field named by its
// JSON Pointer.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "experiment/hf_config.hpp"
#include "support/hf_refusals.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace {

std::string preset(const char* file) {
  return std::string(BMPIPE_SOURCE_DIR) + "/configs/presets/hf/" + file;
}

int windowed_layers(const ModelShape& m) {
  int n = 0;
  for (int i = 0; i < m.num_layers; ++i) n += m.is_windowed_layer(i) ? 1 : 0;
  return n;
}

TEST(Gemma3Import, TwentySevenBShapeWindowsAndParameters) {
  // google/gemma-3-27b-it's config.json: Gemma3ForConditionalGeneration, the language model
  // in text_config, which gives neither vocab_size nor sliding_window_pattern
  // (Gemma3TextConfig's defaults, 262208 and 6).
  const ModelShape m = read_hf_config(preset("gemma-3-27b.json"));
  EXPECT_EQ(m.num_layers, 62);
  EXPECT_EQ(m.hidden_size, 5376);
  EXPECT_EQ(m.num_attention_heads, 32);
  EXPECT_EQ(m.num_kv_heads, 16);
  EXPECT_EQ(m.head_dim(), 128);  // not 5376 / 32 = 168
  EXPECT_EQ(m.ffn_hidden_size, 21504);
  EXPECT_EQ(m.vocab_size, 262208);
  EXPECT_TRUE(m.tied_embeddings);
  EXPECT_TRUE(m.qk_norm);
  EXPECT_TRUE(m.post_norms);
  EXPECT_FALSE(m.is_moe());
  // Local layers of 1024 tokens; layer i global when (i + 1) % 6 == 0: 5, 11, ..., 59, ten
  // of them, and 52 local (the last two, 60 and 61, local).
  EXPECT_EQ(m.sliding_window, 1024);
  EXPECT_EQ(m.full_every, 6);
  EXPECT_FALSE(m.chunked_window);
  for (int i : {0, 1, 2, 3, 4, 6, 60, 61}) EXPECT_TRUE(m.is_windowed_layer(i)) << i;
  for (int i : {5, 11, 17, 53, 59}) EXPECT_FALSE(m.is_windowed_layer(i)) << i;
  EXPECT_EQ(windowed_layers(m), 52);
  // Per layer: q and o 5376 x 4096 (32 heads of 128), k and v 5376 x 2048 = 66,060,288;
  // q_norm and k_norm 2 x 128; four norms 4 x 5376 (input, post-attention, pre- and
  // post-feed-forward); the MLP 3 x 5376 x 21504 = 346,816,512: 412,898,560. x 62 =
  // 25,599,710,720, + the final norm 5376 and the tied embedding 262208 x 5376 =
  // 1,409,630,208 once: 27,009,346,304.
  EXPECT_EQ(m.total_params(false), 27'009'346'304LL);
  EXPECT_EQ(m.total_params(false), m.total_params(true));
  // Gemma 3 Technical Report (arXiv:2503.19786, table 1), 27B: 25,600M non-embedding
  // parameters, 1,416M embedding parameters, 417M in the vision encoder (not read here).
  // Non-embedding: 25,599,716,096 here, within 0.01 %. The Hub's safetensors count of the
  // whole checkpoint, 27.4B, is this and the 417M vision encoder.
  const double non_embedding = static_cast<double>(m.total_params(false) - 262208LL * 5376);
  EXPECT_LE(std::abs(non_embedding / 25'600e6 - 1), 0.01) << non_embedding;
  EXPECT_LE(std::abs(static_cast<double>(m.total_params(false)) / (25'600e6 + 1'416e6) - 1), 0.01);
}

TEST(Gemma3Import, TextConfigAloneReadsTheSame) {
  // Gemma3ForCausalLM's own config (model_type gemma3_text) is the wrapper's text_config.
  const test::ScratchDir dir;
  nlohmann::json j = nlohmann::json::parse(test::slurp(preset("gemma-3-27b.json")))["text_config"];
  j["sliding_window_pattern"] = 6;
  // transformers 4.5x's re-saved configs list the layers' kinds.
  nlohmann::json types = nlohmann::json::array();
  for (int i = 0; i < 62; ++i)
    types.push_back((i + 1) % 6 != 0 ? "sliding_attention" : "full_attention");
  j["layer_types"] = types;
  const ModelShape m = read_hf_config(test::write_file(dir.file("text.json"), j.dump()));
  EXPECT_EQ(m.total_params(false), 27'009'346'304LL);
  EXPECT_EQ(windowed_layers(m), 52);
  // sliding_window null: no window, every layer global.
  j["sliding_window"] = nullptr;
  j.erase("layer_types");
  EXPECT_FALSE(read_hf_config(test::write_file(dir.file("none.json"), j.dump())).has_windows());
}

TEST(Gemma3Import, BadFieldsNameTheirPointer) {
  const nlohmann::json base = nlohmann::json::parse(test::slurp(preset("gemma-3-27b.json")));
  nlohmann::json types = nlohmann::json::array();
  for (int i = 0; i < 62; ++i) types.push_back(i == 3 ? "local_attention" : "sliding_attention");
  const std::vector<test::HfRefusal> cases = {
      {{{"text_config", nullptr}}, ": /text_config: a gemma3 config needs"},
      {{{"text_config", {{"model_type", "siglip_vision_model"}}}},
       "#/text_config/model_type: expected 'gemma3_text'"},
      {{{"text_config", {{"sliding_window_pattern", 0}}}},
       "#/text_config/sliding_window_pattern: HF config field 'sliding_window_pattern' must be "
       "a positive integer"},
      {{{"text_config", {{"sliding_window_pattern", 1}}}},
       "#/text_config/sliding_window_pattern: 1 makes every layer global"},
      {{{"text_config", {{"sliding_window", -4}}}},
       "#/text_config/sliding_window: HF config field 'sliding_window' must be a positive"},
      {{{"text_config", {{"layer_types", types}}}},
       "#/text_config/layer_types: layer 3 is \"local_attention\"; bmpipe windows the layers i "
       "with (i + 1) % 6 != 0 here (expected \"sliding_attention\")"},
      {{{"text_config", {{"layer_types", {"full_attention"}}}}},
       "#/text_config/layer_types: expected a list of 62 layer types"},
  };
  test::expect_hf_refusals(base, cases);
}

TEST(Llama4Import, ScoutChunksItsRopeLayersAndKeepsNopeLayersGlobal) {
  // Llama4TextConfig's defaults, which Scout's text_config leaves to it: no_rope_layers
  // int((i + 1) % 4 != 0), so layers 3, 7, ..., 47 are NoPE and global; the other 36 attend
  // within chunks of attention_chunk_size 8192.
  const ModelShape m = read_hf_config(preset("llama-4-scout-17b-16e.json"));
  EXPECT_EQ(m.sliding_window, 8192);
  EXPECT_TRUE(m.chunked_window);
  EXPECT_EQ(m.full_every, 4);
  EXPECT_EQ(windowed_layers(m), 36);
  for (int i : {0, 1, 2, 4, 46}) EXPECT_TRUE(m.is_windowed_layer(i)) << i;
  for (int i : {3, 7, 43, 47}) EXPECT_FALSE(m.is_windowed_layer(i)) << i;
  // The parameters are hf_moe_test.cpp's (the model card's 109B total, 17B active).
  EXPECT_EQ(m.total_params(false), 107'769'861'120LL);
  // Maverick: the same attention, MoE on the odd layers.
  const ModelShape mav = read_hf_config(preset("llama-4-maverick-17b-128e.json"));
  EXPECT_EQ(windowed_layers(mav), 36);
  EXPECT_EQ(mav.total_params(false), 400'711'848'960LL);
}

TEST(Llama4Import, ExplicitListsAndNullChunkAreRead) {
  const test::ScratchDir dir;
  nlohmann::json j = nlohmann::json::parse(test::slurp(preset("llama-4-scout-17b-16e.json")));
  nlohmann::json rope = nlohmann::json::array(), types = nlohmann::json::array();
  for (int i = 0; i < 48; ++i) {
    rope.push_back((i + 1) % 4 != 0 ? 1 : 0);
    types.push_back((i + 1) % 4 != 0 ? "chunked_attention" : "full_attention");
  }
  j["text_config"]["no_rope_layers"] = rope;
  j["text_config"]["layer_types"] = types;
  EXPECT_EQ(windowed_layers(read_hf_config(test::write_file(dir.file("l.json"), j.dump()))), 36);
  j["text_config"]["attention_chunk_size"] = nullptr;
  EXPECT_FALSE(read_hf_config(test::write_file(dir.file("n.json"), j.dump())).has_windows());
}

TEST(Llama4Import, BadAttentionFieldsNameTheirPointer) {
  const nlohmann::json scout =
      nlohmann::json::parse(test::slurp(preset("llama-4-scout-17b-16e.json")));
  nlohmann::json rope = nlohmann::json::array();
  for (int i = 0; i < 48; ++i) rope.push_back(i % 2);  // every other layer: not interval 4's
  const std::vector<test::HfRefusal> cases = {
      {{{"text_config", {{"attention_chunk_size", 0}}}},
       "#/text_config/attention_chunk_size: HF config field 'attention_chunk_size' must be a "
       "positive integer"},
      {{{"text_config", {{"no_rope_layer_interval", 1}}}},
       "#/text_config/no_rope_layer_interval: 1 makes every layer global and windows none; "
       "expected 2 or more (4 by default), or attention_chunk_size null"},
      {{{"text_config", {{"no_rope_layers", rope}}}},
       "#/text_config/no_rope_layers: layer 0 is 0; bmpipe chunks the RoPE layers i with "
       "(i + 1) % 4 != 0 (no_rope_layer_interval 4; expected 1)"},
      {{{"text_config", {{"no_rope_layers", {1, 1}}}}},
       "#/text_config/no_rope_layers: expected a list of 48 flags"},
      {{{"text_config", {{"layer_types", nlohmann::json::array({"sliding_attention"})}}}},
       "#/text_config/layer_types: expected a list of 48 layer types"},
  };
  test::expect_hf_refusals(scout, cases);
}

// Exports state the windows or refuse the job: Megatron-LM's --window-attn-skip-freq 6 is
// Gemma 3's pattern (is_layer_window_attention: layer_number % 6 != 0), but no Megatron flag
// chunks attention or norms the attention and MLP outputs, and MindFormers has no window key
// at all.
TEST(Llama4Import, ExportsStateTheWindowsOrRefuseTheJob) {
  const test::ScratchDir dir;
  const auto yaml = [&](const char* preset_file, const char* name, const char* extra = "") {
    return test::write_file(dir.file(name),
                            "cluster: {nodes: 2, devices_per_node: 8, device: {preset: h100-sxm}}\n"
                            "model: {hf_config: \"" +
                                preset(preset_file) + "\"" + extra +
                                "}\n"
                                "training: {pp: 4, tp: 4, sequence_parallel: true, seq_length: "
                                "8192, global_batch_size: 64, kernels: fused}\n");
  };
  const std::string gemma = yaml("gemma-3-27b.json", "gemma.yaml");
  const test::CliRun n = test::run_cli("export '" + gemma + "' --format megatron");
  EXPECT_EQ(n.code, 2);
  EXPECT_NE(n.err.find("Megatron-LM's flags cannot state the model: the layers norm their "
                       "attention and MLP outputs (model.post_norms"),
            std::string::npos)
      << n.err;
  const std::string plain = yaml("gemma-3-27b.json", "plain.yaml", ", post_norms: false");
  const test::CliRun g = test::run_cli("export '" + plain + "' --format megatron");
  ASSERT_EQ(g.code, 0) << g.err;
  EXPECT_NE(g.out.find("--window-size 1023,0\n--window-attn-skip-freq 6\n"), std::string::npos)
      << g.out;
  const test::CliRun m = test::run_cli("export '" + plain + "' --format mindformers");
  EXPECT_EQ(m.code, 2);
  EXPECT_NE(m.err.find("MindFormers' Llama-family keys have no sliding or chunked attention "
                       "window"),
            std::string::npos)
      << m.err;
  const std::string scout = yaml("llama-4-scout-17b-16e.json", "scout.yaml");
  const test::CliRun s = test::run_cli("export '" + scout + "' --format megatron");
  EXPECT_EQ(s.code, 2);
  EXPECT_NE(s.err.find(scout + ": --format: Megatron-LM's flags cannot state the model: the "
                               "attention is chunked"),
            std::string::npos)
      << s.err;
}

}  // namespace
}  // namespace bmpipe
