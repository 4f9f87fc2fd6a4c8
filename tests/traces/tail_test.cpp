// The end of the iteration in the outputs (issue 16, "the tail as one concept"): the trace
// and the picture draw each rank's tail work where the engine started it
// (DeviceResult::tail_start), and the gradient reductions the engine ran on their own
// stream reach the trace even when the CLI tees the run to a trace and a picture.
//
// The bug this holds down: `bmpipe simulate gpt3_175b_a100.yaml --set
// training.optimizer.overlap_grad_reduce=true --trace t.json` wrote no reduction thread
// (the tee dropped on_reduction), drew the tail right after the last op and ended the
// trace near 30 305 ms while the iteration took 30 781 ms.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "experiment/experiment.hpp"
#include "support/run_config.hpp"
#include "support/support.hpp"
#include "trace_checks.hpp"
#include "traces/svg.hpp"

namespace bmpipe {
namespace {

using test::kMs;
constexpr int kReduceTid = 1 << 20;  // the trace's gradient-reduction thread

const std::string kGpt3 = test::examples() + "gpt3_175b_a100.yaml";
const std::string kOverlap = " --set training.optimizer.overlap_grad_reduce=true";

// Per rank, the tail rectangle's tooltip: "rank r: <what>, <len> ms (<start> ms – <end> ms)".
struct TailRect {
  std::string what;
  double start_ms = 0, end_ms = 0;
};
std::map<int, TailRect> tail_rects(const std::string& svg) {
  static const std::regex title(
      R"re(<title>rank (\d+): ([^,]+), [0-9.]+ ms \(([0-9.]+) ms \S+ ([0-9.]+) ms\)</title>)re");
  std::map<int, TailRect> out;
  const std::string open = "<rect class=\"tail\"";
  for (std::size_t at = svg.find(open); at != std::string::npos; at = svg.find(open, at + 1)) {
    const std::string rect = svg.substr(at, svg.find("</rect>", at) - at + 7);
    std::smatch m;
    EXPECT_TRUE(std::regex_search(rect, m, title)) << rect;
    if (!m.empty()) out[std::stoi(m[1])] = TailRect{m[2], std::stod(m[3]), std::stod(m[4])};
  }
  return out;
}

TEST(Tail, OverlappedReductionsReachTheCliTraceAndItEndsWithTheIteration) {
  const test::ScratchDir dir;
  const std::string trace = dir.file("t.json"), svg = dir.file("t.svg");
  const test::CliRun run =
      test::run_cli("simulate " + kGpt3 + kOverlap + " --json --trace " + trace + " --svg " + svg);
  ASSERT_EQ(run.code, 0) << run.all();
  const auto summary = nlohmann::json::parse(run.out);
  const double iteration_ms = summary.at("iteration_time_ms").get<double>();

  // The same run in-process is the reference.
  Config config = load_config(kGpt3);
  config.training.optimizer.overlap_grad_reduce = true;
  const test::Prepared prepared = test::prepare_run(config);
  const SimResult r = simulate(prepared.input, prepared.schedule);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_NEAR(iteration_ms, ns_to_ms(r.iteration_time), 1e-3);
  bool reductions_hide_a_tail = false;  // otherwise the test could not tell the bug
  for (const DeviceResult& d : r.devices)
    reductions_hide_a_tail = reductions_hide_a_tail || d.tail_start > d.last_end;
  ASSERT_TRUE(reductions_hide_a_tail);

  const test::ParsedTrace t =
      test::check_trace_invariants(test::slurp(trace), prepared.schedule, r);
  // Every rank names its gradient-reduction thread and has reductions on it.
  std::set<int> named;
  for (const auto& e : t.doc.at("traceEvents"))
    if (e.at("ph") == "M" && e.at("name") == "thread_name" && e.value("tid", -1) == kReduceTid)
      named.insert(e.at("pid").get<int>());
  EXPECT_EQ(named.size(), static_cast<std::size_t>(prepared.schedule.num_ranks));
  for (int rank : named) {
    ASSERT_TRUE(t.threads.count({rank, kReduceTid})) << rank;
    EXPECT_FALSE(t.threads.at({rank, kReduceTid}).empty()) << rank;
  }
  // The last event ends with the iteration (to the trace's microsecond rounding), and each
  // rank's tail, the optimizer step alone, starts where the engine started it.
  Time last = 0;
  for (const auto& [key, slices] : t.threads)
    for (const test::Slice& s : slices) last = std::max(last, s.end);
  EXPECT_NEAR(static_cast<double>(last), static_cast<double>(r.iteration_time), 1.0);
  EXPECT_NEAR(ns_to_ms(last), iteration_ms, 1e-3);
  EXPECT_EQ(test::ns(t.doc.at("otherData").at("iteration_time_us")), r.iteration_time);
  for (const DeviceResult& d : r.devices) {
    int tails = 0;
    for (const test::Slice& s : t.threads.at({d.rank, 0}))
      if (s.cat == "tail") {
        ++tails;
        EXPECT_EQ(s.name, "optimizer step") << d.rank;
        EXPECT_EQ(s.start, d.tail_start) << d.rank;
      }
    EXPECT_EQ(tails, 1) << d.rank;
  }

  // The picture of the same run draws each tail from its tail_start.
  const std::map<int, TailRect> rects = tail_rects(test::slurp(svg));
  ASSERT_EQ(rects.size(), r.devices.size());
  for (const DeviceResult& d : r.devices) {
    EXPECT_EQ(rects.at(d.rank).what, "optimizer step") << d.rank;
    EXPECT_NEAR(rects.at(d.rank).start_ms, ns_to_ms(d.tail_start), 1e-3) << d.rank;
  }
}

// Two ranks holding two stages each, one micro-batch, F = I = W = 1 ms (the run of
// tests/sim/grad_reduce_test.cpp): rank 0's ops end at 12 ms, its reductions at 16 ms and
// the tied all-reduce at 20 ms, so its tail starts 8 ms after its last op.
const auto two_chunks = test::two_chunk_schedule;

TEST(Tail, TheSvgDrawsTheTailFromTailStart) {
  const Schedule sch = two_chunks();
  const auto topo = test::node(2);
  SimInput in = test::uniform(sch, *topo, kMs, kMs, kMs);
  in.grad_buckets = test::whole_stages({3 * kMs, 1 * kMs, 5 * kMs, 6 * kMs});
  in.overlap_grad_reduce = true;
  in.tied_reduce = PairReduction{0, 1, 4 * kMs};
  in.tail_time = {1 * kMs, 2 * kMs};
  SimResult r;
  const Timeline timeline = record_timeline(in, sch, {}, &r);
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_EQ(r.devices[0].last_end, 12 * kMs);
  ASSERT_EQ(r.devices[0].tail_start, 20 * kMs);
  std::ostringstream out;
  write_timeline_svg(out, timeline);
  const std::map<int, TailRect> rects = tail_rects(out.str());
  ASSERT_EQ(rects.size(), 2u) << out.str();
  EXPECT_EQ(rects.at(0).what, "optimizer step");
  EXPECT_DOUBLE_EQ(rects.at(0).start_ms, 20.0);
  EXPECT_DOUBLE_EQ(rects.at(0).end_ms, 21.0);
  EXPECT_DOUBLE_EQ(rects.at(1).start_ms, 20.0);
  EXPECT_DOUBLE_EQ(rects.at(1).end_ms, 22.0);
  // The rectangle itself sits where the time axis puts 20 ms. Every forward box is 1 ms
  // wide and the leftmost starts at 0: together they give the origin and the scale.
  const auto els = test::parse_svg(out.str());
  const auto tails = test::select(els, "rect", "tail");
  ASSERT_EQ(tails.size(), 2u);
  double origin = 1e300, ms = 0;
  for (const auto* e : test::select(els, "rect", "op F"))
    origin = std::min(origin, e->num("x")), ms = e->num("width");
  ASSERT_GT(ms, 0);
  // (The file rounds to 0.01 px, and 20 widths add up 20 such roundings.)
  EXPECT_NEAR(tails[0]->num("x"), origin + 20 * ms, 0.25);
  EXPECT_NEAR(tails[0]->num("width"), ms, 0.05);
}

// Without reductions the tail (the optimizer step) is drawn right after the last op.
TEST(Tail, WithoutReductionsTheTailFollowsTheLastOp) {
  const Schedule sch = two_chunks();
  const auto topo = test::node(2);
  SimInput in = test::uniform(sch, *topo, kMs, kMs, kMs);
  in.tail_time = {1 * kMs, 2 * kMs};
  std::ostringstream out;
  write_timeline_svg(out, record_timeline(in, sch));
  const std::map<int, TailRect> rects = tail_rects(out.str());
  ASSERT_EQ(rects.size(), 2u);
  EXPECT_EQ(rects.at(0).what, "optimizer step");
  EXPECT_DOUBLE_EQ(rects.at(0).start_ms, 12.0);
  EXPECT_DOUBLE_EQ(rects.at(1).start_ms, 10.0);
  EXPECT_EQ(out.str().find("grad-reduce-wait"), std::string::npos);
}

// Reductions after the last op (no overlap): the rank waits for them, drawn as a lighter
// block from its last op to the tail, whose width is the reduction's 3 ms and 4 ms.
TEST(Tail, ReductionsAfterTheLastOpAreAWaitBeforeTheTail) {
  const Schedule sch = two_chunks();
  const auto topo = test::node(2);
  SimInput in = test::uniform(sch, *topo, kMs, kMs, kMs);
  in.tail_time = {1 * kMs, 2 * kMs};
  in.grad_buckets = {{GradBucket{3 * kMs, 1.0, 1.0}}, {GradBucket{4 * kMs, 1.0, 1.0}}, {}, {}};
  SimResult r;
  const Timeline timeline = record_timeline(in, sch, {}, &r);
  ASSERT_TRUE(r.ok) << r.error;
  std::ostringstream out;
  write_timeline_svg(out, timeline);
  const std::map<int, TailRect> rects = tail_rects(out.str());
  ASSERT_EQ(rects.size(), 2u);
  for (int rank = 0; rank < 2; ++rank) {
    const Time last = r.devices[rank].last_end;
    const Time reduce = rank == 0 ? 3 * kMs : 4 * kMs;  // stage 0 is rank 0's, stage 1 rank 1's
    EXPECT_EQ(r.devices[rank].tail_start, last + reduce) << rank;
    EXPECT_DOUBLE_EQ(rects.at(rank).start_ms, static_cast<double>(last + reduce) / kMs) << rank;
  }
  const auto waits = test::select(test::parse_svg(out.str()), "rect", "grad-reduce-wait");
  EXPECT_EQ(waits.size(), 2u);
  EXPECT_NE(out.str().find("waiting for dp gradient reduction</text>"), std::string::npos)
      << "legend";
}

TEST(Tail, TheMemoryPictureNamesTheTailThatRan) {
  // With overlapped reductions the work after the last op is the optimizer step (the
  // reductions ran on their own stream); without, the reductions then the step.
  const test::ScratchDir dir;
  const std::string overlapped = dir.file("o.svg"), blocking = dir.file("b.svg");
  ASSERT_EQ(test::run_cli("simulate " + kGpt3 + kOverlap + " --memory-svg " + overlapped).code, 0);
  ASSERT_EQ(test::run_cli("simulate " + kGpt3 + " --memory-svg " + blocking).code, 0);
  const std::string o = test::slurp(overlapped), b = test::slurp(blocking);
  EXPECT_NE(o.find("last op ends; then the optimizer step, after the overlapped reductions"),
            std::string::npos);
  EXPECT_EQ(o.find("dp all-reduce + optimizer"), std::string::npos);
  EXPECT_NE(b.find("last op ends; then the dp reductions, then the optimizer step"),
            std::string::npos);
}

}  // namespace
}  // namespace bmpipe
