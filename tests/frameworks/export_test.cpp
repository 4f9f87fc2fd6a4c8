// The MindFormers and Megatron-LM exports. Expectations come from the frameworks' documented
// examples and rules, worked by hand, and from decoders written here from those docs (not
// from frameworks/*/export.cpp) that read the printed settings back into layers per stage and a
// mode per layer:
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
#include <map>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "frameworks/megatron/export.hpp"
#include "support/export_layouts.hpp"

namespace bmpipe {
namespace {

using Modes = std::vector<Recompute>;
using test::plan;
using test::StageModes;

// ---- reading MindFormers YAML back --------------------------------------------------------

/// The text after "key: " on the first line whose trimmed start is "key:".
std::string yaml_value(const std::string& yaml, const std::string& key) {
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
std::vector<std::vector<int>> int_rows(const std::string& text) {
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
Decoded decode_mindformers(const std::string& yaml, int num_layers) {
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

std::map<std::string, std::string> flag_map(const std::string& flags) {
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
std::vector<int> parse_layout(std::string text) {
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
Decoded decode_megatron(const std::string& flags) {
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
bool dominates(const Modes& got, const Modes& plan) {
  if (got.size() != plan.size()) return false;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (got[i] < plan[i]) return false;
  return true;
}

bool mentions(const std::vector<std::string>& notes, const std::string& text) {
  return std::any_of(notes.begin(), notes.end(),
                     [&](const std::string& n) { return n.find(text) != std::string::npos; });
}

// ---- MindFormers ---------------------------------------------------------------------------

// The brief's example: offset [1, 1, 0, -2] over 32 layers and pp 4 is [9, 9, 8, 6].
TEST(MindFormersExport, OffsetsOfTheWorkedExample) {
  std::vector<std::string> notes{"stale"};
  const std::string yaml = export_mindformers(plan(4, 1, {9, 9, 8, 6}), &notes);
  EXPECT_EQ(yaml,
            "# bmpipe plan: 32 decoder layers, pipeline_stage 4, layers per stage [9, 9, 8, 6]\n"
            "parallel_config:\n"
            "  pipeline_stage: 4\n"
            "model:\n"
            "  model_config:\n"
            "    offset: [1, 1, 0, -2]\n"
            "recompute_config:\n"
            "  recompute: [0, 0, 0, 0]\n"
            "  select_recompute: [0, 0, 0, 0]\n");
  EXPECT_TRUE(notes.empty());
  // The other direction, through the decoder: the docs' formula gives back the partition.
  EXPECT_EQ(decode_mindformers(yaml, 32).partition, (std::vector<int>{9, 9, 8, 6}));
}

// The feature card's own example: 48 layers, pipeline_stage 5, offset [0,1,1,1,0] gives
// 9,10,10,10,9.
TEST(MindFormersExport, OffsetsOfTheFeatureCardExample) {
  const std::string yaml = export_mindformers(plan(5, 1, {9, 10, 10, 10, 9}), nullptr);
  EXPECT_EQ(yaml_value(yaml, "offset"), "[0, 1, 1, 1, 0]");
}

// The feature card's interleaved example: 48 layers, pp 5, pp_interleave_num 2, offset
// [[0,1,1,1,1],[1,1,1,1,0]] is [[4,5,5,5,5],[5,5,5,5,4]], with recompute
// [[2,1,0,0,0],[1,0,0,0,0]]; the outer index is the interleave.
TEST(MindFormersExport, InterleavedExampleOfTheFeatureCard) {
  std::vector<std::string> notes;
  const ExportLayout l =
      plan(5, 2, {4, 5, 5, 5, 5, 5, 5, 5, 5, 4}, {{2, 0}, {1, 0}, {}, {}, {}, {1, 0}});
  const std::string yaml = export_mindformers(l, &notes);
  EXPECT_EQ(yaml,
            "# bmpipe plan: 48 decoder layers, pipeline_stage 5, pp_interleave_num 2, layers per "
            "stage [[4, 5, 5, 5, 5], [5, 5, 5, 5, 4]]\n"
            "parallel:\n"
            "  pipeline_config:\n"
            "    pipeline_interleave: True\n"
            "parallel_config:\n"
            "  pipeline_stage: 5\n"
            "model:\n"
            "  model_config:\n"
            "    pp_interleave_num: 2\n"
            "    offset: [[0, 1, 1, 1, 1], [1, 1, 1, 1, 0]]\n"
            "recompute_config:\n"
            "  recompute: [[2, 1, 0, 0, 0], [1, 0, 0, 0, 0]]\n"
            "  select_recompute: [[2, 1, 0, 0, 0], [1, 0, 0, 0, 0]]\n");
  EXPECT_TRUE(notes.empty());
  const Decoded d = decode_mindformers(yaml, 48);
  EXPECT_EQ(d.partition, l.partition);
  EXPECT_EQ(d.modes, l.recompute);
}

// The stage with (none 0, selective 9, full 1): recompute 1, select_recompute 10,
// since a layer in both counts recomputes fully.
TEST(MindFormersExport, SelectiveCountsIncludeTheFullLayers) {
  std::vector<std::string> notes;
  const ExportLayout l = plan(2, 1, {10, 10}, {{1, 9}, {0, 0}});
  const std::string yaml = export_mindformers(l, &notes);
  EXPECT_EQ(yaml_value(yaml, "recompute"), "[1, 0]");
  EXPECT_EQ(yaml_value(yaml, "select_recompute"), "[10, 0]");
  EXPECT_EQ(yaml_value(yaml, "offset"), "[0, 0]");
  EXPECT_EQ(decode_mindformers(yaml, 20).modes, l.recompute);
  // The counts are exact; what differs is which operators "selective" means there.
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("attention core"), std::string::npos) << notes[0];
}

TEST(MindFormersExport, NoSelectiveNoteWithoutSelectiveLayers) {
  std::vector<std::string> notes;
  export_mindformers(plan(2, 1, {4, 4}, {{4, 0}, {2, 0}}), &notes);
  EXPECT_TRUE(notes.empty());
}

// MindFormers counts from the first layer of a stage; modes in another order take the
// shortest prefixes that cover the plan, and say so.
TEST(MindFormersExport, ModesOutOfOrderTakeTheCoveringPrefix) {
  ExportLayout l = plan(2, 1, {4, 4});
  using R = Recompute;
  l.recompute = {R::none, R::full, R::none, R::none, R::selective, R::full, R::none, R::none};
  std::vector<std::string> notes;
  const std::string yaml = export_mindformers(l, &notes);
  EXPECT_EQ(yaml_value(yaml, "recompute"), "[2, 2]");
  EXPECT_EQ(yaml_value(yaml, "select_recompute"), "[2, 2]");
  EXPECT_TRUE(mentions(notes, "stages 0 and 1: MindFormers recomputes the first n layers"));
  EXPECT_TRUE(dominates(decode_mindformers(yaml, 8).modes, l.recompute));
}

TEST(MindFormersExport, VPlacementIsNoted) {
  ExportLayout l = plan(2, 2, {2, 2, 2, 2});
  l.stage_rank = {0, 1, 1, 0};
  std::vector<std::string> notes;
  const std::string yaml = export_mindformers(l, &notes);
  EXPECT_EQ(yaml_value(yaml, "offset"), "[[0, 0], [0, 0]]");
  EXPECT_TRUE(mentions(notes, "V placement"));
}

TEST(MindFormersExport, OnePipelineStage) {
  std::vector<std::string> notes;
  const std::string yaml = export_mindformers(plan(1, 1, {8}, {{3, 0}}), &notes);
  EXPECT_EQ(yaml_value(yaml, "pipeline_stage"), "1");
  EXPECT_EQ(yaml_value(yaml, "offset"), "[0]");
  EXPECT_EQ(yaml_value(yaml, "recompute"), "[3]");
  EXPECT_EQ(yaml_value(yaml, "select_recompute"), "[3]");
  EXPECT_TRUE(notes.empty());
}

// 24 layers over 4 stages average 6, so a first stage with only the embedding is offset -6.
TEST(MindFormersExport, StageWithOnlyTheEmbedding) {
  std::vector<std::string> notes;
  const std::string yaml = export_mindformers(plan(4, 1, {0, 8, 8, 8}), &notes);
  EXPECT_EQ(yaml_value(yaml, "offset"), "[-6, 2, 2, 2]");
  EXPECT_EQ(decode_mindformers(yaml, 24).partition, (std::vector<int>{0, 8, 8, 8}));
  EXPECT_TRUE(mentions(notes, "stage 0 holds no decoder layer"));
}

// ---- Megatron-LM ---------------------------------------------------------------------------

// The brief's example: Et*9|t*9|t*8|t*6L is [9, 9, 8, 6]; neither the first nor the last
// rank alone, nor both, leaves an evenly divisible middle (23/3, 26/3, 17/2).
TEST(MegatronExport, LayoutOfTheWorkedExample) {
  const ExportLayout l = plan(4, 1, {9, 9, 8, 6});
  const MegatronExport m = export_megatron(l);
  EXPECT_EQ(m.flags,
            "--pipeline-model-parallel-size 4\n"
            "--num-layers 32\n"
            "--pipeline-model-parallel-layout \"Et*9|t*9|t*8|t*6L\"\n");
  EXPECT_TRUE(m.exact);
  EXPECT_EQ(m.note, "");
  EXPECT_EQ(m.expressed.partition, l.partition);
  EXPECT_EQ(m.expressed.stage_rank, l.stage_rank);
  EXPECT_EQ(parse_layout("\"Et*9|t*9|t*8|t*6L\""), (std::vector<int>{9, 9, 8, 6}));
}

TEST(MegatronExport, UniformPlanPrintsNoPartitionFlags) {
  EXPECT_EQ(export_megatron(plan(4, 1, {8, 8, 8, 8})).flags,
            "--pipeline-model-parallel-size 4\n--num-layers 32\n");
  EXPECT_EQ(export_megatron(plan(4, 2, {4, 4, 4, 4, 4, 4, 4, 4})).flags,
            "--pipeline-model-parallel-size 4\n--num-layers 32\n"
            "--num-virtual-stages-per-pipeline-rank 2\n");
  // Every layer selective: one flag, no method, no count.
  const MegatronExport sel = export_megatron(plan(2, 1, {4, 4}, {{0, 4}, {0, 4}}));
  EXPECT_EQ(
      sel.flags,
      "--pipeline-model-parallel-size 2\n--num-layers 8\n--recompute-granularity selective\n");
  EXPECT_TRUE(sel.exact);
  // Every layer full: uniform groups of one layer.
  const MegatronExport full = export_megatron(plan(2, 1, {4, 4}, {{4, 0}, {4, 0}}));
  EXPECT_EQ(full.flags,
            "--pipeline-model-parallel-size 2\n--num-layers 8\n--recompute-granularity full\n"
            "--recompute-method uniform\n--recompute-num-layers 1\n");
  EXPECT_TRUE(full.exact);
}

TEST(MegatronExport, FirstAndLastRankFlags) {
  // 32 - 10 - 6 = 16 over the 2 middle ranks.
  EXPECT_EQ(export_megatron(plan(4, 1, {10, 8, 8, 6})).flags,
            "--pipeline-model-parallel-size 4\n--num-layers 32\n"
            "--decoder-first-pipeline-num-layers 10\n--decoder-last-pipeline-num-layers 6\n");
  // 32 - 10 = 22 over the other 2 ranks, last included.
  EXPECT_EQ(export_megatron(plan(3, 1, {10, 11, 11})).flags,
            "--pipeline-model-parallel-size 3\n--num-layers 32\n"
            "--decoder-first-pipeline-num-layers 10\n");
  EXPECT_EQ(export_megatron(plan(3, 1, {11, 11, 10})).flags,
            "--pipeline-model-parallel-size 3\n--num-layers 32\n"
            "--decoder-last-pipeline-num-layers 10\n");
  EXPECT_EQ(export_megatron(plan(2, 1, {9, 7})).flags,
            "--pipeline-model-parallel-size 2\n--num-layers 16\n"
            "--decoder-first-pipeline-num-layers 9\n");
}

// vpp 2, pp 4: first and last ranks hold 8 layers (4 per chunk), the middle ranks 4 (2 per
// chunk); the counts are per rank and must divide by vpp. Block recompute counts per chunk.
TEST(MegatronExport, InterleavedFirstAndLast) {
  const ExportLayout l = plan(4, 2, {4, 2, 2, 4, 4, 2, 2, 4},
                              {{1, 0}, {1, 0}, {1, 0}, {1, 0}, {1, 0}, {1, 0}, {1, 0}, {1, 0}});
  const MegatronExport m = export_megatron(l);
  EXPECT_EQ(m.flags,
            "--pipeline-model-parallel-size 4\n"
            "--num-layers 24\n"
            "--num-virtual-stages-per-pipeline-rank 2\n"
            "--decoder-first-pipeline-num-layers 8\n"
            "--decoder-last-pipeline-num-layers 8\n"
            "--recompute-granularity full\n"
            "--recompute-method block\n"
            "--recompute-num-layers 1\n");
  EXPECT_TRUE(m.exact);
  const Decoded d = decode_megatron(m.flags);
  EXPECT_EQ(d.partition, l.partition);
  EXPECT_EQ(d.modes, l.recompute);
  // The same plan in MindFormers: average 3, offsets per interleave.
  std::vector<std::string> notes;
  const std::string yaml = export_mindformers(l, &notes);
  EXPECT_EQ(yaml_value(yaml, "offset"), "[[1, -1, -1, 1], [1, -1, -1, 1]]");
  EXPECT_EQ(yaml_value(yaml, "recompute"), "[[1, 1, 1, 1], [1, 1, 1, 1]]");
  EXPECT_TRUE(notes.empty());
}

// vpp 2 with chunks of one rank unequal: only the layout says it, VPP rank 0's stages first;
// the layout implies vpp, so no vpp flag.
TEST(MegatronExport, InterleavedLayout) {
  const ExportLayout l = plan(2, 2, {3, 5, 4, 4});
  const MegatronExport m = export_megatron(l);
  EXPECT_EQ(m.flags,
            "--pipeline-model-parallel-size 2\n--num-layers 16\n"
            "--pipeline-model-parallel-layout \"Et*3|t*5|t*4|t*4L\"\n");
  EXPECT_TRUE(m.exact);
}

// The MindFormers card's interleaved plan: different full counts per stage are beyond
// Megatron's one N; block 2 covers them.
TEST(MegatronExport, DifferentFullCountsTakeTheLargest) {
  const ExportLayout l =
      plan(5, 2, {4, 5, 5, 5, 5, 5, 5, 5, 5, 4}, {{2, 0}, {1, 0}, {}, {}, {}, {1, 0}});
  const MegatronExport m = export_megatron(l);
  EXPECT_EQ(m.flags,
            "--pipeline-model-parallel-size 5\n--num-layers 48\n"
            "--pipeline-model-parallel-layout "
            "\"Et*4|t*5|t*5|t*5|t*5|t*5|t*5|t*5|t*5|t*4L\"\n"
            "--recompute-granularity full\n--recompute-method block\n--recompute-num-layers 2\n");
  EXPECT_FALSE(m.exact);
  EXPECT_NE(m.note.find("full [2, 1, 0, 0, 0, 1, 0, 0, 0, 0]"), std::string::npos) << m.note;
  EXPECT_EQ(m.expressed.partition, l.partition);
  EXPECT_EQ(decode_megatron(m.flags).modes, m.expressed.recompute);
  EXPECT_TRUE(dominates(m.expressed.recompute, l.recompute));
}

// Selective and full mixed: selective layers count as full. [9, 9, 8, 6] with full
// [2, 1, 0, 0] and selective [0, 3, 0, 0] needs the first 4 layers of every stage full.
TEST(MegatronExport, MixedModesGiveTheNearestBlock) {
  const ExportLayout l = plan(4, 1, {9, 9, 8, 6}, {{2, 0}, {1, 3}, {}, {}});
  const MegatronExport m = export_megatron(l);
  EXPECT_FALSE(m.exact);
  EXPECT_EQ(m.note,
            "Megatron-LM recomputes in full the same first N layers of every stage and cannot mix "
            "selective with full; the plan has full [2, 1, 0, 0] and selective [0, 3, 0, 0] "
            "layers per stage, so the nearest flags recompute the first 4 layers of every stage "
            "in full.");
  EXPECT_NE(m.flags.find("--recompute-method block\n--recompute-num-layers 4\n"),
            std::string::npos);
  EXPECT_EQ(m.expressed.partition, l.partition);
  const ExportLayout want = plan(4, 1, {9, 9, 8, 6}, {{4, 0}, {4, 0}, {4, 0}, {4, 0}});
  EXPECT_EQ(m.expressed.recompute, want.recompute);
}

// Stages of 3 and 2 layers: none, selective, block 1, block 2, uniform; written out by hand.
TEST(MegatronExport, TheRecomputeChoicesAreEveryRuleTheFlagsCanState) {
  using R = Recompute;
  const R n = R::none, s = R::selective, f = R::full;
  const std::vector<Modes> want{
      {n, n, n, n, n}, {s, s, s, s, s}, {f, n, n, f, n}, {f, f, n, f, f}, {f, f, f, f, f}};
  EXPECT_EQ(megatron_recompute_choices({3, 2}), want);
  // Each is exact: the flags state it as it is.
  for (const Modes& modes : want) {
    ExportLayout l = plan(2, 1, {3, 2});
    l.recompute = modes;
    const MegatronExport m = export_megatron(l);
    EXPECT_TRUE(m.exact) << m.note;
    EXPECT_EQ(decode_megatron(m.flags).modes, modes) << m.flags;
  }
}

// The (none 0, selective 9, full 1) stage beside a stage without recompute: N = 10 covers
// every stage, so every layer recomputes in full.
TEST(MegatronExport, CoveringEveryLayerIsUniform) {
  const ExportLayout l = plan(2, 1, {10, 10}, {{1, 9}, {0, 0}});
  const MegatronExport m = export_megatron(l);
  EXPECT_FALSE(m.exact);
  EXPECT_NE(m.flags.find("--recompute-method uniform\n--recompute-num-layers 1\n"),
            std::string::npos);
  EXPECT_NE(m.note.find("every layer in full"), std::string::npos) << m.note;
  EXPECT_EQ(m.expressed.recompute, Modes(20, Recompute::full));
}

TEST(MegatronExport, PartlySelectiveBecomesAllSelective) {
  const ExportLayout l = plan(2, 1, {4, 4}, {{0, 4}, {0, 1}});
  const MegatronExport m = export_megatron(l);
  EXPECT_FALSE(m.exact);
  EXPECT_NE(m.note.find("keeps 3 of 8 layers without recompute"), std::string::npos) << m.note;
  EXPECT_EQ(m.expressed.recompute, Modes(8, Recompute::selective));
  EXPECT_NE(m.flags.find("--recompute-granularity selective\n"), std::string::npos);
}

TEST(MegatronExport, VPlacementIsNotExpressible) {
  ExportLayout l = plan(2, 2, {2, 2, 2, 2});
  l.stage_rank = {0, 1, 1, 0};
  const MegatronExport m = export_megatron(l);
  EXPECT_FALSE(m.exact);
  EXPECT_NE(m.note.find("no V placement"), std::string::npos) << m.note;
  EXPECT_EQ(m.expressed.stage_rank, (std::vector<int>{0, 1, 0, 1}));
  EXPECT_EQ(m.expressed.partition, l.partition);
  EXPECT_EQ(m.expressed.recompute, l.recompute);
}

TEST(MegatronExport, OnePipelineStage) {
  const MegatronExport m = export_megatron(plan(1, 1, {8}, {{3, 0}}));
  EXPECT_EQ(m.flags,
            "--pipeline-model-parallel-size 1\n--num-layers 8\n--recompute-granularity full\n"
            "--recompute-method block\n--recompute-num-layers 3\n");
  EXPECT_TRUE(m.exact);
}

// A first stage with only the embedding: --decoder-first-pipeline-num-layers must be > 0, so
// the layout says it with an empty decoder run.
TEST(MegatronExport, StageWithOnlyTheEmbedding) {
  const MegatronExport m = export_megatron(plan(4, 1, {0, 8, 8, 8}));
  EXPECT_EQ(m.flags,
            "--pipeline-model-parallel-size 4\n--num-layers 24\n"
            "--pipeline-model-parallel-layout \"E|t*8|t*8|t*8L\"\n");
  EXPECT_TRUE(m.exact);
}

TEST(MegatronExport, EmbeddingElsewhereIsNotExpressible) {
  ExportLayout l = plan(2, 1, {4, 4});
  l.loss_on_last = false;
  const MegatronExport m = export_megatron(l);
  EXPECT_FALSE(m.exact);
  EXPECT_TRUE(m.expressed.loss_on_last);
  std::vector<std::string> notes;
  export_mindformers(l, &notes);
  EXPECT_TRUE(mentions(notes, "LM head"));
}

// ---- bad input -----------------------------------------------------------------------------

TEST(Export, RejectsInconsistentLayouts) {
  auto rejects = [](const ExportLayout& l, const std::string& words) {
    for (int format = 0; format < 2; ++format) {
      try {
        if (format == 0) export_mindformers(l, nullptr);
        if (format == 1) export_megatron(l);
        ADD_FAILURE() << "accepted; expected: " << words;
      } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
      }
    }
  };
  ExportLayout l = plan(2, 1, {4, 4});
  l.partition = {4, 3};
  rejects(l, "partition adds up to 7 layers but recompute lists 8");
  l = plan(2, 1, {4, 4});
  l.partition = {8};
  rejects(l, "partition has 1 entries, expected pp*vpp = 2");
  l = plan(2, 1, {4, 4});
  l.stage_rank = {0, 2};
  rejects(l, "stage_rank[1] = 2 is not in [0, 2)");
  l = plan(2, 2, {2, 2, 2, 2});
  l.stage_rank = {0, 0, 0, 1};
  rejects(l, "rank 0 holds 3 stages, expected vpp = 2");
  l = plan(2, 1, {4, 4});
  l.partition = {9, -1};
  rejects(l, "partition[1] = -1 is negative");
  l = plan(1, 2, {4, 4});
  rejects(l, "vpp > 1 needs pp > 1");
  l = plan(2, 1, {0, 0});
  rejects(l, "no decoder layer");
  l = plan(2, 1, {4, 4});
  l.pp = 0;
  rejects(l, "pp must be at least 1");
}

// ---- every plan, read back ----------------------------------------------------------------

// Random plans (fixed seed): whatever each export prints, the framework (as its docs
// describe) builds the plan's partition, recomputes at least what the plan recomputes, and
// exactly it when the export says it is exact.
TEST(Export, ReadBackMatchesThePlan) {
  std::mt19937 rng(20250607);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int trial = 0; trial < 3000; ++trial) {
    const int pp = pick(1, 5);
    const int vpp = pp > 1 ? pick(1, 3) : 1;
    std::vector<int> partition(pp * vpp);
    const int base = pick(0, 4);
    for (int& n : partition) n = pick(0, 2) == 0 ? pick(0, 7) : base;
    if (std::all_of(partition.begin(), partition.end(), [](int n) { return n == 0; }))
      partition[0] = 1;
    std::vector<StageModes> modes(partition.size());
    const int style = pick(0, 3);  // none, selective only, full only, anything
    for (std::size_t s = 0; s < partition.size(); ++s) {
      const int f = style >= 2 ? pick(0, partition[s]) : 0;
      const int sel = style == 1 || style == 3 ? pick(0, partition[s] - f) : 0;
      modes[s] = {f, sel};
    }
    ExportLayout l = plan(pp, vpp, partition, modes);
    if (pick(0, 5) == 0) std::shuffle(l.recompute.begin(), l.recompute.end(), rng);
    if (vpp == 2 && pick(0, 3) == 0)
      for (int s = pp; s < 2 * pp; ++s) l.stage_rank[s] = 2 * pp - 1 - s;
    const int layers = static_cast<int>(l.recompute.size());
    SCOPED_TRACE("trial " + std::to_string(trial));

    std::vector<std::string> notes;
    const std::string yaml = export_mindformers(l, &notes);
    const Decoded mf = decode_mindformers(yaml, layers);
    EXPECT_EQ(mf.partition, l.partition) << yaml;
    EXPECT_TRUE(dominates(mf.modes, l.recompute)) << yaml;
    if (!mentions(notes, "MindFormers recomputes the first n layers")) {
      EXPECT_EQ(mf.modes, l.recompute) << yaml;
    }

    const MegatronExport m = export_megatron(l);
    const Decoded mg = decode_megatron(m.flags);
    EXPECT_EQ(mg.partition, l.partition) << m.flags;
    EXPECT_EQ(m.expressed.partition, l.partition);
    EXPECT_EQ(mg.modes, m.expressed.recompute) << m.flags;
    EXPECT_TRUE(dominates(m.expressed.recompute, l.recompute)) << m.flags;
    const bool same =
        m.expressed.recompute == l.recompute && m.expressed.stage_rank == l.stage_rank;
    EXPECT_EQ(m.exact, same) << m.flags << m.note;
    EXPECT_EQ(m.note.empty(), m.exact);
    for (int s = 0; s < pp * vpp; ++s) EXPECT_EQ(m.expressed.stage_rank[s], s % pp);
  }
}

}  // namespace
}  // namespace bmpipe
