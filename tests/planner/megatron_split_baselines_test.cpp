// Megatron-LM's uneven-split rules as plan baselines: the splits each rule tries, worked
// out by hand from get_num_layers_to_build (61 layers over pp 8, DeepSeek-V3's depth; 94
// over pp 8, Qwen3-235B-A22B's), and each baseline's time equal to `simulate` of its own
// partition and recompute.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "planner/baselines.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace {

using planner::megatron_accounted_splits;
using planner::megatron_first_last_splits;
using V = std::vector<int>;

TEST(MegatronSplitBaselines, FirstLastTriesEveryAcceptedCountUpToTheEvenShare) {
  // 61 layers, pp 8: share ceil(61 / 8) = 8; F, L in 1..8 or absent. Only L: 61 - L over 7
  // middle ranks -> L = 5. Only F: F = 5. Both: 61 - F - L over 6 ranks -> F + L = 7 (9 a
  // middle rank) or 13 (8 a middle rank); F = 5, L = 8 and F = 8, L = 5 repeat the one-sided
  // splits.
  const std::vector<V> expected = {
      {8, 8, 8, 8, 8, 8, 8, 5},  // L 5
      {1, 9, 9, 9, 9, 9, 9, 6}, {2, 9, 9, 9, 9, 9, 9, 5}, {3, 9, 9, 9, 9, 9, 9, 4},
      {4, 9, 9, 9, 9, 9, 9, 3},
      {5, 8, 8, 8, 8, 8, 8, 8},  // F 5 (and F 5, L 8)
      {5, 9, 9, 9, 9, 9, 9, 2}, {6, 9, 9, 9, 9, 9, 9, 1}, {6, 8, 8, 8, 8, 8, 8, 7},
      {7, 8, 8, 8, 8, 8, 8, 6},
  };
  EXPECT_EQ(megatron_first_last_splits(61, 8, 1), expected);
  // 94 layers, pp 8: share 12; F = L = 11 leaves 72, 12 a middle rank.
  const std::vector<V> q = megatron_first_last_splits(94, 8, 1);
  EXPECT_NE(std::find(q.begin(), q.end(), V{11, 12, 12, 12, 12, 12, 12, 11}), q.end());
  for (const V& split : q) {
    int sum = 0;
    for (int n : split) sum += n;
    EXPECT_EQ(sum, 94);
    // The middle ranks even (a one-sided split's other end is a middle rank).
    for (int r = 2; r < 7; ++r) EXPECT_EQ(split[r], split[1]);
  }
  // With virtual stages the counts are the rank's, split over its chunks (stage order:
  // chunk 0 of ranks 0 and 1, then chunk 1): 16 layers, pp 2, vpp 2, share 8, counts even
  // (divisible by vpp). Only L (2, 4, 6, 8): rank 0 takes the rest; only F likewise; both:
  // no middle rank, so F + L = 16, only F = L = 8 (the even split again).
  EXPECT_EQ(megatron_first_last_splits(16, 2, 2),
            (std::vector<V>{{7, 1, 7, 1}, {6, 2, 6, 2}, {5, 3, 5, 3}, {4, 4, 4, 4},
                            {1, 7, 1, 7}, {2, 6, 2, 6}, {3, 5, 3, 5}}));
  EXPECT_TRUE(megatron_first_last_splits(16, 1, 1).empty());  // no first and last rank
}

TEST(MegatronSplitBaselines, AccountingCountsTheEmbeddingAndTheLossAsLayers) {
  // 94 + embedding + loss = 96 = 8 x 12: the first and last rank build 11 decoder layers.
  // 95 (either alone) does not divide by 8.
  const std::vector<planner::AccountedSplit> q = megatron_accounted_splits(94, 8, 1);
  ASSERT_EQ(q.size(), 1u);
  EXPECT_TRUE(q[0].embedding && q[0].loss);
  EXPECT_EQ(q[0].partition, (V{11, 12, 12, 12, 12, 12, 12, 11}));
  // 61: 62 and 63 do not divide by 8; Megatron-LM refuses all three.
  EXPECT_TRUE(megatron_accounted_splits(61, 8, 1).empty());
  // 63: the embedding alone makes 64, the loss alone 64.
  const std::vector<planner::AccountedSplit> s = megatron_accounted_splits(63, 8, 1);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].partition, (V{7, 8, 8, 8, 8, 8, 8, 8}));
  EXPECT_TRUE(s[0].embedding && !s[0].loss);
  EXPECT_EQ(s[1].partition, (V{8, 8, 8, 8, 8, 8, 8, 7}));
  // vpp 2: 30 + 2 = 32 = 4 ranks x 8 = 2 chunks of 4; the first chunk of all and the last
  // lose one.
  EXPECT_EQ(megatron_accounted_splits(30, 4, 2).back().partition, (V{3, 4, 4, 4, 4, 4, 4, 3}));
}

std::string flow(const nlohmann::json& list) {
  std::string out = "[";
  for (std::size_t i = 0; i < list.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(list[i].get<int>());
  }
  out += ']';
  return out;
}

TEST(MegatronSplitBaselines, EachBaselineTakesTheTimeSimulateGivesItsPlan) {
  // Llama-2-13B made 94 layers deep (Qwen3-235B-A22B's depth) on 16 Ascend 910B, pp 8.
  const std::string config =
      std::string(BMPIPE_SOURCE_DIR) + "/configs/examples/ascend910b_llama2_13b_analytic.yaml";
  const test::CliRun r =
      test::run_cli("plan '" + config + "' --set model.num_layers=94 --quiet --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  int found = 0;
  for (const nlohmann::json& b : j["baselines"]) {
    const std::string name = b["name"];
    if (name != "megatron-first-last" && name != "megatron-embedding-loss") continue;
    ++found;
    ASSERT_TRUE(b.contains("partition")) << b;
    if (name == "megatron-embedding-loss") {  // the only split Megatron-LM accepts
      EXPECT_EQ(b["partition"], nlohmann::json(V{11, 12, 12, 12, 12, 12, 12, 11}));
    }
    std::string layers = "{";
    for (std::size_t l = 0; l < b["layer_recompute"].size(); ++l) {
      if (l > 0) layers += ',';
      layers.append(std::to_string(l)).append(": ").append(
          b["layer_recompute"][l].get<std::string>());
    }
    const test::CliRun sim = test::run_cli(
        "simulate '" + config + "' --set model.num_layers=94 --set training.partition=" +
        flow(b["partition"]) + " --set 'training.recompute={layers: " + layers + "}}' --json");
    ASSERT_EQ(sim.code, 0) << sim.err;
    EXPECT_EQ(nlohmann::json::parse(sim.out)["iteration_time_ms"], b["iteration_time_ms"]) << name;
  }
  EXPECT_EQ(found, 2);
}

}  // namespace
}  // namespace bmpipe
