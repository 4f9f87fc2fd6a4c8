#pragma once
/// \file
/// A schedule checked once and laid out for the engine.
///
/// simulate() runs the same schedule thousands of times while a planner varies the costs,
/// so everything that depends on the schedule alone is done here, once: validation
/// (schedules/validate.hpp), a flat array of ops (rank 0's list, then rank 1's, ...) and,
/// for every op, where each of its inputs comes from. What depends on the costs (durations,
/// routes, memory) stays in simulate().
///
/// Inputs and slots. Every op input is produced by exactly one other op (validation
/// guarantees it): the forward of F(s, m) is F(s-1, m)'s output, a backward of (s, m) needs
/// F(s, m) and the gradient of the backward of (s+1, m), W(s, m) needs I(s, m). An input
/// produced on the same rank is met by the rank's own list order. An input produced on
/// another rank travels as a transfer and lands in a *slot*: a numbered cell the engine
/// writes the arrival time into. Slots are numbered in consumer order (rank by rank, op by
/// op), so a rank reads its slots front to back. Slot 0 always reads "present at time 0"
/// and slot 1 "never", so an op always waits on exactly two slots and needs no branch for
/// inputs it does not have or can never get.
///
/// Immutable after construction: one CompiledSchedule may be shared by many threads.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "schedules/huge_pages.hpp"
#include "schedules/op.hpp"

namespace bmpipe {

/// One input of an op, in the order the engine checks them (forward input first, then the
/// backward half's own forward, then its gradient): that order decides which input an
/// OpRecord names when two arrive at the same time.
struct CompiledInput {
  std::uint32_t producer = 0;  ///< flat index of the op that produces it
  std::uint32_t slot = 0;      ///< slot its transfer lands in, or CompiledSchedule::kLocal
  std::int32_t stage = 0;      ///< stage of the producing half (OpRecord::binding_stage)
};

/// What the engine needs of one op on its hot path.
struct CompiledOp {
  /// Row of the per-run cost table: F of stage s is row s, B is S+s, I is 2S+s, W is 3S+s,
  /// and an FB pair is 4S + its index in fb_pairs().
  std::uint32_t cost = 0;
  /// The (at most two) slots this op waits for: the forward half's input from another rank
  /// and the backward half's gradient from another rank. kReadySlot where there is none;
  /// kNeverSlot in wait[0] when a same-rank input comes later in the list (a deadlock).
  std::uint32_t wait[2] = {0, 0};
  /// Slot the forward half's / backward half's output lands in on another rank, or kNoSlot
  /// (same rank, or no consumer: last stage forward, first stage backward, W).
  std::uint32_t send[2] = {0xffffffffu, 0xffffffffu};
  /// Hop of each send: the forward half of stage s sends over hop s (s -> s+1), the
  /// backward half of stage s over hop S+s (s -> s-1).
  std::uint32_t hop[2] = {0, 0};
};

/// The op after which a stage's weight gradients are complete for the iteration: the last
/// op of the stage's rank that computes them (W; B, whose W half is inside; or an FB whose
/// backward half is the stage's). The stage's data-parallel reduction may start there.
struct GradDone {
  std::uint32_t op = 0;  ///< flat index
  std::int32_t stage = 0;
};

/// An overlapped FB pair's stages: its cost depends on both.
struct FbPair {
  std::int32_t stage = 0;   ///< forward half
  std::int32_t stage2 = 0;  ///< backward half
};

class CompiledSchedule {
 public:
  static constexpr std::uint32_t kReadySlot = 0;         ///< reads as present at time 0
  static constexpr std::uint32_t kNeverSlot = 1;         ///< reads as never present
  static constexpr std::uint32_t kFirstSlot = 2;         ///< the first slot a transfer writes
  static constexpr std::uint32_t kLocal = 0xffffffffu;   ///< CompiledInput::slot: same rank
  static constexpr std::uint32_t kNoSlot = 0xffffffffu;  ///< CompiledOp::send: nothing sent

  /// Validates `schedule` and lays it out. Never throws for a bad schedule: ok() is false
  /// and error() carries the message simulate() reports for it.
  explicit CompiledSchedule(Schedule schedule);

  /// Lays out `schedule` without copying it: the result (and every copy of it) refers to
  /// `schedule`, which must outlive them and stay unchanged. For callers that compile a
  /// schedule for one call only.
  static CompiledSchedule borrowing(const Schedule& schedule);

  bool ok() const { return error_.empty(); }
  /// Why the schedule cannot run, in the words simulate() uses; empty when ok().
  const std::string& error() const { return error_; }
  /// The schedule itself: observers and deadlock reports speak in its Ops.
  const Schedule& schedule() const { return *schedule_; }

  int num_ranks() const { return schedule_->num_ranks; }
  int num_stages() const { return schedule_->num_stages; }
  int num_microbatches() const { return schedule_->num_microbatches; }

  /// Every op, rank by rank: schedule().ops[r][k] is ops()[rank_begin(r) + k], and
  /// rank_begin(num_ranks()) is the number of ops.
  std::span<const CompiledOp> ops() const { return ops_; }
  std::uint32_t rank_begin(int rank) const { return rank_begin_[rank]; }
  /// Inputs of the op at flat index `i`.
  std::span<const CompiledInput> inputs(std::uint32_t i) const {
    return std::span<const CompiledInput>(inputs_).subspan(input_begin_[i],
                                                           input_begin_[i + 1] - input_begin_[i]);
  }
  /// Slots in use, the two constant ones included.
  std::uint32_t num_slots() const { return num_slots_; }
  std::span<const FbPair> fb_pairs() const { return fb_pairs_; }
  /// How many ops use each cost row, and how many transfers cross each hop: the engine's
  /// bound on the run's total time comes from these.
  std::span<const std::uint32_t> cost_uses() const { return cost_uses_; }
  std::span<const std::uint32_t> hop_uses() const { return hop_uses_; }

  /// One entry per stage, ordered by op: so rank by rank, and on a rank in list order,
  /// which is the order the stages' gradients complete in. grad_done_begin(r) is the
  /// first entry of rank r; grad_done_begin(num_ranks()) the number of entries.
  std::span<const GradDone> grad_done() const { return grad_done_; }
  std::uint32_t grad_done_begin(int rank) const { return grad_done_begin_[rank]; }

  /// Flat index of the op holding F(s, m) / the backward (B or I, or an FB's backward
  /// half) of (s, m).
  std::uint32_t forward_op(int stage, int mb) const { return forward_op_[key(stage, mb)]; }
  std::uint32_t backward_op(int stage, int mb) const { return backward_op_[key(stage, mb)]; }

 private:
  CompiledSchedule() = default;
  void compile();
  std::size_t key(int stage, int mb) const {
    return static_cast<std::size_t>(stage) * schedule_->num_microbatches + mb;
  }

  std::shared_ptr<const Schedule> schedule_;
  std::string error_;
  HugeVector<CompiledOp> ops_;
  HugeVector<CompiledInput> inputs_;
  HugeVector<std::uint32_t> input_begin_;  // one more than ops_
  std::vector<std::uint32_t> rank_begin_;
  std::vector<FbPair> fb_pairs_;
  std::vector<std::uint32_t> cost_uses_;
  std::vector<std::uint32_t> hop_uses_;
  HugeVector<std::uint32_t> forward_op_;
  HugeVector<std::uint32_t> backward_op_;
  std::vector<GradDone> grad_done_;
  std::vector<std::uint32_t> grad_done_begin_;  // one more than ranks
  std::uint32_t num_slots_ = kFirstSlot;
};

}  // namespace bmpipe
