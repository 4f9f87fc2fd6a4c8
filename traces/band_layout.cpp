#include "traces/band_layout.hpp"

#include <algorithm>
#include <utility>

namespace bmpipe {

std::vector<BandRun> band_runs(std::span<const BandInterval> row, const BandRule& rule) {
  std::vector<BandRun> runs;
  if (row.empty()) return runs;
  std::vector<std::pair<Time, std::size_t>> gaps;  // (width, index of the op after it)
  for (std::size_t i = 1; i < row.size(); ++i) {
    const Time gap = row[i].start - row[i - 1].end;
    if (static_cast<double>(gap) * rule.px_per_ns >= rule.min_gap_px) gaps.emplace_back(gap, i);
  }
  if (gaps.size() > static_cast<std::size_t>(std::max(rule.max_splits, 0))) {
    // Widest first; among equals the earliest, so the choice is deterministic.
    std::sort(gaps.begin(), gaps.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first > b.first : a.second < b.second;
    });
    gaps.resize(static_cast<std::size_t>(std::max(rule.max_splits, 0)));
  }
  std::vector<char> split(row.size(), 0);
  for (const auto& g : gaps) split[g.second] = 1;
  BandRun run;
  for (std::size_t i = 0; i < row.size(); ++i) {
    const std::size_t ops = i - run.first;
    if (ops > 0 && (ops >= static_cast<std::size_t>(std::max(rule.max_ops, 1)) || split[i])) {
      run.last = i;
      runs.push_back(run);
      run.first = i;
    }
  }
  run.last = row.size();
  runs.push_back(run);
  return runs;
}

std::optional<BandRule> band_rule(std::size_t most_ops, double plot_width_px, int band_px,
                                  double min_op_px, double px_per_ns, double min_gap_px) {
  if (static_cast<double>(most_ops) * min_op_px <= plot_width_px) return std::nullopt;
  const int budget = std::max(2, static_cast<int>(plot_width_px / std::max(1, band_px)));
  const int half = budget / 2;
  BandRule rule;
  rule.max_ops = static_cast<int>((most_ops + static_cast<std::size_t>(half) - 1) /
                                  static_cast<std::size_t>(half));
  rule.max_splits = half - 1;
  rule.px_per_ns = px_per_ns;
  rule.min_gap_px = min_gap_px;
  return rule;
}

}  // namespace bmpipe
