#pragma once
/// \file
/// A search's journal (`bmpipe search --journal FILE`, Python's `search(journal=...)`):
/// every finished layout appended as one JSON line, flushed and fsync'd, so a killed search
/// resumes where it stopped. The first line names the inputs (a hash of the config text,
/// the options that change a layout's result, and the bmpipe version); a journal of other
/// inputs is refused (JournalError), a torn last line (a kill in mid-write: the last line,
/// without its newline) is dropped and cut off. Both front ends go through here, so they
/// write one format.
///
/// A journal is data from disk, like a config (issue 42): it is read under a size bound
/// (io/read_file.hpp), every field is type-checked, and every layout line is checked
/// against what the run would have written for that layout (its layout fields, times,
/// recompute modes, the filters a run can report); a line that fails is refused with its
/// FILE:LINE and field, never ranked.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/errors.hpp"
#include "api/search.hpp"
#include "api/search_driver.hpp"
#include "planner/layout_search.hpp"

namespace bmpipe::api {

/// A journal refused: unreadable, too large, not a journal, of other inputs, or a line no
/// run writes. A RequestError of "--journal" (exit 2, Python's ValueError) whose message
/// reads "FILE:LINE: FIELD: what is wrong" (no LINE for the file as a whole, no FIELD when
/// none is to blame); `field` is the JSON path in the line ("inputs",
/// "result.iteration_time_ns", "result.layer_recompute[3]").
class JournalError : public RequestError {
 public:
  JournalError(const std::string& file, std::size_t line, const std::string& field,
               const std::string& message);
  const std::string& file() const { return file_; }
  std::size_t line() const { return line_; }
  const std::string& field() const { return field_; }

 private:
  std::string file_;
  std::size_t line_;
  std::string field_;
};

/// 64-bit FNV-1a of `bytes`, continuing from `h` (the offset basis by default). Written
/// here from the published algorithm (Fowler, Noll, Vo; offset basis 14695981039346656037,
/// prime 1099511628211) because std::hash is not stable across builds.
std::uint64_t fnv1a64(std::string_view bytes, std::uint64_t h = 14695981039346656037ull);

/// A journal header's inputs: the config's bytes, then every option that can change a
/// layout's result as "\nNAME=VALUE", in name order. NAME is the command-line spelling
/// without dashes ("micro-batch-size"), VALUE as the command line gives it ("1,2"; --set's
/// "KEY=VALUE" items each followed by "\n"). The executable and the Python module build the
/// same map for the same search, so either may resume the other's journal.
std::uint64_t journal_inputs_hash(std::string_view config_text,
                                  const std::map<std::string, std::string>& options);

/// The options of `request` that change a layout's result, by the command line's names and
/// spelling, as `bmpipe search` hashes them when each is given as the request holds it
/// (lists as "1,2,4", numbers as "%.17g", defaults included; `screen_margin_pct` is the
/// percentage given, not request.screen_margin), with `sets` (Overrides::set) as --set
/// items. For the Python module, whose keywords carry no command-line text.
std::map<std::string, std::string> journal_options(
    const SearchRequest& request, double screen_margin_pct,
    const std::vector<std::pair<std::string, std::string>>& sets);

/// The bytes of the config file at `path` ("-": standard input) as a search reads and a
/// journal hashes them, under load_config's bound (a config is a few KiB; a wrong path such
/// as /dev/zero fails at 16 MiB). Throws ConfigError(path, 0, "", why).
std::string read_config_bytes(const std::string& path);

/// The inputs hash of a journal of a search of `config_text` under `request`:
/// journal_inputs_hash of journal_options(request, screen_margin_pct,
/// request.overrides.set), `screen_margin_pct` the percentage as given (none: the option's
/// default, SearchRequest{}.screen_margin * 100), as both front ends hash it.
std::uint64_t search_inputs_hash(std::string_view config_text, const SearchRequest& request,
                                 std::optional<double> screen_margin_pct);

/// A search for a framework (request.framework: --format or --expressible F, Python's
/// expressible=F), hashed as bmpipe hashed it before the framework joined a journal's inputs
/// (15a2f66): the same inputs without it. A journal of that hash predates the framework's
/// place in the header and cannot say which framework it was searched for, or whether any
/// was, so SearchJournal refuses it with the way out rather than as one of other inputs.
struct InputsBeforeFramework {
  std::uint64_t hash = 0;
  std::string framework;
};

/// The inputs of `config_text` under `request` without its framework, as search_inputs_hash
/// hashed them before the framework was one of them; none when the request names none.
std::optional<InputsBeforeFramework> inputs_before_framework(
    std::string_view config_text, const SearchRequest& request,
    std::optional<double> screen_margin_pct);

/// A search of a config file, as `bmpipe search CONFIG` makes it: the setup and the inputs
/// hash of its journal (and that hash before the framework joined it).
struct FileSearch {
  SearchSetup setup;
  std::uint64_t inputs_hash = 0;
  std::optional<InputsBeforeFramework> before_framework;
};

/// Reads the config at `path` once (read_config_bytes: the bytes parsed are the bytes
/// hashed, standard input included), parses it with the request's overrides and prepares
/// the search (prepare_search); search_inputs_hash of those bytes. Throws ConfigError and
/// RequestError.
FileSearch prepare_file_search(const std::string& path, const SearchRequest& request,
                               std::optional<double> screen_margin_pct);

class SearchJournal {
 public:
  /// Opens (or creates) `path` for the layouts of `setup`, of inputs hashed to `hash`.
  /// Reads back the layouts a run before finished into known(), each line checked against
  /// what this search writes for the layout its index names. Throws JournalError for a
  /// journal that is not a regular file, cannot be read or written, is larger than a
  /// search of setup's layouts writes, is of other inputs, or has a line no run of them
  /// writes; OutputError when the header cannot be written. When it drops a torn last line
  /// it tells `note` (a line "--journal PATH: line N was torn ...") before returning. A
  /// journal of `before_framework`'s hash is refused as one written before the framework
  /// joined the inputs, saying how to proceed.
  SearchJournal(std::string path, std::uint64_t hash, const SearchSetup& setup,
                const std::function<void(const std::string&)>& note = {},
                const std::optional<InputsBeforeFramework>& before_framework = std::nullopt);
  ~SearchJournal();
  SearchJournal(const SearchJournal&) = delete;
  SearchJournal& operator=(const SearchJournal&) = delete;

  const std::vector<std::optional<LayoutResult>>& known() const { return known_; }
  /// Appends layout `index`'s result as one line, flushed and fsync'd. Throws OutputError.
  void append(std::size_t index, const LayoutResult& r);

 private:
  struct Expected;  // what a run of these layouts writes (search_journal.cpp)
  SearchJournal(std::string path, std::uint64_t hash, const Expected& expected,
                const std::function<void(const std::string&)>& note,
                const std::optional<InputsBeforeFramework>& before_framework);
  std::string path_;
  int fd_ = -1;
  std::vector<std::optional<LayoutResult>> known_;
};

/// A journal in front of another executor (resume): the layouts it holds are the search's
/// known results, taken as they are; every other first-pass result is appended as it
/// settles. The tasks run on `inner`. Both outlive it.
class JournalExecutor : public SearchExecutor {
 public:
  JournalExecutor(SearchExecutor& inner, SearchJournal& journal)
      : inner_(inner), journal_(journal) {}
  void run(const SearchPass& pass, TaskFeed& feed) override { inner_.run(pass, feed); }
  int processes() const override { return inner_.processes(); }
  std::vector<std::optional<LayoutResult>> known() override { return journal_.known(); }
  void settled(std::size_t layout, const LayoutResult& result) override {
    journal_.append(layout, result);
    inner_.settled(layout, result);
  }

 private:
  SearchExecutor& inner_;
  SearchJournal& journal_;
};

/// Where a search keeps its journal: the file and its inputs (journal_inputs_hash).
struct JournalRequest {
  JournalRequest() = default;
  JournalRequest(std::string p, std::uint64_t hash,
                 std::optional<InputsBeforeFramework> before = std::nullopt)
      : path(std::move(p)), inputs(hash), before_framework(std::move(before)) {}
  std::string path;
  std::uint64_t inputs = 0;
  std::optional<InputsBeforeFramework> before_framework;  ///< inputs_before_framework
};

/// run_search (api/search.hpp) with a journal: the layouts `journal` holds are taken as
/// they are, every other one is planned and appended, so an interrupted call resumes and
/// the document is the uninterrupted one's (wall time aside). `note` as SearchJournal's.
/// Throws what SearchJournal throws, and what run_search throws.
nlohmann::json run_search(const Config& config, const SearchRequest& request,
                          const JournalRequest& journal,
                          const std::function<void(const std::string&)>& note = {});

}  // namespace bmpipe::api
