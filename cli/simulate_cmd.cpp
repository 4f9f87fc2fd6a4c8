#include <boost/program_options.hpp>
#include <iostream>
#include <optional>

#include "api/api.hpp"
#include "api/summary.hpp"
#include "cli/commands.hpp"
#include "cli/guard.hpp"
#include "cli/options.hpp"
#include "cli/outputs.hpp"
#include "schedules/registry.hpp"
#include "schedules/schedule_file.hpp"
#include "sim/observer.hpp"
#include "traces/chrome_trace.hpp"
#include "traces/svg.hpp"

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
    // Overrides (and --set values) go in before the file's checks; prepare_simulation
    // applies the scalar ones again, which changes nothing.
    const Config config = load_config(vm["config"].as<std::string>(), request.overrides);
    // What the outputs keep per op counts against the work limit, before the run allocates.
    api::check_simulation_outputs(config, vm.count("trace") > 0, vm.count("svg") > 0,
                                  vm.count("memory-svg") > 0);
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
    // parse -> prepare -> run -> print
    const api::PreparedSimulation run = api::prepare_simulation(config, request);
    if (vm.count("export-schedule")) {
      ticker.phase("writing the schedule");
      api::write_output(vm["export-schedule"].as<std::string>(), "--export-schedule",
                        schedule_to_csv(run.schedule));
    }
    // Optional outputs are opened before the run so that a bad path fails fast. One of
    // them may be standard output ("-"); the summary then goes to stderr.
    int to_stdout = 0;
    for (const char* option : {"trace", "svg", "memory-svg"})
      if (vm.count(option) && vm[option].as<std::string>() == "-") ++to_stdout;
    if (to_stdout > 1)
      throw UsageError("--trace/--svg/--memory-svg", "only one of them can be '-' (stdout)");
    std::optional<api::OutputFile> trace_out, svg_out, memory_out;
    std::optional<ChromeTraceWriter> trace;
    std::optional<TimelineRecorder> recorder;
    if (vm.count("trace")) {
      trace_out.emplace(vm["trace"].as<std::string>(), "--trace");
      trace.emplace(trace_out->stream(), run.input, run.schedule, api::trace_labels(run));
    }
    if (vm.count("svg")) svg_out.emplace(vm["svg"].as<std::string>(), "--svg");
    if (vm.count("memory-svg"))
      memory_out.emplace(vm["memory-svg"].as<std::string>(), "--memory-svg");
    if (svg_out || memory_out) recorder.emplace(run.input, run.schedule, run.schedule.name);
    TeeObserver observers({trace ? &*trace : nullptr, recorder ? &*recorder : nullptr});
    const api::SimulationReport report = api::run_prepared(
        run, observers.get(), [&](const std::string& what) { ticker.phase(what); });
    ticker.phase("writing the outputs");
    if (trace) {
      trace->finish();
      trace_out->close();
    }
    if (recorder) {
      const Timeline timeline = recorder->take(report.result);
      if (svg_out) {
        write_timeline_svg(svg_out->stream(), timeline);
        svg_out->close();
      }
      if (memory_out) {
        write_memory_svg(memory_out->stream(), timeline);
        memory_out->close();
      }
    }
    ticker.stop();
    std::ostream& summary = to_stdout ? std::cerr : std::cout;
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
    for (const ScheduleInfo& info : builtin_schedules()) std::cout << info.name << "\n";
    return 0;
  }
  if (!args.empty() && args[0] != "--help" && args[0] != "-h") {
    std::cerr << "bmpipe schedules: takes no arguments but --names (one name per line)\n";
    return 2;
  }
  std::cout << schedule_help();
  if (!args.empty())  // --help: the list, then how to call it
    std::cout << "\nbmpipe schedules [--names]: the list above; --names prints one name per "
                 "line.\nExit codes: 0 success, 2 bad usage.\n";
  return 0;
}

}  // namespace bmpipe::cli
