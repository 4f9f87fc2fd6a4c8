#include <boost/program_options.hpp>
#include <iostream>
#include <optional>
#include <utility>

#include "api/api.hpp"
#include "api/simulation_outputs.hpp"
#include "api/summary.hpp"
#include "cli/commands.hpp"
#include "cli/guard.hpp"
#include "cli/options.hpp"
#include "cli/outputs.hpp"

namespace po = boost::program_options;

namespace bmpipe::cli {

int run_simulate(const std::vector<std::string>& args) {
  po::options_description opts("bmpipe simulate CONFIG [options]\n\nOptions");
  add_config_options(opts);
  const api::RequestTable<api::SimulateRequest> table = api::simulate_options();
  // clang-format off
  opts.add_options()
      ("json", po::bool_switch(), "print the summary as JSON on stdout instead of a table")
      ("trace", po::value<std::string>()->value_name("FILE"),
       "write a Chrome/Perfetto trace (JSON) of the run to FILE ('-': stdout)")
      ("svg", po::value<std::string>()->value_name("FILE"),
       "write an SVG timeline of the run (ops, bubbles, memory per device) to FILE ('-': stdout)")
      ("memory-svg", po::value<std::string>()->value_name("FILE"),
       "write every device's memory over time, against its capacity, as SVG to FILE ('-': stdout)");
  // clang-format on
  const std::size_t overrides = rows_before_overrides(table);
  add_request_options(opts, table, 0, overrides);  // --schedule, --schedule-file
  opts.add_options()("export-schedule", po::value<std::string>()->value_name("FILE"),
                     "write the schedule that runs to FILE in the same CSV format");
  add_progress_options(opts, "what runs, seconds so far; a run shorter than that prints none");
  add_request_options(opts, table, overrides);
  po::variables_map vm;
  if (auto stop = parse_command_line(
          "simulate", args, opts,
          "Exit codes: 0 success (also when a device does not fit: that is a result),\n"
          "            1 simulation failed (deadlock), 2 bad input.\n",
          vm))
    return *stop;
  const bool json = vm["json"].as<bool>();
  return guarded("simulate", [&] {
    api::SimulateRequest request;
    fill_request(table, vm, request);
    api::check_simulate_request(request);  // before the file is read
    api::SimulationOutputs outputs;
    for (auto [option, path] : {std::pair{"export-schedule", &outputs.schedule_csv},
                                {"trace", &outputs.trace},
                                {"svg", &outputs.svg},
                                {"memory-svg", &outputs.memory_svg}})
      if (vm.count(option)) *path = vm[option].as<std::string>();
    // Overrides (and --set values) go in before the file's checks; prepare_simulation
    // applies the scalar ones again, which changes nothing.
    const Config config = load_config(vm["config"].as<std::string>(), request.overrides);
    // What the outputs keep per op counts against the work limit, before the run allocates.
    api::check_simulation_outputs(config, outputs);
    // A long run says what it is doing: making the schedule (zb-auto and zb-v simulate
    // candidates then, and draw the chosen one), simulating, the bubble breakdown. At
    // 65,536 micro-batches and pp 64 zb-v takes seconds in each (issue 20, item 7).
    api::Ticker ticker = progress_ticker("simulate", vm);
    const std::string making = request.schedule_file
                                   ? "reading the schedule file"
                                   : "making the " + config.training.schedule + " schedule";
    ticker.phase(making);
    request.on_candidate = [&](int n) {
      ticker.phase(making + ", " + std::to_string(n) + " candidates simulated");
    };
    // parse -> prepare -> run (writing the outputs) -> print
    const api::PreparedSimulation run = api::prepare_simulation(config, request);
    const api::SimulationReport report =
        api::run_with_outputs(run, outputs, [&](const std::string& what) { ticker.phase(what); });
    ticker.stop();
    // One output may be standard output ("-"); the summary then goes to stderr.
    std::ostream& summary = outputs.to_stdout() ? std::cerr : std::cout;
    if (json)
      summary << json_text(report.summary) << "\n";
    else
      summary << "bmpipe simulate " << config.file << "\n"
              << summary_text(report.info, report.result,
                              report.bubbles ? &*report.bubbles : nullptr);
    return report.result.ok ? 0 : 1;
  });
}

int run_schedules(const std::vector<std::string>& args) {
  if (args.size() == 1 && args[0] == "--names") {  // for scripts: one name per line
    for (const std::string& name : api::schedule_name_list()) std::cout << name << "\n";
    return 0;
  }
  if (!args.empty() && args[0] != "--help" && args[0] != "-h") {
    std::cerr << "bmpipe schedules: takes no arguments but --names (one name per line)\n";
    return 2;
  }
  std::cout << api::schedule_help_text();
  if (!args.empty())  // --help: the list, then how to call it
    std::cout << "\nbmpipe schedules [--names]: the list above; --names prints one name per "
                 "line.\nExit codes: 0 success, 2 bad usage.\n";
  return 0;
}

}  // namespace bmpipe::cli
