// bmpipe export CONFIG --format megatron|mindformers|torchtitan: a config (an example, a plan's or
// a search's --out file) as the framework's own settings, with the time the framework will get as
// bmpipe simulates it; no planning.
#include <boost/program_options.hpp>
#include <iostream>

#include "api/export.hpp"
#include "cli/commands.hpp"
#include "cli/guard.hpp"
#include "cli/options.hpp"
#include "cli/outputs.hpp"

namespace po = boost::program_options;

namespace bmpipe::cli {

int run_export(const std::vector<std::string>& args) {
  po::options_description opts("bmpipe export CONFIG --format FORMAT [options]\n\nOptions");
  add_config_options(opts);
  const api::RequestTable<api::ExportCommandRequest> table = api::export_options();
  add_request_options(opts, table, 0, 1);  // --format
  opts.add_options()(
      "json", po::bool_switch(),
      "print {format, text, schedule, vpp, iteration_time_ms, fits, exact, ...} as JSON");
  add_request_options(opts, table, 1);
  po::variables_map vm;
  if (auto stop = parse_command_line(
          "export", args, opts,
          "Writes the config's layout, partition and recompute as the framework's settings:\n"
          "Megatron-LM flags (tp, pp, layout or vpp, micro-batch and global batch, recompute;\n"
          "a comment lists the flags to remove from your script), a MindFormers YAML\n"
          "fragment (parallel_config, runner_config, offset, recompute lists) or a torchtitan\n"
          "job TOML ([model] flavor, [parallelism], [training], [activation_checkpoint],\n"
          "converters; what it cannot state is listed as 'Not stated'). The time it\n"
          "quotes is the text as the framework runs it, simulated: Megatron-LM's 1F1B or\n"
          "interleaved 1F1B, MindFormers' pipeline_scheduler, torchtitan's schedules, and\n"
          "each framework's recompute rules. 'exact' says whether that is the config's own "
          "simulated time; when\n"
          "not, the text states, of the recompute rules the framework can say on the\n"
          "config's partition, the fastest that fits. No planning: export a plan's or a\n"
          "search's --out file, or use plan/search --format.\n"
          "Exit codes: 0 success, 2 bad input (an unknown format, a layout the framework's\n"
          "schedule refuses).\n",
          vm))
    return *stop;
  const bool json = vm["json"].as<bool>();
  return guarded("export", [&] {
    if (!vm.count("format"))
      throw api::RequestError("--format", "is required (" + api::export_format_names() + ")");
    api::ExportCommandRequest request;
    fill_request(table, vm, request);
    api::check_export_request(request.request);  // a typo fails before the file is read
    const Config config = load_config(vm["config"].as<std::string>(), request.overrides);
    const api::ExportOutcome x = api::export_config(config, request.request);
    if (json)
      std::cout << json_text(x.summary) << "\n";
    else
      std::cout << x.text;
    return 0;
  });
}

}  // namespace bmpipe::cli
