#pragma once
/// \file
/// A rank's activation memory as a function of its stages' bytes, read off its op order.
///
/// A rank runs one op at a time, so what it holds depends on the order of its ops, never on
/// their timing. Memory can only peak when something is allocated: at the start of an F
/// (or of an overlapped F&B). At each such moment the rank holds, of each of its stages j,
/// `full[j]` micro-batches with all their activation bytes A_j (F started, backward not yet
/// past I) and `retained[j]` micro-batches with only the bytes W still needs, R_j (I done,
/// W not). So its live activation bytes are
///     sum_j full[j] * A_j + retained[j] * R_j,
/// linear in every stage's A and R, and its peak is the maximum of these sums over the
/// moments. This is exactly the engine's accounting (sim/simulate.hpp: F allocates A at
/// its start, I frees A - R, W frees R, B frees A at its end), so a plan's peak is known
/// without simulating. Moments that another one dominates (holds at least as much of
/// every stage) are dropped.
///
/// What is not activations is fixed for the whole iteration, so it only shifts the peak: a
/// rank's static bytes are the sum of its layers' (LayerRow::static_bytes, one device's tp
/// share) plus Experiment::reserved_bytes. Per parameter, with e weight bytes, g gradient
/// bytes and K Adam bytes over dp: ZeRO-0 e + g + K, ZeRO-1 e + g + K/dp, ZeRO-2
/// e + (g + K)/dp, ZeRO-3 (e + g + K)/dp (sim/cost/cost_model.hpp, static_bytes). ZeRO-3
/// (training.fsdp) also holds, whatever the layers, the layer in use and the prefetched
/// next one gathered to full size, 2 x the largest unit's parameters x e, in reserved_bytes
/// (Experiment::sharded_working_bytes): a constant per device, so linear sums above stay
/// exact.

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "schedules/op.hpp"

namespace bmpipe {

struct MemoryMoment {
  std::vector<int> full;      ///< per local stage: micro-batches holding all of A
  std::vector<int> retained;  ///< per local stage: micro-batches holding R only
};

struct RankMemory {
  std::vector<int> stages;            ///< the rank's stages (global ids), local order
  std::vector<MemoryMoment> moments;  ///< the undominated allocation moments
  /// Activation offload (training.offload_modules): of a stage's micro-batches holding all
  /// of A, at most this many hold their offloaded bytes O on the device (moment_bytes).
  int offload_resident = std::numeric_limits<int>::max();
};

/// One entry per rank of `schedule`. `offload_resident`: RankMemory::offload_resident,
/// 2 + training.offload_lead when activations are offloaded: at an allocation (an F's
/// start) the F's own micro-batch, the one before it whose copy out may still run, and the
/// lead's copies back already charged; the engine holds the rest on the host. An estimate
/// for the search's filters and its per-rank recompute choice: every plan is simulated.
std::vector<RankMemory> memory_profile(const Schedule& schedule,
                                       int offload_resident = std::numeric_limits<int>::max());

/// The bytes a moment holds for one local stage: `full` micro-batches of `activation`
/// bytes, of which `offload` leave the device for all but `resident` of them, and
/// `retained_count` of `retained` bytes.
inline std::int64_t moment_bytes(int full, int retained_count, std::int64_t activation,
                                 std::int64_t retained, std::int64_t offload, int resident) {
  return full * (activation - offload) + std::min(full, resident) * offload +
         retained_count * retained;
}

/// Peak activation bytes of `rank` when its local stage j keeps `activation[j]` bytes
/// per micro-batch, of which `retained[j]` stay until W and `offload[j]` (none when empty)
/// go to the host for all but rank.offload_resident micro-batches.
std::int64_t peak_activation(const RankMemory& rank, const std::vector<std::int64_t>& activation,
                             const std::vector<std::int64_t>& retained,
                             const std::vector<std::int64_t>& offload = {});

}  // namespace bmpipe
