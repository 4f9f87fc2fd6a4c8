#pragma once
// One function per subcommand; each parses its own options from argv (the subcommand name
// already removed) and returns the process exit code:
//   0 success (a plan that does not fit in memory is still a successful answer),
//   1 the simulation itself failed (deadlock, invalid schedule),
//   2 bad input or usage.

#include <string>
#include <vector>

namespace bmpipe::cli {

int run_simulate(const std::vector<std::string>& args);
int run_schedules(const std::vector<std::string>& args);
int run_cost(const std::vector<std::string>& args);
int run_compare(const std::vector<std::string>& args);
int run_plan(const std::vector<std::string>& args);
int run_search(const std::vector<std::string>& args);
int run_import(const std::vector<std::string>& args);
int run_export(const std::vector<std::string>& args);
int run_report(const std::vector<std::string>& args);

}  // namespace bmpipe::cli
