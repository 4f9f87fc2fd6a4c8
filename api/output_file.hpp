#pragma once
/// \file
/// The files a command writes (--out, --trace, --svg, --csv, ...), written atomically, so
/// that a failing or killed run never leaves half a file where the old one was. A file
/// that cannot be written is an OutputError (api/errors.hpp), not bad input.

#include <fstream>
#include <iostream>
#include <string>

#include "api/errors.hpp"

namespace bmpipe::api {

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

}  // namespace bmpipe::api
