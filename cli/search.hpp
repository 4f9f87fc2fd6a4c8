#pragma once
// bmpipe search's command line, shared by the single-process path (search_cmd.cpp) and the
// MPI driver (search_mpi.cpp). The search itself is the library's (api/search.hpp).

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

/// One line on stderr: a pass after the first (the screen's second pass, --refine) starts.
void announce_pass(const SearchCommand& c, const api::AgainPass& pass);

/// Ranks and prints (table, --json, --csv, --out, --format). Returns the exit code.
int report_search(const SearchCommand& c, api::SearchRun run, int processes, double wall_s);

/// True when this process was started by mpirun / srun (so MPI_Init is wanted).
bool launched_by_mpi();

/// The MPI driver (search_mpi.cpp; only built with MPI).
int run_search_mpi(const std::vector<std::string>& args);

}  // namespace bmpipe::cli
