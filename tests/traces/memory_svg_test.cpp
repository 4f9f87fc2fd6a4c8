// The memory-over-time picture: one GiB scale for every rank (heights proportional to
// bytes, the fullest rank tallest), the capacity line on that scale, ms and GiB axes that
// agree with the curves, a legend, the over-capacity warning, determinism.
#include <gtest/gtest.h>

#include <map>
#include <regex>

#include "trace_checks.hpp"
#include "traces/svg.hpp"

namespace bmpipe {
namespace {

using test::Element;
using test::parse_svg;

using test::kGiB;
using test::kMs;

// 1F1B, p ranks, m = 8, F = I = W = 1 ms, one GiB of activations per micro-batch: rank r
// peaks at static_r + min(p - r, m) GiB (its warm-up forwards and one more before the
// first backward, at most all m). The pipeline takes (m + p - 1)(F + B) = (m + p - 1) 3 ms.
Timeline run(const std::vector<std::int64_t>& static_gib, std::int64_t capacity_gib,
             std::vector<Time> tail = {}) {
  const int p = static_cast<int>(static_gib.size());
  const Schedule sch = make_1f1b(ScheduleParams{p, 8, 1});
  static const auto topo = test::node(32);
  SimInput in = test::uniform(sch, *topo, 1 * kMs, 1 * kMs, 1 * kMs, kGiB);
  for (std::int64_t g : static_gib) in.static_bytes.push_back(g * kGiB);
  in.capacity_bytes.assign(p, capacity_gib * kGiB);
  in.tail_time = std::move(tail);
  SimResult r;
  Timeline t = record_timeline(in, sch, "1f1b", &r);
  EXPECT_TRUE(r.ok) << r.error;
  for (int rank = 0; rank < p; ++rank)
    EXPECT_EQ(r.devices[rank].peak_bytes, (static_gib[rank] + std::min(p - rank, 8)) * kGiB)
        << rank;
  return t;
}

std::string svg_of(const Timeline& t, const SvgOptions& options = {}) {
  std::ostringstream out;
  write_memory_svg(out, t, options);
  return out.str();
}

struct Plot {
  double left = 0, top = 0, width = 0, height = 0;
  double bottom() const { return top + height; }
};
Plot plot_of(const std::vector<Element>& els) {
  const auto plots = test::select(els, "rect", "plot");
  EXPECT_EQ(plots.size(), 1u);
  if (plots.empty()) return {};
  return {plots[0]->num("x"), plots[0]->num("y"), plots[0]->num("width"), plots[0]->num("height")};
}

std::map<int, const Element*> curves_of(const std::vector<Element>& els) {
  std::map<int, const Element*> curves;
  for (const Element* e : test::select(els, "polyline", "memory"))
    curves[std::stoi(e->attrs.at("data-rank"))] = e;
  return curves;
}

TEST(MemorySvg, OneScaleForEveryRankAndTheCapacity) {
  const std::vector<std::int64_t> stat = {1, 2, 2, 6};  // peaks 5, 5, 4, 7 GiB
  const std::vector<double> peak = {5, 5, 4, 7};
  const std::string svg = svg_of(run(stat, 24));
  const auto els = parse_svg(svg);
  const Plot plot = plot_of(els);
  const auto curves = curves_of(els);
  ASSERT_EQ(curves.size(), 4u);
  std::vector<double> height(4);
  for (int r = 0; r < 4; ++r) height[r] = plot.bottom() - test::top_of(*curves.at(r));
  EXPECT_EQ(std::max_element(height.begin(), height.end()) - height.begin(), 3);
  const double px_per_gib = height[3] / peak[3];
  for (int r = 0; r < 4; ++r) EXPECT_NEAR(height[r] / peak[r], px_per_gib, 0.01) << r;
  // Each curve starts at its static bytes at time 0, on the same scale.
  for (int r = 0; r < 4; ++r) {
    const auto first = test::points(*curves.at(r)).front();
    EXPECT_NEAR(first.first, plot.left, 0.011);
    // Rank 0 starts its first forward at time 0, so its curve may rise there; its first
    // point is still the static level.
    EXPECT_NEAR((plot.bottom() - first.second) / static_cast<double>(stat[r]), px_per_gib, 0.01)
        << r;
  }
  // One capacity line (all ranks have 24 GiB) across the plot, on the curves' scale.
  const auto caps = test::select(els, "line", "capacity");
  ASSERT_EQ(caps.size(), 1u);
  EXPECT_NEAR((plot.bottom() - caps[0]->num("y1")) / 24, px_per_gib, 0.01);
  EXPECT_NEAR(caps[0]->num("x1"), plot.left, 0.011);
  EXPECT_NEAR(caps[0]->num("x2"), plot.left + plot.width, 0.011);
  EXPECT_NE(svg.find("capacity 24.0 GiB"), std::string::npos);
  // Fits: no warning, no over-capacity shading.
  EXPECT_TRUE(test::select(els, "rect", "over").empty());
  EXPECT_EQ(svg.find("exceed"), std::string::npos);
}

// Tick labels are values: a GiB tick at v sits v * px_per_gib above the bottom, a ms tick
// at v sits v / iteration of the width right of the left edge.
TEST(MemorySvg, AxesAgreeWithTheCurves) {
  const Timeline t = run({1, 2, 2, 6}, 24);
  ASSERT_EQ(t.iteration_time, (8 + 4 - 1) * 3 * kMs);  // 33 ms
  const std::string svg = svg_of(t);
  const auto els = parse_svg(svg);
  const Plot plot = plot_of(els);
  const double px_per_gib = (plot.bottom() - test::top_of(*curves_of(els).at(3))) / 7;
  EXPECT_NE(svg.find(">memory (GiB)</text>"), std::string::npos);
  EXPECT_NE(svg.find(">time (ms)</text>"), std::string::npos);
  auto ticks = [&](const std::string& group, const char* anchor) {
    const auto at = svg.find("<g class=\"" + group + "\">");
    EXPECT_NE(at, std::string::npos) << group;
    const std::string g = svg.substr(at, svg.find("</g>", at) - at);
    std::vector<std::pair<double, double>> v;  // (position, value)
    const std::regex text("<text x=\"([0-9.]+)\" y=\"([0-9.]+)\" font-size=\"10\" text-anchor=\"" +
                          std::string(anchor) + "\">([0-9.]+)</text>");
    for (std::sregex_iterator it(g.begin(), g.end(), text), end; it != end; ++it)
      v.emplace_back(std::stod((*it)[group == "y-axis" ? 2 : 1]), std::stod((*it)[3]));
    return v;
  };
  const auto gib_ticks = ticks("y-axis", "end");
  ASSERT_GE(gib_ticks.size(), 4u);
  for (const auto& [y, v] : gib_ticks)
    EXPECT_NEAR(plot.bottom() - (y - 3.5), v * px_per_gib, 0.05) << v << " GiB";
  const auto ms_ticks = ticks("x-axis", "middle");
  ASSERT_GE(ms_ticks.size(), 4u);
  for (const auto& [x, v] : ms_ticks) EXPECT_NEAR(x - plot.left, v / 33 * plot.width, 0.02) << v;
  // Curves span the iteration: their last point is at the right edge.
  for (const auto& [r, c] : curves_of(els))
    EXPECT_NEAR(test::points(*c).back().first, plot.left + plot.width, 0.011) << r;
}

TEST(MemorySvg, LegendNamesEveryRankWithItsPeak) {
  const std::string svg = svg_of(run({1, 2, 2, 6}, 24));
  for (const char* entry :
       {"rank 0 \u00b7 dev 0 \u00b7 peak 5.0 GiB", "rank 1 \u00b7 dev 1 \u00b7 peak 5.0 GiB",
        "rank 2 \u00b7 dev 2 \u00b7 peak 4.0 GiB", "rank 3 \u00b7 dev 3 \u00b7 peak 7.0 GiB"})
    EXPECT_NE(svg.find(entry), std::string::npos) << entry;
  // The overall peak is marked where it happens, on rank 3's curve at its height.
  const auto els = parse_svg(svg);
  const auto peak = test::select(els, "circle", "peak");
  ASSERT_EQ(peak.size(), 1u);
  EXPECT_NEAR(peak[0]->num("cy"), test::top_of(*curves_of(els).at(3)), 0.011);
  EXPECT_NE(svg.find("peak 7.0 GiB (rank 3)"), std::string::npos);
  // Each rank its own colour.
  std::set<std::string> colours;
  for (const auto& [r, c] : curves_of(els)) colours.insert(c->attrs.at("stroke"));
  EXPECT_EQ(colours.size(), 4u);
}

TEST(MemorySvg, ManyRanksGetAColourRamp) {
  const std::vector<std::int64_t> stat(20, 1);
  const std::string svg = svg_of(run(stat, 64));
  const auto els = parse_svg(svg);
  const auto curves = curves_of(els);
  ASSERT_EQ(curves.size(), 20u);
  std::set<std::string> colours;
  for (const auto& [r, c] : curves) colours.insert(c->attrs.at("stroke"));
  EXPECT_EQ(colours.size(), 20u);
  EXPECT_NE(svg.find("<linearGradient id=\"ranks\""), std::string::npos);
  EXPECT_NE(svg.find(">rank 19</text>"), std::string::npos);
  EXPECT_NE(svg.find("fullest: rank 0, 9.0 GiB"), std::string::npos);
}

TEST(MemorySvg, OverCapacityIsShadedAndNamed) {
  const std::string svg = svg_of(run({1, 2, 2, 6}, 6));  // peaks 5, 5, 4, 7 of 6 GiB
  const auto els = parse_svg(svg);
  const Plot plot = plot_of(els);
  const auto over = test::select(els, "rect", "over");
  ASSERT_EQ(over.size(), 1u);
  const auto caps = test::select(els, "line", "capacity");
  ASSERT_EQ(caps.size(), 1u);
  // The shading is everything above the capacity line.
  EXPECT_NEAR(over[0]->num("y"), plot.top, 0.011);
  EXPECT_NEAR(over[0]->num("y") + over[0]->num("height"), caps[0]->num("y1"), 0.02);
  EXPECT_NE(svg.find("1 of 4 ranks exceed their capacity; rank 3 by 1.0 GiB"), std::string::npos);
  // rank 3's legend entry is the one in bold.
  EXPECT_NE(svg.find("font-weight=\"bold\">rank 3 \u00b7"), std::string::npos);
  EXPECT_EQ(svg.find("font-weight=\"bold\">rank 0 \u00b7"), std::string::npos);
}

TEST(MemorySvg, FarBelowCapacityTheScaleFollowsThePeak) {
  const std::string svg = svg_of(run({1, 2, 2, 6}, 1000));
  const auto els = parse_svg(svg);
  const Plot plot = plot_of(els);
  const auto caps = test::select(els, "line", "capacity");
  ASSERT_EQ(caps.size(), 1u);
  EXPECT_NEAR(caps[0]->num("y1"), plot.top, 0.011);
  EXPECT_NE(svg.find("capacity 1000.0 GiB (off scale, above)"), std::string::npos);
  EXPECT_GT(plot.bottom() - test::top_of(*curves_of(els).at(3)), 0.5 * plot.height);
}

// With tail work the iteration outlasts the pipeline; a line marks where the ops end.
TEST(MemorySvg, MarksTheEndOfThePipeline) {
  const Timeline t = run({1, 1, 1, 1}, 24, {2 * kMs, 2 * kMs, 2 * kMs, 2 * kMs});
  ASSERT_EQ(t.pipeline_time, 33 * kMs);
  ASSERT_EQ(t.iteration_time, 35 * kMs);
  const auto els = parse_svg(svg_of(t));
  const Plot plot = plot_of(els);
  const auto end = test::select(els, "line", "pipeline-end");
  ASSERT_EQ(end.size(), 1u);
  EXPECT_NEAR(end[0]->num("x1") - plot.left, 33.0 / 35.0 * plot.width, 0.011);
  // Without tail work there is no such line.
  EXPECT_TRUE(
      test::select(parse_svg(svg_of(run({1, 1, 1, 1}, 24))), "line", "pipeline-end").empty());
}

TEST(MemorySvg, WidthOption) {
  const auto els = parse_svg(svg_of(run({1, 1}, 24), SvgOptions{900, 4000, 32, true}));
  EXPECT_DOUBLE_EQ(els.front().num("width"), 900);
  const Plot plot = plot_of(els);
  EXPECT_LT(plot.left + plot.width, 900);
}

TEST(MemorySvg, FailedRunSaysWhy) {
  Schedule sch = make_1f1b(ScheduleParams{2, 2, 1});
  std::swap(sch.ops[1][0], sch.ops[1][1]);
  const auto topo = test::node(2);
  const Timeline t = record_timeline(test::uniform(sch, *topo, kMs, kMs, kMs), sch);
  ASSERT_FALSE(t.ok);
  const std::string svg = svg_of(t);
  parse_svg(svg);
  EXPECT_NE(svg.find("simulation failed"), std::string::npos);
}

TEST(MemorySvg, SameTimelineGivesIdenticalBytes) {
  EXPECT_EQ(svg_of(run({1, 2, 2, 6}, 24)), svg_of(run({1, 2, 2, 6}, 24)));
}

}  // namespace
}  // namespace bmpipe
