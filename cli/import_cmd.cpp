// bmpipe import megatron|mindformers|torchtitan|profile INPUT: a job in a framework's own words (or
// a profile CSV) as a bmpipe YAML config.
#include <boost/program_options.hpp>
#include <iostream>

#include "api/errors.hpp"
#include "api/import.hpp"
#include "cli/commands.hpp"
#include "cli/guard.hpp"
#include "cli/options.hpp"
#include "cli/outputs.hpp"

namespace po = boost::program_options;

namespace bmpipe::cli {

namespace {

int usage_error(const std::string& message, const po::options_description& opts) {
  std::cerr << "bmpipe import: " << message << "\n\n" << api::import_help() << "\n" << opts;
  return 2;
}

}  // namespace

int run_import(const std::vector<std::string>& args) {
  po::options_description opts("Options");
  // clang-format off
  opts.add_options()
      ("help,h", "show this help")
      ("cluster", po::value<std::string>()->value_name("FILE"),
       "the cluster: a YAML file with only a cluster: section")
      ("preset", po::value<std::string>()->value_name("NAME"),
       ("or a hardware preset (" + api::hardware_preset_names_text() + ")").c_str())
      ("devices", po::value<long long>()->value_name("N"),
       "with --preset: the number of devices (whole nodes of the preset's size, or fewer); "
       "mindformers defaults to data_parallel x model_parallel x context_parallel x "
       "pipeline_stage, torchtitan to its degrees' product (its shard degree -1 needs --devices)")
      ("out", po::value<std::string>()->value_name("FILE"), "write the YAML to FILE instead of stdout")
      ("pp", po::value<int>()->value_name("N"), "profile only: pipeline stages (default 1)")
      ("microbatches", po::value<int>()->value_name("N"),
       "profile only: micro-batches per iteration (default 1)")
      ("allow-unmodelled", "import flags or keys that change time or memory in ways bmpipe does "
       "not model, with a warning each, instead of refusing them");
  // clang-format on
  if (args.empty()) return usage_error("missing FORMAT (" + api::import_format_names() + ")", opts);
  if (args[0] == "--help" || args[0] == "-h") {
    std::cout << api::import_help() << "\n" << opts;
    return 0;
  }
  const std::string format = args[0];
  try {
    api::check_import_format(format);
  } catch (const api::RequestError& e) {
    return usage_error(e.message(), opts);
  }

  po::options_description all;
  all.add(opts).add_options()("input", po::value<std::string>(), "");
  po::positional_options_description pos;
  pos.add("input", 1);
  po::variables_map vm;
  try {
    store_exact(std::vector<std::string>(args.begin() + 1, args.end()), all, pos, vm);
  } catch (const po::error& e) {
    std::cerr << "bmpipe import: " << parse_error_line(e, opts) << "\n";  // one line
    return 2;
  }
  if (vm.count("help")) {
    std::cout << api::import_help() << "\n" << opts;
    return 0;
  }
  if (!vm.count("input")) return usage_error("missing INPUT (a file, or - for stdin)", opts);
  api::ImportRequest request;
  request.format = format;
  request.input = vm["input"].as<std::string>();
  if (vm.count("cluster")) request.cluster = vm["cluster"].as<std::string>();
  if (vm.count("preset")) request.preset = vm["preset"].as<std::string>();
  if (vm.count("devices")) request.devices = vm["devices"].as<long long>();
  if (vm.count("pp")) request.pp = vm["pp"].as<int>();
  if (vm.count("microbatches")) request.microbatches = vm["microbatches"].as<int>();
  request.allow_unmodelled = vm.count("allow-unmodelled") > 0;
  const std::string out = vm.count("out") ? vm["out"].as<std::string>() : "";
  if (!out.empty()) request.out = out;
  try {
    // Before the input is read: a misspelt preset is the first thing to fix.
    api::check_import_preset(request);
  } catch (const api::RequestError& e) {
    std::cerr << "bmpipe import " << format << ": " << e.what() << "\n";  // one line
    return 2;
  }
  try {
    api::check_import_request(request);
  } catch (const api::RequestError& e) {
    return usage_error(e.message(), opts);  // a misuse of the options: with the help
  }
  return guarded("import " + format, [&] {
    const api::ImportOutcome imported = api::run_import(request);
    for (const std::string& i : imported.ignored) std::cerr << "ignored: " << i << "\n";
    for (const std::string& n : imported.notes) std::cerr << "note: " << n << "\n";
    for (const std::string& w : imported.warnings) std::cerr << "warning: " << w << "\n";
    if (out.empty()) {
      std::cout << imported.yaml;
    } else {
      api::write_output(out, "--out", imported.yaml);
    }
    return 0;
  });
}

}  // namespace bmpipe::cli
