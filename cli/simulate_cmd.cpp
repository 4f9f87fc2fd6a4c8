#include <boost/program_options.hpp>
#include <fstream>
#include <iostream>
#include <optional>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "cli/outputs.hpp"
#include "experiment/experiment.hpp"
#include "schedules/registry.hpp"
#include "schedules/schedule_file.hpp"
#include "sim/bubbles.hpp"
#include "traces/chrome_trace.hpp"
#include "traces/summary.hpp"
#include "traces/svg.hpp"
#include "traces/tee.hpp"

namespace po = boost::program_options;

namespace bmpipe::cli {

int run_simulate(const std::vector<std::string>& args) {
  po::options_description opts("bmpipe simulate CONFIG [options]\n\nOptions");
  add_config_options(opts);
  // clang-format off
  opts.add_options()
      ("json", po::bool_switch(), "print the summary as JSON on stdout instead of a table")
      ("trace", po::value<std::string>(), "write a Chrome/Perfetto trace (JSON) of the run to FILE")
      ("svg", po::value<std::string>(),
       "write an SVG timeline of the run (ops, bubbles, memory) to FILE")
      ("schedule", po::value<std::string>(),
       ("schedule to run, overriding training.schedule (" + schedule_names() + ")").c_str())
      ("schedule-file", po::value<std::string>(),
       "replay the op order in FILE (torch.distributed.pipelining compute-only CSV: one row per "
       "rank, e.g. 0F0,0F1,0I0,0W0); pp becomes the number of rows")
      ("export-schedule", po::value<std::string>(), "write the schedule that runs to FILE in the same CSV format");
  // clang-format on
  add_override_options(opts, "chunks per device, overriding training.vpp");
  po::variables_map vm;
  if (auto stop = parse_command_line(
          "simulate", args, opts,
          "Exit codes: 0 success (also when a device does not fit: that is a result),\n"
          "            1 simulation failed (deadlock), 2 bad input.\n",
          vm))
    return *stop;
  const bool json = vm["json"].as<bool>();
  try {
    Config config = load_config(vm["config"].as<std::string>());
    Overrides o = overrides_from(vm);
    if (vm.count("schedule")) o.schedule = vm["schedule"].as<std::string>();
    // A schedule file decides pp (its rows), the chunks per rank and the micro-batches.
    std::optional<Schedule> from_file;
    if (vm.count("schedule-file")) {
      if (vm.count("schedule") || vm.count("pp") || vm.count("vpp") || vm.count("microbatches")) {
        std::cerr << "bmpipe simulate: --schedule-file sets the schedule, pp, vpp and "
                     "micro-batches; do not combine it with --schedule/--pp/--vpp/--microbatches\n";
        return 2;
      }
      try {
        from_file = load_schedule_file(vm["schedule-file"].as<std::string>());
      } catch (const ScheduleFileError& e) {
        std::cerr << e.what() << "\n";
        return 2;
      }
      o.pp = from_file->num_ranks;
      o.vpp =
          from_file->num_stages % from_file->num_ranks == 0 ? from_file->chunks_per_device() : 1;
      o.microbatches = from_file->num_microbatches;
    }
    apply_overrides(config, o);

    // parse -> prepare -> run -> print
    const std::shared_ptr<const Experiment> experiment = prepare(config);
    const Schedule schedule = from_file ? std::move(*from_file) : make_schedule(*experiment);
    if (vm.count("export-schedule")) {
      try {
        save_schedule_file(schedule, vm["export-schedule"].as<std::string>());
      } catch (const std::runtime_error& e) {
        throw OutputError(vm["export-schedule"].as<std::string>(), "--export-schedule", e.what());
      }
    }
    const Plan plan = config_plan(*experiment, schedule.num_stages);
    const SimInput input = assemble(*experiment, plan, schedule);
    const Schedule& compiled = schedule;  // TODO(engine merge): CompiledSchedule
    // Optional outputs are opened before the run so that a bad path fails fast.
    std::ofstream trace_file, svg_file;
    std::optional<ChromeTraceWriter> trace;
    std::optional<TimelineRecorder> recorder;
    if (vm.count("trace")) {
      open_output(trace_file, vm["trace"].as<std::string>(), "--trace");
      trace.emplace(trace_file, input, schedule, trace_labels(*experiment, plan));
    }
    if (vm.count("svg")) {
      open_output(svg_file, vm["svg"].as<std::string>(), "--svg");
      recorder.emplace(input, schedule, schedule.name);
    }
    TeeObserver observers({trace ? &*trace : nullptr, recorder ? &*recorder : nullptr});
    const SimResult result = simulate(input, compiled, observers.get());
    if (trace) {
      trace->finish();
      close_output(trace_file, vm["trace"].as<std::string>(), "--trace");
    }
    if (recorder) {
      write_timeline_svg(svg_file, recorder->take(result));
      close_output(svg_file, vm["svg"].as<std::string>(), "--svg");
    }
    const RunInfo info = make_run_info(*experiment, plan, schedule);
    std::optional<BubbleBreakdown> bubbles;
    if (result.ok) bubbles = decompose_bubbles(input, compiled, result);
    if (json)
      std::cout << json_text(summary_json(info, result, bubbles ? &*bubbles : nullptr)) << "\n";
    else
      std::cout << "bmpipe simulate " << config.file << "\n"
                << summary_text(info, result, bubbles ? &*bubbles : nullptr);
    return result.ok ? 0 : 1;
  } catch (const OutputError& e) {
    std::cerr << "bmpipe simulate: " << e.what() << "\n";
    return 2;
  } catch (const ConfigError& e) {
    std::cerr << "bmpipe simulate: " << e.what() << "\n";
    return 2;
  }
}

int run_schedules(const std::vector<std::string>& args) {
  if (!args.empty() && args[0] != "--help" && args[0] != "-h") {
    std::cerr << "bmpipe schedules: takes no arguments\n";
    return 2;
  }
  std::cout << schedule_help();
  return 0;
}

}  // namespace bmpipe::cli
