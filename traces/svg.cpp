#include "traces/svg.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace bmpipe {
namespace {

// Page geometry, in px.
constexpr double kLeft = 150;   // row labels
constexpr double kRight = 120;  // memory-panel labels
constexpr double kHeader = 64;  // picture title and legend
constexpr double kBlockTitle = 26;
constexpr double kRowHeight = 18;
constexpr double kRowPitch = 22;
constexpr double kAxis = 34;
constexpr double kMemHeading = 18;
constexpr double kMemHeight = 34;
constexpr double kMemPitch = 42;
constexpr double kBlockGap = 24;
constexpr double kCharWidth = 6.2;           // 10 px sans-serif digits, a little generous
constexpr std::size_t kTooltipLimit = 5000;  // ops; above it tooltips only bloat the file

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

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  // Trim trailing zeros: smaller files, same picture.
  std::string s = buf;
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  if (s == "-0") s = "0";
  return s;
}

std::string escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// "37.8 GiB", or "12.0 MiB" below a GiB so that small runs do not all read "0.0".
std::string gib(std::int64_t bytes) {
  char buf[32];
  if (bytes < 1073741824LL && bytes > -1073741824LL)
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / 1048576.0);
  else
    std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(bytes) / 1073741824.0);
  return buf;
}

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
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double f : {1.0, 2.0, 5.0, 10.0})
    if (mag * f >= raw) {
      step = mag * f;
      break;
    }
  a.step = std::max<Time>(1, static_cast<Time>(std::llround(step)));
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

class Painter {
 public:
  Painter(std::ostream& out, std::span<const Timeline> timelines, const SvgOptions& options)
      : out_(out), timelines_(timelines), options_(options) {
    plot_width_ = std::max(100.0, options.width_px - kLeft - kRight);
    for (const auto& t : timelines_) span_ = std::max({span_, t.iteration_time, t.pipeline_time});
    span_ = std::max<Time>(span_, 1);
    scale_ = plot_width_ / static_cast<double>(span_);
    std::size_t ops = 0;
    for (const auto& t : timelines_) ops += t.boxes.size();
    tooltips_ = ops <= kTooltipLimit;
  }

  void paint() {
    double height = kHeader;
    for (const auto& t : timelines_) height += block_height(t) + kBlockGap;
    const double width = options_.width_px;
    buf_ += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
    buf_ += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(width) + "\" height=\"" +
            num(height) + "\" viewBox=\"0 0 " + num(width) + " " + num(height) +
            "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n";
    buf_ += "<rect class=\"page\" x=\"0\" y=\"0\" width=\"" + num(width) + "\" height=\"" +
            num(height) + "\" fill=\"#ffffff\"/>\n";
    header();
    double y = kHeader;
    for (const auto& t : timelines_) {
      block(t, y);
      y += block_height(t) + kBlockGap;
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
    if (options_.memory_panels) h += kMemHeading + t.num_ranks * kMemPitch;
    return h;
  }

  void header() {
    std::string title =
        timelines_.size() == 1 ? "Pipeline timeline" : "Pipeline timelines, one time scale";
    buf_ += "<text x=\"12\" y=\"24\" font-size=\"16\" font-weight=\"bold\">" + title + "</text>\n";
    // Legend: only the kinds that occur, in a fixed order.
    bool used[5] = {false, false, false, false, false};
    for (const auto& t : timelines_)
      for (const auto& b : t.boxes) used[static_cast<int>(b.op.kind)] = true;
    double lx = 12;
    const double ly = 40;
    for (OpKind k : {OpKind::F, OpKind::B, OpKind::I, OpKind::W, OpKind::FB}) {
      if (!used[static_cast<int>(k)]) continue;
      const KindStyle s = style(k);
      const char* meaning = k == OpKind::F   ? "forward"
                            : k == OpKind::B ? "backward"
                            : k == OpKind::I ? "backward (input grad)"
                            : k == OpKind::W ? "backward (weight grad)"
                                             : "overlapped forward + backward";
      buf_ += "<rect class=\"legend\" x=\"" + num(lx) + "\" y=\"" + num(ly) +
              "\" width=\"14\" height=\"12\" fill=\"" + s.fill + "\"/>";
      buf_ += "<text x=\"" + num(lx + 18) + "\" y=\"" + num(ly + 10) + "\" font-size=\"11\">" +
              s.name + " " + meaning + "</text>\n";
      lx += 30 + 6.5 * (std::char_traits<char>::length(meaning) + 4);
    }
    buf_ +=
        "<rect class=\"legend\" x=\"" + num(lx) + "\" y=\"" + num(ly) +
        "\" width=\"14\" height=\"12\" fill=\"#ececec\" stroke=\"#bbbbbb\" stroke-width=\"0.5\"/>";
    buf_ += "<text x=\"" + num(lx + 18) + "\" y=\"" + num(ly + 10) +
            "\" font-size=\"11\">bubble (idle)</text>\n";
    lx += 120;
    bool chunks = false;
    for (const auto& t : timelines_)
      for (int c : t.stage_chunk) chunks = chunks || c % 2 == 1;
    if (chunks) {
      buf_ += "<rect class=\"legend\" x=\"" + num(lx) + "\" y=\"" + num(ly) +
              "\" width=\"7\" height=\"12\" fill=\"#4e79a7\"/><rect class=\"legend\" x=\"" +
              num(lx + 7) + "\" y=\"" + num(ly) + "\" width=\"7\" height=\"12\" fill=\"#a6c3e0\"/>";
      buf_ += "<text x=\"" + num(lx + 18) + "\" y=\"" + num(ly + 10) +
              "\" font-size=\"11\">dark / light: a device\u2019s 1st / 2nd chunk</text>\n";
      lx += 250;
    }
    if (options_.memory_panels) {
      buf_ += "<line x1=\"" + num(lx) + "\" y1=\"" + num(ly + 6) + "\" x2=\"" + num(lx + 16) +
              "\" y2=\"" + num(ly + 6) +
              "\" stroke=\"#d62728\" stroke-width=\"1.5\" stroke-dasharray=\"4,2\"/>";
      buf_ += "<text x=\"" + num(lx + 20) + "\" y=\"" + num(ly + 10) +
              "\" font-size=\"11\">memory capacity</text>\n";
    }
  }

  void block(const Timeline& t, double y) {
    char buf[256];
    if (!t.ok) {
      buf_ += "<text x=\"12\" y=\"" + num(y + 18) + "\" font-size=\"13\" font-weight=\"bold\">" +
              escape(t.title) + "</text>\n";
      buf_ += "<text x=\"" + num(kLeft) + "\" y=\"" + num(y + 36) +
              "\" font-size=\"11\" fill=\"#d62728\">" + escape("simulation failed: " + t.error) +
              "</text>\n";
      return;
    }
    std::snprintf(buf, sizeof buf, "\u2014 iteration %.3f ms, pipeline %.3f ms, bubble %.1f %%",
                  ns_to_ms(t.iteration_time), ns_to_ms(t.pipeline_time), 100.0 * t.bubble_ratio);
    buf_ += "<text x=\"12\" y=\"" + num(y + 18) + "\" font-size=\"13\" font-weight=\"bold\">" +
            escape(t.title) + "<tspan dx=\"8\" font-weight=\"normal\">" + escape(buf) +
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
      const int dev = static_cast<std::size_t>(r) < t.rank_device.size() ? t.rank_device[r] : r;
      buf_ += "<rect class=\"row\" x=\"" + num(kLeft) + "\" y=\"" + num(ry) + "\" width=\"" +
              num(static_cast<double>(t.iteration_time) * scale_) + "\" height=\"" +
              num(kRowHeight) + "\" fill=\"#ececec\" fill-opacity=\"0.8\"/>";
      buf_ += "<text x=\"" + num(kLeft - 8) + "\" y=\"" + num(ry + 13) +
              "\" font-size=\"11\" text-anchor=\"end\">rank " + std::to_string(r) + " \u00b7 dev " +
              std::to_string(dev) + "</text>\n";
    }

    // One box per op.
    for (const auto& b : t.boxes) {
      const KindStyle s = style(b.op.kind);
      const bool light = b.op.stage >= 0 &&
                         static_cast<std::size_t>(b.op.stage) < t.stage_chunk.size() &&
                         t.stage_chunk[b.op.stage] % 2 == 1;
      const char* fill = light ? s.light_fill : s.fill;
      const char* text = light ? s.light_text : s.text;
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
      if (bw >= kCharWidth * static_cast<double>(label.size()) + 3)
        buf_ += "<text x=\"" + num(bx + bw / 2) + "\" y=\"" + num(by + 13) +
                "\" class=\"mb\" font-size=\"10\" text-anchor=\"middle\" fill=\"" + text + "\">" +
                label + "</text>";
      buf_ += "\n";
      flush_if_large();
    }

    // Time axis under the rows.
    const double ay = rows_bottom + 4;
    buf_ += "<g class=\"axis\"><line x1=\"" + num(kLeft) + "\" y1=\"" + num(ay) + "\" x2=\"" +
            num(kLeft + plot_width_) + "\" y2=\"" + num(ay) +
            "\" stroke=\"#333333\" stroke-width=\"1\"/>";
    for (Time tick = 0; tick <= span_; tick += axis.step) {
      buf_ += "<line x1=\"" + num(x(tick)) + "\" y1=\"" + num(ay) + "\" x2=\"" + num(x(tick)) +
              "\" y2=\"" + num(ay + 4) + "\" stroke=\"#333333\" stroke-width=\"1\"/>";
      buf_ += "<text x=\"" + num(x(tick)) + "\" y=\"" + num(ay + 15) +
              "\" font-size=\"10\" text-anchor=\"middle\">" + tick_label(tick, axis) + "</text>";
    }
    buf_ += "<text x=\"" + num(kLeft + plot_width_ + 6) + "\" y=\"" + num(ay + 15) +
            "\" font-size=\"10\">time (" + axis.unit_name + ")</text></g>\n";

    if (options_.memory_panels) memory(t, rows_bottom + kAxis);
  }

  void memory(const Timeline& t, double y) {
    buf_ += "<text x=\"12\" y=\"" + num(y + 13) +
            "\" font-size=\"11\" font-weight=\"bold\">memory per device (static + activations; "
            "dashed: capacity)</text>\n";
    y += kMemHeading;
    for (int r = 0; r < t.num_ranks; ++r) {
      const double top = y + r * kMemPitch;
      const double bottom = top + kMemHeight;
      const std::int64_t stat =
          static_cast<std::size_t>(r) < t.static_bytes.size() ? t.static_bytes[r] : 0;
      const std::int64_t cap =
          static_cast<std::size_t>(r) < t.capacity_bytes.size() ? t.capacity_bytes[r] : 0;
      static const std::vector<Timeline::MemorySample> kNone;
      const auto& samples = static_cast<std::size_t>(r) < t.memory.size() ? t.memory[r] : kNone;
      std::int64_t peak = stat;
      for (const auto& s : samples) peak = std::max(peak, stat + s.activation_bytes);
      // Scale to the capacity, so headroom shows, unless the run uses under a quarter of it:
      // then a flat line would say nothing, so scale to the peak and pin the capacity line
      // to the top edge, marked off scale.
      const bool off_scale = cap > 0 && peak * 4 < cap;
      const double full = off_scale
                              ? static_cast<double>(std::max<std::int64_t>(peak, 1)) * 1.15
                              : static_cast<double>(std::max<std::int64_t>({cap, peak, 1})) * 1.08;
      auto yv = [&](std::int64_t bytes) {
        return bottom - static_cast<double>(bytes) / full * kMemHeight;
      };

      buf_ += "<rect class=\"mem\" x=\"" + num(kLeft) + "\" y=\"" + num(top) + "\" width=\"" +
              num(plot_width_) + "\" height=\"" + num(kMemHeight) +
              "\" fill=\"#fafafa\" stroke=\"#cccccc\" stroke-width=\"0.5\"/>";
      buf_ += "<text x=\"" + num(kLeft - 8) + "\" y=\"" + num(top + kMemHeight / 2 + 4) +
              "\" font-size=\"11\" text-anchor=\"end\">rank " + std::to_string(r) + "</text>\n";

      // Total memory as a filled step curve from time 0 to the end of the iteration. Points
      // that land on the same spot (to 0.1 px) are dropped: the picture is the same.
      std::string pts = num(x(0)) + "," + num(bottom);
      long last_px = -1, last_py = -1;
      auto point = [&](double px, double py) {
        const long ix = std::lround(px * 10), iy = std::lround(py * 10);
        if (ix == last_px && iy == last_py) return;
        last_px = ix, last_py = iy;
        pts += ' ';
        pts += num(px);
        pts += ',';
        pts += num(py);
      };
      std::int64_t current = stat;
      point(x(0), yv(current));
      for (const auto& s : samples) {
        point(x(s.time), yv(current));
        current = stat + s.activation_bytes;
        point(x(s.time), yv(current));
      }
      const Time end = std::max(t.iteration_time, t.pipeline_time);
      point(x(end), yv(current));
      pts += ' ';
      pts += num(x(end));
      pts += ',';
      pts += num(bottom);
      buf_ +=
          "<polygon class=\"memory\" points=\"" + pts +
          "\" fill=\"#9ecae9\" fill-opacity=\"0.7\" stroke=\"#1f77b4\" stroke-width=\"0.8\"/>\n";
      if (cap > 0)
        buf_ += "<line class=\"capacity\" x1=\"" + num(kLeft) + "\" y1=\"" +
                num(off_scale ? top : yv(cap)) + "\" x2=\"" + num(kLeft + plot_width_) +
                "\" y2=\"" + num(off_scale ? top : yv(cap)) +
                "\" stroke=\"#d62728\" stroke-width=\"1.2\" stroke-dasharray=\"4,2\"/>";
      const bool over = cap > 0 && peak > cap;
      buf_ += "<text x=\"" + num(kLeft + plot_width_ + 6) + "\" y=\"" + num(top + 14) +
              "\" font-size=\"10\"" + (over ? " fill=\"#d62728\" font-weight=\"bold\"" : "") +
              ">peak " + gib(peak) + "</text>";
      buf_ += "<text x=\"" + num(kLeft + plot_width_ + 6) + "\" y=\"" + num(top + 27) +
              "\" font-size=\"10\" fill=\"#666666\">of " + (cap > 0 ? gib(cap) : std::string("?")) +
              (off_scale ? " (off scale)" : "") + "</text>\n";
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
  double plot_width_ = 0;
  Time span_ = 0;
  double scale_ = 1;
  bool tooltips_ = true;
  std::string buf_;
};

}  // namespace

TimelineRecorder::TimelineRecorder(const SimInput& input, const Schedule& schedule,
                                   std::string title) {
  timeline_.title = title.empty() ? schedule.name : std::move(title);
  timeline_.num_ranks = schedule.num_ranks;
  timeline_.rank_device = input.rank_device;
  timeline_.stage_chunk.assign(static_cast<std::size_t>(std::max(schedule.num_stages, 0)), 0);
  std::vector<int> seen(static_cast<std::size_t>(std::max(schedule.num_ranks, 0)), 0);
  for (std::size_t s = 0; s < timeline_.stage_chunk.size() && s < schedule.stage_rank.size();
       ++s) {
    const int r = schedule.stage_rank[s];
    if (r >= 0 && static_cast<std::size_t>(r) < seen.size()) timeline_.stage_chunk[s] = seen[r]++;
  }
  timeline_.static_bytes = input.static_bytes;
  timeline_.capacity_bytes = input.capacity_bytes;
  timeline_.memory.resize(static_cast<std::size_t>(std::max(schedule.num_ranks, 0)));
  timeline_.boxes.reserve(schedule.total_ops());
}

void TimelineRecorder::on_op(const OpRecord& r) {
  timeline_.boxes.push_back(Timeline::Box{r.rank, r.op, r.start, r.end});
}

void TimelineRecorder::on_memory(int rank, Time time, std::int64_t activation_bytes) {
  if (rank >= 0 && static_cast<std::size_t>(rank) < timeline_.memory.size())
    timeline_.memory[rank].push_back(Timeline::MemorySample{time, activation_bytes});
}

Timeline TimelineRecorder::take(const SimResult& result) {
  timeline_.ok = result.ok;
  timeline_.error = result.error;
  timeline_.pipeline_time = result.pipeline_time;
  timeline_.iteration_time = result.iteration_time;
  timeline_.bubble_ratio = result.bubble_ratio;
  if (!result.ok) timeline_.boxes.clear();
  return std::move(timeline_);
}

Timeline record_timeline(const SimInput& input, const Schedule& schedule, std::string title,
                         SimResult* result) {
  TimelineRecorder recorder(input, schedule, std::move(title));
  SimResult r = simulate(input, schedule, &recorder);
  Timeline t = recorder.take(r);
  if (result) *result = std::move(r);
  return t;
}

void write_timeline_svg(std::ostream& out, const Timeline& timeline, const SvgOptions& options) {
  write_compare_svg(out, std::span<const Timeline>(&timeline, 1), options);
}

void write_compare_svg(std::ostream& out, std::span<const Timeline> timelines,
                       const SvgOptions& options) {
  Painter(out, timelines, options).paint();
}

}  // namespace bmpipe
