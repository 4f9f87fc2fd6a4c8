#pragma once
// Giving an export back to its framework's own file, as a user does: the flags appended to
// a Megatron-LM launch script (argparse keeps a flag's last value) after the flags the
// export says to remove are taken out, or the YAML fragment merged into a MindFormers run
// config. Shared by the export round-trip and README tests (tests/frameworks/).
#include <yaml-cpp/yaml.h>

#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace bmpipe::test {

/// The flags an export says to remove: its "#   --flag" lines.
inline std::vector<std::string> flags_to_remove(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("#   --", 0) == 0) out.push_back(line.substr(4));
  return out;
}

/// The flag lines of an export's text (those starting with "--"), each ending in "\n".
inline std::string export_flag_lines(const std::string& text) {
  std::istringstream in(text);
  std::string line, out;
  while (std::getline(in, line))
    if (line.rfind("--", 0) == 0) out += line + "\n";
  return out;
}

/// `script` without `flag` and its value (a word not starting with "--"), wherever it is.
inline std::string without_flag(const std::string& script, const std::string& flag) {
  return std::regex_replace(script, std::regex(flag + "(=\\S+|[ \\t]+[^-\\s\\\\]\\S*)?(?=\\s|$)"),
                            "");
}

/// The launch script `script` with the export `text` given back to it.
inline std::string script_with_export(std::string script, const std::string& text) {
  for (const std::string& f : flags_to_remove(text)) script = without_flag(script, f);
  return script + "\n" + text;
}

/// Deep merge as a user merges the fragment into their run's YAML: a mapping in both is
/// merged key by key, anything else is replaced.
inline void merge_yaml(YAML::Node into, const YAML::Node& from) {
  for (const auto& kv : from) {
    const std::string key = kv.first.as<std::string>();
    if (into[key] && into[key].IsMap() && kv.second.IsMap())
      merge_yaml(into[key], kv.second);
    else
      into[key] = kv.second;
  }
}

/// The MindFormers run config in `run_path` with the export `text` merged in, as YAML text.
inline std::string yaml_with_export(const std::string& run_path, const std::string& text) {
  YAML::Node run = YAML::LoadFile(run_path);
  merge_yaml(run, YAML::Load(text));
  YAML::Emitter out;
  out << run;
  return out.c_str();
}

}  // namespace bmpipe::test
