// bmpipe plan: the layers of each stage and the recompute mode of each layer, searched
// with the simulator in the loop, beside the baselines people run today.
#include <unistd.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include "api/api.hpp"
#include "api/export.hpp"
#include "api/summary.hpp"
#include "cli/commands.hpp"
#include "cli/guard.hpp"
#include "cli/options.hpp"
#include "cli/outputs.hpp"
#include "experiment/experiment.hpp"
#include "experiment/suggest.hpp"
#include "experiment/write_config.hpp"
#include "planner/planner.hpp"
#include "schedules/registry.hpp"
#include "sim/units.hpp"

namespace po = boost::program_options;

namespace bmpipe::cli {

namespace {

std::string ms(Time t) {
  return format_ms(t, 3);
}

/// The run as a table: one row per stage, then the totals.
std::string plan_table(const Experiment& e, const PlanRun& run, std::int64_t limit) {
  std::ostringstream out;
  const std::vector<StageInfo> stages = stage_info(e, run.plan);
  const SimInput in = assemble(e, run.plan, run.schedule);
  char buf[256];
  // Layers per recompute mode, one column each.
  std::snprintf(buf, sizeof buf, "%5s %4s %11s", "stage", "rank", "layers");
  out << buf;
  const std::vector<Recompute> modes = e.layers.modes();
  for (Recompute r : modes) {
    std::snprintf(buf, sizeof buf, " %5s", std::string(recompute_column(r)).c_str());
    out << buf;
  }
  std::snprintf(buf, sizeof buf, " %10s %10s %24s\n", "F ms/mb", "B ms/mb", "peak mem / limit");
  out << buf;
  for (std::size_t s = 0; s < stages.size(); ++s) {
    const StageInfo& st = stages[s];
    const int rank = run.schedule.stage_rank[s];
    const StageCost& c = in.stages[s];
    const std::string layers = st.num_layers == 0
                                   ? "-"
                                   : std::to_string(st.first_layer) + "-" +
                                         std::to_string(st.first_layer + st.num_layers - 1);
    const std::string mem =
        run.result.ok ? format_gib(run.result.devices[rank].peak_bytes) + " / " + format_gib(limit)
                      : "-";
    std::snprintf(buf, sizeof buf, "%5zu %4d %11s", s, rank, layers.c_str());
    out << buf;
    for (Recompute r : modes) {
      std::snprintf(buf, sizeof buf, " %5d", st.modes[r]);
      out << buf;
    }
    std::snprintf(buf, sizeof buf, " %10s %10s %24s\n", ms(c.forward).c_str(),
                  ms(c.backward_full() + c.recompute).c_str(), mem.c_str());
    out << buf;
  }
  if (run.result.ok) {
    std::snprintf(buf, sizeof buf, "iteration time   %s ms   bubble ratio %.2f %%   %s\n",
                  ms(run.result.iteration_time).c_str(), 100.0 * run.result.bubble_ratio,
                  run.result.fits ? "fits" : "DOES NOT FIT");
    out << buf;
  } else {
    out << "simulation failed: " << run.result.error << "\n";
  }
  return out.str();
}

std::string baselines_table(const PlanOutcome& o, const PlanRun& run) {
  std::ostringstream out;
  char buf[512];
  std::snprintf(buf, sizeof buf, "\n%-23s %14s %6s %9s\n", "baseline", "iteration ms", "fits",
                "speedup");
  out << buf;
  for (const BaselineRun& b : o.baselines) {
    if (!b.run) {
      out << "  " << b.name << ": " << b.error << "\n";
      continue;
    }
    const double speedup = run.result.iteration_time > 0
                               ? static_cast<double>(b.run->result.iteration_time) /
                                     static_cast<double>(run.result.iteration_time)
                               : 0.0;
    std::string note = b.error;
    if (!b.offload_modules.empty())
      note +=
          (note.empty() ? "" : "; ") + std::string("offloads ") + b.offload_modules + " at lead 1";
    if (!b.expressible)
      note += (note.empty() ? "" : "; ") + std::string("the framework cannot state it");
    std::snprintf(buf, sizeof buf, "%-23s %14s %6s %8.3fx%s\n", b.name.c_str(),
                  ms(b.run->result.iteration_time).c_str(), b.run->fits() ? "yes" : "NO", speedup,
                  note.empty() ? "" : ("   (" + note + ")").c_str());
    out << buf;
  }
  if (const BaselineRun* ref = megatron_reference(o); ref && run.result.iteration_time > 0) {
    std::snprintf(buf, sizeof buf,
                  "speedup over Megatron-LM: %.3fx against %s (the fastest megatron-* baseline "
                  "that fits)\n",
                  static_cast<double>(ref->run->result.iteration_time) /
                      static_cast<double>(run.result.iteration_time),
                  ref->name.c_str());
    out << buf;
  } else
    out << "speedup over Megatron-LM: none of the megatron-* baselines fits\n";
  return out.str();
}

/// Progress on stderr. On a terminal, one live line: evaluations, best so far, elapsed.
/// Off a terminal (a log file, a CI job), one line every `interval_s` seconds: the
/// schedule and phase, the command's evaluations so far, the best so far, elapsed and an
/// ETA bounded by the evaluation budget (the planner may stop sooner, when it converges;
/// it never runs past --max-evals or --time-limit-s).
class ProgressLine {
 public:
  ProgressLine(bool on, bool tty, double interval_s, std::int64_t budget,
               std::optional<double> time_limit_s)
      : on_(on), tty_(tty), interval_s_(interval_s), budget_(budget), limit_s_(time_limit_s) {}
  ~ProgressLine() { clear(); }
  void show(const std::string& what, const PlannerProgress& p) {
    if (!on_) return;
    // Each schedule's planner counts from 0: the command's total adds the ones before.
    if (what != label_) {
      done_before_ += last_evaluations_;
      label_ = what;
    }
    last_evaluations_ = p.evaluations;
    const std::string best = p.best ? ms(*p.best) + " ms" : "none fits yet";
    char buf[240];
    // Seconds since the command started: the planner's own clock starts after the schedule
    // and the baselines, which take seconds for zb-v at thousands of micro-batches.
    const double now = std::chrono::duration<double>(Clock::now() - started_).count();
    if (tty_) {
      std::snprintf(buf, sizeof buf, "\r%s: %s, %lld evaluations, best %s, %.1f s  ", what.c_str(),
                    p.phase.c_str(), static_cast<long long>(p.evaluations), best.c_str(), now);
      std::cerr << buf << std::flush;
      shown_ = true;
      return;
    }
    // The first line after one interval too: a plan shorter than that prints none, and an
    // error stays the first line of stderr.
    if (now - last_line_s_ < interval_s_) return;
    last_line_s_ = now;
    const std::int64_t total = done_before_ + p.evaluations;
    std::string eta = "ETA unknown";
    if (total > 0 && now > 0) {
      double left = static_cast<double>(std::max<std::int64_t>(0, budget_ - total)) *
                    (now / static_cast<double>(total));
      if (limit_s_) left = std::min(left, std::max(0.0, *limit_s_ - now));
      char b[64];
      std::snprintf(b, sizeof b, left < 1 ? "ETA <1 s" : "ETA at most %.0f s", std::ceil(left));
      eta = b;
    }
    std::snprintf(buf, sizeof buf, "plan: %s: %s, %lld evaluations, best %s, %.1f s, %s\n",
                  what.c_str(), p.phase.c_str(), static_cast<long long>(total), best.c_str(), now,
                  eta.c_str());
    std::cerr << buf << std::flush;
  }
  void clear() {
    if (on_ && tty_ && shown_) std::cerr << "\r" << std::string(100, ' ') << "\r" << std::flush;
    shown_ = false;
  }

 private:
  using Clock = std::chrono::steady_clock;
  bool on_, tty_;
  double interval_s_;
  std::int64_t budget_;
  std::optional<double> limit_s_;
  bool shown_ = false;
  double last_line_s_ = 0;
  std::string label_;
  std::int64_t done_before_ = 0, last_evaluations_ = 0;
  Clock::time_point started_ = Clock::now();
};

}  // namespace

int run_plan(const std::vector<std::string>& args) {
  po::options_description opts("bmpipe plan CONFIG [options]\n\nOptions");
  add_config_options(opts);
  const api::RequestTable<api::PlanRequest> table = api::plan_options();
  // The request's options up to the overrides, then the command's own, then the overrides.
  const auto overrides_from_row =
      table.begin() + static_cast<std::ptrdiff_t>(table.size() - api::override_options("").size());
  for (auto row = table.begin(); row != overrides_from_row; ++row) add_request_option(opts, *row);
  // clang-format off
  opts.add_options()
      ("format", po::value<std::string>()->value_name("FORMAT")->default_value("table"),
       "table, or the plan exported as `bmpipe export` does: megatron (flags), mindformers (YAML), "
       "torchtitan (TOML) or torchtitan-registry (its 2026 launch command)")
      ("json", po::bool_switch(),
       "print the plan, baselines and search as JSON (with --format: and the export, as 'export')")
      ("out", po::value<std::string>()->value_name("FILE"), "write the config with the plan filled in to FILE");
  // clang-format on
  add_progress_options(opts, "schedule, phase, evaluations, best so far, ETA");
  for (auto row = overrides_from_row; row != table.end(); ++row) add_request_option(opts, *row);
  // Parsed so that it is refused with its reason, but not listed: plan does not take it.
  po::options_description refused;
  refused.add_options()("schedule-file", po::value<std::string>(), "");
  po::variables_map vm;
  if (auto stop = parse_command_line(
          "plan", args, opts,
          "Searches the layers of every stage and the recompute mode (none, selective,\n"
          "full) of every layer for the fastest simulated iteration whose every device\n"
          "stays within the memory limit (capacity, or --memory-limit-GiB, minus\n"
          "--margin-GiB). Every candidate is simulated. Deterministic for a seed and\n"
          "--max-evals, whatever --threads. A schedule file cannot be planned for: it\n"
          "fixes an op order made for another partition; give --schedule NAME.\n"
          "Exit codes: 0 a plan fits, 1 the simulation failed, 2 bad input or no plan\n"
          "fits the memory limit (the message names the rank that comes closest).\n",
          vm, &refused))
    return *stop;
  const bool json = vm["json"].as<bool>();
  const std::string format = vm["format"].as<std::string>();
  return guarded("plan", [&] {
    if (vm.count("schedule-file"))
      throw ConfigError(vm["schedule-file"].as<std::string>(), 0, "--schedule-file",
                        "bmpipe plan builds its own schedule: a schedule file fixes an op order "
                        "made for another partition; use --schedule NAME");
    // table, or an exporter's name (frameworks/exporters.hpp, through api::export_formats).
    std::vector<std::string> formats = {"table"};
    for (const std::string& f : api::export_formats()) formats.push_back(f);
    if (std::find(formats.begin(), formats.end(), format) == formats.end())
      throw UsageError("--format", "unknown format '" + format + "'" +
                                       did_you_mean(format, formats) + " (" + comma_list(formats) +
                                       ")");
    // parse -> prepare -> run -> print: api::run_plan checks the options, prepares the
    // config and plans every schedule asked for, as the Python module does.
    const std::string path = vm["config"].as<std::string>();
    api::PlanRequest request;
    fill_request(table, vm, request);
    const std::string given = request.overrides.schedule.value_or("");
    const std::string baseline = request.baseline.value_or("");
    const double interval_s = progress_interval_s(vm);
    ProgressLine line(!vm["quiet"].as<bool>(), isatty(STDERR_FILENO) != 0, interval_s,
                      request.max_evals, request.time_limit_s);
    request.progress = [&line](const std::string& label, const PlannerProgress& p) {
      line.show(label, p);
    };
    api::check_plan_request(request);  // a typo in an option fails before the file is read
    // Overrides first, then the file's checks, once (a file valid only with --pp loads);
    // "auto" is not a schedule the file's checks know, so it stays for run_plan alone.
    Overrides load_overrides = request.overrides;
    if (given == "auto") load_overrides.schedule.reset();
    const Config config = load_config(path, load_overrides);
    api::PlanResults planned = api::run_plan(config, request);  // NoPlanFits: exit 2
    line.clear();
    const std::int64_t memory_limit = api::plan_memory_limit_bytes(config, request);
    const std::shared_ptr<const Experiment> e = planned.experiment;
    const std::vector<PlanOutcome>& outcomes = planned.outcomes;
    const PlanOutcome& top = outcomes.front();
    const PlanRun* shown = planned.shown;
    const int shown_vpp = shown->schedule.chunks_per_device();

    ConfigEdits edits{top.schedule,
                      shown->schedule.num_ranks,
                      shown_vpp,
                      shown->schedule.num_microbatches,
                      {},
                      {},
                      {},
                      {},
                      {}};
    set_plan_keys(edits, e->config, shown->plan);
    // --offload auto: the offload choice kept is part of the job written and exported.
    Overrides written = request.overrides;
    if (!planned.offload_modules.empty())
      written.set.emplace_back("training.offload_modules", planned.offload_modules);
    if (planned.offload_lead)
      written.set.emplace_back("training.offload_lead", std::to_string(*planned.offload_lead));
    if (vm.count("out"))
      // The job planned: the command line's overrides (--set, --global-batch-size, ...)
      // are written in with the plan.
      write_edited_config(
          path, vm["out"].as<std::string>(), written, {}, edits,
          "Written by bmpipe plan from " + path + ": " +
              (baseline.empty() ? "the plan found" : "the " + baseline + " baseline's plan") +
              " for " + top.schedule + ", " + ms(shown->result.iteration_time) +
              " ms per iteration as simulated.\n" +
              (request.memory_limit_GiB
                   ? "cluster.device.memory_GiB is --memory-limit-GiB, the limit it was planned "
                     "for.\n"
                   : "") +
              "`bmpipe simulate` on this file reproduces it.",
          request.memory_limit_GiB);

    // --format: the plan as its --out file would state it, exported by the one function
    // `bmpipe export` calls, under the plan's memory limit.
    std::optional<api::ExportOutcome> exported;
    if (format != "table")
      exported = api::export_plan(
          config, planned,
          api::ExportRequest{format, static_cast<double>(memory_limit) / 1073741824.0});
    if (json) {
      nlohmann::json document = planned.summary;
      if (exported) document["export"] = exported->summary;
      std::cout << json_text(document) << "\n";
      return 0;
    }
    if (exported) {
      std::cout << exported->text;
      return 0;
    }
    std::cout << "bmpipe plan " << config.file << "\n";
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "schedule %s   pp %d   vpp %d   micro-batches %d   memory limit %s per device\n",
                  top.schedule.c_str(), shown->schedule.num_ranks, shown_vpp,
                  shown->schedule.num_microbatches, format_gib(memory_limit).c_str());
    std::cout << buf;
    if (!baseline.empty()) std::cout << "showing the " << baseline << " baseline\n";
    if (request.offload && *request.offload != "none") {
      const nlohmann::json& off = planned.summary["offload"];
      const std::string form = off["form"].get<std::string>();
      std::cout << "activation offload: kept " << planned.offload_modules
                << (planned.offload_lead ? ", lead " + std::to_string(*planned.offload_lead) : "")
                << (form == "job" ? "" : " (" + form + ")") << " of\n";
      for (const auto& row : off["tried"]) {
        const std::string lead = row.contains("offload_lead")
                                     ? "lead " + std::to_string(row["offload_lead"].get<int>())
                                     : "";
        // The form, and how many layers a per-layer plan offloads.
        std::string how = row.contains("form") ? row["form"].get<std::string>() : "";
        if (row.contains("offload_layers"))
          how += (how.empty() ? "" : " ") + std::to_string(row["offload_layers"].get<int>()) +
                 " layers";
        std::snprintf(buf, sizeof buf, "  %-58s %-7s %-20s ",
                      row["offload_modules"].get<std::string>().c_str(), lead.c_str(), how.c_str());
        std::cout << buf;
        if (row.contains("iteration_time_ms")) {
          std::snprintf(buf, sizeof buf, "%.3f ms\n", row["iteration_time_ms"].get<double>());
          std::cout << buf;
        } else {
          std::cout << row["error"].get<std::string>() << "\n";
        }
      }
    }
    std::cout << "\n" << plan_table(*e, *shown, memory_limit);
    std::cout << baselines_table(top, *shown);
    if (outcomes.size() > 1) {
      std::cout << "\nschedules planned (fastest first):\n";
      for (const PlanOutcome& oc : outcomes) {
        std::snprintf(buf, sizeof buf, "  %-12s vpp %d  ", oc.schedule.c_str(), oc.vpp);
        std::cout << buf
                  << (oc.best.fits() ? ms(oc.best.result.iteration_time) + " ms"
                                     : "no fitting plan: " + oc.infeasible)
                  << "\n";
      }
    }
    const SearchStats& s = top.stats;
    std::snprintf(buf, sizeof buf,
                  "\nsearch: %lld evaluations, %lld cache hits, %lld filtered, %.2f s, %d threads, "
                  "seed %llu, stopped by %s\n",
                  static_cast<long long>(s.evaluations), static_cast<long long>(s.cache_hits),
                  static_cast<long long>(s.filtered), s.wall_s, s.threads,
                  static_cast<unsigned long long>(s.seed), s.stopped_by.c_str());
    std::cout << buf;
    return 0;
  });
}

}  // namespace bmpipe::cli
