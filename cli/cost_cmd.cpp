// bmpipe cost CONFIG [--json]: the analytic cost model's per-layer table for a config.
#include <boost/program_options.hpp>
#include <iostream>

#include "api/api.hpp"
#include "api/summary.hpp"
#include "api/tables.hpp"
#include "cli/commands.hpp"
#include "cli/guard.hpp"
#include "cli/options.hpp"
#include "cli/outputs.hpp"

namespace po = boost::program_options;

namespace bmpipe::cli {

int run_cost(const std::vector<std::string>& args) {
  po::options_description opts("bmpipe cost CONFIG [options]\n\nOptions");
  add_config_options(opts);
  // clang-format off
  opts.add_options()
      ("json", po::bool_switch(), "print JSON on stdout instead of a table")
      ("ops", po::bool_switch(), "also break every layer down into its sub-ops");
  // clang-format on
  add_override_options(opts, api::kCostVppHelp);
  po::variables_map vm;
  if (auto stop = parse_command_line(
          "cost", args, opts,
          "Per-layer forward, input-grad and weight-grad time, activation bytes per\n"
          "recompute mode, recompute cost and parameters of one device (its tp share),\n"
          "for one micro-batch; then static bytes per stage.\n"
          "Exit codes: 0 success, 2 bad input.\n",
          vm))
    return *stop;
  const bool json = vm["json"].as<bool>(), with_ops = vm["ops"].as<bool>();
  return guarded("cost", [&] {
    const Config config = load_config(vm["config"].as<std::string>(), overrides_from(vm));
    // parse -> prepare -> run (assemble the config's plan) -> print
    const api::CostOutcome cost = api::run_cost(config, with_ops);
    if (json) {
      std::cout << json_text(cost.summary) << "\n";
      return 0;
    }
    std::cout << api::cost_text(config, cost, with_ops);
    return 0;
  });
}

}  // namespace bmpipe::cli
