#pragma once
// bmpipe search --journal FILE: every finished layout appended as one JSON line, flushed
// and fsync'd, so a killed search resumes where it stopped. The first line names the inputs
// (a hash of the config text, the options that change a layout's result, and the bmpipe
// version); a journal of other inputs is refused (exit 2), a torn last line (a kill in
// mid-write) is dropped and cut off.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "planner/layout_search.hpp"

namespace bmpipe::cli {

/// 64-bit FNV-1a of `bytes`, continuing from `h` (the offset basis by default). Written
/// here from the published algorithm (Fowler, Noll, Vo; offset basis 14695981039346656037,
/// prime 1099511628211) because std::hash is not stable across builds.
std::uint64_t fnv1a64(std::string_view bytes, std::uint64_t h = 14695981039346656037ull);

class SearchJournal {
 public:
  /// Opens (or creates) `path` for `layouts` layouts of inputs hashed to `hash`. Reads
  /// back the layouts a run before finished into known(). Throws UsageError("--journal")
  /// for a journal of other inputs or one that cannot be read or written; writes a note
  /// to stderr when it drops a torn last line.
  SearchJournal(std::string path, std::uint64_t hash, std::size_t layouts);
  ~SearchJournal();
  SearchJournal(const SearchJournal&) = delete;
  SearchJournal& operator=(const SearchJournal&) = delete;

  const std::vector<std::optional<LayoutResult>>& known() const { return known_; }
  /// Appends layout `index`'s result as one line, flushed and fsync'd. Throws OutputError.
  void append(std::size_t index, const LayoutResult& r);

 private:
  std::string path_;
  int fd_ = -1;
  std::vector<std::optional<LayoutResult>> known_;
};

}  // namespace bmpipe::cli
