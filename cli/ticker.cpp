#include "cli/ticker.hpp"

#include <algorithm>
#include <cstdio>
#include <utility>

namespace bmpipe::cli {

Ticker::Ticker(std::string command, bool enabled, bool terminal, double interval_s)
    : command_(std::move(command)),
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
  std::fprintf(stderr, "%s%s: %s\n", terminal_ && shown_ ? "\r\033[K" : "", command_.c_str(),
               text.c_str());
  std::fflush(stderr);
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
  if (terminal_ && shown_) std::fprintf(stderr, "\r%100s\r", "");
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
    std::fprintf(stderr, "%s%s: %s, %.1f s%s", terminal_ ? "\r" : "", command_.c_str(),
                 phase_.c_str(), s, terminal_ ? "   " : "\n");
    std::fflush(stderr);
    shown_ = true;
  }
}

}  // namespace bmpipe::cli
