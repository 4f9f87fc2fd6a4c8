// What both exports share: the layouts they refuse, and random plans read back through the
// decoders of support/export_readback.hpp (written from the frameworks' docs, not from
// frameworks/*/export.cpp). Each framework's own export tests are in megatron_test.cpp and
// mindformers_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "frameworks/megatron/export.hpp"
#include "frameworks/mindformers/export.hpp"
#include "support/export_layouts.hpp"
#include "support/export_readback.hpp"

namespace bmpipe {
namespace {

using test::decode_megatron;
using test::decode_mindformers;
using test::Decoded;
using test::dominates;
using test::mentions;
using test::plan;
using test::StageModes;
using test::yaml_value;

// ---- both exports of one plan ----------------------------------------------------------------

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
