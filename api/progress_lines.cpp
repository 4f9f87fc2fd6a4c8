#include "api/progress_lines.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "sim/units.hpp"

namespace bmpipe::api {

namespace {

/// printf to `print`.
template <class... A>
void print_formatted(const std::function<void(const std::string&)>& print, const char* format,
                     A... args) {
  const int n = std::snprintf(nullptr, 0, format, args...);
  if (n <= 0) return;
  std::string text(static_cast<std::size_t>(n) + 1, '\0');
  std::snprintf(text.data(), text.size(), format, args...);
  text.pop_back();
  print(text);
}

/// "ETA <1 s" or "ETA N s" (N rounded up) for `seconds` of work left.
std::string eta_text(double seconds) {
  char b[64];
  if (seconds < 1)
    std::snprintf(b, sizeof b, "ETA <1 s");
  else
    std::snprintf(b, sizeof b, "ETA %.0f s", std::ceil(seconds));
  return b;
}

}  // namespace

SearchProgressLines::SearchProgressLines(std::function<void(const std::string&)> print, bool quiet,
                                         bool tty, double interval_s, const SearchRequest& request,
                                         int processes)
    : print_(std::move(print)),
      quiet_(quiet),
      tty_(tty),
      interval_s_(interval_s),
      request_(request),
      processes_(processes) {}

void SearchProgressLines::layout(const LayoutResult&, const SearchProgress& p) {
  if (quiet_) return;
  if (!tty_ && p.elapsed_s - last_line_ < interval_s_ && p.done < p.total) return;
  last_line_ = p.elapsed_s;
  const std::string eta = p.done >= p.total ? "ETA 0 s"
                          : p.eta_s         ? eta_text(*p.eta_s)
                                            : "ETA unknown";
  const std::string processes =
      processes_ > 1 ? ", " + std::to_string(processes_) + " processes" : std::string();
  print_formatted(
      print_, "%ssearch: planning, %zu / %zu layouts, %lld evaluations, best %s, %.1f s%s, %s%s",
      tty_ ? "\r" : "", p.done, p.total, static_cast<long long>(p.evaluations),
      p.best ? (format_ms(*p.best, 1) + " ms").c_str() : "none yet", p.elapsed_s, processes.c_str(),
      eta.c_str(), tty_ ? "   " : "\n");
}

void SearchProgressLines::clear() const {
  if (!quiet_ && tty_) print_formatted(print_, "\r%120s\r", "");
}

void SearchProgressLines::pass_started(const SearchPass& pass) {
  last_line_ = -1e300;
  if (quiet_) return;
  clear();
  const std::size_t n = pass.layouts;
  const char* s = n == 1 ? "" : "s";
  std::string line;
  if (pass.effort == PlannerEffort::quick) {
    char margin[32];
    std::snprintf(margin, sizeof margin, "%g", request_.screen_margin * 100);
    line = "search: planning the " + std::to_string(n) + " layout" + s + " within " + margin +
           " % of the fastest screened time again, with the whole quick budget (" +
           std::to_string(kQuickEvals) + " evaluations and the polish)";
  } else {
    line = "search: planning the " + std::to_string(n) + " fastest layout" + s +
           " again with the full planner (--refine, " + std::to_string(request_.layout_evals) +
           " evaluations each)";
  }
  if (pass.share) line += ", at most " + std::to_string(*pass.share) + " evaluations each";
  print_formatted(print_, "%s\n", line.c_str());
}

void SearchProgressLines::pass_progress(const SearchPass&, const PassProgress& p) {
  if (quiet_) return;
  if (!tty_ && p.elapsed_s - last_line_ < interval_s_ && p.done < p.total) return;
  last_line_ = p.elapsed_s;
  print_formatted(print_, "%ssearch: planned again %zu / %zu layouts, %.1f s, %s%s",
                  tty_ ? "\r" : "", p.done, p.total, p.elapsed_s,
                  (p.done >= p.total ? std::string("ETA 0 s") : eta_text(p.eta_s)).c_str(),
                  tty_ ? "   " : "\n");
}

void PlanProgressLines::show(const std::string& what, const PlannerProgress& p) {
  if (!on_) return;
  // Each schedule's planner counts from 0: the command's total adds the ones before.
  if (what != label_) {
    done_before_ += last_evaluations_;
    label_ = what;
  }
  last_evaluations_ = p.evaluations;
  const std::string best = p.best ? format_ms(*p.best, 3) + " ms" : "none fits yet";
  char buf[240];
  // Seconds since the command started: the planner's own clock starts after the schedule
  // and the baselines, which take seconds for zb-v at thousands of micro-batches.
  const double now = std::chrono::duration<double>(Clock::now() - started_).count();
  if (tty_) {
    std::snprintf(buf, sizeof buf, "\r%s: %s, %lld evaluations, best %s, %.1f s  ", what.c_str(),
                  p.phase.c_str(), static_cast<long long>(p.evaluations), best.c_str(), now);
    print_(buf);
    shown_ = true;
    return;
  }
  // The first line after one interval too: a plan shorter than that prints none, and an
  // error stays the first line of stderr.
  if (now - last_line_s_ < interval_s_) return;
  last_line_s_ = now;
  const std::int64_t total = done_before_ + p.evaluations;
  std::string eta = "ETA unknown";
  if (total > 0 && now > 0) {
    double left = static_cast<double>(std::max<std::int64_t>(0, budget_ - total)) *
                  (now / static_cast<double>(total));
    if (limit_s_) left = std::min(left, std::max(0.0, *limit_s_ - now));
    char b[64];
    std::snprintf(b, sizeof b, left < 1 ? "ETA <1 s" : "ETA at most %.0f s", std::ceil(left));
    eta = b;
  }
  std::snprintf(buf, sizeof buf, "plan: %s: %s, %lld evaluations, best %s, %.1f s, %s\n",
                what.c_str(), p.phase.c_str(), static_cast<long long>(total), best.c_str(), now,
                eta.c_str());
  print_(buf);
}

void PlanProgressLines::clear() {
  if (on_ && tty_ && shown_) print_("\r" + std::string(100, ' ') + "\r");
  shown_ = false;
}

}  // namespace bmpipe::api
