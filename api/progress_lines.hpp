#pragma once
/// \file
/// The progress lines of the commands that run long, as text handed to a printer (the
/// executable's stderr): how far, the best so far, the seconds and the ETA. The library
/// decides what a line says and when one is due; the front end only prints it.

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "api/search_driver.hpp"
#include "planner/planner.hpp"

namespace bmpipe::api {

/// `bmpipe plan`'s progress, as lines handed to `print` (stderr). On a terminal, one live line:
/// evaluations, best so far, elapsed. Off a terminal (a log file, a CI job), one line every
/// `interval_s` seconds: the schedule and phase, the command's evaluations so far, the best so far,
/// elapsed and an ETA bounded by the evaluation budget (the planner may stop sooner, when it
/// converges; it never runs past --max-evals or --time-limit-s).
class PlanProgressLines {
 public:
  PlanProgressLines(std::function<void(const std::string&)> print, bool on, bool tty,
                    double interval_s, std::int64_t budget, std::optional<double> time_limit_s)
      : print_(std::move(print)),
        on_(on),
        tty_(tty),
        interval_s_(interval_s),
        budget_(budget),
        limit_s_(time_limit_s) {}
  ~PlanProgressLines() { clear(); }
  void show(const std::string& what, const PlannerProgress& p);
  void clear();

 private:
  using Clock = std::chrono::steady_clock;
  std::function<void(const std::string&)> print_;
  bool on_, tty_;
  double interval_s_;
  std::int64_t budget_;
  std::optional<double> limit_s_;
  bool shown_ = false;
  double last_line_s_ = 0;
  std::string label_;
  std::int64_t done_before_ = 0, last_evaluations_ = 0;
  Clock::time_point started_ = Clock::now();
};

/// `bmpipe search`'s progress, as lines handed to `print` (stderr). The first pass: layouts done,
/// evaluations, best so far, seconds (and the processes under mpirun) and the library's ETA. The
/// passes after it (the screen's second pass, --refine): one line when a pass starts, then `search:
/// planned again K / N layouts, T s, ETA E`. On a terminal one line redrawn in place; off it one
/// every --progress-interval-s and the last. Nothing with --quiet.
class SearchProgressLines : public SearchObserver {
 public:
  SearchProgressLines(std::function<void(const std::string&)> print, bool quiet, bool tty,
                      double interval_s, const SearchRequest& request, int processes);
  void layout(const LayoutResult& r, const SearchProgress& p) override;
  void pass_started(const SearchPass& pass) override;
  void pass_progress(const SearchPass& pass, const PassProgress& p) override;
  /// On a terminal, erases the line.
  void clear() const;

 private:
  std::function<void(const std::string&)> print_;
  bool quiet_, tty_;
  double interval_s_;
  const SearchRequest& request_;
  int processes_;
  double last_line_ = -1e300;
};

}  // namespace bmpipe::api
