#pragma once
// Reads written traces and pictures back: the Chrome trace with nlohmann-json, checked
// against the invariants of issue 5, and SVG with a strict little XML reader. Everything
// here is derived from the file alone; the SimResult is only the reference the file must
// agree with.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>
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

  // Memory: three counters of one series each (chrome://tracing stacks the series of one
  // counter event); the total is static + activations at every sample, its maximum is the
  // reported peak; one peak marker per device.
  std::map<int, std::int64_t> peak_marker;
  std::map<int, std::map<std::string, std::vector<std::pair<Time, std::int64_t>>>> counters;
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
      const std::string name = e.at("name");
      EXPECT_TRUE(name == "activation memory" || name == "static memory" || name == "total memory")
          << name;
      EXPECT_EQ(e.at("args").size(), 1u) << "counter " << name << " has several series";
      counters[pid][name].emplace_back(ns(e.at("ts")),
                                       e.at("args").at("bytes").get<std::int64_t>());
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
    auto& c = counters[d.rank];
    const auto& stat = c["static memory"];
    const auto& act = c["activation memory"];
    const auto& total = c["total memory"];
    EXPECT_EQ(stat.size(), 1u) << "rank " << d.rank << ": static memory is one sample";
    if (!stat.empty()) {
      EXPECT_EQ(stat[0], std::make_pair(Time{0}, d.static_bytes)) << "rank " << d.rank;
    }
    EXPECT_EQ(act.size(), total.size()) << "rank " << d.rank;
    EXPECT_FALSE(act.empty()) << "rank " << d.rank;
    if (act.size() != total.size() || act.empty()) continue;
    EXPECT_EQ(act.front().first, 0) << "rank " << d.rank << ": counters start at time 0";
    std::int64_t max_total = 0, max_act = 0;
    for (std::size_t i = 0; i < act.size(); ++i) {
      EXPECT_EQ(act[i].first, total[i].first) << "rank " << d.rank << " sample " << i;
      EXPECT_EQ(total[i].second, act[i].second + d.static_bytes) << "rank " << d.rank;
      max_total = std::max(max_total, total[i].second);
      max_act = std::max(max_act, act[i].second);
    }
    EXPECT_EQ(max_total, d.peak_bytes) << "rank " << d.rank;
    EXPECT_EQ(max_act, d.peak_activation_bytes) << "rank " << d.rank;
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

// ---- SVG -----------------------------------------------------------------------------------

struct Element {
  std::string name;
  std::map<std::string, std::string> attrs;
  std::string text;  ///< character data inside, nested elements' included, entities decoded

  bool is(const std::string& tag, const std::string& cls) const {
    auto it = attrs.find("class");
    return name == tag && it != attrs.end() && it->second == cls;
  }
  double num(const std::string& attr) const { return std::stod(attrs.at(attr)); }
};

/// A strict little XML reader: prolog, comments, nested elements with quoted attributes,
/// text with entity references. Records every element in document order; reports anything
/// malformed (unbalanced tags, bad attribute syntax, stray '<' or '&', trailing garbage).
class XmlCheck {
 public:
  explicit XmlCheck(std::string text) : s_(std::move(text)) {}

  bool parse(std::string* error) {
    try {
      skip_space();
      if (s_.compare(i_, 5, "<?xml") == 0) {
        const auto end = s_.find("?>", i_);
        if (end == std::string::npos) fail("unterminated prolog");
        i_ = end + 2;
      }
      skip_misc();
      element();
      skip_misc();
      if (i_ != s_.size()) fail("content after the root element");
      return true;
    } catch (const std::runtime_error& e) {
      *error = e.what();
      return false;
    }
  }
  std::vector<Element> elements;

 private:
  [[noreturn]] void fail(const std::string& what) {
    throw std::runtime_error(what + " at offset " + std::to_string(i_));
  }
  void skip_space() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  void skip_misc() {
    for (;;) {
      skip_space();
      if (s_.compare(i_, 4, "<!--") != 0) return;
      const auto end = s_.find("-->", i_);
      if (end == std::string::npos) fail("unterminated comment");
      i_ = end + 3;
    }
  }
  std::string name() {
    const std::size_t start = i_;
    while (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '-' ||
                              s_[i_] == '_' || s_[i_] == ':' || s_[i_] == '.'))
      ++i_;
    if (i_ == start) fail("expected a name");
    return s_.substr(start, i_ - start);
  }
  std::string entity() {  // at '&'
    const auto end = s_.find(';', i_);
    if (end == std::string::npos || end - i_ > 8) fail("bad entity");
    const std::string e = s_.substr(i_ + 1, end - i_ - 1);
    i_ = end + 1;
    if (e == "amp") return "&";
    if (e == "lt") return "<";
    if (e == "gt") return ">";
    if (e == "quot") return "\"";
    if (e == "apos") return "'";
    if (e.rfind('#', 0) == 0) return "?";
    fail("unknown entity &" + e + ";");
  }
  void element() {
    if (i_ >= s_.size() || s_[i_] != '<') fail("expected '<'");
    ++i_;
    Element el;
    el.name = name();
    for (;;) {
      skip_space();
      if (i_ >= s_.size()) fail("unterminated tag");
      if (s_.compare(i_, 2, "/>") == 0) {
        i_ += 2;
        elements.push_back(std::move(el));
        return;
      }
      if (s_[i_] == '>') {
        ++i_;
        break;
      }
      const std::string key = name();
      if (el.attrs.count(key)) fail("duplicate attribute " + key);
      skip_space();
      if (i_ >= s_.size() || s_[i_] != '=') fail("expected '='");
      ++i_;
      skip_space();
      if (i_ >= s_.size() || (s_[i_] != '"' && s_[i_] != '\'')) fail("unquoted attribute");
      const char q = s_[i_++];
      std::string value;
      while (i_ < s_.size() && s_[i_] != q) {
        if (s_[i_] == '<') fail("'<' in attribute");
        if (s_[i_] == '&') {
          value += entity();
          continue;
        }
        value += s_[i_++];
      }
      if (i_ >= s_.size()) fail("unterminated attribute");
      ++i_;
      el.attrs[key] = value;
    }
    const std::string tag = el.name;
    const std::size_t self = elements.size();
    elements.push_back(std::move(el));
    for (;;) {  // content
      if (i_ >= s_.size()) fail("missing </" + tag + ">");
      if (s_.compare(i_, 2, "</") == 0) {
        i_ += 2;
        if (name() != tag) fail("mismatched closing tag for <" + tag + ">");
        skip_space();
        if (i_ >= s_.size() || s_[i_] != '>') fail("expected '>'");
        ++i_;
        return;
      }
      if (s_.compare(i_, 4, "<!--") == 0) {
        skip_misc();
        continue;
      }
      if (s_[i_] == '<') {
        const std::size_t child = elements.size();
        element();
        elements[self].text += elements[child].text;
        continue;
      }
      if (s_[i_] == '&') {
        elements[self].text += entity();
        continue;
      }
      elements[self].text += s_[i_++];
    }
  }

  const std::string s_;
  std::size_t i_ = 0;
};

/// Every element of a well-formed SVG document; fails the test on malformed XML.
inline std::vector<Element> parse_svg(const std::string& text) {
  XmlCheck x(text);
  std::string error;
  EXPECT_TRUE(x.parse(&error)) << error;
  return x.elements;
}

/// The elements <tag class="cls">, in document order.
inline std::vector<const Element*> select(const std::vector<Element>& els, const std::string& tag,
                                          const std::string& cls) {
  std::vector<const Element*> v;
  for (const auto& e : els)
    if (e.is(tag, cls)) v.push_back(&e);
  return v;
}

/// The points of a polygon or polyline, as (x, y).
inline std::vector<std::pair<double, double>> points(const Element& e) {
  std::vector<std::pair<double, double>> v;
  std::istringstream in(e.attrs.at("points"));
  std::string pair;
  while (in >> pair) {
    const auto comma = pair.find(',');
    v.emplace_back(std::stod(pair.substr(0, comma)), std::stod(pair.substr(comma + 1)));
  }
  return v;
}

/// The smallest y among the points: the top of a curve (SVG's y grows downwards).
inline double top_of(const Element& e) {
  double top = 1e300;
  for (const auto& [px, py] : points(e)) top = std::min(top, py);
  return top;
}

// ---- engine inputs -------------------------------------------------------------------------

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
