// Sharded data parallelism through the Megatron-LM importer and exporter (issue 19 item 6):
// --use-torch-fsdp2, --use-megatron-fsdp with --data-parallel-sharding-strategy, and
// --overlap-param-gather are read into training.fsdp / optimizer.zero_stage /
// overlap_param_gather, written back by `bmpipe export --format megatron`, and read again
// to the same config. Megatron-LM's meaning of each flag: megatron/training/arguments.py
// and megatron/core/distributed at d98e8a64ddf3 (read).
#include <gtest/gtest.h>

#include <string>

#include "experiment/config.hpp"
#include "frameworks/common/import_common.hpp"
#include "frameworks/megatron/import.hpp"
#include "support/framework_files.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace {

// Llama-2-7B, tp 2, pp 2 over 8 devices (dp 2), 64 sequences per step, bf16.
const std::string kModel =
    "--num-layers 32 --hidden-size 4096 --ffn-hidden-size 11008 --num-attention-heads 32 \\\n"
    "  --seq-length 4096 --vocab-size 32000 --swiglu --untie-embeddings-and-output-weights \\\n"
    "  --micro-batch-size 1 --global-batch-size 64 --bf16 \\\n"
    "  --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2\n";

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

ImportedJob import(const std::string& args) {
  return read_megatron_args(args, "args.txt");
}

std::string error_of(const std::string& args) {
  try {
    import(args);
  } catch (const ImportError& e) {
    return e.what();
  }
  return "<accepted>";
}

Config config_of(const ImportedJob& job) {
  return parse_config(imported_yaml(job, cluster_from_preset("h200", 8), "out.yaml"), "out.yaml");
}

TEST(FsdpImport, TorchFsdp2IsZero3) {
  const ImportedJob job = import(kModel + "--use-torch-fsdp2\n");
  EXPECT_TRUE(job.unmodelled.empty());
  EXPECT_EQ(job.zero_stage, 3);
  EXPECT_EQ(job.fsdp, true);
  const Config c = config_of(job);
  EXPECT_TRUE(c.training.fsdp);
  EXPECT_EQ(c.training.optimizer.zero_stage, 3);
}

TEST(FsdpImport, MegatronFsdpStrategiesAreStagesZeroToThree) {
  const auto stage = [](const std::string& strategy) {
    const ImportedJob job = import(kModel +
                                   "--use-megatron-fsdp --use-distributed-optimizer "
                                   "--data-parallel-sharding-strategy " +
                                   strategy + "\n");
    EXPECT_TRUE(job.unmodelled.empty()) << strategy;
    const Config c = config_of(job);
    EXPECT_EQ(c.training.fsdp, c.training.optimizer.zero_stage >= 2) << strategy;
    return c.training.optimizer.zero_stage;
  };
  EXPECT_EQ(stage("no_shard"), 0);
  EXPECT_EQ(stage("optim"), 1);
  EXPECT_EQ(stage("optim_grads"), 2);
  EXPECT_EQ(stage("optim_grads_params"), 3);
  // Megatron's parser default is no_shard.
  EXPECT_EQ(import(kModel + "--use-megatron-fsdp\n").zero_stage, 0);
}

TEST(FsdpImport, TheDistributedOptimizerStaysStageOne) {
  EXPECT_EQ(
      config_of(import(kModel + "--use-distributed-optimizer\n")).training.optimizer.zero_stage, 1);
  // The strategy alone changes nothing (Megatron reads it only under Megatron-FSDP).
  const ImportedJob job = import(
      kModel + "--use-distributed-optimizer --data-parallel-sharding-strategy optim_grads\n");
  EXPECT_EQ(job.zero_stage, 1);
  EXPECT_FALSE(job.fsdp);
}

TEST(FsdpImport, OverlapParamGatherIsRead) {
  const ImportedJob job =
      import(kModel + "--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather\n");
  EXPECT_TRUE(job.unmodelled.empty());
  EXPECT_EQ(job.overlap_param_gather, true);
  EXPECT_TRUE(config_of(job).training.optimizer.overlap_param_gather);
}

TEST(FsdpImport, BadCombinationsNameTheFlag) {
  // Nothing to overlap without a sharded optimizer.
  const std::string e = error_of(kModel + "--overlap-param-gather\n");
  EXPECT_TRUE(contains(e, "args.txt:5")) << e;
  EXPECT_TRUE(contains(e, "--overlap-param-gather")) << e;
  const std::string both = error_of(kModel + "--use-torch-fsdp2 --use-megatron-fsdp\n");
  EXPECT_TRUE(contains(both, "--use-torch-fsdp2")) << both;
  const std::string bad = error_of(kModel +
                                   "--use-megatron-fsdp "
                                   "--data-parallel-sharding-strategy zero3\n");
  EXPECT_TRUE(contains(bad, "--data-parallel-sharding-strategy")) << bad;
}

/// Imports `flags`, writes the YAML, exports it with the CLI and imports the exported flags
/// (with the model's): the config read back.
Config round_trip(const std::string& flags) {
  test::ScratchDir dir;
  const std::string yaml = test::write_file(
      dir.file("job.yaml"),
      imported_yaml(import(kModel + flags), cluster_from_preset("h200", 8), dir.file("job.yaml")));
  const test::CliRun r = test::run_cli("export '" + yaml + "' --format megatron");
  EXPECT_EQ(r.code, 0) << r.err;
  const std::string exported = test::export_flag_lines(r.out);
  return config_of(import(kModel + exported + "\n"));
}

TEST(FsdpExport, StagesTwoAndThreeRoundTripAsMegatronFsdp) {
  const Config three = round_trip("--use-torch-fsdp2\n");
  EXPECT_TRUE(three.training.fsdp);
  EXPECT_EQ(three.training.optimizer.zero_stage, 3);
  const Config two = round_trip(
      "--use-megatron-fsdp --use-distributed-optimizer "
      "--data-parallel-sharding-strategy optim_grads --overlap-param-gather "
      "--overlap-grad-reduce\n");
  EXPECT_TRUE(two.training.fsdp);
  EXPECT_EQ(two.training.optimizer.zero_stage, 2);
  EXPECT_TRUE(two.training.optimizer.overlap_param_gather);
  const Config one =
      round_trip("--use-distributed-optimizer --overlap-param-gather --overlap-grad-reduce\n");
  EXPECT_TRUE(one.training.optimizer.overlap_grad_reduce);
  EXPECT_FALSE(one.training.fsdp);
  EXPECT_EQ(one.training.optimizer.zero_stage, 1);
  EXPECT_TRUE(one.training.optimizer.overlap_param_gather);
}

TEST(FsdpExport, TheFlagsWrittenForZero3) {
  test::ScratchDir dir;
  const std::string yaml = test::write_file(
      dir.file("job.yaml"), imported_yaml(import(kModel + "--use-torch-fsdp2\n"),
                                          cluster_from_preset("h200", 8), dir.file("job.yaml")));
  const test::CliRun r = test::run_cli("export '" + yaml + "' --format megatron");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.out,
                       "\n--use-megatron-fsdp\n--data-parallel-sharding-strategy "
                       "optim_grads_params\n"))
      << r.out;
}

}  // namespace
}  // namespace bmpipe
