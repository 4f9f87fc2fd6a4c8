// bmpipe search under MPI (Open MPI from Debian): rank 0 hands out layouts in chunks as
// workers ask for them, evaluates layouts itself on a second thread meanwhile, gathers
// every result and prints the report. Each layout's result depends only on the layout, so the
// answer is the one the single-process search gives, whatever the number of processes.
//
// Failure behaviour: every rank reads the config; a rank that cannot is reported by rank 0,
// once, and every rank exits 2. An exception while evaluating is sent to rank 0, which
// prints it and aborts the job with exit code 70, so no rank waits forever.
#include <mpi.h>
#include <unistd.h>

#include <csignal>

#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/task_arena.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <mutex>
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

enum Tag : int { kRequest = 1, kAssign = 2, kResults = 3, kFailure = 4, kAgain = 5, kScreens = 6 };

/// A pass after the first (api::AgainPass) as rank 0 sends it to one worker: the effort
/// (0 quick, 1 full; -1: no more passes), the share (-1: none), then the layouts.
std::vector<long long> encode_pass(const api::AgainPass& pass,
                                   const std::vector<std::size_t>& layouts) {
  std::vector<long long> v{pass.effort == PlannerEffort::full ? 1 : 0, pass.share.value_or(-1)};
  for (const std::size_t i : layouts) v.push_back(static_cast<long long>(i));
  return v;
}

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

/// A worker: rank 0's next message of `tag`, a list of integers.
std::vector<long long> receive_longs(int tag) {
  MPI_Status status;
  probe(0, tag, &status);
  int count = 0;
  MPI_Get_count(&status, MPI_LONG_LONG, &count);
  std::vector<long long> v(static_cast<std::size_t>(count));
  MPI_Recv(v.data(), count, MPI_LONG_LONG, 0, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  return v;
}

/// Rank 0: process `from`'s next message of `tag`, a JSON array of [index, text] items; a
/// failure it reports instead ends the job (exit 70).
nlohmann::json receive_items(int from, int tag) {
  MPI_Status status;
  probe(from, MPI_ANY_TAG, &status);
  if (status.MPI_TAG == kFailure) {
    std::cerr << "bmpipe search: process " << from
              << ": internal error: " << receive_text(from, kFailure, &status) << "\n";
    MPI_Abort(MPI_COMM_WORLD, 70);
  }
  return nlohmann::json::parse(receive_text(from, tag, &status));
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

/// [[index, result], ...] of the layouts `which`.
std::string encode_chunk(const std::vector<LayoutResult>& results,
                         const std::vector<long long>& which) {
  nlohmann::json j = nlohmann::json::array();
  for (const long long i : which)
    j.push_back({i, api::encode_result(results[static_cast<std::size_t>(i)])});
  return j.dump();
}

}  // namespace

int run_search_mpi(const std::vector<std::string>& args) {
  // Threads (TBB's, and rank 0's evaluator) never call MPI; only the main thread does.
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
    // The MPI driver evaluates every layout and applies --max-evals afterwards (the same
    // answer, none of the saving); it has no clock to stop at.
    if (code == 0 && c.setup.request.time_limit_s)
      throw UsageError("--time-limit-s", "is not applied under mpirun yet; use --max-evals");
    int& threads = c.setup.request.threads;
    if (threads == 0) threads = std::max(1, tbb::this_task_arena::max_concurrency() / local);
    // The journal is rank 0's alone: it reads it back and appends every result it gathers.
    if (code == 0 && rank == 0 && c.journal)
      journal.emplace(*c.journal, c.inputs_hash, c.setup, journal_note);
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

  const std::size_t n = c.setup.layouts.size();
  std::vector<LayoutResult> results(n);
  // Guided chunks: a share of what is left, so the last layouts go out one by one and no
  // process sits on a chunk of slow layouts while the others are done. Layouts differ in
  // cost by two orders of magnitude; fixed chunks of 16 left one process working alone for
  // a third of the run (GPT-3 175B, 2 processes).
  auto chunk_at = [&](std::size_t next_layout) {
    const std::size_t left = n - std::min(n, next_layout);
    return std::clamp<std::size_t>(left / (2 * static_cast<std::size_t>(size)), 1, 16);
  };
  // Evaluates the layouts `which` into results, on this process's threads.
  auto evaluate = [&](const std::vector<long long>& which) {
    const int cores = tbb::this_task_arena::max_concurrency();
    const int threads = c.setup.request.threads;
    tbb::task_arena arena(threads > 0 ? std::min(threads, cores) : cores);
    arena.execute([&] {
      tbb::parallel_for(std::size_t{0}, which.size(), [&](std::size_t k) {
        const std::size_t i = static_cast<std::size_t>(which[k]);
        results[i] = api::plan_layout(c.setup, i, c.setup.options);
      });
    });
  };

  // With the bound, every process screens (bounds) the layouts i with i % size == its rank
  // and rank 0 gathers them: the bounds are a fifth of a GPT-3 search's work, and the
  // workers would otherwise wait for rank 0 to make them alone.
  const bool bounded = api::uses_bound(c.setup.request);
  std::vector<std::size_t> to_screen;
  if (bounded)
    for (std::size_t i = static_cast<std::size_t>(rank); i < n; i += static_cast<std::size_t>(size))
      to_screen.push_back(i);
  std::vector<LayoutScreen> screened;
  try {
    screened = api::screen_layouts(c.setup, to_screen);
  } catch (const std::exception& e) {
    if (rank != 0) {
      send_text(e.what(), 0, kFailure);
      MPI_Finalize();
      std::exit(70);
    }
    std::cerr << "bmpipe search: internal error: " << e.what() << "\n";
    MPI_Abort(MPI_COMM_WORLD, 70);
  }

  if (rank != 0) {
    if (bounded) {
      nlohmann::json j = nlohmann::json::array();
      for (std::size_t k = 0; k < to_screen.size(); ++k)
        j.push_back({to_screen[k], api::encode_screen(screened[k])});
      send_text(j.dump(), 0, kScreens);
    }
    while (true) {
      int ask = 1;
      MPI_Send(&ask, 1, MPI_INT, 0, kRequest, MPI_COMM_WORLD);
      const std::vector<long long> which = receive_longs(kAssign);
      if (which.empty()) break;
      try {
        evaluate(which);
      } catch (const std::exception& e) {
        send_text(e.what(), 0, kFailure);
        MPI_Finalize();
        std::exit(70);
      }
      send_text(encode_chunk(results, which), 0, kResults);
    }
    // The passes after the first (the screen's second pass, --refine): rank 0 sends each
    // worker its share of every pass, then an effort of -1.
    while (true) {
      const std::vector<long long> v = receive_longs(kAgain);
      if (v.empty() || v[0] < 0) break;
      api::AgainPass pass;
      pass.effort = v[0] == 1 ? PlannerEffort::full : PlannerEffort::quick;
      if (v[1] >= 0) pass.share = v[1];
      const std::vector<long long> which(v.begin() + 2, v.end());
      try {
        const std::vector<std::size_t> layouts(which.begin(), which.end());
        std::vector<LayoutResult> got = api::plan_again_here(c.setup, pass, layouts);
        for (std::size_t k = 0; k < layouts.size(); ++k) results[layouts[k]] = std::move(got[k]);
      } catch (const std::exception& e) {
        send_text(e.what(), 0, kFailure);
        MPI_Finalize();
        std::exit(70);
      }
      send_text(encode_chunk(results, which), 0, kResults);
    }
    int rc = 0;
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    return rc;
  }

  // Rank 0: the main thread answers requests and gathers results (it is the only thread
  // that calls MPI); a second thread evaluates layouts from the same queue meanwhile. Serving
  // between its own layouts instead kept workers waiting for a whole layout per chunk: on
  // GPT-3 175B with 2 processes on 2 cores, 27.3 s against 20.9 s for one process.
  // Without the bound the queue is the enumeration order; with it, the BoundedQueue, which
  // decides every skip from the layouts before it in bound order, so the answer is the one
  // process's whatever the processes and their speeds.
  // --journal: the layouts a killed run finished are taken as they are, and every new
  // result is appended (serialised: the BoundedQueue calls `done` under its lock; without
  // the bound, `put` appends under `queue`), as the single-process search does.
  const std::vector<std::optional<LayoutResult>> known =
      journal ? journal->known() : std::vector<std::optional<LayoutResult>>{};
  // Progress on stderr, as one process prints it: from the BoundedQueue's count with the
  // bound, else from `nb` (guarded by `queue`); each line under the lock that orders them.
  LayoutProgress progress(c, size);
  std::optional<api::BoundedQueue> bq;
  if (bounded) {
    std::vector<LayoutScreen> screens(n);
    for (std::size_t k = 0; k < to_screen.size(); ++k) screens[to_screen[k]] = screened[k];
    for (int w = 1; w < size; ++w)
      for (const auto& item : receive_items(w, kScreens))
        screens[item[0].get<std::size_t>()] = api::decode_screen(item[1].get<std::string>());
    bq.emplace(c.setup, api::order_from_screens(c.setup, std::move(screens)), known,
               [&](std::size_t i, const LayoutResult& r, const api::SearchProgress& p) {
                 if (journal) journal->append(i, r);
                 progress.layout(r, p);
               });
  }
  std::mutex queue;
  std::size_t next = 0;    // guarded by queue (without the bound)
  api::SearchProgress nb;  // guarded by queue (without the bound)
  nb.total = nb.may_plan = n;
  for (std::size_t i = 0; i < std::min(n, known.size()); ++i)
    if (known[i]) nb.count(*known[i]);
  auto take = [&]() -> std::optional<std::size_t> {
    if (bq) return bq->take();
    const std::lock_guard<std::mutex> lock(queue);
    while (next < n && next < known.size() && known[next]) results[next] = *known[next], ++next;
    if (next >= n) return std::nullopt;
    return next++;
  };
  const auto first_pass = std::chrono::steady_clock::now();
  auto put = [&](std::size_t i, const LayoutResult& r) {
    if (bq) {
      bq->put(i, r);
      return;
    }
    const std::lock_guard<std::mutex> lock(queue);
    if (journal) journal->append(i, r);
    nb.count(r);
    nb.may_plan = n - std::min(n, nb.done);
    nb.elapsed_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - first_pass).count();
    progress.layout(r, nb);
  };
  std::size_t assigned = 0;  // to workers, by the main thread
  std::atomic<bool> failed{false}, own_done{false};
  std::string failure;  // written once, before failed is set
  std::thread own([&] {
    while (!failed.load()) {
      const std::optional<std::size_t> mine = take();
      if (!mine) break;
      try {
        evaluate({static_cast<long long>(*mine)});
      } catch (const std::exception& e) {
        failure = e.what();
        failed.store(true);
        break;
      }
      put(*mine, results[*mine]);
    }
    own_done.store(true);
  });
  int stopped = 0;
  std::size_t worker_results = 0;
  while (!own_done.load() || stopped < size - 1 || worker_results < assigned) {
    if (failed.load()) {
      std::cerr << "bmpipe search: internal error: " << failure << "\n";
      MPI_Abort(MPI_COMM_WORLD, 70);
    }
    int flag = 0;
    MPI_Status status;
    MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &status);
    if (!flag) {
      // A request waits at most 200 us. Alone, nobody asks: waking 5,000 times a second
      // cost one process bound to one core (mpirun's default for -np 1 and 2) 8 % of the
      // GPT-3 search, --threads 1 (6.37 s -> 5.86 s, medians of 3 and 2).
      usleep(size > 1 ? 200 : 20000);
      continue;
    }
    if (status.MPI_TAG == kRequest) {
      int ask = 0;
      MPI_Recv(&ask, 1, MPI_INT, status.MPI_SOURCE, kRequest, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      std::vector<long long> which;
      std::size_t want = 1;
      // With the bound, one layout at a time: a layout handed out early is planned even if
      // a result that arrives meanwhile would have skipped it.
      if (!bq) {
        const std::lock_guard<std::mutex> lock(queue);
        want = chunk_at(next);
      }
      while (which.size() < want)
        if (const std::optional<std::size_t> i = take())
          which.push_back(static_cast<long long>(*i));
        else
          break;
      if (which.empty()) ++stopped;
      assigned += which.size();
      MPI_Send(which.data(), static_cast<int>(which.size()), MPI_LONG_LONG, status.MPI_SOURCE,
               kAssign, MPI_COMM_WORLD);
    } else if (status.MPI_TAG == kResults) {
      const nlohmann::json j =
          nlohmann::json::parse(receive_text(status.MPI_SOURCE, kResults, &status));
      for (const auto& item : j) {
        const std::size_t i = item[0].get<std::size_t>();
        results[i] = api::decode_result(item[1].get<std::string>());
        put(i, results[i]);
        ++worker_results;
      }
    } else if (status.MPI_TAG == kFailure) {
      std::cerr << "bmpipe search: process " << status.MPI_SOURCE
                << ": internal error: " << receive_text(status.MPI_SOURCE, kFailure, &status)
                << "\n";
      MPI_Abort(MPI_COMM_WORLD, 70);
    }
  }
  own.join();
  progress.clear();
  const auto seconds = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  int rc = guarded("search", [&] {
    api::SearchRun run;
    if (bq) {
      run = api::apply_budgets(c.setup, bq->results(), bq->order());
    } else {
      std::vector<std::optional<LayoutResult>> all(results.begin(), results.end());
      run = api::apply_budgets(c.setup, std::move(all));
    }
    // The screen's second pass and --refine: a pass's layouts are dealt out by their size,
    // rank 0 planning its own meanwhile. A result depends only on its layout and the pass,
    // so the answer is the one process's.
    api::PassHooks hooks;
    hooks.run = [&](const api::AgainPass& pass) {
      // Longest first, each to the least loaded process (ties: the lower rank), by the ops
      // one simulation of the layout runs: stages x micro-batches, micro-batches being the
      // global batch / (micro-batch size x dp). A result does not depend on who plans it.
      const auto ops = [&](std::size_t i) {
        const Layout& l = c.setup.layouts[i];
        return static_cast<double>(l.pp) * std::max(1, l.vpp) /
               (static_cast<double>(l.micro_batch_size) * std::max(1, l.dp));
      };
      std::vector<std::size_t> longest = pass.which;
      std::stable_sort(longest.begin(), longest.end(),
                       [&](std::size_t a, std::size_t b) { return ops(a) > ops(b); });
      std::vector<std::vector<std::size_t>> share(static_cast<std::size_t>(size));
      std::vector<double> load(static_cast<std::size_t>(size), 0.0);
      for (const std::size_t i : longest) {
        const auto least = std::min_element(load.begin(), load.end()) - load.begin();
        share[static_cast<std::size_t>(least)].push_back(i);
        load[static_cast<std::size_t>(least)] += ops(i);
      }
      for (int w = 1; w < size; ++w) {
        const std::vector<long long> v = encode_pass(pass, share[static_cast<std::size_t>(w)]);
        MPI_Send(v.data(), static_cast<int>(v.size()), MPI_LONG_LONG, w, kAgain, MPI_COMM_WORLD);
      }
      // Progress: rank 0's own layouts as they finish, then each worker's share as it
      // arrives.
      std::vector<LayoutResult> mine =
          api::plan_again_here(c.setup, pass, share[0], [&](std::size_t done) {
            if (hooks.finished) hooks.finished(pass, done);
          });
      std::map<std::size_t, LayoutResult> got;
      for (std::size_t k = 0; k < mine.size(); ++k) got[share[0][k]] = std::move(mine[k]);
      for (int w = 1; w < size; ++w) {
        const nlohmann::json items = receive_items(w, kResults);
        for (const auto& item : items)
          got[item[0].get<std::size_t>()] = api::decode_result(item[1].get<std::string>());
        if (hooks.finished && !items.empty()) hooks.finished(pass, got.size());
      }
      std::vector<LayoutResult> out;
      for (const std::size_t i : pass.which) out.push_back(got.at(i));
      return out;
    };
    PassProgress pass_progress(c);
    pass_progress.hook(hooks);
    api::finish_search(c.setup, run, seconds(), hooks);
    return report_search(c, std::move(run), size, seconds());
  });
  // No more passes: the workers go on to the exit code.
  for (int w = 1; w < size; ++w) {
    const long long done = -1;
    MPI_Send(&done, 1, MPI_LONG_LONG, w, kAgain, MPI_COMM_WORLD);
  }
  MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Finalize();
  return rc;
}

}  // namespace bmpipe::cli
