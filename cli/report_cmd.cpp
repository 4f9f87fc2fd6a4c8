// bmpipe report: one self-contained HTML page of a run, and optionally of a comparison, a
// plan and a search of the same config (api/report.hpp builds it).
#include <boost/program_options.hpp>
#include <iostream>

#include "api/report.hpp"
#include "cli/commands.hpp"
#include "cli/guard.hpp"
#include "cli/options.hpp"
#include "cli/outputs.hpp"

namespace po = boost::program_options;

namespace bmpipe::cli {

int run_report(const std::vector<std::string>& args) {
  po::options_description opts("bmpipe report CONFIG --out FILE.html [options]\n\nOptions");
  add_config_options(opts);
  const api::RequestTable<api::ReportRequest> table = api::report_options();
  opts.add_options()("out", po::value<std::string>()->value_name("FILE"),
                     "write the page to FILE ('-': stdout); required");
  const std::size_t overrides = rows_before_overrides(table);
  add_request_options(opts, table, 0, overrides);
  add_progress_options(opts, "what runs, seconds so far; a run shorter than that prints none");
  add_request_options(opts, table, overrides);
  po::variables_map vm;
  if (auto stop = parse_command_line(
          "report", args, opts,
          "One HTML page, self-contained (inline CSS and JavaScript, no network; it opens\n"
          "from a file): the summary and per-rank table as `bmpipe simulate` prints them,\n"
          "the bubble breakdown, the timeline (drag to pan, wheel to zoom, hover for an\n"
          "op; transfers as links), memory over time per rank against the capacity; with\n"
          "--compare, --plan and --search, those too. The data is one JSON object in the\n"
          "page (<script id=\"bmpipe-data\">): {bmpipe: {version, config}, report: 1,\n"
          "summary (as simulate --json), summary_text, timeline, compare, plan, search}.\n"
          "Exit codes: 0 success, 1 the simulation failed (deadlock; the page is still\n"
          "written), 2 bad input (also: no plan fits with --plan).\n",
          vm))
    return *stop;
  if (!vm.count("out")) {
    std::cerr << "bmpipe report: missing --out FILE.html\n";
    return 2;
  }
  return guarded("report", [&] {
    api::ReportRequest request;
    fill_request(table, vm, request);
    api::finish_report_request(request);
    // The output is opened before the runs, so that a bad path fails fast.
    api::OutputFile out(vm["out"].as<std::string>(), "--out");
    // A report with --plan or --search runs for minutes: say what runs.
    api::Ticker ticker = progress_ticker("report", vm);
    ticker.phase("reading the config");
    request.on_phase = [&ticker](const std::string& what) { ticker.phase(what); };
    if (request.plan) {
      // Planning runs one simulation of the run per candidate: a large run says up front
      // what that may cost (when it may pass a minute), and its progress what is left.
      request.on_plan_estimate = [&ticker](const api::PlanEstimate& estimate) {
        if (estimate.most_s() > 60) ticker.note(estimate.text());
      };
      const std::int64_t budget = request.plan->max_evals;
      request.plan->progress = [&ticker, budget](const std::string& label,
                                                 const PlannerProgress& p) {
        ticker.phase("planning " + label + ": " + p.phase + ", " + std::to_string(p.evaluations) +
                     " evaluations of at most " + std::to_string(budget));
      };
    }
    Overrides load_overrides = request.simulate.overrides;
    const Config config = load_config(vm["config"].as<std::string>(), load_overrides);
    const nlohmann::json data = api::report_data(config, request);
    ticker.phase("writing the page");
    out.stream() << api::report_html(data);
    out.close();
    ticker.stop();
    return data["summary"].value("ok", false) ? 0 : 1;
  });
}

}  // namespace bmpipe::cli
