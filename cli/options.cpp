#include "cli/options.hpp"

#include <unistd.h>

#include <cmath>
#include <iostream>
#include <type_traits>
#include <utility>

namespace po = boost::program_options;

namespace bmpipe::cli {

void add_config_options(po::options_description& opts) {
  opts.add_options()("help,h", "show this help")("config",
                                                 po::value<std::string>()->value_name("FILE"),
                                                 "YAML experiment file (cluster, model, training)");
}

void add_override_options(po::options_description& opts, const char* vpp_help) {
  add_request_options(opts, api::override_options(vpp_help));
}

void add_request_option(po::options_description& opts, const api::OptionSpec& o) {
  using K = api::OptionKind;
  const std::string shown = api::default_shown(o);
  // The value type of the option's kind, with the request's default shown by --help (a
  // default is never read back: given_value skips it, the request has it already).
  auto typed = [&]<class T>(po::typed_value<T>* v) -> po::value_semantic* {
    v->value_name(o.value_name);
    if (o.default_value) {
      if constexpr (std::is_same_v<T, std::vector<std::string>>)
        v->default_value({}, shown);
      else if constexpr (std::is_same_v<T, std::string>)
        v->default_value(shown, shown);
      else
        v->default_value(std::get<T>(*o.default_value), shown);
    }
    return v;
  };
  po::value_semantic* semantic = nullptr;
  switch (o.kind) {
    case K::flag:
      semantic = po::bool_switch();
      break;
    case K::int32:
      semantic = typed(po::value<int>());
      break;
    case K::int64:
      semantic = typed(po::value<std::int64_t>());
      break;
    case K::uint64:
      semantic = typed(po::value<std::uint64_t>());
      break;
    case K::number:
      semantic = typed(po::value<double>());
      break;
    case K::repeated:
      semantic = typed(po::value<std::vector<std::string>>()->composing());
      break;
    default:  // text, yaml and the lists, parsed by given_value
      semantic = typed(po::value<std::string>());
  }
  opts.add_options()(o.name.c_str(), semantic, o.help.c_str());
}

std::optional<api::OptionValue> given_value(const po::variables_map& vm, const api::OptionSpec& o) {
  using K = api::OptionKind;
  if (!vm.count(o.name) || vm[o.name].defaulted()) return std::nullopt;
  const po::variable_value& v = vm[o.name];
  switch (o.kind) {
    case K::flag:
      return v.as<bool>() ? std::optional<api::OptionValue>(true) : std::nullopt;
    case K::int32:
      return v.as<int>();
    case K::int64:
      return v.as<std::int64_t>();
    case K::uint64:
      return v.as<std::uint64_t>();
    case K::number:
      return v.as<double>();
    case K::repeated:
      return v.as<std::vector<std::string>>();
    default:  // text, yaml and the lists
      return api::option_value_from_text(o, v.as<std::string>());
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
    return std::string(e.what()) + api::did_you_mean_option(unknown->get_option_name(), names);
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
  fill_request(api::override_options(""), vm, o);
  return o;
}

void add_progress_options(po::options_description& opts, const std::string& carries) {
  opts.add_options()("quiet", po::bool_switch(), "no progress line on stderr")(
      "progress-interval-s", po::value<double>()->value_name("S")->default_value(5.0, "5"),
      ("when stderr is not a terminal: seconds between progress lines (" + carries + ")").c_str());
}

void print_to_stderr(const std::string& text) {
  std::cerr << text << std::flush;
}

double progress_interval_s(const po::variables_map& vm) {
  const double s = vm["progress-interval-s"].as<double>();
  if (!(s >= 0) || !std::isfinite(s))
    throw api::RequestError("--progress-interval-s", "must be 0 or more seconds");
  return s;
}

api::Ticker progress_ticker(std::string command, const po::variables_map& vm) {
  return api::Ticker(std::move(command), print_to_stderr, !vm["quiet"].as<bool>(),
                     isatty(STDERR_FILENO) != 0, progress_interval_s(vm));
}

}  // namespace bmpipe::cli
