// The SVG timeline: well-formed XML (checked by a small parser written here), one box per
// op, one time scale across stacked runs, deterministic bytes.
#include <gtest/gtest.h>

#include <cctype>
#include <fstream>
#include <map>

#include "trace_checks.hpp"
#include "traces/svg.hpp"

namespace bmpipe {
namespace {

constexpr Time kMs = 1'000'000;

struct Element {
  std::string name;
  std::map<std::string, std::string> attrs;
};

// A strict little XML reader: prolog, comments, nested elements with quoted attributes,
// text with entity references. Records every element; fails the test on anything
// malformed (unbalanced tags, bad attribute syntax, stray '<' or '&', trailing garbage).
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
  void entity() {  // at '&'
    const auto end = s_.find(';', i_);
    if (end == std::string::npos || end - i_ > 8) fail("bad entity");
    const std::string e = s_.substr(i_ + 1, end - i_ - 1);
    if (e != "amp" && e != "lt" && e != "gt" && e != "quot" && e != "apos" && e.rfind('#', 0) != 0)
      fail("unknown entity &" + e + ";");
    i_ = end + 1;
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
          entity();
          value += '&';
          continue;
        }
        value += s_[i_++];
      }
      if (i_ >= s_.size()) fail("unterminated attribute");
      ++i_;
      el.attrs[key] = value;
    }
    const std::string tag = el.name;
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
        element();
        continue;
      }
      if (s_[i_] == '&') {
        entity();
        continue;
      }
      ++i_;
    }
  }

  const std::string s_;
  std::size_t i_ = 0;
};

std::vector<Element> parse_svg(const std::string& text) {
  XmlCheck x(text);
  std::string error;
  EXPECT_TRUE(x.parse(&error)) << error;
  return x.elements;
}

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

}  // namespace
}  // namespace bmpipe
