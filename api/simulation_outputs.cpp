#include "api/simulation_outputs.hpp"

#include "api/output_file.hpp"
#include "schedules/schedule_file.hpp"
#include "sim/observer.hpp"
#include "traces/chrome_trace.hpp"
#include "traces/svg.hpp"

namespace bmpipe::api {

int SimulationOutputs::to_stdout() const {
  int n = 0;
  for (const std::optional<std::string>* path : {&trace, &svg, &memory_svg})
    if (*path && **path == "-") ++n;
  return n;
}

void check_simulation_outputs(const Config& config, const SimulationOutputs& outputs) {
  check_simulation_outputs(config, outputs.trace.has_value(), outputs.svg.has_value(),
                           outputs.memory_svg.has_value());
}

SimulationReport run_with_outputs(const PreparedSimulation& run, const SimulationOutputs& outputs,
                                  const std::function<void(const std::string&)>& on_phase) {
  auto phase = [&](const std::string& what) {
    if (on_phase) on_phase(what);
  };
  if (outputs.schedule_csv) {
    phase("writing the schedule");
    write_output(*outputs.schedule_csv, "--export-schedule", schedule_to_csv(run.schedule));
  }
  if (outputs.to_stdout() > 1)
    throw RequestError("--trace/--svg/--memory-svg", "only one of them can be '-' (stdout)");
  std::optional<OutputFile> trace_out, svg_out, memory_out;
  std::optional<ChromeTraceWriter> trace;
  std::optional<TimelineRecorder> recorder;
  if (outputs.trace) {
    trace_out.emplace(*outputs.trace, "--trace");
    trace.emplace(trace_out->stream(), run.input, run.schedule, trace_labels(run));
  }
  if (outputs.svg) svg_out.emplace(*outputs.svg, "--svg");
  if (outputs.memory_svg) memory_out.emplace(*outputs.memory_svg, "--memory-svg");
  if (svg_out || memory_out) recorder.emplace(run.input, run.schedule, run.schedule.name);
  TeeObserver observers({trace ? &*trace : nullptr, recorder ? &*recorder : nullptr});
  SimulationReport report = run_prepared(run, observers.get(), on_phase);
  phase("writing the outputs");
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
  return report;
}

void write_compare_svg_file(const std::string& path, const CompareOutcome& outcome) {
  OutputFile out(path, "--svg");
  write_compare_svg(out.stream(), outcome.timelines);
  out.close();
}

}  // namespace bmpipe::api
