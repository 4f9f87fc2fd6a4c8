#pragma once
// What the fuzz targets do with an input once it has parsed: the path `bmpipe simulate`
// takes (prepare -> make_schedule -> config_plan -> assemble -> simulate -> summary), with
// the outputs a user can ask for (trace, SVG, bubble breakdown), and checks that hold for
// every input. A documented error (ConfigError) ends a run quietly; anything else thrown
// escapes to libFuzzer, which reports it as a crash, as it does sanitizer reports.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <span>
#include <sstream>
#include <string>

#include "../support/result_text.hpp"
#include "api/errors.hpp"
#include "api/summary.hpp"
#include "experiment/experiment.hpp"
#include "schedules/schedule_file.hpp"
#include "sim/bubbles.hpp"
#include "sim/observer.hpp"
#include "traces/chrome_trace.hpp"
#include "traces/svg.hpp"

namespace bmpipe::fuzz {

/// Small enough that one input runs in milliseconds under ASan, so the fuzzer explores
/// shapes rather than sizes (the size limits have their own tests, tests/sim/limits_test).
/// zb-auto and zb-v replay about 4p candidate schedules each: 32 devices keep that short.
inline WorkLimits small_limits() {
  WorkLimits limits;
  limits.max_ops = 3000;
  limits.max_devices = 32;
  limits.max_links = 1024;
  limits.max_link_visits = std::int64_t{1} << 16;
  return limits;
}

/// An invariant broken: abort so that libFuzzer keeps the input as a crash.
[[noreturn]] inline void broken(const std::string& what) {
  std::fprintf(stderr, "fuzz invariant broken: %s\n", what.c_str());
  std::abort();
}

/// Runs `body` and says whether it finished: false when it threw one of the errors the
/// command line answers with exit 2 (cli/guard.cpp: ConfigError and its ImportError and
/// ShapeError, ScheduleFileError, api::RequestError, api::OutputError, api::NoPlanFits).
/// Anything else (what the command line reports as an internal error, exit 70) escapes to
/// libFuzzer, which keeps the input as a crash.
template <typename Body>
bool answered(Body&& body) {
  try {
    body();
    return true;
  } catch (const ConfigError&) {
  } catch (const ScheduleFileError&) {
  } catch (const api::RequestError&) {
  } catch (const api::OutputError&) {
  } catch (const api::NoPlanFits&) {
  }
  return false;
}

/// A file holding the input, for the readers that take a path (imports, journals), removed
/// when it goes out of scope. Its name is per process, so that parallel fuzzing jobs
/// (-jobs, -workers) do not share it.
class TempFile {
 public:
  TempFile(const std::string& tag, const std::string& text) {
    std::error_code ec;
    std::filesystem::path dir = std::filesystem::temp_directory_path(ec);
    if (ec) dir = "/tmp";
    path_ = (dir / ("bmpipe-fuzz-" + std::to_string(getpid()) + "-" + tag)).string();
    std::ofstream out(path_, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out) broken("cannot write " + path_ + " (" + std::strerror(errno) + ")");
  }
  ~TempFile() { std::remove(path_.c_str()); }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

/// Runs `schedule` on `input` the three ways the CLI can (no observer, a trace, a picture)
/// and prints the summary. The two engines must agree on every field (sim/simulate.hpp,
/// "Two engines, one result"). A built-in schedule on a config check_config accepted must
/// run (`must_run`): the generators never deadlock, and the config's totals fit int64.
inline void run_all_ways(const SimInput& input, const Schedule& schedule, const RunInfo& info,
                         bool must_run, const TraceLabels& labels = {}) {
  const CompiledSchedule compiled(schedule);
  if (!compiled.ok())
    broken("a schedule that passed validation does not compile: " + compiled.error());
  const SimResult plain = simulate(input, compiled);
  if (must_run && !plain.ok) broken(schedule.name + " failed on a checked config: " + plain.error);

  std::ostringstream trace_text, svg_text;
  SimResult observed;
  {
    ChromeTraceWriter trace(trace_text, input, schedule, labels);
    TimelineRecorder recorder(input, schedule, schedule.name);
    TeeObserver both({&trace, &recorder});
    observed = simulate(input, compiled, both.get());
    trace.finish();
    write_timeline_svg(svg_text, recorder.take(observed));
  }
  // Every field must agree but `events`, which says which engine ran.
  SimResult same = observed;
  same.events = plain.events;
  if (same != plain)
    broken("the engines disagree:\n--- data-flow\n" + result_text(plain) + "--- ordered\n" +
           result_text(observed));

  std::optional<BubbleBreakdown> bubbles;
  if (plain.ok) bubbles = decompose_bubbles(input, compiled, plain);
  const BubbleBreakdown* b = bubbles ? &*bubbles : nullptr;
  // What `bmpipe simulate --json` prints (the CLI dumps with replacement of bad UTF-8).
  const std::string json =
      summary_json(info, plain, b).dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
  const std::string text = summary_text(info, plain, b);
  if (json.empty() || text.empty()) broken("an empty summary");
}

/// What `bmpipe compare` does with a second schedule, which may refuse the config: the
/// one after the config's in the table (one, not all, keeps an input to milliseconds; the
/// fuzzer reaches every pair by mutating the schedule's name).
inline void run_next_schedule(const Experiment& e) {
  const std::span<const ScheduleInfo> all = builtin_schedules();
  std::size_t k = 0;
  while (k < all.size() && all[k].name != e.config.training.schedule) ++k;
  const ScheduleInfo& info = all[(k + 1) % all.size()];
  try {
    const Schedule schedule =
        make_schedule(e, info.name, effective_vpp(info, e.config.training.vpp));
    const Plan plan = config_plan(e, schedule.num_stages);
    const SimResult r = simulate(assemble(e, plan, schedule), schedule);
    if (!r.ok) broken(std::string(info.name) + " failed on a checked config: " + r.error);
  } catch (const ConfigError&) {
  }
}

/// A config that loaded, run as `bmpipe simulate` runs it, and `compare` with a second
/// schedule. ConfigError (a schedule that refuses the config, a plan the layers cannot make) is
/// a documented outcome.
inline void run_config(const Config& config) {
  try {
    const std::shared_ptr<const Experiment> e = prepare(config);
    run_next_schedule(*e);
    const Schedule schedule = make_schedule(*e);
    const Plan plan = config_plan(*e, schedule.num_stages);
    if (const std::string why = check_plan(*e, plan, schedule.num_stages); !why.empty())
      broken("config_plan made a plan check_plan refuses: " + why);
    const SimInput input = assemble(*e, plan, schedule);
    const RunInfo info = make_run_info(*e, plan, schedule);
    const std::vector<StageInfo> stages = stage_info(*e, plan);
    TraceLabels labels{layer_range_labels(plan.partition), stage_recompute_labels(stages),
                       stage_recompute_counts(stages)};
    run_all_ways(input, schedule, info, /*must_run=*/true, labels);
  } catch (const ConfigError&) {
  }
}

}  // namespace bmpipe::fuzz
