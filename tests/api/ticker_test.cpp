// api::Ticker, the progress line of work that cannot count its steps (simulate, compare,
// report): what it hands its printer, on a terminal and off one. The lines are written out
// by hand from the format "<command>: <phase>, <seconds> s".
#include "api/ticker.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <regex>
#include <string>
#include <thread>
#include <vector>

namespace bmpipe::ticker_test {
namespace {

/// What a Ticker printed, safe to read while its thread runs.
struct Printed {
  std::mutex m;
  std::vector<std::string> lines;
  std::function<void(const std::string&)> sink() {
    return [this](const std::string& text) {
      const std::lock_guard<std::mutex> lock(m);
      lines.push_back(text);
    };
  }
  std::vector<std::string> get() {
    const std::lock_guard<std::mutex> lock(m);
    return lines;
  }
  /// Waits (at most 10 s) until `n` texts were printed.
  bool wait_for(std::size_t n) {
    for (int i = 0; i < 1000; ++i) {
      if (get().size() >= n) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
};

TEST(Ticker, QuietPrintsNothing) {
  Printed p;
  {
    api::Ticker t("simulate", p.sink(), false, false, 0.0);
    t.phase("simulating");
    t.note("this may take 3 minutes");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    t.stop();
  }
  EXPECT_TRUE(p.get().empty());
}

TEST(Ticker, OffATerminalANoteIsOneLine) {
  Printed p;
  api::Ticker t("report", p.sink(), true, false, 60.0);  // no tick within the test
  t.note("planning may take 2 minutes");
  t.stop();
  EXPECT_EQ(p.get(), std::vector<std::string>{"report: planning may take 2 minutes\n"});
}

TEST(Ticker, OffATerminalEachTickIsALineWithThePhaseAndTheSeconds) {
  Printed p;
  api::Ticker t("compare", p.sink(), true, false, 0.05);
  t.phase("making the zb-v schedule");
  ASSERT_TRUE(p.wait_for(1));
  t.stop();
  const std::string first = p.get().front();
  EXPECT_TRUE(
      std::regex_match(first, std::regex("compare: making the zb-v schedule, [0-9]+\\.[0-9] s\n")))
      << first;
  // stop() off a terminal erases nothing: every text printed is a whole line.
  for (const std::string& line : p.get()) EXPECT_EQ(line.back(), '\n') << line;
}

TEST(Ticker, OnATerminalTheLineIsRedrawnInPlaceAndErasedAtStop) {
  Printed p;
  api::Ticker t("simulate", p.sink(), true, true, 5.0);
  t.phase("simulating");
  ASSERT_TRUE(p.wait_for(1));  // the first draw, half a second in
  t.note("a note");
  t.stop();
  const std::vector<std::string> lines = p.get();
  ASSERT_GE(lines.size(), 3u);
  EXPECT_TRUE(std::regex_match(lines[0], std::regex("\rsimulate: simulating, [0-9]+\\.[0-9] s   ")))
      << lines[0];
  // The note clears the live line first; stop() blanks it (100 spaces) and returns.
  EXPECT_EQ(lines[lines.size() - 2], "\r\033[Ksimulate: a note\n");
  EXPECT_EQ(lines.back(), "\r" + std::string(100, ' ') + "\r");
}

}  // namespace
}  // namespace bmpipe::ticker_test
