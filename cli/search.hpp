#pragma once
// bmpipe search's command line, shared by the single-process path (search_cmd.cpp) and the
// MPI driver (search_mpi.cpp). The search itself is the library's (api/search.hpp).

#include <chrono>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "api/search.hpp"

namespace bmpipe::cli {

/// What the command line asks for beyond the library's search: where the config came
/// from and how to print.
struct SearchCommand {
  std::string path;
  /// --global-batch-size, --seq-length and --set (Overrides::set): the config was loaded
  /// with them, and --out writes them in.
  Overrides overrides;
  api::SearchSetup setup;
  int top = 10;
  bool json = false;
  bool quiet = false;
  double progress_interval_s = 5;  ///< off a terminal: seconds between progress lines
  std::optional<std::string> csv, out;
  std::optional<std::string> journal;  ///< --journal FILE
  /// FNV-1a of the config's text and the options that change a layout's result (the
  /// journal's header; the version is added by the journal).
  std::uint64_t inputs_hash = 0;
  std::optional<std::string> format;  ///< --format: export the best layout (api/export.hpp)
};

/// Parses the command line and the config and enumerates the layouts. Sets `exit_code`
/// when the command should stop now (--help, a usage error). Throws UsageError,
/// api::RequestError and ConfigError for bad input.
SearchCommand setup_search(const std::vector<std::string>& args, std::optional<int>* exit_code);

/// The first pass's line on stderr: layouts done, evaluations, best so far, seconds (and
/// the processes under mpirun) and an ETA from the work left: with the bound, the layouts
/// whose bound does not exceed the best so far, at this run's evaluations per planned
/// layout and rate, capped by what the budgets leave. On a terminal one line redrawn in
/// place; off it one every --progress-interval-s and the last. Nothing with --quiet.
class LayoutProgress {
 public:
  LayoutProgress(const SearchCommand& c, int processes);
  /// After each layout's final result, serialised by the caller.
  void layout(const LayoutResult& r, const api::SearchProgress& p);
  /// On a terminal, erases the line.
  void clear() const;

 private:
  const SearchCommand& c_;
  int processes_;
  bool tty_;
  double last_line_ = -1e300;
  std::size_t here_ = 0;    ///< layouts planned by this run (not read back)
  std::int64_t spent_ = 0;  ///< their evaluations
};

/// The lines on stderr of the passes after the first (the screen's second pass, --refine):
/// one when a pass starts, then one per finished layout, `search: planned again K / N
/// layouts, T s, ETA E` (off a terminal: the first, one per --progress-interval-s, and the
/// last, whose ETA is 0), the ETA at the pass's own rate of layouts per second. Nothing
/// with --quiet. `hook()` gives api::PassHooks its `started` and `finished`.
class PassProgress {
 public:
  explicit PassProgress(const SearchCommand& c);
  void started(const api::AgainPass& pass);
  void finished(const api::AgainPass& pass, std::size_t done);
  /// Sets hooks.started and hooks.finished to this object's (it must outlive them).
  void hook(api::PassHooks& hooks);

 private:
  const SearchCommand& c_;
  bool tty_;
  std::chrono::steady_clock::time_point start_;
  double last_line_ = -1e300;
};

/// Ranks and prints (table, --json, --csv, --out, --format). Returns the exit code.
int report_search(const SearchCommand& c, api::SearchRun run, int processes, double wall_s);

/// A note of the journal (api::SearchJournal), as a line on stderr.
void journal_note(const std::string& note);

/// True when this process was started by mpirun / srun (so MPI_Init is wanted).
bool launched_by_mpi();

/// The MPI driver (search_mpi.cpp; only built with MPI).
int run_search_mpi(const std::vector<std::string>& args);

}  // namespace bmpipe::cli
