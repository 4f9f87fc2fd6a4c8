#pragma once
/// \file
/// The size options of the SVG pictures (traces/timeline_svg.hpp, traces/memory_svg.hpp).

namespace bmpipe {

struct SvgOptions {
  /// Whole picture, labels included; 0 lets the width follow the op count (see
  /// traces/timeline_svg.hpp). write_memory_svg() takes 0 as 1200 px.
  int width_px = 0;
  /// Upper bound of the automatic width.
  int max_width_px = 4000;
  /// Narrowest band, in px, once ops are aggregated: bounds the bands per row.
  int band_px = 32;
  bool memory_panels = true;  ///< the per-device memory panels under the rows
};

}  // namespace bmpipe
