// bmpipe search under MPI (Open MPI from Debian), a transport only: rank 0 runs the
// library's search driver (api/search_driver.hpp) with an executor that hands each pass's
// tasks out in chunks as workers ask for them, runs tasks itself on a second thread
// meanwhile, and puts back every outcome; workers loop running what they are sent. Each
// outcome depends only on its layout and pass, so the answer is the one the single-process
// search gives, whatever the number of processes.
//
// Failure behaviour: every rank reads the config; a rank that cannot is reported by rank 0,
// once, and every rank exits 2. An exception while evaluating is sent to rank 0, which
// prints it and aborts the job with exit code 70, so no rank waits forever.
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <thread>

#include "api/errors.hpp"
#include "api/search_journal.hpp"
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

enum Tag : int { kRequest = 1, kAssign = 2, kResults = 3, kFailure = 4 };

/// MPI_Probe without the spin: Open MPI's blocking probe polls at full speed, so a worker
/// waiting for its next share took a core from rank 0's planning thread.
void probe(int from, int tag, MPI_Status* status) {
  int flag = 0;
  while (MPI_Iprobe(from, tag, MPI_COMM_WORLD, &flag, status), !flag) usleep(100);
}

void send_text(const std::string& text, int to, int tag) {
  MPI_Send(text.data(), static_cast<int>(text.size()), MPI_CHAR, to, tag, MPI_COMM_WORLD);
}

std::string receive_text(int from, int tag, MPI_Status* status) {
  probe(from, tag, status);
  int size = 0;
  MPI_Get_count(status, MPI_CHAR, &size);
  std::string text(static_cast<std::size_t>(size), '\0');
  MPI_Recv(text.data(), size, MPI_CHAR, status->MPI_SOURCE, status->MPI_TAG, MPI_COMM_WORLD,
           MPI_STATUS_IGNORE);
  return text;
}

[[noreturn]] void abort_job(int from, const std::string& what) {
  std::cerr << "bmpipe search: " << (from == 0 ? "" : "process " + std::to_string(from) + ": ")
            << "internal error: " << what << "\n";
  MPI_Abort(MPI_COMM_WORLD, 70);
  std::exit(70);  // not reached: MPI_Abort ends the job
}

/// What rank 0 sends a worker that asks when the search is over.
const char* const kEnd = "end";

/// Rank 0's executor: every pass's tasks go to whoever asks first, workers by message and
/// rank 0's own threads meanwhile. Only the main thread calls MPI.
class MpiExecutor : public api::SearchExecutor {
 public:
  MpiExecutor(const api::SearchSetup& s, int size, int threads) : size_(size), own_(s, threads) {}
  int processes() const override { return size_; }

  /// A failure here (a task on rank 0's threads, a journal that cannot be written) stops
  /// the feed; the tasks out with workers are drained, then it is thrown for the command
  /// to report (cli/guard.hpp), and finish() still ends the workers. A worker's failure
  /// ends the job (exit 70).
  void run(const api::SearchPass& pass, api::TaskFeed& feed) override {
    std::atomic<bool> own_done{false};
    std::exception_ptr own_error, error;  // own_error: written once, before own_done is set
    std::thread own([&] {
      try {
        own_.run(pass, feed);
      } catch (...) {
        own_error = std::current_exception();
      }
      own_done.store(true);
    });
    // Workers that asked while a pass had nothing left (or between passes) are served
    // first; the others as their requests arrive.
    std::vector<int> asking;
    asking.swap(waiting_);
    std::size_t out = 0;  // tasks handed to workers and not yet put back
    for (;;) {
      for (const int w : asking) out += assign(pass, feed, w);
      asking.clear();
      if (own_done.load() && out == 0) break;
      int flag = 0;
      MPI_Status status;
      MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &status);
      if (!flag) {
        // A request waits at most 200 us. Alone, nobody asks: waking 5,000 times a second
        // cost one process bound to one core (mpirun's default for -np 1 and 2) 8 % of the
        // GPT-3 search, --threads 1 (6.37 s -> 5.86 s, medians of 3 and 2).
        usleep(size_ > 1 ? 200 : 20000);
        continue;
      }
      const std::string text = receive_text(status.MPI_SOURCE, status.MPI_TAG, &status);
      if (status.MPI_TAG == kFailure) abort_job(status.MPI_SOURCE, text);
      if (status.MPI_TAG == kRequest) {
        asking.push_back(status.MPI_SOURCE);
        continue;
      }
      for (const auto& item : nlohmann::json::parse(text)) {
        --out;
        if (error) continue;  // drained
        try {
          feed.put(item[0].get<std::size_t>(), api::decode_outcome(item[1].get<std::string>()));
        } catch (...) {
          error = std::current_exception();
          feed.stop();
        }
      }
    }
    own.join();
    if (error) std::rethrow_exception(error);
    if (own_error) std::rethrow_exception(own_error);
  }

  /// After the search: every worker is told it is over, once it asks.
  void finish() {
    for (int w : waiting_) send_text(kEnd, w, kAssign);
    for (std::size_t told = waiting_.size(); told < static_cast<std::size_t>(size_ - 1); ++told) {
      MPI_Status status;
      receive_text(MPI_ANY_SOURCE, kRequest, &status);
      send_text(kEnd, status.MPI_SOURCE, kAssign);
    }
    waiting_.clear();
  }

 private:
  /// Hands worker `w` its next chunk of `pass`; when there is none, it waits for the next
  /// pass (or the end). Returns the tasks handed out.
  std::size_t assign(const api::SearchPass& pass, api::TaskFeed& feed, int w) {
    std::vector<api::SearchTask> tasks;
    const std::size_t want = feed.chunk(size_);
    while (tasks.size() < want)
      if (const std::optional<api::SearchTask> task = feed.take())
        tasks.push_back(*task);
      else
        break;
    if (tasks.empty())
      waiting_.push_back(w);
    else
      send_text(api::encode_share(pass, tasks), w, kAssign);
    return tasks.size();
  }

  int size_;
  api::ThreadExecutor own_;
  std::vector<int> waiting_;  ///< workers that asked and have nothing yet
};

/// A worker: asks rank 0 for tasks, runs them on its threads, sends their outcomes, until
/// rank 0 says the search is over.
void serve(const api::SearchSetup& s, int threads) {
  for (;;) {
    send_text("", 0, kRequest);
    MPI_Status status;
    const std::string text = receive_text(0, kAssign, &status);
    if (text == kEnd) return;
    nlohmann::json items = nlohmann::json::array();
    try {
      const auto [pass, tasks] = api::decode_share(text);
      const std::vector<api::TaskOutcome> got = api::run_tasks(s, pass, tasks, threads);
      for (std::size_t k = 0; k < tasks.size(); ++k)
        items.push_back({tasks[k].layout, api::encode_outcome(got[k])});
    } catch (const std::exception& e) {
      send_text(e.what(), 0, kFailure);
      MPI_Finalize();
      std::exit(70);
    }
    send_text(items.dump(), 0, kResults);
  }
}

/// Setup on every rank; returns the exit code all must use if any rank failed.
std::optional<int> agree_on_setup(int rank, int size, const std::string& error, int code) {
  int worst = code;
  MPI_Allreduce(&code, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (worst == 0) return std::nullopt;
  // Rank 0 says why: its own message, or the first failing rank's.
  int length = static_cast<int>(error.size());
  std::vector<int> lengths(rank == 0 ? size : 0);
  MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::vector<int> offsets;
  std::string all;
  if (rank == 0) {
    int total = 0;
    for (int l : lengths) offsets.push_back(total), total += l;
    all.resize(static_cast<std::size_t>(total));
  }
  MPI_Gatherv(error.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR,
              0, MPI_COMM_WORLD);
  if (rank == 0)
    for (int r = 0; r < size; ++r)
      if (lengths[r] > 0) {
        std::cerr << "bmpipe search: " << (r == 0 ? "" : "process " + std::to_string(r) + ": ")
                  << all.substr(offsets[r], lengths[r]) << "\n";
        break;
      }
  return worst;
}

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
  std::string error;
  int code = 0;
  try {
    std::optional<int> stop;
    c = setup_search(args, &stop);
    if (stop) code = *stop == 0 ? -1 : *stop;  // -1: --help, a success that stops here
    int& threads = c.setup.request.threads;
    if (threads == 0) threads = std::max(1, api::available_cores() / local);
    // The journal is rank 0's alone: it reads it back and appends every result settled.
    if (code == 0 && rank == 0) open_journal(c, journal);
  } catch (const UsageError& e) {
    error = e.what(), code = 2;
  } catch (const api::RequestError& e) {
    error = e.what(), code = 2;
  } catch (const ConfigError& e) {
    error = e.what(), code = 2;
  } catch (const std::exception& e) {
    error = std::string("internal error: ") + e.what(), code = 70;
  }
  if (code == -1) {
    MPI_Finalize();
    return 0;
  }
  if (const std::optional<int> failed = agree_on_setup(rank, size, error, code)) {
    MPI_Finalize();
    return *failed;
  }
  int rc = 0;
  if (rank != 0) {
    serve(c.setup, c.setup.request.threads);
  } else {
    MpiExecutor executor(c.setup, size, c.setup.request.threads);
    rc = guarded("search", [&] { return search_and_report(c, executor, journal, start); });
    executor.finish();
  }
  MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Finalize();
  return rc;
}

}  // namespace bmpipe::cli
