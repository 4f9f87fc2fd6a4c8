#pragma once
// Reads a written Chrome trace back (nlohmann-json) and checks the invariants of issue 5.
// Everything here is derived from the file alone; the SimResult is only the reference the
// file must agree with.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "schedules/registry.hpp"
#include "sim/simulate.hpp"
#include "traces/chrome_trace.hpp"

namespace bmpipe::test {

/// Microseconds in the file back to integer nanoseconds (the writer prints exact decimals).
inline Time ns(const nlohmann::json& us) {
  return static_cast<Time>(std::llround(us.get<double>() * 1000.0));
}

struct Slice {
  Time start = 0, end = 0;
  std::string cat, name;
  nlohmann::json args;
};

struct ParsedTrace {
  nlohmann::json doc;
  // (pid, tid) -> X slices sorted by start
  std::map<std::pair<int, int>, std::vector<Slice>> threads;
  std::map<int, std::string> process_names;
};

inline ParsedTrace parse_trace(const std::string& text) {
  ParsedTrace t;
  t.doc = nlohmann::json::parse(text);  // throws on malformed JSON: the test fails
  for (const auto& e : t.doc.at("traceEvents")) {
    const std::string ph = e.at("ph");
    if (ph == "X") {
      Slice s;
      s.start = ns(e.at("ts"));
      s.end = s.start + ns(e.at("dur"));
      s.cat = e.value("cat", "");
      s.name = e.at("name");
      s.args = e.value("args", nlohmann::json::object());
      t.threads[{e.at("pid").get<int>(), e.at("tid").get<int>()}].push_back(std::move(s));
    } else if (ph == "M" && e.at("name") == "process_name") {
      t.process_names[e.at("pid").get<int>()] = e.at("args").at("name");
    }
  }
  for (auto& [key, v] : t.threads)
    std::stable_sort(v.begin(), v.end(),
                     [](const Slice& a, const Slice& b) { return a.start < b.start; });
  return t;
}

/// Checks every invariant against the run's result; returns the parsed trace for more.
inline ParsedTrace check_trace_invariants(const std::string& text, const Schedule& schedule,
                                          const SimResult& result) {
  ParsedTrace t = parse_trace(text);
  EXPECT_TRUE(result.ok) << result.error;
  const int p = schedule.num_ranks;
  const Time end = result.iteration_time;

  std::size_t op_slices = 0;
  for (int r = 0; r < p; ++r) {
    const auto& compute = t.threads[{r, 0}];
    // Compute slices (ops) never overlap on one device.
    Time last_op_end = 0;
    for (const auto& s : compute) {
      EXPECT_LE(s.start, s.end);
      if (s.cat != "op") continue;
      ++op_slices;
      EXPECT_GE(s.start, last_op_end)
          << "rank " << r << ": op " << s.name << " overlaps the previous op";
      last_op_end = s.end;
    }
    // Ops, bubbles (and tail work) tile [0, iteration end] exactly: no gap, no overlap.
    Time cursor = 0;
    for (const auto& s : compute) {
      EXPECT_EQ(s.start, cursor) << "rank " << r << ": " << s.cat << " " << s.name << " at "
                                 << s.start;
      cursor = s.end;
      if (s.cat == "bubble") {
        EXPECT_GT(s.end, s.start) << "empty bubble on rank " << r;
        const std::string cause = s.args.at("cause");
        const bool known = cause == "warm-up" || cause == "cool-down" ||
                           cause == "waiting for transfer" || cause == "dp all-reduce/optimizer" ||
                           cause == "waiting for gradient reduction" ||
                           cause.rfind("waiting for input from stage ", 0) == 0;
        EXPECT_TRUE(known) << cause;
      }
    }
    EXPECT_EQ(cursor, end) << "rank " << r << ": compute + bubbles do not reach the iteration end";
    // Comm lanes: no overlapping slices on one thread (Perfetto needs perfect nesting).
    for (int tid = 1; t.threads.count({r, tid}); ++tid) {
      Time lane_end = 0;
      for (const auto& s : t.threads[{r, tid}]) {
        EXPECT_GE(s.start, lane_end) << "rank " << r << " comm lane " << tid;
        lane_end = std::max(lane_end, s.end);
      }
    }
  }
  EXPECT_EQ(op_slices, schedule.total_ops());

  // Memory: the counter's maximum is the reported peak; one peak marker per device.
  std::map<int, std::int64_t> max_total, max_act, peak_marker;
  std::map<int, std::int64_t> flow_s, flow_f;
  std::map<std::int64_t, int> s_count, f_count;
  auto enclosed_by_op = [&](int pid, Time ts) {
    for (const auto& s : t.threads[{pid, 0}])
      if (s.cat == "op" && s.start <= ts && ts <= s.end) return true;
    return false;
  };
  for (const auto& e : t.doc.at("traceEvents")) {
    const std::string ph = e.at("ph");
    const int pid = e.value("pid", -1);
    if (ph == "C") {
      const std::int64_t total = e.at("args").at("total");
      const std::int64_t act = e.at("args").at("activations");
      EXPECT_EQ(total, act + e.at("args").at("static").get<std::int64_t>());
      max_total[pid] = std::max(max_total.count(pid) ? max_total[pid] : 0, total);
      max_act[pid] = std::max(max_act.count(pid) ? max_act[pid] : 0, act);
    } else if (ph == "i" && e.at("name") == "peak memory") {
      EXPECT_EQ(peak_marker.count(pid), 0u);
      peak_marker[pid] = e.at("args").at("total");
    } else if (ph == "s" || ph == "f") {
      const std::int64_t id = e.at("id");
      (ph == "s" ? s_count : f_count)[id]++;
      EXPECT_TRUE(enclosed_by_op(pid, ns(e.at("ts"))))
          << "flow " << id << " end " << ph << " binds to no op";
      if (ph == "f") {
        EXPECT_EQ(e.value("bp", ""), "e");
      }
    }
  }
  for (const auto& d : result.devices) {
    EXPECT_EQ(max_total[d.rank], d.peak_bytes) << "rank " << d.rank;
    EXPECT_EQ(max_act[d.rank], d.peak_activation_bytes) << "rank " << d.rank;
    EXPECT_EQ(peak_marker[d.rank], d.peak_bytes) << "rank " << d.rank;
  }
  // Every flow has both ends, exactly once; one flow per transfer.
  std::size_t transfers = 0;
  for (const auto& [key, v] : t.threads)
    for (const auto& s : v) transfers += s.cat == "transfer";
  EXPECT_EQ(s_count.size(), transfers);
  for (const auto& [id, n] : s_count) {
    EXPECT_EQ(n, 1) << "flow " << id;
    EXPECT_EQ(f_count[id], 1) << "flow " << id << " has no finish";
  }
  for (const auto& [id, n] : f_count) EXPECT_EQ(s_count[id], 1) << "flow " << id << " has no start";
  return t;
}

/// A topology of one node whose links all have `latency_us` and `bandwidth_GBps`.
inline std::unique_ptr<Topology> node(int devices, double latency_us = 0.0,
                                      double bandwidth_GBps = 1e6) {
  ClusterSpec spec;
  spec.nodes = 1;
  spec.devices_per_node = devices;
  spec.intra_node.bandwidth_GBps = bandwidth_GBps;
  spec.intra_node.latency_us = latency_us;
  return std::make_unique<Topology>(spec);
}

/// Same costs on every stage.
inline SimInput uniform(const Schedule& sch, const Topology& topo, Time f, Time i, Time w,
                        std::int64_t activation = 0, std::int64_t output = 0) {
  SimInput in;
  in.topology = &topo;
  StageCost c;
  c.forward = f;
  c.backward_input = i;
  c.backward_weight = w;
  c.activation_bytes = activation;
  c.output_bytes = output;
  in.stages.assign(sch.num_stages, c);
  for (int r = 0; r < sch.num_ranks; ++r) in.rank_device.push_back(r);
  return in;
}

inline Schedule schedule_named(const std::string& name, int p, int m, int vpp = 1) {
  ScheduleParams params;
  params.pp = p;
  params.microbatches = m;
  params.vpp = vpp;
  return find_schedule(name)->generate(params);
}

}  // namespace bmpipe::test
