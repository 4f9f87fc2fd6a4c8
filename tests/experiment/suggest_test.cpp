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

}  // namespace
}  // namespace bmpipe
