// bmpipe search under MPI (Open MPI from Debian), a transport only: MPI carries the
// messages of the library's search over processes (api/search_remote.hpp): rank 0 drives
// with a RemoteExecutor, the others serve tasks. The answer is the one the single-process
// search gives, whatever the number of processes.
//
// Failure behaviour: every rank reads the config; a rank that cannot is reported by rank 0,
// once, and every rank exits 2. An exception while evaluating is sent to rank 0, which
// prints it and aborts the job with exit code 70, so no rank waits forever.
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>

#include "api/errors.hpp"
#include "api/search_journal.hpp"
#include "api/search_remote.hpp"
#include "cli/guard.hpp"
#include "cli/options.hpp"
#include "cli/outputs.hpp"
#include "cli/search.hpp"

namespace bmpipe::cli {

namespace {

/// Rank 0's last word when mpirun stops the job. Open MPI (4.1, Debian 12) ends the whole
/// job when any process dies (a worker killed with SIGKILL: "mpirun noticed that process
/// rank N ... exited on signal 9"), sending the others SIGTERM: checked by hand and in
/// tests/cli/search_mpi_kill_test.cpp. Nothing hangs; rank 0 says what happened to the
/// search (write(2) only: async-signal-safe) and exits 143.
extern "C" void stopped_by_mpirun(int) {
  static const char kText[] =
      "\nbmpipe search: stopped by mpirun: a process of the job ended (mpirun names it "
      "above or below). Rerun the same command: with --journal FILE it takes the layouts "
      "already finished from FILE (written by rank 0 as they arrive) and plans the rest.\n";
  const ssize_t written = write(STDERR_FILENO, kText, sizeof kText - 1);
  (void)written;
  _exit(143);
}

/// MPI_COMM_WORLD as the search's transport; only the main thread calls it.
class MpiTransport : public api::TaskTransport {
 public:
  explicit MpiTransport(int size) : size_(size) {}
  int processes() const override { return size_; }
  void send(int to, int tag, const std::string& text) override {
    MPI_Send(text.data(), static_cast<int>(text.size()), MPI_CHAR, to, tag, MPI_COMM_WORLD);
  }
  std::optional<Message> poll() override {
    int flag = 0;
    MPI_Status status;
    MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &status);
    if (!flag) return std::nullopt;
    return receive(status.MPI_SOURCE, status.MPI_TAG);
  }
  Message receive(int from, int tag) override {
    // MPI_Probe without the spin: Open MPI's blocking probe polls at full speed, so a
    // worker waiting for its next share took a core from rank 0's planning thread.
    MPI_Status status;
    int flag = 0;
    while (MPI_Iprobe(from < 0 ? MPI_ANY_SOURCE : from, tag, MPI_COMM_WORLD, &flag, &status), !flag)
      usleep(100);
    int size = 0;
    MPI_Get_count(&status, MPI_CHAR, &size);
    Message m{status.MPI_SOURCE, status.MPI_TAG, std::string(static_cast<std::size_t>(size), '\0')};
    MPI_Recv(m.text.data(), size, MPI_CHAR, status.MPI_SOURCE, status.MPI_TAG, MPI_COMM_WORLD,
             MPI_STATUS_IGNORE);
    return m;
  }
  [[noreturn]] void abort(int from, const std::string& what) override {
    std::cerr << "bmpipe search: " << (from == 0 ? "" : "process " + std::to_string(from) + ": ")
              << "internal error: " << what << "\n";
    MPI_Abort(MPI_COMM_WORLD, 70);
    std::exit(70);  // not reached: MPI_Abort ends the job
  }

 private:
  int size_;
};

}  // namespace

int run_search_mpi(const std::vector<std::string>& args) {
  // Threads (rank 0's evaluators) never call MPI; only the main thread does.
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  // Only rank 0 speaks: the others' output would repeat it.
  if (rank != 0) {
    std::freopen("/dev/null", "w", stdout);
    std::freopen("/dev/null", "w", stderr);
  } else {
    std::signal(SIGTERM, stopped_by_mpirun);
  }
  const auto start = std::chrono::steady_clock::now();
  SearchCommand c;
  std::optional<api::SearchJournal> journal;  // rank 0 with --journal
  // Processes on one node share its cores: by default each takes its share.
  int local = 1;
  if (const char* v = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE")) local = std::max(1, std::atoi(v));
  std::optional<int> stop;
  api::SetupState state = api::setup_state([&] {
    c = setup_search(args, &stop);
    int& threads = c.setup.request.threads;
    if (threads == 0) threads = std::max(1, api::available_cores() / local);
    // The journal is rank 0's alone: it reads it back and appends every result settled.
    if (!stop && rank == 0) open_journal(c, journal);
  });
  if (stop && *stop == 0) {  // --help, on every rank alike: a success that stops here
    MPI_Finalize();
    return 0;
  }
  if (stop) state.code = *stop;  // a usage error, printed already
  // Every rank says how its setup went; rank 0 says why, once, if any failed.
  MpiTransport transport(size);
  const api::SetupVerdict verdict = api::agree_on_setup(transport, rank, state);
  if (verdict.code != 0) {
    if (!verdict.message.empty()) std::cerr << "bmpipe search: " << verdict.message << "\n";
    MPI_Finalize();
    return verdict.code;
  }
  int rc = 0;
  if (rank != 0) {
    try {
      api::serve_tasks(c.setup, transport, c.setup.request.threads);
    } catch (const std::exception&) {  // sent to rank 0, which ends the job
      MPI_Finalize();
      std::exit(70);
    }
  } else {
    api::RemoteExecutor executor(c.setup, transport, c.setup.request.threads);
    rc = guarded("search", [&] { return search_and_report(c, executor, journal, start); });
    executor.finish();
  }
  MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Finalize();
  return rc;
}

}  // namespace bmpipe::cli
