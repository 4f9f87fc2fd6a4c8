#include "api/search_journal.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <type_traits>

#include "api/contracts.hpp"
#include "api/errors.hpp"
#include "api/search.hpp"
#include "experiment/layer_layout.hpp"
#include "io/read_file.hpp"
#include "schedules/registry.hpp"
#include "sim/time.hpp"

namespace bmpipe::api {

std::uint64_t fnv1a64(std::string_view bytes, std::uint64_t h) {
  for (const char c : bytes) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  return h;
}

namespace {

constexpr const char* kFormat = "bmpipe search journal 1";

std::string hex(std::uint64_t h) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

void write_all(int fd, const std::string& text, const std::string& path) {
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      throw OutputError(path, "--journal",
                        std::string("write failed (") + std::strerror(errno) + ")");
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0)
    throw OutputError(path, "--journal",
                      std::string("fsync failed (") + std::strerror(errno) + ")");
}

}  // namespace

std::uint64_t journal_inputs_hash(std::string_view config_text,
                                  const std::map<std::string, std::string>& options) {
  std::uint64_t h = fnv1a64(config_text);
  for (const auto& [name, value] : options) h = fnv1a64("\n" + name + "=" + value, h);
  return h;
}

std::map<std::string, std::string> journal_options(
    const SearchRequest& request, double screen_margin_pct,
    const std::vector<std::pair<std::string, std::string>>& sets) {
  auto number = [](double d) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.17g", d);
    return std::string(buf);
  };
  auto list = [](const auto& items) {
    std::string text;
    for (const auto& item : items) {
      if (!text.empty()) text += ",";
      if constexpr (std::is_same_v<std::decay_t<decltype(item)>, std::string>)
        text += item;
      else
        text += std::to_string(item);
    }
    return text;
  };
  std::map<std::string, std::string> o;
  const LayoutSpace& space = request.space;
  for (const auto& [name, values] :
       {std::pair<const char*, const std::vector<int>*>{"tp", &space.tp},
        {"pp", &space.pp},
        {"vpp", &space.vpp},
        {"micro-batch-size", &space.micro_batch_size},
        {"ep", &space.ep},
        {"etp", &space.etp},
        {"cp", &space.cp}})
    if (!values->empty()) o[name] = list(*values);
  if (!space.schedules.empty()) o["schedules"] = list(space.schedules);
  o["planner"] = request.effort == PlannerEffort::off     ? "off"
                 : request.effort == PlannerEffort::quick ? "quick"
                                                          : "full";
  o["screen-evals"] = std::to_string(request.screen_evals);
  o["screen-margin-pct"] = number(screen_margin_pct);
  o["layout-evals"] = std::to_string(request.layout_evals);
  o["no-bound"] = request.bound ? "false" : "true";
  o["refine"] = std::to_string(request.refine);
  if (request.memory_limit_GiB) o["memory-limit-GiB"] = number(*request.memory_limit_GiB);
  o["margin-GiB"] = number(request.margin_GiB);
  if (request.offload == "auto" || request.offload == "only") o["offload"] = *request.offload;
  // A framework changes which layouts are planned (and so what a line's index names).
  if (request.framework) o["expressible"] = *request.framework;
  o["seed"] = std::to_string(request.seed);
  if (!sets.empty()) {
    std::string text;
    for (const auto& [key, value] : sets) text += key + "=" + value + "\n";
    o["set"] = text;
  }
  return o;
}

JournalError::JournalError(const std::string& file, std::size_t line, const std::string& field,
                           const std::string& message)
    : RequestError("--journal", file + (line > 0 ? ":" + std::to_string(line) : std::string()) +
                                    ": " + (field.empty() ? std::string() : field + ": ") +
                                    message),
      file_(file),
      line_(line),
      field_(field) {}

namespace {

/// A value as the message quotes it: JSON, ASCII only, at most 60 characters.
std::string shown(const nlohmann::json& v) {
  std::string text = v.dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

std::string type_of(const nlohmann::json& v);

/// A key of the file as a message names it: as it is when it is a plain name, else quoted
/// as JSON (ASCII, shortened), so a forged key prints no control characters.
std::string key_name(const std::string& key) {
  const bool plain = !key.empty() && key.size() <= 40 &&
                     key.find_first_not_of(
                         "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                         "0123456789_-") == std::string::npos;
  return plain ? key : shown(nlohmann::json(key));
}

/// An array's length as a message says it ("3 entries"), or what else it is.
std::string count_of(const nlohmann::json& v) {
  return v.is_array() ? std::to_string(v.size()) + " entries" : type_of(v);
}

std::string type_of(const nlohmann::json& v) {
  if (v.is_number_integer()) return "the integer " + shown(v);
  if (v.is_number()) return "the number " + shown(v);
  if (v.is_string()) return "the string " + shown(v);
  if (v.is_boolean()) return shown(v);
  if (v.is_null()) return "null";
  return std::string(v.is_array() ? "an array" : "an object");
}

/// The fields of one JSON object of a journal line, each read once with its type and range
/// checked; fail() and every reader throw JournalError naming FILE:LINE and the field.
class Fields {
 public:
  Fields(const std::string& path, std::size_t line, const nlohmann::json& object,
         std::string prefix)
      : path_(path), line_(line), object_(object), prefix_(std::move(prefix)) {}

  [[noreturn]] void fail(const std::string& key, const std::string& message) const {
    throw JournalError(path_, line_, prefix_ + key, message);
  }
  bool has(const std::string& key) const { return object_.contains(key); }
  const nlohmann::json& at(const std::string& key) {
    const auto it = object_.find(key);
    if (it == object_.end()) fail(key, "missing (a run writes it on every line like this one)");
    read_.insert(key);
    return *it;
  }
  std::int64_t integer(const std::string& key, std::int64_t least, std::int64_t most,
                       const std::string& what) {
    const nlohmann::json& v = at(key);
    bool in = false;
    if (v.is_number_unsigned()) {
      const std::uint64_t u = v.get<std::uint64_t>();
      in = most >= 0 && u <= static_cast<std::uint64_t>(most) &&
           (least <= 0 || u >= static_cast<std::uint64_t>(least));
    } else if (v.is_number_integer()) {
      const std::int64_t i = v.get<std::int64_t>();
      in = i >= least && i <= most;
    }
    if (!in) fail(key, "expected " + what + ", got " + type_of(v));
    return v.get<std::int64_t>();
  }
  int count(const std::string& key, int least, const std::string& what) {
    return static_cast<int>(integer(key, least, std::numeric_limits<int>::max(), what));
  }
  double number(const std::string& key, double least, double most, const std::string& what) {
    const nlohmann::json& v = at(key);
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < least ||
        v.get<double>() > most)
      fail(key, "expected " + what + ", got " + type_of(v));
    return v.get<double>();
  }
  std::string string(const std::string& key, const std::string& what) {
    const nlohmann::json& v = at(key);
    if (!v.is_string()) fail(key, "expected " + what + ", got " + type_of(v));
    return v.get<std::string>();
  }
  bool boolean(const std::string& key) {
    const nlohmann::json& v = at(key);
    if (!v.is_boolean()) fail(key, "expected true or false, got " + type_of(v));
    return v.get<bool>();
  }
  void null(const std::string& key, const std::string& why) {
    const nlohmann::json& v = at(key);
    if (!v.is_null()) fail(key, "expected null (" + why + "), got " + type_of(v));
  }
  /// Every field of the object was read: anything else is no field a run writes here.
  void no_others() const {
    for (const auto& [key, value] : object_.items())
      if (!read_.count(key)) fail(key_name(key), "not a field a run writes on this line");
  }

 private:
  const std::string& path_;
  std::size_t line_;
  const nlohmann::json& object_;
  std::string prefix_;
  std::set<std::string> read_;
};

}  // namespace

/// What a run of the journal's layouts writes: how many, and (with the search itself) each
/// one's layout and the capacity every planned layout reports.
struct SearchJournal::Expected {
  std::size_t layouts = 0;
  const std::vector<Layout>* each = nullptr;  ///< the search's layouts, by index
  std::optional<std::int64_t> capacity_bytes;
  std::size_t max_bytes = 0;
  /// The global batch every layout keeps (planner/layout_search.cpp's global_batch): a
  /// layout's micro-batches are it / (micro-batch size x dp).
  std::optional<std::int64_t> global_batch;
};

namespace {

/// The bound on a journal's size, from what a run writes. The header is under 256 bytes. A
/// layout's line is its fields (under 1 KiB of names and numbers), its refusal (a sentence
/// of the planner's or the config's checks: well under 15 KiB), and its plan: one recompute
/// mode per layer row ("selective" with its quotes and comma: 12 bytes) and one layer count
/// per stage (stages are at most the rows; under 12 bytes each). Rows are the decoder layers
/// and, with separate ends, the embedding, MTP and loss rows: at most 2 x layers + 64.
/// DeepSeek-V3's whole default search (3,715 layouts, 61 layers) is bounded by 65 MiB, so a
/// device file (/dev/zero, /dev/full) fails after a fraction of a second.
std::size_t journal_bound(std::size_t layouts, std::size_t layers) {
  const std::size_t line = (std::size_t{16} << 10) + 24 * (2 * layers + 64);
  return 4096 + layouts * line;
}

/// The global batch a search keeps fixed, as planner/layout_search.cpp's global_batch
/// takes it: training.global_batch_size, or the config's micro-batches x micro-batch size
/// x dp.
std::int64_t global_batch(const Config& c) {
  const TrainingConfig& t = c.training;
  if (t.global_batch_size) return *t.global_batch_size;
  return std::int64_t{t.microbatches} * t.micro_batch_size * t.data_parallel(c.devices());
}

/// The filters a run writes on a journal line: the planner's and the config's refusals of
/// one layout (planner/layout_search.cpp) and the bound's skip (api/search.cpp). Those of
/// enumeration ("divisibility", "experts") and of the budgets are never journaled.
const std::set<std::string>& journaled_filters() {
  static const std::set<std::string> kFilters{"bound", "config", "memory", "simulation",
                                              "static-memory"};
  return kFilters;
}

std::string filter_list() {
  std::string text;
  for (const std::string& f : journaled_filters()) text += (text.empty() ? "" : ", ") + f;
  return text;
}

/// Layout `index`'s result as a run writes it (encode_result), every field checked.
LayoutResult read_result(const std::string& path, std::size_t line, const nlohmann::json& j,
                         std::size_t index, const Layout* expected,
                         const std::optional<std::int64_t>& capacity,
                         const std::optional<std::int64_t>& global_batch) {
  if (!j.is_object())
    throw JournalError(path, line, "result", "expected an object, got " + type_of(j));
  Fields f(path, line, j, "result.");
  constexpr std::int64_t kMaxTime = std::numeric_limits<Time>::max();
  LayoutResult r;
  Layout& l = r.layout;
  l.tp = f.count("tp", 1, "a tensor-parallel size of at least 1");
  l.pp = f.count("pp", 1, "a pipeline size of at least 1");
  l.dp = f.count("dp", 1, "a data-parallel size of at least 1");
  l.vpp = f.count("vpp", 1, "a number of chunks per device of at least 1");
  l.micro_batch_size = f.count("micro_batch_size", 1, "a micro-batch size of at least 1");
  l.schedule = f.string("schedule", "a schedule's name");
  if (!find_schedule(l.schedule))
    f.fail("schedule", "unknown schedule " + shown(l.schedule) + " (" + schedule_names() + ")");
  l.ep = f.count("ep", 1, "an expert-parallel size of at least 1");
  l.etp = f.count("etp", 1, "an expert tensor-parallel size of at least 1");
  l.cp = f.count("cp", 1, "a context-parallel size of at least 1");
  // With --offload auto or only (encode_result).
  if (f.has("offload_modules"))
    l.offload = f.string("offload_modules", "an activation-offload module set");
  if (f.has("offload_lead"))
    l.offload_lead = static_cast<int>(
        f.integer("offload_lead", 0, std::numeric_limits<int>::max(), "a lead of 0 or more"));
  if (f.has("offload_form")) {
    const std::string form = f.string("offload_form", "an offload form");
    const std::optional<OffloadForm> parsed = parse_offload_form(form);
    // A run writes the key for the per-layer forms only (job is its absence).
    if (!parsed || *parsed == OffloadForm::job)
      f.fail("offload_form", "unknown offload form " + shown(form) + " (per_layer, only)");
    l.offload_form = *parsed;
  }
  if (expected && (l.offload != expected->offload || l.offload_lead != expected->offload_lead ||
                   l.offload_form != expected->offload_form))
    f.fail(l.offload != expected->offload             ? "offload_modules"
           : l.offload_lead != expected->offload_lead ? "offload_lead"
                                                      : "offload_form",
           "is " + to_string(l) + ", but layout " + std::to_string(index) + " of this search is " +
               to_string(*expected) + ": a line no run of it writes");
  if (expected && l != *expected) {
    // The layout the index names, as the search enumerates it: name the first field off.
    const Layout& e = *expected;
    const std::pair<const char*, std::string> fields[] = {
        {"tp", std::to_string(e.tp)},
        {"pp", std::to_string(e.pp)},
        {"dp", std::to_string(e.dp)},
        {"vpp", std::to_string(e.vpp)},
        {"micro_batch_size", std::to_string(e.micro_batch_size)},
        {"schedule", nlohmann::json(e.schedule).dump()},
        {"ep", std::to_string(e.ep)},
        {"etp", std::to_string(e.etp)},
        {"cp", std::to_string(e.cp)}};
    for (const auto& [key, want] : fields)
      if (j.at(key).dump() != want)
        f.fail(key, "is " + shown(j.at(key)) + ", but layout " + std::to_string(index) +
                        " of this search is " + to_string(e) + " (" + key + " " + want +
                        "): a line no run of it writes");
  }
  r.microbatches = f.count("microbatches", 0, "a number of micro-batches (0 or more)");
  r.evaluations = f.integer("evaluations", 0, std::numeric_limits<std::int64_t>::max(),
                            "a number of evaluations (0 or more)");
  r.fits = f.boolean("fits");
  const nlohmann::json& rejected = f.at("rejected");
  if (!rejected.is_null() && !(rejected.is_string() && !rejected.get<std::string>().empty()))
    f.fail("rejected", "expected null or why the layout was rejected, got " + type_of(rejected));
  if (rejected.is_string()) r.rejected = rejected.get<std::string>();
  if (f.has("filter")) {
    r.filter = f.string("filter", "a filter's name");
    if (!journaled_filters().count(r.filter))
      f.fail("filter",
             "unknown filter " + shown(r.filter) + " (a journal line has " + filter_list() + ")");
  }
  if (r.filter.empty() != r.rejected.empty())
    f.fail(r.filter.empty() ? "rejected" : "filter",
           "a rejected layout names its filter, and only a rejected one");
  // Micro-batches: none for a layout refused before its config was built (by the config,
  // the static-memory filter, or a simulation that failed), else the global batch's.
  if (global_batch) {
    const bool none =
        r.filter == "config" || r.filter == "static-memory" || r.filter == "simulation";
    const std::int64_t m =
        none ? 0 : *global_batch / (std::int64_t{l.micro_batch_size} * std::int64_t{l.dp});
    if (r.microbatches != m)
      f.fail("microbatches",
             "is " + std::to_string(r.microbatches) + ", but " +
                 (none ? "a layout rejected by filter " + shown(r.filter) + " has 0"
                       : "this search's global batch of " + std::to_string(*global_batch) +
                             " makes " + std::to_string(m) + " of micro-batch size " +
                             std::to_string(l.micro_batch_size) + " x dp " + std::to_string(l.dp)));
  }
  // The bound's skip: its bound, in ns and in ms, and nothing planned.
  if (r.filter == "bound") {
    r.bound = f.integer("bound_ns", 1, kMaxTime, "a lower bound in ns greater than 0");
    if (f.number("bound_ms", 0, std::numeric_limits<double>::max(), "a time in ms") !=
        ns_to_ms(r.bound))
      f.fail("bound_ms", "is not bound_ns in ms (" + shown(ns_to_ms(r.bound)) + ")");
  }
  // Times: exactly what the run measured, in ns, and in ms beside it.
  const Time ns = f.integer("iteration_time_ns", 0, kMaxTime, "a time in ns, 0 or more");
  if (ns > 0) {
    if (r.filter != "" && r.filter != "memory")
      f.fail("iteration_time_ns", "a layout rejected by filter " + shown(r.filter) +
                                      " was never simulated: expected 0, got " +
                                      std::to_string(ns));
    r.iteration_time = ns;
    if (f.number("iteration_time_ms", 0, std::numeric_limits<double>::max(), "a time in ms") !=
        ns_to_ms(ns))
      f.fail("iteration_time_ms", "is not iteration_time_ns in ms (" + shown(ns_to_ms(ns)) + ")");
    const double big = std::numeric_limits<double>::max();
    r.tokens_per_s = f.number("tokens_per_s", 0, big, "a finite number, 0 or more");
    r.mfu = f.number("mfu", 0, big, "a finite number, 0 or more");
    r.tflops_per_device = f.number("tflops_per_device", 0, big, "a finite number, 0 or more");
    r.bubble_ratio = f.number("bubble_ratio", 0, 1, "a ratio from 0 to 1");
    r.max_peak_bytes = f.integer("max_peak_memory_bytes", 0,
                                 std::numeric_limits<std::int64_t>::max(), "bytes, 0 or more");
    r.capacity_bytes = f.integer("capacity_bytes", 1, std::numeric_limits<std::int64_t>::max(),
                                 "bytes, more than 0");
    if (capacity && r.capacity_bytes != *capacity)
      f.fail("capacity_bytes", "is " + std::to_string(r.capacity_bytes) +
                                   ", but every layout of this search has " +
                                   std::to_string(*capacity) +
                                   " (the device's memory, or --memory-limit-GiB less the margin)");
    if (r.microbatches < 1)
      f.fail("microbatches", "a simulated layout has at least 1 micro-batch, got " +
                                 std::to_string(r.microbatches));
    if (r.fits != (r.max_peak_bytes <= r.capacity_bytes))
      f.fail("fits", std::string(r.fits ? "true" : "false") + ", but max_peak_memory_bytes " +
                         std::to_string(r.max_peak_bytes) + (r.fits ? " exceeds" : " is within") +
                         " capacity_bytes " + std::to_string(r.capacity_bytes));
    if (r.fits != r.filter.empty())
      f.fail("fits",
             "a simulated layout that does not fit is rejected by filter \"memory\", "
             "and only one that does not");
    // The plan: layers per stage, one per stage (pp x vpp), and a mode per layer.
    const nlohmann::json& partition = f.at("partition");
    if (!partition.is_array() ||
        partition.size() != static_cast<std::size_t>(l.pp) * static_cast<std::size_t>(l.vpp))
      f.fail("partition", "expected " + std::to_string(std::int64_t{l.pp} * l.vpp) +
                              " layer counts (pp x vpp stages), got " + count_of(partition));
    std::int64_t layers = 0;
    for (std::size_t k = 0; k < partition.size(); ++k) {
      const nlohmann::json& n = partition[k];
      if (!n.is_number_integer() || n.get<std::int64_t>() < 0 ||
          n.get<std::int64_t>() > kMaxLayoutLayers * 2)
        f.fail("partition[" + std::to_string(k) + "]",
               "expected a number of layers, 0 or more, got " + type_of(n));
      r.plan.partition.push_back(n.get<int>());
      layers += n.get<std::int64_t>();
    }
    const nlohmann::json& modes = f.at("layer_recompute");
    if (!modes.is_array() || static_cast<std::int64_t>(modes.size()) != layers)
      f.fail("layer_recompute", "expected " + std::to_string(layers) +
                                    " recompute modes (one per layer of the partition), got " +
                                    count_of(modes));
    for (std::size_t k = 0; k < modes.size(); ++k) {
      const std::optional<Recompute> m =
          modes[k].is_string() ? parse_recompute(modes[k].get<std::string>()) : std::nullopt;
      if (!m)
        f.fail("layer_recompute[" + std::to_string(k) + "]",
               "unknown recompute mode " + shown(modes[k]) + " (" + recompute_names() + ")");
      r.plan.recompute.push_back(*m);
    }
  } else {
    // Never simulated: refused or skipped, and the run writes null for the measures.
    if (r.filter.empty() || r.filter == "memory")
      f.fail("iteration_time_ns",
             "a layout " +
                 std::string(r.filter.empty() ? "not rejected" : "rejected by filter \"memory\"") +
                 " was simulated: expected a time greater than 0, got 0");
    if (r.fits) f.fail("fits", "true, but the layout was rejected by filter " + shown(r.filter));
    for (const char* key : {"iteration_time_ms", "tokens_per_s", "mfu"})
      f.null(key, "iteration_time_ns is 0: nothing was simulated");
  }
  f.no_others();
  return r;
}

/// The field whose value a JSON syntax error at byte `at` of `line` is in: the last
/// "name": before it, under "result." when that is inside the result (a best guess, for the
/// message), or "".
std::string key_before(const std::string& line, std::size_t at) {
  at = std::min(at, line.size());
  const std::size_t colon = line.rfind("\":", at);
  if (colon == std::string::npos || colon == 0) return "";
  const std::size_t open = line.rfind('"', colon - 1);
  if (open == std::string::npos) return "";
  const std::string key = key_name(line.substr(open + 1, colon - open - 1));
  const std::size_t result = line.find("\"result\":");
  return result != std::string::npos && result < open ? "result." + key : key;
}

}  // namespace

SearchJournal::SearchJournal(std::string path, std::uint64_t hash, const SearchSetup& setup,
                             const std::function<void(const std::string&)>& note,
                             const std::optional<InputsBeforeFramework>& before_framework)
    : SearchJournal(
          std::move(path), hash,
          Expected{setup.layouts.size(), &setup.layouts,
                   // The capacity evaluate_layout reports (the limit it planned under):
                   // --memory-limit-GiB less the margin, else the device's memory as
                   // prepare() rounds it.
                   setup.options.memory_limit_bytes > 0
                       ? setup.options.memory_limit_bytes
                       : static_cast<std::int64_t>(
                             std::llround(setup.config.device.memory_GiB * 1073741824.0)),
                   journal_bound(setup.layouts.size(),
                                 static_cast<std::size_t>(setup.config.model.num_layers())),
                   global_batch(setup.config)},
          note, before_framework) {}

SearchJournal::SearchJournal(std::string path, std::uint64_t hash, const Expected& expected,
                             const std::function<void(const std::string&)>& note,
                             const std::optional<InputsBeforeFramework>& before_framework)
    : path_(std::move(path)), known_(expected.layouts) {
  const std::size_t layouts = expected.layouts;
  const nlohmann::json header{{"format", kFormat},
                              {"inputs", hex(hash)},
                              {"version", BMPIPE_VERSION},
                              {"layouts", layouts}};
  // A journal is a regular file bmpipe writes: a device, a pipe or a directory is refused
  // before anything is read from it (a pipe would block, a device never end).
  std::error_code ec;
  const std::filesystem::file_status status = std::filesystem::status(path_, ec);
  const bool exists = std::filesystem::exists(status);
  if (exists && !std::filesystem::is_regular_file(status))
    throw JournalError(
        path_, 0, "",
        std::string("is not a regular file (") +
            (std::filesystem::is_directory(status) ? "a directory"
             : std::filesystem::is_character_file(status) || std::filesystem::is_block_file(status)
                 ? "a device"
             : std::filesystem::is_fifo(status) ? "a pipe"
                                                : "not a file") +
            "); a search journal is a file bmpipe writes");
  std::string text;
  if (exists) {
    try {
      text = read_untrusted_file(path_, expected.max_bytes, "search journal");
    } catch (const ReadFileError& e) {
      throw JournalError(path_, 0, "",
                         std::string(e.what()) + " (of " + std::to_string(layouts) +
                             " layouts); remove it or name another file");
    }
  }
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
  if (fd_ < 0)
    throw JournalError(path_, 0, "",
                       std::string("cannot open for writing (") + std::strerror(errno) + ")");
  // Every refusal below throws from the constructor, whose destructor then never runs:
  // close the descriptor first (a long-lived caller, the Python module, would run out).
  try {
    struct stat opened {};
    if (::fstat(fd_, &opened) != 0 || !S_ISREG(opened.st_mode))
      throw JournalError(path_, 0, "",
                         "is not a regular file; a search journal is a file bmpipe writes");
    if (text.empty()) {
      write_all(fd_, header.dump() + "\n", path_);
      return;
    }
    // The header line: a JSON object of the format, typed, then the same inputs, or refuse.
    const std::string not_journal =
        "not a bmpipe search journal (expected a first line " + header.dump() + ")";
    const std::size_t end = text.find('\n');
    if (end == std::string::npos) throw JournalError(path_, 1, "", not_journal);
    const nlohmann::json got = nlohmann::json::parse(text.substr(0, end), nullptr, false);
    if (got.is_discarded() || !got.is_object()) throw JournalError(path_, 1, "", not_journal);
    Fields h(path_, 1, got, "");
    if (!h.has("format") || !got.at("format").is_string() ||
        got.at("format").get<std::string>() != kFormat)
      h.fail("format", not_journal);
    h.at("format");
    const std::string inputs = h.string("inputs", "the inputs' hash, 16 hexadecimal digits");
    if (inputs.size() != 16 || inputs.find_first_not_of("0123456789abcdef") != std::string::npos)
      h.fail("inputs", "expected the inputs' hash, 16 hexadecimal digits, got " + shown(inputs));
    const std::string version = h.string("version", "a bmpipe version");
    const std::int64_t count = h.integer("layouts", 0, std::numeric_limits<std::int64_t>::max(),
                                         "the number of layouts, 0 or more");
    h.no_others();
    // Its inputs are this search's less the framework: a journal from before the framework
    // was one of them (or of a search for none). Which, its lines cannot tell: a search for
    // none ranks the layouts the framework refuses. Not resumed, and not restarted over it.
    if (before_framework && inputs == hex(before_framework->hash) && version == BMPIPE_VERSION)
      h.fail("inputs",
             "this journal's inputs are this search's without the framework " +
                 shown(before_framework->framework) +
                 ": it predates the framework (--format or --expressible, Python's "
                 "expressible=) being one of a journal's inputs, or was written by a search "
                 "for no framework, and it may rank layouts " +
                 before_framework->framework +
                 " refuses, so it is not resumed under it. To resume it as it was written, "
                 "run the search without the framework; to search for " +
                 before_framework->framework +
                 ", remove it or name another file (its layouts are then planned again)");
    if (inputs != hex(hash) || version != BMPIPE_VERSION)
      throw JournalError(path_, 1, "",
                         "written for other inputs (the config, an option that changes "
                         "results, or the bmpipe version differ: journal " +
                             shown(inputs) + " bmpipe " + shown(version) + ", this run \"" +
                             hex(hash) + "\" bmpipe \"" + BMPIPE_VERSION +
                             "\"); remove it or name another file");
    if (static_cast<std::uint64_t>(count) != layouts)
      h.fail("layouts", "is " + std::to_string(count) + ", but these inputs give " +
                            std::to_string(layouts) + " layouts");
    // The layouts: one line each, every one ending in a newline. Only the last line may be
    // torn, by a kill in mid-write: it has no newline, and is dropped and cut off.
    std::vector<std::size_t> line_of(layouts, 0);
    std::size_t good = end + 1, line = 1;
    while (good < text.size()) {
      ++line;
      const std::size_t nl = text.find('\n', good);
      if (nl == std::string::npos) {
        if (::ftruncate(fd_, static_cast<off_t>(good)) != 0)
          throw JournalError(
              path_, line, "",
              std::string("cannot cut off a torn last line (") + std::strerror(errno) + ")");
        if (note)
          note("--journal " + path_ + ": line " + std::to_string(line) +
               " was torn (a run killed while writing it): dropped and cut off");
        break;
      }
      const std::string body = text.substr(good, nl - good);
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(body);
      } catch (const nlohmann::json::exception& e) {
        // A syntax error says at which byte; a number out of range (1e999) only its text.
        std::size_t at = std::string::npos;
        if (const auto* p = dynamic_cast<const nlohmann::json::parse_error*>(&e)) {
          at = p->byte;
        } else {
          const std::string what = e.what();
          const std::size_t close = what.rfind('\''), open = what.rfind('\'', close - 1);
          if (close != std::string::npos && open != std::string::npos && open < close)
            at = body.find(what.substr(open + 1, close - open - 1));
        }
        throw JournalError(path_, line, at == std::string::npos ? "" : key_before(body, at),
                           (at == std::string::npos ? std::string("not JSON")
                                                    : "not JSON at column " + std::to_string(at)) +
                               ": line " + std::to_string(line) +
                               " is not a finished layout (a journal is only ever torn at its "
                               "last line, before its newline); remove the file");
      }
      if (!j.is_object())
        throw JournalError(path_, line, "",
                           "expected an object {layout, result}, got " + type_of(j));
      Fields f(path_, line, j, "");
      const std::int64_t i =
          f.integer("layout", 0, static_cast<std::int64_t>(layouts) - 1,
                    layouts == 0 ? std::string("no layout (this search has none)")
                                 : "a layout index from 0 to " + std::to_string(layouts - 1));
      const auto index = static_cast<std::size_t>(i);
      if (line_of[index] != 0)
        f.fail("layout", "layout " + std::to_string(i) + " is already on line " +
                             std::to_string(line_of[index]) + " (a run writes each layout once)");
      known_[index] = read_result(path_, line, f.at("result"), index,
                                  expected.each ? &(*expected.each)[index] : nullptr,
                                  expected.capacity_bytes, expected.global_batch);
      f.no_others();
      line_of[index] = line;
      good = nl + 1;
    }
  } catch (...) {
    ::close(fd_);
    fd_ = -1;
    throw;
  }
}

SearchJournal::~SearchJournal() {
  if (fd_ >= 0) ::close(fd_);
}

void SearchJournal::append(std::size_t index, const LayoutResult& r) {
  const nlohmann::json j{{"layout", index},
                         {"result", nlohmann::json::parse(api::encode_result(r))}};
  write_all(fd_, j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n", path_);
}

std::string read_config_bytes(const std::string& path) {
  try {
    return read_untrusted_file(path, std::size_t{16} << 20, "config");
  } catch (const ReadFileError& e) {
    throw ConfigError(path, 0, "", e.what());
  }
}

std::uint64_t search_inputs_hash(std::string_view config_text, const SearchRequest& request,
                                 std::optional<double> screen_margin_pct) {
  return journal_inputs_hash(
      config_text,
      journal_options(request, screen_margin_pct.value_or(SearchRequest{}.screen_margin * 100),
                      request.overrides.set));
}

std::optional<InputsBeforeFramework> inputs_before_framework(
    std::string_view config_text, const SearchRequest& request,
    std::optional<double> screen_margin_pct) {
  if (!request.framework) return std::nullopt;
  SearchRequest without = request;
  without.framework.reset();
  return InputsBeforeFramework{search_inputs_hash(config_text, without, screen_margin_pct),
                               *request.framework};
}

FileSearch prepare_file_search(const std::string& path, const SearchRequest& request,
                               std::optional<double> screen_margin_pct) {
  const std::string text = read_config_bytes(path);
  FileSearch f;
  f.setup = prepare_search(parse_config(text, path, request.overrides), request);
  f.inputs_hash = search_inputs_hash(text, request, screen_margin_pct);
  f.before_framework = inputs_before_framework(text, request, screen_margin_pct);
  return f;
}

nlohmann::json run_search(const Config& config, const SearchRequest& request,
                          const JournalRequest& journal,
                          const std::function<void(const std::string&)>& note) {
  const auto start = std::chrono::steady_clock::now();
  const SearchSetup s = prepare_search(config, request);
  SearchJournal j(journal.path, journal.inputs, s, note, journal.before_framework);
  ThreadExecutor threads(s, request.threads);
  JournalExecutor resumed(threads, j);
  SearchRun run = drive_search(s, resumed);
  return finished_search_document(config, s, std::move(run), start);
}

}  // namespace bmpipe::api
