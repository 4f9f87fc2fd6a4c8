#pragma once
/// \file
/// An overlapped forward-and-backward pair (DualPipe's F&B, Megatron-LM's
/// --overlap-moe-expert-parallel-comm), timed from its parts on two streams.
///
/// The model (DeepSeek-V3 technical report, arXiv 2412.19437, 2024, sec. 3.2.1 and
/// Figure 4). A forward of a mixture-of-experts layer runs attention, the all-to-all
/// dispatch, the MLP (the experts) and the all-to-all combine; its backward runs them in
/// reverse: combine-bwd, MLP-bwd (input and weight gradients), dispatch-bwd, attention-bwd.
/// Within one micro-batch each piece needs the one before it, so alone the a2a is exposed.
/// In a pair, the forward and the backward are of different micro-batches and do not
/// depend on each other: the rank runs computation on one stream and all-to-all on another,
/// so each chain's a2a hides behind the other chain's computation (the report: attention(F)
/// hides combine(B), MLP(B) hides dispatch(F), MLP(F) hides dispatch(B), attention(B)
/// hides combine(F)).
///
/// Input. Each half is a chain of parts, computation and all-to-all in turn:
///   parts[0] computation, parts[1] a2a, parts[2] computation, ...
/// (a stage's layers concatenated: what lies between two a2a of the chain is one
/// computation piece, e.g. a layer's combine-side work and the next layer's attention).
/// A chain may end with either kind; an a2a of 0 ns joins its neighbours into one
/// computation piece, so a dense stage is one piece.
///
/// The schedule (a non-delay list schedule, deterministic):
/// - each piece starts at max(end of the piece before it in its chain, its stream free);
/// - repeatedly, of the (at most two) chains' next pieces, the one that can start earliest
///   runs; on a tie on one stream, the chain that did not run that stream's last piece
///   goes first, the backward at the very start (its leading computation releases its
///   combine-bwd, which then hides behind the forward's attention, as in Figure 4);
///   a tie across the two streams is taken computation first (it cannot change any time:
///   the streams are separate).
/// Every piece so placed starts no earlier than the one placed before it (a chain's next
/// piece is ready when its previous piece ends, and a stream frees when its piece ends),
/// so this is the event order of the two streams.
///
/// What follows (the tests pin each on hand-worked cases):
/// - All a2a of 0 ns: each chain is one computation piece, the compute stream never
///   waits, and the pair takes F + B exactly.
/// - The pair takes at least max(total computation, total a2a) and at most F + B (the
///   pieces run back to back is one feasible order, and a non-delay schedule of two
///   chains never idles a stream a chain could use; the sequential order is the worst).
/// - With a2a longer than all computation, the comm stream is the bottleneck: the pair
///   takes the total a2a plus the computation no a2a can run beside (before the first
///   a2a of either chain can start, and after the last one ends).
///
/// Pure: no state outside the call.

#include <span>
#include <vector>

#include "sim/time.hpp"

namespace bmpipe {

/// One piece of a pair as it ran, relative to the pair's start.
struct FbPiece {
  bool backward = false;  ///< of the backward half (else the forward)
  bool comm = false;      ///< an all-to-all (else computation)
  int index = 0;          ///< its index among its half's merged pieces
  Time start = 0;
  Time end = 0;
  friend bool operator==(const FbPiece&, const FbPiece&) = default;
};

/// The pair's pieces in the order they were placed (non-decreasing start). Parts must not
/// be negative (the engine checks its input before calling).
std::vector<FbPiece> fb_pair_timeline(std::span<const Time> forward,
                                      std::span<const Time> backward);

/// The pair's duration: the last piece's end (0 for two empty chains).
Time fb_pair_time(std::span<const Time> forward, std::span<const Time> backward);

/// The exposed schedule of one half alone (an F, or a B), on the same clock: its pieces
/// back to back, a2a included, from 0. Zero a2a are merged as fb_pair_timeline does.
std::vector<FbPiece> fb_chain_timeline(std::span<const Time> parts, bool backward);

}  // namespace bmpipe
