// A search journal is data from disk (issue 42, "a journal is trusted as if the program had
// written it"): read under a bound, typed, every line checked against what the run writes
// for the layout its index names, and refused with FILE:LINE: FIELD, never ranked. The
// journals here are written by hand: the header and two lines of tiny.yaml's default search
// (7 layouts: tp 1 with pp 1, 2, 4 under 1f1b and interleaved), then one field forged.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "api/api.hpp"
#include "api/search_journal.hpp"
#include "support/support.hpp"

namespace bmpipe::search_journal_refusal_test {
namespace {

using test::ScratchDir;
using test::slurp;

// The inputs' hash the library tests pass (JournalRequest::inputs 42), in the header.
const std::string kHeader =
    R"({"format":"bmpipe search journal 1","inputs":"000000000000002a","layouts":7,"version":")" +
    std::string(BMPIPE_TEST_VERSION) + "\"}\n";
// Layout 0 (tp 1, pp 1, dp 4, 1f1b) planned: 24 ms, all 8 layers on one stage. Its 777
// evaluations are no run's: they show the line was read back, not planned again.
const std::string kPlanned =
    R"({"layout":0,"result":{"bubble_ratio":0.0,"capacity_bytes":1073741824,"cp":1,"dp":4,)"
    R"("ep":1,"etp":1,"evaluations":777,"fits":true,"iteration_time_ms":24.0,)"
    R"("iteration_time_ns":24000000,"layer_recompute":["none","none","none","none","none",)"
    R"("none","none","none"],"max_peak_memory_bytes":16777216,"mfu":0.0,"micro_batch_size":1,)"
    R"("microbatches":2,"partition":[8],"pp":1,"rejected":null,"schedule":"1f1b",)"
    R"("tflops_per_device":0.0,"tokens_per_s":0.0,"tp":1,"vpp":1}})"
    "\n";
// Layout 2 (tp 1, pp 2, dp 2, interleaved vpp 2) skipped by the bound.
const std::string kSkipped =
    R"({"layout":2,"result":{"bound_ms":24.75,"bound_ns":24750000,"cp":1,"dp":2,"ep":1,)"
    R"("etp":1,"evaluations":0,"filter":"bound","fits":false,"iteration_time_ms":null,)"
    R"("iteration_time_ns":0,"mfu":null,"micro_batch_size":1,"microbatches":4,"pp":2,)"
    R"("rejected":"not planned: its lower bound 24.8 ms exceeds 24.0 ms, the best layout )"
    R"(planned before it","schedule":"interleaved","tokens_per_s":null,"tp":1,"vpp":2}})"
    "\n";

api::SearchRequest tiny_request() {
  api::SearchRequest r;
  r.threads = 1;
  return r;
}

/// `text` with `from` replaced by `to` once; `from` must be in it (a forgery that changes
/// nothing would make a test pass for nothing).
std::string forged(std::string text, const std::string& from, const std::string& to) {
  const std::size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

/// The descriptors this process has open (Linux's /proc/self/fd; -1 elsewhere).
int open_descriptors() {
  std::error_code ec;
  if (!std::filesystem::is_directory("/proc/self/fd", ec)) return -1;
  int n = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
    ++n;
  return n;
}

/// Runs tiny.yaml's search on a journal of `text`: it must be refused with a JournalError
/// naming the journal, `line` and `field` ("FILE:LINE: FIELD: ..."), saying `words`, leave
/// the file as it was and no descriptor of it open (a refusal throws from SearchJournal's
/// constructor, whose destructor then never runs; fuzz_journal found the leak).
void expect_refused(const std::string& text, std::size_t line, const std::string& field,
                    const std::string& words) {
  ScratchDir dir;
  const std::string path = test::write_file(dir.file("j.jsonl"), text);
  const int descriptors = open_descriptors();
  struct Check {
    int before;
    ~Check() { EXPECT_EQ(open_descriptors(), before) << "a refused journal left a file open"; }
  } check{descriptors};
  try {
    api::run_search(load_config(test::kTiny), tiny_request(), api::JournalRequest{path, 42});
    ADD_FAILURE() << "taken: " << text;
  } catch (const api::JournalError& e) {
    EXPECT_EQ(e.key(), "--journal");
    EXPECT_EQ(e.file(), path);
    EXPECT_EQ(e.line(), line) << e.what();
    EXPECT_EQ(e.field(), field) << e.what();
    const std::string where =
        path + ":" + std::to_string(line) + ": " + (field.empty() ? "" : field + ": ");
    EXPECT_NE(std::string(e.what()).find("--journal: " + where), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
  EXPECT_EQ(slurp(path), text);
}

TEST(ApiSearchJournalRefusal, TheHandWrittenLinesAreTakenAsTheyAre) {
  // The base of every forgery below: accepted, read back rather than planned again.
  ScratchDir dir;
  const std::string path = test::write_file(dir.file("j.jsonl"), kHeader + kPlanned + kSkipped);
  const nlohmann::json doc =
      api::run_search(load_config(test::kTiny), tiny_request(), api::JournalRequest{path, 42});
  const nlohmann::json& best = doc["layouts"][0];
  EXPECT_EQ(best["pp"], 1);
  // 777 and the screen's second pass: a layout planned again would have 1 and that pass's.
  EXPECT_GE(best["evaluations"].get<int>(), 777);
  EXPECT_EQ(best["iteration_time_ms"], 24.0);
  const std::string after = slurp(path);
  EXPECT_EQ(after.substr(0, kHeader.size() + kPlanned.size() + kSkipped.size()),
            kHeader + kPlanned + kSkipped);
  EXPECT_EQ(std::count(after.begin(), after.end(), '\n'), 8);  // the header and 7 layouts
}

TEST(ApiSearchJournalRefusal, AHeaderFieldOfTheWrongTypeNamesItsKey) {
  expect_refused(forged(kHeader, R"("layouts":7)", R"("layouts":"7")") + kPlanned, 1, "layouts",
                 "expected the number of layouts, 0 or more, got the string \"7\"");
  expect_refused(forged(kHeader, R"("inputs":"000000000000002a")", R"("inputs":42)"), 1, "inputs",
                 "got the integer 42");
  expect_refused(forged(kHeader, R"("inputs":"000000000000002a")", R"("inputs":"2a")"), 1, "inputs",
                 "16 hexadecimal digits");
  expect_refused(forged(kHeader, R"("version":")", R"("version":[")") + kPlanned, 1, "",
                 "not a bmpipe search journal");
  expect_refused(forged(kHeader, R"("version":")" + std::string(BMPIPE_TEST_VERSION) + "\"",
                        R"("version":1.5)"),
                 1, "version", "expected a bmpipe version, got the number 1.5");
  expect_refused(forged(kHeader, R"("format":"bmpipe search journal 1")", R"("format":1)"), 1,
                 "format", "not a bmpipe search journal");
  expect_refused(forged(kHeader, R"("layouts":7)", R"("layouts":7,"extra":true)"), 1, "extra",
                 "not a field a run writes");
  expect_refused(forged(kHeader, R"("layouts":7)", R"("layouts":-7)"), 1, "layouts",
                 "got the integer -7");
  expect_refused(forged(kHeader, R"("layouts":7)", R"("layouts":8)"), 1, "layouts",
                 "these inputs give 7 layouts");
}

TEST(ApiSearchJournalRefusal, NegativeAndNonFiniteTimesAreRefused) {
  expect_refused(kHeader + forged(kPlanned, "24000000", "-24000000"), 2, "result.iteration_time_ns",
                 "expected a time in ns, 0 or more");
  expect_refused(
      kHeader + kSkipped +
          forged(kPlanned, R"("iteration_time_ms":24.0)", R"("iteration_time_ms":-24.0)"),
      3, "result.iteration_time_ms", "got the number -24.0");
  // NaN: JSON has no NaN, a run writes none. As a literal, a string or a null.
  expect_refused(kHeader + forged(kPlanned, R"("mfu":0.0)", R"("mfu":NaN)"), 2, "result.mfu",
                 "not JSON");
  expect_refused(kHeader + forged(kPlanned, R"("mfu":0.0)", R"("mfu":"NaN")"), 2, "result.mfu",
                 "got the string \"NaN\"");
  expect_refused(kHeader + forged(kPlanned, R"("bubble_ratio":0.0)", R"("bubble_ratio":null)"), 2,
                 "result.bubble_ratio", "got null");
  expect_refused(kHeader + forged(kPlanned, R"("tokens_per_s":0.0)", R"("tokens_per_s":1e999)"), 2,
                 "result.tokens_per_s", "not JSON");
  expect_refused(kHeader + forged(kPlanned, R"("tokens_per_s":0.0)", R"("tokens_per_s":-1.0)"), 2,
                 "result.tokens_per_s", "0 or more");
  expect_refused(kHeader + forged(kPlanned, R"("bubble_ratio":0.0)", R"("bubble_ratio":1.5)"), 2,
                 "result.bubble_ratio", "a ratio from 0 to 1");
  // The ms beside the ns must be the ns.
  expect_refused(
      kHeader + forged(kPlanned, R"("iteration_time_ms":24.0)", R"("iteration_time_ms":2.4)"), 2,
      "result.iteration_time_ms", "is not iteration_time_ns in ms");
  expect_refused(kHeader + forged(kSkipped, "24750000", "-1"), 2, "result.bound_ns",
                 "greater than 0");
  // A time 2^63 ns and beyond is no Time.
  expect_refused(kHeader + forged(kPlanned, "24000000", "9223372036854775808"), 2,
                 "result.iteration_time_ns", "expected a time in ns");
}

TEST(ApiSearchJournalRefusal, LayoutFieldsMustBeTheLayoutTheIndexNames) {
  // Layout 0 is tp 1, pp 1, dp 4: a dp 2 is not it.
  expect_refused(kHeader + forged(kPlanned, R"("dp":4)", R"("dp":2)"), 2, "result.dp",
                 "but layout 0 of this search is tp 1 pp 1 dp 4 vpp 1 mbs 1 1f1b (dp 4)");
  // The line of layout 0 under index 1 (tp 1, pp 2, dp 2, 1f1b).
  expect_refused(kHeader + forged(kPlanned, R"("layout":0)", R"("layout":1)"), 2, "result.pp",
                 "but layout 1 of this search is tp 1 pp 2 dp 2");
  expect_refused(kHeader + forged(kSkipped, R"("schedule":"interleaved")", R"("schedule":"1f1b")"),
                 2, "result.schedule", "(schedule \"interleaved\")");
  expect_refused(kHeader + forged(kPlanned, R"("ep":1)", R"("ep":2)"), 2, "result.ep",
                 "is 2, but layout 0");
  // An index outside the search, negative, or not an integer.
  expect_refused(kHeader + forged(kPlanned, R"("layout":0)", R"("layout":7)"), 2, "layout",
                 "expected a layout index from 0 to 6, got the integer 7");
  expect_refused(kHeader + forged(kPlanned, R"("layout":0)", R"("layout":-1)"), 2, "layout",
                 "got the integer -1");
  expect_refused(kHeader + forged(kPlanned, R"("layout":0)", R"("layout":"0")"), 2, "layout",
                 "got the string \"0\"");
  // A layout twice: a run writes each once.
  expect_refused(kHeader + kPlanned + kSkipped + kPlanned, 4, "layout", "already on line 2");
  // A type a run never writes for a size.
  expect_refused(kHeader + forged(kPlanned, R"("tp":1)", R"("tp":1.0)"), 2, "result.tp",
                 "got the number 1.0");
}

TEST(ApiSearchJournalRefusal, UnknownNamesAndImpossiblePlansAreRefused) {
  expect_refused(kHeader + forged(kPlanned, R"(["none","none","none","none")",
                                  R"(["none","none","none","most")"),
                 2, "result.layer_recompute[3]",
                 "unknown recompute mode \"most\" (none, selective, full, offload, "
                 "selective_offload)");
  expect_refused(kHeader + forged(kPlanned, R"(["none",)", R"([2,)"), 2,
                 "result.layer_recompute[0]", "unknown recompute mode 2");
  expect_refused(kHeader + forged(kPlanned, R"("schedule":"1f1b")", R"("schedule":"2f2b")"), 2,
                 "result.schedule", "unknown schedule \"2f2b\"");
  expect_refused(kHeader + forged(kSkipped, R"("filter":"bound")", R"("filter":"trusted")"), 2,
                 "result.filter", "unknown filter \"trusted\"");
  // A plan whose modes do not cover its layers, or whose stages are not pp x vpp.
  expect_refused(kHeader + forged(kPlanned, R"("partition":[8])", R"("partition":[9])"), 2,
                 "result.layer_recompute", "expected 9 recompute modes");
  expect_refused(kHeader + forged(kPlanned, R"("partition":[8])", R"("partition":[4,4])"), 2,
                 "result.partition", "expected 1 layer counts (pp x vpp stages), got 2 entries");
  // A layout said to fit above its capacity; one of another capacity than this search's.
  expect_refused(kHeader + forged(kPlanned, R"("max_peak_memory_bytes":16777216)",
                                  R"("max_peak_memory_bytes":2147483648)"),
                 2, "result.fits", "exceeds capacity_bytes 1073741824");
  expect_refused(kHeader + forged(kPlanned, R"("capacity_bytes":1073741824)",
                                  R"("capacity_bytes":4294967296)"),
                 2, "result.capacity_bytes", "every layout of this search has 1073741824");
  // Micro-batches other than the global batch's (tiny.yaml's 8 samples) for the layout.
  expect_refused(kHeader + forged(kPlanned, R"("microbatches":2)", R"("microbatches":3)"), 2,
                 "result.microbatches",
                 "is 3, but this search's global batch of 8 makes 2 of micro-batch size 1 x dp 4");
  expect_refused(kHeader + forged(kSkipped, R"("microbatches":4)", R"("microbatches":0)"), 2,
                 "result.microbatches", "makes 4 of micro-batch size 1 x dp 2");
  // A skipped layout with a time, a planned one with no time.
  expect_refused(
      kHeader + forged(kSkipped, R"("iteration_time_ns":0)", R"("iteration_time_ns":1000)"), 2,
      "result.iteration_time_ns", "was never simulated");
  expect_refused(kHeader + forged(kSkipped, R"("filter":"bound",)", ""), 2, "result.rejected",
                 "names its filter");
  // A field no run writes.
  expect_refused(kHeader + forged(kPlanned, R"("tp":1)", R"("tp":1,"rank":1)"), 2, "result.rank",
                 "not a field a run writes");
  expect_refused(kHeader + forged(kPlanned, R"({"layout":0,)", R"({"layout":0,"note":"x",)"), 2,
                 "note", "not a field a run writes");
  // A key that would print a terminal escape is named quoted, escaped.
  expect_refused(kHeader + forged(kPlanned, R"("tp":1)", "\"tp\":1,\"\\u001b[2J\":1"), 2,
                 "result.\"\\u001b[2J\"", "not a field a run writes");
}

TEST(ApiSearchJournalRefusal, OnlyALastLineWithoutItsNewlineIsTorn) {
  // A bad line that ends in its newline is no torn write: refused, even last.
  expect_refused(kHeader + kPlanned + "{\"layout\":2,\n", 3, "layout", "not JSON");
  expect_refused(kHeader + "[1,2]\n" + kPlanned, 2, "", "expected an object {layout, result}");
  // Without its newline it is dropped and written again.
  ScratchDir dir;
  const std::string path =
      test::write_file(dir.file("j.jsonl"), kHeader + kPlanned + kSkipped.substr(0, 40));
  std::vector<std::string> notes;
  api::run_search(load_config(test::kTiny), tiny_request(), api::JournalRequest{path, 42},
                  [&](const std::string& n) { notes.push_back(n); });
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find(": line 3 was torn"), std::string::npos) << notes[0];
}

TEST(ApiSearchJournalRefusal, DevicesPipesAndOversizedFilesFailBeforeReadingThem) {
  for (const char* device : {"/dev/full", "/dev/zero", "/dev/null"}) {
    try {
      api::run_search(load_config(test::kTiny), tiny_request(), api::JournalRequest{device, 42});
      ADD_FAILURE() << device;
    } catch (const api::JournalError& e) {
      EXPECT_EQ(e.line(), 0u);
      EXPECT_EQ(std::string(e.what()),
                std::string("--journal: ") + device +
                    ": is not a regular file (a device); a search journal is a file bmpipe "
                    "writes");
    }
  }
  ScratchDir dir;
  const std::string fifo = dir.file("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_THROW(
      api::run_search(load_config(test::kTiny), tiny_request(), api::JournalRequest{fifo, 42}),
      api::JournalError);
  // A regular file of a gigabyte (sparse: nothing is written) is more than a search of 7
  // layouts of 8 layers writes: refused by the bounded reader, having read a few pages.
  const std::string big = test::write_file(dir.file("big.jsonl"), kHeader);
  std::filesystem::resize_file(big, std::uintmax_t{1} << 30);
  try {
    api::run_search(load_config(test::kTiny), tiny_request(), api::JournalRequest{big, 42});
    ADD_FAILURE() << "a gigabyte journal was read";
  } catch (const api::JournalError& e) {
    EXPECT_EQ(e.line(), 0u);
    EXPECT_NE(std::string(e.what()).find(big + ": is larger than "), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("which no search journal is (of 7 layouts)"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(std::filesystem::file_size(big), std::uintmax_t{1} << 30);
}

// ---- the executable: exit 2 and FILE:LINE: FIELD on stderr -------------------------------

/// `bmpipe search tiny.yaml --journal J`, J being the header a run of it writes followed
/// by `lines`.
test::CliRun search_with(const ScratchDir& dir, const std::string& lines) {
  const std::string path = dir.file("cli.jsonl");
  const std::string args = "search " + test::kTiny + " --quiet --threads 1 --journal " + path;
  std::filesystem::remove(path);
  const test::CliRun first = test::run_cli(args);
  EXPECT_EQ(first.code, 0) << first.err;
  const std::string written = slurp(path);
  test::write_file(path, written.substr(0, written.find('\n') + 1) + lines);
  return test::run_cli(args);
}

TEST(SearchJournalRefusal, TheExecutableRefusesWithExit2AndFileLineField) {
  ScratchDir dir;
  const std::string path = dir.file("cli.jsonl");
  struct Case {
    std::string lines;
    std::string where;  // after "PATH:"
  };
  const Case cases[] = {
      {forged(kPlanned, "24000000", "-24000000"),
       "2: result.iteration_time_ns: expected a time in ns, 0 or more, got the integer -24000000"},
      {forged(kPlanned, R"("mfu":0.0)", R"("mfu":NaN)"), "2: result.mfu: not JSON"},
      {kSkipped + forged(kPlanned, R"("dp":4)", R"("dp":1)"), "3: result.dp: is 1, but layout 0"},
      {forged(kPlanned, R"("none"])", R"("lots"])"),
       "2: result.layer_recompute[7]: unknown recompute mode \"lots\""},
  };
  for (const Case& c : cases) {
    const test::CliRun r = search_with(dir, c.lines);
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_NE(r.err.find("bmpipe search: --journal: " + path + ":" + c.where), std::string::npos)
        << r.err;
    EXPECT_EQ(r.out, "");  // nothing ranked
  }
  // A header field of the wrong type: exit 2 (it was an internal error, exit 70).
  test::write_file(path, forged(kHeader, R"("layouts":7)", R"("layouts":{"n":7})"));
  const test::CliRun header = test::run_cli("search " + test::kTiny + " --quiet --journal " + path);
  EXPECT_EQ(header.code, 2) << header.err;
  EXPECT_NE(header.err.find(path + ":1: layouts: expected the number of layouts, 0 or more, got "
                                   "an object"),
            std::string::npos)
      << header.err;
  for (const char* device : {"/dev/full", "/dev/zero"}) {
    const test::CliRun r = test::run_cli("search " + test::kTiny + " --quiet --journal " + device);
    EXPECT_EQ(r.code, 2) << device;
    EXPECT_NE(r.err.find(std::string("--journal: ") + device + ": is not a regular file"),
              std::string::npos)
        << r.err;
  }
}

// A journal from before the framework joined a journal's inputs (15a2f66): `search --format F
// --journal` hashed its inputs without F then, as a search for no framework still does, so
// the header a search without a framework writes today is such a journal's. Under --format
// or --expressible megatron it is refused, exit 2, saying why and how to proceed, and left as
// it was: neither resumed (it may rank layouts megatron refuses) nor silently restarted.
TEST(SearchJournalRefusal, AJournalFromBeforeTheFrameworkInputSaysHowToProceed) {
  ScratchDir dir;
  const std::string path = dir.file("before_framework.jsonl");
  const std::string search = "search " + test::kTiny + " --quiet --threads 1 --journal " + path;
  ASSERT_EQ(test::run_cli(search).code, 0);
  const std::string written = slurp(path);
  for (const char* framework : {" --format megatron", " --expressible megatron"}) {
    SCOPED_TRACE(framework);
    const test::CliRun r = test::run_cli(search + framework);
    EXPECT_EQ(r.code, 2) << r.all();
    EXPECT_NE(r.err.find("bmpipe search: --journal: " + path +
                         ":1: inputs: this journal's inputs are this search's without the "
                         "framework \"megatron\": it predates the framework (--format or "
                         "--expressible, Python's expressible=) being one of a journal's inputs"),
              std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("To resume it as it was written, run the search without the framework; "
                         "to search for megatron, remove it or name another file"),
              std::string::npos)
        << r.err;
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(slurp(path), written);
  }
  // As written, without a framework, it resumes.
  const test::CliRun resumed = test::run_cli(search);
  EXPECT_EQ(resumed.code, 0) << resumed.all();
  // A journal of another framework is one of other inputs, as before.
  const std::string megatron = dir.file("megatron.jsonl");
  const std::string for_megatron =
      "search " + test::kTiny + " --quiet --threads 1 --format megatron --journal " + megatron;
  ASSERT_EQ(test::run_cli(for_megatron).code, 0);
  EXPECT_EQ(test::run_cli(for_megatron).code, 0);  // its own framework resumes it
  const test::CliRun other = test::run_cli(
      "search " + test::kTiny + " --quiet --threads 1 --format mindformers --journal " + megatron);
  EXPECT_EQ(other.code, 2);
  EXPECT_NE(other.err.find(megatron + ":1: written for other inputs"), std::string::npos)
      << other.err;
}

// The library refuses it alike (Python's search(expressible=..., journal=...) comes here):
// JournalError at line 1, field "inputs", for the hash the inputs had without the framework.
TEST(ApiSearchJournalRefusal, AJournalFromBeforeTheFrameworkInputIsRefusedAtItsInputs) {
  ScratchDir dir;
  const std::string path = test::write_file(dir.file("before.jsonl"), kHeader + kPlanned);
  api::SearchRequest request = tiny_request();
  request.framework = "megatron";
  try {
    api::run_search(load_config(test::kTiny), request,
                    api::JournalRequest{path, 43, api::InputsBeforeFramework{42, "megatron"}});
    ADD_FAILURE() << "resumed a journal from before the framework input";
  } catch (const api::JournalError& e) {
    EXPECT_EQ(e.line(), 1u);
    EXPECT_EQ(e.field(), "inputs");
    EXPECT_NE(std::string(e.what()).find("predates the framework"), std::string::npos) << e.what();
  }
  EXPECT_EQ(slurp(path), kHeader + kPlanned);
  // inputs_before_framework is the request's hash less the framework, and none without one.
  EXPECT_FALSE(api::inputs_before_framework("x", tiny_request(), std::nullopt));
  const std::optional<api::InputsBeforeFramework> before =
      api::inputs_before_framework("x", request, std::nullopt);
  ASSERT_TRUE(before);
  EXPECT_EQ(before->framework, "megatron");
  EXPECT_EQ(before->hash, api::search_inputs_hash("x", tiny_request(), std::nullopt));
  EXPECT_NE(before->hash, api::search_inputs_hash("x", request, std::nullopt));
}

}  // namespace
}  // namespace bmpipe::search_journal_refusal_test
