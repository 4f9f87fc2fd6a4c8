// Context parallelism as a search dimension (issue 19): --cp, dp = devices / (tp pp cp),
// the layouts whose cp cannot hold rejected with a reason, cp in the JSON, the CSV and the
// --out config, whose simulation gives the time the search reported; bad --cp exits 2.
// On tests/data/search_gpt3_24_layers.yaml: 64 A100s, seq_length 2048, global batch 32.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <tuple>

#include "experiment/config.hpp"
#include "support/support.hpp"

namespace {

using bmpipe::test::run_cli;
using nlohmann::json;

const std::string kGpt3Layers24 = std::string(BMPIPE_TEST_DATA_DIR) + "/search_gpt3_24_layers.yaml";
// tp 8, pp 4 and 8, micro-batch size 1, 1f1b. 64 / (8 x 4) = 2 devices per pipeline rank:
// cp 1 gives dp 2, cp 2 gives dp 1. 64 / (8 x 8) = 1: cp 1 gives dp 1, cp 2 does not
// divide it. So 4 layouts: 3 planned, 1 rejected by "divisibility".
const std::string kSpace = " --tp 8 --pp 4,8 --micro-batch-size 1 --schedules 1f1b";

using bmpipe::test::search_json;

TEST(SearchCp, ListsCpLayoutsWithDpOutOfTheRest) {
  const json j = search_json(kGpt3Layers24 + kSpace + " --planner off --cp 1,2");
  EXPECT_EQ(j["search"]["layouts"], 4);
  EXPECT_EQ(j["search"]["rejected_by"]["divisibility"], 1);
  std::set<std::tuple<int, int, int>> kept;  // (pp, cp, dp)
  for (const json& l : j["layouts"]) {
    ASSERT_TRUE(l.contains("cp")) << l.dump();
    if (l.value("filter", "") == "divisibility") {
      EXPECT_EQ(l["pp"], 8);
      EXPECT_EQ(l["cp"], 2);
      EXPECT_NE(l["rejected"].get<std::string>().find(
                    "tp x pp x cp = 128 does not divide the 64 devices"),
                std::string::npos)
          << l.dump();
      continue;
    }
    ASSERT_TRUE(l["fits"].get<bool>()) << l.dump();
    kept.insert({l["pp"].get<int>(), l["cp"].get<int>(), l["dp"].get<int>()});
    // The global batch of 32 sequences: m = 32 / (mbs x dp), cp taking no samples.
    EXPECT_EQ(l["microbatches"].get<int>(), 32 / l["dp"].get<int>()) << l.dump();
  }
  EXPECT_EQ(kept, (std::set<std::tuple<int, int, int>>{{4, 1, 2}, {4, 2, 1}, {8, 1, 1}}));
}

TEST(SearchCp, Cp2LayoutSimulatesToItsSearchedTimeWhenWrittenOut) {
  // The cp 2 layout's time in the --cp 1,2 search is the time of the cp 2 layout alone,
  // whose --out config simulates to it and says cp 2, dp 1.
  const json both = search_json(kGpt3Layers24 + kSpace + " --planner off --cp 1,2");
  const json* cp2 = nullptr;
  for (const json& l : both["layouts"])
    if (l["cp"] == 2 && l["fits"].get<bool>()) cp2 = &l;
  ASSERT_NE(cp2, nullptr);
  bmpipe::test::ScratchDir dir;
  const std::string out = dir.file("best.yaml");
  const json alone =
      search_json(kGpt3Layers24 + kSpace + " --planner off --cp 2 --out '" + out + "'");
  const json& best = alone["layouts"][0];
  ASSERT_TRUE(best["fits"].get<bool>()) << best.dump();
  EXPECT_EQ(best["cp"], 2);
  EXPECT_EQ(best["iteration_time_ms"], (*cp2)["iteration_time_ms"]);
  const bmpipe::Config written = bmpipe::load_config(out);
  EXPECT_EQ(written.training.cp, 2);
  EXPECT_EQ(written.training.tp, 8);
  EXPECT_EQ(written.training.pp, 4);
  EXPECT_EQ(written.training.data_parallel(64), 1);
  const auto sim = run_cli("simulate '" + out + "' --json");
  ASSERT_EQ(sim.code, 0) << sim.err;
  EXPECT_EQ(json::parse(sim.out)["iteration_time_ms"], best["iteration_time_ms"]);
}

TEST(SearchCp, PlannedCp2BestReproducesUnderSimulate) {
  // With the planner (and the bound), the best cp 2 layout's plan written out.
  bmpipe::test::ScratchDir dir;
  const std::string out = dir.file("best.yaml");
  const json j = search_json(kGpt3Layers24 + kSpace + " --cp 2 --out '" + out + "'");
  const json& best = j["layouts"][0];
  ASSERT_TRUE(best["fits"].get<bool>()) << best.dump();
  EXPECT_EQ(best["cp"], 2);
  const auto sim = run_cli("simulate '" + out + "' --json");
  ASSERT_EQ(sim.code, 0) << sim.err;
  EXPECT_EQ(json::parse(sim.out)["iteration_time_ms"], best["iteration_time_ms"]);
}

TEST(SearchCp, BoundFindsTheExhaustiveBest) {
  const std::string args = kGpt3Layers24 + " --tp 4,8 --pp 4,8 --micro-batch-size 1 --cp 1,2,4";
  const json with = search_json(args);
  const json without = search_json(args + " --no-bound");
  ASSERT_TRUE(with["layouts"][0]["fits"].get<bool>());
  for (const char* k : {"tp", "pp", "dp", "vpp", "cp", "schedule", "iteration_time_ms"})
    EXPECT_EQ(with["layouts"][0][k], without["layouts"][0][k]) << k;
}

TEST(SearchCp, CsvAndTableCarryCp) {
  bmpipe::test::ScratchDir dir;
  const std::string csv = dir.file("layouts.csv");
  const auto r = run_cli("search " + kGpt3Layers24 + kSpace +
                         " --planner off --cp 1,2 --quiet --csv '" + csv + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string text = bmpipe::test::slurp(csv);
  EXPECT_EQ(text.rfind("tp,pp,dp,vpp,micro_batch_size,schedule,cp,microbatches,", 0), 0u) << text;
  EXPECT_NE(text.find("8,4,1,1,1,1f1b,2,32,true,"), std::string::npos) << text;
  EXPECT_NE(r.out.find("   cp\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tp 8 pp 8 dp 0 vpp 1 mbs 1  cp 2: "), std::string::npos) << r.out;
}

TEST(SearchCp, NoCpKeysWithoutCp) {
  const json j = search_json(kGpt3Layers24 + kSpace + " --planner off");
  for (const json& l : j["layouts"]) EXPECT_FALSE(l.contains("cp")) << l.dump();
}

TEST(SearchCp, BadCpValuesExit2NamingTheOption) {
  for (const char* args : {"--cp 0", "--cp x", "--cp ,", "--cp 3", "--cp 1,3"}) {
    const auto r = run_cli("search " + kGpt3Layers24 + kSpace + " --quiet " + args);
    EXPECT_EQ(r.code, 2) << args << ": " << r.err;
    EXPECT_NE(r.err.find("--cp"), std::string::npos) << args << ": " << r.err;
  }
  // 2048 tokens do not cut into 2 x 3 = 6 equal chunks.
  const auto three = run_cli("search " + kGpt3Layers24 + kSpace + " --quiet --cp 3");
  EXPECT_NE(three.err.find("2 cp = 6 does not divide seq_length 2048"), std::string::npos)
      << three.err;
  // Measured layers hold for the config's cp only.
  const auto measured =
      run_cli("search " + bmpipe::test::examples() + "llama2_70b_measured_pp8.yaml --quiet --cp 2");
  EXPECT_EQ(measured.code, 2) << measured.err;
  EXPECT_NE(measured.err.find("--cp"), std::string::npos) << measured.err;
}

}  // namespace
