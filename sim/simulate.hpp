#pragma once
/// \file
/// The engine. Start here.
///
/// simulate() replays one training iteration of a pipeline-parallel schedule and returns
/// what happened: when every op ran, how long each device was busy and idle, how much
/// memory each device held at its peak, and whether it fits.
///
/// Model
/// - Time is integer nanoseconds (sim/time.hpp); the same input always gives the same
///   output, byte for byte.
/// - Every pipeline rank has one compute stream that runs the rank's op list strictly in
///   order. An op starts as soon as the stream is free and all its inputs are present,
///   i.e. at max(end of the rank's previous op, arrival of its last input):
///     F(s, m)   needs the output of F(s-1, m)                       (s > 0)
///     B/I(s, m) needs F(s, m) done here and the gradient of B/I(s+1, m) (s < last)
///     W(s, m)   needs I(s, m) done here
///     FB        needs both halves' inputs; runs as one op
///   On the last stage the loss is local: its backward needs only its own forward. An op
///   may take 0 ns (a cost that rounds to nothing); it still runs in list order.
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
/// - End of the iteration. A rank's tail work (SimInput::tail_time: the optimizer step)
///   follows its last pipeline op. Given per-stage gradient reductions (grad_buckets),
///   the rank first runs them on its own communication stream, one after another in the
///   order they become ready (FIFO), never on the compute stream: overlapped
///   (overlap_grad_reduce), a bucket is ready part-way through the last op computing its
///   stage's weight gradients (its last W, B, or FB holding its backward), a whole-stage
///   bucket when that op ends, so it hides behind the rank's remaining work; otherwise
///   all start after the last pipeline op. A tied-embedding all-reduce (tied_reduce) then
///   starts once both its ranks are that far, and both tails wait for it. The tail starts
///   at max(last pipeline op, last reduction) (DeviceResult::tail_start); iteration_time
///   runs to the latest tail's end. The reductions do not touch the pipeline: no link
///   time is shared with its transfers (the dp group's collectives are assumed to have
///   their own bandwidth), so ops and transfers time the same with or without them.
/// - Activation offload (StageCost::offload_bytes). Each rank has two copy streams beside
///   its compute stream, one each way on its host link, each FIFO in the order copies are
///   issued. F(s, m) issues the copy out when it ends; the bytes leave the device when
///   that copy ends. The copy back is issued when the op `offload_lead` places before the
///   backward of (s, m) in the rank's list starts (offload_lead 0: when the op just
///   before the backward ends); it starts once issued, its copy out has ended and the
///   stream is free, the bytes are charged from its start, and the backward waits for its
///   end (DeviceResult::reload_wait sums those waits). A micro-batch whose copy back would
///   be asked for by the time its forward ends (its backward within the lead, or right
///   after the forward) keeps its bytes on the device, as Megatron-Core keeps its last
///   groups so that a reload does not block compute. A stage is copied as one piece:
///   Megatron-Core reloads layer by layer a group ahead of the backward, which this reads
///   as a copy of the stage's bytes overlapping the op before it. Offloaded runs take the
///   ordered engine; memory changes at a copy's end or start come in time order with the
///   ops' (at one instant: frees, op ends, op starts, then copies back charged).
/// - BPipe's activation balancing (SimInput::bpipe; Kim et al., "BPipe: Memory-Balanced Pipeline
///   Parallelism for Training Large Language Models", ICML 2023, PMLR 202:16639-16653). On a
///   schedule of one stage per rank and only F and B ops (1F1B), stage s holds up to p - s
///   micro-batches' activations; it is paired with stage p - 1 - s, which holds s + 1, so every
///   pair holds p + 1 and the balanced share is K = ceil((p + 1) / 2) (bpipe_keep()). A stage that
///   would hold more (s < p - K) evicts whole micro-batches' activations to its partner's device.
///   Which ones is planned once from the rank's op list, latest first (the paper evicts the latest
///   saved micro-batch, so that each moves as seldom as possible): walking the list, wherever more
///   than K of the stage's micro-batches would be on the device, the latest one that can be away
///   then is evicted. Micro-batch j can be away from the op after the one following F(s, j) to the
///   op two before B(s, j): its copy out runs beside the op after F, its copy back beside the op
///   before B. The copy out is requested when F(s, j) ends, the copy back when the op before
///   B(s, j) starts; each is a transfer over the device graph between the two ranks' devices
///   (sim/topology.hpp routes, FIFO links shared with the pipeline's transfers; the copy back also
///   waits for the copy out), taking the stage's activation_bytes. The bytes are charged on the
///   receiving device from a copy's start and leave the sending device at its end, so a copy in
///   flight counts on both; B(s, j) waits for its copy back (DeviceResult::reload_wait). From p = 4
///   on, when each copy ends within the op beside it, an evicting rank holds K micro-batches at
///   most (at p = 3 stage 0's third warm-up forward comes before any micro-batch can be away).
///   BPipe runs take the ordered engine; its memory changes come in the same order as offload's.
/// - An order that cannot complete is not a hang: when nothing is left to run while ops
///   remain, the result carries an error and, for every stuck rank, its blocked op and
///   what it waits for.
///
/// Compiled schedules (sim/compiled_schedule.hpp)
/// A schedule is validated once and laid out as flat per-rank op arrays in which every op
/// names the slots its inputs arrive in and the slots its outputs go to. simulate() takes
/// that CompiledSchedule; the overload taking a plain Schedule compiles it for the one
/// call. A planner that runs one schedule under many costs compiles it once and shares it
/// between threads; the validation and layout are then paid once, not per run.
///
/// Two engines, one result
/// simulate() picks the cheaper of two engines; both give the same SimResult, field for
/// field (tests/sim/engines_test.cpp holds them to it):
/// - The data-flow engine runs when no observer is given and no link carries transfers
///   from more than one rank (the usual case; the exceptions are a NIC that receives from
///   two ranks, as with one device per node, and ranks that share a device). Then nothing
///   in the result depends on the order in which same-time events are taken: an op's
///   start is the max() above, and a link's FIFO order is the list order of its only
///   sender. The run is the fixpoint of that recurrence, reached by sweeping the ranks and
///   running each as far as its inputs allow until a sweep runs nothing: no events and no
///   queue.
/// - The ordered engine runs otherwise. It keeps a binary heap of events keyed on (time,
///   priority, insertion sequence) (sim/event_queue.hpp), because then the order shows:
///   an observer sees every op, transfer and memory change in event order, and on a
///   shared link the order of same-time requests decides which transfer goes first.
///   Events are of two kinds. An op's end (priority 0) finishes the op, places its
///   transfers and lets the rank try its next op. A wake-up (priority 1) lets an idle
///   rank re-check its next op when an input it may be waiting for lands. Arrivals are not
///   events: a transfer writes its arrival time into the consumer's slot when it is
///   placed, and a wake-up is queued only for a rank that is idle then (a busy one checks
///   when its op ends) and not already due to wake at that instant. At equal times ends go
///   first; either order gives the same timings, fixing it keeps observer calls
///   reproducible.
///   A wake-up that has been taken no longer counts as queued, so an input that lands at
///   the very instant a rank was last woken (0 ns ops and transfers) still wakes it.
///
/// Limits
/// Every time in a run is the end of a chain of ops, transfers and reductions, each used at
/// most once, so their sum bounds the clock. simulate() checks once per call that this sum
/// (plus the longest tail) and the sum of all activation and static bytes fit in 63 bits;
/// if not, the result is an error rather than an overflow.
///
/// simulate() is pure and re-entrant: all state lives in the call. It may run on many
/// threads at once with shared inputs.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "schedules/op.hpp"
#include "sim/compiled_schedule.hpp"
#include "sim/observer.hpp"
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
  /// Of activation_bytes, what goes to host memory between F and its backward (activation
  /// offload; SimInput::offload_lead says when it comes back), and how long one copy of it
  /// takes each way on the rank's host link. 0 bytes: nothing leaves the device.
  std::int64_t offload_bytes = 0;
  Time offload_time = 0;

  Time backward_full() const { return backward_input + backward_weight; }
};

/// A gradient all-reduce between two ranks after both have reduced their own gradients
/// over data parallelism: with tied embeddings and pp > 1 the first and the last stage hold
/// a copy of the word embedding each and sum their gradients (Megatron-LM,
/// finalize_model_grads: _allreduce_word_embedding_grads runs after finish_grad_sync and
/// before the optimizer step).
struct PairReduction {
  int rank_a = 0;
  int rank_b = 0;
  Time time = 0;  ///< 0: none
};

/// Part of a stage's gradient reduction that may start before the stage's last
/// weight-gradient op ends: a backward runs the stage's layers last to first, so the last
/// layers' gradients are complete early in that op (Megatron-LM launches a bucket's
/// reduction as soon as its gradients of the last micro-batch are in).
struct GradBucket {
  Time time = 0;         ///< its reduction
  double ready_b = 1.0;  ///< fraction of a B (or an FB's backward half) elapsed when ready
  double ready_w = 1.0;  ///< fraction of a W elapsed when ready
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
  /// The host memory each rank may fill with offloaded activations
  /// (DeviceResult::peak_host_bytes must stay within it to fit). Empty: no limit.
  std::vector<std::int64_t> host_capacity_bytes;
  /// Of each rank's static_bytes, what lies outside PyTorch's caching allocator (the CUDA
  /// context, communication buffers: cluster.device.reserved_GiB). Empty: none.
  std::vector<std::int64_t> outside_allocator_bytes;
  /// The caching allocator's fragmentation at the peak (cluster.device.allocator_overhead):
  /// it reserves (1 + this) x the tensors it holds. A rank's peak is then its
  /// outside_allocator_bytes + (1 + this) x (the rest of its static bytes + its peak
  /// activations). 0: the tensors' peak.
  double allocator_overhead = 0.0;
  /// Work each rank does at the end of the iteration (the optimizer step), after its last
  /// pipeline op and its gradient reductions below. Empty means none.
  std::vector<Time> tail_time;
  /// Per stage: the data-parallel reduction of the stage's weight gradients (an
  /// all-reduce, or ZeRO-1's reduce-scatter) as buckets (GradBucket); an empty list, or
  /// buckets of time 0, for none. Empty: no stage has one. A stage reduced in one piece is
  /// one bucket ready at 1.0 / 1.0. Reductions run on their rank's communication stream,
  /// one after another, never on the compute stream.
  std::vector<std::vector<GradBucket>> grad_buckets;
  /// true: a stage's buckets start as their gradients are complete, i.e. once their
  /// fraction of the stage's last weight-gradient op (CompiledSchedule::grad_done: its last
  /// W, B, or FB with its backward half) has elapsed, while the rank goes on with other
  /// stages' work (Megatron-LM's --overlap-grad-reduce). false: the rank's reductions start
  /// after its last pipeline op. Either way they run in the order they became ready.
  bool overlap_grad_reduce = false;
  /// The tied embedding's all-reduce, if any: it starts when both ranks have finished
  /// their last pipeline op and their reductions, and both ranks' tails wait for it.
  std::optional<PairReduction> tied_reduce;
  /// The device graph the transfers travel on. Required when any output crosses ranks.
  const Topology* topology = nullptr;
  /// Duration of an overlapped FB pair as a factor of (F + B + recompute) of its halves.
  double fb_overlap_factor = 1.0;
  /// Or a fixed duration for every FB pair; used instead of the factor when given.
  std::optional<Time> fb_pair_time;
  /// Per stage, its forward and its full backward as computation and all-to-all in turn
  /// (sim/fb_pair.hpp): what an analytic model of mixture-of-experts layers knows. Empty:
  /// not known (measured costs give F and B only). Given (one entry per stage), an FB pair
  /// takes fb_pair_time(forward parts of its F half, backward parts of its B half) instead
  /// of fb_overlap_factor x (F + B + recompute), unless fb_factor_explicit; a fixed
  /// fb_pair_time still wins over both. The parts of a stage add up to its F and to its
  /// I + W + recompute (the recompute leads each layer's backward). Traces draw the
  /// all-to-all from them.
  struct StageParts {
    std::vector<Time> forward;
    std::vector<Time> backward;
  };
  std::vector<StageParts> stage_parts;
  /// The user set fb_overlap_factor (training.overlap_factor): it times FB pairs even when
  /// stage_parts are known.
  bool fb_factor_explicit = false;
  /// How many ops ahead of a backward its offloaded activations start coming back
  /// (StageCost::offload_bytes): the copy is issued when the op this many places before it
  /// in the rank's list starts (the rank's first op if there are fewer); 0 issues it when
  /// the op just before the backward ends, so the backward waits for all of it.
  int offload_lead = 1;
  /// BPipe's activation balancing (see "Model" above): the first stages of a one-stage-per-
  /// rank F/B schedule (1F1B) evict micro-batches' activations to the devices of their
  /// partner stages p - 1 - s. Not with activation offload.
  bool bpipe = false;
};

/// BPipe's share K: the most micro-batches' activations a stage keeps on its device out of
/// p pipeline stages, ceil((p + 1) / 2) (a pair s, p - 1 - s holds p + 1 under 1F1B).
constexpr int bpipe_keep(int p) {
  return (p + 2) / 2;
}

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
  /// The dependency met last was the copy back of this op's offloaded activations
  /// (binding_stage is then the op's own backward stage).
  bool binding_reload = false;

  friend bool operator==(const OpRecord&, const OpRecord&) = default;
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

  friend bool operator==(const TransferRecord&, const TransferRecord&) = default;
};

/// A copy of offloaded activations between a rank's device and its host
/// (StageCost::offload_bytes), on the rank's copy stream for its direction.
struct CopyRecord {
  int rank = 0;
  int stage = 0;
  int microbatch = 0;
  bool to_host = true;  ///< true: after F (device to host); false: back before the backward
  std::int64_t bytes = 0;
  Time issued = 0;  ///< when the program asked for it
  Time start = 0;   ///< when it began (the stream free, the copy out done)
  Time end = 0;
  /// -1: the copy is to or from the rank's host; otherwise BPipe's partner rank (SimInput::
  /// bpipe) whose device keeps the bytes in between (to_host: the eviction to it).
  int peer_rank = -1;

  friend bool operator==(const CopyRecord&, const CopyRecord&) = default;
};

/// A gradient reduction on a rank's communication stream.
struct ReductionRecord {
  int rank = 0;
  int stage = -1;      ///< whose gradients; -1 for the tied-embedding all-reduce
  int peer_rank = -1;  ///< the tied-embedding all-reduce's other rank (-1 otherwise)
  Time ready = 0;      ///< when it could have started: gradients complete, or both ranks done
  Time start = 0;      ///< when it started (the stream was free)
  Time end = 0;

  friend bool operator==(const ReductionRecord&, const ReductionRecord&) = default;
};

struct BlockedOp {
  int rank = 0;
  int position = 0;  ///< index in the rank's op list
  Op op;
  std::string waiting_for;  ///< human-readable unmet dependencies

  friend bool operator==(const BlockedOp&, const BlockedOp&) = default;
};

struct DeviceResult {
  int rank = 0;
  int device = 0;
  Time busy = 0;         ///< sum of op durations
  Time first_start = 0;  ///< start of its first op
  Time last_end = 0;     ///< end of its last pipeline op
  /// When its tail work (SimInput::tail_time) starts: its last pipeline op's end, or later
  /// when its gradient reductions end after it.
  Time tail_start = 0;
  std::int64_t static_bytes = 0;
  std::int64_t peak_activation_bytes = 0;
  /// The tensors' peak: static bytes outside SimInput::outside_allocator_bytes + peak
  /// activations (what torch.cuda.max_memory_allocated prints).
  std::int64_t peak_allocated_bytes = 0;
  /// What the caching allocator reserves for them at the peak: (1 + allocator_overhead) x
  /// peak_allocated_bytes (torch.cuda.max_memory_reserved).
  std::int64_t peak_reserved_bytes = 0;
  /// The device's peak: outside_allocator_bytes + peak_reserved_bytes; with no overhead,
  /// static + peak activations. What `fits` compares with the capacity.
  std::int64_t peak_bytes = 0;
  std::int64_t capacity_bytes = 0;
  int peak_inflight = 0;  ///< most (stage, micro-batch) activations alive at once
  bool fits = true;
  /// Activation offload and BPipe: how long its backwards waited for their activations to
  /// come back (beyond their other inputs and the end of the op before); and, offload only,
  /// the most bytes it held in host memory (counted from a copy out's issue to its
  /// backward's start; `fits` also needs it within SimInput::host_capacity_bytes).
  Time reload_wait = 0;
  std::int64_t peak_host_bytes = 0;

  friend bool operator==(const DeviceResult&, const DeviceResult&) = default;
};

/// Two results are equal when every field is (operator==); `events` says which engine ran,
/// so results of the two engines agree on everything but it.
struct SimResult {
  bool ok = false;  ///< false: `error` says why (deadlock, invalid schedule or input)
  std::string error;
  std::vector<BlockedOp> blocked;  ///< on deadlock, one per stuck rank
  Time pipeline_time = 0;          ///< first op's start to last pipeline op's end
  /// First op's start to the end of the last rank's tail work (after its reductions), or
  /// to the last pipeline op's end if that is later.
  Time iteration_time = 0;
  double bubble_ratio = 0;  ///< 1 - busy device-time / (ranks x pipeline time)
  bool fits = true;         ///< every rank within its capacity
  std::uint64_t ops_executed = 0;
  /// Events the ordered engine took from its queue; 0 when the data-flow engine ran.
  std::uint64_t events = 0;
  std::vector<DeviceResult> devices;

  friend bool operator==(const SimResult&, const SimResult&) = default;
};

/// Runs `schedule` on `input`. Never throws for a bad schedule or input: those come back
/// as a result with ok == false and a message.
SimResult simulate(const SimInput& input, const CompiledSchedule& schedule,
                   Observer* observer = nullptr);

/// The same, compiling `schedule` for this one call (validation included).
SimResult simulate(const SimInput& input, const Schedule& schedule, Observer* observer = nullptr);

}  // namespace bmpipe
