#include "traces/memory_svg.hpp"

#include <algorithm>
#include <array>
#include <cstdio>

#include "traces/memory_curve.hpp"
#include "traces/svg_primitives.hpp"

namespace bmpipe {
namespace {

using namespace svg;

// Tableau 10 without its red, which the capacity line owns; for up to 10 ranks.
constexpr std::array<const char*, 10> kRankColours = {"#4e79a7", "#f28e2b", "#76b7b2", "#59a14f",
                                                      "#b6992d", "#b07aa1", "#ff9da7", "#9c755f",
                                                      "#79706e", "#17becf"};
// Beyond 10 ranks a sequential ramp (viridis anchors, its pale yellow end left out so every
// curve stays visible on white): neighbouring ranks get neighbouring colours.
constexpr std::array<std::array<int, 3>, 5> kRamp = {{{0x44, 0x01, 0x54},
                                                      {0x3b, 0x52, 0x8b},
                                                      {0x21, 0x91, 0x8c},
                                                      {0x5e, 0xc9, 0x62},
                                                      {0xb5, 0xde, 0x2b}}};

std::string ramp_colour(double f) {
  f = std::clamp(f, 0.0, 1.0) * static_cast<double>(kRamp.size() - 1);
  const std::size_t i = std::min(static_cast<std::size_t>(f), kRamp.size() - 2);
  const double u = f - static_cast<double>(i);
  char buf[8];
  int c[3];
  for (int k = 0; k < 3; ++k)
    c[k] = static_cast<int>(
        std::lround(kRamp[i][k] + u * static_cast<double>(kRamp[i + 1][k] - kRamp[i][k])));
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", c[0], c[1], c[2]);
  return buf;
}

std::string rank_colour(int r, int p) {
  if (p <= static_cast<int>(kRankColours.size())) return kRankColours[static_cast<std::size_t>(r)];
  return ramp_colour(p > 1 ? static_cast<double>(r) / (p - 1) : 0.0);
}

class MemoryPlot {
 public:
  MemoryPlot(std::ostream& out, const Timeline& t, const SvgOptions& options)
      : out_(out), t_(t), mem_(memory_scale(std::span<const Timeline>(&t, 1))) {
    width_ = options.width_px > 0 ? options.width_px : 1200;
    plot_w_ = std::max(100.0, width_ - kL - kR);
    end_ = std::max<Time>({t.iteration_time, t.pipeline_time, 1});
  }

  void paint() {
    const double height = kT + kH + kB;
    buf_ += svg_open(width_, height);
    std::string title = "Memory over time";
    if (!t_.title.empty()) title += " \u2014 " + t_.title;
    buf_ += "<text x=\"12\" y=\"24\" font-size=\"16\" font-weight=\"bold\">" + escape(title) +
            "</text>\n";
    if (!t_.ok) {
      buf_ += "<text x=\"12\" y=\"46\" font-size=\"12\" fill=\"" + std::string(kCapacityColour) +
              "\">" + escape("simulation failed: " + t_.error) + "</text>\n</svg>\n";
      flush();
      return;
    }
    subtitle();
    axes();
    capacity();
    curves();
    peak_marker();
    legend();
    buf_ += "</svg>\n";
    flush();
  }

 private:
  static constexpr double kL = 80, kR = 230, kT = 64, kH = 380, kB = 46;

  double x(Time t) const {
    return kL + static_cast<double>(t) / static_cast<double>(end_) * plot_w_;
  }
  double y(std::int64_t bytes) const { return mem_y(static_cast<double>(bytes)); }
  double mem_y(double bytes) const { return kT + kH - bytes / mem_.full * kH; }

  // The fullest rank and when it first got there.
  struct Peak {
    int rank = 0;
    std::int64_t bytes = -1;
    Time time = 0;
  };
  Peak fullest() const {
    Peak p;
    for (int r = 0; r < t_.num_ranks; ++r) {
      const std::int64_t stat = at_or<std::int64_t>(t_.static_bytes, r, 0);
      if (stat > p.bytes) p = Peak{r, stat, 0};
      if (static_cast<std::size_t>(r) < t_.memory.size())
        for (const auto& s : t_.memory[r])
          if (stat + s.activation_bytes > p.bytes) p = Peak{r, stat + s.activation_bytes, s.time};
    }
    return p;
  }

  void subtitle() {
    const Peak p = fullest();
    std::string s =
        "static + activations per device \u00b7 iteration " + ms_text(t_.iteration_time);
    if (p.bytes >= 0)
      s += " \u00b7 peak " + gib(p.bytes) + " on rank " + std::to_string(p.rank) + " at " +
           ms_text(p.time);
    int over = 0;
    std::int64_t worst = 0;
    int worst_rank = -1;
    for (int r = 0; r < t_.num_ranks; ++r) {
      const std::int64_t cap = at_or<std::int64_t>(t_.capacity_bytes, r, 0);
      const std::int64_t excess = rank_peak(t_, r) - cap;
      if (cap > 0 && excess > 0) {
        ++over;
        if (excess > worst) worst = excess, worst_rank = r;
      }
    }
    buf_ += "<text x=\"12\" y=\"44\" font-size=\"11\" fill=\"#333333\">" + escape(s) + "</text>\n";
    if (over > 0)
      buf_ += "<text x=\"12\" y=\"58\" font-size=\"11\" font-weight=\"bold\" fill=\"" +
              std::string(kCapacityColour) + "\">" +
              escape(std::to_string(over) + " of " + std::to_string(t_.num_ranks) +
                     " ranks exceed their capacity; rank " + std::to_string(worst_rank) + " by " +
                     gib(worst)) +
              "</text>\n";
  }

  void axes() {
    buf_ += "<rect class=\"plot\" x=\"" + num(kL) + "\" y=\"" + num(kT) + "\" width=\"" +
            num(plot_w_) + "\" height=\"" + num(kH) +
            "\" fill=\"#ffffff\" stroke=\"#999999\" stroke-width=\"0.8\"/>\n";
    // GiB axis: 1-2-5 steps, about eight of them.
    const double full_gib = mem_.full / 1073741824.0;
    const double gstep = nice_step(full_gib / 8);
    const int gdec = decimals_for(gstep);
    buf_ += "<g class=\"y-axis\">";
    for (int k = 0; k * gstep <= full_gib * (1 + 1e-9); ++k) {
      const double v = k * gstep;
      const double yy = mem_y(v * 1073741824.0);
      char label[32];
      std::snprintf(label, sizeof label, "%.*f", gdec, v);
      buf_ += "<line x1=\"" + num(kL) + "\" y1=\"" + num(yy) + "\" x2=\"" + num(kL + plot_w_) +
              "\" y2=\"" + num(yy) + "\" stroke=\"#e4e4e4\" stroke-width=\"0.6\"/>";
      buf_ += "<text x=\"" + num(kL - 6) + "\" y=\"" + num(yy + 3.5) +
              "\" font-size=\"10\" text-anchor=\"end\">" + label + "</text>";
    }
    buf_ += "<text x=\"18\" y=\"" + num(kT + kH / 2) +
            "\" font-size=\"11\" text-anchor=\"middle\"" + " transform=\"rotate(-90 18 " +
            num(kT + kH / 2) + ")\">memory (GiB)</text></g>\n";
    // ms axis.
    const double span_ms = ns_to_ms(end_);
    const double tstep = nice_step(span_ms / std::max(4.0, plot_w_ / 100));
    const int tdec = decimals_for(tstep);
    buf_ += "<g class=\"x-axis\">";
    for (int k = 0; k * tstep <= span_ms * (1 + 1e-9); ++k) {
      const double v = k * tstep;
      const double xx = kL + v / span_ms * plot_w_;
      char label[32];
      std::snprintf(label, sizeof label, "%.*f", tdec, v);
      buf_ += "<line x1=\"" + num(xx) + "\" y1=\"" + num(kT) + "\" x2=\"" + num(xx) + "\" y2=\"" +
              num(kT + kH + 4) + "\" stroke=\"#e4e4e4\" stroke-width=\"0.6\"/>";
      buf_ += "<text x=\"" + num(xx) + "\" y=\"" + num(kT + kH + 16) +
              "\" font-size=\"10\" text-anchor=\"middle\">" + label + "</text>";
    }
    buf_ += "<text x=\"" + num(kL + plot_w_ / 2) + "\" y=\"" + num(kT + kH + 36) +
            "\" font-size=\"11\" text-anchor=\"middle\">time (ms)</text></g>\n";
    // The tail work runs after the last pipeline op: the optimizer step, after the dp
    // reductions (overlapped with the pipeline, or started after its last op).
    if (t_.iteration_time > t_.pipeline_time && t_.pipeline_time > 0) {
      const double px = x(t_.pipeline_time);
      buf_ += "<line class=\"pipeline-end\" x1=\"" + num(px) + "\" y1=\"" + num(kT) + "\" x2=\"" +
              num(px) + "\" y2=\"" + num(kT + kH) +
              "\" stroke=\"#555555\" stroke-width=\"1\" stroke-dasharray=\"2,3\"/>";
      buf_ +=
          "<text x=\"" + num(px - 4) + "\" y=\"" + num(kT + kH - 6) +
          "\" font-size=\"10\" text-anchor=\"end\" fill=\"#555555\">last op ends; then " +
          std::string(t_.grad_reduce_overlapped
                          ? "the optimizer step, after the overlapped reductions"
                          : "the dp reductions, then the optimizer step") +
          "</text>\n";
    }
  }

  void capacity() {
    std::vector<std::int64_t> caps;
    for (int r = 0; r < t_.num_ranks; ++r) {
      const std::int64_t c = at_or<std::int64_t>(t_.capacity_bytes, r, 0);
      if (c > 0) caps.push_back(c);
    }
    std::sort(caps.begin(), caps.end());
    caps.erase(std::unique(caps.begin(), caps.end()), caps.end());
    for (std::size_t i = 0; i < caps.size(); ++i) {
      const std::int64_t c = caps[i];
      bool exceeded = false;
      for (int r = 0; r < t_.num_ranks; ++r)
        exceeded =
            exceeded || (at_or<std::int64_t>(t_.capacity_bytes, r, 0) == c && rank_peak(t_, r) > c);
      const double cy = mem_.off_scale ? kT : y(c);
      if (exceeded)  // what lies above the line does not fit
        buf_ += "<rect class=\"over\" x=\"" + num(kL) + "\" y=\"" + num(kT) + "\" width=\"" +
                num(plot_w_) + "\" height=\"" + num(std::max(0.0, cy - kT)) + "\" fill=\"" +
                kCapacityColour + "\" fill-opacity=\"0.08\"/>";
      buf_ += "<line class=\"capacity\" x1=\"" + num(kL) + "\" y1=\"" + num(cy) + "\" x2=\"" +
              num(kL + plot_w_) + "\" y2=\"" + num(cy) + "\" stroke=\"" + kCapacityColour +
              "\" stroke-width=\"1.5\" stroke-dasharray=\"6,3\"/>";
      std::string label = "capacity " + gib(c);
      if (mem_.off_scale) label += " (off scale, above)";
      // Stacked labels when capacities differ, so they never overprint.
      buf_ += "<text x=\"" + num(kL + plot_w_ - 4) + "\" y=\"" +
              num(mem_.off_scale ? kT + 12 + 12 * static_cast<double>(i) : cy - 4) +
              "\" font-size=\"10\" text-anchor=\"end\" fill=\"" + kCapacityColour + "\">" +
              escape(label) + "</text>\n";
    }
  }

  void curves() {
    const double stroke = t_.num_ranks <= 16 ? 1.6 : 1.0;
    for (int r = 0; r < t_.num_ranks; ++r) {
      const std::string pts = memory_points(
          t_, r, end_, [&](Time tt) { return x(tt); }, [&](std::int64_t b) { return y(b); });
      buf_ += "<polyline class=\"memory\" data-rank=\"" + std::to_string(r) + "\" points=\"" + pts +
              "\" fill=\"none\" stroke=\"" + rank_colour(r, t_.num_ranks) + "\" stroke-width=\"" +
              num(stroke) + "\" stroke-linejoin=\"round\"><title>rank " + std::to_string(r) +
              ": peak " + gib(rank_peak(t_, r)) + "</title></polyline>\n";
      if (buf_.size() > (1u << 16)) flush();
    }
  }

  void peak_marker() {
    const Peak p = fullest();
    if (p.bytes < 0) return;
    const double px = x(p.time), py = y(p.bytes);
    buf_ += "<circle class=\"peak\" cx=\"" + num(px) + "\" cy=\"" + num(py) +
            "\" r=\"3.5\" fill=\"none\" stroke=\"#000000\" stroke-width=\"1.2\"/>";
    const std::string label = "peak " + gib(p.bytes) + " (rank " + std::to_string(p.rank) + ")";
    const bool left = px + 8 + text_px(label) > kL + plot_w_;
    buf_ += "<text x=\"" + num(left ? px - 7 : px + 7) + "\" y=\"" +
            num(std::max(kT + 10, py - 6)) + "\" font-size=\"10\" text-anchor=\"" +
            (left ? "end" : "start") + "\">" + escape(label) + "</text>\n";
  }

  void legend() {
    const double lx = kL + plot_w_ + 16;
    double ly = kT + 4;
    const int p = t_.num_ranks;
    if (p <= 16) {
      for (int r = 0; r < p; ++r, ly += 18) {
        buf_ += "<line class=\"legend\" x1=\"" + num(lx) + "\" y1=\"" + num(ly + 6) + "\" x2=\"" +
                num(lx + 18) + "\" y2=\"" + num(ly + 6) + "\" stroke=\"" + rank_colour(r, p) +
                "\" stroke-width=\"2.5\"/>";
        const std::int64_t cap = at_or<std::int64_t>(t_.capacity_bytes, r, 0);
        const std::int64_t peak = rank_peak(t_, r);
        const bool over = cap > 0 && peak > cap;
        buf_ +=
            "<text x=\"" + num(lx + 24) + "\" y=\"" + num(ly + 10) + "\" font-size=\"11\"" +
            (over ? std::string(" fill=\"") + kCapacityColour + "\" font-weight=\"bold\""
                  : std::string()) +
            ">" +
            escape("rank " + std::to_string(r) + " \u00b7 dev " +
                   std::to_string(at_or<int>(t_.rank_device, r, r)) + " \u00b7 peak " + gib(peak)) +
            "</text>\n";
      }
    } else {
      // A colour bar: the ramp from rank 0 (top) to the last rank (bottom).
      const double bar = std::min(kH - 40, 240.0);
      buf_ += "<defs><linearGradient id=\"ranks\" x1=\"0\" y1=\"0\" x2=\"0\" y2=\"1\">";
      for (int k = 0; k <= 8; ++k)
        buf_ +=
            "<stop offset=\"" + num(k / 8.0) + "\" stop-color=\"" + ramp_colour(k / 8.0) + "\"/>";
      buf_ += "</linearGradient></defs>";
      buf_ += "<rect class=\"legend\" x=\"" + num(lx) + "\" y=\"" + num(ly) +
              "\" width=\"14\" height=\"" + num(bar) + "\" fill=\"url(#ranks)\"/>";
      buf_ += "<text x=\"" + num(lx + 20) + "\" y=\"" + num(ly + 9) +
              "\" font-size=\"11\">rank 0</text>";
      buf_ += "<text x=\"" + num(lx + 20) + "\" y=\"" + num(ly + bar) +
              "\" font-size=\"11\">rank " + std::to_string(p - 1) + "</text>\n";
      const Peak pk = fullest();
      buf_ += "<text x=\"" + num(lx) + "\" y=\"" + num(ly + bar + 22) + "\" font-size=\"11\">" +
              escape("fullest: rank " + std::to_string(pk.rank) + ", " + gib(pk.bytes)) +
              "</text>\n";
    }
  }

  void flush() {
    out_.write(buf_.data(), static_cast<std::streamsize>(buf_.size()));
    buf_.clear();
  }

  std::ostream& out_;
  const Timeline& t_;
  MemoryScale mem_;
  double width_ = 1200;
  double plot_w_ = 0;
  Time end_ = 1;
  std::string buf_;
};

}  // namespace

void write_memory_svg(std::ostream& out, const Timeline& timeline, const SvgOptions& options) {
  MemoryPlot(out, timeline, options).paint();
}

}  // namespace bmpipe
