#pragma once
// bmpipe search, shared by the single-process path (search_cmd.cpp) and the MPI driver
// (search_mpi.cpp): the parsed request, one layout's result on the wire, and the report.

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "planner/layout_search.hpp"

namespace bmpipe::cli {

struct SearchSetup {
  std::string path;
  Config config;
  LayoutSpace space;
  PlannerEffort effort = PlannerEffort::quick;
  PlannerOptions options;
  int threads = 0;  ///< layouts evaluated at once per process (0: every core)
  int top = 10;
  bool json = false;
  bool quiet = false;
  std::optional<std::string> csv, out;
  std::vector<Layout> layouts;         ///< to evaluate, in enumeration order
  std::vector<LayoutResult> rejected;  ///< refused by a divisibility rule while enumerating
};

/// Parses the command line and the config and enumerates the layouts. Sets `exit_code`
/// when the command should stop now (--help, a usage error). Throws UsageError and
/// ConfigError for bad input.
SearchSetup setup_search(const std::vector<std::string>& args, std::optional<int>* exit_code);

/// Evaluates layouts [begin, end) on this process's cores; `done` runs after each one,
/// serialised.
void evaluate_range(const SearchSetup& s, std::size_t begin, std::size_t end,
                    std::vector<LayoutResult>& out, const std::function<void()>& done);

/// Ranks and prints (table, --json, --csv, --out). Returns the exit code.
int report_search(const SearchSetup& s, std::vector<LayoutResult> results, int processes,
                  double wall_s);

/// One result as text and back, exactly (for the MPI messages).
std::string encode_result(const LayoutResult& r);
LayoutResult decode_result(const std::string& text);

/// True when this process was started by mpirun / srun (so MPI_Init is wanted).
bool launched_by_mpi();

/// The MPI driver (search_mpi.cpp; only built with MPI).
int run_search_mpi(const std::vector<std::string>& args);

}  // namespace bmpipe::cli
