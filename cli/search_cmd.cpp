// bmpipe search: every sensible parallel layout of a model on a cluster, each planned,
// ranked by simulated iteration time. Runs on one machine, or on many under MPI
// (cli/search_mpi.cpp), with the same answer.
#include <unistd.h>

#include <boost/program_options.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>

#include "api/contracts.hpp"
#include "api/export.hpp"
#include "api/search_journal.hpp"
#include "api/summary.hpp"
#include "cli/commands.hpp"
#include "cli/guard.hpp"
#include "cli/options.hpp"
#include "cli/outputs.hpp"
#include "cli/search.hpp"
#include "experiment/suggest.hpp"
#include "experiment/write_config.hpp"
#include "io/read_file.hpp"
#include "sim/units.hpp"

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
      ("vpp", po::value<std::string>()->value_name("LIST"), "chunks per device for interleaved (default: 2, 3, 4 while "
                                        "pp x vpp <= layers, as plan --schedule auto)")
      ("micro-batch-size", po::value<std::string>()->value_name("LIST"), "micro-batch sizes (default 1,2,4)")
      ("ep", po::value<std::string>()->value_name("LIST"), "expert-parallel sizes of a mixture-of-experts model "
                                       "(default: every divisor of the routed experts; 1 for dense "
                                       "models). Layouts whose etp x ep does not divide the stage's "
                                       "tp x dp devices are rejected by filter 'experts'")
      ("etp", po::value<std::string>()->value_name("LIST"), "expert tensor-parallel sizes (default 1)")
      ("cp", po::value<std::string>()->value_name("LIST"), "context-parallel sizes (default 1; measured "
                                       "layers: the config's): dp = devices / (tp pp cp), each cp "
                                       "cutting seq_length into 2 cp chunks")
      ("schedules", po::value<std::string>()->value_name("LIST"), ("schedules (default 1f1b,interleaved; " +
                                               schedule_names() + ")").c_str())
      ("offload", po::value<std::string>()->value_name("auto|none"),
       "auto: every layout under each activation-offload choice at each prefetch lead, as "
       "plan --offload auto tries them, ranked with the rest; needs a host link (default: "
       "none, the config's offload_modules only)")
      ("planner", po::value<std::string>()->value_name("EFFORT")->default_value("quick"),
       "off (uniform partition, the config's recompute), quick (planner, 300 evaluations, "
       "after the screen below) or full (planner, --layout-evals)")
      ("screen-evals", po::value<std::int64_t>()->value_name("N")->default_value(64),
       "with --planner quick: plan every layout first with N evaluations (and at most N/2 "
       "more polishing), then only those within --screen-margin-pct of the fastest with the "
       "whole quick budget, each keeping the faster of its two plans (0: every layout with "
       "the whole budget)")
      ("screen-margin-pct", po::value<double>()->value_name("PCT")->default_value(5.0, "5"),
       "percent above the fastest screened time within which a layout is planned again")
      ("max-evals", po::value<std::int64_t>()->value_name("N"),
       "evaluations of the whole search (default: no bound). Layouts are kept in enumeration "
       "order while their evaluations fit; the rest are reported as cut by 'evaluation limit'. "
       "Deterministic: the answer does not depend on --threads")
      ("layout-evals", po::value<std::int64_t>()->value_name("N")->default_value(20000),
       "planner budget per layout with --planner full (and --refine)")
      ("no-bound", po::bool_switch(),
       "plan every layout. By default (--planner quick or full) layouts are planned in the "
       "order of a lower bound on their time that needs no simulation, and one whose bound "
       "exceeds the best time planned before it is skipped (filter 'bound'): the same best "
       "layout, fewer evaluations, the same answer under any --threads or mpirun")
      ("refine", po::value<int>()->value_name("K")->default_value(0),
       "then plan the best K layouts again with the full planner (--layout-evals each), each "
       "keeping the faster of its two plans")
      ("time-limit-s", po::value<double>()->value_name("S"),
       "wall-clock seconds of the whole search: no layout starts after it, and a layout's "
       "planner gets what is left (results then depend on the machine)")
      ("memory-limit-GiB", po::value<double>()->value_name("GiB"), "GiB a device may use (replaces its capacity)")
      ("margin-GiB", po::value<double>()->value_name("GiB")->default_value(0.0, "0"),
       "GiB kept free below the limit (the capacity or --memory-limit-GiB), as plan's")
      ("seed", po::value<std::uint64_t>()->value_name("N")->default_value(1), "planner seed")
      ("threads", po::value<int>()->value_name("N")->default_value(0, "all cores"), "layouts evaluated at once per process")
      ("top", po::value<int>()->value_name("N")->default_value(10), "rows of the table")
      ("json", po::bool_switch(), "print {layouts, search} as JSON (with --format: and 'export')")
      ("format", po::value<std::string>()->value_name("FORMAT"),
       "print the best layout as `bmpipe export` does: megatron (flags), mindformers (YAML), "
       "torchtitan (TOML) or torchtitan-registry (its 2026 launch command)")
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
  add_batch_options(opts);
  add_set_option(opts);
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
  if (c.top < 1) throw UsageError("--top", "must be at least 1");
  api::SearchRequest request;
  request.effort = api::planner_effort(vm["planner"].as<std::string>());
  request.space.tp = int_list(vm, "tp");
  request.space.pp = int_list(vm, "pp");
  request.space.vpp = int_list(vm, "vpp");
  request.space.micro_batch_size = int_list(vm, "micro-batch-size");
  request.space.ep = int_list(vm, "ep");
  request.space.etp = int_list(vm, "etp");
  request.space.cp = int_list(vm, "cp");
  request.space.schedules = name_list(vm, "schedules");
  if (vm.count("offload")) request.offload = vm["offload"].as<std::string>();
  if (vm.count("csv")) c.csv = vm["csv"].as<std::string>();
  if (vm.count("out")) c.out = vm["out"].as<std::string>();
  if (vm.count("format")) {
    c.format = vm["format"].as<std::string>();
    api::check_export_request(api::ExportRequest{*c.format, {}});
    request.framework = c.format;  // rank only the layouts the framework runs
  }
  request.seed = vm["seed"].as<std::uint64_t>();
  if (vm.count("max-evals")) request.max_evals = vm["max-evals"].as<std::int64_t>();
  request.layout_evals = vm["layout-evals"].as<std::int64_t>();
  if (vm.count("time-limit-s")) request.time_limit_s = vm["time-limit-s"].as<double>();
  request.margin_GiB = vm["margin-GiB"].as<double>();
  request.threads = vm["threads"].as<int>();
  request.bound = !vm["no-bound"].as<bool>();
  request.refine = vm["refine"].as<int>();
  request.screen_evals = vm["screen-evals"].as<std::int64_t>();
  request.screen_margin = vm["screen-margin-pct"].as<double>() / 100.0;
  // The screen is a pass of the quick planner: asked for with another, it would do nothing.
  for (const char* option : {"screen-evals", "screen-margin-pct"})
    if (!vm[option].defaulted() && request.effort != PlannerEffort::quick)
      throw UsageError(std::string("--") + option,
                       "applies to --planner quick only (got --planner " +
                           vm["planner"].as<std::string>() + ")");
  if (vm.count("memory-limit-GiB")) request.memory_limit_GiB = vm["memory-limit-GiB"].as<double>();
  api::check_search_request(request);  // a typo in an option fails before the file is read
  c.path = vm["config"].as<std::string>();
  // --global-batch-size, --seq-length and --set go into the document before it is read,
  // as for simulate and plan; --out writes them in.
  append_batch_and_sets(vm, c.overrides.set);
  // The config read once, under load_config's bound (a config is a few KiB; a wrong path
  // such as /dev/zero fails at 16 MiB): the bytes parsed are the bytes a --journal hashes,
  // standard input ("-") included.
  std::string text;
  try {
    text = read_untrusted_file(c.path, std::size_t{16} << 20, "config");
  } catch (const ReadFileError& e) {
    throw ConfigError(c.path, 0, "", e.what());
  }
  c.setup = api::prepare_search(parse_config(text, c.path, c.overrides), request);
  if (vm.count("journal")) {
    c.journal = vm["journal"].as<std::string>();
    // The inputs: the config's bytes and every option that can change a layout's result,
    // spelt as Python's search() spells them, so either resumes the other's journal.
    c.inputs_hash = api::journal_inputs_hash(
        text, api::journal_options(request, vm["screen-margin-pct"].as<double>(), c.overrides.set));
  }
  return c;
}

namespace {

/// "ETA <1 s" or "ETA N s" (N rounded up) for `seconds` of work left.
std::string eta_text(double seconds) {
  char b[64];
  if (seconds < 1)
    std::snprintf(b, sizeof b, "ETA <1 s");
  else
    std::snprintf(b, sizeof b, "ETA %.0f s", std::ceil(seconds));
  return b;
}

}  // namespace

SearchLines::SearchLines(const SearchCommand& c, int processes)
    : c_(c), processes_(processes), tty_(isatty(STDERR_FILENO) != 0) {}

void SearchLines::layout(const LayoutResult&, const api::SearchProgress& p) {
  if (c_.quiet) return;
  if (!tty_ && p.elapsed_s - last_line_ < c_.progress_interval_s && p.done < p.total) return;
  last_line_ = p.elapsed_s;
  const std::string eta = p.done >= p.total ? "ETA 0 s"
                          : p.eta_s         ? eta_text(*p.eta_s)
                                            : "ETA unknown";
  const std::string processes =
      processes_ > 1 ? ", " + std::to_string(processes_) + " processes" : std::string();
  std::fprintf(stderr,
               "%ssearch: planning, %zu / %zu layouts, %lld evaluations, best %s, %.1f s%s, %s%s",
               tty_ ? "\r" : "", p.done, p.total, static_cast<long long>(p.evaluations),
               p.best ? (ms(*p.best) + " ms").c_str() : "none yet", p.elapsed_s, processes.c_str(),
               eta.c_str(), tty_ ? "   " : "\n");
}

void SearchLines::clear() const {
  if (!c_.quiet && tty_) std::fprintf(stderr, "\r%120s\r", "");
}

void SearchLines::pass_started(const api::SearchPass& pass) {
  last_line_ = -1e300;
  if (c_.quiet) return;
  clear();
  const std::size_t n = pass.layouts;
  const char* s = n == 1 ? "" : "s";
  std::string line;
  if (pass.effort == PlannerEffort::quick) {
    char margin[32];
    std::snprintf(margin, sizeof margin, "%g", c_.setup.request.screen_margin * 100);
    line = "search: planning the " + std::to_string(n) + " layout" + s + " within " + margin +
           " % of the fastest screened time again, with the whole quick budget (" +
           std::to_string(kQuickEvals) + " evaluations and the polish)";
  } else {
    line = "search: planning the " + std::to_string(n) + " fastest layout" + s +
           " again with the full planner (--refine, " +
           std::to_string(c_.setup.request.layout_evals) + " evaluations each)";
  }
  if (pass.share) line += ", at most " + std::to_string(*pass.share) + " evaluations each";
  std::fprintf(stderr, "%s\n", line.c_str());
}

void SearchLines::pass_progress(const api::SearchPass&, const api::PassProgress& p) {
  if (c_.quiet) return;
  if (!tty_ && p.elapsed_s - last_line_ < c_.progress_interval_s && p.done < p.total) return;
  last_line_ = p.elapsed_s;
  std::fprintf(stderr, "%ssearch: planned again %zu / %zu layouts, %.1f s, %s%s", tty_ ? "\r" : "",
               p.done, p.total, p.elapsed_s,
               (p.done >= p.total ? std::string("ETA 0 s") : eta_text(p.eta_s)).c_str(),
               tty_ ? "   " : "\n");
}

namespace {

int report_search(const SearchCommand& c, api::SearchRun run, int processes, double wall_s) {
  const api::SearchReport report = api::rank_search(c.setup, std::move(run.results), processes,
                                                    wall_s, run.stopped_by, run.confirmed);
  const std::vector<LayoutResult>& ranked = report.layouts;
  const Config& config = c.setup.config;
  const bool best_fits = !ranked.empty() && ranked.front().rejected.empty() && ranked.front().fits;
  std::optional<ConfigEdits> best_edits;
  if (best_fits) {
    const LayoutResult& best = ranked.front();
    best_edits = ConfigEdits{best.layout.schedule,
                             best.layout.pp,
                             best.layout.vpp,
                             best.microbatches,
                             {},
                             {},
                             best.layout.tp,
                             best.layout.dp,
                             best.layout.micro_batch_size};
    // The plan's rows are those of the layout's own config (separate ends or not).
    const Config own = layout_config(config, best.layout);
    set_plan_keys(*best_edits, own, best.plan);
    // Keys layout_config changes with the layout (sequence parallelism for MoE at tp > 1,
    // the tp overlap at tp 1): the file says them when they differ from the source's.
    if (own.training.sequence_parallel != config.training.sequence_parallel)
      best_edits->sequence_parallel = own.training.sequence_parallel;
    if (own.training.tp_comm_overlap != config.training.tp_comm_overlap)
      best_edits->tp_comm_overlap = own.training.tp_comm_overlap;
    // The experts' folding and the context split are the layout's too (layout_config).
    if (report.experts) {
      best_edits->ep = best.layout.ep;
      best_edits->etp = best.layout.etp;
    }
    if (report.context || best.layout.cp != config.training.cp) best_edits->cp = best.layout.cp;
  }
  if (c.out) {
    if (!best_fits) throw ConfigError(config.file, 0, "--out", "no layout fits: nothing to write");
    const LayoutResult& best = ranked.front();
    // The layout's own config (layout_config) has the command line's keys and no Megatron
    // layout: that fixed another pp x vpp, and with the plan's partition would be a second
    // one.
    // --offload auto: the offload choice is the layout's too.
    Overrides written = c.overrides;
    if (!best.layout.offload.empty())
      written.set.emplace_back("training.offload_modules", best.layout.offload);
    if (best.layout.offload_lead >= 0)
      written.set.emplace_back("training.offload_lead", std::to_string(best.layout.offload_lead));
    write_edited_config(c.path, *c.out, written, {"training.megatron_layout"}, *best_edits,
                        "Written by bmpipe search from " + c.path + ": the fastest layout, " +
                            to_string(best.layout) + ", " + ms(best.iteration_time) +
                            " ms per iteration as simulated.\n" +
                            (c.setup.request.memory_limit_GiB
                                 ? "cluster.device.memory_GiB is --memory-limit-GiB, the limit "
                                   "it was searched for.\n"
                                 : "") +
                            "`bmpipe simulate` on this file reproduces it.",
                        c.setup.request.memory_limit_GiB);
  }
  // --format: the best layout as its --out file would state it, exported by the one
  // function `bmpipe export` calls, under the search's memory limit.
  std::optional<api::ExportOutcome> exported;
  if (c.format) {
    if (!best_fits)
      throw ConfigError(config.file, 0, "--format", "no layout fits: nothing to export");
    exported = api::export_config(
        api::config_with_plan(layout_config(config, ranked.front().layout), *best_edits),
        api::ExportRequest{*c.format, c.setup.request.memory_limit_GiB});
  }
  if (c.csv) {
    write_output(*c.csv, "--csv", api::search_csv(report));
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
  std::cout << api::search_table(report, config.file, c.top);
  return 0;
}

}  // namespace

void open_journal(const SearchCommand& c, std::optional<api::SearchJournal>& journal) {
  if (c.journal)
    journal.emplace(*c.journal, c.inputs_hash, c.setup, [](const std::string& note) {
      std::cerr << "bmpipe search: note: " << note << "\n";
    });
}

int search_and_report(const SearchCommand& c, api::SearchExecutor& executor,
                      std::optional<api::SearchJournal>& journal,
                      std::chrono::steady_clock::time_point start) {
  std::optional<api::JournalExecutor> resumed;
  if (journal) resumed.emplace(executor, *journal);
  api::SearchExecutor& e = resumed ? static_cast<api::SearchExecutor&>(*resumed) : executor;
  SearchLines lines(c, e.processes());
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
