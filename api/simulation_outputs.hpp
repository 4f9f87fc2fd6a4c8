#pragma once
/// \file
/// The files a simulation writes beside its summary (`bmpipe simulate --export-schedule,
/// --trace, --svg, --memory-svg`): the schedule as CSV, a Chrome/Perfetto trace, the
/// timeline SVG and every device's memory as SVG. One function runs a prepared simulation
/// with the observers those files need and writes them, each through an OutputFile (atomic;
/// "-" is standard output), so that every front end writes the same bytes.

#include <functional>
#include <optional>
#include <string>

#include "api/api.hpp"

namespace bmpipe::api {

/// Where each output goes; none: not written.
struct SimulationOutputs {
  std::optional<std::string> schedule_csv;  ///< the schedule that runs, as a schedule file
  std::optional<std::string> trace;         ///< Chrome/Perfetto trace (JSON)
  std::optional<std::string> svg;           ///< timeline: ops, bubbles, memory per device
  std::optional<std::string> memory_svg;    ///< every device's memory against its capacity
  /// How many of trace, svg and memory_svg go to standard output ("-"); the summary then
  /// goes elsewhere. More than one is refused by run_with_outputs.
  int to_stdout() const;
};

/// check_simulation_outputs for the outputs asked for: before the run allocates, a
/// ConfigError when what they keep per op would take the run past its work limit.
void check_simulation_outputs(const Config& config, const SimulationOutputs& outputs);

/// Writes the schedule file first (on_phase hears "writing the schedule"), then opens the
/// trace and SVG files before the run, so that a bad path fails fast, runs `run` once
/// (run_prepared, which tells on_phase what starts) with the observers they need, and,
/// after "writing the outputs", writes and closes them. Throws RequestError when more than
/// one of trace, svg and memory_svg is "-", OutputError for a file that cannot be written.
SimulationReport run_with_outputs(const PreparedSimulation& run, const SimulationOutputs& outputs,
                                  const std::function<void(const std::string&)>& on_phase = {});

/// `bmpipe compare --svg`: the timelines of `outcome` (run with record_timelines), stacked
/// on one time scale, written to `path` ("-": standard output). Throws OutputError.
void write_compare_svg_file(const std::string& path, const CompareOutcome& outcome);

}  // namespace bmpipe::api
