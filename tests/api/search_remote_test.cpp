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

}  // namespace
}  // namespace bmpipe::search_remote_test
