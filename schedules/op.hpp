#pragma once
/// \file
/// The vocabulary every schedule is written in: an Op is one unit of work on one pipeline
/// stage for one micro-batch. Schedules are per-device ordered lists of Ops; the engine
/// runs each list in order. The set of kinds is closed, so it is an enum.

#include <cstdint>
#include <string>
#include <vector>

#include "schedules/huge_pages.hpp"

namespace bmpipe {

enum class OpKind : std::uint8_t {
  F,   ///< forward of one stage for one micro-batch
  B,   ///< full backward (input-grad and weight-grad as one op)
  I,   ///< backward for the layer input only (zero-bubble "B")
  W,   ///< backward for the weights only (zero-bubble "W")
  FB,  ///< an overlapped forward-and-backward pair (DualPipe); see Op::stage2
};

/// One character per kind, as written in schedule files ("F", "B", "I", "W"); FB is "X".
char op_kind_char(OpKind kind);

struct Op {
  OpKind kind = OpKind::F;
  std::int32_t stage = 0;
  std::int32_t microbatch = 0;
  /// Only for OpKind::FB: the backward half of the pair. The forward half is
  /// (stage, microbatch); the backward half is a full backward of (stage2, microbatch2).
  std::int32_t stage2 = -1;
  std::int32_t microbatch2 = -1;

  static Op f(int stage, int mb) { return {OpKind::F, stage, mb, -1, -1}; }
  static Op b(int stage, int mb) { return {OpKind::B, stage, mb, -1, -1}; }
  static Op i(int stage, int mb) { return {OpKind::I, stage, mb, -1, -1}; }
  static Op w(int stage, int mb) { return {OpKind::W, stage, mb, -1, -1}; }
  static Op fb(int f_stage, int f_mb, int b_stage, int b_mb) {
    return {OpKind::FB, f_stage, f_mb, b_stage, b_mb};
  }

  friend bool operator==(const Op&, const Op&) = default;
};

/// "F3@s2" style text used in messages: kind, micro-batch, stage.
std::string to_string(const Op& op);

/// One rank's ops in execution order. At tens of millions of ops the lists are the largest
/// arrays of a run: their big blocks live on huge pages (schedules/huge_pages.hpp).
using OpList = HugeVector<Op>;

/// A complete schedule: which device holds which stage, and what each device runs in order.
/// Devices here are pipeline ranks 0..num_ranks-1; mapping ranks to physical devices is
/// the experiment's business, not the schedule's.
struct Schedule {
  std::string name;
  int num_ranks = 0;
  int num_stages = 0;
  int num_microbatches = 0;
  /// stage_rank[s] is the rank that holds stage s.
  std::vector<int> stage_rank;
  /// ops[r] is rank r's op list, in execution order.
  std::vector<OpList> ops;

  std::size_t total_ops() const;
  /// Number of stages each device holds (num_stages / num_ranks for regular placements).
  int chunks_per_device() const { return num_ranks ? num_stages / num_ranks : 0; }
};

}  // namespace bmpipe
