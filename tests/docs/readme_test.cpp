// The README as a new user meets it (issue 21): it fits on a screen, its links to docs/
// resolve, and every command it shows in a ```sh block that starts with `bmpipe ` or
// `build/cli/bmpipe ` runs and exits 0 (issue 21's rough edge "A command shown in the README
// fails"). Commands run from the source root, as the README assumes; every file they write
// (--out, --trace, --svg, --memory-svg, --csv, --export-schedule, `> FILE`) goes to a scratch
// folder instead, and a later command naming such a file reads it from there. A command
// meant to fail or not to be run here carries the comment `# not run: why`. The output the
// README shows under a command (a plain ``` block right after its sh block) must be lines
// that command printed, `…` marking what was trimmed.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "support/support.hpp"

namespace bmpipe {
namespace {

std::string source(const std::string& path) {
  return std::string(BMPIPE_SOURCE_DIR) + "/" + path;
}

/// The shell words of `line`, quotes kept as written (the shell gets them back as is).
std::vector<std::string> words(const std::string& line) {
  std::vector<std::string> out;
  std::string word;
  char quote = 0;
  for (char c : line) {
    if (quote) {
      word += c;
      if (c == quote) quote = 0;
    } else if (c == '\'' || c == '"') {
      quote = c;
      word += c;
    } else if (c == ' ' || c == '\t') {
      if (!word.empty()) out.push_back(word);
      word.clear();
    } else {
      word += c;
    }
  }
  if (!word.empty()) out.push_back(word);
  return out;
}

struct Command {
  int line = 0;          ///< README line where it starts
  std::string text;      ///< continuation lines joined, comment removed
  std::string comment;   ///< the trailing `# ...`, if any
  int block = 0;         ///< which ```sh block of the file, from 1
};

/// Every command of every ```sh block of `markdown`, continuations joined.
std::vector<Command> sh_commands(const std::string& markdown) {
  std::vector<Command> out;
  std::istringstream in(markdown);
  std::string line;
  bool inside = false;
  int number = 0, block = 0;
  Command pending;
  while (std::getline(in, line)) {
    ++number;
    if (!inside) {
      inside = line == "```sh";
      block += inside;
      continue;
    }
    if (line.rfind("```", 0) == 0) {
      inside = false;
      continue;
    }
    if (pending.text.empty()) pending.line = number;
    pending.block = block;
    // A comment starts at a '#' after a space, outside quotes.
    std::string code = line, comment;
    char quote = 0;
    for (std::size_t i = 0; i < line.size(); ++i) {
      const char c = line[i];
      if (quote) {
        if (c == quote) quote = 0;
      } else if (c == '\'' || c == '"') {
        quote = c;
      } else if (c == '#' && (i == 0 || line[i - 1] == ' ')) {
        code = line.substr(0, i);
        comment = line.substr(i);
        break;
      }
    }
    while (!code.empty() && code.back() == ' ') code.pop_back();
    if (!comment.empty()) pending.comment += comment;
    if (!code.empty() && code.back() == '\\') {
      code.pop_back();
      pending.text += code + " ";
      continue;
    }
    pending.text += code;
    if (!pending.text.empty()) out.push_back(pending);
    pending = Command{};
  }
  return out;
}

/// The output a ```sh block shows: the plain ``` block that opens on the line right after
/// its closing fence, by sh block number (from 1), with the line it starts on.
std::map<int, std::pair<int, std::vector<std::string>>> shown_outputs(const std::string& markdown) {
  std::map<int, std::pair<int, std::vector<std::string>>> out;
  std::vector<std::string> lines;
  std::istringstream in(markdown);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  int block = 0;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (lines[i] != "```sh") continue;
    ++block;
    std::size_t end = i + 1;
    while (end < lines.size() && lines[end].rfind("```", 0) != 0) ++end;
    if (end + 1 < lines.size() && lines[end + 1] == "```") {
      auto& [first, shown] = out[block];
      first = static_cast<int>(end) + 3;
      for (std::size_t j = end + 2; j < lines.size() && lines[j] != "```"; ++j)
        shown.push_back(lines[j]);
    }
    i = end;
  }
  return out;
}

std::string rstrip(std::string s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
}

/// `path` in single quotes for the shell (built with append: GCC 12 reports '"'" + s + "'"'
/// as a -Wrestrict overlap, a false positive).
std::string quoted(const std::string& path) {
  std::string out(1, '\'');
  out.append(path);
  out.push_back('\'');
  return out;
}

bool is_bmpipe(const std::string& text) {
  return text.rfind("bmpipe ", 0) == 0 || text.rfind("build/cli/bmpipe ", 0) == 0;
}

TEST(Readme, CommandsParseAsAShellWouldSplitThem) {
  const auto cmds = sh_commands(
      "```sh\nbmpipe a x.yaml   # note\nbmpipe b \\\n    --out 'p q.yaml'\nbash s.sh\n```\n"
      "text\n```\nbmpipe not-sh\n```\n");
  ASSERT_EQ(cmds.size(), 3u);
  EXPECT_EQ(cmds[0].text, "bmpipe a x.yaml");
  EXPECT_EQ(cmds[0].comment, "# note");
  EXPECT_EQ(cmds[1].text, "bmpipe b      --out 'p q.yaml'");
  EXPECT_EQ(cmds[1].line, 3);
  EXPECT_EQ(words(cmds[1].text), (std::vector<std::string>{"bmpipe", "b", "--out", "'p q.yaml'"}));
  EXPECT_FALSE(is_bmpipe(cmds[2].text));
}

TEST(Readme, EveryBmpipeCommandRunsAndExitsZero) {
  const std::string readme = test::slurp(source("README.md"));
  const test::ScratchDir dir;
  const std::set<std::string> output_options = {"--out", "--trace", "--svg", "--memory-svg",
                                                "--csv", "--export-schedule"};
  std::set<std::string> written;  // files earlier commands wrote, by the name the README uses
  std::map<int, std::string> produced;  // what each sh block's commands printed
  int ran = 0;
  for (const Command& c : sh_commands(readme)) {
    if (!is_bmpipe(c.text) || c.comment.find("not run:") != std::string::npos) continue;
    std::vector<std::string> argv = words(c.text);
    std::string rewritten;
    for (std::size_t i = 1; i < argv.size(); ++i) {
      std::string w = argv[i];
      const bool output = (output_options.count(argv[i - 1]) || argv[i - 1] == ">") && w != "-";
      if (output) written.insert(w);
      if (output || written.count(w)) w = quoted(dir.file(w));
      if (w == ">") continue;  // the test captures stdout itself
      if (argv[i - 1] == ">") {
        rewritten += " >" + w;
        continue;
      }
      rewritten += " " + w;
    }
    const std::string out = dir.file("stdout.txt"), err = dir.file("stderr.txt");
    const bool redirected = c.text.find(" > ") != std::string::npos;
    const std::string cmd = "cd '" + std::string(BMPIPE_SOURCE_DIR) + "' && '" +
                            std::string(BMPIPE_BINARY) + "'" + rewritten +
                            (redirected ? "" : " >'" + out + "'") + " 2>'" + err + "'";
    const int status = std::system(cmd.c_str());
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    EXPECT_EQ(code, 0) << "README.md:" << c.line << ": " << c.text << "\n"
                       << test::slurp(err);
    ++ran;
    // What the user would see, with the scratch folder's paths as the README names them.
    std::string seen = test::slurp(err) + (redirected ? "" : test::slurp(out));
    const std::string prefix = dir.path().string() + "/";
    for (auto at = seen.find(prefix); at != std::string::npos; at = seen.find(prefix, at))
      seen.erase(at, prefix.size());
    produced[c.block] += seen;
  }
  EXPECT_GE(ran, 6);  // the tour: simulate, compare, plan, search, import, export

  // Output the README shows under a command is that command's output, trimmed: every line
  // but the `…` elisions is a line it printed (stdout or stderr).
  int shown_blocks = 0;
  for (const auto& [block, where] : shown_outputs(readme)) {
    const auto& [first, shown] = where;
    std::set<std::string> printed;
    std::istringstream lines(produced[block]);
    for (std::string l; std::getline(lines, l);) printed.insert(rstrip(l));
    ++shown_blocks;
    for (std::size_t i = 0; i < shown.size(); ++i) {
      if (shown[i] == "…") continue;
      EXPECT_TRUE(printed.count(rstrip(shown[i])))
          << "README.md:" << first + static_cast<int>(i) << " shows a line its command does "
          << "not print:\n  " << shown[i];
    }
  }
  EXPECT_GE(shown_blocks, 5);
}

TEST(Readme, FitsOnAScreenAndItsDocsLinksResolve) {
  const std::string readme = test::slurp(source("README.md"));
  const auto lines = std::count(readme.begin(), readme.end(), '\n');
  EXPECT_LE(lines, 250) << "README.md has " << lines << " lines; move detail to docs/";
  const std::regex link(R"(\]\((docs/[^)#]+)(#[^)]*)?\))");
  int links = 0;
  for (auto it = std::sregex_iterator(readme.begin(), readme.end(), link);
       it != std::sregex_iterator(); ++it) {
    ++links;
    EXPECT_TRUE(std::filesystem::exists(source((*it)[1].str()))) << (*it)[1].str();
  }
  EXPECT_GE(links, 8);
}

// Links between docs/ pages resolve too.
TEST(Docs, LinksBetweenPagesResolve) {
  const std::regex link(R"(\]\(([a-z0-9_.-]+\.md)(#[^)]*)?\))");
  int pages = 0;
  for (const auto& entry : std::filesystem::directory_iterator(source("docs"))) {
    if (entry.path().extension() != ".md") continue;
    ++pages;
    const std::string text = test::slurp(entry.path().string());
    for (auto it = std::sregex_iterator(text.begin(), text.end(), link);
         it != std::sregex_iterator(); ++it)
      EXPECT_TRUE(std::filesystem::exists(entry.path().parent_path() / (*it)[1].str()))
          << entry.path().filename().string() << " links " << (*it)[1].str();
  }
  EXPECT_GE(pages, 10);
}

}  // namespace
}  // namespace bmpipe
