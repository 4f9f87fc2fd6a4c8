#pragma once
/// \file
/// The SVG pictures of a run, in one include:
/// - traces/timeline.hpp: Timeline, what a picture needs of one run, and the
///   TimelineRecorder that collects it while simulate() runs;
/// - traces/timeline_svg.hpp: the pipeline timeline of one run, or several stacked on one
///   time scale (write_timeline_svg, write_compare_svg);
/// - traces/memory_svg.hpp: every device's memory against time (write_memory_svg);
/// - traces/svg_options.hpp: their size options.
/// The layout of dense rows (traces/band_layout.hpp) and the SVG helpers
/// (traces/svg_primitives.hpp, traces/memory_curve.hpp) are internal to traces/.

#include "traces/memory_svg.hpp"
#include "traces/svg_options.hpp"
#include "traces/timeline.hpp"
#include "traces/timeline_svg.hpp"
