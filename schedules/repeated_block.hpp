#pragma once
// Internal to bmpipe_schedules: the V-shaped building-block schedules (v-min, v-half)
// place one micro-batch's F, I and W of every stage on a slot timeline, then repeat that
// block every `period` slots. This turns such a block into per-rank op orders.

#include <vector>

#include "schedules/op.hpp"

namespace bmpipe::detail {

/// Fills `s.ops` (whose stage_rank and sizes are set) from the block slots tf/ti/tw of
/// every stage, repeated for each micro-batch every `period` slots. Slots of one rank must
/// be distinct, so each rank's order is the slot order.
void fill_from_repeated_block(Schedule& s, const std::vector<long>& tf, const std::vector<long>& ti,
                              const std::vector<long>& tw, long period);

}  // namespace bmpipe::detail
