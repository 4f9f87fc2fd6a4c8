#include "api/search_journal.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <type_traits>

#include "api/contracts.hpp"
#include "api/errors.hpp"
#include "api/search.hpp"

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
  o["seed"] = std::to_string(request.seed);
  if (!sets.empty()) {
    std::string text;
    for (const auto& [key, value] : sets) text += key + "=" + value + "\n";
    o["set"] = text;
  }
  return o;
}

SearchJournal::SearchJournal(std::string path, std::uint64_t hash, std::size_t layouts,
                             const std::function<void(const std::string&)>& note)
    : path_(std::move(path)), known_(layouts) {
  const nlohmann::json header{{"format", kFormat},
                              {"inputs", hex(hash)},
                              {"version", BMPIPE_VERSION},
                              {"layouts", layouts}};
  std::string text;
  {
    std::ifstream in(path_, std::ios::binary);
    std::stringstream s;
    if (in) s << in.rdbuf();
    text = s.str();
  }
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
  if (fd_ < 0)
    throw RequestError("--journal",
                       path_ + ": cannot open for writing (" + std::strerror(errno) + ")");
  if (text.empty()) {
    write_all(fd_, header.dump() + "\n", path_);
    return;
  }
  // The header line: the same inputs, or refuse.
  std::size_t end = text.find('\n');
  nlohmann::json got;
  if (end != std::string::npos) got = nlohmann::json::parse(text.substr(0, end), nullptr, false);
  if (end == std::string::npos || got.is_discarded() || !got.is_object() ||
      got.value("format", "") != kFormat)
    throw RequestError("--journal", path_ + ": line 1: not a bmpipe search journal (expected '" +
                                        std::string(kFormat) + "' header)");
  if (got != header)
    throw RequestError("--journal",
                       path_ +
                           ": written for other inputs (the config, an option that changes "
                           "results, or the bmpipe version differ: journal " +
                           got.value("inputs", std::string("?")) + " bmpipe " +
                           got.value("version", std::string("?")) + ", this run " + hex(hash) +
                           " bmpipe " + BMPIPE_VERSION + "); remove it or name another file");
  // The layouts: one line each. Only the last line may be torn (a kill in mid-write).
  std::size_t good = end + 1, line = 1;
  while (good < text.size()) {
    ++line;
    const std::size_t nl = text.find('\n', good);
    const bool last = nl == std::string::npos || nl + 1 == text.size();
    const nlohmann::json j =
        nl == std::string::npos
            ? nlohmann::json(nlohmann::json::value_t::discarded)
            : nlohmann::json::parse(text.substr(good, nl - good), nullptr, false);
    bool ok = !j.is_discarded() && j.is_object() && j.contains("layout") && j.contains("result");
    std::optional<LayoutResult> r;
    if (ok) {
      try {
        const std::size_t i = j.at("layout").get<std::size_t>();
        if (i >= layouts) throw std::out_of_range("layout index");
        r = api::decode_result(j.at("result").dump());
        known_[i] = std::move(r);
      } catch (const std::exception&) {
        ok = false;
      }
    }
    if (!ok) {
      if (!last)
        throw RequestError("--journal", path_ + ": line " + std::to_string(line) +
                                            ": not a finished layout (a journal is only ever "
                                            "torn at its last line); remove the file");
      if (::ftruncate(fd_, static_cast<off_t>(good)) != 0)
        throw RequestError("--journal", path_ + ": cannot cut off a torn last line (" +
                                            std::strerror(errno) + ")");
      if (note)
        note("--journal " + path_ + ": line " + std::to_string(line) +
             " was torn (a run killed while writing it): dropped and cut off");
      break;
    }
    good = nl + 1;
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

nlohmann::json run_search(const Config& config, const SearchRequest& request,
                          const JournalRequest& journal,
                          const std::function<void(const std::string&)>& note) {
  const auto start = std::chrono::steady_clock::now();
  const SearchSetup s = prepare_search(config, request);
  SearchJournal j(journal.path, journal.inputs, s.layouts.size(), note);
  SearchRun run = evaluate_search(
      s, j.known(),
      [&](std::size_t i, const LayoutResult& r, const SearchProgress&) { j.append(i, r); });
  return finished_search_document(config, s, std::move(run), start);
}

}  // namespace bmpipe::api
