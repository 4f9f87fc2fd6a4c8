// model.dsa, DeepSeek sparse attention over model.mla: an hf_config of DeepSeek-V3.2 gives it
// and its keys override the file's; a bad value, or DSA on a model without MLA, exits 2
// naming FILE:LINE:key.
#include <gtest/gtest.h>

#include "experiment/config.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace dsa_config_test {

using test::CliRun;
using test::run_cli;
using test::ScratchDir;
using test::write_file;

const std::string kPresets = std::string(BMPIPE_SOURCE_DIR) + "/configs/presets/hf/";

// One node of 8 H800; the model's first key on line 6, its `dsa` map on line 7.
std::string yaml(const std::string& model, const std::string& dsa) {
  return "cluster:\n"                  // 1
         "  nodes: 1\n"                // 2
         "  devices_per_node: 8\n"     // 3
         "  device: {preset: h800}\n"  // 4
         "model:\n"                    // 5
         "  " +
         model + "\n" +             // 6 (the model's first key)
         "  dsa: " + dsa + "\n" +   // 7
         "training:\n"              // 8
         "  pp: 8\n"                // 9
         "  seq_length: 4096\n"     // 10
         "  micro_batch_size: 1\n"  // 11
         "  microbatches: 8\n";     // 12
}

const std::string kV32 = "hf_config: " + kPresets + "deepseek-v3.2-exp.json";

void expect_refused(const ScratchDir& dir, const std::string& text, const std::string& where,
                    const std::string& says) {
  const CliRun r = run_cli("simulate " + write_file(dir.file("job.yaml"), text));
  EXPECT_EQ(r.code, 2) << r.all();
  EXPECT_NE(r.err.find(dir.file("job.yaml") + ":" + where), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
}

TEST(DsaConfig, KeysOverrideTheHfConfig) {
  ScratchDir dir;
  const Config c = load_config(
      write_file(dir.file("job.yaml"), yaml(kV32, "{indexer_topk: 1024, indexer_loss: false}")));
  const ModelShape& m = *c.model.shape;
  EXPECT_EQ(m.dsa.index_topk, 1024);
  EXPECT_FALSE(m.dsa.indexer_loss);
  EXPECT_EQ(m.dsa.index_heads, 64);  // the file's
  EXPECT_EQ(m.dsa.index_head_dim, 128);
}

TEST(DsaConfig, BadValuesExitTwoNamingTheKey) {
  ScratchDir dir;
  expect_refused(dir, yaml(kV32, "{indexer_topk: 0}"), "7: model.dsa.indexer_topk", "at least 1");
  expect_refused(dir, yaml(kV32, "{indexer_n_heads: -4}"), "7: model.dsa.indexer_n_heads",
                 "at least 1");
  expect_refused(dir, yaml(kV32, "{indexer_head_dim: 32}"), "7: model.dsa.indexer_head_dim",
                 "narrower than model.mla's qk_pos_emb_head_dim = 64");
  expect_refused(dir, yaml(kV32, "{index_topk: 2048}"), "7: model.dsa.index_topk", "");
  // Without an hf_config that has DSA, the three sizes are required.
  expect_refused(dir,
                 yaml("hf_config: " + kPresets + "deepseek-v3.json",
                      "{indexer_n_heads: 64, indexer_head_dim: 128}"),
                 "7: model.dsa.indexer_topk", "missing required key");
}

TEST(DsaConfig, NoMlaNoDsa) {
  ScratchDir dir;
  expect_refused(
      dir,
      yaml("preset: llama2-7b", "{indexer_n_heads: 4, indexer_head_dim: 64, indexer_topk: 2048}"),
      "7: model.dsa", "built on multi-latent attention");
}

}  // namespace dsa_config_test
}  // namespace bmpipe
