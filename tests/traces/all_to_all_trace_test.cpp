// The expert-parallel all-to-all on its own thread of the Chrome trace (traces/chrome_trace.hpp):
// every exchange of the Mixtral example, at the duration the cost model gives one exchange,
// exposed inside its F or B, and with training.moe_overlap (interleaved) on the pair's comm
// stream.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/support.hpp"

namespace bmpipe {
namespace {

struct Event {
  double ts = 0, dur = 0;
  std::string name;
};

struct A2a {
  std::vector<Event> a2a;  // rank 0's all-to-all thread
  std::vector<Event> ops;  // rank 0's compute thread
};

A2a rank0(const std::string& extra) {
  const test::ScratchDir dir;
  const std::string trace = dir.file("t.json");
  const test::CliRun r = test::run_cli("simulate " + test::examples() +
                                       "h100_mixtral_8x7b_ep8.yaml --trace " + trace + extra);
  EXPECT_EQ(r.code, 0) << r.err;
  const nlohmann::json doc = nlohmann::json::parse(test::slurp(trace));
  int tid = -1;
  for (const auto& e : doc["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "thread_name" && e["pid"] == 0 &&
        e["args"]["name"] == "all-to-all")
      tid = e["tid"].get<int>();
  EXPECT_GE(tid, 0) << "no all-to-all thread on rank 0";
  A2a out;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] != "X" || e["pid"] != 0) continue;
    const Event ev{e["ts"].get<double>(), e["dur"].get<double>(), e["name"].get<std::string>()};
    if (e["tid"] == tid) out.a2a.push_back(ev);
    if (e["tid"] == 0 && e["cat"] == "op") out.ops.push_back(ev);
  }
  return out;
}

double a2a_us() {
  const test::CliRun r =
      test::run_cli("cost " + test::examples() + "h100_mixtral_8x7b_ep8.yaml --json --ops");
  const nlohmann::json c = nlohmann::json::parse(r.out);
  for (const auto& l : c["layers"])
    if (l["name"] == "moe_decoder")
      for (const auto& o : l["ops"])
        if (o["name"] == "a2a-dispatch") return o["forward_ms"].get<double>() * 1000;
  return 0;
}

void expect_inside_ops_and_apart(const A2a& t) {
  for (std::size_t k = 0; k < t.a2a.size(); ++k) {
    const Event& e = t.a2a[k];
    bool inside = false;
    for (const Event& op : t.ops)
      inside = inside || (e.ts >= op.ts - 1e-3 && e.ts + e.dur <= op.ts + op.dur + 1e-3);
    EXPECT_TRUE(inside) << "a2a at " << e.ts << " us is not inside an op";
    // One communication stream: no two exchanges at once.
    if (k > 0) {
      EXPECT_GE(e.ts + 1e-3, t.a2a[k - 1].ts + t.a2a[k - 1].dur);
    }
  }
}

TEST(AllToAllTrace, EveryExchangeOfTheMixtralExampleAtItsDuration) {
  const double us = a2a_us();
  ASSERT_GT(us, 0.0);
  const A2a t = rank0("");
  // Rank 0: 16 micro-batches x (F + B) x 8 MoE layers x (dispatch + combine).
  ASSERT_EQ(t.a2a.size(), 16u * 2 * 8 * 2);
  int dispatch = 0;
  for (const Event& e : t.a2a) {
    EXPECT_NEAR(e.dur, us, 1e-3);  // the cost model's exchange, rounded to ns
    dispatch += e.name == "a2a dispatch";
  }
  EXPECT_EQ(dispatch, 16 * 2 * 8);
  expect_inside_ops_and_apart(t);
  // Exposed: the first F's first exchange starts after its attention, before its end.
  EXPECT_GT(t.a2a[0].ts, t.ops[0].ts);
}

TEST(AllToAllTrace, PairsShowTheirExchangesOnTheCommStream) {
  const double us = a2a_us();
  // Interleaved, vpp 2: Megatron-Core needs virtual stages for the overlap at pp 4.
  const A2a t = rank0(
      " --set training.moe_overlap=true --set training.schedule=interleaved --set "
      "training.vpp=2");
  ASSERT_EQ(t.a2a.size(), 16u * 2 * 8 * 2);  // the same exchanges, now partly in F&B pairs
  int pairs = 0;
  for (const Event& op : t.ops) pairs += op.name == "F&B";
  // Rank 0 runs 16 x 2 chunk forwards; Megatron-Core's interleaved warm-up is
  // 2 (p - 1) + (v - 1) p = 6 + 4 = 10 of them, one more under the overlap: 11 alone.
  EXPECT_EQ(pairs, 16 * 2 - 11);
  for (const Event& e : t.a2a) EXPECT_NEAR(e.dur, us, 1e-3);
  expect_inside_ops_and_apart(t);
}

}  // namespace
}  // namespace bmpipe
