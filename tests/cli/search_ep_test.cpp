// Expert parallelism as a search dimension (issue 18, "Planner and search"): --ep and
// --etp, their defaults, the layouts that cannot hold their experts rejected by filter
// "experts" with the config's own reason, the same answer under --threads 1 and 2, and
// ep and etp in the CSV and in the --out config (which simulates to the searched time).
// On configs/examples/h100_mixtral_8x7b_ep8.yaml (8 experts, 64 GPUs).
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "experiment/config.hpp"
#include "support/support.hpp"

namespace {

using bmpipe::test::run_cli;
using nlohmann::json;

const std::string kMixtral = bmpipe::test::examples() + "h100_mixtral_8x7b_ep8.yaml";

using bmpipe::test::search_json;

TEST(SearchEp, ListsEpValuesAndRejectsWhatCannotHoldItsExperts) {
  // tp 2, 1f1b, mbs 1. pp 4: dp 8, a stage's tp x dp = 16 devices: ep 1, 2, 4, 8 fold in,
  // 16 does not divide the 8 experts. pp 16: dp 2, 4 devices: ep 1, 2, 4 fold in; 8 is
  // more than the 4 devices, 16 divides nothing. 10 layouts, 3 rejected by "experts".
  const json j = search_json(kMixtral +
                             " --planner off --tp 2 --pp 4,16 --micro-batch-size 1"
                             " --schedules 1f1b --ep 1,2,4,8,16");
  EXPECT_EQ(j["search"]["layouts"], 10);
  EXPECT_EQ(j["search"]["rejected_by"]["experts"], 3);
  std::set<std::pair<int, int>> kept, refused;  // (pp, ep)
  for (const json& l : j["layouts"]) {
    ASSERT_TRUE(l.contains("ep") && l.contains("etp")) << l.dump();
    EXPECT_EQ(l["etp"], 1);
    if (l.value("filter", "") == "experts") {
      refused.insert({l["pp"].get<int>(), l["ep"].get<int>()});
      const std::string why = l["rejected"];
      if (l["ep"] == 16) {
        EXPECT_NE(why.find("does not divide the 8 experts"), std::string::npos) << why;
      }
      if (l["ep"] == 8) {
        EXPECT_NE(why.find("more than the tp x dp = 4 devices"), std::string::npos) << why;
      }
    } else {
      kept.insert({l["pp"].get<int>(), l["ep"].get<int>()});
    }
  }
  EXPECT_EQ(refused, (std::set<std::pair<int, int>>{{4, 16}, {16, 8}, {16, 16}}));
  EXPECT_EQ(kept, (std::set<std::pair<int, int>>{
                      {4, 1}, {4, 2}, {4, 4}, {4, 8}, {16, 1}, {16, 2}, {16, 4}}));
}

TEST(SearchEp, DefaultsToEveryDivisorOfTheExpertsAndEtpOne) {
  const json j = search_json(kMixtral +
                             " --planner off --tp 2 --pp 4 --micro-batch-size 1"
                             " --schedules 1f1b");
  std::set<int> eps;
  for (const json& l : j["layouts"]) {
    eps.insert(l["ep"].get<int>());
    EXPECT_EQ(l["etp"], 1);
  }
  EXPECT_EQ(eps, (std::set<int>{1, 2, 4, 8}));
}

TEST(SearchEp, SameAnswerUnderOneAndTwoThreads) {
  const std::string args = kMixtral +
                           " --tp 2 --pp 4 --micro-batch-size 1 --schedules 1f1b --ep 4,8"
                           " --etp 1,2";
  EXPECT_EQ(search_json(args + " --threads 1").dump(), search_json(args + " --threads 2").dump());
}

TEST(SearchEp, DenseModelsRefuseEpAboveOne) {
  const auto r = run_cli("search " + bmpipe::test::examples() + "tiny.yaml --ep 2 --quiet");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--ep"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("no experts"), std::string::npos) << r.err;
}

TEST(SearchEp, OutWritesTheBestLayoutsEpAndEtp) {
  // The file says ep 8, etp 1; the search tries ep 4 with etp 2 only (tp 2 x dp 8 = 16
  // devices per stage hold etp x ep = 8), so the best layout has ep 4 and etp 2, and the
  // written config must say so and simulate to the time the search reported.
  bmpipe::test::ScratchDir dir;
  const std::string out = dir.file("best.yaml");
  const json j = search_json(kMixtral +
                             " --planner off --tp 2 --pp 4 --micro-batch-size 1 --schedules 1f1b"
                             " --ep 4 --etp 2 --out '" +
                             out + "'");
  const json& best = j["layouts"][0];
  ASSERT_TRUE(best["fits"].get<bool>()) << best.dump();
  EXPECT_EQ(best["ep"], 4);
  EXPECT_EQ(best["etp"], 2);
  const bmpipe::Config written = bmpipe::load_config(out);
  EXPECT_EQ(written.training.ep, 4);
  EXPECT_EQ(written.training.etp, 2);
  EXPECT_EQ(written.training.tp, 2);
  EXPECT_EQ(written.training.pp, 4);
  // An MoE layout at tp 2 runs with sequence parallelism (Megatron-Core's MoELayer refuses
  // it otherwise; layout_config turns it on): the file says so.
  EXPECT_TRUE(written.training.sequence_parallel);
  const auto sim = run_cli("simulate '" + out + "' --json");
  ASSERT_EQ(sim.code, 0) << sim.err;
  EXPECT_EQ(json::parse(sim.out)["iteration_time_ms"], best["iteration_time_ms"]);
}

TEST(SearchEp, FormatExportsTheBestLayoutsEp) {
  // --format megatron states the best layout's experts, not the file's ep 8.
  const auto r = run_cli("search " + kMixtral +
                         " --planner off --tp 2 --pp 4 --micro-batch-size 1 --schedules 1f1b"
                         " --ep 4 --quiet --format megatron");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("--expert-model-parallel-size 4"), std::string::npos) << r.out;
}

TEST(SearchEp, CsvHasEpAndEtpColumns) {
  bmpipe::test::ScratchDir dir;
  const std::string csv = dir.file("layouts.csv");
  const json j = search_json(kMixtral +
                             " --planner off --tp 2 --pp 4 --micro-batch-size 1 --schedules 1f1b"
                             " --ep 2,4 --etp 1,2 --csv '" +
                             csv + "'");
  const std::string text = bmpipe::test::slurp(csv);
  std::vector<std::vector<std::string>> rows;
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t end = text.find('\n', at);
    const std::string line = text.substr(at, end - at);
    std::vector<std::string> cells;
    std::size_t c = 0;
    while (true) {
      const std::size_t comma = line.find(',', c);
      cells.push_back(line.substr(c, comma - c));
      if (comma == std::string::npos) break;
      c = comma + 1;
    }
    rows.push_back(cells);
    at = end + 1;
  }
  ASSERT_GE(rows.size(), 2u);
  const auto column = [&](const std::string& name) {
    for (std::size_t i = 0; i < rows[0].size(); ++i)
      if (rows[0][i] == name) return i;
    ADD_FAILURE() << "no column " << name << " in " << text.substr(0, text.find('\n'));
    return std::size_t{0};
  };
  const std::size_t ep = column("ep"), etp = column("etp");
  // One row per layout, in the JSON's order: 2 ep x 2 etp = 4 layouts.
  ASSERT_EQ(rows.size(), 1 + j["layouts"].size());
  ASSERT_EQ(j["layouts"].size(), 4u);
  std::set<std::pair<int, int>> got;
  for (std::size_t i = 1; i < rows.size(); ++i) {
    EXPECT_EQ(std::stoi(rows[i][ep]), j["layouts"][i - 1]["ep"].get<int>());
    EXPECT_EQ(std::stoi(rows[i][etp]), j["layouts"][i - 1]["etp"].get<int>());
    got.insert({std::stoi(rows[i][ep]), std::stoi(rows[i][etp])});
  }
  EXPECT_EQ(got, (std::set<std::pair<int, int>>{{2, 1}, {2, 2}, {4, 1}, {4, 2}}));
}

TEST(SearchEp, DenseOutputsCarryNoEpKeys) {
  const json j = search_json(bmpipe::test::examples() + "tiny.yaml --planner off");
  for (const json& l : j["layouts"]) EXPECT_FALSE(l.contains("ep")) << l.dump();
}

}  // namespace
