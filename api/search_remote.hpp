#pragma once
/// \file
/// A search spread over processes, whatever carries the messages: process 0 runs the
/// driver (drive_search) with a RemoteExecutor, which hands each pass's tasks out in chunks
/// as workers ask for them, runs tasks on its own threads meanwhile and puts back every
/// outcome; every other process runs serve_tasks, running what it is sent. Each outcome
/// depends only on its layout and pass, so the answer is the one ThreadExecutor gives,
/// whatever the number of processes. The executable's MPI (cli/search_mpi.cpp) is one
/// TaskTransport; the library has no MPI.

#include <optional>
#include <string>
#include <vector>

#include "api/search_driver.hpp"

namespace bmpipe::api {

/// Text messages between numbered processes, as a search's tasks travel. Process 0 drives.
/// Only one thread of a process calls it.
class TaskTransport {
 public:
  enum Tag : int {
    request = 1,  ///< a worker asks for tasks (empty text)
    assign = 2,   ///< process 0 sends a share (encode_share) or "end"
    results = 3,  ///< a worker's outcomes: a JSON array of [layout, encode_outcome]
    failure = 4,  ///< a worker's task threw: the text says what
  };
  struct Message {
    int from = 0;
    int tag = 0;
    std::string text;
  };
  virtual ~TaskTransport() = default;
  /// Processes of the job, process 0 included.
  virtual int processes() const = 0;
  virtual void send(int to, int tag, const std::string& text) = 0;
  /// A message that has arrived, from anyone, with any tag; none when none has.
  virtual std::optional<Message> poll() = 0;
  /// Waits for a message with `tag` from `from` (-1: anyone).
  virtual Message receive(int from, int tag) = 0;
  /// A worker failed (`what`): ends the job; does not return.
  [[noreturn]] virtual void abort(int from, const std::string& what) = 0;
};

/// Process 0's executor: every pass's tasks go to whoever asks first, workers by message
/// and this process's threads meanwhile. Only the calling thread uses the transport.
class RemoteExecutor : public SearchExecutor {
 public:
  RemoteExecutor(const SearchSetup& s, TaskTransport& transport, int threads);
  int processes() const override { return transport_.processes(); }
  /// A failure here (a task on this process's threads, a journal that cannot be written)
  /// stops the feed; the tasks out with workers are drained, then it is thrown, and
  /// finish() still ends the workers. A worker's failure ends the job (abort).
  void run(const SearchPass& pass, TaskFeed& feed) override;
  /// After the search: every worker is told it is over, once it asks.
  void finish();

 private:
  /// Hands worker `w` its next chunk of `pass`; when there is none, it waits for the next
  /// pass (or the end). Returns the tasks handed out.
  std::size_t assign(const SearchPass& pass, TaskFeed& feed, int w);

  TaskTransport& transport_;
  ThreadExecutor own_;
  std::vector<int> waiting_;  ///< workers that asked and have nothing yet
};

/// A worker: asks process 0 for tasks, runs them on `threads` threads, sends their
/// outcomes, until process 0 says the search is over. A task that throws is reported to
/// process 0 (failure) and rethrown.
void serve_tasks(const SearchSetup& s, TaskTransport& transport, int threads);

}  // namespace bmpipe::api
