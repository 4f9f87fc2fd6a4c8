// bmpipe compare: the same config under several schedules, side by side.
#include <boost/program_options.hpp>
#include <iostream>

#include "api/api.hpp"
#include "api/simulation_outputs.hpp"
#include "api/summary.hpp"
#include "api/tables.hpp"
#include "cli/commands.hpp"
#include "cli/guard.hpp"
#include "cli/options.hpp"
#include "cli/outputs.hpp"

namespace po = boost::program_options;

namespace bmpipe::cli {

namespace {

/// The table (or --json list) of a comparison; the exit code: 0, or 1 when a schedule that
/// ran deadlocked (a schedule refusing the config is a result, not a failure).
int print_compare(const std::string& file, const api::CompareOutcome& outcome, bool json,
                  std::ostream& out) {
  int rc = 0;
  for (const auto& r : outcome.rows)
    if (r.refused.empty() && !r.result.ok) rc = 1;
  out << (json ? json_text(outcome.summary) + "\n" : api::compare_text(file, outcome));
  return rc;
}

}  // namespace

int run_compare(const std::vector<std::string>& args) {
  po::options_description opts("bmpipe compare CONFIG --schedules a,b,c [options]\n\nOptions");
  add_config_options(opts);
  const api::RequestTable<api::CompareRequest> table = api::compare_options();
  const std::size_t overrides = rows_before_overrides(table);
  add_request_options(opts, table, 0, overrides);  // --schedules
  // clang-format off
  opts.add_options()
      ("json", po::bool_switch(), "print a JSON list of summaries, sorted by iteration time")
      ("svg", po::value<std::string>()->value_name("FILE"),
       "write the timelines, stacked on one time scale, as SVG to FILE ('-': stdout, the table "
       "then goes to stderr)");
  // clang-format on
  add_progress_options(opts,
                       "schedule, what runs, seconds so far; a run shorter than that "
                       "prints none");
  add_request_options(opts, table, overrides);
  po::variables_map vm;
  if (auto stop = parse_command_line(
          "compare", args, opts,
          "Each schedule runs on the same config, with its own placement: V schedules\n"
          "hold 2 stages per device, interleaved takes vpp from the config or --vpp, the\n"
          "others hold one. A schedule that refuses the config is a result: it is listed\n"
          "as REFUSED with the reason, and the others still run.\n"
          "Exit codes: 0 success (REFUSED rows included), 1 a listed schedule deadlocked,\n"
          "2 bad input.\n\nSchedules:\n" +
              api::schedule_help_text(),
          vm))
    return *stop;
  if (!vm.count("schedules")) {
    std::cerr << "bmpipe compare: missing --schedules a,b,c\n\n" << opts;
    return 2;
  }
  const bool json = vm["json"].as<bool>();
  // With --svg, each run is recorded for the picture (in the order asked for).
  const bool svg = vm.count("svg") > 0;
  return guarded("compare", [&] {
    api::CompareRequest request;
    fill_request(table, vm, request);
    request.record_timelines = svg;
    api::check_compare_request(request);  // a misspelt schedule fails before the file is read
    api::Ticker ticker = progress_ticker("compare", vm);
    ticker.phase("reading the config");
    request.on_phase = [&](const std::string& what) { ticker.phase(what); };
    const Config base = load_config(vm["config"].as<std::string>(), request.overrides);
    const api::CompareOutcome outcome = api::run_compare(base, request);
    ticker.stop();
    if (svg) api::write_compare_svg_file(vm["svg"].as<std::string>(), outcome);
    return print_compare(base.file, outcome, json,
                         svg && vm["svg"].as<std::string>() == "-" ? std::cerr : std::cout);
  });
}

}  // namespace bmpipe::cli
