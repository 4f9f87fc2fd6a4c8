#include "traces/svg_primitives.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "sim/units.hpp"

namespace bmpipe::svg {

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

std::string svg_open(double w, double h) {
  const std::string ws = num(w), hs = num(h);
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
         "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" +
         ws + "\" height=\"" + hs + "\" viewBox=\"0 0 " + ws + " " + hs +
         "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n"
         "<rect class=\"page\" x=\"0\" y=\"0\" width=\"" +
         ws + "\" height=\"" + hs + "\" fill=\"#ffffff\"/>\n";
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

double text_px(const std::string& text) {
  std::size_t chars = 0;
  for (char c : text) chars += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return kCharWidth * static_cast<double>(chars);
}

std::string gib(std::int64_t bytes) {
  return format_bytes(bytes, 1, ByteUnit::MiB);
}

std::string ms_text(Time t) {
  return format_ms(t, 3) + " ms";
}

double nice_step(double raw) {
  raw = std::max(raw, 1e-12);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double f : {1.0, 2.0, 5.0, 10.0})
    if (mag * f >= raw * (1 - 1e-9)) return mag * f;
  return mag * 10;
}

int decimals_for(double step) {
  return step >= 1 ? 0 : std::max(0, static_cast<int>(std::ceil(-std::log10(step) - 1e-9)));
}

}  // namespace bmpipe::svg
