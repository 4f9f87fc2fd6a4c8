// Determinism of resumed searches on a mixture-of-experts model (issue 42, "Determinism
// stays ... journals resumed at any point, MoE searches"): a search journaled, its journal
// cut after every complete line and once in the middle of a line, resumed under another
// --threads, gives the uninterrupted run's bytes. The other journal tests cut dense searches
// at a few points (tests/api/search_journal_test.cpp) or at every line of tiny.yaml's
// (tests/cli/search_bound_test.cpp); tests/cli/search_ep_test.cpp compares an MoE search
// without a journal under one and two threads. Here: Mixtral 8x7B (8 experts, 64 H100s)
// with ep and the V schedules, through the executable with the bound (the queue's path)
// and through the library without it (--planner off: the parallel loop's path).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "api/api.hpp"
#include "api/search_journal.hpp"
#include "support/support.hpp"

namespace bmpipe::search_journal_resume_test {
namespace {

using test::ScratchDir;
using test::slurp;

const std::string kMixtral = test::examples() + "h100_mixtral_8x7b_ep8.yaml";

/// The output without its wall time (the one thing two runs may not share).
std::string masked(const std::string& out) {
  return std::regex_replace(out, std::regex(R"("wall_s": [0-9.e+-]+)"), "\"wall_s\": W");
}

/// Where each line of `text` ends (one past its newline).
std::vector<std::size_t> line_ends(const std::string& text) {
  std::vector<std::size_t> ends;
  for (std::size_t k = text.find('\n'); k != std::string::npos; k = text.find('\n', k + 1))
    ends.push_back(k + 1);
  return ends;
}

TEST(SearchJournalResume, MoeSearchWithTheBoundResumedAtEveryLineUnderEitherThreadCount) {
  // 8 layouts (tp 2, pp 4 and 8, 1f1b and DualPipeV, ep 2 and 8), some skipped by the
  // bound, a second pass of the screen after them.
  const std::string args = "search " + kMixtral +
                           " --tp 2 --pp 4,8 --micro-batch-size 1 --schedules 1f1b,dualpipe-v"
                           " --ep 2,8 --screen-evals 16 --json --quiet";
  ScratchDir dir;
  const std::string journal = dir.file("j.jsonl");
  const test::CliRun whole = test::run_cli(args + " --threads 2 --journal " + journal);
  ASSERT_EQ(whole.code, 0) << whole.err;
  const std::string want = masked(whole.out);
  // The same bytes under one thread, without a journal.
  const test::CliRun one = test::run_cli(args + " --threads 1");
  ASSERT_EQ(one.code, 0) << one.err;
  EXPECT_EQ(masked(one.out), want);
  const nlohmann::json doc = nlohmann::json::parse(whole.out);
  ASSERT_TRUE(doc["layouts"][0]["fits"].get<bool>());
  EXPECT_EQ(doc["layouts"][0].count("ep"), 1u);  // an MoE document
  EXPECT_GT(doc["search"]["rejected_by"].value("bound", 0), 0);
  const std::string text = slurp(journal);
  const std::vector<std::size_t> ends = line_ends(text);
  ASSERT_EQ(ends.size(), 9u);  // the header and the 8 layouts
  // Cut after k complete lines, k = 1 (the header alone) to all of them; one thread and two
  // in turn.
  for (std::size_t k = 1; k <= ends.size(); ++k) {
    test::write_file(journal, text.substr(0, ends[k - 1]));
    const std::string threads = k % 2 == 0 ? " --threads 2" : " --threads 1";
    const test::CliRun r = test::run_cli(args + threads + " --journal " + journal);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(masked(r.out), want) << "journal cut after line " << k;
    // The lines kept are read back, not planned and written again.
    const std::string after = slurp(journal);
    EXPECT_EQ(after.substr(0, ends[k - 1]), text.substr(0, ends[k - 1])) << k;
    EXPECT_EQ(line_ends(after).size(), ends.size()) << k;
  }
  // A torn last line: half of the fifth line, without its newline.
  test::write_file(journal, text.substr(0, ends[3] + (ends[4] - ends[3]) / 2));
  const test::CliRun torn = test::run_cli(args + " --threads 2 --journal " + journal);
  ASSERT_EQ(torn.code, 0) << torn.err;
  EXPECT_NE(torn.err.find(": line 5 was torn"), std::string::npos) << torn.err;
  EXPECT_EQ(masked(torn.out), want);
  EXPECT_EQ(line_ends(slurp(journal)).size(), ends.size());
}

TEST(SearchJournalResume, MoeSearchWithoutTheBoundResumedAtEveryLineAndTornLine) {
  // 18 layouts simulated once each (--planner off), in the order threads finish them,
  // 3 rejected by filter "memory" (tp 2 layouts of an MoE model run with sequence
  // parallelism, as Megatron-LM requires: issue 41).
  api::SearchRequest request;
  request.effort = PlannerEffort::off;
  request.space.tp = {2};
  request.space.pp = {2, 4, 8};
  request.space.micro_batch_size = {1};
  request.space.schedules = {"1f1b", "zb-v", "dualpipe-v"};
  request.space.ep = {2, 8};
  const Config config = load_config(kMixtral);
  const auto dumped = [](nlohmann::json doc) {
    doc["search"].erase("wall_s");
    return doc.dump();
  };
  ScratchDir dir;
  const api::JournalRequest j{dir.file("j.jsonl"), 7};
  request.threads = 1;
  const std::string want = dumped(api::run_search(config, request, j));
  const nlohmann::json doc = nlohmann::json::parse(want);
  EXPECT_EQ(doc["search"]["layouts"], 18);
  EXPECT_EQ(doc["search"]["rejected_by"].value("memory", 0), 3);
  const std::string text = slurp(j.path);
  const std::vector<std::size_t> ends = line_ends(text);
  ASSERT_EQ(ends.size(), 19u);
  request.threads = 2;
  for (std::size_t k = 1; k <= ends.size(); ++k) {
    test::write_file(j.path, text.substr(0, ends[k - 1]));
    EXPECT_EQ(dumped(api::run_search(config, request, j)), want) << "cut after line " << k;
    EXPECT_EQ(line_ends(slurp(j.path)).size(), ends.size()) << k;
    if (k == ends.size()) break;
    // The next line torn in its middle: dropped with a note, planned again.
    test::write_file(j.path, text.substr(0, ends[k - 1] + (ends[k] - ends[k - 1]) / 2));
    std::vector<std::string> notes;
    EXPECT_EQ(dumped(api::run_search(config, request, j,
                                     [&](const std::string& n) { notes.push_back(n); })),
              want)
        << "torn line " << k + 1;
    EXPECT_EQ(notes.size(), 1u) << k;
  }
}

}  // namespace
}  // namespace bmpipe::search_journal_resume_test
