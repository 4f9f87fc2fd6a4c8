#include "sim/bubbles.hpp"

#include <algorithm>

namespace bmpipe {

SimInput bubble_counterfactual(const SimInput& input, BubbleRun run) {
  SimInput in = input;
  if (run == BubbleRun::measured) return in;
  for (StageCost& c : in.stages) c.recompute = 0;
  if (run != BubbleRun::communication) {
    // Free communication: with every rank on one physical device a transfer has an empty
    // route, so it arrives the moment it is sent and never queues on a link.
    std::fill(in.rank_device.begin(), in.rank_device.end(), 0);
    // And activation offload's host copies take no time: what they expose is communication.
    for (StageCost& c : in.stages) c.offload_time = 0;
  }
  if (run == BubbleRun::balanced && !in.stages.empty()) {
    Time f = 0, i = 0, w = 0;
    for (const StageCost& c : in.stages)
      f += c.forward, i += c.backward_input, w += c.backward_weight;
    const Time n = static_cast<Time>(in.stages.size());
    for (StageCost& c : in.stages)
      c.forward = f / n, c.backward_input = i / n, c.backward_weight = w / n;
  }
  return in;
}

BubbleBreakdown decompose_bubbles(const SimInput& input, const CompiledSchedule& schedule,
                                  const SimResult& measured) {
  BubbleBreakdown out;
  if (!measured.ok) {
    out.error = "the measured run failed: " + measured.error;
    return out;
  }
  auto idle = [](const SimResult& r) {
    std::vector<Time> v;
    for (const auto& d : r.devices) v.push_back(r.pipeline_time - d.busy);
    return v;
  };
  std::vector<std::vector<Time>> levels;
  static const char* const kNames[] = {"balanced, free communication, no recompute",
                                       "real stages, free communication, no recompute",
                                       "real stages and communication, no recompute"};
  for (int level = 0; level < 3; ++level) {
    const SimResult r =
        simulate(bubble_counterfactual(input, static_cast<BubbleRun>(level)), schedule);
    if (!r.ok) {
      out.error = std::string("the run with ") + kNames[level] + " failed: " + r.error;
      return out;
    }
    levels.push_back(idle(r));
  }
  levels.push_back(idle(measured));
  const std::size_t p = measured.devices.size();
  out.devices.resize(p);
  for (std::size_t r = 0; r < p; ++r) {
    BubbleParts& b = out.devices[r];
    b.ideal = levels[0][r];
    b.imbalance = levels[1][r] - levels[0][r];
    b.communication = levels[2][r] - levels[1][r];
    b.recompute = levels[3][r] - levels[2][r];
    out.total.ideal += b.ideal;
    out.total.imbalance += b.imbalance;
    out.total.communication += b.communication;
    out.total.recompute += b.recompute;
  }
  out.ok = true;
  return out;
}

BubbleBreakdown decompose_bubbles(const SimInput& input, const Schedule& schedule,
                                  const SimResult& measured) {
  return decompose_bubbles(input, CompiledSchedule::borrowing(schedule), measured);
}

}  // namespace bmpipe
