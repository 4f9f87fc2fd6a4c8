#pragma once
/// \file
/// Pipeline timelines as SVG, drawn like the figures in the pipeline-parallel papers: one
/// row per device, a box per op coloured by kind (F, B, I, W, F&B), the micro-batch number
/// inside when it fits, bubbles as the gaps between boxes, each device's end-of-iteration
/// work (dp all-reduce + optimizer, SimInput::tail_time; the optimizer step alone when the
/// dp reduction ran on its own stream) as a grey block from DeviceResult::tail_start,
/// a time axis with units, and under the rows a memory-over-time panel per device.
///
/// The memory panels share one y-scale (and so do the runs of a comparison): equal heights
/// are equal bytes, the fullest device has the tallest curve, and the capacity line sits at
/// the same height on every panel of devices with the same capacity. When every device uses
/// under a quarter of its capacity the scale follows the peak instead and the capacity
/// lines are pinned to the panels' top edge, marked off scale.
///
/// Width follows the op count: about 16 px per op on the row with most ops, at least
/// 1400 px, at most SvgOptions::max_width_px. When even that leaves under 8 px per op, a
/// row's consecutive ops are drawn as bands instead: a band covers a run of ops of one
/// device, is labelled with its micro-batch ranges (per kind when the label fits), filled
/// with its kind's colour or, for mixed kinds, stripes of them, and every bubble of 3 px or
/// more still splits bands, so that idle time shows as gaps. A row holds at most
/// plot width / SvgOptions::band_px bands (plot width = width - 270 px of labels).
///
/// The pictures draw a Timeline (traces/timeline.hpp). The SVG is written by hand: no
/// dependency, and the same timeline always gives the same bytes.
///
/// write_compare_svg() stacks several runs (one per schedule) on one time scale, so that
/// equal lengths on the page are equal times and schedules can be compared by eye.
/// write_memory_svg() plots every device's memory against time in one chart.

#include <cstdint>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "sim/simulate.hpp"
#include "traces/timeline.hpp"

namespace bmpipe {

struct SvgOptions {
  /// Whole picture, labels included; 0 lets the width follow the op count (see above).
  /// write_memory_svg() takes 0 as 1200 px.
  int width_px = 0;
  /// Upper bound of the automatic width.
  int max_width_px = 4000;
  /// Narrowest band, in px, once ops are aggregated: bounds the bands per row.
  int band_px = 32;
  bool memory_panels = true;  ///< the per-device memory panels under the rows
};

/// One run.
void write_timeline_svg(std::ostream& out, const Timeline& timeline,
                        const SvgOptions& options = {});

/// Several runs stacked top to bottom on one shared time scale (the longest iteration sets
/// it) and one memory scale. A run that failed gets its title and error message instead of
/// rows.
void write_compare_svg(std::ostream& out, std::span<const Timeline> timelines,
                       const SvgOptions& options = {});

/// Memory over time: every rank's static + activation bytes as a step curve, all on one
/// GiB axis against a ms axis, with the capacity line(s), the overall peak marked, and a
/// legend (one entry per rank up to 16 ranks, a colour ramp beyond). The view to open
/// first when a plan does not fit. A failed run gets its error message instead.
void write_memory_svg(std::ostream& out, const Timeline& timeline, const SvgOptions& options = {});

}  // namespace bmpipe
