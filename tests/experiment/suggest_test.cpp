// "Did you mean": the distance, the threshold, and the places that use it.
#include <gtest/gtest.h>

#include "experiment/config.hpp"
#include "experiment/suggest.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace {

TEST(Suggest, EditDistanceCountsTranspositionsAsOne) {
  EXPECT_EQ(edit_distance("1f1b", "1f1b"), 0u);
  EXPECT_EQ(edit_distance("1fb1", "1f1b"), 1u);  // one adjacent swap
  EXPECT_EQ(edit_distance("zbv", "zb-v"), 1u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);  // the textbook pair
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(edit_distance("PP", "pp"), 0u);  // case-insensitive
}

TEST(Suggest, OnlyCloseNamesAreSuggested) {
  const std::vector<std::string> names = {"microbatches", "pp", "vpp", "schedule"};
  EXPECT_EQ(did_you_mean("microbatchs", names), " (did you mean 'microbatches'?)");
  EXPECT_EQ(did_you_mean("shedule", names), " (did you mean 'schedule'?)");
  EXPECT_EQ(did_you_mean("zzzzzzzz", names), "");
  EXPECT_EQ(did_you_mean("pp", names), "");  // an exact name is not a typo
  EXPECT_EQ(split_names("a, b,c"), (std::vector<std::string>{"a", "b", "c"}));
}

TEST(Suggest, ConfigErrorsSuggestKeysValuesSchedulesAndPresets) {
  auto message = [](const std::string& yaml) {
    try {
      parse_config(yaml, "s.yaml");
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("loaded");
  };
  const std::string cluster = "cluster: {nodes: 1, devices_per_node: 2, device: {preset: h200}}\n";
  EXPECT_NE(message(cluster + "model: {preset: llama2-7b}\ntraining: {pp: 2, seq_lenght: 4096, "
                              "microbatches: 4}\n")
                .find("did you mean 'seq_length'"),
            std::string::npos);
  EXPECT_NE(message(cluster + "model: {preset: llama2-7B}\ntraining: {pp: 2, seq_length: 4096, "
                              "microbatches: 4}\n")
                .find("did you mean 'llama2-7b'"),
            std::string::npos);
  EXPECT_NE(message(cluster + "model: {preset: llama2-7b}\ntraining: {pp: 2, schedule: zbh1, "
                              "seq_length: 4096, microbatches: 4}\n")
                .find("did you mean 'zb-h1'"),
            std::string::npos);
  EXPECT_NE(message("cluster: {nodes: 1, devices_per_node: 2, device: {preset: h20}}\nmodel: "
                    "{preset: llama2-7b}\ntraining: {pp: 2, seq_length: 4096, microbatches: 4}\n")
                .find("did you mean 'h200'"),
            std::string::npos);
}

TEST(Suggest, TheCommandLineSuggestsOptionsAndCommands) {
  const std::string tiny = test::examples() + "tiny.yaml";
  const test::CliRun option = test::run_cli("simulate " + tiny + " --microbaches 4");
  EXPECT_EQ(option.code, 2);
  EXPECT_NE(option.err.find("did you mean '--microbatches'"), std::string::npos) << option.err;
  const test::CliRun command = test::run_cli("simulat " + tiny);
  EXPECT_EQ(command.code, 2);
  EXPECT_NE(command.err.find("did you mean 'simulate'"), std::string::npos) << command.err;
  const test::CliRun help = test::run_cli("help plan");
  EXPECT_EQ(help.code, 0);
  EXPECT_NE(help.out.find("bmpipe plan CONFIG"), std::string::npos) << help.out;
}

TEST(Overrides, AnyKeyCanBeSetFromTheCommandLineAndIsChecked) {
  const std::string k13b = test::examples() + "ascend910b_llama2_13b_analytic.yaml";
  // tp 4 halves... what tp 2 gives: the JSON says which tp ran through its iteration time
  // changing; a value the field table refuses names the key and the command line.
  const test::CliRun bad = test::run_cli("simulate " + k13b + " --tp 3");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("training.tp (from the command line)"), std::string::npos) << bad.err;
  const test::CliRun maybe =
      test::run_cli("simulate " + k13b + " --set training.sequence_parallel=maybe");
  EXPECT_EQ(maybe.code, 2);
  EXPECT_NE(maybe.err.find("training.sequence_parallel (from the command line)"), std::string::npos)
      << maybe.err;
  EXPECT_EQ(test::run_cli("simulate " + k13b + " --set nonsense").code, 2);
  // Values that load change the run: a partition from the command line.
  const std::string tiny = test::examples() + "tiny.yaml";
  const test::CliRun uneven = test::run_cli("simulate " + tiny + " --partition 5,1,1,1 --json");
  ASSERT_EQ(uneven.code, 0) << uneven.err;
  // 1F1B, 5 unit layers on stage 0 (F = 2.5 ms, B = 5 ms per micro-batch): stage 0 never
  // waits, 8 x 7.5 = 60 ms.
  EXPECT_NE(uneven.out.find("\"iteration_time_ms\": 60.0"), std::string::npos) << uneven.out;
  const test::CliRun short_list = test::run_cli("simulate " + tiny + " --partition 5,1,1");
  EXPECT_EQ(short_list.code, 2);
  EXPECT_NE(short_list.err.find("training.partition"), std::string::npos) << short_list.err;
}

}  // namespace
}  // namespace bmpipe
