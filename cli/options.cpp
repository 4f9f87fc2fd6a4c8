#include "cli/options.hpp"

#include <iostream>

namespace po = boost::program_options;

namespace bmpipe::cli {

void add_config_options(po::options_description& opts) {
  opts.add_options()("help,h", "show this help")("config", po::value<std::string>(),
                                                 "YAML experiment file (cluster, model, training)");
}

void add_override_options(po::options_description& opts, const char* vpp_help) {
  const WorkLimits defaults;
  // clang-format off
  opts.add_options()
      ("pp", po::value<int>(), "pipeline devices, overriding training.pp")
      ("vpp", po::value<int>(), vpp_help)
      ("microbatches", po::value<int>(), "micro-batches per iteration, overriding training.microbatches")
      ("max-ops", po::value<std::int64_t>(),
       ("refuse runs of more ops than this (stages x micro-batches x ops per micro-batch; "
        "about 50 bytes each; default " + std::to_string(defaults.max_ops) + ")").c_str())
      ("max-devices", po::value<int>(),
       ("refuse clusters of more devices than this (default " +
        std::to_string(defaults.max_devices) + ")").c_str());
  // clang-format on
}

std::optional<int> parse_command_line(const std::string& command,
                                      const std::vector<std::string>& args,
                                      const po::options_description& opts,
                                      const std::string& epilogue, po::variables_map& vm) {
  po::positional_options_description pos;
  pos.add("config", 1);
  try {
    po::store(po::command_line_parser(args).options(opts).positional(pos).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "bmpipe " << command << ": " << e.what() << "\n\n" << opts;
    return 2;
  }
  if (vm.count("help")) {
    std::cout << opts << "\n" << epilogue;
    return 0;
  }
  if (!vm.count("config")) {
    std::cerr << "bmpipe " << command << ": missing CONFIG (a YAML file)\n\n" << opts;
    return 2;
  }
  return std::nullopt;
}

Overrides overrides_from(const po::variables_map& vm) {
  Overrides o;
  if (vm.count("pp")) o.pp = vm["pp"].as<int>();
  if (vm.count("vpp")) o.vpp = vm["vpp"].as<int>();
  if (vm.count("microbatches")) o.microbatches = vm["microbatches"].as<int>();
  if (vm.count("max-ops") || vm.count("max-devices")) {
    WorkLimits limits;
    if (vm.count("max-ops")) limits.max_ops = vm["max-ops"].as<std::int64_t>();
    if (vm.count("max-devices")) limits.max_devices = vm["max-devices"].as<int>();
    if (limits.max_ops < 1) throw UsageError("--max-ops", "must be at least 1");
    if (limits.max_devices < 1) throw UsageError("--max-devices", "must be at least 1");
    o.limits = limits;
  }
  return o;
}

}  // namespace bmpipe::cli
