#include "sim/config/experiment.hpp"

namespace bmpipe {

Schedule make_schedule(const Config& c) {
  const ScheduleInfo* info = find_schedule(c.training.schedule);
  if (!info)
    c.fail("training.schedule",
           "unknown schedule '" + c.training.schedule + "' (known: " + schedule_names() + ")");
  try {
    return info->generate(ScheduleParams{c.training.pp, c.training.microbatches, c.training.vpp});
  } catch (const ScheduleError& e) {
    c.fail("training.schedule", e.what());
  }
}

}  // namespace bmpipe
