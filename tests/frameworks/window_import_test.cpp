// Megatron-LM's sliding-window flags through `bmpipe import megatron` (issue 40):
// --window-size L,R is model.sliding_window L + 1 (TransformerEngine attends keys i - L .. i;
// Megatron-Bridge's mcore_to_hf_window_size adds the 1), --window-attn-skip-freq 2 or a list
// of every k-th layer is model.sliding_every, an int N > 2 model.full_every, and what neither
// can say exits 2 naming FILE:LINE:flag.
#include <gtest/gtest.h>

#include <string>

#include "experiment/config.hpp"
#include "support/megatron_script.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace {

using test::run_cli;

// The script: test::kSmallMegatronScript (support/megatron_script.hpp), the case's
// flags on line 4.

Config imported(const test::ScratchDir& dir, const std::string& name, const std::string& flags) {
  const std::string job = dir.file(name + ".yaml");
  const test::CliRun r = test::import_small_megatron(dir, name, flags, job);
  EXPECT_EQ(r.code, 0) << flags << r.err;
  return load_config(job);
}

TEST(MegatronWindowImport, WindowSizeAndSkipFrequencyAreTheModelsWindows) {
  test::ScratchDir dir;
  // gpt-oss as Megatron-Bridge writes it (gpt_oss_bridge.py): (127, 0), every other layer.
  const ModelShape oss =
      *imported(dir, "oss", "  --window-size 127,0 --window-attn-skip-freq 2\n").model.shape;
  EXPECT_EQ(oss.sliding_window, 128);
  EXPECT_EQ(oss.sliding_every, 2);
  EXPECT_TRUE(oss.is_windowed_layer(0));
  EXPECT_FALSE(oss.is_windowed_layer(1));
  // No skip flag: every layer (is_layer_window_attention); the tuple's parenthesized form.
  const ModelShape all = *imported(dir, "all", "  --window-size \"(511,0)\"\n").model.shape;
  EXPECT_EQ(all.sliding_window, 512);
  EXPECT_EQ(all.sliding_every, 1);
  // A list of every second layer from layer 0, and an infinite left window: none.
  EXPECT_EQ(imported(dir, "list", "  --window-size 127,0 --window-attn-skip-freq \"[1,0]*2\"\n")
                .model.shape->sliding_every,
            2);
  EXPECT_EQ(imported(dir, "none", "  --window-size -1,0\n").model.shape->sliding_window, 0);
  // An int N > 2 windows N - 1 layers of N (layer_number % N != 0): model.full_every N,
  // Gemma 3's five local layers to one global at N = 6. Here N = 3 over 4 layers: layers
  // 0, 1 and 3 windowed, layer 2 (layer_number 3) global.
  const ModelShape three =
      *imported(dir, "three", "  --window-size 127,0 --window-attn-skip-freq 3\n").model.shape;
  EXPECT_EQ(three.full_every, 3);
  EXPECT_EQ(three.sliding_every, 0);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(three.is_windowed_layer(i), i != 2) << i;
  // Skip frequency 1: layer_number % 1 is 0 for every layer, so no layer is windowed.
  EXPECT_EQ(imported(dir, "one", "  --window-size 127,0 --window-attn-skip-freq 1\n")
                .model.shape->sliding_window,
            0);
}

TEST(MegatronWindowImport, BadFlagsNameFileLineAndFlag) {
  test::ScratchDir dir;
  struct Case {
    std::string flags;  ///< line 4
    std::string expect;
  };
  const Case cases[] = {
      {"  --window-size 128\n", ":4: --window-size: expected two integers LEFT,RIGHT"},
      {"  --window-size -5,0\n", ":4: --window-size: the left window must be -1 (none)"},
      // Layers 1 and 3 windowed: not every k-th from layer 0, and layer 0 is global, which
      // full_every's pattern (all but every k-th counted from 1) never makes it.
      {"  --window-size 127,0 --window-attn-skip-freq \"[0,1]*2\"\n",
       ":4: --window-attn-skip-freq: '[0,1]*2' is neither every k-th layer from layer 0"},
      {"  --window-size 127,0 --window-attn-skip-freq \"[1,1,0,0]\"\n",
       ":4: --window-attn-skip-freq: '[1,1,0,0]' is neither every k-th layer from layer 0"},
      {"  --window-size 127,0 --window-attn-skip-freq \"[1,0]*3\"\n",
       ":4: --window-attn-skip-freq: the pattern has 6 entries, but --num-layers is 4"},
  };
  int n = 0;
  for (const Case& c : cases) {
    const std::string name = std::to_string(n++);
    const std::string path = dir.file(name + ".txt");
    const test::CliRun r = test::import_small_megatron(dir, name, c.flags, dir.file("out.yaml"));
    EXPECT_EQ(r.code, 2) << c.flags << r.out;
    EXPECT_NE(r.err.find(path + c.expect), std::string::npos) << c.flags << r.err;
  }
}

// Export writes the windows as the flags import reads back: every 2nd layer as the int 2,
// every 3rd as the list form (the int 3 would window two layers of three), here over 4
// layers as the script's --num-layers says.
TEST(MegatronWindowImport, ExportedWindowsImportBack) {
  test::ScratchDir dir;
  for (const int every : {1, 2, 3}) {
    const std::string yaml = test::write_file(
        dir.file("m" + std::to_string(every) + ".yaml"),
        "cluster: {nodes: 1, devices_per_node: 8, device: {preset: h100-sxm}}\n"
        "model: {preset: llama3-8b, num_layers: 4, sliding_window: 1024, sliding_every: " +
            std::to_string(every) +
            "}\n"
            "training: {pp: 2, seq_length: 4096, global_batch_size: 16, kernels: fused}\n");
    const test::CliRun x = run_cli("export '" + yaml + "' --format megatron");
    ASSERT_EQ(x.code, 0) << x.err;
    EXPECT_NE(x.out.find("--window-size 1023,0\n"), std::string::npos) << x.out;
    const std::string flags = x.out.substr(x.out.find("--window-size"));
    const std::string skip = flags.substr(
        flags.find('\n') + 1, flags.find('\n', flags.find('\n') + 1) - flags.find('\n') - 1);
    const ModelShape m =
        *imported(dir, "back" + std::to_string(every),
                  "  --window-size 1023,0 " +
                      (skip.rfind("--window-attn", 0) == 0 ? skip : std::string()) + "\n")
             .model.shape;
    EXPECT_EQ(m.sliding_window, 1024) << x.out;
    EXPECT_EQ(m.sliding_every, every) << x.out;
  }
  // full_every is Megatron's int form itself: --window-attn-skip-freq 3.
  const std::string yaml = test::write_file(
      dir.file("full.yaml"),
      "cluster: {nodes: 1, devices_per_node: 8, device: {preset: h100-sxm}}\n"
      "model: {preset: llama3-8b, num_layers: 4, sliding_window: 1024, full_every: 3}\n"
      "training: {pp: 2, seq_length: 4096, global_batch_size: 16, kernels: fused}\n");
  const test::CliRun x = run_cli("export '" + yaml + "' --format megatron");
  ASSERT_EQ(x.code, 0) << x.err;
  EXPECT_NE(x.out.find("--window-size 1023,0\n--window-attn-skip-freq 3\n"), std::string::npos)
      << x.out;
}

}  // namespace
}  // namespace bmpipe
