// MindFormers' fine-grained activation swap (swap_config) through the MindFormers importer and
// exporter (issue 43, item 6). MindFormers' semantics, at mindspore-lab/mindformers fd4deebc1
// (mindformers/modules/transformer/transformer.py TransformerSwapConfig, mindformers/models/
// utils.py LayerSetting): op_swap swaps the named cells or operators in the listed decoder
// layers; swap True with neither layer_swap nor op_swap swaps r'.*\.flash_attention' in every
// layer; with swap True, recompute and select_recompute are decoder-layer indices. The
// MindSpore docs' cases (mindspore-ai/docs 156e3e403eb9, fine_grained_activations_swap.md) are
// the YAML shapes below.
#include <gtest/gtest.h>

#include <string>

#include "frameworks/mindformers/import.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace mindformers_swap_test {

using R = Recompute;
using test::run_cli;
using test::ScratchDir;

// Llama-2-7B's layer on 16 layers, 4 stages of 4, 16 micro-batches. Line numbers matter.
const std::string kHead = R"(runner_config:
  batch_size: 1
parallel:
  pipeline_config:
    pipeline_interleave: False
    pipeline_scheduler: '1f1b'
parallel_config:
  data_parallel: 1
  model_parallel: 1
  pipeline_stage: 4
  micro_batch_num: 16
)";
const std::string kModel = R"(model:
  model_config:
    type: LlamaConfig
    seq_length: 4096
    hidden_size: 4096
    num_layers: 16
    num_heads: 32
    intermediate_size: 11008
    vocab_size: 32000
    compute_dtype: "bfloat16"
    use_flash_attention: True
)";

// Lines 12-20: recompute_config and swap_config (op_swap's entries from line 18).
const std::string kSwap = R"(recompute_config:
  recompute: [0]
  select_recompute: False
swap_config:
  swap: True
  op_swap:
    - op_name: 'attention'
      backward_prefetch: 20
      layers: [1, 2, 3, 8, 9]
)";

ImportedJob import(const std::string& swap) {
  return read_mindformers_yaml(kHead + swap + kModel, "mf.yaml");
}

std::string refusal(const std::string& swap) {
  try {
    import(swap);
  } catch (const ImportError& e) {
    return e.what();
  }
  return "<accepted>";
}

std::string with(std::string text, const std::string& from, const std::string& to) {
  const std::size_t at = text.find(from);
  if (at == std::string::npos) throw std::invalid_argument("no '" + from + "'");
  return text.replace(at, from.size(), to);
}

// op_swap of the attention cell in layers 1, 2, 3, 8 and 9: those layers offload its saved
// tensors (the qkv projection's input, q/k/v, the core's output), layer 0 recomputes (the
// layer index list of swap mode), the rest keep theirs.
TEST(MindFormersSwapImport, OpSwapLayersAreOffloadLayers) {
  const ImportedJob job = import(kSwap);
  std::vector<R> want(16, R::none);
  want[0] = R::full;
  for (int l : {1, 2, 3, 8, 9}) want[static_cast<std::size_t>(l)] = R::offload;
  EXPECT_EQ(job.recompute, want);
  EXPECT_EQ(job.offload_modules.value_or("<none>"), "qkv_linear,core_attn,attn_proj");
  EXPECT_EQ(job.origin.at("training.offload_modules").key, "swap_config.op_swap");
  EXPECT_EQ(job.origin.at("training.offload_modules").line, 18);  // its first entry
  // Flash attention alone: its inputs and output.
  const ImportedJob fa = import(with(kSwap, "'attention'", R"('.*\.flash_attention')"));
  EXPECT_EQ(fa.offload_modules.value_or("<none>"), "core_attn,attn_proj");
}

// A swapped layer that also recomputes selectively (select_recompute, a layer index under
// swap True) is a selective_offload layer: selective's activations, the swapped modules'
// inputs on the host. The other swapped layers stay offload layers.
TEST(MindFormersSwapImport, ASwappedSelectiveLayerIsSelectiveOffload) {
  const ImportedJob job =
      import(with(kSwap, "select_recompute: False", "select_recompute: [2, 5]"));
  std::vector<R> want(16, R::none);
  want[0] = R::full;
  for (int l : {1, 3, 8, 9}) want[static_cast<std::size_t>(l)] = R::offload;
  want[2] = R::selective_offload;  // swapped and selective
  want[5] = R::selective;          // selective, not swapped
  EXPECT_EQ(job.recompute, want);
  EXPECT_EQ(job.offload_modules.value_or("<none>"), "qkv_linear,core_attn,attn_proj");
}

// swap True with nothing listed is MindFormers' default strategy: flash attention swapped in
// every layer. With layer 0 recomputed in full (recompute wins there), every other layer
// swaps: bmpipe's job-wide form (training.offload_modules, no offload layer).
TEST(MindFormersSwapImport, SwapAloneSwapsFlashAttentionEverywhere) {
  const ImportedJob job = import(
      "recompute_config:\n  recompute: [0]\nswap_config:\n  swap: True\n  default_prefetch: 10\n");
  std::vector<R> want(16, R::none);
  want[0] = R::full;
  EXPECT_EQ(job.recompute, want);
  EXPECT_EQ(job.offload_modules.value_or("<none>"), "core_attn,attn_proj");
  // swap False: nothing is swapped, whatever is listed (MindFormers disables all four keys).
  const ImportedJob off =
      import(with(with(kSwap, "swap: True", "swap: False"), "recompute: [0]", "recompute: False"));
  EXPECT_FALSE(off.offload_modules.has_value());
  // Every swapped layer recomputed in full: MindFormers recomputes them, nothing offloads.
  const ImportedJob full = import(with(kSwap, "recompute: [0]", "recompute: True"));
  EXPECT_FALSE(full.offload_modules.has_value());
  EXPECT_EQ(full.recompute, std::vector<R>(16, R::full));
}

// Each bad input exits 2 with FILE:LINE: key and what is expected.
TEST(MindFormersSwapImport, BadInputNamesFileLineAndKey) {
  struct Case {
    std::string from, to, starts, says;
  };
  const Case cases[] = {
      {"'attention'", "'feed_forward'", "mf.yaml:18: swap_config.op_swap[0].op_name:",
       "expected attention (qkv_linear,core_attn,attn_proj) or"},
      {"[1, 2, 3, 8, 9]", "[1, 16]", "mf.yaml:20: swap_config.op_swap[0].layers[1]:",
       "layer 16 is out of range: the model has 16 decoder layers (0 to 15)"},
      {"backward_prefetch: 20", "backward_prefetch: 0",
       "mf.yaml:19: swap_config.op_swap[0].backward_prefetch:", "expected a positive integer"},
      {"backward_prefetch: 20", "backward_prefetch: Auto",
       "mf.yaml:19: swap_config.op_swap[0].backward_prefetch:", "expected a positive integer"},
      {"recompute: [0]", "recompute: [16]",
       "mf.yaml:13: recompute_config.recompute[0]:", "out of range"},
      {"  op_swap:", "  layer_swap:", "mf.yaml:18: swap_config.layer_swap:",
       "swaps whole layers, the MLP's activations too"},
      {"swap: True", "swap: 1", "mf.yaml:16: swap_config.swap:", "expected True or False"},
  };
  for (const Case& c : cases) {
    const std::string e = refusal(with(kSwap, c.from, c.to));
    EXPECT_EQ(e.rfind(c.starts, 0), 0u) << c.to << ": " << e;
    EXPECT_NE(e.find(c.says), std::string::npos) << c.to << ": " << e;
  }
  // Attention in one layer and flash attention in another: one module set per job.
  const std::string two = refusal(kSwap +
                                  "    - op_name: '.*\\.flash_attention'\n"
                                  "      backward_prefetch: 1\n      layers: [12]\n");
  EXPECT_EQ(two.rfind("mf.yaml:18: swap_config.op_swap:", 0), 0u) << two;
  EXPECT_NE(two.find("one module set"), std::string::npos) << two;
  // And through the CLI: exit 2, the same message.
  ScratchDir dir;
  const std::string bad =
      test::write_file(dir.file("bad.yaml"), kHead + with(kSwap, "'attention'", "'mlp'") + kModel);
  const auto r = run_cli("import mindformers " + bad + " --preset gb200 --devices 4");
  EXPECT_EQ(r.code, 2) << r.all();
  EXPECT_NE(r.err.find("bad.yaml:18: swap_config.op_swap[0].op_name: 'mlp'"), std::string::npos)
      << r.err;
}

// Import -> simulate -> export -> import -> simulate: the same time, the swap written.
TEST(MindFormersSwapInterop, ExportImportRoundTrip) {
  ScratchDir dir;
  for (const std::string& swap : {kSwap, with(kSwap, "'attention'", R"('.*\.flash_attention')"),
                                  std::string("swap_config:\n  swap: True\n")}) {
    SCOPED_TRACE(swap);
    const std::string first = dir.file("first.yaml"), second = dir.file("second.yaml");
    const std::string source = test::write_file(dir.file("mf.yaml"), kHead + swap + kModel);
    const std::string where = " --preset gb200 --devices 4 --out ";
    auto imported = run_cli("import mindformers " + source + where + first);
    ASSERT_EQ(imported.code, 0) << imported.all();
    const auto exported = run_cli("export " + first + " --format mindformers");
    ASSERT_EQ(exported.code, 0) << exported.all();
    EXPECT_NE(exported.out.find("# The config (1f1b): "), std::string::npos);
    EXPECT_NE(exported.out.find(". Exact.\n"), std::string::npos) << exported.out;
    EXPECT_NE(exported.out.find("swap_config:\n  swap: True\n  op_swap:\n"), std::string::npos)
        << exported.out;
    // The fragment made whole: the model's shape under its model_config.
    std::string again = exported.out;
    const std::string mc = "  model_config:\n";
    again.insert(again.find(mc) + mc.size(), kModel.substr(kModel.find(mc) + mc.size()));
    const std::string back = test::write_file(dir.file("back.yaml"), again);
    imported = run_cli("import mindformers " + back + where + second);
    ASSERT_EQ(imported.code, 0) << imported.all() << again;
    const nlohmann::json a = test::run_json("simulate " + first + " --json");
    const nlohmann::json b = test::run_json("simulate " + second + " --json");
    EXPECT_EQ(a["iteration_time_ms"], b["iteration_time_ms"]);
    EXPECT_GT(b["devices"][0]["peak_host_bytes"].get<std::int64_t>(), 0);
  }
}

// What swap_config cannot state is refused, not dropped: another module set, another lead.
TEST(MindFormersSwapInterop, WhatSwapConfigCannotStateIsRefused) {
  ScratchDir dir;
  const std::string source = test::write_file(dir.file("mf.yaml"), kHead + kSwap + kModel);
  const std::string first = dir.file("first.yaml");
  ASSERT_EQ(
      run_cli("import mindformers " + source + " --preset gb200 --devices 4 --out " + first).code,
      0);
  auto r = run_cli("export " + first +
                   " --format mindformers --set training.offload_modules=qkv_linear,core_attn");
  EXPECT_EQ(r.code, 2) << r.all();
  EXPECT_NE(r.err.find("swap_config cannot state training.offload_modules (qkv_linear,core_attn)"),
            std::string::npos)
      << r.err;
  r = run_cli("export " + first + " --format mindformers --set training.offload_lead=0");
  EXPECT_EQ(r.code, 2) << r.all();
  EXPECT_NE(r.err.find("cannot state training.offload_lead 0"), std::string::npos) << r.err;
}

}  // namespace mindformers_swap_test
}  // namespace bmpipe
