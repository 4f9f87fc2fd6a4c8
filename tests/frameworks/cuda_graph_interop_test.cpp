// CUDA graphs through the Megatron-LM importer and exporter (issue 37: training.cuda_graphs
// is Megatron's --cuda-graph-impl / --cuda-graph-modules). The rules are Megatron-LM's at
// d98e8a64 (megatron/training/arguments.py validate_args, megatron/core/transformer/
// cuda_graph_config.py), quoted in frameworks/megatron/import.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <tuple>

#include "frameworks/megatron/import.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace cuda_graph_interop_test {

// Line 1: the model; line 2: the graph flags under test.
const std::string kModel =
    "--num-layers 8 --hidden-size 1024 --ffn-hidden-size 4096 --num-attention-heads 16 "
    "--seq-length 2048 --vocab-size 32000 --swiglu --micro-batch-size 1 "
    "--global-batch-size 8 --bf16\n";

ImportedJob import(const std::string& graph_flags) {
  return read_megatron_args(kModel + graph_flags + "\n", "graphs.sh");
}

std::string graphs_of(const std::string& graph_flags) {
  return import(graph_flags).cuda_graphs.value_or("<none>");
}

/// The refusal of `graph_flags`: "graphs.sh:2: FLAG: ..." or "<accepted>".
std::string refusal(const std::string& graph_flags) {
  try {
    import(graph_flags);
  } catch (const ImportError& e) {
    return e.what();
  }
  return "<accepted>";
}

TEST(CudaGraphImport, ModulesAndImplementationsAsMegatronReadsThem) {
  // Megatron-Bridge's perf recipes: TransformerEngine graphs of three modules.
  EXPECT_EQ(graphs_of("--cuda-graph-impl transformer_engine --cuda-graph-modules attn "
                      "moe_router moe_preprocess"),
            "attn,moe_router,moe_preprocess");
  // The deprecated spelling of the modules reads the same.
  EXPECT_EQ(graphs_of("--cuda-graph-impl local --cuda-graph-scope attn"), "attn");
  // No modules: the whole layer; "full" is its deprecated name; --enable-cuda-graph and
  // --external-cuda-graph are the two implementations' deprecated switches.
  EXPECT_EQ(graphs_of("--cuda-graph-impl local"), "attn,mlp,moe");
  EXPECT_EQ(graphs_of("--cuda-graph-impl transformer_engine --cuda-graph-scope full"),
            "attn,mlp,moe");
  EXPECT_EQ(graphs_of("--enable-cuda-graph"), "attn,mlp,moe");
  EXPECT_EQ(graphs_of("--external-cuda-graph --cuda-graph-modules mlp"), "mlp");
  // The whole iteration, as the impl or as the deprecated module.
  EXPECT_EQ(graphs_of("--cuda-graph-impl full_iteration"), "full_iteration");
  EXPECT_EQ(graphs_of("--cuda-graph-impl local --cuda-graph-scope full_iteration"),
            "full_iteration");
  // Without an implementation the modules capture nothing (Megatron warns, no graph).
  EXPECT_EQ(graphs_of("--cuda-graph-modules attn"), "<none>");
  EXPECT_EQ(graphs_of("--cuda-graph-impl none --cuda-graph-modules attn"), "<none>");
  // A module twice is captured once; mamba is a hybrid model's Mamba blocks (issue 40).
  EXPECT_EQ(graphs_of("--cuda-graph-impl local --cuda-graph-modules attn mamba attn"),
            "attn,mamba");
  // The value says where it came from: the modules' flag, else the implementation's.
  const ImportedJob job = import("--cuda-graph-impl local --cuda-graph-modules attn");
  EXPECT_EQ(job.origin.at("training.cuda_graphs").key, "--cuda-graph-modules");
  EXPECT_EQ(job.origin.at("training.cuda_graphs").line, 2);
  EXPECT_EQ(import("--enable-cuda-graph").origin.at("training.cuda_graphs").key,
            "--enable-cuda-graph");
}

TEST(CudaGraphImport, WhatMegatronRefusesIsRefusedOnItsLine) {
  const auto refused = [](const std::string& flags, const std::string& head,
                          const std::string& says) {
    const std::string e = refusal(flags);
    EXPECT_EQ(e.rfind(head, 0), 0u) << flags << "\n" << e;
    EXPECT_NE(e.find(says), std::string::npos) << flags << "\n" << e;
  };
  refused("--enable-cuda-graph --cuda-graph-impl local", "graphs.sh:2: --enable-cuda-graph:",
          "Do not use --enable-cuda-graph or --external-cuda-graph with --cuda-graph-impl.");
  refused("--enable-cuda-graph --external-cuda-graph",
          "graphs.sh:2: --external-cuda-graph:", "cannot be enabled at the same time");
  refused("--cuda-graph-impl local --cuda-graph-scope attn --cuda-graph-modules mlp",
          "graphs.sh:2: --cuda-graph-scope:",
          "--cuda-graph-scope and --cuda-graph-modules cannot be used together.");
  refused("--cuda-graph-impl local --cuda-graph-modules attn full",
          "graphs.sh:2: "
          "--cuda-graph-modules:",
          "full scope cannot be used with other scopes.");
  refused("--cuda-graph-impl full_iteration --cuda-graph-modules attn",
          "graphs.sh:2: --cuda-graph-modules:", "must be empty");
  refused(
      "--cuda-graph-impl transformer_engine --cuda-graph-scope full_iteration",
      "graphs.sh:2: --cuda-graph-scope:", "not given with --cuda-graph-impl transformer_engine");
  refused("--cuda-graph-impl local --cuda-graph-modules attn decoder",
          "graphs.sh:2: --cuda-graph-modules:", "unknown module 'decoder'");
  refused("--cuda-graph-impl everything", "graphs.sh:2: --cuda-graph-impl:",
          "expected none, local, transformer_engine, full_iteration");
}

// Export writes the graphs back as the flags import reads: a config with training.cuda_graphs
// exports --cuda-graph-impl and --cuda-graph-modules, lists the deprecated spellings for
// removal, and imports back to the same scopes.
TEST(CudaGraphExport, RoundTripsThroughMegatronFlags) {
  const test::ScratchDir dir;
  for (const auto& [graphs, impl, modules] :
       {std::tuple<std::string, std::string, std::string>{"attn, moe_router",
                                                          "--cuda-graph-impl transformer_engine\n",
                                                          "--cuda-graph-modules attn moe_router\n"},
        std::tuple<std::string, std::string, std::string>{
            "full_iteration", "--cuda-graph-impl full_iteration\n", ""}}) {
    const std::string config = test::write_file(
        dir.file("g.yaml"),
        "cluster:\n  nodes: 1\n  device:\n    preset: h100-sxm\nmodel:\n  preset: llama3-8b\n"
        "training:\n  pp: 2\n  seq_length: 4096\n  micro_batch_size: 1\n"
        "  global_batch_size: 16\n  kernels: fused\n  cuda_graphs: " +
            graphs + "\n");
    const test::CliRun out = test::run_cli("export '" + config + "' --format megatron");
    ASSERT_EQ(out.code, 0) << out.err;
    EXPECT_NE(out.out.find(impl), std::string::npos) << out.out;
    if (!modules.empty()) {
      EXPECT_NE(out.out.find(modules), std::string::npos) << out.out;
    }
    EXPECT_NE(out.out.find("#   --enable-cuda-graph\n"), std::string::npos) << out.out;
    EXPECT_NE(out.out.find("#   --cuda-graph-scope\n"), std::string::npos) << out.out;
    // The exported flags, read back, give the config's scopes (spaces aside).
    std::string flags;
    for (const std::string& line : {impl, modules}) flags += line;
    std::string expected = graphs;
    expected.erase(std::remove(expected.begin(), expected.end(), ' '), expected.end());
    EXPECT_EQ(read_megatron_args(kModel + flags, "exported.sh").cuda_graphs.value_or("<none>"),
              expected);
  }
}

TEST(CudaGraphExport, NoGraphsNoGraphFlags) {
  const test::ScratchDir dir;
  const std::string config = test::write_file(
      dir.file("g.yaml"),
      "cluster:\n  nodes: 1\n  device:\n    preset: h100-sxm\nmodel:\n  preset: llama3-8b\n"
      "training:\n  pp: 2\n  seq_length: 4096\n  micro_batch_size: 1\n"
      "  global_batch_size: 16\n  kernels: fused\n  cuda_graphs: none\n");
  const test::CliRun out = test::run_cli("export '" + config + "' --format megatron");
  ASSERT_EQ(out.code, 0) << out.err;
  EXPECT_EQ(out.out.find("cuda-graph"), std::string::npos) << out.out;
}

}  // namespace cuda_graph_interop_test
}  // namespace bmpipe
