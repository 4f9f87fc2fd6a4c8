#pragma once
// What every command shares on the way out: output files that fail are their own error
// (not bad input), JSON that never throws on odd bytes, and the trace labels of a plan.

#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>

#include "experiment/experiment.hpp"
#include "experiment/write_config.hpp"
#include "traces/chrome_trace.hpp"

namespace bmpipe::cli {

/// An output file (--trace, --svg, --out, ...) that cannot be opened or written.
class OutputError : public std::runtime_error {
 public:
  OutputError(const std::string& path, const std::string& option, const std::string& what)
      : std::runtime_error(path + ": " + option + ": " + what) {}
};

/// An output a command writes: a file, or standard output when its path is "-".
class OutputFile {
 public:
  /// Opens `path` (or takes stdout for "-") or throws OutputError naming `option`.
  OutputFile(std::string path, std::string option);
  std::ostream& stream() { return to_stdout_ ? std::cout : file_; }
  bool to_stdout() const { return to_stdout_; }
  /// Flushes and throws OutputError if anything written failed.
  void close();

 private:
  std::string path_, option_;
  bool to_stdout_ = false;
  std::ofstream file_;
};

/// Opens `path` for writing (binary, truncated) or throws OutputError naming `option`.
void open_output(std::ofstream& file, const std::string& path, const std::string& option);

/// Flushes `file` and throws OutputError if anything written to it failed.
void close_output(std::ofstream& file, const std::string& path, const std::string& option);

/// Writes to `out_path` (option --out) the config read from `config_path` with `edits`
/// applied under `header` (config_with_edits). Throws OutputError and ConfigError.
void write_edited_config(const std::string& config_path, const std::string& out_path,
                         const ConfigEdits& edits, const std::string& header,
                         std::optional<double> device_memory_GiB = std::nullopt);

/// `j` as indented text; bytes that are not UTF-8 (a path, say) become U+FFFD instead of
/// throwing.
std::string json_text(const nlohmann::json& j);

/// Layer ranges and recompute modes of each stage of `plan`, for the trace.
TraceLabels trace_labels(const Experiment& e, const Plan& plan);

}  // namespace bmpipe::cli
