// Every class of bad input gets a ConfigError naming the file, the line and the key path.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "experiment/config.hpp"
#include "experiment/config_cases.hpp"
#include "experiment/experiment.hpp"
#include "support/run_config.hpp"

namespace bmpipe {
namespace {

// A valid config (the shared unit config); tests break one thing at a time with string
// replacement.
const std::string& kValid = test::kUnit;

std::string replaced(const std::string& from, const std::string& to) {
  std::string s = kValid;
  const auto at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  s.replace(at, from.size(), to);
  return s;
}

// Parses `text` and returns the error it must raise.
ConfigError error_of(const std::string& text) {
  return test::config_error(text, {}, "exp.yaml");
}

TEST(Config, ValidConfigLoads) {
  const Config c = parse_config(kValid, "exp.yaml");
  EXPECT_EQ(c.cluster.devices_per_node, 4);
  EXPECT_EQ(c.model.num_layers(), 8);
  EXPECT_EQ(c.training.pp, 4);
  EXPECT_EQ(c.lines.at("training.pp"), 18);
}

TEST(Config, MalformedYamlNamesTheLine) {
  const ConfigError e = error_of(replaced("  pp: 4\n", "  pp: [4\n"));
  EXPECT_EQ(e.file(), "exp.yaml");
  EXPECT_GE(e.line(), 18);
  EXPECT_NE(std::string(e.what()).find("malformed YAML"), std::string::npos);
}

TEST(Config, UnknownKeyIsRejectedWithItsPathAndLine) {
  const ConfigError e = error_of(replaced("  pp: 4\n", "  pp: 4\n  pipline_depth: 3\n"));
  EXPECT_EQ(e.key(), "training.pipline_depth");
  EXPECT_EQ(e.line(), 19);
  EXPECT_NE(e.message().find("unknown key"), std::string::npos);
  EXPECT_NE(e.message().find("microbatches"), std::string::npos);  // lists the known keys
  EXPECT_EQ(std::string(e.what()).rfind("exp.yaml:19: training.pipline_depth: ", 0), 0u);
}

TEST(Config, MissingKeyNamesTheKey) {
  const ConfigError e = error_of(replaced("      forward_ms: 0.5\n", ""));
  EXPECT_EQ(e.key(), "model.layers[0].forward_ms");
  EXPECT_NE(e.message().find("missing"), std::string::npos);
  EXPECT_GT(e.line(), 0);
}

TEST(Config, NegativeValueIsRejected) {
  const ConfigError e = error_of(replaced("backward_input_ms: 0.5", "backward_input_ms: -1"));
  EXPECT_EQ(e.key(), "model.layers[0].backward_input_ms");
  EXPECT_EQ(e.line(), 11);
  EXPECT_NE(e.message().find("at least 0"), std::string::npos);
}

TEST(Config, WrongTypeIsRejected) {
  EXPECT_EQ(error_of(replaced("memory_GiB: 1", "memory_GiB: lots")).key(),
            "cluster.device.memory_GiB");
  EXPECT_EQ(error_of(replaced("  pp: 4\n", "  pp: 2.5\n")).key(), "training.pp");
  EXPECT_EQ(error_of(replaced("count: 8", "count: [8]")).key(), "model.layers[0].count");
}

TEST(Config, ZeroBandwidthIsRejected) {
  const ConfigError e = error_of(replaced("bandwidth_GBps: 100", "bandwidth_GBps: 0"));
  EXPECT_EQ(e.key(), "cluster.intra_node.bandwidth_GBps");
  EXPECT_NE(e.message().find("greater than 0"), std::string::npos);
}

TEST(Config, PpMustDivideTheDevices) {
  const ConfigError e = error_of(replaced("  pp: 4\n", "  pp: 3\n"));
  EXPECT_EQ(e.key(), "training.pp");
  EXPECT_EQ(e.line(), 18);
  EXPECT_NE(e.message().find("does not divide the 4 devices"), std::string::npos);
}

TEST(Config, PartitionMustAddUpToTheLayers) {
  const ConfigError e = error_of(replaced("  pp: 4\n", "  pp: 4\n  partition: [2, 2, 2, 1]\n"));
  EXPECT_EQ(e.key(), "training.partition");
  EXPECT_NE(e.message().find("adds up to 7 layers but the model has 8"), std::string::npos);
  const ConfigError n = error_of(replaced("  pp: 4\n", "  pp: 4\n  partition: [4, 4]\n"));
  EXPECT_NE(n.message().find("has 2 entries but there are 4 stages"), std::string::npos);
}

TEST(Config, UnknownScheduleListsTheKnownOnes) {
  const ConfigError e = error_of(replaced("schedule: 1f1b", "schedule: 2f2b"));
  EXPECT_EQ(e.key(), "training.schedule");
  EXPECT_NE(e.message().find("gpipe"), std::string::npos);
  EXPECT_NE(e.message().find("1f1b"), std::string::npos);
}

TEST(Config, InterNodeLinksAreRequiredWithTwoNodes) {
  const ConfigError e = error_of(replaced("nodes: 1", "nodes: 2"));
  EXPECT_EQ(e.key(), "cluster.inter_node");
}

TEST(Config, MissingFileIsAConfigError) {
  try {
    load_config("/nonexistent/bmpipe.yaml");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(e.message().find("cannot open"), std::string::npos);
  }
}

TEST(Config, OverridesAreCheckedAndNamedAsCommandLine) {
  Config c =
      parse_config(replaced("  pp: 4\n", "  pp: 4\n  partition: [2, 2, 2, 2]\n"), "exp.yaml");
  Overrides o;
  o.pp = 2;
  try {
    apply_overrides(c, o);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "training.partition");  // 4 entries no longer match 2 stages
  }
  Config d = parse_config(kValid, "exp.yaml");
  Overrides bad;
  bad.pp = 3;
  try {
    apply_overrides(d, bad);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "training.pp (from the command line)");
  }
}

TEST(Experiment, UniformPartitionGivesRemainderToEarlyStagesAndSumsCosts) {
  Config c = parse_config(replaced("count: 8", "count: 10"), "exp.yaml");
  EXPECT_EQ(stage_layer_counts(c, 4), (std::vector<int>{3, 3, 2, 2}));
  const test::Prepared run = test::prepare_run(c);
  const SimInput& in = run.input;
  ASSERT_EQ(in.stages.size(), 4u);
  EXPECT_EQ(in.stages[0].forward, 1'500'000);  // 3 layers x 0.5 ms
  EXPECT_EQ(in.stages[3].forward, 1'000'000);
  EXPECT_EQ(in.stages[0].activation_bytes, 3 * 1048576);
  EXPECT_EQ(in.static_bytes[0], 3 * 1048576);
  EXPECT_EQ(in.capacity_bytes[0], 1073741824);
}

TEST(Experiment, PipelineRanksFollowMegatronPlacement) {
  // 2 nodes x 4 devices, pp 2, dp 4: pipeline rank r on device r * tp * dp = 4r, so the
  // stage boundary crosses nodes.
  Config c = parse_config(
      replaced("nodes: 1", "nodes: 2\n  inter_node: {bandwidth_GBps: 10, latency_us: 5}"),
      "exp.yaml");
  Overrides o;
  o.pp = 2;
  apply_overrides(c, o);
  const test::Prepared run = test::prepare_run(c);
  const SimInput& in = run.input;
  EXPECT_EQ(in.rank_device, (std::vector<int>{0, 4}));
}

TEST(Examples, EveryShippedExampleLoads) {
  for (const char* name : {"tiny.yaml", "h200_llama2_7b.yaml", "ascend910b_2x8.yaml"}) {
    const std::string path = std::string(BMPIPE_SOURCE_DIR) + "/configs/examples/" + name;
    EXPECT_NO_THROW(load_config(path)) << path;
  }
}

}  // namespace
}  // namespace bmpipe
