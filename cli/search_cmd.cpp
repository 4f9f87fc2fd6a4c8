// bmpipe search: every sensible parallel layout of a model on a cluster, each planned,
// ranked by simulated iteration time. Runs on one machine, or on many under MPI
// (cli/search_mpi.cpp), with the same answer.
#include <unistd.h>

#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

#include "api/contracts.hpp"
#include "api/export.hpp"
#include "cli/commands.hpp"
#include "cli/guard.hpp"
#include "cli/options.hpp"
#include "cli/outputs.hpp"
#include "cli/search.hpp"
#include "experiment/suggest.hpp"
#include "experiment/write_config.hpp"
#include "sim/units.hpp"
#include "traces/summary.hpp"

namespace po = boost::program_options;

namespace bmpipe::cli {

namespace {

std::vector<int> int_list(const po::variables_map& vm, const char* option) {
  std::vector<int> out;
  if (!vm.count(option)) return out;
  const std::string text = vm[option].as<std::string>();
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    std::size_t used = 0;
    int v = 0;
    try {
      v = std::stoi(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size())
      throw UsageError(std::string("--") + option,
                       "expected a comma-separated list of integers, got '" + text + "'");
    out.push_back(v);
  }
  if (out.empty()) throw UsageError(std::string("--") + option, "the list is empty");
  return out;
}

std::vector<std::string> name_list(const po::variables_map& vm, const char* option) {
  if (!vm.count(option)) return {};
  std::vector<std::string> out = split_names(vm[option].as<std::string>());
  if (out.empty()) throw UsageError(std::string("--") + option, "the list is empty");
  return out;
}

std::string ms(Time t) {
  return format_ms(t, 1);
}

}  // namespace

SearchCommand setup_search(const std::vector<std::string>& args, std::optional<int>* exit_code) {
  SearchCommand c;
  po::options_description opts("bmpipe search CONFIG [options]\n\nOptions");
  add_config_options(opts);
  // clang-format off
  opts.add_options()
      ("tp", po::value<std::string>()->value_name("LIST"), "tensor-parallel sizes, e.g. 1,2,4,8 (default: powers of two "
                                       "up to a node that divide the heads and the FFN)")
      ("pp", po::value<std::string>()->value_name("LIST"), "pipeline sizes (default: every divisor of devices / tp up to "
                                       "the layers)")
      ("vpp", po::value<std::string>()->value_name("LIST"), "chunks per device for interleaved (default: 2, 3, 4 where "
                                        "pp x vpp divides the layers)")
      ("micro-batch-size", po::value<std::string>()->value_name("LIST"), "micro-batch sizes (default 1,2,4)")
      ("schedules", po::value<std::string>()->value_name("LIST"), ("schedules (default 1f1b,interleaved; " +
                                               schedule_names() + ")").c_str())
      ("planner", po::value<std::string>()->value_name("EFFORT")->default_value("quick"),
       "off (uniform partition, the config's recompute), quick (planner, 300 evaluations) or "
       "full (planner, --max-evals)")
      ("max-evals", po::value<std::int64_t>()->value_name("N")->default_value(20000), "planner budget with --planner full")
      ("memory-limit-GiB", po::value<double>()->value_name("GiB"), "GiB a device may use (replaces its capacity)")
      ("seed", po::value<std::uint64_t>()->value_name("N")->default_value(1), "planner seed")
      ("threads", po::value<int>()->value_name("N")->default_value(0, "all cores"), "layouts evaluated at once per process")
      ("top", po::value<int>()->value_name("N")->default_value(10), "rows of the table")
      ("json", po::bool_switch(), "print {layouts, search} as JSON (with --format: and 'export')")
      ("format", po::value<std::string>()->value_name("FORMAT"),
       "print the best layout as `bmpipe export` does: megatron (flags) or mindformers (YAML)")
      ("csv", po::value<std::string>()->value_name("FILE"), "write every layout as CSV to FILE")
      ("out", po::value<std::string>()->value_name("FILE"), "write the best layout, planned, as a config to FILE")
      ("quiet", po::bool_switch(), "no progress line on stderr");
  // clang-format on
  po::variables_map vm;
  if (auto stop = parse_command_line(
          "search", args, opts,
          "Enumerates tp x pp x dp (dp = devices / (tp pp)), interleaved chunks, micro-batch\n"
          "sizes and schedules for the config's model, cluster and global batch; rejects what\n"
          "cannot divide or cannot hold its weights, gradients and optimizer state; plans\n"
          "every other layout (its own partition and recompute) and ranks them by simulated\n"
          "iteration time. Budgets are in evaluations, so results do not depend on the\n"
          "machine. Under mpirun the layouts are shared by the processes; the answer is the\n"
          "same.\n"
          "Exit codes: 0 success, 2 bad input, 70 internal error.\n",
          vm)) {
    *exit_code = *stop;
    return c;
  }
  c.json = vm["json"].as<bool>();
  c.quiet = vm["quiet"].as<bool>();
  c.top = vm["top"].as<int>();
  if (c.top < 1) throw UsageError("--top", "must be at least 1");
  api::SearchRequest request;
  request.effort = api::planner_effort(vm["planner"].as<std::string>());
  request.space.tp = int_list(vm, "tp");
  request.space.pp = int_list(vm, "pp");
  request.space.vpp = int_list(vm, "vpp");
  request.space.micro_batch_size = int_list(vm, "micro-batch-size");
  request.space.schedules = name_list(vm, "schedules");
  if (vm.count("csv")) c.csv = vm["csv"].as<std::string>();
  if (vm.count("out")) c.out = vm["out"].as<std::string>();
  if (vm.count("format")) {
    c.format = vm["format"].as<std::string>();
    api::check_export_request(api::ExportRequest{*c.format, {}});
  }
  request.seed = vm["seed"].as<std::uint64_t>();
  request.max_evals = vm["max-evals"].as<std::int64_t>();
  request.threads = vm["threads"].as<int>();
  if (vm.count("memory-limit-GiB")) request.memory_limit_GiB = vm["memory-limit-GiB"].as<double>();
  api::check_search_request(request);  // a typo in an option fails before the file is read
  c.path = vm["config"].as<std::string>();
  c.setup = api::prepare_search(load_config(c.path), request);
  return c;
}

int report_search(const SearchCommand& c, std::vector<LayoutResult> results, int processes,
                  double wall_s) {
  const api::SearchReport report = api::rank_search(c.setup, std::move(results), processes, wall_s);
  const std::vector<LayoutResult>& ranked = report.layouts;
  const Config& config = c.setup.config;
  const bool best_fits = !ranked.empty() && ranked.front().rejected.empty() && ranked.front().fits;
  std::optional<ConfigEdits> best_edits;
  if (best_fits) {
    const LayoutResult& best = ranked.front();
    best_edits =
        ConfigEdits{best.layout.schedule, best.layout.pp,      best.layout.vpp,
                    best.microbatches,    best.plan.partition, best.plan.recompute,
                    best.layout.tp,       best.layout.dp,      best.layout.micro_batch_size};
  }
  if (c.out) {
    if (!best_fits) throw ConfigError(config.file, 0, "--out", "no layout fits: nothing to write");
    const LayoutResult& best = ranked.front();
    write_edited_config(c.path, *c.out, *best_edits,
                        "Written by bmpipe search from " + c.path + ": the fastest layout, " +
                            to_string(best.layout) + ", " + ms(best.iteration_time) +
                            " ms per iteration as simulated.\n`bmpipe simulate` on this file "
                            "reproduces it.");
  }
  // --format: the best layout as its --out file would state it, exported by the one
  // function `bmpipe export` calls, under the search's memory limit.
  std::optional<api::ExportOutcome> exported;
  if (c.format) {
    if (!best_fits)
      throw ConfigError(config.file, 0, "--format", "no layout fits: nothing to export");
    exported = api::export_config(api::config_with_plan(config, *best_edits),
                                  api::ExportRequest{*c.format, c.setup.request.memory_limit_GiB});
  }
  if (c.csv) {
    std::ofstream file;
    open_output(file, *c.csv, "--csv");
    file << api::search_csv(report);
    close_output(file, *c.csv, "--csv");
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
  std::cout << "bmpipe search " << config.file << "\n";
  char buf[512];
  std::snprintf(buf, sizeof buf, "%4s %4s %4s %4s %4s %4s %-12s %14s %11s %6s %9s %8s %24s\n", "#",
                "tp", "pp", "dp", "vpp", "mbs", "schedule", "iteration ms", "tokens/s", "MFU %",
                "TFLOP/s", "bubble %", "max peak / capacity");
  std::cout << buf;
  int shown = 0, fitting = 0;
  for (const LayoutResult& r : ranked) {
    if (!r.rejected.empty() || !r.fits) continue;
    ++fitting;
    if (shown >= c.top) continue;
    ++shown;
    std::snprintf(buf, sizeof buf,
                  "%4d %4d %4d %4d %4d %4d %-12s %14s %11.0f %6.1f %9.1f %8.2f %24s\n", shown,
                  r.layout.tp, r.layout.pp, r.layout.dp, r.layout.vpp, r.layout.micro_batch_size,
                  r.layout.schedule.c_str(), ms(r.iteration_time).c_str(), r.tokens_per_s,
                  100 * r.mfu, r.tflops_per_device, 100 * r.bubble_ratio,
                  (format_gib(r.max_peak_bytes) + " / " + format_gib(r.capacity_bytes)).c_str());
    std::cout << buf;
  }
  std::cout << "\n" << fitting << " of " << ranked.size() << " layouts fit";
  if (fitting > shown) std::cout << " (" << shown << " shown; --top N for more, --json for all)";
  std::cout << "\nrejected:";
  if (report.rejected_by.empty()) std::cout << " none";
  for (const auto& [f, n] : report.rejected_by) std::cout << " " << n << " by " << f;
  std::cout << "\n";
  int listed = 0;
  for (const LayoutResult& r : ranked) {
    if (r.rejected.empty() && r.fits) continue;
    if (listed++ >= c.top) break;
    std::cout << "  " << to_string(r.layout) << ": " << r.rejected << "\n";
  }
  std::snprintf(buf, sizeof buf, "\nsearch: %zu layouts, %lld evaluations, %d process%s, %.2f s\n",
                ranked.size(), static_cast<long long>(report.evaluations), processes,
                processes == 1 ? "" : "es", wall_s);
  std::cout << buf;
  return 0;
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
    const std::vector<Layout>& layouts = c.setup.layouts;
    std::vector<LayoutResult> results(layouts.size());
    const bool live = !c.quiet && isatty(STDERR_FILENO);
    std::size_t finished = 0;  // evaluate_layouts serialises `done`
    auto progress = [&] {
      const std::size_t done = ++finished;
      if (!live) return;
      const double elapsed =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      Time best = 0;
      for (const LayoutResult& r : results)
        if (r.rejected.empty() && r.fits && r.iteration_time > 0 &&
            (best == 0 || r.iteration_time < best))
          best = r.iteration_time;
      const double eta = done ? elapsed / done * (layouts.size() - done) : 0;
      std::fprintf(stderr, "\rsearch: %zu / %zu layouts, best %s, %.1f s, ETA %.0f s   ", done,
                   layouts.size(), best ? (ms(best) + " ms").c_str() : "none yet", elapsed, eta);
    };
    api::evaluate_layouts(c.setup, 0, layouts.size(), results, progress);
    if (live) std::fprintf(stderr, "\r%100s\r", "");
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return report_search(c, std::move(results), 1, wall);
  });
}

}  // namespace bmpipe::cli
