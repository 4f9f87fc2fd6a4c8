// bmpipe search --journal (issue 20 item 3): a search killed with SIGKILL and rerun with
// its journal prints byte for byte what an uninterrupted run prints (wall time aside); a
// journal of other inputs is refused with exit 2; a torn last line is dropped and cut off.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <regex>
#include <string>
#include <thread>

#include "support/support.hpp"

namespace {

using bmpipe::test::run_cli;
using bmpipe::test::ScratchDir;
using bmpipe::test::slurp;

const std::string kGpt3 = bmpipe::test::examples() + "gpt3_175b_a100.yaml";
using bmpipe::test::kTiny;
// 28 layouts, about half a second on one thread (ten times that under the sanitizers):
// time to kill it part-way.
const std::string kArgs = bmpipe::test::medium_search_args() + " --threads 1 --quiet";

/// The output without its wall time (the one thing two runs may not share).
std::string masked(const std::string& out) {
  return std::regex_replace(
      std::regex_replace(out, std::regex(R"("wall_s": [0-9.e+-]+)"), "\"wall_s\": W"),
      std::regex(R"(process, [0-9.]+ s)"), "process, W s");
}

std::size_t lines_of(const std::string& path) {
  const std::string t = slurp(path);
  return static_cast<std::size_t>(std::count(t.begin(), t.end(), '\n'));
}

/// Starts `bmpipe search kArgs --journal J --json`, kills it with SIGKILL once J has
/// `lines` lines (the header and lines - 1 layouts). False if it finished first.
bool kill_after(const std::string& journal, std::size_t lines) {
  const pid_t pid = fork();
  if (pid == 0) {
    if (!freopen("/dev/null", "w", stdout)) _exit(99);
    const std::string cmd = std::string("exec ") + BMPIPE_BINARY + " search " + kArgs +
                            " --json --journal '" + journal + "'";
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(98);
  }
  for (int i = 0; i < 6000 && lines_of(journal) < lines; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFSIGNALED(status);
}

TEST(SearchJournal, ResumeAfterSigkillAtSeveralPointsIsByteIdentical) {
  ScratchDir dir;
  const auto a = run_cli("search " + kArgs + " --json --csv " + dir.file("a.csv"));
  ASSERT_EQ(a.code, 0) << a.err;
  const auto table_a = run_cli("search " + kArgs);
  // One journal, killed twice (after the first layout, then after the third, the second
  // run resuming from the first's lines), then completed: every resume reads back what
  // the killed runs wrote. (One journal for both kills keeps the test short under ASan.)
  const std::string journal = dir.file("journal");
  for (std::size_t at : {2u, 4u}) {
    ASSERT_TRUE(kill_after(journal, at)) << "the search ended before it was killed at " << at;
    ASSERT_GE(lines_of(journal), at);
  }
  const auto b =
      run_cli("search " + kArgs + " --json --csv " + dir.file("b.csv") + " --journal " + journal);
  ASSERT_EQ(b.code, 0) << b.err;
  EXPECT_EQ(masked(b.out), masked(a.out));
  EXPECT_EQ(slurp(dir.file("b.csv")), slurp(dir.file("a.csv")));
  EXPECT_EQ(lines_of(journal), 29u);  // the header and the 28 layouts
  // A third run reads every layout back: the table too is the uninterrupted run's.
  const auto c = run_cli("search " + kArgs + " --journal " + journal);
  EXPECT_EQ(masked(c.out), masked(table_a.out));
}

TEST(SearchJournal, AJournalOfOtherInputsIsRefused) {
  ScratchDir dir;
  const std::string journal = dir.file("j");
  ASSERT_EQ(run_cli("search " + kTiny + " --quiet --journal " + journal).code, 0);
  const std::string before = slurp(journal);
  for (const char* other : {" --seed 2", " --planner off", " --margin-GiB 0.1"}) {
    const auto r = run_cli("search " + kTiny + other + " --quiet --journal " + journal);
    EXPECT_EQ(r.code, 2) << other;
    EXPECT_NE(r.err.find("--journal"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("written for other inputs"), std::string::npos) << r.err;
  }
  // Another config (the same options) too.
  const auto r = run_cli("search " + kGpt3 + " --tp 8 --pp 16 --quiet --journal " + journal);
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(slurp(journal), before);
  // What does not change a result may differ.
  EXPECT_EQ(run_cli("search " + kTiny + " --quiet --threads 1 --top 2 --journal " + journal).code,
            0);
  // Not a journal at all.
  const std::string junk = bmpipe::test::write_file(dir.file("junk"), "hello\n");
  const auto j = run_cli("search " + kTiny + " --quiet --journal " + junk);
  EXPECT_EQ(j.code, 2);
  EXPECT_NE(j.err.find("not a bmpipe search journal"), std::string::npos) << j.err;
}

TEST(SearchJournal, ATornLastLineIsDroppedAndCutOff) {
  ScratchDir dir;
  const std::string journal = dir.file("j");
  const auto a = run_cli("search " + kTiny + " --quiet --json --journal " + journal);
  ASSERT_EQ(a.code, 0);
  const std::string whole = slurp(journal);
  // Drop the last layout's line and leave half of it, as a kill in mid-write would.
  const std::size_t last = whole.rfind('\n', whole.size() - 2) + 1;
  bmpipe::test::write_file(journal, whole.substr(0, last + (whole.size() - last) / 2));
  const auto b = run_cli("search " + kTiny + " --quiet --json --journal " + journal);
  ASSERT_EQ(b.code, 0) << b.err;
  EXPECT_NE(b.err.find("torn"), std::string::npos) << b.err;
  EXPECT_EQ(masked(b.out), masked(a.out));
  EXPECT_EQ(slurp(journal), whole);  // cut off, then the layout written again
  // A bad line that is not the last: refused, not guessed at.
  std::string broken = whole;
  broken.insert(whole.find('\n') + 1, "{oops\n");
  bmpipe::test::write_file(journal, broken);
  const auto c = run_cli("search " + kTiny + " --quiet --journal " + journal);
  EXPECT_EQ(c.code, 2);
  EXPECT_NE(c.err.find("line 2"), std::string::npos) << c.err;
}

}  // namespace
