#pragma once
/// \file
/// How a timeline row too dense for a box per op is cut into bands: a band covers a run of
/// consecutive ops of one device, at most BandRule::max_ops of them, and every bubble that
/// is visible on the page ends a band, so that aggregation may hide which op ran where,
/// never that a device stood idle. When a row has more visible bubbles than
/// BandRule::max_splits, only the widest split it (among equals the earliest), which bounds
/// the bands per row.
///
/// Pure functions on plain data (intervals in, index runs out): no SVG, no Timeline, so the
/// layout is tested on hand-worked rows (tests/traces/band_layout_test.cpp).

#include <cstddef>
#include <optional>
#include <span>
#include <vector>

#include "sim/time.hpp"

namespace bmpipe {

/// One op of a row: when it runs.
struct BandInterval {
  Time start = 0;
  Time end = 0;
};

/// How a row is cut into bands.
struct BandRule {
  int max_ops = 1;          ///< most ops in one band
  int max_splits = 0;       ///< most visible bubbles that split one row
  double px_per_ns = 1.0;   ///< page scale: a bubble of g ns is g * px_per_ns px wide
  double min_gap_px = 3.0;  ///< a bubble at least this wide is visible, so it may split
};

/// The ops [first, last) of a row drawn as one band.
struct BandRun {
  std::size_t first = 0;
  std::size_t last = 0;
  bool operator==(const BandRun&) const = default;
};

/// Cuts one row, its ops in start order, into bands: consecutive runs that together cover
/// every op once, in order. A run ends after rule.max_ops ops or before one of the (at most
/// rule.max_splits) widest visible bubbles, whichever comes first. Overlapping or touching
/// ops leave no bubble. An empty row has no bands; a row of n ops gets at most
/// ceil(n / max_ops) + max_splits bands.
std::vector<BandRun> band_runs(std::span<const BandInterval> row, const BandRule& rule);

/// Whether rows of up to `most_ops` ops need bands on a plot `plot_width_px` wide (each op
/// would get under `min_op_px`), and if so the rule: a row holds about
/// H = max(2, plot_width_px / band_px) / 2 runs of max_ops = ceil(most_ops / H) ops plus
/// H - 1 splits, so at most 2 H bands, each at least about band_px wide on average.
/// std::nullopt: a box per op fits.
std::optional<BandRule> band_rule(std::size_t most_ops, double plot_width_px, int band_px,
                                  double min_op_px, double px_per_ns, double min_gap_px);

}  // namespace bmpipe
