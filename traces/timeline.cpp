#include "traces/timeline.hpp"

#include <algorithm>
#include <utility>

namespace bmpipe {

TimelineRecorder::TimelineRecorder(const SimInput& input, const Schedule& schedule,
                                   std::string title) {
  timeline_.title = title.empty() ? schedule.name : std::move(title);
  timeline_.num_ranks = schedule.num_ranks;
  timeline_.rank_device = input.rank_device;
  timeline_.stage_chunk.assign(static_cast<std::size_t>(std::max(schedule.num_stages, 0)), 0);
  std::vector<int> seen(static_cast<std::size_t>(std::max(schedule.num_ranks, 0)), 0);
  for (std::size_t s = 0; s < timeline_.stage_chunk.size() && s < schedule.stage_rank.size(); ++s) {
    const int r = schedule.stage_rank[s];
    if (r >= 0 && static_cast<std::size_t>(r) < seen.size()) timeline_.stage_chunk[s] = seen[r]++;
  }
  timeline_.static_bytes = input.static_bytes;
  timeline_.capacity_bytes = input.capacity_bytes;
  timeline_.tail_time = input.tail_time;
  timeline_.grad_reduce_overlapped = input.overlap_grad_reduce;
  timeline_.memory.resize(static_cast<std::size_t>(std::max(schedule.num_ranks, 0)));
  timeline_.boxes.reserve(schedule.total_ops());
}

void TimelineRecorder::on_op(const OpRecord& r) {
  timeline_.boxes.push_back(Timeline::Box{r.rank, r.op, r.start, r.end});
}

void TimelineRecorder::on_memory(int rank, Time time, std::int64_t activation_bytes) {
  if (rank >= 0 && static_cast<std::size_t>(rank) < timeline_.memory.size())
    timeline_.memory[rank].push_back(Timeline::MemorySample{time, activation_bytes});
}

Timeline TimelineRecorder::take(const SimResult& result) {
  timeline_.ok = result.ok;
  timeline_.error = result.error;
  timeline_.pipeline_time = result.pipeline_time;
  timeline_.iteration_time = result.iteration_time;
  timeline_.bubble_ratio = result.bubble_ratio;
  timeline_.tail_start.clear();
  for (const DeviceResult& d : result.devices) timeline_.tail_start.push_back(d.tail_start);
  if (!result.ok) timeline_.boxes.clear();
  return std::move(timeline_);
}

Timeline record_timeline(const SimInput& input, const Schedule& schedule, std::string title,
                         SimResult* result) {
  TimelineRecorder recorder(input, schedule, std::move(title));
  SimResult r = simulate(input, schedule, &recorder);
  Timeline t = recorder.take(r);
  if (result) *result = std::move(r);
  return t;
}

}  // namespace bmpipe
