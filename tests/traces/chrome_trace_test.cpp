// The Chrome/Perfetto trace, read back: invariants on every built-in schedule, causes of
// bubbles on cases whose timing is known by hand, determinism and streaming.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <streambuf>

#include "support/support.hpp"
#include "trace_checks.hpp"

namespace bmpipe {
namespace {

using test::check_trace_invariants;
using test::ParsedTrace;

using test::kMs;

std::string trace_of(const SimInput& in, const Schedule& sch, SimResult* result,
                     const TraceLabels& labels = {}) {
  std::ostringstream out;
  *result = simulate_with_trace(in, sch, out, labels);
  return out.str();
}

// Every built-in schedule, with unequal stages, real transfers (latency and bandwidth, so
// that transfers overlap and queue), activation memory and recompute.
class EverySchedule : public ::testing::TestWithParam<std::string> {};

TEST_P(EverySchedule, TraceInvariantsHold) {
  const std::string name = GetParam();
  Schedule sch;
  try {
    sch = test::schedule_named(name, 4, 8, effective_vpp(*find_schedule(name), 2));
  } catch (const std::exception& e) {
    GTEST_SKIP() << name << " does not take p=4, m=8: " << e.what();
  }
  const auto topo = test::node(4, /*latency_us=*/300, /*bandwidth_GBps=*/1);
  SimInput in = test::uniform(sch, *topo, 1 * kMs, 1 * kMs, 1 * kMs, 1 << 20, 500'000);
  for (int s = 0; s < sch.num_stages; ++s) {
    in.stages[s].forward += s * 100'000;  // unequal stages
    in.stages[s].recompute = s % 2 ? 200'000 : 0;
  }
  in.static_bytes.assign(4, 1 << 30);
  in.capacity_bytes.assign(4, 2LL << 30);
  SimResult r;
  const std::string text = trace_of(in, sch, &r);
  ASSERT_TRUE(r.ok) << r.error;
  check_trace_invariants(text, sch, r);
}

std::vector<std::string> schedule_names_list() {
  std::vector<std::string> v;
  for (const auto& s : builtin_schedules()) v.emplace_back(s.name);
  return v;
}

INSTANTIATE_TEST_SUITE_P(Builtins, EverySchedule, ::testing::ValuesIn(schedule_names_list()),
                         [](const auto& param_info) {
                           std::string n = param_info.param;
                           for (char& c : n)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });

TEST(ChromeTrace, ProcessesThreadsAndOpArgs) {
  const Schedule sch = make_1f1b(ScheduleParams{4, 4, 1});
  const auto topo = test::node(4);
  const SimInput in = test::uniform(sch, *topo, 1 * kMs, 1 * kMs, 1 * kMs);
  SimResult r;
  const std::string text = trace_of(
      in, sch, &r, TraceLabels{{"layers 0-1", "layers 2-3", "layers 4-5", "layers 6-7"}, {}, {}});
  const ParsedTrace t = check_trace_invariants(text, sch, r);
  EXPECT_EQ(t.process_names.at(3), "rank 3 \u00b7 node 0 \u00b7 dev 3 \u00b7 stage 3");
  int threads_named = 0;
  for (const auto& e : t.doc["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "thread_name" && e["pid"] == 2)
      threads_named += e["args"]["name"] == "compute" || e["args"]["name"] == "comm";
  EXPECT_EQ(threads_named, 2);
  // Rank 2's third op in 1F1B is B of micro-batch 0 (one warm-up forward, then F, B).
  const auto& ops = t.threads.at({2, 0});
  std::vector<const test::Slice*> only_ops;
  for (const auto& s : ops)
    if (s.cat == "op") only_ops.push_back(&s);
  ASSERT_GE(only_ops.size(), 3u);
  EXPECT_EQ(only_ops[2]->name, "B");
  EXPECT_EQ(only_ops[2]->args["stage"], 2);
  EXPECT_EQ(only_ops[2]->args["chunk"], 0);
  EXPECT_EQ(only_ops[2]->args["microbatch"], 0);
  EXPECT_EQ(only_ops[2]->args["layers"], "layers 4-5");
  EXPECT_EQ(only_ops[2]->args["recompute"], "none");
}

// chrome://tracing stacks the series of one counter event, so each quantity is its own
// counter with one series. 1F1B, p = 4, m = 8, 1000 bytes of activations per micro-batch:
// rank r holds p - r micro-batches at its peak.
TEST(ChromeTrace, MemoryIsOneCounterPerQuantity) {
  const int p = 4;
  const Schedule sch = make_1f1b(ScheduleParams{p, 8, 1});
  const auto topo = test::node(p);
  SimInput in = test::uniform(sch, *topo, 1 * kMs, 1 * kMs, 1 * kMs, 1000);
  in.static_bytes = {1'000'000, 2'000'000, 3'000'000, 4'000'000};
  SimResult r;
  const ParsedTrace t = check_trace_invariants(trace_of(in, sch, &r), sch, r);
  std::map<int, std::map<std::string, std::int64_t>> most;  // pid -> counter -> max
  std::map<int, std::map<std::string, int>> samples;
  for (const auto& e : t.doc["traceEvents"]) {
    if (e["ph"] != "C") continue;
    ASSERT_EQ(e["args"].size(), 1u) << e.dump();
    const int pid = e["pid"];
    const std::string name = e["name"];
    const std::int64_t bytes = e["args"]["bytes"];
    most[pid][name] = std::max(most[pid][name], bytes);
    ++samples[pid][name];
  }
  ASSERT_EQ(most.size(), static_cast<std::size_t>(p));
  for (int rank = 0; rank < p; ++rank) {
    const std::int64_t stat = (rank + 1) * 1'000'000, act = (p - rank) * 1000;
    EXPECT_EQ(most[rank]["static memory"], stat) << rank;
    EXPECT_EQ(most[rank]["activation memory"], act) << rank;
    EXPECT_EQ(most[rank]["total memory"], stat + act) << rank;
    EXPECT_EQ(most[rank].size(), 3u) << rank;
    EXPECT_EQ(samples[rank]["static memory"], 1) << rank;
    // A sample at time 0, then one at every F start and B end: 1 + 2 m.
    EXPECT_EQ(samples[rank]["activation memory"], 1 + 2 * 8) << rank;
    EXPECT_EQ(samples[rank]["total memory"], 1 + 2 * 8) << rank;
  }
}

// pid = rank and process_sort_index = rank, so viewers that honour it and viewers that
// sort by pid both list ranks in order; every thread has a sort index too.
TEST(ChromeTrace, ProcessesSortInRankOrder) {
  const int p = 12;  // two-digit ranks: "rank 10" must not sort before "rank 2"
  const Schedule sch = make_1f1b(ScheduleParams{p, 16, 1});
  const auto topo = test::node(p, 5, 1);
  const SimInput in = test::uniform(sch, *topo, 1 * kMs, 1 * kMs, 1 * kMs, 0, 1'000'000);
  SimResult r;
  const ParsedTrace t = check_trace_invariants(trace_of(in, sch, &r), sch, r);
  std::map<int, int> sort_index;
  std::map<std::pair<int, int>, int> thread_index;
  std::set<std::pair<int, int>> threads_named;
  for (const auto& e : t.doc["traceEvents"]) {
    if (e["ph"] != "M") continue;
    const int pid = e["pid"], tid = e["tid"];
    if (e["name"] == "process_sort_index") {
      EXPECT_EQ(sort_index.count(pid), 0u) << "pid " << pid << " sorted twice";
      sort_index[pid] = e["args"]["sort_index"].get<int>();
    }
    if (e["name"] == "thread_sort_index") thread_index[{pid, tid}] = e["args"]["sort_index"];
    if (e["name"] == "thread_name") threads_named.insert({pid, tid});
  }
  ASSERT_EQ(sort_index.size(), static_cast<std::size_t>(p));
  for (int rank = 0; rank < p; ++rank) {
    EXPECT_EQ(sort_index.at(rank), rank);
    EXPECT_EQ(t.process_names.at(rank).rfind("rank " + std::to_string(rank) + " \u00b7", 0), 0u);
  }
  for (const auto& key : threads_named) {
    ASSERT_TRUE(thread_index.count(key)) << key.first << "/" << key.second;
    EXPECT_EQ(thread_index[key], key.second) << "compute 0, comm lanes 1, 2, ...";
  }
  // Every event belongs to one of the p processes.
  for (const auto& e : t.doc["traceEvents"]) {
    const int pid = e["pid"];
    EXPECT_TRUE(pid >= 0 && pid < p) << e.dump();
  }
}

TEST(ChromeTrace, InterleavedProcessNameListsEveryStage) {
  if (!find_schedule("interleaved")) GTEST_SKIP() << "no interleaved schedule";
  const Schedule sch = test::schedule_named("interleaved", 4, 8, 3);
  const auto topo = test::node(4);
  const SimInput in = test::uniform(sch, *topo, 1 * kMs, 1 * kMs, 1 * kMs);
  SimResult r;
  const ParsedTrace t = check_trace_invariants(trace_of(in, sch, &r), sch, r);
  // Stage s lives on rank s mod p.
  EXPECT_EQ(t.process_names.at(1), "rank 1 \u00b7 node 0 \u00b7 dev 1 \u00b7 stage 1,5,9");
  for (const auto& s : t.threads.at({1, 0}))
    if (s.cat == "op") {
      EXPECT_EQ(s.args["chunk"].get<int>(), s.args["stage"].get<int>() / 4);
    }
}

// 1F1B, p = 4, F = 1 ms, B = 2 ms, free communication: rank r waits r F for its first
// input (warm-up); its last backward ends r B before rank 0's, at (m + p - 1)(F + B) - r B,
// so it cools down for r B.
TEST(ChromeTrace, WarmUpAndCoolDownBubblesOfOneFOneB) {
  const int p = 4, m = 8;
  const Schedule sch = make_1f1b(ScheduleParams{p, m, 1});
  const auto topo = test::node(p);
  const SimInput in = test::uniform(sch, *topo, 1 * kMs, 1 * kMs, 1 * kMs);
  SimResult r;
  const ParsedTrace t = check_trace_invariants(trace_of(in, sch, &r), sch, r);
  const Time total = (m + p - 1) * 3 * kMs;
  ASSERT_EQ(r.pipeline_time, total);
  for (int rank = 0; rank < p; ++rank) {
    const auto& c = t.threads.at({rank, 0});
    Time warm = 0, cool = 0;
    for (const auto& s : c)
      if (s.cat == "bubble") {
        if (s.args["cause"] == "warm-up") warm += s.end - s.start;
        if (s.args["cause"] == "cool-down") cool += s.end - s.start;
      }
    EXPECT_EQ(warm, rank * kMs) << "rank " << rank;
    EXPECT_EQ(cool, rank * 2 * kMs) << "rank " << rank;
    if (rank > 0) {  // the first bubble is the warm-up, the last the cool-down
      EXPECT_EQ(c.front().args["cause"], "warm-up");
      EXPECT_EQ(c.back().args["cause"], "cool-down");
    }
  }
}

// Two ranks, link latency L = 0.5 ms, no bytes: rank 1's first F waits F (rank 0 computing)
// and then L (the wire). The gap splits exactly at rank 0's F end.
TEST(ChromeTrace, GapSplitsIntoInputWaitAndTransferWait) {
  const Schedule sch = make_1f1b(ScheduleParams{2, 2, 1});
  const auto topo = test::node(2, /*latency_us=*/500);
  const SimInput in = test::uniform(sch, *topo, 1 * kMs, 1 * kMs, 1 * kMs);
  SimResult r;
  const ParsedTrace t = check_trace_invariants(trace_of(in, sch, &r), sch, r);
  const auto& c1 = t.threads.at({1, 0});
  ASSERT_GE(c1.size(), 3u);
  EXPECT_EQ(c1[0].args["cause"], "warm-up");
  EXPECT_EQ(c1[0].start, 0);
  EXPECT_EQ(c1[0].end, 1 * kMs);
  EXPECT_EQ(c1[1].args["cause"], "waiting for transfer");
  EXPECT_EQ(c1[1].start, 1 * kMs);
  EXPECT_EQ(c1[1].end, 1 * kMs + 500'000);
  EXPECT_EQ(c1[2].name, "F");
  // Rank 0 after F0 F1 waits for B's gradient: rank 1 computes F0 and B0 until
  // 1.5 + 1 + 2 = 4.5 ms (input wait from stage 1 on device 1), then 0.5 ms of wire.
  const auto& c0 = t.threads.at({0, 0});
  ASSERT_GE(c0.size(), 4u);
  EXPECT_EQ(c0[2].args["cause"], "waiting for input from stage 1 on device 1");
  EXPECT_EQ(c0[2].args["from_stage"], 1);
  EXPECT_EQ(c0[2].start, 2 * kMs);
  EXPECT_EQ(c0[2].end, 4 * kMs + 500'000);
  EXPECT_EQ(c0[3].args["cause"], "waiting for transfer");
  EXPECT_EQ(c0[3].end, 5 * kMs);
  // The transfer that carried it sits on rank 1's comm thread, 0.5 ms long.
  const auto& comm = t.threads.at({1, 1});
  ASSERT_FALSE(comm.empty());
  EXPECT_EQ(comm.front().end - comm.front().start, 500'000);
}

TEST(ChromeTrace, TailWorkAndItsBubble) {
  const int p = 2, m = 2;
  const Schedule sch = make_1f1b(ScheduleParams{p, m, 1});
  const auto topo = test::node(p);
  SimInput in = test::uniform(sch, *topo, 1 * kMs, 1 * kMs, 1 * kMs);
  in.tail_time = {1 * kMs, 10 * kMs};  // rank 1 ends first but has the longer tail
  SimResult r;
  const ParsedTrace t = check_trace_invariants(trace_of(in, sch, &r), sch, r);
  // Pipeline (m+p-1)(F+B) = 9 ms; rank 1 ends its last op at 7 ms, tail until 17 ms.
  ASSERT_EQ(r.pipeline_time, 9 * kMs);
  ASSERT_EQ(r.iteration_time, 17 * kMs);
  Time dp_wait = 0;
  for (const auto& s : t.threads.at({0, 0}))
    if (s.cat == "bubble" && s.args["cause"] == "dp all-reduce/optimizer")
      dp_wait += s.end - s.start;
  EXPECT_EQ(dp_wait, 17 * kMs - 10 * kMs);  // rank 0: ops to 9, own tail to 10, waits to 17
  int tails = 0;
  for (const auto& [key, v] : t.threads)
    for (const auto& s : v) tails += s.cat == "tail";
  EXPECT_EQ(tails, 2);
}

// Two ranks holding two stages each (0 and 2 on rank 0, 1 and 3 on rank 1), one
// micro-batch, F = I = W = 1 ms: rank 0 runs F0 F2 B2 B0 ending at 8 and 12 ms, rank 1
// F1 F3 B3 B1 ending at 6 and 10 ms (tests/sim/grad_reduce_test.cpp works it through).
TEST(ChromeTrace, GradientReductionsOnTheirThreadThenTheTail) {
  const Schedule sch = test::two_chunk_schedule();
  const auto topo = test::node(2);
  SimInput in = test::uniform(sch, *topo, 1 * kMs, 1 * kMs, 1 * kMs);
  // Each stage reduced in one piece: one bucket, ready when its gradients are complete.
  in.grad_buckets = {
      {GradBucket{3 * kMs}}, {GradBucket{1 * kMs}}, {GradBucket{5 * kMs}}, {GradBucket{6 * kMs}}};
  in.overlap_grad_reduce = true;
  in.tied_reduce = PairReduction{0, 1, 4 * kMs};
  in.tail_time = {1 * kMs, 2 * kMs};
  SimResult r;
  const ParsedTrace t = check_trace_invariants(trace_of(in, sch, &r), sch, r);
  ASSERT_EQ(r.iteration_time, 22 * kMs);
  // Rank 0: stage 2 [8, 13], stage 0 [13, 16]; rank 1: stage 3 [6, 12], stage 1 [12, 13];
  // the tied all-reduce waits for both, [16, 20].
  const std::map<int, std::vector<std::tuple<std::string, Time, Time>>> want = {
      {0,
       {{"dp reduce stage 2", 8, 13},
        {"dp reduce stage 0", 13, 16},
        {"tied embedding all-reduce", 16, 20}}},
      {1,
       {{"dp reduce stage 3", 6, 12},
        {"dp reduce stage 1", 12, 13},
        {"tied embedding all-reduce", 16, 20}}}};
  for (const auto& [rank, slices] : want) {
    const auto& got = t.threads.at({rank, 1 << 20});
    ASSERT_EQ(got.size(), slices.size()) << rank;
    for (std::size_t k = 0; k < slices.size(); ++k) {
      EXPECT_EQ(got[k].cat, "reduce");
      EXPECT_EQ(got[k].name, std::get<0>(slices[k]));
      EXPECT_EQ(got[k].start, std::get<1>(slices[k]) * kMs);
      EXPECT_EQ(got[k].end, std::get<2>(slices[k]) * kMs);
    }
  }
  // The compute thread waits for the reductions, then runs the optimizer step.
  const auto find = [&](int rank, const std::string& cat) {
    for (const auto& s : t.threads.at({rank, 0}))
      if (s.cat == cat && (cat != "bubble" || s.args["cause"] == "waiting for gradient reduction"))
        return s;
    ADD_FAILURE() << "no " << cat << " on rank " << rank;
    return test::Slice{};
  };
  EXPECT_EQ(find(0, "bubble").start, 12 * kMs);
  EXPECT_EQ(find(0, "bubble").end, 20 * kMs);
  EXPECT_EQ(find(1, "bubble").start, 10 * kMs);
  EXPECT_EQ(find(0, "tail").name, "optimizer step");
  EXPECT_EQ(find(0, "tail").start, 20 * kMs);
  EXPECT_EQ(find(1, "tail").end, 22 * kMs);
}

TEST(ChromeTrace, SameInputGivesIdenticalBytes) {
  const Schedule sch = make_1f1b(ScheduleParams{4, 16, 1});
  const auto topo = test::node(4, 50, 10);
  const SimInput in = test::uniform(sch, *topo, 1 * kMs, 1 * kMs, 1 * kMs, 1000, 1'000'000);
  SimResult a, b;
  const std::string ta = trace_of(in, sch, &a);
  const std::string tb = trace_of(in, sch, &b);
  EXPECT_EQ(ta, tb);
  EXPECT_GT(ta.size(), 1000u);
}

TEST(ChromeTrace, DeadlockStillGivesValidJson) {
  Schedule sch = make_1f1b(ScheduleParams{2, 2, 1});
  std::swap(sch.ops[1][0], sch.ops[1][1]);  // B before its F: rank 1 blocks forever
  const auto topo = test::node(2);
  const SimInput in = test::uniform(sch, *topo, 1 * kMs, 1 * kMs, 1 * kMs);
  SimResult r;
  const std::string text = trace_of(in, sch, &r);
  EXPECT_FALSE(r.ok);
  const auto doc = nlohmann::json::parse(text);
  EXPECT_EQ(doc["otherData"]["complete"], false);
}

// A streambuf that counts bytes and keeps none: the trace is written while the run goes,
// not at the end.
class Counting : public std::streambuf {
 public:
  std::size_t bytes = 0;

 protected:
  int_type overflow(int_type c) override {
    if (c != traits_type::eof()) ++bytes;
    return c;
  }
  std::streamsize xsputn(const char*, std::streamsize n) override {
    bytes += static_cast<std::size_t>(n);
    return n;
  }
};

TEST(ChromeTrace, StreamsWhileTheRunGoes) {
  const Schedule sch = make_1f1b(ScheduleParams{8, 256, 1});
  const auto topo = test::node(8, 5, 100);
  const SimInput in = test::uniform(sch, *topo, 1 * kMs, 1 * kMs, 1 * kMs, 1000, 1'000'000);
  Counting sink;
  std::ostream out(&sink);
  ChromeTraceWriter writer(out, in, sch);
  const SimResult r = simulate(in, sch, &writer);
  ASSERT_TRUE(r.ok);
  const std::size_t before = sink.bytes;
  writer.finish();
  EXPECT_GT(before, sink.bytes * 9 / 10) << "most of the trace must be out before finish()";
}

}  // namespace
}  // namespace bmpipe
