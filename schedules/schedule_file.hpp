#pragma once
/// \file
/// Schedule files in torch.distributed.pipelining's compute-only CSV format, so an op
/// order made in (or for) another framework can be replayed here, and ours exported.
///
/// One row per rank, comma-separated actions `<stage><kind><microbatch>`, e.g.
/// `0F0,0F1,4F0,4B0`; kind is F, B (full backward), I (input-grad) or W (weight-grad).
/// An overlapped pair is `(0F7;7B3)OVERLAP_F_B` (forward half first, then the full
/// backward half). Empty cells are skipped. The number of ranks is the number of rows;
/// the stages a rank lists are the stages it holds, so loop and V placements need no
/// extra description.

#include <iosfwd>
#include <stdexcept>
#include <string>

#include "schedules/op.hpp"

namespace bmpipe {

/// A malformed schedule file. row and column are 1-based (column counts characters);
/// what() reads "FILE:ROW:COL: message", the form editors jump to.
class ScheduleFileError : public std::runtime_error {
 public:
  ScheduleFileError(std::string file, int row, int column, std::string message);
  const std::string& file() const { return file_; }
  int row() const { return row_; }
  int column() const { return column_; }
  const std::string& message() const { return message_; }

 private:
  std::string file_;
  int row_;
  int column_;
  std::string message_;
};

/// Parses CSV text into a validated Schedule named `name`; `file` names the source in
/// errors. Rejects unknown tokens, ops run twice or never, a W before its I, and a stage
/// listed by two ranks.
Schedule parse_schedule_csv(const std::string& text, const std::string& file,
                            const std::string& name);

/// Reads and parses a file (the schedule is named after the path).
Schedule load_schedule_file(const std::string& path);

/// The schedule in the same format: one line per rank, ending in a newline.
std::string schedule_to_csv(const Schedule& schedule);

/// Writes schedule_to_csv to `path`; throws std::runtime_error if it cannot.
void save_schedule_file(const Schedule& schedule, const std::string& path);

}  // namespace bmpipe
