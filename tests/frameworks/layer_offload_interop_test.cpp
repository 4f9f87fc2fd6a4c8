// Megatron-LM's --cpu-offloading-num-layers through the importer and the exporter: it is
// training.offload_layers (N > 0 turns cpu_offloading on, megatron/training/arguments.py at
// d98e8a64), Megatron-Core's refusals land on the flag's line, and an export states it.
#include <gtest/gtest.h>

#include <string>

#include "frameworks/megatron/import.hpp"
#include "support/megatron_round_trip.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace layer_offload_interop_test {

using test::run_cli;
using test::ScratchDir;
using test::write_file;

// Line 1: the model (8 layers, pp 1); line 2: the flags under test.
const std::string kModel =
    "--num-layers 8 --hidden-size 1024 --ffn-hidden-size 4096 --num-attention-heads 16 "
    "--seq-length 2048 --vocab-size 32000 --swiglu --micro-batch-size 1 "
    "--global-batch-size 16 --bf16\n";

TEST(LayerOffloadImport, TheFlagIsTheLayerCount) {
  const ImportedJob job =
      read_megatron_args(kModel + "--cpu-offloading-num-layers 3\n", "offload.sh");
  EXPECT_EQ(job.offload_layers.value_or(-1), 3);
  EXPECT_EQ(job.origin.at("training.offload_layers").key, "--cpu-offloading-num-layers");
  EXPECT_EQ(job.origin.at("training.offload_layers").line, 2);
  EXPECT_TRUE(job.unmodelled.empty());
  // 0, Megatron-LM's default, offloads nothing.
  EXPECT_FALSE(read_megatron_args(kModel + "--cpu-offloading-num-layers 0\n", "offload.sh")
                   .offload_layers.has_value());
}

// Megatron-Core's refusals, met when the imported job is checked, name the script's line.
TEST(LayerOffloadImport, MegatronCoresRefusalsNameTheFlag) {
  ScratchDir dir;
  const auto refused = [&](const std::string& flags, const std::string& says) {
    const std::string script = write_file(dir.file("job.sh"), kModel + flags + "\n");
    const auto r = run_cli("import megatron " + script + " --preset h200 --devices 8 --out " +
                           dir.file("job.yaml"));
    EXPECT_EQ(r.code, 2) << flags << r.all();
    EXPECT_NE(r.err.find(script + ":2: --cpu-offloading-num-layers"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
  };
  refused("--cpu-offloading-num-layers 2 --pipeline-model-parallel-size 2",
          "no support for Pipeline parallelism");
  refused(
      "--cpu-offloading-num-layers 2 --recompute-granularity full --recompute-method "
      "uniform --recompute-num-layers 1",
      "does not work when activation recomputation is enabled");
  refused("--cpu-offloading-num-layers 8", "only for layers less than 8");
}

// Import -> simulate -> export -> import -> simulate: the same time, the flag written, and
// the other frameworks refuse what they cannot state.
TEST(LayerOffloadInterop, ExportImportRoundTrip) {
  ScratchDir dir;
  const test::MegatronRoundTrip trip =
      test::megatron_round_trip(dir, kModel, "--cpu-offloading-num-layers 5\n", "gb200", 8);
  const std::string& yaml = trip.yaml;
  EXPECT_EQ(trip.first["layer_offload"]["layers"], 5);
  EXPECT_NE(trip.exported.find("--cpu-offloading-num-layers 5\n"), std::string::npos)
      << trip.exported;
  EXPECT_EQ(trip.first["iteration_time_ms"], trip.second["iteration_time_ms"]);
  EXPECT_EQ(trip.first["layer_offload"], trip.second["layer_offload"]);
  for (const char* format : {"mindformers", "torchtitan"}) {
    const auto r = run_cli("export " + yaml + " --format " + format);
    EXPECT_EQ(r.code, 2) << format << r.all();
    EXPECT_NE(r.err.find("cannot state training.offload_layers (5)"), std::string::npos) << r.err;
  }
}

}  // namespace layer_offload_interop_test
}  // namespace bmpipe
