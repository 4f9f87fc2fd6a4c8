#pragma once
/// \file
/// Pipeline timelines as SVG, drawn like the figures in the pipeline-parallel papers: one
/// row per device, a box per op coloured by kind (F, B, I, W, F&B), the micro-batch number
/// inside when it fits, bubbles as the gaps between boxes, each device's end-of-iteration
/// work (the optimizer step, SimInput::tail_time) as a grey block from
/// DeviceResult::tail_start, after a lighter block while it waits for its dp reductions,
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
/// plot width / SvgOptions::band_px bands (plot width = width - 270 px of labels). How rows
/// are cut into bands is traces/band_layout.hpp.
///
/// The picture draws a Timeline (traces/timeline.hpp). The SVG is written by hand: no
/// dependency, and the same timeline always gives the same bytes.
///
/// write_compare_svg() stacks several runs (one per schedule) on one time scale, so that
/// equal lengths on the page are equal times and schedules can be compared by eye.

#include <ostream>
#include <span>

#include "traces/svg_options.hpp"
#include "traces/timeline.hpp"

namespace bmpipe {

/// One run.
void write_timeline_svg(std::ostream& out, const Timeline& timeline,
                        const SvgOptions& options = {});

/// Several runs stacked top to bottom on one shared time scale (the longest iteration sets
/// it) and one memory scale. A run that failed gets its title and error message instead of
/// rows.
void write_compare_svg(std::ostream& out, std::span<const Timeline> timelines,
                       const SvgOptions& options = {});

}  // namespace bmpipe
