// libFuzzer target: a search journal (api/search_journal.hpp) resumed as `bmpipe search
// configs/examples/tiny.yaml --planner off --pp 2,4 --schedules ALL --journal FILE` resumes
// it (ALL: every schedule of the registry, comma-separated), through the library's public
// entry point, api::run_search with a JournalRequest: the journal is read back, the layouts
// it lacks are simulated and appended, and the search's document is made from both.
//
// The seeds (corpus/journal/seed-*) are journals that command wrote (scripts/fuzz_seeds.sh),
// whole, cut short and torn. A journal's header names the hash of the inputs it was written
// for; a 64-bit hash is nothing mutation finds, so the target resumes under the hash the
// input's own header names (or 0 when it names none): the fuzzer gets past the header to
// the lines. Refusing a journal of other inputs is the unit tests' (tests/api).
//
// A journal that resumed is whole afterwards (the run appended what it lacked): resumed
// again it must give the same document, wall time aside (a resumed search is the
// uninterrupted one's, search_journal.hpp), and so it checks that what append() writes
// reads back as it was.
//
// A search that returns or refuses the journal must leave no file open: the Python module
// resumes and refuses journals in one long-lived process, and a descriptor lost per refusal
// runs it out of them (and this target too, after ulimit -n runs, in TempFile).
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

#include "api/search_journal.hpp"
#include "fuzz_run.hpp"
#include "schedules/registry.hpp"

namespace {

using namespace bmpipe;

const Config& tiny() {
  static const Config config = load_config(BMPIPE_SOURCE_DIR "/configs/examples/tiny.yaml");
  return config;
}

// One simulation per layout (planner off), one thread: a journal that lacks every layout
// costs a few milliseconds under the sanitizers.
api::SearchRequest request() {
  api::SearchRequest r;
  r.effort = PlannerEffort::off;
  r.threads = 1;
  r.space.pp = {2, 4};
  for (const ScheduleInfo& s : builtin_schedules()) r.space.schedules.emplace_back(s.name);
  return r;
}

// The "inputs" hash of the header line, if it is JSON naming one in hex.
std::uint64_t header_hash(const std::string& text) {
  const nlohmann::json header =
      nlohmann::json::parse(text.substr(0, text.find('\n')), nullptr, false);
  if (!header.is_object()) return 0;
  const auto inputs = header.find("inputs");
  if (inputs == header.end() || !inputs->is_string()) return 0;
  const std::string hex = inputs->get<std::string>();
  if (hex.empty() || hex.size() > 16 ||
      hex.find_first_not_of("0123456789abcdef") != std::string::npos)
    return 0;
  return std::stoull(hex, nullptr, 16);
}

// The process's open file descriptors (Linux: /proc/self/fd), or -1 when unknown.
long open_files() {
  std::error_code ec;
  long n = 0;
  for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end;
       it.increment(ec))
    ++n;
  return ec ? -1 : n;
}

// The document without its wall times, the one part that differs between two runs.
nlohmann::json without_wall_time(nlohmann::json j) {
  if (j.is_object()) {
    j.erase("wall_s");
    for (auto& [key, value] : j.items()) value = without_wall_time(std::move(value));
  } else if (j.is_array()) {
    for (auto& value : j) value = without_wall_time(std::move(value));
  }
  return j;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const fuzz::TempFile file("journal.jsonl", text);
  const api::JournalRequest journal{file.path(), header_hash(text)};
  std::string notes;
  const auto note = [&notes](const std::string& line) { notes += line + "\n"; };
  nlohmann::json document;
  const long files = open_files();
  const bool resumed =
      fuzz::answered([&] { document = api::run_search(tiny(), request(), journal, note); });
  if (const long now = open_files(); files >= 0 && now > files)
    fuzz::broken("run_search left " + std::to_string(now - files) + " file(s) open after " +
                 (resumed ? "resuming" : "refusing") + " the journal");
  if (!resumed) return 0;
  // What `bmpipe search --json` prints (the CLI dumps with replacement of bad UTF-8).
  const auto shown = [](const nlohmann::json& j) {
    return j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace);
  };
  const std::string first = shown(without_wall_time(document));
  nlohmann::json again;
  try {
    again = api::run_search(tiny(), request(), journal, note);
  } catch (const std::exception& e) {
    fuzz::broken(std::string("the journal a search resumed and completed is refused: ") + e.what());
  }
  const std::string second = shown(without_wall_time(again));
  if (first != second)
    fuzz::broken("resumed twice, the journal gives two documents:\n--- first\n" + first +
                 "\n--- second\n" + second);
  return 0;
}
