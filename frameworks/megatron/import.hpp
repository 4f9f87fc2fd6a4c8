#pragma once
/// \file
/// `bmpipe import megatron`: a Megatron-LM launch script's arguments as a bmpipe job. The
/// flags are those of megatron/training/arguments.py (exact names, as its parser takes no
/// abbreviations); the model, the parallel layout, the batch, the partition and the
/// recompute are read with Megatron-LM's own defaults and checks, and every flag bmpipe
/// does not model is listed in ImportedJob::ignored.

#include <string>
#include <vector>

#include "frameworks/common/import_common.hpp"

namespace bmpipe {

/// One shell word of an arguments file, with the line it starts on.
struct ShellWord {
  std::string text;
  int line = 1;
  bool expansion = false;  ///< held an unquoted or double-quoted $ or `: a shell expansion
  bool boundary = false;   ///< a shell operator (| ; & < > ( )): ends the flag before it
};

/// Splits `text` as a shell would split the arguments of a command: blanks between words,
/// '\' before a newline joins lines, '#' at the start of a word comments to the end of the
/// line, single and double quotes, '\' escapes. Expansions are not performed. Throws
/// ImportError (`name`, line) for an unterminated quote.
std::vector<ShellWord> split_shell_words(const std::string& text, const std::string& name);

/// Reads the arguments in `text` (the contents of `name`). Throws ImportError naming the
/// file, the line and the flag for a value Megatron-LM would refuse or bmpipe cannot model.
ImportedJob read_megatron_args(const std::string& text, const std::string& name);

}  // namespace bmpipe
