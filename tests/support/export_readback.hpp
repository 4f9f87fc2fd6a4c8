#pragma once
// Decoders for the export tests, written here from the frameworks' documented rules (not
// from frameworks/*/export.cpp), that read the printed settings back into layers per stage
// and a mode per layer:
//  - MindFormers (docs/feature_cards/Offset_Recompute.md, LayerSetting in
//    mindformers/models/utils.py): layers of stage (v, j) = num_layers // (pp * vpp) +
//    offset[v][j]; the first recompute[v][j] layers of the stage recompute fully, the first
//    select_recompute[v][j] selectively unless full.
//  - Megatron-LM (docs "Custom Pipeline Model Parallel Layout", arguments.py,
//    transformer_config.py, transformer_block.py, recompute.py): the layout string, or the
//    first/last-rank rule, or the even split; selective = every layer, block N = first N
//    layers of every (virtual) stage, uniform = every layer.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "sim/recompute.hpp"

namespace bmpipe::test {

using Modes = std::vector<Recompute>;

// ---- reading MindFormers YAML back --------------------------------------------------------

/// The text after "key: " on the first line whose trimmed start is "key:".
inline std::string yaml_value(const std::string& yaml, const std::string& key) {
  std::istringstream in(yaml);
  std::string line;
  while (std::getline(in, line)) {
    const auto start = line.find_first_not_of(' ');
    if (start == std::string::npos || line.compare(start, key.size() + 1, key + ":") != 0) continue;
    const auto value = line.find_first_not_of(' ', start + key.size() + 1);
    return value == std::string::npos ? "" : line.substr(value);
  }
  return "<missing " + key + ">";
}

/// "[1, -2]" → {{1, -2}}; "[[1], [2]]" → {{1}, {2}}.
inline std::vector<std::vector<int>> int_rows(const std::string& text) {
  std::vector<std::vector<int>> rows;
  const bool nested = text.size() > 1 && text[1] == '[';
  if (!nested) rows.emplace_back();
  int depth = 0;
  std::string number;
  auto flush = [&] {
    if (!number.empty()) rows.back().push_back(std::stoi(number));
    number.clear();
  };
  for (char c : text) {
    if (c == '[') {
      ++depth;
      if (nested && depth == 2) rows.emplace_back();
    } else if (c == ']') {
      flush();
      --depth;
    } else if (c == ',') {
      flush();
    } else if (c != ' ') {
      number += c;
    }
  }
  return rows;
}

struct Decoded {
  std::vector<int> partition;
  Modes modes;
};

/// What MindFormers builds from the printed keys, by its docs.
inline Decoded decode_mindformers(const std::string& yaml, int num_layers) {
  const int pp = std::stoi(yaml_value(yaml, "pipeline_stage"));
  const std::string interleave = yaml_value(yaml, "pp_interleave_num");
  const int vpp = interleave.front() == '<' ? 1 : std::stoi(interleave);
  if (vpp > 1) {
    EXPECT_EQ(yaml_value(yaml, "pipeline_interleave"), "True");
  }
  const auto offset = int_rows(yaml_value(yaml, "offset"));
  const auto full = int_rows(yaml_value(yaml, "recompute"));
  const auto select = int_rows(yaml_value(yaml, "select_recompute"));
  EXPECT_EQ(offset.size(), static_cast<std::size_t>(vpp));
  for (const auto& row : offset) EXPECT_EQ(row.size(), static_cast<std::size_t>(pp));
  Decoded d;
  const int average = num_layers / (pp * vpp);
  for (int v = 0; v < vpp; ++v)
    for (int j = 0; j < pp; ++j) {
      const int n = average + offset[v][j];
      d.partition.push_back(n);
      for (int k = 0; k < n; ++k)
        d.modes.push_back(k < full[v][j]     ? Recompute::full
                          : k < select[v][j] ? Recompute::selective
                                             : Recompute::none);
    }
  return d;
}

// ---- reading Megatron-LM flags back -------------------------------------------------------

inline std::map<std::string, std::string> flag_map(const std::string& flags) {
  std::map<std::string, std::string> m;
  std::istringstream in(flags);
  std::string line;
  while (std::getline(in, line)) {
    const auto space = line.find(' ');
    EXPECT_EQ(m.count(line.substr(0, space)), 0u) << "flag given twice: " << line;
    m[line.substr(0, space)] = space == std::string::npos ? "" : line.substr(space + 1);
  }
  return m;
}

/// Decoder layers per stage of a layout string, read as the docs describe it; also checks
/// that E opens the first stage and L closes the last, each exactly once.
inline std::vector<int> parse_layout(std::string text) {
  EXPECT_GE(text.size(), 2u);
  EXPECT_EQ(text.front(), '"');
  EXPECT_EQ(text.back(), '"');
  text = text.substr(1, text.size() - 2);
  std::string unrolled;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (i + 1 < text.size() && text[i + 1] == '*') {
      std::size_t end = i + 2;
      while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end]))) ++end;
      unrolled.append(std::stoi(text.substr(i + 2, end - i - 2)), text[i]);
      i = end - 1;
    } else {
      unrolled += text[i];
    }
  }
  std::vector<int> partition(1, 0);
  int embeddings = 0, losses = 0;
  for (std::size_t i = 0; i < unrolled.size(); ++i) {
    const char c = unrolled[i];
    if (c == '|') partition.push_back(0);
    if (c == 't') ++partition.back();
    if (c == 'E') {
      ++embeddings;
      EXPECT_EQ(i, 0u) << "E must open the first stage";
    }
    if (c == 'L') {
      ++losses;
      EXPECT_EQ(i + 1, unrolled.size()) << "L must close the last stage";
    }
  }
  EXPECT_EQ(embeddings, 1);
  EXPECT_EQ(losses, 1);
  return partition;
}

/// What Megatron-LM builds from the printed flags (stages in bmpipe order, v * pp + r).
inline Decoded decode_megatron(const std::string& flags) {
  auto m = flag_map(flags);
  const int pp = std::stoi(m.at("--pipeline-model-parallel-size"));
  const int layers = std::stoi(m.at("--num-layers"));
  Decoded d;
  if (m.count("--pipeline-model-parallel-layout")) {
    // arguments.py: no other vpp flag beside the layout, and no first/last with it.
    EXPECT_EQ(m.count("--num-virtual-stages-per-pipeline-rank"), 0u);
    EXPECT_EQ(m.count("--decoder-first-pipeline-num-layers"), 0u);
    EXPECT_EQ(m.count("--decoder-last-pipeline-num-layers"), 0u);
    d.partition = parse_layout(m.at("--pipeline-model-parallel-layout"));
    EXPECT_EQ(d.partition.size() % pp, 0u);
  } else {
    const int vpp = m.count("--num-virtual-stages-per-pipeline-rank")
                        ? std::stoi(m.at("--num-virtual-stages-per-pipeline-rank"))
                        : 1;
    std::vector<int> per_rank(pp, -1);
    int left = layers, middle = pp;
    if (m.count("--decoder-first-pipeline-num-layers")) {
      per_rank.front() = std::stoi(m.at("--decoder-first-pipeline-num-layers"));
      left -= per_rank.front();
      --middle;
    }
    if (m.count("--decoder-last-pipeline-num-layers")) {
      per_rank.back() = std::stoi(m.at("--decoder-last-pipeline-num-layers"));
      left -= per_rank.back();
      --middle;
    }
    if (middle > 0) {
      EXPECT_EQ(left % middle, 0) << "middle ranks must split the rest evenly";
    }
    for (int& n : per_rank)
      if (n < 0) n = left / middle;
    for (int v = 0; v < vpp; ++v)
      for (int r = 0; r < pp; ++r) {
        EXPECT_EQ(per_rank[r] % vpp, 0) << "a rank's layers must split over its chunks";
        d.partition.push_back(per_rank[r] / vpp);
      }
  }
  const std::string granularity =
      m.count("--recompute-granularity") ? m.at("--recompute-granularity") : "";
  for (int n : d.partition)
    for (int k = 0; k < n; ++k) {
      if (granularity.empty()) {
        d.modes.push_back(Recompute::none);
      } else if (granularity == "selective") {
        EXPECT_EQ(m.count("--recompute-method"), 0u);
        EXPECT_EQ(m.count("--recompute-num-layers"), 0u);
        d.modes.push_back(Recompute::selective);
      } else {
        EXPECT_EQ(granularity, "full");
        const std::string method = m.at("--recompute-method");
        const int count = std::stoi(m.at("--recompute-num-layers"));
        EXPECT_GE(count, 1);
        if (method == "uniform") {
          d.modes.push_back(Recompute::full);
        } else {
          EXPECT_EQ(method, "block");
          d.modes.push_back(k < count ? Recompute::full : Recompute::none);
        }
      }
    }
  return d;
}

/// Every layer recomputes at least as much as the plan asks (full > selective > none).
inline bool dominates(const Modes& got, const Modes& plan) {
  if (got.size() != plan.size()) return false;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (got[i] < plan[i]) return false;
  return true;
}

inline bool mentions(const std::vector<std::string>& notes, const std::string& text) {
  return std::any_of(notes.begin(), notes.end(),
                     [&](const std::string& n) { return n.find(text) != std::string::npos; });
}

}  // namespace bmpipe::test
