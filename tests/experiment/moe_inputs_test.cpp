// Bad mixture-of-experts inputs, each an exit 2 naming FILE:LINE:key: ep not dividing the
// experts, top-k above the experts, multi-latent-attention ranks that do not make a layer,
// and ep (x etp) beyond the devices of a pipeline stage.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "support/support.hpp"

namespace bmpipe {
namespace {

const std::string kHfPresets = std::string(BMPIPE_SOURCE_DIR) + "/configs/presets/hf/";

/// 16 H100 (2 nodes of 8), pp 2: a stage has tp x dp = 8 devices. The case's `training`
/// lines start at line 11.
std::string yaml(const std::string& hf, const std::string& training) {
  return "cluster:\n"                      // 1
         "  nodes: 2\n"                    // 2
         "  devices_per_node: 8\n"         // 3
         "  device: {preset: h100-sxm}\n"  // 4
         "model:\n"                        // 5
         "  hf_config: \"" +
         hf + "\"\n" +            // 6
         "training:\n"            // 7
         "  pp: 2\n"              // 8
         "  seq_length: 4096\n"   // 9
         "  microbatches: 4\n" +  // 10
         training;
}

/// `base` (an HF config.json under configs/presets/hf/) with `key` set to `value`, written
/// to `dir`.
std::string edited_hf(const test::ScratchDir& dir, const std::string& base, const std::string& key,
                      int value) {
  nlohmann::json j = nlohmann::json::parse(test::slurp(kHfPresets + base));
  j[key] = value;
  return test::write_file(dir.file(key + ".json"), j.dump(2));
}

void expect_exit2(const test::ScratchDir& dir, const std::string& name, const std::string& text,
                  const std::string& expect) {
  const std::string path = test::write_file(dir.file(name + ".yaml"), text);
  const test::CliRun r = test::run_cli("cost " + path);
  EXPECT_EQ(r.code, 2) << name << "\n" << r.all();
  EXPECT_NE(r.err.find(path + expect), std::string::npos) << name << "\n" << r.err;
}

TEST(MoeInputs, EpMustDivideTheExperts) {
  const test::ScratchDir dir;
  // Qwen3-30B-A3B: 128 experts.
  expect_exit2(dir, "ep3", yaml(kHfPresets + "qwen3-30b-a3b.json", "  ep: 3\n"),
               ":11: training.ep: ep = 3 does not divide the 128 experts");
}

TEST(MoeInputs, TopKAboveTheExpertsNamesTheHfKey) {
  const test::ScratchDir dir;
  const std::string hf = edited_hf(dir, "qwen3-30b-a3b.json", "num_experts_per_tok", 129);
  expect_exit2(dir, "topk", yaml(hf, ""),
               ":6: model.hf_config: " + hf +
                   ": /num_experts_per_tok: 129 experts per token, but the model has 128");
}

TEST(MoeInputs, InconsistentLatentAttentionRanksNameTheHfKey) {
  const test::ScratchDir dir;
  // A compressed kv (kv_lora_rank 512) without the rotary part every head needs.
  const std::string rope = edited_hf(dir, "deepseek-v3.json", "qk_rope_head_dim", 0);
  expect_exit2(dir, "rope", yaml(rope, ""),
               ":6: model.hf_config: " + rope + ": /qk_rope_head_dim:");
  // A latent wider than the hidden state it compresses (7168).
  const std::string wide = edited_hf(dir, "deepseek-v3.json", "kv_lora_rank", 8000);
  expect_exit2(
      dir, "wide", yaml(wide, ""),
      ":6: model.hf_config: " + wide + ": /kv_lora_rank: 8000 is wider than hidden_size = 7168");
  const std::string v = edited_hf(dir, "deepseek-v3.json", "v_head_dim", 0);
  expect_exit2(dir, "v", yaml(v, ""), ":6: model.hf_config: " + v + ": /v_head_dim:");
}

TEST(MoeInputs, EpBeyondTheStagesDevices) {
  const test::ScratchDir dir;
  const std::string qwen = kHfPresets + "qwen3-30b-a3b.json";
  // ep 16 over a stage of tp 1 x dp 8.
  expect_exit2(dir, "ep16", yaml(qwen, "  ep: 16\n"),
               ":11: training.ep: etp x ep = 16 is more than the tp x dp = 8 devices");
  // etp 2 x ep 8 over tp 2 x dp 4 (with sequence parallelism, which MoE at tp 2 needs).
  expect_exit2(dir, "etp2", yaml(qwen, "  tp: 2\n  etp: 2\n  ep: 8\n  sequence_parallel: true\n"),
               ":13: training.ep: etp x ep = 16 is more than the tp x dp = 8 devices");
  // etp alone: the key named is etp's.
  expect_exit2(dir, "etp16", yaml(qwen, "  etp: 16\n"),
               ":11: training.etp: etp x ep = 16 is more than the tp x dp = 8 devices");
}

}  // namespace
}  // namespace bmpipe
