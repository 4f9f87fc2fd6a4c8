// `bmpipe export --format torchtitan-registry`: a plan as torchtitan's 2026 launch command,
// a registered config function (pytorch/torchtitan at b5bcd76c66d0,
// torchtitan/models/{llama3,deepseek_v3}/config_registry.py) with the --section.option
// overrides that make its job the plan's ("CLI args > config_registry function defaults",
// torchtitan/config/manager.py). The options the tests expect are worked by hand from those
// functions: llama3_70b sets tensor_parallel_degree 8, FullAC, 8 x 8192 tokens a micro-batch
// and max_context_length 8192, and leaves CUDA graphs on (torchtitan/trainer.py).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "frameworks/common/export_layout.hpp"
#include "frameworks/torchtitan/registry_export.hpp"
#include "support/support.hpp"
#include "support/torchtitan_round_trip.hpp"

namespace bmpipe {
namespace torchtitan_registry_export_test {

using test::run_cli;

std::string source(const std::string& path) {
  return std::string(BMPIPE_SOURCE_DIR) + "/" + path;
}

/// `body` (a training: section's lines) on 64 H100 with the llama3 70B flavor.
std::string llama70b(const test::ScratchDir& dir, const std::string& name,
                     const std::string& body) {
  return test::write_file(dir.file(name + ".yaml"),
                          "cluster:\n  nodes: 8\n  devices_per_node: 8\n  device:\n"
                          "    preset: h100-sxm\n"
                          "model:\n  preset: llama3-70b\n"
                          "training:\n  seq_length: 8192\n  kernels: fused\n" +
                              body);
}

/// The export's JSON, asserting it succeeded.
nlohmann::json exported(const std::string& config) {
  const test::CliRun x = run_cli("export '" + config + "' --format torchtitan-registry --json");
  EXPECT_EQ(x.code, 0) << x.err;
  return x.code == 0 ? nlohmann::json::parse(x.out) : nlohmann::json::object();
}

// tp 4 instead of the function's 8, selective op checkpointing instead of FullAC, 2
// sequences a micro-batch and 64 a step: those options, and none of the function's own.
TEST(TorchTitanRegistryExport, OnlyWhatDiffersFromTheFunctionIsAnOption) {
  test::ScratchDir dir;
  const nlohmann::json j =
      exported(llama70b(dir, "tp4",
                        "  tp: 4\n  pp: 1\n  micro_batch_size: 2\n"
                        "  global_batch_size: 64\n  recompute: selective\n"
                        "  optimizer: {zero_stage: 3}\n  fsdp: true\n  sequence_parallel: true\n"
                        "  cuda_graphs: full_iteration\n"));
  const std::string text = j.value("text", "");
  EXPECT_NE(text.find("NGPU=64 MODULE=llama3 CONFIG=llama3_70b ./run_train.sh"), std::string::npos)
      << text;
  // 2 x 8192 tokens a micro-batch; 64 x 8192 a step.
  EXPECT_NE(text.find("--training.num_tokens_per_microbatch_per_dp_rank 16384"), std::string::npos)
      << text;
  EXPECT_NE(text.find("--training.num_tokens_per_train_step 524288"), std::string::npos) << text;
  EXPECT_NE(text.find("--parallelism.tensor_parallel_degree 4"), std::string::npos) << text;
  EXPECT_NE(text.find("--parallelism.data_parallel_shard_degree 16"), std::string::npos) << text;
  EXPECT_NE(text.find("--activation_checkpoint.mode selective"), std::string::npos) << text;
  EXPECT_NE(text.find("--activation_checkpoint.selective_ac_option op"), std::string::npos) << text;
  EXPECT_NE(text.find("--compile.enable"), std::string::npos) << text;  // fused kernels
  // The function's own values are not repeated: its context length, and CUDA graphs on.
  EXPECT_EQ(text.find("max_context_length"), std::string::npos) << text;
  EXPECT_EQ(text.find("disable_cuda_graphs"), std::string::npos) << text;
  EXPECT_EQ(text.find("--model."), std::string::npos) << text;  // not options at b5bcd76c66d0
  EXPECT_TRUE(j.value("exact", false)) << j.dump();
}

// A split torchtitan builds with the first stage holding 3 layers fewer (and the last 1, its
// default): 80 layers, pp 4, effective 80 + 3 + 1 = 84 over 4 stages is 21 each, less 3 and
// 1: 18, 21, 21, 20. Stated by that one option (the round trip below reads splits back).
TEST(TorchTitanRegistryExport, ASplitIsStatedByTheStagesLessLayers) {
  test::ScratchDir dir;
  const std::string config = llama70b(dir, "split",
                                      "  tp: 8\n  pp: 4\n  micro_batch_size: 1\n"
                                      "  global_batch_size: 32\n  schedule: 1f1b\n"
                                      "  partition: [18, 21, 21, 20]\n  recompute: full\n");
  const nlohmann::json j = exported(config);
  const std::string text = j.value("text", "");
  EXPECT_NE(text.find("--parallelism.pipeline_parallel_first_stage_less_layers 3"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("last_stage_less_layers"), std::string::npos) << text;
  EXPECT_NE(text.find("--parallelism.num_pp_microbatches 16"), std::string::npos) << text;
  EXPECT_NE(text.find("--training.disable_cuda_graphs"), std::string::npos)
      << text;  // none in the config (and torchtitan refuses them under a pipeline)

  // A split no first/last weight gives: refused against training.partition.
  const std::string odd = llama70b(dir, "odd",
                                   "  tp: 8\n  pp: 4\n  micro_batch_size: 1\n"
                                   "  global_batch_size: 32\n  schedule: 1f1b\n"
                                   "  partition: [20, 30, 10, 20]\n  recompute: full\n");
  const test::CliRun r = run_cli("export '" + odd + "' --format torchtitan-registry");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("training.partition: is split 20, 30, 10 and 20; torchtitan's "
                       "command-line options cannot state it: the command line has no "
                       "module_fqns_per_model_part"),
            std::string::npos)
      << r.err;
}

// llama3_405b converts its linears to float8 rowwise (Float8LinearConverter's default at
// b5bcd76c66d0): a 405B job in that precision is its job, and goes out and back to the
// exported time; in bf16 it is refused (the converter is the function's model spec).
TEST(TorchTitanRegistryExport, The405bFunctionStatesItsRowwiseFloat8) {
  test::ScratchDir dir;
  const std::string config = test::write_file(
      dir.file("b405.yaml"),
      "cluster:\n  nodes: 8\n  devices_per_node: 8\n  device:\n    preset: h100-sxm\n"
      "model:\n  name: llama3.1-405b\n  architecture: llama\n  num_layers: 126\n"
      "  hidden_size: 16384\n  num_attention_heads: 128\n  num_kv_heads: 8\n"
      "  ffn_hidden_size: 53248\n  vocab_size: 128256\n"
      "training:\n  seq_length: 8192\n  kernels: fused\n  tp: 8\n  pp: 1\n"
      "  sequence_parallel: true\n  tp_comm_overlap: true\n  micro_batch_size: 2\n"
      "  global_batch_size: 16\n  recompute: full\n  fsdp: true\n"
      "  fp8: e4m3\n  fp8_recipe: rowwise\n");
  const nlohmann::json j = exported(config);
  const std::string text = j.value("text", "");
  EXPECT_NE(text.find("MODULE=llama3 CONFIG=llama3_405b"), std::string::npos) << text;
  // 16 x 8192 tokens a step; the rest is the function's (2 x 8192 a micro-batch, tp 8,
  // FullAC, compile with async TP, float8 rowwise) or torchtitan's default.
  EXPECT_NE(text.find("--training.num_tokens_per_train_step 131072"), std::string::npos) << text;
  EXPECT_EQ(text.find("tensor_parallel_degree"), std::string::npos) << text;
  EXPECT_EQ(text.find("activation_checkpoint"), std::string::npos) << text;
  EXPECT_EQ(text.find("quantize"), std::string::npos) << text;
  EXPECT_TRUE(j.value("exact", false)) << j.dump();
  const std::string command = test::write_file(dir.file("b405.sh"), text);
  const std::string back = dir.file("b405_back.yaml");
  const test::CliRun imported = run_cli("import torchtitan '" + command +
                                        "' --preset h100-sxm --devices 64 --out '" + back + "'");
  ASSERT_EQ(imported.code, 0) << imported.err;
  EXPECT_EQ(test::run_json("simulate '" + back + "' --json")["iteration_time_ms"].get<double>(),
            j["iteration_time_ms"].get<double>());
}

TEST(TorchTitanRegistryExport, The405bFunctionInAnotherPrecisionIsRefused) {
  const test::CliRun r =
      run_cli("export '" + source("configs/examples/h100_llama31_405b_fp8_cp2.yaml") +
              "' --format torchtitan-registry");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--format: torchtitan's llama3_405b converts its linears "
                       "(quantize.linear.float8, recipe rowwise), which its command line "
                       "cannot turn off: set training.fp8 e4m3 with fp8_recipe rowwise"),
            std::string::npos)
      << r.err;
}

// What neither of torchtitan's forms can state is refused in the registry's own name, not
// the TOML's.
TEST(TorchTitanRegistryExport, RefusalsNameTheConfigRegistry) {
  const test::CliRun vocab =
      test::run_cli("export " + test::examples() +
                    "h100_llama3_70b_fp8.yaml --format torchtitan-registry --set "
                    "training.vocab_parallel=false");
  EXPECT_EQ(vocab.code, 2) << vocab.all();
  EXPECT_NE(vocab.err.find("--format: torchtitan's config registry cannot state "
                           "training.vocab_parallel: false"),
            std::string::npos)
      << vocab.err;
  const test::CliRun hcp = test::run_cli(
      "export " + test::examples() + "h100_llama3_8b_32k_hcp.yaml --format torchtitan-registry");
  EXPECT_EQ(hcp.code, 2) << hcp.all();
  EXPECT_NE(hcp.err.find("--format: torchtitan's config registry cannot state "
                         "training.cp_comm_type a2a+p2p"),
            std::string::npos)
      << hcp.err;
  EXPECT_EQ(hcp.err.find("TOML"), std::string::npos) << hcp.err;
}

// Every shipped example the command can state goes out and comes back: export, import on
// the example's own cluster, simulate; the time must be the exported one, to the digit. The
// others are refused for their model (the tests above pin the registry's own messages).
TEST(TorchTitanRegistryExport, EveryStatableExampleRoundTripsToTheExportedTime) {
  EXPECT_EQ(test::torchtitan_round_trips("torchtitan-registry", ""),
            (std::set<std::string>{"gb200_llama3_70b_128k_cp8", "h100_llama3_70b_fp8",
                                   "h100_llama3_8b_fsdp", "h200_llama3_8b_hf"}));
}

}  // namespace torchtitan_registry_export_test
}  // namespace bmpipe
