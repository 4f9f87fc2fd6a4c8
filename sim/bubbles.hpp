#pragma once
/// \file
/// Where the bubble comes from: a device's measured idle time split into four parts by
/// re-simulating the same schedule with one cause of idleness switched on at a time.
///
/// Definition. For device r in a run, idle(r) = pipeline_time - busy(r) (the idle time the
/// summary reports; end-of-iteration tail work is outside the pipeline window). Four runs
/// of the same schedule, each adding one factor to the previous:
///   run 0  every stage costs the mean stage (per component: F, I, W), no recompute,
///          free communication (every rank on one device: transfers take no time; host
///          copies of offloaded activations neither)
///   run 1  the real per-stage F, I, W costs; still no recompute and free communication
///   run 2  plus the real communication (topology, output bytes, link contention, host copies)
///   run 3  plus recompute: the real input, i.e. the measured run
/// and
///   ideal          = idle_0(r)                 what the schedule alone implies
///   imbalance      = idle_1(r) - idle_0(r)     unequal stages
///   communication  = idle_2(r) - idle_1(r)     transfer latency, bandwidth and queueing
///   recompute      = idle_3(r) - idle_2(r)     longer backwards on the critical path
/// The sum telescopes to idle_3(r), the measured idle time, exactly (integer ns).
///
/// The order of the factors is a choice (a different order can shift time between parts
/// when factors interact); this one follows how a pipeline is usually reasoned about.
/// A part can be negative on one device: the slowest stage of an unbalanced pipeline
/// idles less than it would in a balanced one, because everyone else waits for it. The
/// totals over devices are the figures to read first.
///
/// Cost: three extra simulate() calls without an observer (pass a CompiledSchedule to
/// spare them the compilation).

#include <string>
#include <vector>

#include "sim/simulate.hpp"

namespace bmpipe {

struct BubbleParts {
  Time ideal = 0;
  Time imbalance = 0;
  Time communication = 0;
  Time recompute = 0;
  Time total() const { return ideal + imbalance + communication + recompute; }
};

struct BubbleBreakdown {
  bool ok = false;  ///< false: one of the re-simulations failed; `error` says which
  std::string error;
  std::vector<BubbleParts> devices;  ///< per rank
  BubbleParts total;                 ///< sum over ranks (device-time)
};

/// Decomposes `measured` (the result of simulate(input, schedule)) as described above.
BubbleBreakdown decompose_bubbles(const SimInput& input, const CompiledSchedule& schedule,
                                  const SimResult& measured);
/// The same, compiling `schedule` once for the three runs.
BubbleBreakdown decompose_bubbles(const SimInput& input, const Schedule& schedule,
                                  const SimResult& measured);

/// The runs of the breakdown, in the order their factors are added.
enum class BubbleRun {
  balanced,       ///< run 0: mean stages, free communication, no recompute
  real_stages,    ///< run 1: real stage costs, free communication, no recompute
  communication,  ///< run 2: plus real communication, still no recompute
  measured,       ///< run 3: the input itself
};

/// The input of one run of the breakdown (exposed for tests and for anyone who wants to
/// look at those runs).
SimInput bubble_counterfactual(const SimInput& input, BubbleRun run);

}  // namespace bmpipe
