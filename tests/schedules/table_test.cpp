// The schedule table's properties against what the generators really do. Expectations are
// written out here from the papers (placements, DualPipeV's m >= 2p, Megatron's groups of p),
// never read back from the table they check.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <sstream>

#include "support/support.hpp"

namespace bmpipe {
namespace {

const std::set<std::string> kOnePerRank = {"gpipe", "1f1b", "zb-h1", "zb-h2", "zb-auto"};
const std::set<std::string> kLoop = {"interleaved"};
const std::set<std::string> kV = {"zb-v", "v-min", "v-half", "dualpipe-v"};
const std::set<std::string> kNeedsCosts = {"zb-auto", "zb-v", "v-half"};
const std::set<std::string> kRanksCandidates = {"zb-auto", "zb-v"};

/// Where stage `st` of a p-rank pipeline lives, written out independently of the code.
int expected_rank(const std::string& name, int st, int p) {
  if (kLoop.count(name)) return st % p;                     // Megatron: stage s on rank s mod p
  if (kV.count(name)) return st < p ? st : 2 * p - 1 - st;  // rank r holds r and 2p-1-r
  return st;
}

int expected_chunks(const std::string& name, int vpp) {
  if (kLoop.count(name)) return vpp;
  if (kV.count(name)) return 2;
  return 1;
}

/// The fewest micro-batches each schedule runs, from its paper.
int expected_min_m(const std::string& name, int p) {
  return name == "dualpipe-v" ? 2 * p : 1;  // DeepSeek-V3 report: DualPipe needs m >= 2p
}

TEST(ScheduleTable, ListsEverySchedulePropertyAsExpected) {
  std::set<std::string> seen;
  for (const auto& info : builtin_schedules()) {
    const std::string name(info.name);
    SCOPED_TRACE(name);
    seen.insert(name);
    const Placement want = kLoop.count(name) ? Placement::kLoop
                           : kV.count(name)  ? Placement::kV
                                             : Placement::kOnePerRank;
    EXPECT_EQ(info.placement, want);
    EXPECT_EQ(info.needs_costs, kNeedsCosts.count(name) == 1);
    EXPECT_EQ(info.ranks_candidates, kRanksCandidates.count(name) == 1);
    EXPECT_EQ(info.microbatches_in_groups_of_pp, name == "interleaved");
    for (int p : {1, 4, 7}) EXPECT_EQ(info.min_microbatches.at(p), expected_min_m(name, p));
    for (int v : {1, 2, 3, 8}) EXPECT_EQ(effective_vpp(info, v), expected_chunks(name, v));
  }
  std::set<std::string> all = kOnePerRank;
  all.insert(kLoop.begin(), kLoop.end());
  all.insert(kV.begin(), kV.end());
  EXPECT_EQ(seen, all);
}

TEST(ScheduleTable, PlacementMatchesEveryGeneratedSchedule) {
  for (const auto& info : builtin_schedules()) {
    const std::string name(info.name);
    for (int p : {1, 2, 3, 4, 5, 8})
      for (int v : {1, 2, 3}) {
        if (!info.vpp.contains(v)) continue;
        const int m = 2 * p;  // fits every schedule's rule
        SCOPED_TRACE(name + " p=" + std::to_string(p) + " v=" + std::to_string(v));
        const Schedule s = test::generate(name.c_str(), p, m, v);
        ASSERT_EQ(s.num_stages, p * expected_chunks(name, v));
        ASSERT_EQ(s.stage_rank.size(), static_cast<std::size_t>(s.num_stages));
        for (int st = 0; st < s.num_stages; ++st) {
          EXPECT_EQ(s.stage_rank[st], expected_rank(name, st, p)) << "stage " << st;
          EXPECT_EQ(stage_rank(info.placement, st, p), s.stage_rank[st]) << "stage " << st;
        }
        // chunk_stage inverts stage_rank, and every op runs where its stage lives.
        for (int r = 0; r < p; ++r) {
          for (int c = 0; c < s.chunks_per_device(); ++c)
            EXPECT_EQ(s.stage_rank[chunk_stage(info.placement, r, c, p)], r);
          for (const Op& op : s.ops[r]) EXPECT_EQ(s.stage_rank[op.stage], r) << to_string(op);
        }
        const Schedule empty = empty_schedule("x", info.placement, p, v, m);
        EXPECT_EQ(empty.stage_rank, s.stage_rank);
        EXPECT_EQ(empty.ops.size(), static_cast<std::size_t>(p));
      }
  }
}

TEST(ScheduleTable, MicrobatchMinimumRefusedBelowAcceptedAt) {
  for (const auto& info : builtin_schedules()) {
    const std::string name(info.name);
    const int v = effective_vpp(info, 2);
    for (int p : {1, 2, 3, 4, 8}) {
      SCOPED_TRACE(name + " p=" + std::to_string(p));
      const int min = expected_min_m(name, p);
      EXPECT_THROW(test::generate(name.c_str(), p, min - 1, v), ScheduleError);
      EXPECT_NO_THROW(test::generate(name.c_str(), p, min, v));
    }
  }
}

TEST(ScheduleTable, DualPipeVRefusalNamesTheMinimum) {
  try {
    test::generate("dualpipe-v", 4, 7, 2);
    ADD_FAILURE() << "m = 7 < 2p accepted";
  } catch (const ScheduleError& e) {
    EXPECT_STREQ(e.what(), "dualpipe-v needs at least 2p = 8 micro-batches (got 7)");
  }
}

TEST(ScheduleTable, InterleavedRunsInGroupsOfPp) {
  for (int p : {2, 3, 4}) {
    for (int m = 1; m <= 4 * p; ++m) {
      SCOPED_TRACE("p=" + std::to_string(p) + " m=" + std::to_string(m));
      if (m <= p || m % p == 0) {
        EXPECT_NO_THROW(test::generate("interleaved", p, m, 2));
      } else {
        EXPECT_THROW(test::generate("interleaved", p, m, 2), ScheduleError);
      }
    }
  }
  try {
    test::generate("interleaved", 4, 10, 2);
    ADD_FAILURE() << "m = 10, p = 4 accepted";
  } catch (const ScheduleError& e) {
    EXPECT_STREQ(e.what(),
                 "interleaved needs microbatches to be a multiple of pp (or at most pp); got m = "
                 "10, pp = 4 (try m = 8 or 12)");
  }
}

TEST(ScheduleTable, VppAcceptedExactlyInTheRange) {
  for (const auto& info : builtin_schedules()) {
    const std::string name(info.name);
    for (int v : {0, 1, 2, 3, 4}) {
      SCOPED_TRACE(name + " vpp=" + std::to_string(v));
      const bool ok = kLoop.count(name) ? v >= 1 : kV.count(name) ? (v == 1 || v == 2) : v == 1;
      EXPECT_EQ(info.vpp.contains(v), ok);
      if (ok) {
        EXPECT_NO_THROW(test::generate(name.c_str(), 4, 8, v));
      } else {
        EXPECT_THROW(test::generate(name.c_str(), 4, 8, v), ScheduleError);
      }
    }
  }
}

TEST(ScheduleTable, RefusalsNameTheScheduleAndWhatIsExpected) {
  auto message = [](const char* name, int p, int m, int v) {
    try {
      test::generate(name, p, m, v);
    } catch (const ScheduleError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(message("1f1b", 0, 4, 1), "1f1b: pp must be at least 1");
  EXPECT_EQ(message("zb-h2", 4, 0, 1), "zb-h2: microbatches must be at least 1");
  EXPECT_EQ(message("zb-auto", 4, 8, 2),
            "zb-auto holds one stage per device; vpp must be 1 (got 2)");
  EXPECT_EQ(message("v-min", 4, 8, 3),
            "v-min always holds 2 stages per device (V placement); vpp must be 1 or 2 (got 3)");
  EXPECT_EQ(message("interleaved", 4, 8, 0), "interleaved: vpp must be at least 1 (got 0)");
}

TEST(ScheduleTable, CostsOnlyMatterWhereTheTableSaysSo) {
  // Lopsided costs that would change any cost-aware plan; a schedule that does not need
  // costs must come out identical with and without them.
  for (const auto& info : builtin_schedules()) {
    if (info.needs_costs) continue;
    const int p = 4, m = 8, v = effective_vpp(info, 2);
    SCOPED_TRACE(std::string(info.name));
    ScheduleParams params{p, m, v, {}, {}};
    const Schedule plain = info.generate(params);
    const auto stages = static_cast<std::size_t>(plain.num_stages);
    params.costs.forward.assign(stages, 1);
    params.costs.backward_input.assign(stages, 50);
    params.costs.backward_weight.assign(stages, 3);
    params.costs.transfer = 7;
    params.costs.activation_limit = 1;
    const Schedule costed = info.generate(params);
    EXPECT_EQ(costed.ops, plain.ops);
    EXPECT_EQ(costed.stage_rank, plain.stage_rank);
  }
}

TEST(ScheduleTable, HelpListsEveryScheduleWithItsRequirements) {
  const std::string help = schedule_help();
  // Entries start at a line that does not begin with a space; phrases may be wrapped, so
  // each entry is read with its lines joined.
  std::map<std::string, std::string> entry;
  std::vector<std::string> order;
  std::istringstream lines(help);
  for (std::string line; std::getline(lines, line);) {
    EXPECT_LE(line.size(), 100u) << line;  // fits a 100-column terminal
    std::istringstream words(line);
    std::string word;
    if (!line.empty() && line[0] != ' ' && words >> word) order.push_back(word);
    ASSERT_FALSE(order.empty()) << "help starts with an indented line";
    for (; words >> word;) entry[order.back()] += word + " ";
  }
  std::vector<std::string> names;
  for (const auto& info : builtin_schedules()) names.emplace_back(info.name);
  EXPECT_EQ(order, names);
  auto has = [&](const std::string& name, const std::string& phrase) {
    return entry[name].find(phrase) != std::string::npos;
  };
  for (const auto& name : names) {
    SCOPED_TRACE(name + ": " + entry[name]);
    EXPECT_EQ(has(name, "needs m >= 2p"), name == "dualpipe-v");
    EXPECT_EQ(has(name, "needs m <= p or a multiple of p"), name == "interleaved");
    EXPECT_EQ(has(name, "rank r holds stages r and 2p-1-r (vpp 1 or 2"), kV.count(name) == 1);
    EXPECT_EQ(has(name, "stage s on rank s mod p"), kLoop.count(name) == 1);
    EXPECT_EQ(has(name, "stage s on rank s (vpp 1)"), kOnePerRank.count(name) == 1);
    EXPECT_EQ(has(name, "stage costs"), kNeedsCosts.count(name) == 1);
    EXPECT_EQ(has(name, "fastest of its candidates"), kRanksCandidates.count(name) == 1);
  }
  EXPECT_EQ(schedule_help(), help);
}

// ---- extension points: the lists elsewhere are read off the table --------------------------

TEST(ScheduleTable, AutoPlansTheCandidatesThatFit) {
  using Row = std::pair<std::string, int>;
  // What `plan --schedule auto` has planned since it existed: 1F1B, interleaved with 2, 3
  // and 4 chunks where pp x vpp fills the layers and m runs in groups of p, ZB-H1, and
  // ZB-V where its 2p stages fit.
  EXPECT_EQ(auto_candidates(4, 8, 32), (std::vector<Row>{{"1f1b", 1},
                                                         {"interleaved", 2},
                                                         {"interleaved", 3},
                                                         {"interleaved", 4},
                                                         {"zb-h1", 1},
                                                         {"zb-v", 2}}));
  EXPECT_EQ(auto_candidates(4, 8, 10),  // 12 and 16 stages do not fit 10 layers
            (std::vector<Row>{{"1f1b", 1}, {"interleaved", 2}, {"zb-h1", 1}, {"zb-v", 2}}));
  EXPECT_EQ(auto_candidates(4, 6, 32),  // m = 6 is neither <= p nor a multiple of p
            (std::vector<Row>{{"1f1b", 1}, {"zb-h1", 1}, {"zb-v", 2}}));
  EXPECT_EQ(auto_candidates(1, 8, 32),  // nothing to interleave over
            (std::vector<Row>{{"1f1b", 1}, {"zb-h1", 1}, {"zb-v", 2}}));
  EXPECT_EQ(auto_candidates(4, 8, 6),  // 2p = 8 stages of ZB-V do not fit 6 layers
            (std::vector<Row>{{"1f1b", 1}, {"zb-h1", 1}}));
}

TEST(ScheduleTable, SearchDefaults) {
  // Which frameworks run which schedule is each framework's column, in its own folder
  // (tests/frameworks/exporters_test.cpp).
  std::set<std::string> search;
  for (const std::string& n : search_default_schedules()) search.insert(n);
  EXPECT_EQ(search, (std::set<std::string>{"1f1b", "interleaved"}));
}

}  // namespace
}  // namespace bmpipe
