// bmpipe search: every sensible parallel layout of a model on a cluster, each planned,
// ranked by simulated iteration time. Runs on one machine, or on many under MPI
// (cli/search_mpi.cpp), with the same answer.
#include <unistd.h>

#include <boost/program_options.hpp>
#include <chrono>
#include <cstdlib>
#include <iostream>

#include "api/contracts.hpp"
#include "api/export.hpp"
#include "api/progress_lines.hpp"
#include "api/search_journal.hpp"
#include "cli/commands.hpp"
#include "cli/guard.hpp"
#include "cli/options.hpp"
#include "cli/outputs.hpp"
#include "cli/search.hpp"

namespace po = boost::program_options;

namespace bmpipe::cli {

SearchCommand setup_search(const std::vector<std::string>& args, std::optional<int>* exit_code) {
  SearchCommand c;
  po::options_description opts("bmpipe search CONFIG [options]\n\nOptions");
  add_config_options(opts);
  const api::RequestTable<api::SearchRequest> table = api::search_options();
  // The request's options, the command's own before the config keys, as --help lists them.
  const std::size_t keys = table.size() - api::batch_and_set_options().size();
  add_request_options(opts, table, 0, keys);
  // clang-format off
  opts.add_options()
      ("top", po::value<int>()->value_name("N")->default_value(10), "rows of the table")
      ("json", po::bool_switch(), "print {layouts, search} as JSON (with --format: and 'export')")
      ("format", po::value<std::string>()->value_name("FORMAT"),
       "print the best layout as `bmpipe export` does: megatron (flags), mindformers (YAML), "
       "torchtitan (TOML) or torchtitan-registry (its 2026 launch command); only layouts that "
       "framework runs are ranked (its rules: docs/export.md)")
      ("csv", po::value<std::string>()->value_name("FILE"), "write every layout as CSV to FILE")
      ("out", po::value<std::string>()->value_name("FILE"), "write the best layout, planned, as a config to FILE")
      ("journal", po::value<std::string>()->value_name("FILE"),
       "append each finished layout to FILE (one JSON line, fsync'd); a rerun with the same "
       "FILE, config and options reads them back instead of planning them again, with the "
       "same output. A journal of other inputs is refused (exit 2); a torn last line is "
       "dropped. --threads, --max-evals, --time-limit-s and the printing options may "
       "differ between runs. Under mpirun rank 0 alone reads and writes it");
  // clang-format on
  // The config keys simulate and plan take too (their other knobs are search dimensions).
  add_request_options(opts, table, keys);
  add_progress_options(opts, "phase, layouts done, evaluations, best so far, ETA");
  po::variables_map vm;
  if (auto stop = parse_command_line(
          "search", args, opts,
          "Enumerates tp x pp x dp (dp = devices / (tp pp cp)), interleaved chunks,\n"
          "micro-batch sizes, schedules, and ep, etp, cp for the config's model, cluster and\n"
          "global batch; rejects what cannot divide or cannot hold its weights, gradients and\n"
          "optimizer state; plans every other layout (its own partition and recompute) and\n"
          "ranks them by simulated iteration time. Budgets are in evaluations, so results do\n"
          "not depend on the machine. Under mpirun the layouts are shared by the processes;\n"
          "the answer is the same.\n"
          "Exit codes: 0 success, 2 bad input, 70 internal error.\n",
          vm)) {
    *exit_code = *stop;
    return c;
  }
  c.json = vm["json"].as<bool>();
  c.quiet = vm["quiet"].as<bool>();
  c.progress_interval_s = progress_interval_s(vm);
  c.top = vm["top"].as<int>();
  if (c.top < 1) throw api::RequestError("--top", "must be at least 1");
  api::SearchRequest request;
  fill_request(table, vm, request);
  if (vm.count("csv")) c.csv = vm["csv"].as<std::string>();
  if (vm.count("out")) c.out = vm["out"].as<std::string>();
  if (vm.count("format")) {
    c.format = vm["format"].as<std::string>();
    api::rank_for_format(request, *c.format);  // as --expressible FORMAT
  }
  api::check_search_request(request);  // a typo in an option fails before the file is read
  c.path = vm["config"].as<std::string>();
  const double margin_pct = vm["screen-margin-pct"].as<double>();
  api::FileSearch search = api::prepare_file_search(c.path, request, margin_pct);
  c.setup = std::move(search.setup);
  c.inputs_hash = search.inputs_hash;
  c.before_framework = std::move(search.before_framework);
  if (vm.count("journal")) c.journal = vm["journal"].as<std::string>();
  return c;
}

namespace {

int report_search(const SearchCommand& c, api::SearchRun run, int processes, double wall_s) {
  const api::SearchReport report = api::rank_search(c.setup, std::move(run.results), processes,
                                                    wall_s, run.stopped_by, run.confirmed);
  if (c.out) api::write_output(*c.out, "--out", api::best_layout_config(c.setup, report, *c.out));
  // --format: the best layout exported by the one function `bmpipe export` calls.
  std::optional<api::ExportOutcome> exported;
  if (c.format) exported = api::export_best_layout(c.setup, report, *c.format);
  if (c.csv) {
    api::write_output(*c.csv, "--csv", api::search_csv(report));
  }
  if (c.json) {
    nlohmann::json document = api::search_document(report);
    if (exported) document["export"] = exported->summary;
    document["bmpipe"] = api::provenance(c.setup.config.file);
    std::cout << json_text(document) << "\n";
    return 0;
  }
  if (exported) {
    std::cout << exported->text;
    return 0;
  }
  std::cout << api::search_table(report, c.setup.config.file, c.top);
  return 0;
}

}  // namespace

void open_journal(const SearchCommand& c, std::optional<api::SearchJournal>& journal) {
  if (c.journal)
    journal.emplace(
        *c.journal, c.inputs_hash, c.setup,
        [](const std::string& note) { std::cerr << "bmpipe search: note: " << note << "\n"; },
        c.before_framework);
}

int search_and_report(const SearchCommand& c, api::SearchExecutor& executor,
                      std::optional<api::SearchJournal>& journal,
                      std::chrono::steady_clock::time_point start) {
  std::optional<api::JournalExecutor> resumed;
  if (journal) resumed.emplace(executor, *journal);
  api::SearchExecutor& e = resumed ? static_cast<api::SearchExecutor&>(*resumed) : executor;
  api::SearchProgressLines lines(print_to_stderr, c.quiet, isatty(STDERR_FILENO) != 0,
                                 c.progress_interval_s, c.setup.request, e.processes());
  api::SearchRun run = api::drive_search(c.setup, e, &lines);
  lines.clear();
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report_search(c, std::move(run), e.processes(), wall);
}

bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE"})
    if (std::getenv(v)) return true;
  return false;
}

int run_search(const std::vector<std::string>& args) {
  if (launched_by_mpi()) {
#ifdef BMPIPE_HAVE_MPI
    return run_search_mpi(args);
#else
    // Without MPI every process would search alone and print: only process 0 does.
    const char* r = std::getenv("OMPI_COMM_WORLD_RANK");
    if (!r) r = std::getenv("PMIX_RANK");
    if (!r) r = std::getenv("PMI_RANK");
    if (r && std::string(r) != "0") return 0;
    std::cerr << "bmpipe search: this bmpipe was built without MPI; process 0 searches alone\n";
#endif
  }
  return guarded("search", [&] {
    const auto start = std::chrono::steady_clock::now();
    std::optional<int> stop;
    const SearchCommand c = setup_search(args, &stop);
    if (stop) return *stop;
    std::optional<api::SearchJournal> journal;
    open_journal(c, journal);
    api::ThreadExecutor threads(c.setup, c.setup.request.threads);
    return search_and_report(c, threads, journal, start);
  });
}

}  // namespace bmpipe::cli
