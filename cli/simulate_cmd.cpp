#include <boost/program_options.hpp>
#include <iostream>

#include "cli/commands.hpp"
#include "schedules/registry.hpp"
#include "sim/config/experiment.hpp"
#include "sim/summary.hpp"

namespace po = boost::program_options;

namespace bmpipe::cli {

int run_simulate(const std::vector<std::string>& args) {
  po::options_description opts("bmpipe simulate CONFIG [options]\n\nOptions");
  // clang-format off
  opts.add_options()
      ("help,h", "show this help")
      ("config", po::value<std::string>(), "YAML experiment file (cluster, model, training)")
      ("json", po::bool_switch(), "print the summary as JSON on stdout instead of a table")
      ("schedule", po::value<std::string>(),
       ("schedule to run, overriding training.schedule (" + schedule_names() + ")").c_str())
      ("pp", po::value<int>(), "pipeline devices, overriding training.pp")
      ("vpp", po::value<int>(), "chunks per device, overriding training.vpp")
      ("microbatches", po::value<int>(), "micro-batches per iteration, overriding training.microbatches");
  // clang-format on
  po::positional_options_description pos;
  pos.add("config", 1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(opts).positional(pos).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "bmpipe simulate: " << e.what() << "\n\n" << opts;
    return 2;
  }
  if (vm.count("help")) {
    std::cout << opts
              << "\nExit codes: 0 success (also when a device does not fit: that is a result),\n"
                 "            1 simulation failed (deadlock), 2 bad input.\n";
    return 0;
  }
  if (!vm.count("config")) {
    std::cerr << "bmpipe simulate: missing CONFIG (a YAML file)\n\n" << opts;
    return 2;
  }
  const bool json = vm["json"].as<bool>();
  try {
    Config config = load_config(vm["config"].as<std::string>());
    Overrides o;
    if (vm.count("schedule")) o.schedule = vm["schedule"].as<std::string>();
    if (vm.count("pp")) o.pp = vm["pp"].as<int>();
    if (vm.count("vpp")) o.vpp = vm["vpp"].as<int>();
    if (vm.count("microbatches")) o.microbatches = vm["microbatches"].as<int>();
    apply_overrides(config, o);

    const Topology topology(config.cluster);
    const Schedule schedule = make_schedule(config);
    const SimInput input = make_sim_input(config, topology, schedule);
    const SimResult result = simulate(input, schedule);
    const RunInfo info{schedule.name, config.training.pp, config.training.vpp,
                       config.training.microbatches};
    if (json)
      std::cout << summary_json(info, result).dump(2) << "\n";
    else
      std::cout << "bmpipe simulate " << config.file << "\n" << summary_text(info, result);
    return result.ok ? 0 : 1;
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
  for (const auto& s : builtin_schedules())
    std::cout << s.name << std::string(s.name.size() < 14 ? 14 - s.name.size() : 1, ' ')
              << s.description << "\n";
  return 0;
}

}  // namespace bmpipe::cli
