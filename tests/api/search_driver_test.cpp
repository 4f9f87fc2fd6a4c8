// The search's one driver (api/search_driver.hpp, issue 38 item 3): the passes are the
// driver's, the executor only runs tasks, so an executor that runs them in another order,
// through the transport's text (as the MPI one does), gives the threads' answer byte for
// byte; and the progress the library reports is the whole run's.
#include "api/search_driver.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>

#include "api/contracts.hpp"
#include "support/medium_search.hpp"

namespace bmpipe::search_driver_test {
namespace {

const std::string& kMedium = test::kMediumConfig;

/// As a transport does it, without MPI: a chunk of the feed's size for 3 processes at a
/// time, sent as text (encode_share), run last task first on one thread, its outcomes back
/// as text (encode_outcome), put back last first.
class ReversedTransport : public api::SearchExecutor {
 public:
  explicit ReversedTransport(const api::SearchSetup& s) : s_(s) {}
  int processes() const override { return 3; }
  void run(const api::SearchPass& pass, api::TaskFeed& feed) override {
    for (;;) {
      std::vector<api::SearchTask> tasks;
      const std::size_t want = feed.chunk(3);
      while (tasks.size() < want)
        if (const auto task = feed.take())
          tasks.push_back(*task);
        else
          break;
      if (tasks.empty()) return;
      ++chunks;
      const auto [got_pass, got_tasks] = api::decode_share(api::encode_share(pass, tasks));
      EXPECT_EQ(got_tasks.size(), tasks.size());
      std::vector<api::SearchTask> reversed(got_tasks.rbegin(), got_tasks.rend());
      const std::vector<api::TaskOutcome> out = api::run_tasks(s_, got_pass, reversed, 1);
      for (std::size_t k = 0; k < reversed.size(); ++k)
        feed.put(reversed[k].layout, api::decode_outcome(api::encode_outcome(out[k])));
    }
  }
  int chunks = 0;

 private:
  const api::SearchSetup& s_;
};

std::string ranked(const api::SearchSetup& s, api::SearchRun run) {
  return api::search_document(
             api::rank_search(s, std::move(run.results), 1, 0.0, run.stopped_by, run.confirmed))
      .dump();
}

api::SearchRequest medium() {
  return test::medium_search_request();
}

TEST(SearchDriver, AnyExecutorGivesTheThreadsAnswer) {
  const Config config = load_config(kMedium);
  // With the bound, the screen's second pass and --refine within what --max-evals
  // leaves; the bound cut by the budget mid-way; enumeration order (guided chunks); one
  // simulation a layout.
  std::vector<api::SearchRequest> requests(4, medium());
  requests[0].refine = 2;
  requests[0].layout_evals = 300;
  requests[0].max_evals = 6000;
  requests[1].max_evals = 900;
  requests[2].bound = false;
  requests[3].effort = PlannerEffort::off;
  for (std::size_t k = 0; k < requests.size(); ++k) {
    const api::SearchSetup s = api::prepare_search(config, requests[k]);
    api::ThreadExecutor threads(s, 2);
    ReversedTransport transport(s);
    const std::string want = ranked(s, api::drive_search(s, threads));
    EXPECT_EQ(ranked(s, api::drive_search(s, transport)), want) << "request " << k;
    EXPECT_GT(transport.chunks, 1) << "request " << k;
  }
}

/// Counts what the driver reports.
class Counter : public api::SearchObserver {
 public:
  void layout(const LayoutResult&, const api::SearchProgress& p) override {
    EXPECT_EQ(p.done, ++layouts);
    last = p;
  }
  void pass_started(const api::SearchPass& pass) override {
    passes.push_back(pass);
    pass_done = 0;
  }
  void pass_progress(const api::SearchPass& pass, const api::PassProgress& p) override {
    EXPECT_EQ(p.total, pass.layouts);
    EXPECT_EQ(p.done, ++pass_done);
    EXPECT_EQ(p.eta_s == 0, p.done == p.total) << p.done << " of " << p.total;
  }
  std::size_t layouts = 0, pass_done = 0;
  api::SearchProgress last;
  std::vector<api::SearchPass> passes;
};

TEST(SearchDriver, ReportsEveryLayoutAndEveryPassWithAnEta) {
  api::SearchRequest r = medium();
  r.refine = 1;
  r.layout_evals = 200;
  const api::SearchSetup s = api::prepare_search(load_config(kMedium), r);
  api::ThreadExecutor threads(s, 2);
  Counter counter;
  const api::SearchRun run = api::drive_search(s, threads, &counter);
  // Every layout settles once, the last with nothing left: ETA 0.
  EXPECT_EQ(counter.layouts, s.layouts.size());
  EXPECT_EQ(counter.last.done, counter.last.total);
  ASSERT_TRUE(counter.last.eta_s.has_value());
  EXPECT_EQ(*counter.last.eta_s, 0.0);
  std::int64_t evaluations = 0;
  for (const LayoutResult& l : run.results) evaluations += l.evaluations;
  EXPECT_LT(counter.last.evaluations, evaluations);  // the passes after it spent more
  // Two passes after the first: the screen's (quick, the confirmed layouts), --refine's
  // (full, one layout), each reporting every layout it planned.
  ASSERT_EQ(counter.passes.size(), 2u);
  EXPECT_EQ(counter.passes[0].effort, PlannerEffort::quick);
  EXPECT_EQ(counter.passes[0].layouts, run.confirmed);
  EXPECT_EQ(counter.passes[1].effort, PlannerEffort::full);
  EXPECT_EQ(counter.passes[1].layouts, 1u);
  EXPECT_EQ(counter.pass_done, 1u);
}

TEST(SearchDriver, ShareRoundTripsItsPassAndTasks) {
  const api::SearchPass pass{api::SearchPass::Kind::again, PlannerEffort::full, 123, 7};
  const auto [p, t] = api::decode_share(
      api::encode_share(pass, {api::SearchTask{5, 1.25}, api::SearchTask{2, std::nullopt}}));
  EXPECT_EQ(p.kind, api::SearchPass::Kind::again);
  EXPECT_EQ(p.effort, PlannerEffort::full);
  EXPECT_EQ(p.share, std::optional<std::int64_t>(123));
  EXPECT_EQ(p.layouts, 7u);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].layout, 5u);
  EXPECT_EQ(t[0].seconds, std::optional<double>(1.25));
  EXPECT_EQ(t[1].layout, 2u);
  EXPECT_FALSE(t[1].seconds.has_value());
}

}  // namespace
}  // namespace bmpipe::search_driver_test
