#include "cli/options.hpp"

#include <iostream>

#include "experiment/suggest.hpp"

namespace po = boost::program_options;

namespace bmpipe::cli {

void add_config_options(po::options_description& opts) {
  opts.add_options()("help,h", "show this help")("config",
                                                 po::value<std::string>()->value_name("FILE"),
                                                 "YAML experiment file (cluster, model, training)");
}

void add_override_options(po::options_description& opts, const char* vpp_help) {
  const WorkLimits defaults;
  // clang-format off
  opts.add_options()
      ("pp", po::value<int>()->value_name("N"), "pipeline devices, overriding training.pp")
      ("vpp", po::value<int>()->value_name("N"), vpp_help)
      ("microbatches", po::value<int>()->value_name("N"),
       "micro-batches per iteration, overriding training.microbatches")
      ("max-ops", po::value<std::int64_t>()->value_name("N"),
       ("refuse runs of more ops than this (stages x micro-batches x ops per micro-batch; "
        "about 50 bytes each; default " + std::to_string(defaults.max_ops) + ")").c_str())
      ("max-devices", po::value<int>()->value_name("N"),
       ("refuse clusters of more devices than this (default " +
        std::to_string(defaults.max_devices) + ")").c_str())
      ("tp", po::value<std::string>()->value_name("N"), "tensor-parallel size (training.tp)")
      ("dp", po::value<std::string>()->value_name("N"), "data-parallel size (training.dp)")
      ("micro-batch-size", po::value<std::string>()->value_name("N"),
       "samples per micro-batch (training.micro_batch_size)")
      ("global-batch-size", po::value<std::string>()->value_name("N"),
       "samples per iteration (training.global_batch_size; wins over the file's microbatches)")
      ("seq-length", po::value<std::string>()->value_name("N"), "tokens per sample (training.seq_length)")
      ("recompute", po::value<std::string>()->value_name("MODE"),
       "none, selective or full for every layer (training.recompute)")
      ("partition", po::value<std::string>()->value_name("LIST"),
       "layers per stage, e.g. 9,9,8,6 (training.partition)")
      ("set", po::value<std::vector<std::string>>()->value_name("KEY=VALUE")->composing(),
       "set any config key, e.g. --set training.sequence_parallel=true (repeatable; values "
       "are YAML)");
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
  } catch (const po::unknown_option& e) {
    std::vector<std::string> names;
    for (const auto& option : opts.options()) names.push_back("--" + option->long_name());
    std::cerr << "bmpipe " << command << ": " << e.what()
              << did_you_mean(e.get_option_name(), names) << "\n\n"
              << opts;
    return 2;
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
  // The knobs are config keys: they go into the document and are checked like it.
  for (const auto& [option, key] : {std::pair<const char*, const char*>{"tp", "training.tp"},
                                    {"dp", "training.dp"},
                                    {"micro-batch-size", "training.micro_batch_size"},
                                    {"global-batch-size", "training.global_batch_size"},
                                    {"seq-length", "training.seq_length"},
                                    {"recompute", "training.recompute"}})
    if (vm.count(option)) o.set.emplace_back(key, vm[option].as<std::string>());
  if (vm.count("partition"))
    o.set.emplace_back("training.partition", "[" + vm["partition"].as<std::string>() + "]");
  if (vm.count("set"))
    for (const std::string& kv : vm["set"].as<std::vector<std::string>>()) {
      const std::size_t eq = kv.find('=');
      if (eq == std::string::npos || eq == 0)
        throw UsageError(
            "--set", "expected KEY=VALUE, e.g. training.sequence_parallel=true, got '" + kv + "'");
      o.set.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
    }
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
