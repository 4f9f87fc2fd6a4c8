#pragma once
/// \file
/// A Chrome / Perfetto trace of one simulated iteration, written while it runs.
///
/// ChromeTraceWriter is an Observer: hand it to simulate() and it streams Trace Event
/// Format JSON (ts and dur in microseconds) to an std::ostream. It holds per-device state
/// and the transfers still in flight, never the trace itself, so p = 64, m = 1024 writes
/// hundreds of MB with a few MB of memory. Output is a pure function of the run: the same
/// input gives a byte-identical file (no clocks, no pointer order, no hash-map iteration).
///
/// What a device (one process, named "rank 3 · node 0 · dev 3 · stage 3,11") shows:
/// - thread "compute": every op as a complete event named F, B, I, W or F&B (args: stage,
///   chunk, microbatch, layers, recompute and, for a stage whose layers use several modes,
///   recompute_layers; F&B also carries the backward half), and every
///   idle gap as a slice named "bubble" whose args.cause is one of
///     "warm-up"                                  before the device's first op
///     "waiting for input from stage s on device d"  the producer had not finished
///     "waiting for transfer"                     the producer had finished; data in flight
///     "cool-down"                                after the device's last op
///     "waiting for gradient reduction"           its last op is done, its reductions are not
///     "dp all-reduce/optimizer"                  waiting for other devices' tail work
///   A gap whose producer finished part-way is split into an input wait and a transfer
///   wait at the producer's end. The device's own tail work (SimInput::tail_time) is a
///   slice from DeviceResult::tail_start (told by Observer::on_result), named "optimizer
///   step"; the dp reductions before it have their own thread (below). Ops,
///   bubbles and tail tile [0, iteration time] exactly; with no tail work that is
///   [0, pipeline time].
/// - threads "comm", "comm 2", ...: the point-to-point transfers this device sends, from
///   the links being acquired to the data arriving. Transfers overlap (latency), and
///   Perfetto only accepts perfectly nested slices on one thread, so each transfer goes on
///   the first comm lane that is free by then; lanes never hold overlapping slices.
/// - thread "grad reduce", when the run has per-stage gradient reductions: each stage's
///   dp reduction ("dp reduce stage s", args ready_us: when its gradients were complete)
///   and the tied-embedding all-reduce ("tied embedding all-reduce", args peer_rank). A
///   rank runs them one after another, so they never overlap on the thread.
/// - thread "all-to-all", when the stages' costs come in parts (SimInput::stage_parts: MoE
///   layers at ep > 1): every expert-parallel all-to-all of the rank's F, B and computed
///   F&B ops, named "a2a dispatch" or "a2a combine" (args half: forward or backward,
///   stage, microbatch), where it runs inside its op: back to back with the computation in
///   an F or a B (exposed), and on the pair's communication stream in an F&B
///   (sim/fb_pair.hpp), so the overlap shows beside the compute slice. Not drawn for I and
///   W (the parts hold the backward whole) or for pairs timed by overlap_factor/overlap_ms.
/// - flow arrows (ph "s" / "f", id = transfer id) from the producing op to the consuming
///   op, both bound to their enclosing compute slices. A flow is written when its consumer
///   runs, so every flow in the file has both ends.
/// - memory as three counters of one series each, "bytes": "activation memory" and
///   "total memory" (static + activations) with a sample at time 0 and at every change the
///   engine reports, and "static memory" with one sample at time 0 (it never changes).
///   One counter per quantity, because chrome://tracing stacks the series of one counter
///   event: activations, static and total in one event would read as twice the memory.
///   An instant event "peak memory" marks the first time the device reaches its peak
///   (written at the end; events need not be sorted).
/// - processes have pid = rank and a process_sort_index of the rank, threads a
///   thread_sort_index (compute 0, comm lanes 1, 2, ...): chrome://tracing and Perfetto
///   list ranks in rank order. Perfetto reads sort_index from JSON only since
///   google/perfetto PR #3273 (October 2025); before, it ordered processes by activity
///   (google/perfetto issues #378, #764), which no field of the file can change.

#include <cstdint>
#include <ostream>
#include <string>
#include <unordered_map>
#include <vector>

#include "sim/simulate.hpp"

namespace bmpipe {

/// Per-stage labels the engine does not know about; the experiment layer makes them from
/// the plan that ran. Any vector may be empty: then "layers" is omitted and "recompute"
/// only says whether the stage's backward re-runs forward work ("none" or "yes"), since
/// the engine's costs cannot tell selective from full recomputation.
struct TraceLabels {
  std::vector<std::string> stage_layers;     ///< e.g. "layers 0-3", one per stage
  std::vector<std::string> stage_recompute;  ///< "none", "selective", "full" or "mixed"
  /// Layers per mode, e.g. "none 2, full 1"; written as "recompute_layers" for mixed stages.
  std::vector<std::string> stage_recompute_layers;
};

/// Layer ranges "layers a-b" from layer counts per stage (as the config partitions them).
std::vector<std::string> layer_range_labels(const std::vector<int>& layers_per_stage);

/// Bytes the trace keeps per op of op_bound on top of the simulation's own: it streams, so
/// only its per-stage state and buffers (measured as for kTimelineBytesPerOp: 10 to 13).
inline constexpr int kTraceBytesPerOp = 15;

class ChromeTraceWriter final : public Observer {
 public:
  /// `input` and `schedule` must outlive the writer; they are the ones given to simulate().
  ChromeTraceWriter(std::ostream& out, const SimInput& input, const Schedule& schedule,
                    TraceLabels labels = {});
  ~ChromeTraceWriter() override;
  ChromeTraceWriter(const ChromeTraceWriter&) = delete;
  ChromeTraceWriter& operator=(const ChromeTraceWriter&) = delete;

  void on_op(const OpRecord& record) override;
  void on_transfer(const TransferRecord& record) override;
  void on_memory(int rank, Time time, std::int64_t activation_bytes) override;
  void on_reduction(const ReductionRecord& record) override;
  /// Activation offload's copies, on an "offload to host" and a "reload from host" thread.
  void on_copy(const CopyRecord& record) override;
  /// Keeps each rank's DeviceResult::tail_start: where finish() puts its tail work.
  void on_result(const SimResult& result) override;

  /// Writes what needs the whole run (trailing bubbles, tail work, peak markers), closes
  /// the JSON and flushes. Call once after simulate() returns; the destructor calls it if
  /// you did not. A deadlocked run still gives a valid file that ends where the run stopped.
  void finish();

 private:
  struct RankState {
    int ops_done = 0;
    Time last_end = 0;
    std::int64_t static_bytes = 0;
    std::int64_t peak_total = -1;
    std::int64_t peak_activation = 0;
    Time peak_time = 0;
    bool reduce_thread = false;    ///< its gradient-reduction thread has been named
    bool a2a_thread = false;       ///< its all-to-all thread has been named
    bool copy_out_thread = false;  ///< its offload threads have been named
    bool copy_back_thread = false;
    Time tail_start = -1;         ///< DeviceResult::tail_start; -1: no result (right after
                                  ///< its last op)
    std::vector<Time> lane_free;  ///< per comm lane: when its last transfer ends
    std::vector<std::int32_t> sent_by_current_op;  ///< transfer ids awaiting their producer's on_op
  };
  /// A transfer between its placement and the end of the op that consumes it.
  struct InFlight {
    std::int32_t id = 0;
    int src_rank = 0;
    int src_stage = 0;
    Time requested = 0;
    Time producer_ts = -1;  ///< inside the producing op's slice, in ns
  };

  std::uint64_t key(int stage, int microbatch, bool gradient) const;
  void write_metadata();
  void write_op(const OpRecord& r);
  void write_all_to_all(const OpRecord& r);
  void counter(int rank, Time time, const char* name, std::int64_t bytes);
  void write_bubble(int rank, Time from, Time to, const std::string& cause,
                    const std::string& extra);
  void explain_gap(const OpRecord& r, bool first);
  void consume(const OpRecord& r, int stage, int microbatch, bool gradient, Time ts);
  void begin_event();
  void append_us(Time ns);
  void append_escaped(const std::string& text);
  void flush_if_large();

  std::ostream& out_;
  const SimInput& input_;
  const Schedule& schedule_;
  TraceLabels labels_;
  std::vector<int> stage_chunk_;  ///< index of a stage among its device's stages
  std::vector<RankState> ranks_;
  std::unordered_map<std::uint64_t, InFlight> in_flight_;
  std::string buf_;
  bool first_event_ = true;
  bool finished_ = false;
};

/// Runs simulate() with a ChromeTraceWriter on `out` and finishes the trace.
SimResult simulate_with_trace(const SimInput& input, const Schedule& schedule, std::ostream& out,
                              const TraceLabels& labels = {});

}  // namespace bmpipe
