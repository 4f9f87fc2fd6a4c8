// bmpipe: the thin executable. It parses arguments, calls the libraries and prints.
#include <cstdlib>  // first: it defines __GLIBC__ where glibc is the C library
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <iostream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "api/contracts.hpp"
#include "api/errors.hpp"
#include "api/request_table.hpp"
#include "cli/commands.hpp"

namespace {

constexpr const char* kUsage = R"(bmpipe - pipeline-parallel training simulator and planner

Usage: bmpipe <command> [options]

Commands:
  simulate CONFIG   replay one training iteration of a schedule, event by event, and
                    report iteration time, bubbles and per-device memory
  schedules         list the built-in schedules
  cost CONFIG       print the analytic cost model's per-layer table (time, activation
                    bytes per recompute mode, parameters) and static bytes per stage
  compare CONFIG    run several schedules (--schedules a,b,c) on one config and print
                    them side by side, fastest first
  plan CONFIG       search the layers of every stage and the recompute mode of every
                    layer for the fastest iteration that fits in memory, simulating
                    every candidate; export it for MindFormers or Megatron-LM
  search CONFIG     find the fastest parallel layout (tp x pp x dp, virtual stages,
                    micro-batch size, schedule), each layout planned; runs under mpirun
  import FORMAT IN  write a config from a Megatron-LM launch script's arguments, a
                    MindFormers YAML, a torchtitan TOML or command line, or a per-layer
                    profile CSV
                    (megatron, mindformers, torchtitan, profile)
  export CONFIG     write a config as Megatron-LM flags, a MindFormers YAML fragment or a
                    torchtitan TOML (--format megatron|mindformers|torchtitan), with the
                    time the framework gets
  report CONFIG     write one self-contained HTML page of a run (--out FILE.html):
                    summary, timeline, memory; with --compare, --plan, --search too

Run 'bmpipe help <command>' (or 'bmpipe <command> --help') for its options.

Exit codes: 0 success (including "does not fit in memory", which is a result),
            1 the simulation failed (deadlock), 2 bad input or usage,
            70 internal error (a bug in bmpipe: please report it with the command line).

'bmpipe --version' prints the version. 'cmake --install' also installs a bash completion
(share/bash-completion/completions/bmpipe) that reads each command's options from its --help.
)";

constexpr const char* kCommands[] = {"simulate", "schedules", "cost",   "compare", "plan",
                                     "search",   "import",    "export", "report"};

/// Runs the command; what no command handles is a bug, reported as such.
int dispatch(const std::string& command, const std::vector<std::string>& args) {
  if (command == "simulate") return bmpipe::cli::run_simulate(args);
  if (command == "schedules") return bmpipe::cli::run_schedules(args);
  if (command == "cost") return bmpipe::cli::run_cost(args);
  if (command == "compare") return bmpipe::cli::run_compare(args);
  if (command == "plan") return bmpipe::cli::run_plan(args);
  if (command == "search") return bmpipe::cli::run_search(args);
  if (command == "import") return bmpipe::cli::run_import(args);
  if (command == "export") return bmpipe::cli::run_export(args);
  if (command == "report") return bmpipe::cli::run_report(args);
  std::cerr << "bmpipe: unknown command '" << command << "'"
            << bmpipe::api::did_you_mean_option(
                   command, std::vector<std::string>(std::begin(kCommands), std::end(kCommands)))
            << "\n\n"
            << kUsage;
  return 2;
}

constexpr int kInternalError = 70;  // EX_SOFTWARE (sysexits.h)

}  // namespace

int main(int argc, char** argv) {
#ifdef __GLIBC__
  // Keep freed memory in the process for the next allocation. By default glibc hands
  // blocks above its mmap threshold (128 KiB, rising to at most 32 MiB) back to the
  // kernel when freed and trims the heap's top, so a command that simulates candidate
  // after candidate (zb-v's variants, zb-auto's budgets) page-faults the same tens of MB
  // back in for each one, at about 7 us a fault on a 2-core VM. zb-v on the pp-64 example
  // at 1024 micro-batches: 1.60 s -> 0.90 s (medians of 5), peak memory unchanged. The
  // executable's choice, so the libraries and their other users are left as they are.
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());
#endif
  if (argc < 2) {
    std::cerr << kUsage;
    return 2;
  }
  const std::string command = argv[1];
  if (command == "--help" || command == "-h" || command == "help") {
    // `bmpipe help CMD` is `bmpipe CMD --help`.
    if (command == "help" && argc > 2) return dispatch(argv[2], {"--help"});
    std::cout << kUsage;
    return 0;
  }
  if (command == "--version") {
    std::cout << "bmpipe " << bmpipe::api::version() << "\n";
    return 0;
  }
  try {
    return dispatch(command, std::vector<std::string>(argv + 2, argv + argc));
  } catch (const bmpipe::api::RequestError& e) {
    // A command-line value no command caught itself: still bad input, not a bug.
    std::cerr << "bmpipe " << command << ": " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    // The last line of defence: every expected failure is handled where it happens, so
    // reaching here is a bug. Say so instead of aborting.
    std::cerr << "bmpipe: internal error: " << e.what()
              << "\nThis is a bug in bmpipe; please report it with the command line.\n";
  } catch (...) {
    std::cerr << "bmpipe: internal error: unknown exception\n"
                 "This is a bug in bmpipe; please report it with the command line.\n";
  }
  return kInternalError;
}
