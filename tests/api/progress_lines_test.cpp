// The progress lines of plan and search (api/progress_lines.hpp), written out by hand: what
// a line says off a terminal, when one is due (every interval, and always the last), and
// that --quiet prints nothing.
#include "api/progress_lines.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace bmpipe::progress_lines_test {
namespace {

TEST(ProgressLines, SearchLinesOffATerminal) {
  std::vector<std::string> printed;
  const api::SearchRequest request;
  api::SearchProgressLines lines([&](const std::string& t) { printed.push_back(t); }, false, false,
                                 5.0, request, 3);
  api::SearchProgress p;
  p.done = 1, p.total = 4, p.evaluations = 120, p.best = 1'500'000, p.elapsed_s = 6.04;
  p.eta_s = 2.2;  // rounded up: 3 s
  lines.layout(LayoutResult{}, p);
  p.done = 2, p.elapsed_s = 7.0;  // 0.96 s after the last line: not due
  lines.layout(LayoutResult{}, p);
  p.done = 4, p.elapsed_s = 8.0;  // the last is always printed, ETA 0
  p.best.reset();
  lines.layout(LayoutResult{}, p);
  ASSERT_EQ(printed.size(), 2u);
  EXPECT_EQ(printed[0],
            "search: planning, 1 / 4 layouts, 120 evaluations, best 1.5 ms, 6.0 s, 3 processes, "
            "ETA 3 s\n");
  EXPECT_EQ(printed[1],
            "search: planning, 4 / 4 layouts, 120 evaluations, best none yet, 8.0 s, 3 "
            "processes, ETA 0 s\n");
}

TEST(ProgressLines, SearchPassLinesSayThePass) {
  std::vector<std::string> printed;
  api::SearchRequest request;
  request.layout_evals = 700;
  api::SearchProgressLines lines([&](const std::string& t) { printed.push_back(t); }, false, false,
                                 0.0, request, 1);
  lines.pass_started(api::SearchPass{api::SearchPass::Kind::again, PlannerEffort::full, 50, 1});
  lines.pass_progress(api::SearchPass{}, api::PassProgress{1, 1, 2.24, 0});
  ASSERT_EQ(printed.size(), 2u);
  EXPECT_EQ(printed[0],
            "search: planning the 1 fastest layout again with the full planner (--refine, 700 "
            "evaluations each), at most 50 evaluations each\n");
  EXPECT_EQ(printed[1], "search: planned again 1 / 1 layouts, 2.2 s, ETA 0 s\n");
}

TEST(ProgressLines, QuietPrintsNothing) {
  std::vector<std::string> printed;
  const api::SearchRequest request;
  api::SearchProgressLines search([&](const std::string& t) { printed.push_back(t); }, true, true,
                                  0.0, request, 1);
  search.layout(LayoutResult{}, api::SearchProgress{});
  search.clear();
  {
    api::PlanProgressLines plan([&](const std::string& t) { printed.push_back(t); }, false, true,
                                0.0, 100, std::nullopt);
    plan.show("1f1b", PlannerProgress{});
    plan.clear();
  }
  EXPECT_TRUE(printed.empty());
}

}  // namespace
}  // namespace bmpipe::progress_lines_test
