#pragma once
// A SimResult in words, for failure messages: gtest prints a result through PrintTo when an
// EXPECT_EQ on two of them fails, and the fuzz targets print the two engines' results when
// they differ. The comparison itself is SimResult's operator==; this only shows it.
#include <ostream>
#include <sstream>
#include <string>

#include "sim/simulate.hpp"

namespace bmpipe {

/// Every field, one line for the run, one per blocked op and one per device.
inline std::string result_text(const SimResult& r) {
  std::ostringstream s;
  s.precision(17);
  s << "ok " << r.ok << " error '" << r.error << "' pipeline " << r.pipeline_time << " iteration "
    << r.iteration_time << " bubble " << r.bubble_ratio << " fits " << r.fits << " ops "
    << r.ops_executed << " events " << r.events << '\n';
  for (const BlockedOp& b : r.blocked)
    s << "  blocked rank " << b.rank << " at " << b.position << ' ' << to_string(b.op)
      << " waiting for " << b.waiting_for << '\n';
  for (const DeviceResult& d : r.devices)
    s << "  rank " << d.rank << " device " << d.device << " busy " << d.busy << " first "
      << d.first_start << " last " << d.last_end << " tail " << d.tail_start << " static "
      << d.static_bytes << " activations " << d.peak_activation_bytes << " peak " << d.peak_bytes
      << " capacity " << d.capacity_bytes << " inflight " << d.peak_inflight << " fits " << d.fits
      << '\n';
  return s.str();
}

/// gtest's printer for SimResult (found by argument-dependent lookup).
inline void PrintTo(const SimResult& r, std::ostream* out) {
  *out << '\n' << result_text(r);
}

}  // namespace bmpipe
