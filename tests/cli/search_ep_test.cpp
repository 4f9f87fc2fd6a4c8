// Expert parallelism as a search dimension (issue 18, "Planner and search"): --ep and
// --etp, their defaults, the layouts that cannot hold their experts rejected by filter
// "experts" with the config's own reason, and the same answer under --threads 1 and 2.
// On configs/examples/h100_mixtral_8x7b_ep8.yaml (8 experts, 64 GPUs).
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "support/support.hpp"

namespace {

using bmpipe::test::run_cli;
using nlohmann::json;

const std::string kMixtral = bmpipe::test::examples() + "h100_mixtral_8x7b_ep8.yaml";

json search_json(const std::string& args) {
  const auto r = run_cli("search " + args + " --json --quiet");
  EXPECT_EQ(r.code, 0) << r.err;
  json j = json::parse(r.out);
  j["search"].erase("wall_s");
  return j;
}

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

TEST(SearchEp, OutRefusesABestLayoutWithAnotherEpThanTheFile) {
  // The file says ep 8; searching ep 4 only, the best layout has ep 4, which --out cannot
  // write yet (experiment/write_config.hpp has no ep): exit 2 naming --out, no file.
  bmpipe::test::ScratchDir dir;
  const auto r = run_cli("search " + kMixtral +
                         " --planner off --tp 2 --pp 4 --micro-batch-size 1 --schedules 1f1b"
                         " --ep 4 --quiet --out '" +
                         dir.file("best.yaml") + "'");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--out"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--ep 8"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir.file("best.yaml")));
}

TEST(SearchEp, DenseOutputsCarryNoEpKeys) {
  const json j = search_json(bmpipe::test::examples() + "tiny.yaml --planner off");
  for (const json& l : j["layouts"]) EXPECT_FALSE(l.contains("ep")) << l.dump();
}

}  // namespace
