#pragma once
/// \file
/// A progress line for work that cannot count its own steps: one long simulation, or a
/// schedule generator drawing 10^7 ops. It says what is running and for how long; the
/// front end only prints what it is handed (the executable: on stderr).

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace bmpipe::api {

/// "<command>: <phase>, <seconds> s" handed to `print`, from a thread of its own: on a terminal
/// one line redrawn every half second from half a second on, and erased by stop(); off a
/// terminal one line every `interval_s` seconds (at least 0.05) from `interval_s` on. Quick
/// runs print nothing. phase() may be called from any thread.
class Ticker {
 public:
  /// `enabled` false (--quiet) prints nothing and starts no thread. `print` is called from
  /// that thread and from note() and stop(), one call at a time.
  Ticker(std::string command, std::function<void(const std::string&)> print, bool enabled,
         bool terminal, double interval_s);
  ~Ticker();
  Ticker(const Ticker&) = delete;
  Ticker& operator=(const Ticker&) = delete;

  /// What is running now ("simulating 25165824 ops on 64 pipeline ranks").
  void phase(std::string text);
  /// A line that stays (an estimate said once, at the start of long work): printed at
  /// once, the progress line redrawn below it on a terminal. Nothing when disabled.
  void note(const std::string& text);
  /// Ends the thread and, on a terminal, erases the line. Idempotent.
  void stop();

 private:
  void run();
  std::string command_;
  std::function<void(const std::string&)> print_;
  bool terminal_;
  double interval_s_;
  std::chrono::steady_clock::time_point start_;
  std::mutex m_;
  std::condition_variable wake_;
  std::string phase_;      // guarded by m_
  bool stopping_ = false;  // guarded by m_
  bool shown_ = false;     // guarded by m_ (the thread and note() write it)
  bool enabled_ = false;
  std::thread thread_;
};

}  // namespace bmpipe::api
