// The SVG timeline: well-formed XML (checked by the reader in trace_checks.hpp), one box
// per op, one time scale across stacked runs, one memory scale across panels, tail work,
// bands for dense runs, deterministic bytes.
#include <gtest/gtest.h>

#include <climits>
#include <map>
#include <regex>

#include "trace_checks.hpp"
#include "traces/svg.hpp"

namespace bmpipe {
namespace {

using test::kMs;

using test::Element;
using test::parse_svg;
using test::XmlCheck;

std::vector<const Element*> op_boxes(const std::vector<Element>& els) {
  std::vector<const Element*> v;
  for (const auto& e : els) {
    auto it = e.attrs.find("class");
    if (e.name == "rect" && it != e.attrs.end() && it->second.rfind("op ", 0) == 0) v.push_back(&e);
  }
  return v;
}

TEST(XmlCheck, RejectsMalformedInput) {
  for (const char* bad :
       {"<svg><rect></svg>", "<svg a=1/>", "<svg a=\"1\" a=\"2\"/>", "<svg>&nbsp;</svg>",
        "<svg/><svg/>", "<svg><g></h></svg>", "<svg a=\"<\"/>"}) {
    XmlCheck x(bad);
    std::string error;
    EXPECT_FALSE(x.parse(&error)) << bad;
  }
  XmlCheck ok("<?xml version=\"1.0\"?>\n<svg a='1'><!-- c --><g>x &amp; y</g><rect/></svg>\n");
  std::string error;
  EXPECT_TRUE(ok.parse(&error)) << error;
  EXPECT_EQ(ok.elements.size(), 3u);
}

TEST(Svg, OneBoxPerOpOfEveryKind) {
  for (const auto& info : builtin_schedules()) {
    Schedule sch;
    try {
      sch = test::schedule_named(std::string(info.name), 4, 8, effective_vpp(info, 2));
    } catch (const std::exception&) {
      continue;
    }
    const auto topo = test::node(4, 100, 10);
    SimInput in = test::uniform(sch, *topo, 1 * kMs, 1 * kMs, 1 * kMs, 1 << 28, 1'000'000);
    in.static_bytes.assign(4, 4LL << 30);
    in.capacity_bytes.assign(4, 8LL << 30);
    SimResult r;
    const Timeline t = record_timeline(in, sch, std::string(info.name) + " <&> title", &r);
    ASSERT_TRUE(r.ok) << info.name << ": " << r.error;
    std::ostringstream out;
    write_timeline_svg(out, t);
    const auto els = parse_svg(out.str());
    const auto boxes = op_boxes(els);
    EXPECT_EQ(boxes.size(), sch.total_ops()) << info.name;
    // Per kind, as many boxes as the schedule has ops of that kind.
    std::map<std::string, std::size_t> want, got;
    for (const auto& list : sch.ops)
      for (const Op& op : list)
        want[op.kind == OpKind::FB ? "FB" : std::string(1, op_kind_char(op.kind))]++;
    for (const Element* e : boxes) got[e->attrs.at("class").substr(3)]++;
    EXPECT_EQ(got, want) << info.name;
    // A memory panel and a capacity line per device.
    std::size_t panels = 0, capacity = 0;
    for (const auto& e : els) {
      if (e.name == "polygon" && e.attrs.count("class") && e.attrs.at("class") == "memory")
        ++panels;
      if (e.name == "line" && e.attrs.count("class") && e.attrs.at("class") == "capacity")
        ++capacity;
    }
    EXPECT_EQ(panels, 4u);
    EXPECT_EQ(capacity, 4u);
  }
}

// Box geometry follows time: on 1F1B with F = 1 ms, B = 2 ms every B box is twice as
// wide as an F box, and the rightmost box ends at the left margin + the plot width.
TEST(Svg, BoxesAreToScaleAndLabelled) {
  const Schedule sch = make_1f1b(ScheduleParams{4, 8, 1});
  const auto topo = test::node(4);
  const Timeline t = record_timeline(test::uniform(sch, *topo, 1 * kMs, 1 * kMs, 1 * kMs), sch);
  std::ostringstream out;
  SvgOptions options;
  options.width_px = 1000;
  write_timeline_svg(out, t, options);
  const auto els = parse_svg(out.str());
  double f_width = 0, b_width = 0, right = 0;
  for (const Element* e : op_boxes(els)) {
    const double w = std::stod(e->attrs.at("width"));
    (e->attrs.at("class") == "op F" ? f_width : b_width) = w;
    right = std::max(right, std::stod(e->attrs.at("x")) + w);
  }
  EXPECT_NEAR(b_width, 2 * f_width, 0.02);
  EXPECT_NEAR(right, 1000 - 120, 0.05);  // 150 px labels + 730 px of plot = 880
  // Wide boxes carry their micro-batch number: 64 ops, 64 labels "0".."7".
  std::size_t labels = 0;
  for (const auto& e : els)
    labels += e.name == "text" && e.attrs.count("class") && e.attrs.at("class") == "mb";
  EXPECT_EQ(labels, 64u);
  // A time axis with units.
  EXPECT_NE(out.str().find("time (ms)"), std::string::npos);
}

TEST(Svg, CompareStacksRunsOnOneTimeScale) {
  const auto topo = test::node(4);
  const Schedule a = make_gpipe(ScheduleParams{4, 8, 1});
  const Schedule b = make_1f1b(ScheduleParams{4, 4, 1});  // half the micro-batches: shorter
  std::vector<Timeline> runs;
  runs.push_back(record_timeline(test::uniform(a, *topo, 1 * kMs, 1 * kMs, 1 * kMs), a));
  runs.push_back(record_timeline(test::uniform(b, *topo, 1 * kMs, 1 * kMs, 1 * kMs), b));
  std::ostringstream out;
  write_compare_svg(out, runs);
  const auto els = parse_svg(out.str());
  const auto boxes = op_boxes(els);
  EXPECT_EQ(boxes.size(), a.total_ops() + b.total_ops());
  // Same op length, same width, in both runs: one scale.
  std::vector<double> f_widths;
  for (const Element* e : boxes)
    if (e->attrs.at("class") == "op F") f_widths.push_back(std::stod(e->attrs.at("width")));
  ASSERT_EQ(f_widths.size(), 8u * 4 + 4u * 4);
  for (double w : f_widths) EXPECT_DOUBLE_EQ(w, f_widths.front());
  // Both titles are there.
  EXPECT_NE(out.str().find(">gpipe<"), std::string::npos);
  EXPECT_NE(out.str().find(">1f1b<"), std::string::npos);
}

TEST(Svg, SameTimelineGivesIdenticalBytes) {
  const Schedule sch = make_1f1b(ScheduleParams{4, 16, 1});
  const auto topo = test::node(4, 50, 10);
  const SimInput in = test::uniform(sch, *topo, 1 * kMs, 1 * kMs, 1 * kMs, 1000, 1'000'000);
  std::ostringstream x, y;
  write_timeline_svg(x, record_timeline(in, sch));
  write_timeline_svg(y, record_timeline(in, sch));
  EXPECT_EQ(x.str(), y.str());
}

TEST(Svg, FailedRunIsStillAPicture) {
  Schedule sch = make_1f1b(ScheduleParams{2, 2, 1});
  std::swap(sch.ops[1][0], sch.ops[1][1]);
  const auto topo = test::node(2);
  const Timeline t = record_timeline(test::uniform(sch, *topo, 1 * kMs, 1 * kMs, 1 * kMs), sch);
  EXPECT_FALSE(t.ok);
  std::ostringstream out;
  write_timeline_svg(out, t);
  parse_svg(out.str());
  EXPECT_NE(out.str().find("simulation failed"), std::string::npos);
}

TEST(XmlCheck, KeepsTextWithEntitiesDecoded) {
  XmlCheck x("<svg><text>a &amp; <tspan>b</tspan>c</text></svg>");
  std::string error;
  ASSERT_TRUE(x.parse(&error)) << error;
  ASSERT_EQ(x.elements.size(), 3u);
  EXPECT_EQ(x.elements[1].text, "a & bc");
}

using test::kGiB;

// 1F1B, p = 4, F = I = W = 1 ms, one GiB of activations per micro-batch: rank r holds
// p - r micro-batches at its peak (its warm-up forwards and one more before the first
// backward), so its peak is static_r + (p - r) GiB.
Timeline memory_run(const std::vector<std::int64_t>& static_gib, std::int64_t capacity_gib) {
  const int p = 4;
  const Schedule sch = make_1f1b(ScheduleParams{p, 8, 1});
  static const auto topo = test::node(p);
  SimInput in = test::uniform(sch, *topo, 1 * kMs, 1 * kMs, 1 * kMs, kGiB);
  for (std::int64_t g : static_gib) in.static_bytes.push_back(g * kGiB);
  in.capacity_bytes.assign(p, capacity_gib * kGiB);
  SimResult r;
  Timeline t = record_timeline(in, sch, "1f1b", &r);
  EXPECT_TRUE(r.ok) << r.error;
  for (int rank = 0; rank < p; ++rank)
    EXPECT_EQ(r.devices[rank].peak_bytes, (static_gib[rank] + p - rank) * kGiB) << rank;
  return t;
}

struct Panels {
  std::vector<double> top, bottom, curve_top, capacity_y;
};
Panels panels_of(const std::vector<Element>& els) {
  Panels p;
  for (const Element* e : test::select(els, "rect", "mem")) {
    p.top.push_back(e->num("y"));
    p.bottom.push_back(e->num("y") + e->num("height"));
  }
  for (const Element* e : test::select(els, "polygon", "memory"))
    p.curve_top.push_back(test::top_of(*e));
  for (const Element* e : test::select(els, "line", "capacity")) {
    EXPECT_EQ(e->attrs.at("y1"), e->attrs.at("y2"));
    p.capacity_y.push_back(e->num("y1"));
  }
  return p;
}

// The Llama-2-7B case of the issue: some ranks under a quarter of the capacity, one above.
// Per-rank scales drew the fullest rank as the emptiest; one scale draws heights in
// proportion to bytes.
TEST(Svg, MemoryPanelsShareOneScale) {
  const std::vector<std::int64_t> stat = {1, 2, 2, 6};  // peaks 5, 5, 4, 7 GiB
  const std::vector<double> peak = {5, 5, 4, 7};
  const Timeline t = memory_run(stat, 24);  // a quarter is 6 GiB: rank 3 alone above it
  std::ostringstream out;
  write_timeline_svg(out, t);
  const auto els = parse_svg(out.str());
  const Panels p = panels_of(els);
  ASSERT_EQ(p.top.size(), 4u);
  ASSERT_EQ(p.curve_top.size(), 4u);
  ASSERT_EQ(p.capacity_y.size(), 4u);
  std::vector<double> height(4);
  for (int r = 0; r < 4; ++r) height[r] = p.bottom[r] - p.curve_top[r];
  // The fullest rank has the tallest curve; heights are proportional to bytes.
  EXPECT_EQ(std::max_element(height.begin(), height.end()) - height.begin(), 3);
  for (int r = 0; r < 4; ++r) EXPECT_NEAR(height[r] / peak[r], height[3] / peak[3], 0.01) << r;
  // The capacity line: same place on every panel, on the same scale as the curves.
  for (int r = 0; r < 4; ++r) {
    EXPECT_NEAR(p.capacity_y[r] - p.top[r], p.capacity_y[0] - p.top[0], 0.011) << r;
    EXPECT_NEAR((p.bottom[r] - p.capacity_y[r]) / 24, height[3] / peak[3], 0.01) << r;
  }
  // Static bytes drawn as their own (darker) part, to the same scale.
  const auto statics = test::select(els, "rect", "static");
  ASSERT_EQ(statics.size(), 4u);
  for (int r = 0; r < 4; ++r)
    EXPECT_NEAR(statics[r]->num("height") / static_cast<double>(stat[r]), height[3] / peak[3], 0.01)
        << r;
}

// Every rank far below its capacity: the scale follows the peak, the capacity lines sit
// on the top edge and the heading says they are off scale. Heights stay proportional.
TEST(Svg, MemoryPanelsFarBelowCapacityScaleToThePeak) {
  const std::vector<double> peak = {5, 5, 4, 7};
  const Timeline t = memory_run({1, 2, 2, 6}, 100);
  std::ostringstream out;
  write_timeline_svg(out, t);
  const auto els = parse_svg(out.str());
  const Panels p = panels_of(els);
  ASSERT_EQ(p.capacity_y.size(), 4u);
  for (int r = 0; r < 4; ++r) {
    EXPECT_NEAR(p.capacity_y[r], p.top[r], 0.011) << r;
    EXPECT_NEAR((p.bottom[r] - p.curve_top[r]) / peak[r], (p.bottom[3] - p.curve_top[3]) / peak[3],
                0.01)
        << r;
  }
  // The fullest curve uses a good part of the panel, not a sliver.
  EXPECT_GT(p.bottom[3] - p.curve_top[3], 0.5 * (p.bottom[3] - p.top[3]));
  EXPECT_NE(out.str().find("off scale"), std::string::npos);
}

// Compared runs share the memory scale too: the same run drawn twice, once next to a
// fuller one, keeps its pixel heights.
TEST(Svg, ComparedRunsShareTheMemoryScale) {
  std::vector<Timeline> runs = {memory_run({1, 2, 2, 6}, 24), memory_run({10, 2, 2, 6}, 24)};
  std::ostringstream out;
  write_compare_svg(out, runs);
  const Panels p = panels_of(parse_svg(out.str()));
  ASSERT_EQ(p.curve_top.size(), 8u);
  // Rank 1 (5 GiB) is the same in both runs; rank 0 of the second run holds 14 GiB.
  EXPECT_NEAR(p.bottom[1] - p.curve_top[1], p.bottom[5] - p.curve_top[5], 0.011);
  EXPECT_NEAR((p.bottom[4] - p.curve_top[4]) / 14, (p.bottom[1] - p.curve_top[1]) / 5, 0.01);
}

// p = 2, m = 2, F = I = W = 1 ms: the pipeline takes (m + p - 1)(F + B) = 9 ms; rank 1's
// last op ends at 7 ms, rank 0's at 9 ms. Tails of 1 and 10 ms end at 10 and 17 ms.
TEST(Svg, TailWorkIsDrawnAfterTheLastOpAndLabelled) {
  const Schedule sch = make_1f1b(ScheduleParams{2, 2, 1});
  const auto topo = test::node(2);
  SimInput in = test::uniform(sch, *topo, 1 * kMs, 1 * kMs, 1 * kMs);
  in.tail_time = {1 * kMs, 10 * kMs};
  const Timeline t = record_timeline(in, sch);
  ASSERT_EQ(t.iteration_time, 17 * kMs);
  std::ostringstream out;
  write_timeline_svg(out, t);
  const auto els = parse_svg(out.str());
  double f_width = 0;
  std::map<double, double> row_end;  // row y -> right end of its last op
  for (const Element* e : op_boxes(els)) {
    if (e->attrs.at("class") == "op F") f_width = e->num("width");
    row_end[e->num("y")] = std::max(row_end[e->num("y")], e->num("x") + e->num("width"));
  }
  ASSERT_EQ(row_end.size(), 2u);
  const auto tails = test::select(els, "rect", "tail");
  ASSERT_EQ(tails.size(), 2u);
  const double want_ms[] = {1, 10};
  const std::vector<double> rows = {row_end.begin()->first, std::next(row_end.begin())->first};
  for (int r = 0; r < 2; ++r) {
    const Element& tail = *tails[r];
    EXPECT_DOUBLE_EQ(tail.num("y"), rows[r]);
    EXPECT_NEAR(tail.num("x"), row_end[rows[r]], 0.011) << r;
    EXPECT_NEAR(tail.num("width") / f_width, want_ms[r], 0.01) << r;
  }
  EXPECT_NE(tails[1]->text.find("rank 1: optimizer step, 10.000 ms"), std::string::npos)
      << tails[1]->text;
  // Rank 0's tail ends at 10 ms, 7 ms before rank 1's: x(17 ms) is the plot's right end.
  EXPECT_NEAR(tails[1]->num("x") + tails[1]->num("width"), 1400 - 120, 0.02);
  // Labels inside the blocks; the wide one says what it is.
  const auto labels = test::select(els, "text", "tail-label");
  ASSERT_EQ(labels.size(), 2u);
  EXPECT_NE(labels[1]->text.find("optimizer step"), std::string::npos);
  for (int r = 0; r < 2; ++r) {
    EXPECT_GT(labels[r]->num("x"), tails[r]->num("x"));
    EXPECT_LT(labels[r]->num("x"), tails[r]->num("x") + tails[r]->num("width"));
  }
  EXPECT_NE(out.str().find("optimizer step</text>"), std::string::npos) << "legend";
  // No reductions here, so no wait for them, in the picture or the legend.
  EXPECT_TRUE(test::select(els, "rect", "grad-reduce-wait").empty());
  EXPECT_EQ(out.str().find("waiting for dp gradient reduction"), std::string::npos);
  // No tail work, no tail block.
  std::ostringstream plain;
  write_timeline_svg(plain, record_timeline(test::uniform(sch, *topo, kMs, kMs, kMs), sch));
  EXPECT_TRUE(test::select(parse_svg(plain.str()), "rect", "tail").empty());
}

Timeline dense_1f1b(int p, int m) {
  const Schedule sch = make_1f1b(ScheduleParams{p, m, 1});
  static const auto topo = test::node(64);
  return record_timeline(test::uniform(sch, *topo, 1 * kMs, 1 * kMs, 1 * kMs), sch);
}

// The documented rule: 16 px per op on the fullest row, at least 1400 px, at most
// max_width_px (4000); bands once that leaves under 8 px per op.
TEST(Svg, WidthFollowsTheOpCountUpToACap) {
  struct Case {
    int m, max_width;
    double width;
    bool boxes;
  };
  for (const Case c : {Case{8, 4000, 1400, true},             // 16 ops a row
                       Case{64, 4000, 270 + 128 * 16, true},  // 128 ops: 2318 px
                       Case{128, 4000, 4000, true},           // 256 ops, 14.6 px each
                       Case{128, 2000, 2000, false}}) {       // 256 ops in 1730 px: bands
    const Timeline t = dense_1f1b(4, c.m);
    SvgOptions options;
    options.max_width_px = c.max_width;
    std::ostringstream out;
    write_timeline_svg(out, t, options);
    const auto els = parse_svg(out.str());
    EXPECT_DOUBLE_EQ(els.front().num("width"), c.width) << "m = " << c.m;
    EXPECT_EQ(op_boxes(els).size(), c.boxes ? t.boxes.size() : 0u) << "m = " << c.m;
    EXPECT_EQ(test::select(els, "rect", "band").empty(), c.boxes) << "m = " << c.m;
  }
}

std::string without_spaces(const std::string& s) {
  std::string out;
  for (char c : s)
    if (c != ' ') out += c;
  return out;
}

std::string range(int lo, int hi) {
  return lo == hi ? std::to_string(lo) : std::to_string(lo) + "\u2013" + std::to_string(hi);
}

// p = 8, m = 256: 512 ops a row cannot be boxes at the 4000 px cap. Bands cover every op
// exactly once, never overlap, stay within the cap of (4000 - 270) / 32 = 116 a row, hide
// no bubble of 3 px or more, and are labelled with the micro-batches they hold.
TEST(Svg, DenseRunsAggregateIntoLabelledBands) {
  const int p = 8, m = 256;
  const Timeline t = dense_1f1b(p, m);
  ASSERT_EQ(t.iteration_time, (m + p - 1) * 3 * kMs);
  std::ostringstream out;
  write_timeline_svg(out, t);
  const auto els = parse_svg(out.str());
  ASSERT_DOUBLE_EQ(els.front().num("width"), 4000);
  EXPECT_TRUE(op_boxes(els).empty());
  const double scale = 3730.0 / static_cast<double>(t.iteration_time);
  auto x = [&](Time tt) { return 150 + static_cast<double>(tt) * scale; };

  struct Band {
    double x0, x1;
    std::vector<const Timeline::Box*> ops;
    std::string label;
    bool labelled = false;
  };
  std::map<double, std::vector<Band>> rows;  // by row y
  for (const Element* e : test::select(els, "rect", "band")) {
    rows[e->num("y")].push_back(Band{e->num("x"), e->num("x") + e->num("width"), {}, "", false});
    EXPECT_NE(e->text.find("micro-batches"), std::string::npos) << "band tooltip";
  }
  ASSERT_EQ(rows.size(), static_cast<std::size_t>(p));
  std::vector<std::vector<Band>*> by_rank;
  for (auto& [y, bands] : rows) by_rank.push_back(&bands);  // rows top to bottom = ranks
  std::size_t total = 0;
  for (auto* bands : by_rank) {
    EXPECT_LE(bands->size(), 116u);
    std::sort(bands->begin(), bands->end(),
              [](const Band& a, const Band& b) { return a.x0 < b.x0; });
    for (std::size_t i = 1; i < bands->size(); ++i)
      EXPECT_LE((*bands)[i - 1].x1, (*bands)[i].x0 + 0.02) << "bands overlap";
    total += bands->size();
  }
  // Every op inside exactly one band of its row.
  for (const auto& b : t.boxes) {
    const double mid = (x(b.start) + x(b.end)) / 2;
    int holders = 0;
    for (Band& band : *by_rank[b.rank])
      if (band.x0 - 0.02 <= mid && mid <= band.x1 + 0.02) {
        ++holders;
        EXPECT_GE(x(b.start), band.x0 - 0.02);
        EXPECT_LE(x(b.end), band.x1 + 0.02);
        band.ops.push_back(&b);
      }
    EXPECT_EQ(holders, 1) << to_string(b.op) << " on rank " << b.rank;
  }
  // Labels sit inside their band; the text names the band's micro-batches, per kind or
  // as one range.
  for (const Element* e : test::select(els, "text", "band-label")) {
    const double lx = e->num("x"), ly = e->num("y");
    int found = 0;
    for (auto& [y, bands] : rows)
      if (ly > y && ly < y + 18)
        for (Band& band : bands)
          if (band.x0 < lx && lx < band.x1) band.label = without_spaces(e->text), ++found;
    EXPECT_EQ(found, 1) << e->text;
  }
  std::size_t labelled = 0;
  for (auto* bands : by_rank)
    for (const Band& band : *bands) {
      ASSERT_FALSE(band.ops.empty());
      int lo[2] = {INT_MAX, INT_MAX}, hi[2] = {INT_MIN, INT_MIN};
      for (const auto* b : band.ops) {
        const int k = b->op.kind == OpKind::F ? 0 : 1;
        lo[k] = std::min(lo[k], b->op.microbatch);
        hi[k] = std::max(hi[k], b->op.microbatch);
      }
      std::string per_kind, overall = range(std::min(lo[0], lo[1]), std::max(hi[0], hi[1]));
      if (lo[0] <= hi[0]) per_kind += "F" + range(lo[0], hi[0]);
      if (lo[1] <= hi[1]) per_kind += "B" + range(lo[1], hi[1]);
      if (band.label.empty()) continue;
      ++labelled;
      EXPECT_TRUE(band.label == per_kind || band.label == overall)
          << band.label << " vs " << per_kind << " or " << overall;
      // No visible bubble inside a band.
      for (std::size_t i = 1; i < band.ops.size(); ++i)
        EXPECT_LT((band.ops[i]->start - band.ops[i - 1]->end) * scale, 3.0);
    }
  EXPECT_GE(labelled * 10, total * 8) << labelled << " of " << total << " bands labelled";
  // Mixed F and B bands are striped; the legend explains bands.
  EXPECT_NE(out.str().find("<pattern id=\"mix-F-B\""), std::string::npos);
  EXPECT_NE(out.str().find("band: a device"), std::string::npos);
}

TEST(Svg, DenseAndMemoryPicturesAreDeterministic) {
  const Timeline a = dense_1f1b(8, 256), b = dense_1f1b(8, 256);
  std::ostringstream x, y, mx, my;
  write_timeline_svg(x, a);
  write_timeline_svg(y, b);
  EXPECT_EQ(x.str(), y.str());
  write_memory_svg(mx, a);
  write_memory_svg(my, b);
  EXPECT_EQ(mx.str(), my.str());
}

}  // namespace
}  // namespace bmpipe
