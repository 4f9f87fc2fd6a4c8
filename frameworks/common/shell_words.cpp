#include "frameworks/common/shell_words.hpp"

#include <algorithm>
#include <cctype>
#include <string_view>

#include "frameworks/common/import_common.hpp"

namespace bmpipe {

std::vector<ShellWord> split_shell_words(const std::string& text, const std::string& name) {
  std::vector<ShellWord> words;
  ShellWord word;
  bool in_word = false;
  int line = 1;
  auto start = [&] {
    if (!in_word) {
      word = ShellWord{};
      word.line = line;
      in_word = true;
    }
  };
  auto finish = [&] {
    if (in_word) words.push_back(word);
    in_word = false;
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\\') {
      if (i + 1 < text.size() && text[i + 1] == '\n') {  // a continuation: the lines join
        ++i;
        ++line;
        continue;
      }
      if (i + 1 < text.size() && text[i + 1] == '\r' && i + 2 < text.size() &&
          text[i + 2] == '\n') {  // the same, in a file with CRLF line ends
        i += 2;
        ++line;
        continue;
      }
      start();
      if (i + 1 < text.size()) word.text += text[++i];
      continue;
    }
    if (c == '\n' || c == ' ' || c == '\t' || c == '\r') {
      finish();
      if (c == '\n') ++line;
      continue;
    }
    if (c == '#' && !in_word) {
      while (i + 1 < text.size() && text[i + 1] != '\n') ++i;
      continue;
    }
    if (c == '|' || c == ';' || c == '&' || c == '<' || c == '>' || c == '(' || c == ')') {
      // A redirection's descriptor ("2>&1") is no argument.
      const bool descriptor = (c == '<' || c == '>') && in_word && !word.text.empty() &&
                              std::all_of(word.text.begin(), word.text.end(), [](char d) {
                                return std::isdigit(static_cast<unsigned char>(d));
                              });
      if (descriptor) in_word = false;
      finish();
      ShellWord op;
      op.text = std::string(1, c);
      op.line = line;
      op.boundary = true;
      words.push_back(op);
      // ">&2", "<&-": the descriptor a redirection duplicates or closes.
      if ((c == '<' || c == '>') && i + 1 < text.size() && text[i + 1] == '&') {
        ++i;
        while (i + 1 < text.size() &&
               (std::isdigit(static_cast<unsigned char>(text[i + 1])) || text[i + 1] == '-'))
          ++i;
      }
      continue;
    }
    start();
    if (c == '\'') {
      const std::size_t close = text.find('\'', i + 1);
      if (close == std::string::npos)
        throw ImportError(shown_path(name), word.line, 0, "", "a single quote (') is never closed");
      for (std::size_t k = i + 1; k < close; ++k)
        if (text[k] == '\n') ++line;
      word.text.append(text, i + 1, close - i - 1);
      i = close;
      continue;
    }
    if (c == '"') {
      const int opened = line;
      std::size_t k = i + 1;
      for (; k < text.size() && text[k] != '"'; ++k) {
        if (text[k] == '\\' && k + 1 < text.size() &&
            std::string_view("$`\"\\\n").find(text[k + 1]) != std::string_view::npos) {
          if (text[k + 1] == '\n')
            ++line;
          else
            word.text += text[k + 1];
          ++k;
          continue;
        }
        if (text[k] == '$' || text[k] == '`') word.expansion = true;
        if (text[k] == '\n') ++line;
        word.text += text[k];
      }
      if (k >= text.size())
        throw ImportError(shown_path(name), opened, 0, "", "a double quote (\") is never closed");
      i = k;
      continue;
    }
    if (c == '$' || c == '`') word.expansion = true;
    word.text += c;
  }
  finish();
  return words;
}

}  // namespace bmpipe
