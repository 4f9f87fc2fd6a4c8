// bmpipe plan: the layers of each stage and the recompute mode of each layer, searched
// with the simulator in the loop, beside the baselines people run today.
#include <unistd.h>

#include <boost/program_options.hpp>
#include <iostream>
#include <optional>

#include "api/api.hpp"
#include "api/export.hpp"
#include "api/progress_lines.hpp"
#include "api/tables.hpp"
#include "cli/commands.hpp"
#include "cli/guard.hpp"
#include "cli/options.hpp"
#include "cli/outputs.hpp"

namespace po = boost::program_options;

namespace bmpipe::cli {

int run_plan(const std::vector<std::string>& args) {
  po::options_description opts("bmpipe plan CONFIG [options]\n\nOptions");
  add_config_options(opts);
  const api::RequestTable<api::PlanRequest> table = api::plan_options();
  // The request's options up to the overrides, then the command's own, then the overrides.
  const std::size_t overrides = rows_before_overrides(table);
  add_request_options(opts, table, 0, overrides);
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
  add_request_options(opts, table, overrides);
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
    api::check_plan_format(format);  // table, or an exporter's name
    // parse -> prepare -> run -> print: api::run_plan checks the options, prepares the
    // config and plans every schedule asked for, as the Python module does.
    const std::string path = vm["config"].as<std::string>();
    api::PlanRequest request;
    fill_request(table, vm, request);
    const std::string given = request.overrides.schedule.value_or("");
    const double interval_s = progress_interval_s(vm);
    api::PlanProgressLines line(print_to_stderr, !vm["quiet"].as<bool>(),
                                isatty(STDERR_FILENO) != 0, interval_s, request.max_evals,
                                request.time_limit_s);
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
    if (vm.count("out")) {
      const std::string out = vm["out"].as<std::string>();
      api::write_output(out, "--out", api::planned_config(path, out, planned, request));
    }

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
    std::cout << api::plan_text(config.file, request, planned, memory_limit);
    return 0;
  });
}

}  // namespace bmpipe::cli
