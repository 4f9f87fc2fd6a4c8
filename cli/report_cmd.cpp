// bmpipe report: one self-contained HTML page of a run, and optionally of a comparison, a
// plan and a search of the same config (api/report.hpp builds it).
#include <boost/program_options.hpp>
#include <iostream>

#include "api/report.hpp"
#include "cli/commands.hpp"
#include "cli/guard.hpp"
#include "cli/options.hpp"
#include "cli/outputs.hpp"
#include "cli/ticker.hpp"
#include "experiment/suggest.hpp"
#include "schedules/registry.hpp"

namespace po = boost::program_options;

namespace bmpipe::cli {

int run_report(const std::vector<std::string>& args) {
  po::options_description opts("bmpipe report CONFIG --out FILE.html [options]\n\nOptions");
  add_config_options(opts);
  // clang-format off
  opts.add_options()
      ("out", po::value<std::string>()->value_name("FILE"),
       "write the page to FILE ('-': stdout); required")
      ("schedule", po::value<std::string>()->value_name("NAME"),
       ("schedule to run (and, with --plan, to plan for; 'auto' plans every schedule plan "
        "--schedule auto plans, and the run then keeps training.schedule), overriding "
        "training.schedule (" + schedule_names() + ")").c_str())
      ("schedule-file", po::value<std::string>()->value_name("FILE"),
       "replay the op order in FILE, as simulate does (not with --plan)")
      ("compare", po::value<std::string>()->value_name("LIST"),
       "add the comparison of these schedules (as `bmpipe compare --schedules LIST`): the "
       "table and a bar chart, fastest first")
      ("plan", po::bool_switch(),
       "add a plan (as `bmpipe plan`): plan against the baselines, each stage's layers and "
       "recompute as a strip, and the Megatron-LM and MindFormers export snippets")
      ("search", po::bool_switch(),
       "add a layout search (as `bmpipe search`, every default layout): a scatter of time "
       "against peak memory, coloured by schedule, the winner marked")
      ("memory-limit-GiB", po::value<double>()->value_name("GiB"),
       "--plan and --search: GiB a device may use (replaces its capacity)")
      ("margin-GiB", po::value<double>()->value_name("GiB")->default_value(0.0, "0"),
       "--plan and --search: GiB kept free below the limit")
      ("max-evals", po::value<std::int64_t>()->value_name("N"),
       "--plan: simulations the plan search may run (default 20000); --search: evaluations of "
       "the whole search (default: no bound)")
      ("time-limit-s", po::value<double>()->value_name("SECONDS"),
       "--plan and --search: stop each after this many seconds (results then depend on the "
       "machine)")
      ("planner", po::value<std::string>()->value_name("EFFORT")->default_value("quick"),
       "--search: off, quick or full, as search --planner")
      ("seed", po::value<std::uint64_t>()->value_name("N")->default_value(1),
       "--plan and --search: seed of the planner")
      ("threads", po::value<int>()->value_name("N")->default_value(0, "all cores"),
       "--plan and --search: threads that simulate");
  // clang-format on
  add_progress_options(opts, "what runs, seconds so far; a run shorter than that prints none");
  add_override_options(opts, "chunks per device, overriding training.vpp");
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
    const Overrides overrides = overrides_from(vm);
    const std::string schedule = vm.count("schedule") ? vm["schedule"].as<std::string>() : "";
    const bool plan = vm["plan"].as<bool>();
    if (schedule == "auto" && !plan)
      throw UsageError("--schedule", "'auto' plans every schedule: it needs --plan");
    if (vm.count("schedule-file") && plan)
      throw UsageError("--schedule-file",
                       "a schedule file fixes an op order made for another partition: it "
                       "cannot be planned for (drop --plan or the file)");
    request.simulate.overrides = overrides;
    if (!schedule.empty() && schedule != "auto") request.simulate.overrides.schedule = schedule;
    if (vm.count("schedule-file"))
      request.simulate.schedule_file = vm["schedule-file"].as<std::string>();
    api::check_simulate_request(request.simulate);
    if (vm.count("compare")) {
      request.compare.emplace();
      request.compare->schedules = split_names(vm["compare"].as<std::string>());
      request.compare->overrides = overrides;
      try {
        api::check_compare_request(*request.compare);
      } catch (const api::RequestError& e) {
        throw UsageError("--compare", e.message());  // report's name for the list
      }
    }
    if (plan) {
      api::PlanRequest& p = request.plan.emplace();
      p.overrides = overrides;
      if (!schedule.empty()) p.overrides.schedule = schedule;
      if (vm.count("memory-limit-GiB")) p.memory_limit_GiB = vm["memory-limit-GiB"].as<double>();
      p.margin_GiB = vm["margin-GiB"].as<double>();
      p.threads = vm["threads"].as<int>();
      p.seed = vm["seed"].as<std::uint64_t>();
      if (vm.count("max-evals")) p.max_evals = vm["max-evals"].as<std::int64_t>();
      if (vm.count("time-limit-s")) p.time_limit_s = vm["time-limit-s"].as<double>();
      api::check_plan_request(p);
    }
    if (vm["search"].as<bool>()) {
      api::SearchRequest& s = request.search.emplace();
      s.effort = api::planner_effort(vm["planner"].as<std::string>());
      if (vm.count("memory-limit-GiB")) s.memory_limit_GiB = vm["memory-limit-GiB"].as<double>();
      s.margin_GiB = vm["margin-GiB"].as<double>();
      s.threads = vm["threads"].as<int>();
      s.seed = vm["seed"].as<std::uint64_t>();
      if (vm.count("max-evals")) s.max_evals = vm["max-evals"].as<std::int64_t>();
      if (vm.count("time-limit-s")) s.time_limit_s = vm["time-limit-s"].as<double>();
      api::check_search_request(s);
    }
    // The output is opened before the runs, so that a bad path fails fast.
    OutputFile out(vm["out"].as<std::string>(), "--out");
    // A report with --plan or --search runs for minutes: say what runs.
    Ticker ticker = progress_ticker("report", vm);
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
