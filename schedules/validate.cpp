#include "schedules/validate.hpp"

#include "schedules/huge_pages.hpp"

#include <vector>

namespace bmpipe {
namespace {

// Bits recorded per (stage, micro-batch).
constexpr unsigned kSeenF = 1, kSeenB = 2, kSeenI = 4, kSeenW = 8;

}  // namespace

std::optional<ScheduleIssue> validate_schedule(const Schedule& sch) {
  const int p = sch.num_ranks, S = sch.num_stages, M = sch.num_microbatches;
  if (p < 1 || S < 1 || M < 1)
    return ScheduleIssue{-1, -1, "schedule needs at least one device, stage and micro-batch"};
  if (static_cast<int>(sch.stage_rank.size()) != S)
    return ScheduleIssue{-1, -1,
                         "stage_rank has " + std::to_string(sch.stage_rank.size()) +
                             " entries for " + std::to_string(S) + " stages"};
  if (static_cast<int>(sch.ops.size()) != p)
    return ScheduleIssue{-1, -1,
                         "schedule has op lists for " + std::to_string(sch.ops.size()) +
                             " devices, expected " + std::to_string(p)};
  for (int s = 0; s < S; ++s)
    if (sch.stage_rank[s] < 0 || sch.stage_rank[s] >= p)
      return ScheduleIssue{-1, -1,
                           "stage " + std::to_string(s) + " is placed on device " +
                               std::to_string(sch.stage_rank[s]) + ", outside 0.." +
                               std::to_string(p - 1)};

  HugeVector<unsigned> seen(static_cast<std::size_t>(S) * M, 0);
  auto mark = [&](int r, int pos, int stage, int mb, OpKind kind) -> std::optional<ScheduleIssue> {
    const Op shown{kind, stage, mb, -1, -1};
    if (stage < 0 || stage >= S || mb < 0 || mb >= M)
      return ScheduleIssue{r, pos,
                           to_string(shown) + " is outside " + std::to_string(S) + " stages x " +
                               std::to_string(M) + " micro-batches"};
    if (sch.stage_rank[stage] != r)
      return ScheduleIssue{r, pos,
                           to_string(shown) + " runs on device " + std::to_string(r) +
                               " but stage " + std::to_string(stage) + " is held by device " +
                               std::to_string(sch.stage_rank[stage])};
    unsigned& bits = seen[static_cast<std::size_t>(stage) * M + mb];
    const unsigned bit = kind == OpKind::F   ? kSeenF
                         : kind == OpKind::B ? kSeenB
                         : kind == OpKind::I ? kSeenI
                                             : kSeenW;
    if (bits & bit) return ScheduleIssue{r, pos, to_string(shown) + " appears twice"};
    if (kind == OpKind::B && (bits & (kSeenI | kSeenW)))
      return ScheduleIssue{r, pos, to_string(shown) + " follows a split backward (I/W)"};
    if ((kind == OpKind::I || kind == OpKind::W) && (bits & kSeenB))
      return ScheduleIssue{r, pos, to_string(shown) + " follows a full backward B"};
    if (kind == OpKind::W && !(bits & kSeenI))
      return ScheduleIssue{r, pos, to_string(shown) + " comes before its I"};
    bits |= bit;
    return std::nullopt;
  };

  for (int r = 0; r < p; ++r) {
    const auto& list = sch.ops[r];
    for (int pos = 0; pos < static_cast<int>(list.size()); ++pos) {
      const Op& op = list[pos];
      std::optional<ScheduleIssue> issue;
      if (op.kind == OpKind::FB) {
        issue = mark(r, pos, op.stage, op.microbatch, OpKind::F);
        if (!issue) issue = mark(r, pos, op.stage2, op.microbatch2, OpKind::B);
      } else {
        issue = mark(r, pos, op.stage, op.microbatch, op.kind);
      }
      if (issue) return issue;
    }
  }
  for (int s = 0; s < S; ++s)
    for (int mb = 0; mb < M; ++mb) {
      const unsigned bits = seen[static_cast<std::size_t>(s) * M + mb];
      const int r = sch.stage_rank[s];
      if (!(bits & kSeenF)) return ScheduleIssue{r, -1, to_string(Op::f(s, mb)) + " is never run"};
      if (!(bits & (kSeenB | kSeenI)))
        return ScheduleIssue{r, -1, "backward of " + to_string(Op::f(s, mb)) + " is never run"};
      if ((bits & kSeenI) && !(bits & kSeenW))
        return ScheduleIssue{r, -1, to_string(Op::w(s, mb)) + " is never run"};
    }
  return std::nullopt;
}

}  // namespace bmpipe
