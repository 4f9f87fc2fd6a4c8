#include "api/import.hpp"

#include "api/errors.hpp"
#include "experiment/config.hpp"
#include "experiment/suggest.hpp"
#include "frameworks/importers.hpp"
#include "sim/cost/hardware.hpp"

namespace bmpipe::api {

// The formats come from the importer table (frameworks/importers.hpp).
std::string import_help() {
  return "bmpipe import FORMAT INPUT [options]\n\nFormats:\n" + importer_help() +
         R"(
The YAML goes to stdout (or --out) and loads with `bmpipe simulate`; each value carries
a comment naming the flag or key it came from. Every flag or key is checked against the
framework's own list: an unknown one is an error (with the closest known name). Those
that cannot change time or memory (logging, checkpoints, data paths) are listed on stderr
as "ignored: ...", approximations as "note: ...". Those that change time or memory in a
way bmpipe does not model (context parallelism, FP8, mixture of experts, FSDP,
offloading, ...) are an error, or with --allow-unmodelled a "warning: ..." each.

Exit codes: 0 success (with ignored/note/warning lines on stderr), 2 bad input (an
unknown format, flag, key or preset, a file that cannot be read, an unmodelled feature
without --allow-unmodelled), 70 internal error.
)";
}

std::string import_format_names() {
  return importer_names();
}

std::string hardware_preset_names_text() {
  return hardware_preset_names();
}

namespace {

constexpr std::size_t kMaxInput = 8u << 20;

/// The names in a list such as "megatron, mindformers or profile", for did_you_mean.
std::vector<std::string> split_or_list(const std::string& text) {
  std::vector<std::string> names;
  std::string word;
  for (char c : text + ",") {
    if (c == ',' || c == ' ') {
      if (!word.empty() && word != "or" && word != "and") names.push_back(word);
      word.clear();
    } else {
      word += c;
    }
  }
  return names;
}

const Importer& importer_of(const std::string& format) {
  check_import_format(format);
  return *find_importer(format);
}

}  // namespace

void check_import_format(const std::string& format) {
  if (!find_importer(format))
    throw RequestError("FORMAT", "unknown format '" + format + "'" +
                                     did_you_mean(format, split_or_list(importer_names())) + " (" +
                                     importer_names() + ")");
}

std::string preset_suggestion(const std::string& name) {
  const std::vector<std::string> names = split_or_list(hardware_preset_names());
  std::vector<std::string> extended;
  for (const std::string& n : names)
    if (!name.empty() && n.rfind(name, 0) == 0) extended.push_back(n);
  if (extended.size() == 1) return " (did you mean '" + extended[0] + "'?)";
  return did_you_mean(name, names);
}

void check_import_preset(const ImportRequest& r) {
  if (r.preset && !find_hardware_preset(*r.preset))
    throw RequestError("--preset", "unknown hardware preset '" + *r.preset + "'" +
                                       preset_suggestion(*r.preset) +
                                       " (known: " + hardware_preset_names() + ")");
}

void check_import_request(const ImportRequest& r) {
  const Importer& importer = importer_of(r.format);
  if (r.cluster && (r.preset || r.devices))
    throw RequestError("--cluster", "give --cluster FILE or --preset NAME --devices N, not both");
  if (!r.cluster && !r.preset)
    throw RequestError("--cluster",
                       "give the cluster: --cluster FILE or --preset NAME --devices N");
  if (r.devices && !r.preset) throw RequestError("--devices", "--devices goes with --preset");
  if (!importer.takes_layout && (r.pp || r.microbatches))
    throw RequestError("--pp",
                       "--pp and --microbatches are for profile imports; the framework's "
                       "settings give them");
  if (!importer.counts_devices && r.preset && !r.devices)
    throw RequestError("--devices", "--preset needs --devices N");
  if (r.pp && *r.pp < 1) throw RequestError("--pp", "--pp must be at least 1");
  if (r.microbatches && *r.microbatches < 1)
    throw RequestError("--microbatches", "--microbatches must be at least 1");
}

namespace {

/// The devices a job's parallel sizes take, dp x tp x cp x pp (dp as stated, else 1).
long long stated_devices(const ImportedJob& job) {
  return static_cast<long long>(job.dp.value_or(1)) * job.tp * job.cp.value_or(1) * job.pp;
}

/// Where the job's dp came from (empty when nothing said it).
Origin dp_origin(const ImportedJob& job) {
  const auto it = job.origin.find("training.dp");
  return it != job.origin.end() ? it->second : Origin{};
}

}  // namespace

ImportOutcome run_import(const ImportRequest& r) {
  check_import_preset(r);
  check_import_request(r);
  const Importer& importer = importer_of(r.format);
  ImportedJob job = importer.read(read_input(r.input, kMaxInput), r.input);
  if (!job.unmodelled.empty() && !r.allow_unmodelled) throw unmodelled_error(job.unmodelled);
  if (r.pp) {
    job.pp = *r.pp;
    job.from("training.pp", Origin{"", 0, 0, "--pp", ""});
  }
  if (r.microbatches) {
    job.microbatches = *r.microbatches;
    job.from("training.microbatches", Origin{"", 0, 0, "--microbatches", ""});
  }
  ImportCluster cluster;
  if (r.cluster) {
    cluster = cluster_from_file(*r.cluster);
  } else if (r.devices) {
    cluster = cluster_from_preset(*r.preset, *r.devices);
  } else {
    // counts_devices: the job's parallel settings say how many devices it runs on, every
    // dimension of them (context parallelism too: dp is what is left of the world after
    // tp x cp x pp). What the cluster then refuses is those settings', not an option's.
    // A job that takes the devices left over (torchtitan's data_parallel_shard_degree -1)
    // does not say how many it runs on.
    if (!job.dp) {
      const Origin o = dp_origin(job);
      throw ImportError(o.file, o.line, o.column, o.key,
                        "the job takes the devices left over (" + o.why +
                            "), so it does not say how many it runs on: give --devices N "
                            "with --preset, or --cluster FILE");
    }
    const long long cp = job.cp.value_or(1);
    const long long devices = stated_devices(job);
    Origin counted = dp_origin(job);
    counted.why.clear();
    const std::string sizes = "dp x tp x cp x pp = " + std::to_string(job.dp.value_or(1)) + " x " +
                              std::to_string(job.tp) + " x " + std::to_string(cp) + " x " +
                              std::to_string(job.pp) + " = " + std::to_string(devices) + " devices";
    try {
      cluster = cluster_from_preset(*r.preset, devices);
    } catch (const ImportError& e) {
      if (e.key() != "--devices") throw;
      throw ImportError(counted.file, counted.line, counted.column, counted.key,
                        "the job's " + sizes + ", without --devices: " + e.message());
    }
    cluster.description = std::to_string(devices) + " " + *r.preset + " devices (--preset " +
                          *r.preset + "; " + sizes + ")";
    counted.key += " (" + sizes + ")";
    cluster.origin = counted;
  }
  // A job on part of the cluster (training.devices): --devices that are not whole nodes of
  // the preset, or a cluster file larger than the job's dp x tp x cp x pp.
  if (cluster.job_devices) {
    job.devices = *cluster.job_devices;
    job.from("training.devices", cluster.origin);
  } else if (r.cluster && job.dp) {
    const long long used = stated_devices(job);
    if (used < cluster.devices) {
      job.devices = used;
      Origin o = dp_origin(job);
      o.why = "dp x tp x cp x pp of the job";
      job.from("training.devices", o);
      job.notes.push_back("the job's dp x tp x cp x pp = " + std::to_string(used) +
                          " devices are " + std::to_string(used) + " of the cluster's " +
                          std::to_string(cluster.devices) +
                          ": it runs on the first of them (training.devices), the rest idle.");
    }
  }
  ImportOutcome out;
  out.yaml = imported_yaml(job, cluster, r.out,
                           importer.rules ? importer.rules() : std::span<const FrameworkRule>{});
  // Flag names and values are the user's bytes: shown as ConfigError shows them.
  auto shown = [](const std::string& s) { return ConfigError("", 0, "", s).message(); };
  for (const std::string& i : job.ignored) out.ignored.push_back(shown(i));
  for (const std::string& n : job.notes) out.notes.push_back(shown(n));
  for (const Unmodelled& u : job.unmodelled) out.warnings.push_back(shown(unmodelled_warning(u)));
  return out;
}

}  // namespace bmpipe::api
