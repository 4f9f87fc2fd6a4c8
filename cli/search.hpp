#pragma once
// bmpipe search's command line, shared by the single-process path (search_cmd.cpp) and the
// MPI transport (search_mpi.cpp). The search itself, every pass of it, and its spreading
// over processes are the library's (api/search_driver.hpp, api/search_remote.hpp).

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "api/search.hpp"
#include "api/search_driver.hpp"
#include "api/search_journal.hpp"

namespace bmpipe::cli {

/// What the command line asks for beyond the library's search: where the config came
/// from and how to print.
struct SearchCommand {
  std::string path;
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
  /// The same without the framework, as journals before 15a2f66 hashed it.
  std::optional<api::InputsBeforeFramework> before_framework;
  std::optional<std::string> format;  ///< --format: export the best layout (api/export.hpp)
};

/// Parses the command line and the config and enumerates the layouts. Sets `exit_code`
/// when the command should stop now (--help, a usage error). Throws
/// api::RequestError and ConfigError for bad input.
SearchCommand setup_search(const std::vector<std::string>& args, std::optional<int>* exit_code);

/// Opens --journal FILE for the search `c` into `journal` (api::SearchJournal; its notes
/// as lines on stderr); nothing without --journal.
void open_journal(const SearchCommand& c, std::optional<api::SearchJournal>& journal);

/// The search of `c` on `executor` (behind `journal` when set), with its lines on stderr,
/// ranked and printed (table, --json, --csv, --out, --format) with the wall time since
/// `start`. Returns the exit code.
int search_and_report(const SearchCommand& c, api::SearchExecutor& executor,
                      std::optional<api::SearchJournal>& journal,
                      std::chrono::steady_clock::time_point start);

/// True when this process was started by mpirun / srun (so MPI_Init is wanted).
bool launched_by_mpi();

/// The MPI driver (search_mpi.cpp; only built with MPI).
int run_search_mpi(const std::vector<std::string>& args);

}  // namespace bmpipe::cli
