#pragma once
// What every command shares on the way out: output files that fail are their own error
// (not bad input), JSON that never throws on odd bytes, and the trace labels of a plan.

#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "api/errors.hpp"
#include "experiment/experiment.hpp"
#include "experiment/write_config.hpp"
#include "traces/chrome_trace.hpp"

namespace bmpipe::cli {

/// An output file (--trace, --svg, --out, ...) that cannot be opened or written: the
/// library's, which the search journal (api/search_journal.hpp) throws too.
using OutputError = api::OutputError;

/// An output a command writes: a file, or standard output when its path is "-".
///
/// A file is written atomically: into a temporary file of its own in the same folder
/// (".NAME.bmpipe-XXXXXX", made by mkstemp so that parallel runs never collide), renamed
/// over `path` by close() only when everything was written. Until then `path` keeps its
/// old bytes; if the command fails (or the object is destroyed unclosed) the temporary
/// file is removed. A process killed outright leaves `path` intact and at most one
/// temporary file. Targets that exist and are not regular files (/dev/null, a fifo) are
/// written in place.
class OutputFile {
 public:
  /// Creates the temporary file (or takes stdout for "-") or throws OutputError naming
  /// `option`: a missing folder, a directory, a file that may not be written.
  OutputFile(std::string path, std::string option);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  std::ostream& stream() { return to_stdout_ ? std::cout : file_; }
  bool to_stdout() const { return to_stdout_; }
  /// Flushes, renames the temporary file over `path`, and throws OutputError if anything
  /// written failed (the temporary file is then removed and `path` left as it was).
  void close();

 private:
  std::string path_, option_;
  std::string temp_;  ///< the temporary file; empty once renamed (or when in place)
  bool to_stdout_ = false;
  std::ofstream file_;
};

/// Writes `text` to `path` through an OutputFile (atomically).
void write_output(const std::string& path, const std::string& option, const std::string& text);

/// `j` as indented text; bytes that are not UTF-8 (a path, say) become U+FFFD instead of
/// throwing.
std::string json_text(const nlohmann::json& j);

/// Layer ranges and recompute modes of each stage of `plan`, for the trace.
TraceLabels trace_labels(const Experiment& e, const Plan& plan);

}  // namespace bmpipe::cli
