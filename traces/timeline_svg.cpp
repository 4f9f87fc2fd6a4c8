#include "traces/timeline_svg.hpp"

#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <cstdio>

#include "traces/band_layout.hpp"
#include "traces/memory_curve.hpp"
#include "traces/svg_primitives.hpp"

namespace bmpipe {
namespace {

using namespace svg;

// Page geometry, in px.
constexpr double kLeft = 150;   // row labels
constexpr double kRight = 120;  // memory-panel labels
constexpr double kHeader = 64;  // picture title and legend
constexpr double kBlockTitle = 26;
constexpr double kRowHeight = 18;
constexpr double kRowPitch = 22;
constexpr double kAxis = 34;
constexpr double kMemHeading = 18;
// Memory panels: taller when there are few, since one scale leaves small curves small.
constexpr double kMemHeightFew = 50;
constexpr double kMemHeightMany = 34;  // above kFewRanks ranks
constexpr int kFewRanks = 16;
constexpr double kMemGap = 8;
// Past this many ranks the per-rank memory panels, mostly empty at that height, become one
// heat strip: a row per rank, a cell per time bin, its shade the bin's fullest moment.
constexpr int kHeatRanks = 32;
constexpr double kHeatRow = 4;   // px per rank in the strip
constexpr int kHeatBins = 400;   // time bins across the plot
constexpr int kHeatLevels = 10;  // shades from empty to full
constexpr double kBlockGap = 24;
constexpr double kSmallFont = 8;             // two-line band labels
constexpr std::size_t kTooltipLimit = 5000;  // boxes; above it tooltips only bloat the file
// Automatic width: this much per op on the row with most ops, from kDefaultWidth up to
// SvgOptions::max_width_px. Below kMinOpPx per op a box is a sliver that shows neither its
// kind nor its micro-batch, so rows become bands.
constexpr double kDefaultWidth = 1400;
constexpr double kOpPx = 16;
constexpr double kMinOpPx = 8;
// A bubble at least this wide is visible on the page, so it ends a band: aggregation may
// hide which op ran where, never that a device stood idle.
constexpr double kGapPx = 3;
constexpr int kKinds = 5;

constexpr const char* kTailFill = "#79706e";  // Tableau grey: not a compute kind
constexpr const char* kReduceFill = "#bab0ac";  // its lighter grey: the wait for the dp reduction

struct KindStyle {
  const char* name;  // as in the trace
  const char* css;   // class suffix
  const char* fill;
  const char* text;
  const char* light_fill;  // the same hue for a device's odd chunks
  const char* light_text;
};

// Colour-blind-safe Tableau 10 hues; text colour chosen for contrast on each.
KindStyle style(OpKind kind) {
  switch (kind) {
    case OpKind::F:
      return {"F", "F", "#4e79a7", "#ffffff", "#a6c3e0", "#000000"};
    case OpKind::B:
      return {"B", "B", "#f28e2b", "#000000", "#fbc998", "#000000"};
    case OpKind::I:
      return {"I", "I", "#e15759", "#ffffff", "#f4aeaf", "#000000"};
    case OpKind::W:
      return {"W", "W", "#59a14f", "#ffffff", "#aad3a2", "#000000"};
    case OpKind::FB:
      return {"F&amp;B", "FB", "#b07aa1", "#ffffff", "#dcc1d6", "#000000"};
  }
  return {"?", "X", "#999999", "#000000", "#cccccc", "#000000"};
}

/// `dark` at t = 0 to `light` at t = 1, channel by channel ("#rrggbb" both).
std::string shade(const char* dark, const char* light, double t) {
  if (t <= 0) return dark;
  if (t >= 1) return light;
  auto channel = [](const char* hex, int i) {
    return std::stoi(std::string(hex + 1 + 2 * i, 2), nullptr, 16);
  };
  char out[8];
  int c[3];
  for (int i = 0; i < 3; ++i)
    c[i] = static_cast<int>(
        std::lround(channel(dark, i) + t * (channel(light, i) - channel(dark, i))));
  std::snprintf(out, sizeof out, "#%02x%02x%02x", c[0], c[1], c[2]);
  return out;
}

constexpr std::array<OpKind, kKinds> kKindOrder = {OpKind::F, OpKind::B, OpKind::I, OpKind::W,
                                                   OpKind::FB};

// Time axis unit and a 1-2-5 tick step giving about `ticks` ticks over `span`.
struct Axis {
  Time step = 1;
  Time unit = 1;
  const char* unit_name = "ns";
};
Axis make_axis(Time span, int ticks) {
  Axis a;
  if (span >= 10 * 1'000'000'000LL)
    a.unit = 1'000'000'000LL, a.unit_name = "s";
  else if (span >= 1'000'000)
    a.unit = 1'000'000, a.unit_name = "ms";
  else if (span >= 1'000)
    a.unit = 1'000, a.unit_name = "\u00b5s";
  const double raw = static_cast<double>(std::max<Time>(span, 1)) / std::max(ticks, 1);
  a.step = std::max<Time>(1, static_cast<Time>(std::llround(nice_step(raw))));
  return a;
}

std::string tick_label(Time t, const Axis& a) {
  char buf[32];
  const double v = static_cast<double>(t) / static_cast<double>(a.unit);
  // Enough decimals for the step, none when the step is a whole number of units.
  int decimals = 0;
  for (Time s = a.step; decimals < 6 && (s % a.unit) != 0 && s * 10 > 0; s *= 10) ++decimals;
  if (a.step >= a.unit) decimals = 0;
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// Consecutive ops of one device drawn as one box.
struct Band {
  int rank = 0;
  Time start = 0, end = 0, busy = 0;
  int ops = 0;
  std::array<int, kKinds> lo{}, hi{};  // micro-batch range per kind; lo > hi: kind absent
  bool light = true;                   // every op on an odd chunk
  Band() {
    lo.fill(INT_MAX);
    hi.fill(INT_MIN);
  }
  unsigned kinds() const {
    unsigned mask = 0;
    for (int k = 0; k < kKinds; ++k)
      if (lo[k] <= hi[k]) mask |= 1u << k;
    return mask;
  }
  void add(const Timeline::Box& b, bool odd_chunk) {
    if (ops == 0) start = b.start;
    end = b.end;
    busy += b.end - b.start;
    ++ops;
    const int k = static_cast<int>(b.op.kind);
    lo[k] = std::min(lo[k], b.op.microbatch);
    hi[k] = std::max(hi[k], b.op.microbatch);
    if (b.op.kind == OpKind::FB && b.op.microbatch2 >= 0) {
      lo[k] = std::min(lo[k], b.op.microbatch2);
      hi[k] = std::max(hi[k], b.op.microbatch2);
    }
    light = light && odd_chunk;
  }
};

std::string range_text(int lo, int hi) {
  return lo == hi ? std::to_string(lo) : std::to_string(lo) + "\u2013" + std::to_string(hi);
}

// "F 64–69", "B 0–5": a band's micro-batches per kind, its label when it fits.
std::vector<std::string> band_label_lines(const Band& b) {
  std::vector<std::string> lines;
  for (OpKind k : kKindOrder) {
    const int i = static_cast<int>(k);
    if (b.lo[i] > b.hi[i]) continue;
    lines.push_back((k == OpKind::FB ? std::string("F&B") : std::string(1, op_kind_char(k))) + " " +
                    range_text(b.lo[i], b.hi[i]));
  }
  return lines;
}

std::string band_label_per_kind(const Band& b) {
  std::string s;
  for (const auto& line : band_label_lines(b)) s += (s.empty() ? "" : " ") + line;
  return s;
}

// "0–69": the band's micro-batch range over all kinds, the label when the other is too long.
std::string band_label_overall(const Band& b) {
  int lo = INT_MAX, hi = INT_MIN;
  for (int k = 0; k < kKinds; ++k)
    if (b.lo[k] <= b.hi[k]) lo = std::min(lo, b.lo[k]), hi = std::max(hi, b.hi[k]);
  return range_text(lo, hi);
}

std::string pattern_id(unsigned mask) {
  std::string id = "mix";
  for (OpKind k : kKindOrder)
    if (mask & (1u << static_cast<int>(k))) id += std::string("-") + style(k).css;
  return id;
}

// What a timeline's rows are made of: per rank, its boxes in start order; and, when the
// rows are too dense for boxes, the bands that replace them.
struct Layout {
  std::vector<std::vector<std::size_t>> rows;
  std::vector<Time> last_end;  // per rank: where its tail work starts
  std::size_t most_ops = 0;
  bool aggregated = false;
  int group = 1;  // most ops in one band
  std::vector<Band> bands;
};

Layout index_rows(const Timeline& t) {
  Layout l;
  const std::size_t p = static_cast<std::size_t>(std::max(t.num_ranks, 0));
  l.rows.resize(p);
  l.last_end.assign(p, 0);
  for (std::size_t i = 0; i < t.boxes.size(); ++i) {
    const auto& b = t.boxes[i];
    if (b.rank < 0 || static_cast<std::size_t>(b.rank) >= p) continue;
    l.rows[b.rank].push_back(i);
    l.last_end[b.rank] = std::max(l.last_end[b.rank], b.end);
  }
  for (auto& row : l.rows) {
    // One compute stream per device: completion order is start order; sorting only
    // guards hand-made timelines.
    std::stable_sort(row.begin(), row.end(), [&](std::size_t a, std::size_t b) {
      return t.boxes[a].start < t.boxes[b].start;
    });
    l.most_ops = std::max(l.most_ops, row.size());
  }
  return l;
}

// Replaces each row's boxes by bands, cut as band_runs() says (see traces/band_layout.hpp).
void make_bands(const Timeline& t, Layout& l, const BandRule& rule) {
  l.aggregated = true;
  l.group = rule.max_ops;
  std::vector<BandInterval> intervals;
  for (std::size_t r = 0; r < l.rows.size(); ++r) {
    const auto& row = l.rows[r];
    intervals.clear();
    for (std::size_t i : row) intervals.push_back({t.boxes[i].start, t.boxes[i].end});
    for (const BandRun& run : band_runs(intervals, rule)) {
      Band band;
      band.rank = static_cast<int>(r);
      for (std::size_t i = run.first; i < run.last; ++i) {
        const auto& b = t.boxes[row[i]];
        band.add(b, at_or<int>(t.stage_chunk, b.op.stage, 0) % 2 == 1);
      }
      l.bands.push_back(band);
    }
  }
}

class Painter {
 public:
  Painter(std::ostream& out, std::span<const Timeline> timelines, const SvgOptions& options)
      : out_(out), timelines_(timelines), options_(options) {
    std::size_t most = 0;
    for (const auto& t : timelines_) {
      layouts_.push_back(index_rows(t));
      most = std::max(most, layouts_.back().most_ops);
    }
    width_ = options.width_px > 0
                 ? options.width_px
                 : std::clamp(kLeft + kRight + static_cast<double>(most) * kOpPx, kDefaultWidth,
                              std::max<double>(kDefaultWidth, options.max_width_px));
    plot_width_ = std::max(100.0, width_ - kLeft - kRight);
    for (const auto& t : timelines_) span_ = std::max({span_, t.iteration_time, t.pipeline_time});
    for (const auto& t : timelines_)
      for (int c : t.stage_chunk) chunks_ = std::max(chunks_, c + 1);
    span_ = std::max<Time>(span_, 1);
    scale_ = plot_width_ / static_cast<double>(span_);
    std::size_t drawn = 0;
    for (std::size_t i = 0; i < timelines_.size(); ++i) {
      Layout& l = layouts_[i];
      if (const auto rule =
              band_rule(l.most_ops, plot_width_, options.band_px, kMinOpPx, scale_, kGapPx)) {
        make_bands(timelines_[i], l, *rule);
        for (const Band& b : l.bands)
          if (b.kinds() & (b.kinds() - 1)) mixes_.push_back(b.kinds());
        drawn += l.bands.size();
      } else {
        drawn += timelines_[i].boxes.size();
      }
    }
    std::sort(mixes_.begin(), mixes_.end());
    mixes_.erase(std::unique(mixes_.begin(), mixes_.end()), mixes_.end());
    tooltips_ = drawn <= kTooltipLimit;
    mem_ = memory_scale(timelines_);
    int most_ranks = 0;
    for (const auto& t : timelines_) most_ranks = std::max(most_ranks, t.num_ranks);
    mem_height_ = most_ranks <= kFewRanks ? kMemHeightFew : kMemHeightMany;
  }

  void paint() {
    double height = kHeader;
    for (const auto& t : timelines_) height += block_height(t) + kBlockGap;
    buf_ += svg_open(width_, height);
    defs();
    header();
    double y = kHeader;
    for (std::size_t i = 0; i < timelines_.size(); ++i) {
      block(timelines_[i], layouts_[i], y);
      y += block_height(timelines_[i]) + kBlockGap;
      flush();
    }
    buf_ += "</svg>\n";
    flush();
  }

 private:
  double x(Time t) const { return kLeft + static_cast<double>(t) * scale_; }

  double block_height(const Timeline& t) const {
    if (!t.ok) return kBlockTitle + 20;
    double h = kBlockTitle + t.num_ranks * kRowPitch + kAxis;
    if (options_.memory_panels)
      h += kMemHeading + (t.num_ranks > kHeatRanks ? t.num_ranks * kHeatRow + kMemGap
                                                   : t.num_ranks * (mem_height_ + kMemGap));
    return h;
  }

  // Diagonal stripes of each mix of kinds that a band holds, in the light tints so that a
  // black label reads on them.
  void defs() {
    if (mixes_.empty()) return;
    buf_ += "<defs>";
    for (unsigned mask : mixes_) {
      int n = 0;
      for (int k = 0; k < kKinds; ++k) n += (mask >> k) & 1;
      const int stripe = 4;
      buf_ += "<pattern id=\"" + pattern_id(mask) + "\" patternUnits=\"userSpaceOnUse\" width=\"" +
              std::to_string(stripe * n) + "\" height=\"8\" patternTransform=\"rotate(45)\">";
      int at = 0;
      for (OpKind k : kKindOrder) {
        if (!(mask & (1u << static_cast<int>(k)))) continue;
        buf_ += "<rect x=\"" + std::to_string(at) + "\" y=\"0\" width=\"" + std::to_string(stripe) +
                "\" height=\"8\" fill=\"" + style(k).light_fill + "\"/>";
        at += stripe;
      }
      buf_ += "</pattern>";
    }
    buf_ += "</defs>\n";
  }

  void legend_box(double& lx, double ly, const std::string& fill, const std::string& extra,
                  const std::string& text, double text_width) {
    buf_ += "<rect class=\"legend\" x=\"" + num(lx) + "\" y=\"" + num(ly) +
            "\" width=\"14\" height=\"12\" fill=\"" + fill + "\"" + extra + "/>";
    buf_ += "<text x=\"" + num(lx + 18) + "\" y=\"" + num(ly + 10) + "\" font-size=\"11\">" + text +
            "</text>\n";
    lx += 30 + text_width;
  }

  void header() {
    std::string title =
        timelines_.size() == 1 ? "Pipeline timeline" : "Pipeline timelines, one time scale";
    buf_ += "<text x=\"12\" y=\"24\" font-size=\"16\" font-weight=\"bold\">" + title + "</text>\n";
    // Legend: only what occurs, in a fixed order.
    bool used[kKinds] = {false, false, false, false, false};
    bool tails = false, reductions = false, aggregated = false, chunks = false;
    for (std::size_t i = 0; i < timelines_.size(); ++i) {
      const Timeline& t = timelines_[i];
      for (const auto& b : t.boxes) used[static_cast<int>(b.op.kind)] = true;
      for (int r = 0; r < t.num_ranks && t.ok; ++r)
        if (at_or<Time>(t.tail_time, r, 0) > 0) {  // as tail() draws it
          tails = true;
          if (static_cast<std::size_t>(r) < layouts_[i].last_end.size() &&
              at_or<Time>(t.tail_start, r, 0) > layouts_[i].last_end[r])
            reductions = true;
        }
      aggregated = aggregated || layouts_[i].aggregated;
      for (int c : t.stage_chunk) chunks = chunks || c % 2 == 1;
    }
    double lx = 12;
    const double ly = 40;
    for (OpKind k : kKindOrder) {
      if (!used[static_cast<int>(k)]) continue;
      const KindStyle s = style(k);
      const char* meaning = k == OpKind::F   ? "forward"
                            : k == OpKind::B ? "backward"
                            : k == OpKind::I ? "backward (input grad)"
                            : k == OpKind::W ? "backward (weight grad)"
                                             : "overlapped forward + backward";
      legend_box(lx, ly, s.fill, "", std::string(s.name) + " " + meaning,
                 6.5 * (std::char_traits<char>::length(meaning) + 4));
    }
    if (reductions)
      legend_box(lx, ly, kReduceFill, "", "waiting for dp gradient reduction", 6.5 * 33);
    if (tails) legend_box(lx, ly, kTailFill, "", "optimizer step", 6.5 * 14);
    legend_box(lx, ly, "#ececec", " stroke=\"#bbbbbb\" stroke-width=\"0.5\"", "bubble (idle)", 90);
    if (aggregated) {
      const std::string fill =
          mixes_.empty() ? std::string("#4e79a7") : "url(#" + pattern_id(mixes_.front()) + ")";
      legend_box(lx, ly, fill, "",
                 "band: a device\u2019s consecutive ops, labelled with their micro-batches "
                 "(stripes: mixed kinds)",
                 6.2 * 80);
    }
    if (chunks && chunks_ > 2) {
      // One swatch per chunk, dark to light, and their names.
      const double w = 28.0 / chunks_;
      for (int c = 0; c < chunks_; ++c)
        buf_ += "<rect class=\"legend chunk\" x=\"" + num(lx + c * w) + "\" y=\"" + num(ly) +
                "\" width=\"" + num(w) + "\" height=\"12\" fill=\"" +
                shade("#4e79a7", "#a6c3e0", static_cast<double>(c) / (chunks_ - 1)) + "\"/>";
      std::string names;
      for (int c = 1; c <= chunks_; ++c)
        names += (c > 1 ? " / " : "") + std::to_string(c) +
                 (c % 10 == 1 && c != 11   ? "st"
                  : c % 10 == 2 && c != 12 ? "nd"
                  : c % 10 == 3 && c != 13 ? "rd"
                                           : "th");
      const std::string text = "dark to light: a device\u2019s " + names + " chunk";
      buf_ += "<text x=\"" + num(lx + 32) + "\" y=\"" + num(ly + 10) + "\" font-size=\"11\">" +
              text + "</text>\n";
      lx += 50 + text_px(text);
    } else if (chunks) {
      buf_ += "<rect class=\"legend\" x=\"" + num(lx) + "\" y=\"" + num(ly) +
              "\" width=\"7\" height=\"12\" fill=\"#4e79a7\"/><rect class=\"legend\" x=\"" +
              num(lx + 7) + "\" y=\"" + num(ly) + "\" width=\"7\" height=\"12\" fill=\"#a6c3e0\"/>";
      buf_ += "<text x=\"" + num(lx + 18) + "\" y=\"" + num(ly + 10) +
              "\" font-size=\"11\">dark / light: a device\u2019s 1st / 2nd chunk</text>\n";
      lx += 250;
    }
    if (options_.memory_panels) {
      buf_ += "<line x1=\"" + num(lx) + "\" y1=\"" + num(ly + 6) + "\" x2=\"" + num(lx + 16) +
              "\" y2=\"" + num(ly + 6) + "\" stroke=\"" + kCapacityColour +
              "\" stroke-width=\"1.5\" stroke-dasharray=\"4,2\"/>";
      buf_ += "<text x=\"" + num(lx + 20) + "\" y=\"" + num(ly + 10) +
              "\" font-size=\"11\">memory capacity</text>\n";
    }
  }

  void block(const Timeline& t, const Layout& l, double y) {
    char buf[256];
    if (!t.ok) {
      buf_ += "<text x=\"12\" y=\"" + num(y + 18) + "\" font-size=\"13\" font-weight=\"bold\">" +
              escape(t.title) + "</text>\n";
      buf_ += "<text x=\"" + num(kLeft) + "\" y=\"" + num(y + 36) + "\" font-size=\"11\" fill=\"" +
              kCapacityColour + "\">" + escape("simulation failed: " + t.error) + "</text>\n";
      return;
    }
    std::snprintf(buf, sizeof buf, "\u2014 iteration %.3f ms, pipeline %.3f ms, bubble %.1f %%",
                  ns_to_ms(t.iteration_time), ns_to_ms(t.pipeline_time), 100.0 * t.bubble_ratio);
    std::string subtitle = buf;
    if (l.aggregated)
      subtitle += "; too dense for a box per op: bands of up to " + std::to_string(l.group) +
                  " ops, split at every visible bubble";
    buf_ += "<text x=\"12\" y=\"" + num(y + 18) + "\" font-size=\"13\" font-weight=\"bold\">" +
            escape(t.title) + "<tspan dx=\"8\" font-weight=\"normal\">" + escape(subtitle) +
            "</tspan></text>\n";
    const double rows_top = y + kBlockTitle;
    const double rows_bottom = rows_top + t.num_ranks * kRowPitch;
    const Axis axis = make_axis(span_, std::max(4, static_cast<int>(plot_width_ / 110)));

    // Grid first, so boxes paint over it.
    buf_ += "<g class=\"grid\" stroke=\"#d0d0d0\" stroke-width=\"0.5\">";
    for (Time tick = 0; tick <= span_; tick += axis.step)
      buf_ += "<line x1=\"" + num(x(tick)) + "\" y1=\"" + num(rows_top - 2) + "\" x2=\"" +
              num(x(tick)) + "\" y2=\"" + num(rows_bottom) + "\"/>";
    buf_ += "</g>\n";

    // Rows: a light band per device, so gaps (bubbles) read as empty track.
    for (int r = 0; r < t.num_ranks; ++r) {
      const double ry = rows_top + r * kRowPitch;
      const int dev = at_or<int>(t.rank_device, r, r);
      buf_ += "<rect class=\"row\" x=\"" + num(kLeft) + "\" y=\"" + num(ry) + "\" width=\"" +
              num(static_cast<double>(t.iteration_time) * scale_) + "\" height=\"" +
              num(kRowHeight) + "\" fill=\"#ececec\" fill-opacity=\"0.8\"/>";
      buf_ += "<text x=\"" + num(kLeft - 8) + "\" y=\"" + num(ry + 13) +
              "\" font-size=\"11\" text-anchor=\"end\">rank " + std::to_string(r) + " \u00b7 dev " +
              std::to_string(dev) + "</text>\n";
    }

    if (l.aggregated) {
      for (const Band& b : l.bands) band(b, rows_top);
    } else {
      for (const auto& b : t.boxes) box(t, b, rows_top);
    }
    for (int r = 0; r < t.num_ranks; ++r) tail(t, l, r, rows_top);

    // Time axis under the rows.
    const double ay = rows_bottom + 4;
    buf_ += "<g class=\"axis\"><line x1=\"" + num(kLeft) + "\" y1=\"" + num(ay) + "\" x2=\"" +
            num(kLeft + plot_width_) + "\" y2=\"" + num(ay) +
            "\" stroke=\"#333333\" stroke-width=\"1\"/>";
    // The axis title starts after the last tick label: a tick near the right end would
    // otherwise run into it ("7000time (ms)").
    double title_x = kLeft + plot_width_ + 6;
    for (Time tick = 0; tick <= span_; tick += axis.step) {
      const std::string label = tick_label(tick, axis);
      buf_ += "<line x1=\"" + num(x(tick)) + "\" y1=\"" + num(ay) + "\" x2=\"" + num(x(tick)) +
              "\" y2=\"" + num(ay + 4) + "\" stroke=\"#333333\" stroke-width=\"1\"/>";
      buf_ += "<text x=\"" + num(x(tick)) + "\" y=\"" + num(ay + 15) +
              "\" font-size=\"10\" text-anchor=\"middle\">" + label + "</text>";
      title_x = std::max(title_x, x(tick) + text_px(label) / 2 + 8);
    }
    buf_ += "<text x=\"" + num(title_x) + "\" y=\"" + num(ay + 15) + "\" font-size=\"10\">time (" +
            axis.unit_name + ")</text></g>\n";

    if (options_.memory_panels) memory(t, rows_bottom + kAxis);
  }

  void box(const Timeline& t, const Timeline::Box& b, double rows_top) {
    char buf[256];
    const KindStyle s = style(b.op.kind);
    // A device's chunks from dark (its first) to light (its last): at vpp 2 the two tints,
    // past it one shade each, so that chunks 0 and 2 no longer look the same.
    const int chunk = at_or<int>(t.stage_chunk, b.op.stage, 0);
    const double lightness =
        chunks_ <= 2 ? chunk % 2 : static_cast<double>(chunk) / static_cast<double>(chunks_ - 1);
    const std::string fill = shade(s.fill, s.light_fill, lightness);
    const char* text = lightness >= 0.5 ? s.light_text : s.text;
    const double bx = x(b.start);
    const double bw = static_cast<double>(b.end - b.start) * scale_;
    const double by = rows_top + b.rank * kRowPitch;
    buf_ += "<rect class=\"op ";
    buf_ += s.css;
    buf_ += "\" x=\"" + num(bx) + "\" y=\"" + num(by) + "\" width=\"" + num(bw) + "\" height=\"" +
            num(kRowHeight) + "\" fill=\"" + fill + "\"";
    if (bw >= 4) buf_ += " stroke=\"#ffffff\" stroke-width=\"0.6\"";
    if (tooltips_) {
      std::snprintf(buf, sizeof buf, "%s: %.3f\u2013%.3f ms", to_string(b.op).c_str(),
                    ns_to_ms(b.start), ns_to_ms(b.end));
      buf_ += "><title>" + escape(buf) + "</title></rect>";
    } else {
      buf_ += "/>";
    }
    std::string label = std::to_string(b.op.microbatch);
    if (b.op.kind == OpKind::FB) label += "/" + std::to_string(b.op.microbatch2);
    // A smaller font before no label: dense rows and long F&B labels keep their numbers.
    const bool fits = bw >= text_px(label) + 3;
    if (fits || bw >= text_px(label) * kSmallFont / 10 + 2)
      buf_ += "<text x=\"" + num(bx + bw / 2) + "\" y=\"" + num(by + (fits ? 13 : 12)) +
              "\" class=\"mb\" font-size=\"" + (fits ? std::string("10") : num(kSmallFont)) +
              "\" text-anchor=\"middle\" fill=\"" + text + "\">" + label + "</text>";
    buf_ += "\n";
    flush_if_large();
  }

  void band(const Band& b, double rows_top) {
    char buf[64];
    const unsigned mask = b.kinds();
    const bool mixed = (mask & (mask - 1)) != 0;
    OpKind only = OpKind::F;
    for (OpKind k : kKindOrder)
      if (mask & (1u << static_cast<int>(k))) only = k;
    const KindStyle s = style(only);
    const std::string fill = mixed     ? "url(#" + pattern_id(mask) + ")"
                             : b.light ? std::string(s.light_fill)
                                       : std::string(s.fill);
    const double bx = x(b.start);
    const double bw = static_cast<double>(b.end - b.start) * scale_;
    const double by = rows_top + b.rank * kRowPitch;
    buf_ += "<rect class=\"band\" x=\"" + num(bx) + "\" y=\"" + num(by) + "\" width=\"" + num(bw) +
            "\" height=\"" + num(kRowHeight) + "\" fill=\"" + fill + "\"";
    if (bw >= 4) buf_ += " stroke=\"#ffffff\" stroke-width=\"0.6\"";
    const std::string per_kind = band_label_per_kind(b);
    if (tooltips_) {
      std::snprintf(buf, sizeof buf, "; busy %.0f %%",
                    100.0 * static_cast<double>(b.busy) /
                        static_cast<double>(std::max<Time>(b.end - b.start, 1)));
      buf_ += "><title>" +
              escape("rank " + std::to_string(b.rank) + ", " + std::to_string(b.ops) + " ops, " +
                     ms_text(b.start) + " \u2013 " + ms_text(b.end) + buf + "; micro-batches " +
                     per_kind) +
              "</title></rect>";
    } else {
      buf_ += "/>";
    }
    // The per-kind ranges say most: on one line, or one line per kind in a smaller font; the
    // overall range still beats no label.
    const char* colour = mixed ? "#000000" : b.light ? s.light_text : s.text;
    const std::vector<std::string> lines = band_label_lines(b);
    double widest = 0;
    for (const auto& line : lines) widest = std::max(widest, text_px(line) * kSmallFont / 10);
    const std::string open = "<text x=\"" + num(bx + bw / 2) +
                             "\" class=\"band-label\" text-anchor=\"middle\" fill=\"" + colour +
                             "\"";
    if (bw >= text_px(per_kind) + 4) {
      buf_ += open + " y=\"" + num(by + 13) + "\" font-size=\"10\">" + escape(per_kind) + "</text>";
    } else if (lines.size() == 2 && bw >= widest + 4) {
      buf_ += open + " y=\"" + num(by + 8) + "\" font-size=\"" + num(kSmallFont) + "\">";
      for (std::size_t i = 0; i < lines.size(); ++i)
        buf_ += "<tspan x=\"" + num(bx + bw / 2) + "\" y=\"" + num(by + 8 + 8.5 * i) + "\">" +
                escape(lines[i]) + "</tspan>";
      buf_ += "</text>";
    } else if (const std::string overall = band_label_overall(b); bw >= text_px(overall) + 4) {
      buf_ += open + " y=\"" + num(by + 13) + "\" font-size=\"10\">" + escape(overall) + "</text>";
    } else if (bw >= text_px(overall) * kSmallFont / 10 + 3) {
      buf_ += open + " y=\"" + num(by + 12) + "\" font-size=\"" + num(kSmallFont) + "\">" +
              escape(overall) + "</text>";
    }
    buf_ += "\n";
    flush_if_large();
  }

  // The rank's end-of-iteration work, from where the engine started it, as long as it takes.
  void tail(const Timeline& t, const Layout& l, int r, double rows_top) {
    const Time tail = at_or<Time>(t.tail_time, r, 0);
    if (tail <= 0 || static_cast<std::size_t>(r) >= l.last_end.size()) return;
    const Time start = at_or<Time>(t.tail_start, r, l.last_end[r]);
    const double bx = x(start);
    const double bw = static_cast<double>(tail) * scale_;
    const double by = rows_top + r * kRowPitch;
    // Between the last op and the tail the rank waits for its dp gradient reductions.
    if (start > l.last_end[r]) {
      const double wx = x(l.last_end[r]);
      buf_ += "<rect class=\"grad-reduce-wait\" x=\"" + num(wx) + "\" y=\"" + num(by) +
              "\" width=\"" + num(bx - wx) + "\" height=\"" + num(kRowHeight) + "\" fill=\"" +
              kReduceFill + "\"><title>" +
              escape("rank " + std::to_string(r) + ": waiting for dp gradient reduction, " +
                     ms_text(start - l.last_end[r]) + " (" + ms_text(l.last_end[r]) + " \u2013 " +
                     ms_text(start) + ")") +
              "</title></rect>";
    }
    const std::string what = "optimizer step";
    buf_ += "<rect class=\"tail\" x=\"" + num(bx) + "\" y=\"" + num(by) + "\" width=\"" + num(bw) +
            "\" height=\"" + num(kRowHeight) + "\" fill=\"" + kTailFill + "\"";
    if (bw >= 4) buf_ += " stroke=\"#ffffff\" stroke-width=\"0.6\"";
    // Always a tooltip: at most one per rank.
    buf_ += "><title>" +
            escape("rank " + std::to_string(r) + ": " + what + ", " + ms_text(tail) + " (" +
                   ms_text(start) + " \u2013 " + ms_text(start + tail) + ")") +
            "</title></rect>";
    for (const std::string& label :
         {what + " " + ms_text(tail), what, std::string("optimizer"), std::string("opt")}) {
      if (bw < text_px(label) + 6) continue;
      buf_ += "<text x=\"" + num(bx + bw / 2) + "\" y=\"" + num(by + 13) +
              "\" class=\"tail-label\" font-size=\"10\" text-anchor=\"middle\" "
              "fill=\"#ffffff\">" +
              escape(label) + "</text>";
      break;
    }
    buf_ += "\n";
  }

  double mem_y(double bottom, std::int64_t bytes, double height) const {
    return bottom - static_cast<double>(bytes) / mem_.full * height;
  }

  // Fraction of the capacity (or of the scale, without one) to a shade: white to dark blue,
  // and the capacity colour above it.
  static std::string heat_fill(int level) {
    if (level > kHeatLevels) return kCapacityColour;
    return shade("#f7fbff", "#08306b", static_cast<double>(level) / kHeatLevels);
  }

  void heat_strip(const Timeline& t, double y) {
    buf_ += "<text x=\"12\" y=\"" + num(y + 13) +
            "\" font-size=\"11\" font-weight=\"bold\">memory per device as a heat strip: a row per "
            "rank, a cell's shade its fullest moment against the capacity (white empty, dark "
            "blue full, red over)</text>\n";
    y += kMemHeading;
    const Time end = std::max<Time>(std::max(t.iteration_time, t.pipeline_time), 1);
    const double bin_w = plot_width_ / kHeatBins;
    buf_ += "<g class=\"heat-strip\">";
    for (int r = 0; r < t.num_ranks; ++r) {
      const std::int64_t cap = at_or<std::int64_t>(t.capacity_bytes, r, 0);
      const double full = cap > 0 ? static_cast<double>(cap) : mem_.full;
      const std::int64_t stat = at_or<std::int64_t>(t.static_bytes, r, 0);
      // The most bytes held in each bin: the level on entering it and every change in it.
      std::vector<std::int64_t> most(kHeatBins, stat);
      auto bin_of = [&](Time time) {
        return std::clamp<int>(static_cast<int>(static_cast<double>(time) / end * kHeatBins), 0,
                               kHeatBins - 1);
      };
      std::int64_t current = stat;
      int from = 0;
      if (static_cast<std::size_t>(r) < t.memory.size())
        for (const auto& sample : t.memory[r]) {
          const int b = bin_of(sample.time);
          for (int k = from; k <= b; ++k) most[k] = std::max(most[k], current);
          current = stat + sample.activation_bytes;
          most[b] = std::max(most[b], current);
          from = b;
        }
      for (int k = from; k < kHeatBins; ++k) most[k] = std::max(most[k], current);
      auto level = [&](std::int64_t bytes) {
        const double f = static_cast<double>(bytes) / full;
        return f > 1 ? kHeatLevels + 1
                     : static_cast<int>(std::lround(std::clamp(f, 0.0, 1.0) * kHeatLevels));
      };
      // Runs of one shade as one rect.
      const double top = y + r * kHeatRow;
      for (int k = 0; k < kHeatBins;) {
        const int lv = level(most[k]);
        int k2 = k + 1;
        while (k2 < kHeatBins && level(most[k2]) == lv) ++k2;
        buf_ += "<rect x=\"" + num(kLeft + k * bin_w) + "\" y=\"" + num(top) + "\" width=\"" +
                num((k2 - k) * bin_w) + "\" height=\"" + num(kHeatRow) + "\" fill=\"" +
                heat_fill(lv) + "\"/>";
        k = k2;
      }
      if (r % 8 == 0)
        buf_ += "<text x=\"" + num(kLeft - 8) + "\" y=\"" + num(top + kHeatRow + 2) +
                "\" font-size=\"9\" text-anchor=\"end\">rank " + std::to_string(r) + "</text>";
      buf_ += "\n";
      flush_if_large();
    }
    buf_ += "</g>\n";
  }

  void memory(const Timeline& t, double y) {
    if (t.num_ranks > kHeatRanks) {
      heat_strip(t, y);
      return;
    }
    std::string heading = "memory per device, one scale: panel height = " +
                          gib(static_cast<std::int64_t>(mem_.full)) +
                          " (dark: static, light: activations; dashed: capacity";
    heading += mem_.off_scale ? ", off scale: drawn at the top edge)" : ")";
    buf_ += "<text x=\"12\" y=\"" + num(y + 13) + "\" font-size=\"11\" font-weight=\"bold\">" +
            escape(heading) + "</text>\n";
    y += kMemHeading;
    const Time end = std::max(t.iteration_time, t.pipeline_time);
    for (int r = 0; r < t.num_ranks; ++r) {
      const double top = y + r * (mem_height_ + kMemGap);
      const double bottom = top + mem_height_;
      const std::int64_t cap = at_or<std::int64_t>(t.capacity_bytes, r, 0);
      const std::int64_t peak = rank_peak(t, r);
      auto yv = [&](std::int64_t bytes) { return mem_y(bottom, bytes, mem_height_); };

      buf_ += "<rect class=\"mem\" x=\"" + num(kLeft) + "\" y=\"" + num(top) + "\" width=\"" +
              num(plot_width_) + "\" height=\"" + num(mem_height_) +
              "\" fill=\"#fafafa\" stroke=\"#cccccc\" stroke-width=\"0.5\"/>";
      buf_ += "<text x=\"" + num(kLeft - 8) + "\" y=\"" + num(top + mem_height_ / 2 + 4) +
              "\" font-size=\"11\" text-anchor=\"end\">rank " + std::to_string(r) + "</text>\n";
      // Total memory as a filled step curve from time 0 to the end of the iteration.
      const std::string pts = memory_points(
          t, r, end, [&](Time tt) { return x(tt); }, yv);
      buf_ +=
          "<polygon class=\"memory\" points=\"" + num(x(0)) + "," + num(bottom) + " " + pts + " " +
          num(x(end)) + "," + num(bottom) +
          "\" fill=\"#9ecae9\" fill-opacity=\"0.7\" stroke=\"#1f77b4\" stroke-width=\"0.8\"/>\n";
      // The static part (weights, gradients, optimizer state) in a darker tint: what is
      // left above it is activations.
      const std::int64_t stat = at_or<std::int64_t>(t.static_bytes, r, 0);
      if (stat > 0)
        buf_ += "<rect class=\"static\" x=\"" + num(x(0)) + "\" y=\"" + num(yv(stat)) +
                "\" width=\"" + num(x(end) - x(0)) + "\" height=\"" + num(bottom - yv(stat)) +
                "\" fill=\"#1f77b4\" fill-opacity=\"0.35\"/>";
      if (cap > 0) {
        const double cy = mem_.off_scale ? top : yv(cap);
        buf_ += "<line class=\"capacity\" x1=\"" + num(kLeft) + "\" y1=\"" + num(cy) + "\" x2=\"" +
                num(kLeft + plot_width_) + "\" y2=\"" + num(cy) + "\" stroke=\"" + kCapacityColour +
                "\" stroke-width=\"1.2\" stroke-dasharray=\"4,2\"/>";
      }
      const bool over = cap > 0 && peak > cap;
      buf_ += "<text x=\"" + num(kLeft + plot_width_ + 6) + "\" y=\"" + num(top + 14) +
              "\" font-size=\"10\"" +
              (over ? std::string(" fill=\"") + kCapacityColour + "\" font-weight=\"bold\""
                    : std::string()) +
              ">peak " + gib(peak) + "</text>";
      buf_ += "<text x=\"" + num(kLeft + plot_width_ + 6) + "\" y=\"" + num(top + 27) +
              "\" font-size=\"10\" fill=\"#666666\">of " + (cap > 0 ? gib(cap) : std::string("?")) +
              "</text>\n";
      flush_if_large();
    }
  }

  void flush_if_large() {
    if (buf_.size() > (1u << 16)) flush();
  }
  void flush() {
    out_.write(buf_.data(), static_cast<std::streamsize>(buf_.size()));
    buf_.clear();
  }

  std::ostream& out_;
  std::span<const Timeline> timelines_;
  SvgOptions options_;
  std::vector<Layout> layouts_;
  std::vector<unsigned> mixes_;  // kind masks of mixed bands, sorted
  int chunks_ = 1;               // most chunks per device of any timeline
  double width_ = kDefaultWidth;
  double plot_width_ = 0;
  Time span_ = 0;
  double scale_ = 1;
  bool tooltips_ = true;
  MemoryScale mem_;
  double mem_height_ = kMemHeightFew;
  std::string buf_;
};

}  // namespace

void write_timeline_svg(std::ostream& out, const Timeline& timeline, const SvgOptions& options) {
  write_compare_svg(out, std::span<const Timeline>(&timeline, 1), options);
}

void write_compare_svg(std::ostream& out, std::span<const Timeline> timelines,
                       const SvgOptions& options) {
  Painter(out, timelines, options).paint();
}

}  // namespace bmpipe
