#pragma once
/// \file
/// write_memory_svg() plots every device's memory against time in one chart; the view to
/// open first when a plan does not fit. Written by hand like the timeline picture
/// (traces/timeline_svg.hpp): the same timeline always gives the same bytes.

#include <ostream>

#include "traces/svg_options.hpp"
#include "traces/timeline.hpp"

namespace bmpipe {

/// Memory over time: every rank's static + activation bytes as a step curve, all on one
/// GiB axis against a ms axis, with the capacity line(s), the overall peak marked, and a
/// legend (one entry per rank up to 16 ranks, a colour ramp beyond). The view to open
/// first when a plan does not fit. A failed run gets its error message instead.
void write_memory_svg(std::ostream& out, const Timeline& timeline, const SvgOptions& options = {});

}  // namespace bmpipe
