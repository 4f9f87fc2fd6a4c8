#pragma once
/// \file
/// What a picture needs of one run, and the Observer that collects it while simulate()
/// runs. Unlike the Chrome trace, a picture needs every op at once, so a TimelineRecorder
/// keeps a compact copy of the run (about 40 bytes per op and 16 per memory change).
/// The api returns Timelines (compare with pictures); traces/timeline_svg.hpp and
/// traces/memory_svg.hpp draw them.

#include <cstdint>
#include <string>
#include <vector>

#include "sim/simulate.hpp"

namespace bmpipe {

/// Bytes a picture keeps per op of op_bound on top of the simulation's own (the recorded
/// boxes and memory samples, then the rows and bands drawn from them), measured with
/// /usr/bin/time on tiny.yaml at 1.5 and 3 million ops: 51 (1F1B), 70 (ZB-H1), 64 (ZB-V),
/// for --svg, --memory-svg or both. The work limit counts it (experiment/output_work.hpp).
inline constexpr int kTimelineBytesPerOp = 75;

/// What a picture needs of one run.
struct Timeline {
  struct Box {
    std::int32_t rank = 0;
    Op op;
    Time start = 0;
    Time end = 0;
  };
  struct MemorySample {
    Time time = 0;
    std::int64_t activation_bytes = 0;
  };
  std::string title;  ///< e.g. the schedule name
  int num_ranks = 0;
  std::vector<int> rank_device;  ///< physical device of each rank, for row labels
  /// Index of each stage among its device's stages (0 for the first chunk). Boxes of odd
  /// chunks are drawn in a lighter tint, as the papers draw V and interleaved schedules.
  std::vector<int> stage_chunk;
  std::vector<Box> boxes;                         ///< every op, in completion order
  std::vector<std::vector<MemorySample>> memory;  ///< per rank, in time order
  std::vector<std::int64_t> static_bytes;         ///< per rank
  std::vector<std::int64_t> capacity_bytes;       ///< per rank (0: unknown)
  /// Per rank, the work after its last op (SimInput::tail_time); empty or 0: none.
  std::vector<Time> tail_time;
  /// Per rank, when that work starts (DeviceResult::tail_start: after its gradient
  /// reductions); empty: right after its last op.
  std::vector<Time> tail_start;
  /// The dp reductions started as gradients became ready, behind the pipeline
  /// (SimInput::overlap_grad_reduce); otherwise after each rank's last op.
  bool grad_reduce_overlapped = false;
  Time pipeline_time = 0;
  Time iteration_time = 0;
  double bubble_ratio = 0.0;
  bool ok = true;
  std::string error;
};

/// Collects a Timeline while simulate() runs.
class TimelineRecorder final : public Observer {
 public:
  TimelineRecorder(const SimInput& input, const Schedule& schedule, std::string title = {});
  void on_op(const OpRecord& record) override;
  void on_memory(int rank, Time time, std::int64_t activation_bytes) override;
  /// A picture draws neither transfers nor reductions; take() reads the result.
  void on_transfer(const TransferRecord&) override {}
  void on_reduction(const ReductionRecord&) override {}
  void on_copy(const CopyRecord&) override {}
  void on_result(const SimResult&) override {}
  /// Completes the timeline with the run's result and hands it over.
  Timeline take(const SimResult& result);

 private:
  Timeline timeline_;
};

/// Runs simulate() with a TimelineRecorder; the result goes to `result` if given.
Timeline record_timeline(const SimInput& input, const Schedule& schedule, std::string title = {},
                         SimResult* result = nullptr);

}  // namespace bmpipe
