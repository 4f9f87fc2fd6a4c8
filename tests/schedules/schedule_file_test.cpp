// Schedule files (torch.distributed.pipelining compute-only CSV): parsing, errors with row
// and column, and the round trip of every built-in schedule.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "api/summary.hpp"
#include "schedules/schedule_file.hpp"
#include "schedules/validate.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace {

Schedule parse(const std::string& text) {
  return parse_schedule_csv(text, "t.csv", "t");
}

/// The (row, column, message) a malformed text is rejected with.
struct Rejection {
  int row = 0, column = 0;
  std::string message;
};
Rejection rejection(const std::string& text) {
  try {
    parse(text);
  } catch (const ScheduleFileError& e) {
    return {e.row(), e.column(), e.message()};
  }
  ADD_FAILURE() << "accepted:\n" << text;
  return {};
}

TEST(ScheduleFile, ParsesTheTorchFormat) {
  // Two ranks, loop placement with 2 chunks: stages 0, 2 on rank 0 and 1, 3 on rank 1,
  // empty cells and spaces allowed.
  const Schedule s = parse(
      "0F0,,2F0, 2I0 ,2W0,0B0\n"
      "1F0,3F0,3B0,1I0,1W0,\n");
  EXPECT_EQ(s.num_ranks, 2);
  EXPECT_EQ(s.num_stages, 4);
  EXPECT_EQ(s.num_microbatches, 1);
  EXPECT_EQ(s.stage_rank, (std::vector<int>{0, 1, 0, 1}));
  ASSERT_EQ(s.ops[0].size(), 5u);
  EXPECT_EQ(s.ops[0][2], Op::i(2, 0));
  EXPECT_EQ(s.ops[0][4], Op::b(0, 0));
  EXPECT_EQ(s.ops[1][3], Op::i(1, 0));
}

TEST(ScheduleFile, ParsesOverlappedPairs) {
  // V placement on one rank: stages 0 and 1; the pair overlaps F of micro-batch 1 on
  // stage 0 with the backward of micro-batch 0 on stage 1.
  const Schedule s = parse("0F0,1F0,(0F1;1B0)OVERLAP_F_B,1F1,1B1,0B0,0B1\r\n\n");
  EXPECT_EQ(s.num_ranks, 1);
  EXPECT_EQ(s.ops[0][2], Op::fb(0, 1, 1, 0));
  EXPECT_EQ(schedule_to_csv(s), "0F0,1F0,(0F1;1B0)OVERLAP_F_B,1F1,1B1,0B0,0B1\n");
}

TEST(ScheduleFile, UnknownToken) {
  const Rejection r = rejection("0F0,0B0\n1F0, 1X0,1B0\n");
  EXPECT_EQ(r.row, 2);
  EXPECT_EQ(r.column, 6);
  EXPECT_NE(r.message.find("unknown token '1X0'"), std::string::npos) << r.message;
  EXPECT_EQ(rejection("0F0,F0,0B0\n").column, 5);
  EXPECT_EQ(rejection("0F0,(0F1;0B0)OVERLAP,0B1\n").column, 5);
}

// Found by tests/fuzz/fuzz_schedule_file: a comma-only last row was a rank with no ops,
// which schedule_to_csv wrote as a trailing blank line that reads back as no rank.
TEST(ScheduleFile, RowWithoutOps) {
  for (const char* text : {"0F0,0B0\n,\n", "0F0,0B0\n\n1F0,1B0\n", "0F0,0B0\n , ,\t\n1F0,1B0\n"}) {
    const Rejection r = rejection(text);
    EXPECT_EQ(r.row, 2) << text;
    EXPECT_EQ(r.column, 1) << text;
    EXPECT_NE(r.message.find("row 2 lists no ops"), std::string::npos) << r.message;
  }
  // Blank lines at the end still are not ranks.
  EXPECT_EQ(parse("0F0,0B0\n\n \n").num_ranks, 1);
}

TEST(ScheduleFile, OpRunTwice) {
  const Rejection r = rejection("0F0,0F0,0B0\n");
  EXPECT_EQ(r.row, 1);
  EXPECT_EQ(r.column, 5);
  EXPECT_NE(r.message.find("twice"), std::string::npos) << r.message;
}

TEST(ScheduleFile, OpNeverRun) {
  // Micro-batch 1 exists (rank 0 runs it), but rank 1 never runs its forward.
  const Rejection r = rejection("0F0,0F1,0B0,0B1\n1F0,1B0\n");
  EXPECT_EQ(r.row, 2);
  EXPECT_NE(r.message.find("never run"), std::string::npos) << r.message;
}

TEST(ScheduleFile, WeightBeforeItsInputGradient) {
  const Rejection r = rejection("0F0,0W0,0I0\n");
  EXPECT_EQ(r.row, 1);
  EXPECT_EQ(r.column, 5);
  EXPECT_NE(r.message.find("before its I"), std::string::npos) << r.message;
}

TEST(ScheduleFile, StageHeldByTwoRanks) {
  const Rejection r = rejection("0F0,1F0,1B0,0B0\n1F0\n");
  EXPECT_EQ(r.row, 2);
  EXPECT_EQ(r.column, 1);
  EXPECT_NE(r.message.find("held by two ranks"), std::string::npos) << r.message;
}

TEST(ScheduleFile, ErrorTextIsFileRowColumn) {
  try {
    parse_schedule_csv("0F0,0Q0\n", "dir/s.csv", "s");
    FAIL();
  } catch (const ScheduleFileError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("dir/s.csv:1:5: ", 0), 0u) << e.what();
  }
}

// Ids come from the file: they may not size tables beyond what the file's ops can fill.
TEST(ScheduleFile, AbsurdIdsAreBoundedByTheOpsInTheFile) {
  // Was a table of 10^9 micro-batches (and signed overflow in the engine).
  const Rejection mb = rejection("0F0,0F999999999,0B0\n");
  EXPECT_EQ(mb.row, 1);
  EXPECT_EQ(mb.column, 5);
  EXPECT_EQ(mb.message,
            "micro-batch 999999999 makes 1 stages x 1000000000 micro-batches = 1000000000 (stage, "
            "micro-batch) pairs, each needing its own forward, but the file lists 3 ops (ids "
            "count from 0, without gaps)");
  const Rejection st = rejection("0F0,0B0\n999999999F0,999999999B0\n");
  EXPECT_EQ(st.row, 2);
  EXPECT_EQ(st.column, 1);
  EXPECT_NE(st.message.find("stage 999999999 makes 1000000000 stages"), std::string::npos)
      << st.message;
  // Ten digits would overflow int: not an id at all.
  EXPECT_NE(rejection("0F0,0F1234567890\n").message.find("unknown token"), std::string::npos);
  // A gap small enough for the file still gets validation's own message.
  EXPECT_NE(rejection("0F0,0F2,0B0,0B2\n").message.find("never run"), std::string::npos);
}

TEST(ScheduleFile, LongCellsAreCutInMessages) {
  const Rejection r = rejection("0F0," + std::string(10'000, 'x') + "\n");
  EXPECT_LT(r.message.size(), 200u);
  EXPECT_NE(r.message.find("xxx..."), std::string::npos) << r.message;
}

TEST(ScheduleFile, WhatIsNotAFileIsAnError) {
  const test::ScratchDir dir;
  try {
    load_schedule_file(dir.path().string());
    FAIL();
  } catch (const ScheduleFileError& e) {
    EXPECT_NE(e.message().find("is a directory"), std::string::npos) << e.what();
  }
  try {
    load_schedule_file("/dev/null");
    FAIL();
  } catch (const ScheduleFileError& e) {
    EXPECT_NE(e.message().find("no rows"), std::string::npos) << e.what();
  }
}

// Every built-in schedule, exported and replayed from the text, gives byte-identical JSON.
TEST(ScheduleFile, EveryBuiltinRoundTripsToIdenticalJson) {
  for (const auto& info : builtin_schedules())
    for (const auto& [p, m] : {std::pair{4, 8}, std::pair{3, 9}, std::pair{1, 4}}) {
      const int v = effective_vpp(info, 2);
      SCOPED_TRACE(std::string(info.name) + " p=" + std::to_string(p) + " m=" + std::to_string(m));
      const Schedule original = info.generate(ScheduleParams{p, m, v, {}});
      const std::string csv = schedule_to_csv(original);
      const Schedule replayed = parse_schedule_csv(csv, "x.csv", original.name);
      EXPECT_EQ(replayed.stage_rank, original.stage_rank);
      EXPECT_EQ(replayed.ops, original.ops);
      EXPECT_EQ(schedule_to_csv(replayed), csv);
      // Non-uniform costs and real transfers, so a reordering would show.
      const Topology topo(ClusterSpec{1, p, LinkSpec{100, 2}, LinkSpec{}});
      // clang 14 cannot capture a structured binding (P1091 came in clang 16): copy it.
      auto input = [&, ranks = p](const Schedule& s) {
        SimInput in;
        in.topology = &topo;
        for (int st = 0; st < s.num_stages; ++st) {
          StageCost c;
          c.forward = 1000 + 37 * st;
          c.backward_input = 1100 + 11 * st;
          c.backward_weight = 700;
          c.activation_bytes = 1 << 20;
          c.weight_grad_retained_bytes = 1 << 18;
          c.output_bytes = 1 << 16;
          in.stages.push_back(c);
        }
        for (int r = 0; r < ranks; ++r) in.rank_device.push_back(r);
        in.fb_overlap_factor = 0.8;
        return in;
      };
      const RunInfo run{original.name, p, v, m};
      const std::string a = summary_json(run, simulate(input(original), original)).dump(2);
      const std::string b = summary_json(run, simulate(input(replayed), replayed)).dump(2);
      EXPECT_EQ(a, b);
    }
}

// ---- through the CLI ---------------------------------------------------------------------

using test::run_cli;
using test::ScratchDir;

using test::kTiny;

TEST(ScheduleFileCli, MalformedFileExitsTwoWithRowAndColumn) {
  const ScratchDir dir;
  const std::string bad = test::write_file(dir.file("bad_schedule.csv"), "0F0,0B0\n1F0,1W0,1I0\n");
  const test::CliRun r = run_cli("simulate " + kTiny + " --schedule-file " + bad);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(bad + ":2:5: "), std::string::npos) << r.err;
}

TEST(ScheduleFileCli, ExportThenReplayGivesTheSameJson) {
  const ScratchDir dir;
  for (const char* name : {"1f1b", "zb-h1", "zb-v", "dualpipe-v", "zb-auto"}) {
    const std::string csv = dir.file(std::string("export_") + name + ".csv");
    const test::CliRun exported = run_cli(std::string("simulate ") + kTiny + " --json --schedule " +
                                          name + " --export-schedule " + csv);
    ASSERT_EQ(exported.code, 0) << exported.err;
    const test::CliRun replayed = run_cli("simulate " + kTiny + " --json --schedule-file " + csv);
    ASSERT_EQ(replayed.code, 0) << replayed.err;
    // The file's schedule is named after its path, at the top and in "job"; everything
    // else is identical.
    std::string a = exported.out, b = replayed.out;
    const std::string named_a = "\"schedule\": \"" + std::string(name) + "\"";
    const std::string named_b = "\"schedule\": \"" + csv + "\"";
    for (int both = 0; both < 2; ++both) {
      ASSERT_NE(a.find(named_a), std::string::npos) << name;
      ASSERT_NE(b.find(named_b), std::string::npos) << name;
      a.replace(a.find(named_a), named_a.size(), "");
      b.replace(b.find(named_b), named_b.size(), "");
    }
    EXPECT_EQ(a, b) << name;
  }
}

TEST(CompareCli, SortsByTimeAndPrintsJsonSummaries) {
  // tiny.yaml: p = 4, m = 8, F = I = W = 1 ms per stage: 1F1B 33 ms, ZB-H1 27 ms
  // (3m + (p-1)), GPipe 33 ms.
  const test::CliRun json = run_cli("compare " + kTiny + " --schedules 1f1b,zb-h1,gpipe --json");
  ASSERT_EQ(json.code, 0) << json.err;
  const auto list = nlohmann::json::parse(json.out);
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(list[0]["schedule"], "zb-h1");
  EXPECT_DOUBLE_EQ(list[0]["iteration_time_ms"].get<double>(), 27.0);
  EXPECT_EQ(list[1]["schedule"], "1f1b");
  EXPECT_EQ(list[2]["schedule"], "gpipe");
  EXPECT_DOUBLE_EQ(list[1]["iteration_time_ms"].get<double>(), 33.0);

  const test::CliRun table = run_cli("compare " + kTiny + " --schedules 1f1b,zb-v,dualpipe-v");
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_NE(table.out.find("zb-v"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("fits"), std::string::npos) << table.out;

  const test::CliRun unknown = run_cli("compare " + kTiny + " --schedules 1f1b,nope");
  EXPECT_EQ(unknown.code, 2);
  EXPECT_NE(unknown.err.find("unknown schedule 'nope'"), std::string::npos) << unknown.err;
}

}  // namespace
}  // namespace bmpipe
