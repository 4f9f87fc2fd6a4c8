#pragma once
/// \file
/// The engine. Start here.
///
/// simulate() replays one training iteration of a pipeline-parallel schedule, event by
/// event, and returns what happened: when every op ran, how long each device was busy
/// and idle, how much memory each device held at its peak, and whether it fits.
///
/// Model
/// - Time is integer nanoseconds (sim/time.hpp). Events are ordered by (time, priority,
///   insertion sequence), so the same input always gives the same output.
/// - Every pipeline rank has one compute stream that runs the rank's op list strictly in
///   order. An op starts as soon as the stream is free and all its inputs are present:
///     F(s, m)   needs the output of F(s-1, m)                       (s > 0)
///     B/I(s, m) needs F(s, m) done here and the gradient of B/I(s+1, m) (s < last)
///     W(s, m)   needs I(s, m) done here
///     FB        needs both halves' inputs; runs as one op
///   On the last stage the loss is local: its backward needs only its own forward.
/// - An output that crosses to another rank is a point-to-point transfer over the device
///   graph (sim/topology.hpp). It is requested when the producing op ends, waits until
///   every link on its route is free (links are FIFO resources), holds them for
///   bytes/bandwidth, and arrives one route latency later. Transfers never occupy the
///   compute stream: communication overlaps compute.
/// - Memory per rank = static bytes (weights, gradients, optimizer state, reserved) +
///   live activations. F(s, m) allocates stage s's activation bytes when it starts. A full
///   backward frees them when it ends; a split backward frees all but the W-retained part
///   at the end of I and the rest at the end of W. This is stage granularity, but the peak
///   equals per-layer accounting: a rank runs one op at a time, so between an F's start
///   and its end nothing is freed, and the stage total is reached by the F's end anyway.
/// - An order that cannot complete is not a hang: when no event is left while ops remain,
///   the result carries an error and, for every stuck rank, its blocked op and what it
///   waits for.
///
/// simulate() is pure and re-entrant: all state lives in the call. It may run on many
/// threads at once with shared inputs.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "schedules/op.hpp"
#include "sim/compiled_schedule.hpp"
#include "sim/time.hpp"
#include "sim/topology.hpp"

namespace bmpipe {

/// Costs of one pipeline stage (a contiguous range of layers) for one micro-batch.
struct StageCost {
  Time forward = 0;          ///< F
  Time backward_input = 0;   ///< I; a full backward B takes I + W
  Time backward_weight = 0;  ///< W
  /// Extra time every backward of this stage (B, I, or the B half of FB) spends re-running
  /// forward work whose activations were not kept (activation recomputation).
  Time recompute = 0;
  /// Activation bytes held from the start of F until the backward has finished with them.
  std::int64_t activation_bytes = 0;
  /// Of activation_bytes, the part a split backward keeps until W (the rest goes at the
  /// end of I). Not given means all of it, which is the conservative default.
  std::optional<std::int64_t> weight_grad_retained_bytes;
  /// Bytes F sends to the next stage; the gradient coming back has the same size.
  std::int64_t output_bytes = 0;

  Time backward_full() const { return backward_input + backward_weight; }
};

struct SimInput {
  /// One entry per stage of the schedule.
  std::vector<StageCost> stages;
  /// Physical device (topology vertex) of each pipeline rank.
  std::vector<int> rank_device;
  /// Static bytes of each rank: weights, gradients, optimizer state, reserved memory.
  std::vector<std::int64_t> static_bytes;
  /// Memory capacity of each rank's device.
  std::vector<std::int64_t> capacity_bytes;
  /// Work each rank does after its last pipeline op (dp gradient all-reduce, optimizer
  /// step). Empty means none.
  std::vector<Time> tail_time;
  /// The device graph the transfers travel on. Required when any output crosses ranks.
  const Topology* topology = nullptr;
  /// Duration of an overlapped FB pair as a factor of (F + B + recompute) of its halves.
  double fb_overlap_factor = 1.0;
  /// Or a fixed duration for every FB pair; used instead of the factor when given.
  std::optional<Time> fb_pair_time;
};

/// Why an op could not start earlier than it did.
struct OpRecord {
  int rank = 0;
  Op op;
  Time start = 0;
  Time end = 0;
  Time device_free = 0;   ///< end of this rank's previous op (0 for its first op)
  Time inputs_ready = 0;  ///< when its last input dependency was met (<= start)
  /// The dependency met last: the stage that produced it (-1 if the op had none) and, if
  /// it crossed ranks, the id of the transfer that carried it (-1 if local).
  int binding_stage = -1;
  int binding_transfer = -1;
};

struct TransferRecord {
  int id = 0;
  int src_rank = 0;
  int dst_rank = 0;
  int src_stage = 0;  ///< stage whose op produced the data
  int dst_stage = 0;  ///< stage that consumes it
  int microbatch = 0;
  bool gradient = false;  ///< false: activation going forward; true: gradient going back
  std::int64_t bytes = 0;
  Time requested = 0;  ///< producing op's end
  Time start = 0;      ///< links acquired
  Time end = 0;        ///< data present at the consumer
};

/// Receives the run as it happens, in event order. The engine calls it only when one is
/// given, so tracing costs nothing otherwise.
class Observer {
 public:
  virtual ~Observer() = default;
  /// An op has finished (called at its end time).
  virtual void on_op(const OpRecord& record) { (void)record; }
  /// A transfer has been placed on its links (called at its request time).
  virtual void on_transfer(const TransferRecord& record) { (void)record; }
  /// Rank `rank`'s live activation bytes changed to `activation_bytes` at `time`.
  virtual void on_memory(int rank, Time time, std::int64_t activation_bytes) {
    (void)rank, (void)time, (void)activation_bytes;
  }
};

struct BlockedOp {
  int rank = 0;
  int position = 0;  ///< index in the rank's op list
  Op op;
  std::string waiting_for;  ///< human-readable unmet dependencies
};

struct DeviceResult {
  int rank = 0;
  int device = 0;
  Time busy = 0;         ///< sum of op durations
  Time first_start = 0;  ///< start of its first op
  Time last_end = 0;     ///< end of its last pipeline op
  std::int64_t static_bytes = 0;
  std::int64_t peak_activation_bytes = 0;
  std::int64_t peak_bytes = 0;  ///< static + peak activations
  std::int64_t capacity_bytes = 0;
  int peak_inflight = 0;  ///< most (stage, micro-batch) activations alive at once
  bool fits = true;
};

struct SimResult {
  bool ok = false;  ///< false: `error` says why (deadlock, invalid schedule or input)
  std::string error;
  std::vector<BlockedOp> blocked;  ///< on deadlock, one per stuck rank
  Time pipeline_time = 0;          ///< first op's start to last pipeline op's end
  Time iteration_time = 0;         ///< pipeline plus each rank's tail work, whichever ends last
  double bubble_ratio = 0;         ///< 1 - busy device-time / (ranks x pipeline time)
  bool fits = true;                ///< every rank within its capacity
  std::uint64_t ops_executed = 0;
  /// Events the ordered engine took from its queue; 0 when the data-flow engine ran.
  std::uint64_t events = 0;
  std::vector<DeviceResult> devices;
};

/// Runs `schedule` on `input`. Never throws for a bad schedule or input: those come back
/// as a result with ok == false and a message.
SimResult simulate(const SimInput& input, const CompiledSchedule& schedule,
                   Observer* observer = nullptr);

/// The same, compiling `schedule` for this one call (validation included).
SimResult simulate(const SimInput& input, const Schedule& schedule, Observer* observer = nullptr);

}  // namespace bmpipe
