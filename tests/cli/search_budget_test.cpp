// Total budgets (issue 20 item 2): --max-evals and --time-limit-s bound the whole
// `search` and the whole `plan --schedule auto`, the JSON says what stopped it, and with
// --max-evals alone the answer does not depend on --threads. Also search's --margin-GiB
// and its progress line off a terminal (items 5 and the issue-21 rough edge).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>

#include "support/support.hpp"

namespace {

using bmpipe::test::run_cli;
using nlohmann::json;

using bmpipe::test::kMedium;
using bmpipe::test::kTiny;

using bmpipe::test::search_json;

TEST(SearchBudget, PlannerOffSpendsOneEvaluationPerLayoutSoMaxEvalsKeepsThatMany) {
  // tiny.yaml has 7 layouts, none rejected (1f1b at pp 1, 2, 4; interleaved vpp 2, 3, 4
  // at pp 2 and vpp 2 at pp 4, while pp x vpp <= 8 layers); with --planner off each costs
  // 1 evaluation, so --max-evals 3 keeps exactly 3 and cuts 4.
  const json all = search_json(kTiny + " --planner off");
  EXPECT_EQ(all["search"]["evaluations"], 7);
  EXPECT_EQ(all["search"]["stopped_by"], "done");
  const json cut = search_json(kTiny + " --planner off --max-evals 3");
  EXPECT_EQ(cut["search"]["evaluations"], 3);
  EXPECT_EQ(cut["search"]["stopped_by"], "evaluation limit");
  EXPECT_EQ(cut["search"]["rejected_by"]["evaluation limit"], 4);
  int planned = 0;
  for (const json& l : cut["layouts"])
    if (l["rejected"].is_null()) {
      ++planned;
    } else {
      EXPECT_NE(l["rejected"].get<std::string>().find("--max-evals 3"), std::string::npos);
    }
  EXPECT_EQ(planned, 3);
}

TEST(SearchBudget, MaxEvalsBoundsTheWholeSearchWhateverTheThreads) {
  const std::string args = kMedium + " --max-evals 1000";
  const auto one = run_cli("search " + args + " --json --quiet --threads 1");
  const auto two = run_cli("search " + args + " --json --quiet --threads 2");
  ASSERT_EQ(one.code, 0) << one.err;
  json a = json::parse(one.out), b = json::parse(two.out);
  std::int64_t sum = 0;
  for (const json& l : a["layouts"]) sum += l["evaluations"].get<std::int64_t>();
  EXPECT_LE(sum, 1000);
  EXPECT_EQ(a["search"]["evaluations"], sum);
  EXPECT_EQ(a["search"]["stopped_by"], "evaluation limit");
  a["search"].erase("wall_s");
  b["search"].erase("wall_s");
  EXPECT_EQ(a.dump(), b.dump());
  // The table says so too.
  const auto table = run_cli("search " + args + " --quiet --threads 2");
  EXPECT_NE(table.out.find("stopped by the evaluation limit"), std::string::npos) << table.out;
}

TEST(SearchBudget, PlanAutoMaxEvalsBoundsAllSchedulesTogether) {
  const auto r = run_cli("plan " + kTiny + " --schedule auto --max-evals 300 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  std::int64_t sum = 0;
  for (const json& s : j["schedules"]) sum += s["evaluations"].get<std::int64_t>();
  EXPECT_LE(sum, 300);
  EXPECT_EQ(j["schedules_search"]["evaluations"], sum);
  EXPECT_EQ(j["schedules_search"]["stopped_by"], "evaluation limit");
  // Generous enough that no schedule runs out: each converges on its own.
  const json free =
      json::parse(run_cli("plan " + kTiny + " --schedule auto --max-evals 1000000 --json").out);
  EXPECT_EQ(free["schedules_search"]["stopped_by"], "done");
}

TEST(SearchBudget, TimeLimitCutsTheSearchAndSaysSo) {
  const auto r = run_cli("search " + kMedium + " --json --quiet --time-limit-s 0.001");
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["search"]["stopped_by"], "time limit");
  EXPECT_GT(j["search"]["rejected_by"]["time limit"].get<int>(), 0);
}

TEST(SearchBudget, BadBudgetsExitTwoNamingTheOption) {
  for (const char* bad : {"--max-evals 0", "--time-limit-s 0", "--layout-evals 0",
                          "--margin-GiB -1", "--margin-GiB 1", "--progress-interval-s -1"}) {
    const auto r = run_cli("search " + kTiny + " " + bad);
    EXPECT_EQ(r.code, 2) << bad;
    const std::string option = std::string(bad).substr(0, std::string(bad).find(' '));
    EXPECT_NE(r.err.find(option), std::string::npos) << bad << ": " << r.err;
  }
}

TEST(SearchMargin, KeepsTheMarginFreeBelowTheCapacity) {
  // tiny.yaml's device has 1 GiB; a 0.25 GiB margin leaves 0.75 x 2^30 = 805306368 bytes.
  const json j = search_json(kTiny + " --planner off --margin-GiB 0.25");
  for (const json& l : j["layouts"]) EXPECT_EQ(l["capacity_bytes"], 805306368) << l.dump();
  // Below --memory-limit-GiB 0.5: 0.25 x 2^30 = 268435456.
  const json k = search_json(kTiny + " --planner off --memory-limit-GiB 0.5 --margin-GiB 0.25");
  for (const json& l : k["layouts"])
    if (l.contains("capacity_bytes")) {
      EXPECT_EQ(l["capacity_bytes"], 268435456) << l.dump();
    }
}

TEST(SearchProgress, OffATerminalOneLinePerIntervalWithAnHonestEta) {
  // stderr is a file here; interval 0: a line per layout.
  const auto r = run_cli("search " + kTiny + " --progress-interval-s 0");
  ASSERT_EQ(r.code, 0) << r.err;
  std::istringstream in(r.err);
  std::string line;
  int lines = 0;
  const std::regex shape(
      R"(search: planning, (\d+) / 7 layouts, \d+ evaluations, best (none yet|[0-9.]+ ms), )"
      R"([0-9.]+ s, ETA (<1 s|\d+ s|unknown))");
  // The screen's second pass: a line per layout planned again, the last with ETA 0.
  const std::regex again(
      R"(search: planned again (\d+) / (\d+) layouts, [0-9.]+ s, ETA (<1 s|\d+ s))");
  int passes = 0, again_lines = 0;
  while (std::getline(in, line)) {
    std::smatch m;
    if (line.rfind("search: planning the ", 0) == 0) {
      ++passes;
      continue;
    }
    if (line.rfind("search: planned again ", 0) == 0) {
      ASSERT_TRUE(std::regex_match(line, m, again)) << line;
      ++again_lines;
      EXPECT_EQ(std::stoi(m[1]), again_lines) << line;
      EXPECT_EQ(m[1] == m[2], m[3] == "0 s") << line;
      continue;
    }
    ASSERT_TRUE(std::regex_match(line, m, shape)) << line;
    EXPECT_EQ(line.find('\r'), std::string::npos);
    ++lines;
    if (std::stoi(m[1]) < 7) {
      EXPECT_EQ(line.find("ETA 0 s"), std::string::npos) << line;
    }
  }
  EXPECT_EQ(lines, 7);
  EXPECT_EQ(passes, 1);
  EXPECT_GE(again_lines, 1);
  // The default interval (5 s) on a run this short: only the first and the last layout, the
  // second pass's line, and its first and last layout.
  const auto quiet_ish = run_cli("search " + kTiny);
  EXPECT_LE(std::count(quiet_ish.err.begin(), quiet_ish.err.end(), '\n'), 5) << quiet_ish.err;
  EXPECT_TRUE(run_cli("search " + kTiny + " --quiet").err.empty());
}

}  // namespace
