#pragma once
/// \file
/// Megatron-LM's --overlap-moe-expert-parallel-comm on 1F1B and interleaved: the steady
/// state runs a forward and a backward of different micro-batches as one overlapped pair
/// (an FB op), so that one's computation hides the other's expert-parallel all-to-all (the
/// pair is timed by sim/fb_pair.hpp).
///
/// Which pairs. A rank keeps its forwards and its backwards in the order the schedule gave
/// them; it runs the first `w` forwards alone (the warm-up), then pairs the next forward
/// with the next backward, FB(F[w+k], B[k]), and ends with the backwards left alone.
/// - Interleaved: w = the schedule's warm-up + 1. Megatron-Core (NVIDIA/Megatron-LM,
///   megatron/core/pipeline_parallel/schedules.py, the interleaved schedule under
///   overlap_moe_expert_parallel_comm / combined_1f1b; read, not copied) runs one more
///   warm-up forward and then pairs each backward with the next forward.
/// - 1F1B (one stage per rank): w = 2 (p - r - 1) + 1, as interleaved's warm-up of one
///   chunk plus the one more. Why not 1F1B's own p - r - 1, + 1: rank r's pair k needs the
///   gradient of B[k] from rank r+1's pair k, whose forward needs the output of rank r's
///   forward F[w_{r+1} + k]. With w_r - w_{r+1} = 1 that forward is in rank r's pair k-1,
///   so pairs k-1 (rank r), k (rank r+1), k (rank r) form a chain with nothing beside it,
///   and every rank idles one pair in two. With a difference of 2 the forward is in pair
///   k-2 and rank r runs pair k-1 meanwhile: no idle in the steady state. Megatron runs the
///   overlap with pipelining only on the interleaved schedule (it asks for virtual stages);
///   this is the 1F1B order with the same spacing. The price is memory: rank r holds up to
///   w + 1 micro-batches' activations (2p on rank 0) instead of p - r.
/// The last stage's w is at least 1, so a pair never holds a backward and its own forward.
///
/// Memory: a pair allocates its forward's activations at its start and frees the
/// backward's at its end.

#include "schedules/op.hpp"

namespace bmpipe {

/// `schedule` (1F1B or interleaved: F and B ops only) with its steady state paired as
/// above. The name and the placement are unchanged.
Schedule pair_steady_state(Schedule schedule);

}  // namespace bmpipe
