// The two-stream F&B pair (sim/fb_pair.hpp): the limits the issue asks for, and a
// two-layer case worked by hand.
#include "sim/fb_pair.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace bmpipe {
namespace {

using Parts = std::vector<Time>;

TEST(FbPair, WithoutAllToAllThePairCostsForwardPlusBackward) {
  // Two MoE layers whose a2a are 0: nothing to hide, nothing overlaps: F + B.
  const Parts f = {300, 0, 400, 0, 300, 0, 400, 0, 100};  // F = 1500
  const Parts b = {100, 0, 600, 0, 500, 0, 600, 0, 400};  // B = 2200
  EXPECT_EQ(fb_pair_time(f, b), 3700);
  // A dense stage: one piece each.
  EXPECT_EQ(fb_pair_time(Parts{1234}, Parts{4321}), 5555);
  EXPECT_EQ(fb_pair_time(Parts{}, Parts{}), 0);
}

TEST(FbPair, AllToAllLongerThanComputationBoundsThePair) {
  // One MoE layer each. F: attention 1, dispatch 10, MLP 2, combine 10, rest 1.
  // B: rest-bwd 1, combine-bwd 10, MLP-bwd 4, dispatch-bwd 10, attention-bwd 2.
  // By hand: B's rest-bwd [0,1] (a tie at 0, backward first); then combine-bwd holds the
  // comm stream [1,11] while F's attention runs [1,2]; dispatch [11,21] beside MLP-bwd
  // [11,15]; dispatch-bwd [21,31] beside MLP [21,23]; combine [31,41] beside
  // attention-bwd [31,33]; F's rest [41,42]. The comm stream is busy from 1 to 41: the
  // pair is the 40 of a2a plus the 1 of computation before any a2a can start and the 1
  // after the last one.
  const Parts f = {1, 10, 2, 10, 1};
  const Parts b = {1, 10, 4, 10, 2};
  EXPECT_EQ(fb_pair_time(f, b), 40 + 1 + 1);
  // Sequentially F + B = 24 + 27 = 51; the compute total is 11.
}

TEST(FbPair, TwoLayersByHand) {
  // F: attn 3 | dispatch 2 | MLP 4 | combine 2 | rest+attn 3 | dispatch 2 | MLP 4 |
  //    combine 2 | rest 1   (computation 15, a2a 8)
  // B: rest 1 | combine 2 | MLP 6 | dispatch 2 | attn+rest 5 | combine 2 | MLP 6 |
  //    dispatch 2 | attn 4  (computation 22, a2a 8)
  // Worked by the rules of fb_pair.hpp (the report's order falls out: attention(F) beside
  // combine(B), MLP(B) beside dispatch(F), MLP(F) beside dispatch(B), attention(B)
  // beside combine(F)):
  //   compute: B0 [0,1]  F0 [1,4]   B2 [4,10]  F2 [10,14] B4 [14,19] F4 [19,22]
  //            B6 [22,28] F6 [28,32] B8 [32,36] F8 [36,37]
  //   a2a:     B1 [1,3]  F1 [4,6]   B3 [10,12] F3 [14,16] B5 [19,21] F5 [22,24]
  //            B7 [28,30] F7 [32,34]
  // The compute stream never waits: the pair is the 37 of computation, every a2a hidden
  // (F + B sequentially: 23 + 30 = 53).
  const Parts f = {3, 2, 4, 2, 3, 2, 4, 2, 1};
  const Parts b = {1, 2, 6, 2, 5, 2, 6, 2, 4};
  EXPECT_EQ(fb_pair_time(f, b), 37);
  std::vector<FbPiece> comm;
  for (const FbPiece& p : fb_pair_timeline(f, b))
    if (p.comm) comm.push_back(p);
  const std::vector<FbPiece> expected = {
      {true, true, 1, 1, 3},    {false, true, 1, 4, 6},   {true, true, 3, 10, 12},
      {false, true, 3, 14, 16}, {true, true, 5, 19, 21},  {false, true, 5, 22, 24},
      {true, true, 7, 28, 30},  {false, true, 7, 32, 34},
  };
  EXPECT_EQ(comm, expected);
}

TEST(FbPair, ZeroAllToAllJoinsItsNeighbours) {
  // A dense layer between two MoE layers: its 0 a2a merge the computation around them.
  const auto pieces = fb_chain_timeline(Parts{2, 3, 1, 0, 4, 5, 6}, false);
  const std::vector<FbPiece> expected = {
      {false, false, 0, 0, 2},  {false, true, 1, 2, 5},    {false, false, 2, 5, 10},
      {false, true, 3, 10, 15}, {false, false, 4, 15, 21},
  };
  EXPECT_EQ(pieces, expected);
}

}  // namespace
}  // namespace bmpipe
