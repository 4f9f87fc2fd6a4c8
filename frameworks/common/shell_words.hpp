#pragma once
/// \file
/// A launch script's words, as a shell splits them: what the Megatron-LM importer reads its
/// flags from, and the torchtitan importer its config-registry command line.

#include <string>
#include <vector>

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

}  // namespace bmpipe
