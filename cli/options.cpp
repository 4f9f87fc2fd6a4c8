#include "cli/options.hpp"

#include <unistd.h>

#include <cmath>
#include <iostream>
#include <utility>

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
       "samples per micro-batch (training.micro_batch_size)");
  // clang-format on
  add_batch_options(opts);
  // clang-format off
  opts.add_options()
      ("recompute", po::value<std::string>()->value_name("MODE"),
       "none, selective or full for every layer (training.recompute)")
      ("partition", po::value<std::string>()->value_name("LIST"),
       "layers per stage, e.g. 9,9,8,6 (training.partition)");
  // clang-format on
  add_set_option(opts);
}

void add_batch_options(po::options_description& opts) {
  // clang-format off
  opts.add_options()
      ("global-batch-size", po::value<std::string>()->value_name("N"),
       "samples per iteration (training.global_batch_size; wins over the file's microbatches)")
      ("seq-length", po::value<std::string>()->value_name("N"), "tokens per sample (training.seq_length)");
  // clang-format on
}

void add_set_option(po::options_description& opts) {
  opts.add_options()(
      "set", po::value<std::vector<std::string>>()->value_name("KEY=VALUE")->composing(),
      "set any config key, e.g. --set training.sequence_parallel=true (repeatable; values "
      "are YAML)");
}

void append_batch_and_sets(const po::variables_map& vm,
                           std::vector<std::pair<std::string, std::string>>& set) {
  for (const auto& [option, key] :
       {std::pair<const char*, const char*>{"global-batch-size", "training.global_batch_size"},
        {"seq-length", "training.seq_length"}})
    if (vm.count(option)) set.emplace_back(key, vm[option].as<std::string>());
  if (vm.count("set"))
    for (const std::string& kv : vm["set"].as<std::vector<std::string>>()) {
      const std::size_t eq = kv.find('=');
      if (eq == std::string::npos || eq == 0)
        throw UsageError(
            "--set", "expected KEY=VALUE, e.g. training.sequence_parallel=true, got '" + kv + "'");
      set.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
    }
}

namespace {

template <typename T>
bool holds(const po::value_semantic* semantic) {
  return dynamic_cast<const po::typed_value<T>*>(semantic) != nullptr;
}

/// "an integer", "a number", ...: what the option `name` (without dashes) takes.
std::string expected_value(const po::options_description& opts, const std::string& name) {
  const po::option_description* d = opts.find_nothrow(name, false);
  if (!d) return "a valid value";
  const po::value_semantic* v = d->semantic().get();
  if (holds<std::uint64_t>(v) || holds<unsigned>(v)) return "a non-negative integer";
  if (holds<int>(v) || holds<long>(v) || holds<long long>(v)) return "an integer";
  if (holds<double>(v) || holds<float>(v)) return "a number";
  return "a valid value";
}

}  // namespace

void store_exact(const std::vector<std::string>& args, const po::options_description& opts,
                 const po::positional_options_description& pos, po::variables_map& vm) {
  const int style = po::command_line_style::default_style & ~po::command_line_style::allow_guessing;
  po::store(po::command_line_parser(args).options(opts).positional(pos).style(style).run(), vm);
  po::notify(vm);
}

std::string parse_error_line(const po::error& e, const po::options_description& opts) {
  if (const auto* unknown = dynamic_cast<const po::unknown_option*>(&e)) {
    std::vector<std::string> names;
    for (const auto& option : opts.options())
      if (!option->long_name().empty()) names.push_back("--" + option->long_name());
    return std::string(e.what()) + did_you_mean(unknown->get_option_name(), names);
  }
  if (const auto* bad = dynamic_cast<const po::invalid_option_value*>(&e)) {
    // Boost's text is "the argument ('VALUE') for option '--NAME' is invalid": the value is
    // between the first "('" and the last "') for option".
    const std::string what = e.what(), open = "('", close = "') for option";
    const std::size_t from = what.find(open), to = what.rfind(close);
    std::string option = bad->get_option_name();
    if (from == std::string::npos || to == std::string::npos || to < from + open.size())
      return what;
    const std::string name = option.rfind("--", 0) == 0 ? option.substr(2) : option;
    return option + ": expected " + expected_value(opts, name) + ", got '" +
           what.substr(from + open.size(), to - from - open.size()) + "'";
  }
  return e.what();
}

std::optional<int> parse_command_line(const std::string& command,
                                      const std::vector<std::string>& args,
                                      const po::options_description& opts,
                                      const std::string& epilogue, po::variables_map& vm,
                                      const po::options_description* hidden) {
  po::positional_options_description pos;
  pos.add("config", 1);
  po::options_description all;
  all.add(opts);
  if (hidden) all.add(*hidden);
  try {
    store_exact(args, all, pos, vm);
  } catch (const po::error& e) {
    // One line: the whole option list would bury the one thing that is wrong.
    std::cerr << "bmpipe " << command << ": " << parse_error_line(e, opts) << "\n";
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
  // The knobs are config keys: they go into the document and are checked like it. --set
  // comes last, so that it wins over a knob of the same key.
  for (const auto& [option, key] : {std::pair<const char*, const char*>{"tp", "training.tp"},
                                    {"dp", "training.dp"},
                                    {"micro-batch-size", "training.micro_batch_size"},
                                    {"recompute", "training.recompute"}})
    if (vm.count(option)) o.set.emplace_back(key, vm[option].as<std::string>());
  if (vm.count("partition"))
    o.set.emplace_back("training.partition", "[" + vm["partition"].as<std::string>() + "]");
  append_batch_and_sets(vm, o.set);
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

void add_progress_options(po::options_description& opts, const std::string& carries) {
  opts.add_options()("quiet", po::bool_switch(), "no progress line on stderr")(
      "progress-interval-s", po::value<double>()->value_name("S")->default_value(5.0, "5"),
      ("when stderr is not a terminal: seconds between progress lines (" + carries + ")").c_str());
}

double progress_interval_s(const po::variables_map& vm) {
  const double s = vm["progress-interval-s"].as<double>();
  if (!(s >= 0) || !std::isfinite(s))
    throw UsageError("--progress-interval-s", "must be 0 or more seconds");
  return s;
}

Ticker progress_ticker(std::string command, const po::variables_map& vm) {
  return Ticker(std::move(command), !vm["quiet"].as<bool>(), isatty(STDERR_FILENO) != 0,
                progress_interval_s(vm));
}

}  // namespace bmpipe::cli
