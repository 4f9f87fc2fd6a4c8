// The vocabulary the importers and the exports share (frameworks/common/formats.hpp).
// Expectations are worked by hand from the frameworks' documented examples and code:
//  - Megatron-LM's layout grammar (pipeline_parallel_layer_layout.py parse_str_to_list and
//    docs/user-guide/features/pipeline_parallel_layout.md: "Et*3|(tt|)*29,m|L" is
//    DeepSeek-V3's 61 decoder layers and one MTP layer over PP16 x VPP2), the uneven
//    first/last rule and the even split with the embedding/loss accounted for
//    (transformer_block.py get_num_layers_to_build);
//  - MindFormers' offsets (docs/feature_cards/Offset_Recompute.md: 48 layers, pp 5,
//    interleave 2, offset [[0,1,1,1,1],[1,1,1,1,0]] is [[4,5,5,5,5],[5,5,5,5,4]]) and its
//    spreading of a flat recompute list over the interleaves (LayerSetting
//    ._alloc_recompute_layer).
#include <gtest/gtest.h>

#include <climits>
#include <random>
#include <string>
#include <vector>

#include "frameworks/common/formats.hpp"

namespace bmpipe {
namespace {

std::vector<int> decoders(const std::vector<MegatronLayoutStage>& stages) {
  std::vector<int> out;
  for (const auto& s : stages) out.push_back(s.decoders);
  return out;
}

std::string layout_error(const std::string& layout) {
  try {
    parse_megatron_layout(layout);
  } catch (const FormatError& e) {
    return e.what();
  }
  return "<accepted>";
}

TEST(MegatronLayout, TheWorkedExample) {
  const auto stages = parse_megatron_layout("Et*9|t*9|t*8|t*6L");
  EXPECT_EQ(decoders(stages), (std::vector<int>{9, 9, 8, 6}));
  ASSERT_EQ(stages.size(), 4u);
  EXPECT_TRUE(stages[0].embedding);
  EXPECT_FALSE(stages[0].loss);
  EXPECT_TRUE(stages[3].loss);
  EXPECT_EQ(megatron_layout_string({9, 9, 8, 6}), "Et*9|t*9|t*8|t*6L");
}

TEST(MegatronLayout, TheDocumentedDeepSeekExample) {
  // PP16 x VPP2 = 32 stages: E + 3 decoders, 29 stages of two, one MTP stage, the loss.
  const auto stages = parse_megatron_layout("Et*3|(tt|)*29,m|L");
  ASSERT_EQ(stages.size(), 32u);
  EXPECT_TRUE(stages[0].embedding);
  EXPECT_EQ(stages[0].decoders, 3);
  for (int s = 1; s <= 29; ++s) EXPECT_EQ(stages[s].decoders, 2) << s;
  EXPECT_EQ(stages[30].mtp, 1);
  EXPECT_EQ(stages[30].decoders, 0);
  EXPECT_TRUE(stages[31].loss);
  int total = 0;
  for (const auto& s : stages) total += s.decoders;
  EXPECT_EQ(total, 61);
}

TEST(MegatronLayout, CommasEmptyStagesAndGroups) {
  // The help text's example: "E|(t|)*3,m|m||L" is E, t, t, t, m, m, (empty), L.
  const auto help = parse_megatron_layout("E|(t|)*3,m|m||L");
  ASSERT_EQ(help.size(), 8u);
  EXPECT_EQ(decoders(help), (std::vector<int>{0, 1, 1, 1, 0, 0, 0, 0}));
  EXPECT_EQ(help[4].mtp + help[5].mtp, 2);
  EXPECT_TRUE(help[7].loss);
  // "(|ab)*2,cd -> |ab|abcd" in the parser's own comment, with t for a and b.
  EXPECT_EQ(decoders(parse_megatron_layout("E(|tt)*2,tL")), (std::vector<int>{0, 2, 3}));
  // x*n repeats any one character, a separator included.
  EXPECT_EQ(decoders(parse_megatron_layout("Et|*3tL")), (std::vector<int>{1, 0, 0, 1}));
  EXPECT_EQ(decoders(parse_megatron_layout("E,t,t|t*010,L")), (std::vector<int>{2, 10}));
}

TEST(MegatronLayout, WhatMegatronRefuses) {
  EXPECT_NE(layout_error("Et*9|t*9|t*8|t*6").find("last layer must be the loss"),
            std::string::npos);
  EXPECT_NE(layout_error("tE|L").find("first layer must be the embedding"), std::string::npos);
  EXPECT_NE(layout_error("|EtL").find("<accepted>"), std::string::npos);  // empty first stage
  EXPECT_NE(layout_error("Et|EtL").find("exactly once"), std::string::npos);
  EXPECT_NE(layout_error("Et|x|L").find("invalid layer character 'x'"), std::string::npos);
  EXPECT_NE(layout_error("E t|L").find("invalid layer character"), std::string::npos);
  EXPECT_NE(layout_error("E((t)*2|)*2L").find("nested parentheses"), std::string::npos);
  EXPECT_NE(layout_error("E(t)|L").find("followed by *n"), std::string::npos);
  EXPECT_NE(layout_error("E(t|L").find("never closed"), std::string::npos);
  EXPECT_NE(layout_error("Et*3*2|L").find("invalid layer character '*'"), std::string::npos);
  EXPECT_NE(layout_error("Et*200000|L").find("more than 100000"), std::string::npos);
  EXPECT_NE(layout_error("E(t*9|)*99999L").find("more than 100000"), std::string::npos);
  EXPECT_NE(layout_error("").find("no layer"), std::string::npos);
}

// Any partition written as a layout reads back as itself.
TEST(MegatronLayout, WrittenLayoutsReadBack) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<int> partition(1 + rng() % 12);
    for (int& n : partition) n = static_cast<int>(rng() % 6);
    const auto stages = parse_megatron_layout(megatron_layout_string(partition));
    EXPECT_EQ(decoders(stages), partition);
    EXPECT_TRUE(stages.front().embedding);
    EXPECT_TRUE(stages.back().loss);
  }
}

TEST(MegatronPartition, FirstAndLastRanks) {
  EXPECT_EQ(megatron_uneven(32, 4, 1, 10, 6), (std::vector<int>{10, 8, 8, 6}));
  EXPECT_EQ(megatron_uneven(32, 3, 1, 10, std::nullopt), (std::vector<int>{10, 11, 11}));
  // vpp 2: a rank's 8 layers are two chunks of 4; the middle ranks' 8 too.
  EXPECT_EQ(megatron_uneven(32, 4, 2, 8, 8), (std::vector<int>{4, 4, 4, 4, 4, 4, 4, 4}));
  EXPECT_EQ(megatron_uneven(32, 4, 1, 9, std::nullopt), std::nullopt);  // 23 over 3 ranks
  EXPECT_EQ(megatron_uneven(32, 4, 2, 9, 7), std::nullopt);             // 9 is odd
  EXPECT_EQ(megatron_uneven(16, 2, 1, 10, 6), (std::vector<int>{10, 6}));
  EXPECT_EQ(megatron_uneven(16, 2, 1, 10, 5), std::nullopt);  // one layer and no rank left
}

TEST(MegatronPartition, EvenSplitWithTheEmbeddingAndLossCounted) {
  EXPECT_EQ(megatron_even(32, 4, 1, false, false), (std::vector<int>{8, 8, 8, 8}));
  // 31 + the embedding = 32 over 4: the first stage builds 7 decoder layers.
  EXPECT_EQ(megatron_even(31, 4, 1, true, false), (std::vector<int>{7, 8, 8, 8}));
  EXPECT_EQ(megatron_even(30, 4, 1, true, true), (std::vector<int>{7, 8, 8, 7}));
  // vpp 2: 8 per rank, 4 per chunk; only the very first and very last chunk lose one.
  EXPECT_EQ(megatron_even(30, 4, 2, true, true), (std::vector<int>{3, 4, 4, 4, 4, 4, 4, 3}));
  EXPECT_THROW(megatron_even(31, 4, 1, false, false), FormatError);
  EXPECT_THROW(megatron_even(32, 4, 3, false, false), FormatError);
  EXPECT_EQ(megatron_even(3, 2, 1, true, false), (std::vector<int>{1, 2}));
}

TEST(MindFormersOffsets, TheWorkedExampleAndTheFeatureCard) {
  EXPECT_EQ(mindformers_partition(32, 4, 1, {1, 1, 0, -2}), (std::vector<int>{9, 9, 8, 6}));
  EXPECT_EQ(mindformers_offsets({9, 9, 8, 6}), (std::vector<int>{1, 1, 0, -2}));
  const std::vector<int> card = {0, 1, 1, 1, 1, 1, 1, 1, 1, 0};
  EXPECT_EQ(mindformers_partition(48, 5, 2, card),
            (std::vector<int>{4, 5, 5, 5, 5, 5, 5, 5, 5, 4}));
  EXPECT_EQ(mindformers_offsets({4, 5, 5, 5, 5, 5, 5, 5, 5, 4}), card);
  EXPECT_EQ(mindformers_stage_list(card, 5, 2), "[[0, 1, 1, 1, 1], [1, 1, 1, 1, 0]]");
  EXPECT_EQ(mindformers_stage_list({1, 1, 0, -2}, 4, 1), "[1, 1, 0, -2]");
  EXPECT_THROW(mindformers_partition(32, 4, 1, {1, 1, 0, -1}), FormatError);  // 33 layers
  EXPECT_THROW(mindformers_partition(8, 4, 1, {-3, 1, 1, 1}), FormatError);   // -1 layers
  EXPECT_THROW(mindformers_partition(8, 4, 1, {0, 0, 0}), FormatError);       // 3 offsets
}

TEST(MindFormersRecompute, AFlatListIsDealtOverTheInterleaves) {
  // pp 2, interleave 2, stages (v, j) in order (0,0) (0,1) (1,0) (1,1) of 3, 2, 2, 3
  // layers. Rank 0 holds 3 + 2: a count of 3 goes v0, v1, v0 -> 2 and 1. Rank 1 holds
  // 2 + 3: a count of 1 goes to v0.
  EXPECT_EQ(mindformers_spread_counts({3, 2, 2, 3}, 2, 2, {3, 1}), (std::vector<int>{2, 1, 1, 0}));
  // True in the list stands for MAX_INT32: every layer of the rank.
  EXPECT_EQ(mindformers_spread_counts({3, 2, 2, 3}, 2, 2, {INT_MAX, 0}),
            (std::vector<int>{3, 0, 2, 0}));
  // A full stage is skipped: rank 0's 4 over stages of 1 and 3 -> 1 and 3.
  EXPECT_EQ(mindformers_spread_counts({1, 0, 3, 0}, 2, 2, {4, 0}), (std::vector<int>{1, 0, 3, 0}));
  // vpp 1: the count, capped at the stage.
  EXPECT_EQ(mindformers_spread_counts({4, 4}, 2, 1, {2, 9}), (std::vector<int>{2, 4}));
}

TEST(PrefixCounts, FullFirstThenSelectiveFromTheStageStart) {
  using R = Recompute;
  EXPECT_EQ(modes_from_prefix_counts({3, 2}, {1, 0}, {2, 5}),
            (std::vector<R>{R::full, R::selective, R::none, R::selective, R::selective}));
  // A select count below the full count selects nothing more.
  EXPECT_EQ(modes_from_prefix_counts({2}, {2}, {1}), (std::vector<R>{R::full, R::full}));
  const std::vector<R> modes{R::none, R::full, R::none, R::selective};
  EXPECT_EQ(covering_prefix({2, 2}, modes, 0, R::full), 2);
  EXPECT_EQ(covering_prefix({2, 2}, modes, 1, R::full), 0);
  EXPECT_EQ(covering_prefix({2, 2}, modes, 1, R::selective), 2);
}

}  // namespace
}  // namespace bmpipe
