#include "api/ticker.hpp"

#include <algorithm>
#include <cstdio>
#include <utility>

namespace bmpipe::api {

Ticker::Ticker(std::string command, std::function<void(const std::string&)> print, bool enabled,
               bool terminal, double interval_s)
    : command_(std::move(command)),
      print_(std::move(print)),
      terminal_(terminal),
      interval_s_(interval_s),
      start_(std::chrono::steady_clock::now()) {
  enabled_ = enabled;
  if (enabled) thread_ = std::thread([this] { run(); });
}

void Ticker::note(const std::string& text) {
  if (!enabled_) return;
  const std::lock_guard<std::mutex> lock(m_);
  // On a terminal the progress line is overwritten, then drawn again at its next tick.
  print_(std::string(terminal_ && shown_ ? "\r\033[K" : "") + command_ + ": " + text + "\n");
}

Ticker::~Ticker() {
  stop();
}

void Ticker::phase(std::string text) {
  const std::lock_guard<std::mutex> lock(m_);
  phase_ = std::move(text);
}

void Ticker::stop() {
  if (!thread_.joinable()) return;
  {
    const std::lock_guard<std::mutex> lock(m_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
  if (terminal_ && shown_) print_("\r" + std::string(100, ' ') + "\r");
}

void Ticker::run() {
  // On a terminal the line is cheap and redrawn in place; off it, every line stays in a
  // log, so one per interval.
  const double period = terminal_ ? 0.5 : std::max(interval_s_, 0.05);
  std::unique_lock<std::mutex> lock(m_);
  for (int k = 1;; ++k) {
    const auto due = start_ + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                  std::chrono::duration<double>(period * k));
    if (wake_.wait_until(lock, due, [this] { return stopping_; })) return;
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%.1f", s);
    print_((terminal_ ? "\r" : "") + command_ + ": " + phase_ + ", " + seconds + " s" +
           (terminal_ ? "   " : "\n"));
    shown_ = true;
  }
}

}  // namespace bmpipe::api
