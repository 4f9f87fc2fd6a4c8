// A search spread over processes (api/search_remote.hpp) without MPI: process 0's
// RemoteExecutor and two workers' serve_tasks on threads of this process, their messages
// carried by in-memory mailboxes. The answer must be the threads' byte for byte (the
// driver decides everything; the transport only carries text), the workers must have run
// tasks, and a worker's failure must reach process 0 as the transport's abort.
#include "api/search_remote.hpp"

#include <gtest/gtest.h>

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

#include "api/contracts.hpp"
#include "support/medium_search.hpp"

namespace bmpipe::search_remote_test {
namespace {

/// Every process's mailbox, shared by the processes' transports.
struct Mailboxes {
  explicit Mailboxes(int n) : boxes(static_cast<std::size_t>(n)) {}
  std::mutex mutex;
  std::condition_variable arrived;
  std::vector<std::deque<api::TaskTransport::Message>> boxes;
  int shares_sent = 0;     ///< assign messages that carried tasks
  int results_sent = 0;    ///< results messages
  std::string abort_text;  ///< what abort() was called with
};

class MemoryTransport : public api::TaskTransport {
 public:
  MemoryTransport(Mailboxes& m, int rank) : m_(m), rank_(rank) {}
  int processes() const override { return static_cast<int>(m_.boxes.size()); }
  void send(int to, int tag, const std::string& text) override {
    std::lock_guard<std::mutex> lock(m_.mutex);
    if (tag == assign && text != "end") ++m_.shares_sent;
    if (tag == results) ++m_.results_sent;
    m_.boxes[static_cast<std::size_t>(to)].push_back(Message{rank_, tag, text});
    m_.arrived.notify_all();
  }
  std::optional<Message> poll() override {
    std::lock_guard<std::mutex> lock(m_.mutex);
    auto& box = m_.boxes[static_cast<std::size_t>(rank_)];
    if (box.empty()) return std::nullopt;
    Message m = box.front();
    box.pop_front();
    return m;
  }
  Message receive(int from, int tag) override {
    std::unique_lock<std::mutex> lock(m_.mutex);
    auto& box = m_.boxes[static_cast<std::size_t>(rank_)];
    for (;;) {
      for (auto it = box.begin(); it != box.end(); ++it)
        if (it->tag == tag && (from < 0 || it->from == from)) {
          Message m = *it;
          box.erase(it);
          return m;
        }
      m_.arrived.wait(lock);
    }
  }
  [[noreturn]] void abort(int, const std::string& what) override {
    {
      std::lock_guard<std::mutex> lock(m_.mutex);
      m_.abort_text = what;
    }
    throw Aborted();
  }
  struct Aborted {};

 private:
  Mailboxes& m_;
  int rank_;
};

std::string ranked(const api::SearchSetup& s, api::SearchRun run) {
  return api::search_document(
             api::rank_search(s, std::move(run.results), 1, 0.0, run.stopped_by, run.confirmed))
      .dump();
}

TEST(SearchRemote, WorkersGiveTheThreadsAnswer) {
  api::SearchRequest r = test::medium_search_request();
  r.refine = 1;  // a pass after the first, as the workers get it too
  r.layout_evals = 200;
  const api::SearchSetup s = api::prepare_search(load_config(test::kMediumConfig), r);
  api::ThreadExecutor threads(s, 1);
  const std::string want = ranked(s, api::drive_search(s, threads));

  Mailboxes m(3);
  MemoryTransport zero(m, 0), one(m, 1), two(m, 2);
  std::thread w1([&] { api::serve_tasks(s, one, 1); });
  std::thread w2([&] { api::serve_tasks(s, two, 1); });
  api::RemoteExecutor executor(s, zero, 1);
  EXPECT_EQ(executor.processes(), 3);
  const std::string got = ranked(s, api::drive_search(s, executor));
  executor.finish();  // ends the workers
  w1.join();
  w2.join();
  EXPECT_EQ(got, want);
  EXPECT_GT(m.shares_sent, 0);  // the workers ran some of it
  EXPECT_EQ(m.results_sent, m.shares_sent);
  EXPECT_TRUE(m.abort_text.empty()) << m.abort_text;
}

TEST(SearchRemote, AWorkersFailureReachesProcessZero) {
  const api::SearchSetup s =
      api::prepare_search(load_config(test::kMediumConfig), test::medium_search_request());
  Mailboxes m(2);
  MemoryTransport zero(m, 0), one(m, 1);
  // A share that does not decode: the worker throws, says so to process 0, and rethrows.
  std::thread worker([&] { EXPECT_ANY_THROW(api::serve_tasks(s, one, 1)); });
  zero.receive(1, api::TaskTransport::request);
  zero.send(1, api::TaskTransport::assign, "not a share");
  const api::TaskTransport::Message failure = zero.receive(1, api::TaskTransport::failure);
  worker.join();
  EXPECT_FALSE(failure.text.empty());
}

TEST(SearchRemote, EveryProcessAgreesOnTheWorstSetupAndProcessZeroSaysTheFirstWhy) {
  // Three processes on threads: process 1 failed with an internal error, process 2 with
  // bad input, process 0 was ready. All three must leave with 70, the worst; process 0
  // alone learns a message, the first failing process's (1), named as such.
  Mailboxes boxes(3);
  const api::SetupState states[3] = {{0, ""}, {70, "internal error: x"}, {2, "--tp: bad"}};
  api::SetupVerdict verdicts[3];
  std::vector<std::thread> others;
  for (int r = 1; r < 3; ++r)
    others.emplace_back([&, r] {
      MemoryTransport t(boxes, r);
      verdicts[r] = api::agree_on_setup(t, r, states[r]);
    });
  MemoryTransport zero(boxes, 0);
  verdicts[0] = api::agree_on_setup(zero, 0, states[0]);
  for (std::thread& t : others) t.join();
  for (const api::SetupVerdict& v : verdicts) EXPECT_EQ(v.code, 70);
  EXPECT_EQ(verdicts[0].message, "process 1: internal error: x");
  EXPECT_EQ(verdicts[1].message, "");
  EXPECT_EQ(verdicts[2].message, "");

  // Process 0's own error comes first, without a process number; a code without a message
  // (a usage error printed already) still counts; all ready is 0 and no message.
  Mailboxes two(2);
  std::thread one([&] {
    MemoryTransport t(two, 1);
    EXPECT_EQ(api::agree_on_setup(t, 1, {2, ""}).code, 2);
  });
  MemoryTransport z(two, 0);
  const api::SetupVerdict v = api::agree_on_setup(z, 0, {2, "--top: must be at least 1"});
  one.join();
  EXPECT_EQ(v.code, 2);
  EXPECT_EQ(v.message, "--top: must be at least 1");
  Mailboxes ready(2);
  std::thread other([&] {
    MemoryTransport t(ready, 1);
    EXPECT_EQ(api::agree_on_setup(t, 1, {}).code, 0);
  });
  MemoryTransport r0(ready, 0);
  const api::SetupVerdict ok = api::agree_on_setup(r0, 0, {});
  other.join();
  EXPECT_EQ(ok.code, 0);
  EXPECT_EQ(ok.message, "");
}

TEST(SearchRemote, ASetupsErrorsAreSortedIntoBadInputAndBugs) {
  EXPECT_EQ(api::setup_state([] {}).code, 0);
  const api::SetupState request =
      api::setup_state([] { throw api::RequestError("--top", "must be at least 1"); });
  EXPECT_EQ(request.code, 2);
  EXPECT_EQ(request.error, "--top: must be at least 1");
  const api::SetupState config =
      api::setup_state([] { throw ConfigError("c.yaml", 3, "training.pp", "must be >= 1"); });
  EXPECT_EQ(config.code, 2);
  EXPECT_EQ(config.error, "c.yaml:3: training.pp: must be >= 1");  // FILE:LINE: key: what
  const api::SetupState bug = api::setup_state([] { throw std::logic_error("oops"); });
  EXPECT_EQ(bug.code, 70);
  EXPECT_EQ(bug.error, "internal error: oops");
}

}  // namespace
}  // namespace bmpipe::search_remote_test
