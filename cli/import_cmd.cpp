// bmpipe import megatron|mindformers|profile INPUT: a job in a framework's own words (or a
// profile CSV) as a bmpipe YAML config.
#include <boost/program_options.hpp>
#include <fstream>
#include <iostream>

#include "cli/commands.hpp"
#include "cli/guard.hpp"
#include "cli/outputs.hpp"
#include "frameworks/importers.hpp"
#include "sim/cost/hardware.hpp"

namespace po = boost::program_options;

namespace bmpipe::cli {

namespace {

// The formats come from the importer table (frameworks/importers.hpp).
std::string import_help() {
  return "bmpipe import FORMAT INPUT [options]\n\nFormats:\n" + importer_help() +
         R"(
The YAML goes to stdout (or --out) and loads with `bmpipe simulate`; each value carries
a comment naming the flag or key it came from. Flags and keys bmpipe does not model are
listed on stderr as "ignored: ...", approximations as "note: ...".
)";
}

constexpr std::size_t kMaxInput = 8u << 20;

int usage_error(const std::string& message, const po::options_description& opts) {
  std::cerr << "bmpipe import: " << message << "\n\n" << import_help() << "\n" << opts;
  return 2;
}

}  // namespace

int run_import(const std::vector<std::string>& args) {
  po::options_description opts("Options");
  // clang-format off
  opts.add_options()
      ("help,h", "show this help")
      ("cluster", po::value<std::string>(), "the cluster: a YAML file with only a cluster: section")
      ("preset", po::value<std::string>(), ("or a hardware preset (" + hardware_preset_names() + ")").c_str())
      ("devices", po::value<long long>(),
       "with --preset: the number of devices (whole nodes of the preset's size, or fewer); "
       "mindformers defaults to data_parallel x model_parallel x pipeline_stage")
      ("out", po::value<std::string>(), "write the YAML to FILE instead of stdout")
      ("pp", po::value<int>(), "profile only: pipeline stages (default 1)")
      ("microbatches", po::value<int>(), "profile only: micro-batches per iteration (default 1)");
  // clang-format on
  if (args.empty()) return usage_error("missing FORMAT (" + importer_names() + ")", opts);
  if (args[0] == "--help" || args[0] == "-h") {
    std::cout << import_help() << "\n" << opts;
    return 0;
  }
  const std::string format = args[0];
  const Importer* importer = find_importer(format);
  if (!importer)
    return usage_error("unknown format '" + format + "' (" + importer_names() + ")", opts);

  po::options_description all;
  all.add(opts).add_options()("input", po::value<std::string>(), "");
  po::positional_options_description pos;
  pos.add("input", 1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(std::vector<std::string>(args.begin() + 1, args.end()))
                  .options(all)
                  .positional(pos)
                  .run(),
              vm);
    po::notify(vm);
  } catch (const po::error& e) {
    return usage_error(e.what(), opts);
  }
  if (vm.count("help")) {
    std::cout << import_help() << "\n" << opts;
    return 0;
  }
  if (!vm.count("input")) return usage_error("missing INPUT (a file, or - for stdin)", opts);
  if (vm.count("cluster") && (vm.count("preset") || vm.count("devices")))
    return usage_error("give --cluster FILE or --preset NAME --devices N, not both", opts);
  if (!vm.count("cluster") && !vm.count("preset"))
    return usage_error("give the cluster: --cluster FILE or --preset NAME --devices N", opts);
  if (vm.count("devices") && !vm.count("preset"))
    return usage_error("--devices goes with --preset", opts);
  if (!importer->takes_layout && (vm.count("pp") || vm.count("microbatches")))
    return usage_error(
        "--pp and --microbatches are for profile imports; the framework's "
        "settings give them",
        opts);
  if (!importer->counts_devices && vm.count("preset") && !vm.count("devices"))
    return usage_error("--preset needs --devices N", opts);

  const std::string input = vm["input"].as<std::string>();
  const std::string out = vm.count("out") ? vm["out"].as<std::string>() : "";
  return guarded("import " + format, [&] {
    const std::string text = read_input(input, kMaxInput);
    ImportedJob job = importer->read(text, input);
    if (importer->takes_layout) {
      for (const char* o : {"pp", "microbatches"}) {
        if (!vm.count(o)) continue;
        const int v = vm[o].as<int>();
        if (v < 1) return usage_error(std::string("--") + o + " must be at least 1", opts);
        (std::string(o) == "pp" ? job.pp : *job.microbatches) = v;
        job.from(std::string("training.") + o, Origin{"", 0, 0, std::string("--") + o, ""});
      }
    }
    ImportCluster cluster;
    if (vm.count("cluster")) {
      cluster = cluster_from_file(vm["cluster"].as<std::string>());
    } else {
      long long devices = 0;
      if (vm.count("devices"))
        devices = vm["devices"].as<long long>();
      else  // counts_devices: the job's parallel settings say how many devices it runs on
        devices = static_cast<long long>(job.dp.value_or(1)) * job.tp * job.pp;
      cluster = cluster_from_preset(vm["preset"].as<std::string>(), devices);
    }
    const std::string yaml = imported_yaml(job, cluster, out.empty() ? "<stdout>" : out);
    // Flag names and values are the user's bytes: shown as ConfigError shows them (control
    // characters and invalid UTF-8 as \xNN), one line each.
    auto shown = [](const std::string& s) { return ConfigError("", 0, "", s).message(); };
    for (const std::string& i : job.ignored) std::cerr << "ignored: " << shown(i) << "\n";
    for (const std::string& n : job.notes) std::cerr << "note: " << shown(n) << "\n";
    if (out.empty()) {
      std::cout << yaml;
    } else {
      std::ofstream file;
      open_output(file, out, "--out");
      file << yaml;
      close_output(file, out, "--out");
    }
    return 0;
  });
}

}  // namespace bmpipe::cli
