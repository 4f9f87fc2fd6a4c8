// Jobs a framework would refuse to start are refused by the config loader too (issue 42,
// "silent acceptance of jobs that cannot run"): overlap_param_gather without a sharded
// optimizer, tp_comm_overlap at tp 1, and an MoE top-k larger than the experts the
// router's groups can offer. Each is a ConfigError naming FILE:LINE:key, and exit 2 from
// the command line.
#include <gtest/gtest.h>

#include <string>

#include "experiment/config.hpp"
#include "experiment/config_cases.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace {

using test::config_error;
using test::has;
using test::with;

// A dense analytic job on 8 H100s; line numbers matter: training.tp is on line 8, the
// optimizer's keys on line 11.
const std::string kDense = R"(cluster:
  nodes: 1
  device: {preset: h100-sxm}
model:
  preset: llama3-8b
training:
  pp: 2
  tp: 2
  seq_length: 4096
  global_batch_size: 16
  optimizer: {zero_stage: 0, overlap_param_gather: true, overlap_grad_reduce: true}
)";

TEST(FrameworkRules, OverlapParamGatherNeedsAShardedOptimizer) {
  const ConfigError e = config_error(kDense);
  EXPECT_EQ(e.file(), "exp.yaml");
  EXPECT_EQ(e.key(), "training.optimizer.overlap_param_gather");
  EXPECT_EQ(e.line(), 11);
  EXPECT_TRUE(has(e.message(), "needs a sharded optimizer"));
  EXPECT_TRUE(has(e.message(), "--use-distributed-optimizer"));
  EXPECT_TRUE(has(e.message(), "zero_stage 1 or more"));
  // Absent zero_stage is 0 too.
  const ConfigError absent = config_error(
      with("{zero_stage: 0, overlap_param_gather: true", "{overlap_param_gather: true", kDense));
  EXPECT_EQ(absent.key(), "training.optimizer.overlap_param_gather");
  // Sharded: ZeRO-1, or FSDP (zero_stage 3), is a job that runs.
  EXPECT_TRUE(parse_config(with("zero_stage: 0", "zero_stage: 1", kDense), "exp.yaml")
                  .training.optimizer.overlap_param_gather);
  EXPECT_EQ(
      parse_config(
          with("{zero_stage: 0, overlap_param_gather: true, overlap_grad_reduce: true}",
               "{overlap_param_gather: true, overlap_grad_reduce: true}\n  fsdp: true", kDense),
          "exp.yaml")
          .training.optimizer.zero_stage,
      3);
  // Off, ZeRO-0 stays valid.
  parse_config(with("overlap_param_gather: true", "overlap_param_gather: false", kDense),
               "exp.yaml");
}

// megatron/training/arguments.py at d98e8a64, validate_args: "Must use
// --overlap-param-gather with --overlap-grad-reduce".
TEST(FrameworkRules, OverlapParamGatherNeedsOverlapGradReduce) {
  const std::string sharded = with("zero_stage: 0", "zero_stage: 1", kDense);
  EXPECT_TRUE(parse_config(sharded, "exp.yaml").training.optimizer.overlap_param_gather);
  const ConfigError e = config_error(with(", overlap_grad_reduce: true", "", sharded));
  EXPECT_EQ(e.key(), "training.optimizer.overlap_param_gather");
  EXPECT_EQ(e.line(), 11);
  EXPECT_TRUE(has(e.message(), "needs training.optimizer.overlap_grad_reduce: true"));
  EXPECT_TRUE(has(e.message(), "Must use --overlap-param-gather with --overlap-grad-reduce"));
}

TEST(FrameworkRules, OverlapParamGatherFromTheCommandLine) {
  Overrides o;
  o.set = {{"training.optimizer.overlap_param_gather", "true"}};
  const std::string off = with("overlap_param_gather: true, ", "", kDense);
  const ConfigError e = config_error(off, o);
  EXPECT_EQ(e.key(), "training.optimizer.overlap_param_gather (from the command line)");
  EXPECT_EQ(e.line(), 0);
}

TEST(FrameworkRules, TpCommOverlapNeedsTensorParallelism) {
  const std::string sharded = with("zero_stage: 0", "zero_stage: 1", kDense);
  const std::string overlapped = with("  seq_length: 4096\n",
                                      "  seq_length: 4096\n  sequence_parallel: true\n"
                                      "  tp_comm_overlap: true\n",
                                      sharded);
  // At tp 2 it runs; at tp 1 there are no tp collectives and Megatron-LM refuses.
  parse_config(overlapped, "exp.yaml");
  const ConfigError e = config_error(with("  tp: 2\n", "  tp: 1\n", overlapped));
  EXPECT_EQ(e.key(), "training.tp_comm_overlap");
  EXPECT_EQ(e.line(), 11);
  EXPECT_TRUE(has(e.message(), "true at tp 1"));
  EXPECT_TRUE(has(e.message(), "expected false, or training.tp 2 or more"));
  // tp absent is tp 1.
  EXPECT_EQ(config_error(with("  tp: 2\n", "", overlapped)).key(), "training.tp_comm_overlap");
  // tp 1 from the command line: the file's own key is still the one to change.
  Overrides o;
  o.set = {{"training.tp", "1"}};
  const ConfigError cli = config_error(overlapped, o);
  EXPECT_EQ(cli.key(), "training.tp_comm_overlap");
  EXPECT_EQ(cli.line(), 11);
}

// DeepSeek-V3's config.json: 256 experts, top 8, in 8 groups of which a token picks 4 (so
// 4 x 32 = 128 experts on offer). Line 7 holds model.moe.
std::string deepseek(const std::string& moe) {
  return "cluster:\n  nodes: 8\n  devices_per_node: 8\n  device: {preset: h800}\n"
         "model:\n  hf_config: " +
         std::string(BMPIPE_SOURCE_DIR) + "/configs/presets/hf/deepseek-v3.json\n  moe: " + moe +
         "\ntraining:\n  pp: 1\n  ep: 4\n  seq_length: 4096\n  micro_batch_size: 1\n"
         "  global_batch_size: 64\n  recompute: full\n";
}

TEST(FrameworkRules, TopKWithinWhatTheRouterGroupsOffer) {
  // 128 on offer: top 128 routes, top 129 cannot (the groups' keys come from the file).
  EXPECT_EQ(parse_config(deepseek("{top_k: 128}"), "exp.yaml").model.shape->moe.top_k, 128);
  const ConfigError e = config_error(deepseek("{top_k: 129}"));
  EXPECT_EQ(e.key(), "model.moe.top_k");
  EXPECT_EQ(e.line(), 7);
  EXPECT_EQ(e.message(),
            "top_k = 129 experts a token, but its 4 router groups (router_group_top_k) of 32 "
            "experts (num_experts / router_groups = 256 / 8) offer only 128 (expected top_k at "
            "most 128)");
  // Fewer experts under the same groups: 8 groups of 2, 4 of them picked, 8 on offer for a
  // top 8 runs; 8 groups of 1 offer 4, and the key that changed is blamed.
  parse_config(deepseek("{num_experts: 16}"), "exp.yaml");
  const ConfigError fewer = config_error(deepseek("{num_experts: 8}"));
  EXPECT_EQ(fewer.key(), "model.moe.num_experts");
  EXPECT_EQ(fewer.line(), 7);
  EXPECT_TRUE(has(fewer.message(), "offer only 4 (expected top_k at most 4)"));
  // Experts the groups cannot split evenly.
  const ConfigError uneven = config_error(deepseek("{num_experts: 12}"));
  EXPECT_EQ(uneven.key(), "model.moe.num_experts");
  EXPECT_TRUE(has(uneven.message(), "8 router groups do not split the 12 experts evenly"));
  // More experts per token than there are at all.
  const ConfigError too_many = config_error(deepseek("{top_k: 300}"));
  EXPECT_EQ(too_many.key(), "model.moe.top_k");
  EXPECT_TRUE(has(too_many.message(), "300 experts per token, but the model has 256"));
}

TEST(FrameworkRules, ARuleHoldsForAConfigChangedByHand) {
  Config c = parse_config(deepseek("{load_imbalance: 1}"), "exp.yaml");
  c.model.shape->moe.top_k = 200;
  try {
    check_config(c);
    ADD_FAILURE() << "check_config accepted top_k 200 of 128 on offer";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "model.moe.top_k");
    EXPECT_EQ(e.line(), 7);  // model.moe's line: top_k itself was not in the file
  }
  Config d = parse_config(with("overlap_param_gather: true", "overlap_param_gather: false", kDense),
                          "exp.yaml");
  d.training.optimizer.overlap_param_gather = true;
  EXPECT_THROW(check_config(d), ConfigError);
}

TEST(FrameworkRules, TheCommandLineExitsTwoNamingFileLineAndKey) {
  const test::ScratchDir dir;
  const std::string path = test::write_file(dir.file("job.yaml"), kDense);
  const test::CliRun r = test::run_cli("simulate '" + path + "' --quiet");
  EXPECT_EQ(r.code, 2) << r.all();
  EXPECT_TRUE(has(r.err, path + ":11: training.optimizer.overlap_param_gather: true needs a "
                                "sharded optimizer"));
  const std::string moe = test::write_file(dir.file("moe.yaml"), deepseek("{top_k: 129}"));
  const test::CliRun m = test::run_cli("simulate '" + moe + "' --quiet");
  EXPECT_EQ(m.code, 2) << m.all();
  EXPECT_TRUE(has(m.err, moe + ":7: model.moe.top_k: top_k = 129 experts a token"));
}

}  // namespace
}  // namespace bmpipe
