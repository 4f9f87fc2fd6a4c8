#include "sim/compiled_schedule.hpp"

#include <algorithm>
#include <map>
#include <utility>

#include "schedules/validate.hpp"

namespace bmpipe {
namespace {

constexpr std::uint32_t kNone = 0xffffffffu;

std::string describe(const ScheduleIssue& issue) {
  std::string where;
  if (issue.rank >= 0) where = "device " + std::to_string(issue.rank);
  if (issue.position >= 0) where += ", op " + std::to_string(issue.position);
  return "invalid schedule" + (where.empty() ? "" : " (" + where + ")") + ": " + issue.message;
}

}  // namespace

CompiledSchedule::CompiledSchedule(Schedule schedule)
    : schedule_(std::make_shared<const Schedule>(std::move(schedule))) {
  compile();
}

CompiledSchedule CompiledSchedule::borrowing(const Schedule& schedule) {
  CompiledSchedule c;
  // An aliasing pointer with no owner: it points at `schedule` and never deletes it.
  c.schedule_ = std::shared_ptr<const Schedule>(std::shared_ptr<const Schedule>(), &schedule);
  c.compile();
  return c;
}

void CompiledSchedule::compile() {
  const Schedule& sch = *schedule_;
  const int p = sch.num_ranks, S = sch.num_stages, M = sch.num_microbatches;
  // Checked before validation, which would allocate a table of that size. The bound keeps
  // every flat index (at most 3 ops and 4 inputs per stage and micro-batch) in 32 bits.
  if (S >= 1 && M >= 1 && static_cast<std::int64_t>(S) * M >= (std::int64_t{1} << 30)) {
    error_ = "stages x micro-batches must stay below 2^30";
    return;
  }
  if (auto issue = validate_schedule(sch)) {
    error_ = describe(*issue);
    return;
  }

  // Where every half of every op sits, so inputs can name their producers.
  rank_begin_.assign(p + 1, 0);
  std::uint32_t total = 0;
  for (int r = 0; r < p; ++r) {
    rank_begin_[r] = total;
    total += static_cast<std::uint32_t>(sch.ops[r].size());
  }
  rank_begin_[p] = total;
  forward_op_.assign(static_cast<std::size_t>(S) * M, kNone);
  backward_op_.assign(static_cast<std::size_t>(S) * M, kNone);
  for (int r = 0; r < p; ++r)
    for (std::uint32_t k = 0; k < sch.ops[r].size(); ++k) {
      const Op& op = sch.ops[r][k];
      const std::uint32_t idx = rank_begin_[r] + k;
      switch (op.kind) {
        case OpKind::F:
          forward_op_[key(op.stage, op.microbatch)] = idx;
          break;
        case OpKind::B:
        case OpKind::I:
          backward_op_[key(op.stage, op.microbatch)] = idx;
          break;
        case OpKind::W:
          break;
        case OpKind::FB:
          forward_op_[key(op.stage, op.microbatch)] = idx;
          backward_op_[key(op.stage2, op.microbatch2)] = idx;
          break;
      }
    }

  ops_.assign(total, CompiledOp{});
  input_begin_.assign(total + 1, 0);
  inputs_.reserve(static_cast<std::size_t>(total) * 2);
  cost_uses_.assign(static_cast<std::size_t>(4) * S, 0);
  hop_uses_.assign(static_cast<std::size_t>(2) * S, 0);
  std::map<std::pair<int, int>, std::uint32_t> pair_index;

  for (int r = 0; r < p; ++r)
    for (std::uint32_t k = 0; k < sch.ops[r].size(); ++k) {
      const Op& op = sch.ops[r][k];
      const std::uint32_t idx = rank_begin_[r] + k;
      CompiledOp& c = ops_[idx];
      input_begin_[idx] = static_cast<std::uint32_t>(inputs_.size());
      bool never = false;
      // A same-rank input is met by list order, or never when it comes later in the list.
      auto local = [&](std::uint32_t producer, int stage) {
        if (producer >= idx) never = true;
        inputs_.push_back(CompiledInput{producer, kLocal, stage});
      };
      // An input from a neighbouring stage; `half` is the producer's half that sends it
      // (0 forward, 1 backward), which is also the consumer's wait entry it fills.
      auto neighbour = [&](std::uint32_t producer, int stage, int half) {
        if (sch.stage_rank[stage] == r) return local(producer, stage);
        const std::uint32_t slot = num_slots_++;
        const std::uint32_t hop = half == 0 ? stage : S + stage;
        ops_[producer].send[half] = slot;
        ops_[producer].hop[half] = hop;
        ++hop_uses_[hop];
        c.wait[half] = slot;
        inputs_.push_back(CompiledInput{producer, slot, stage});
      };
      auto forward_half = [&](int s, int mb) {
        if (s > 0) neighbour(forward_op_[key(s - 1, mb)], s - 1, 0);
      };
      auto backward_half = [&](int s, int mb) {
        local(forward_op_[key(s, mb)], s);
        if (s + 1 < S) neighbour(backward_op_[key(s + 1, mb)], s + 1, 1);
      };
      switch (op.kind) {
        case OpKind::F:
          c.cost = static_cast<std::uint32_t>(op.stage);
          forward_half(op.stage, op.microbatch);
          break;
        case OpKind::B:
          c.cost = static_cast<std::uint32_t>(S + op.stage);
          backward_half(op.stage, op.microbatch);
          break;
        case OpKind::I:
          c.cost = static_cast<std::uint32_t>(2 * S + op.stage);
          backward_half(op.stage, op.microbatch);
          break;
        case OpKind::W:
          c.cost = static_cast<std::uint32_t>(3 * S + op.stage);
          local(backward_op_[key(op.stage, op.microbatch)], op.stage);
          break;
        case OpKind::FB: {
          const auto [it, added] = pair_index.try_emplace(
              {op.stage, op.stage2}, static_cast<std::uint32_t>(fb_pairs_.size()));
          if (added) {
            fb_pairs_.push_back(FbPair{op.stage, op.stage2});
            cost_uses_.push_back(0);
          }
          c.cost = static_cast<std::uint32_t>(4 * S) + it->second;
          forward_half(op.stage, op.microbatch);
          backward_half(op.stage2, op.microbatch2);
          break;
        }
      }
      ++cost_uses_[c.cost];
      if (never) c.wait[0] = kNeverSlot;
    }
  input_begin_[total] = static_cast<std::uint32_t>(inputs_.size());

  // A stage lives on one rank, so the last op of that rank's list that computes the
  // stage's weight gradients is the moment they are complete. An I leaves them to its W.
  std::vector<std::uint32_t> last(S, kNone);
  for (int r = 0; r < p; ++r)
    for (std::uint32_t k = 0; k < sch.ops[r].size(); ++k) {
      const Op& op = sch.ops[r][k];
      if (op.kind == OpKind::B || op.kind == OpKind::W) last[op.stage] = rank_begin_[r] + k;
      if (op.kind == OpKind::FB) last[op.stage2] = rank_begin_[r] + k;
    }
  grad_done_.clear();
  for (int s = 0; s < S; ++s)
    if (last[s] != kNone) grad_done_.push_back(GradDone{last[s], s});
  std::sort(grad_done_.begin(), grad_done_.end(),
            [](const GradDone& a, const GradDone& b) { return a.op < b.op; });
  grad_done_begin_.assign(p + 1, 0);
  std::uint32_t g = 0;
  for (int r = 0; r <= p; ++r) {
    while (g < grad_done_.size() && grad_done_[g].op < rank_begin_[r]) ++g;
    grad_done_begin_[r] = g;
  }
}

}  // namespace bmpipe
