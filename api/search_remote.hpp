#pragma once
/// \file
/// A search spread over processes, whatever carries the messages: process 0 runs the
/// driver (drive_search) with a RemoteExecutor, which hands each pass's tasks out in chunks
/// as workers ask for them, runs tasks on its own threads meanwhile and puts back every
/// outcome; every other process runs serve_tasks, running what it is sent. Each outcome
/// depends only on its layout and pass, so the answer is the one ThreadExecutor gives,
/// whatever the number of processes. The executable's MPI (cli/search_mpi.cpp) is one
/// TaskTransport; the library has no MPI.

#include <functional>
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
    setup = 5,    ///< agree_on_setup: a process's code and error, then process 0's verdict
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

/// What one process's setup (its command line, the config, the layouts) came to before a
/// search over processes: code 0 (ready), 2 (bad input) or 70 (internal error), and why.
struct SetupState {
  int code = 0;
  std::string error;  ///< empty when the reason was printed already (a usage message)
};

/// Runs `setup` and says how it went: RequestError and ConfigError are bad input (2, their
/// text), any other exception an internal error (70, "internal error: " and its text).
SetupState setup_state(const std::function<void()>& setup);

/// What every process must use after agree_on_setup: the worst code of them all (0: every
/// process is ready), and, on process 0, the first failing process's error, "process R: "
/// before another's than its own (empty when none gave one, or off process 0).
struct SetupVerdict {
  int code = 0;
  std::string message;
};

/// Every process calls this with its own setup state before searching, since a process
/// whose setup failed would leave the others waiting for it: the others send theirs to
/// process 0, which answers each with the worst code. Only process 0 learns the messages.
SetupVerdict agree_on_setup(TaskTransport& transport, int rank, const SetupState& mine);

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
