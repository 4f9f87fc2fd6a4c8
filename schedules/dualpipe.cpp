// DualPipeV: the V-shaped variant of DeepSeek's DualPipe (DeepSeek-AI, "DeepSeek-V3
// Technical Report", 2024, section 3.2.1; the "cut-in-half" DualPipeV of the DualPipe
// repository). Rank r holds stages r (chunk 0) and 2p-1-r (chunk 1). In the steady state
// every rank overlaps the forward of one chunk with the full backward of the other, so
// the all-to-all / p2p communication of one hides behind the compute of the other; the
// engine models that as one FB op whose duration is a config value.
#include <algorithm>
#include <deque>

#include "schedules/registry.hpp"

namespace bmpipe {

namespace {

/// Emits one rank's ops, keeping per-chunk forward and backward counters and the queue
/// of weight-gradient work that split backwards leave behind.
class RankWriter {
 public:
  RankWriter(OpList& out, int stage0, int stage1) : out_(out), stage_{stage0, stage1} {}

  void f(int chunk) { out_.push_back(Op::f(stage_[chunk], next_f_[chunk]++)); }
  /// A backward of `chunk`; split (I now, W queued) when `zero_bubble`.
  void b(int chunk, bool zero_bubble) {
    const int mb = next_b_[chunk]++;
    if (zero_bubble) {
      out_.push_back(Op::i(stage_[chunk], mb));
      pending_w_.push_back(Op::w(stage_[chunk], mb));
    } else {
      out_.push_back(Op::b(stage_[chunk], mb));
    }
  }
  /// The oldest queued weight-gradient op, if any.
  void w() {
    if (pending_w_.empty()) return;
    out_.push_back(pending_w_.front());
    pending_w_.pop_front();
  }
  /// Forward of `f_chunk` overlapped with a full backward of `b_chunk`.
  void fb(int f_chunk, int b_chunk) {
    out_.push_back(
        Op::fb(stage_[f_chunk], next_f_[f_chunk]++, stage_[b_chunk], next_b_[b_chunk]++));
  }

 private:
  OpList& out_;
  int stage_[2];
  int next_f_[2] = {0, 0};
  int next_b_[2] = {0, 0};
  std::deque<Op> pending_w_;
};

}  // namespace

Schedule make_dualpipe_v(const ScheduleParams& params) {
  const int p = params.pp;
  const int m = params.microbatches;
  Schedule s = start_schedule("dualpipe-v", params);

  // The eight phases of DualPipeV, per rank r (counts as in the DualPipe repository).
  for (int r = 0; r < p; ++r) {
    s.ops[r].reserve(6 * m);
    RankWriter rw(s.ops[r], chunk_stage(Placement::kV, r, 0, p),
                  chunk_stage(Placement::kV, r, 1, p));
    const bool last = r == p - 1;
    // 1. chunk-0 forwards until chunk 1's first input can arrive.
    for (int k = 0; k < 2 * (p - r - 1); ++k) rw.f(0);
    // 2. forwards of both chunks.
    for (int k = 0; k < r + 1; ++k) rw.f(0), rw.f(1);
    // 3. chunk-1 backward split into I and W (zero bubble), then a chunk-1 forward.
    for (int k = 0; k < p - r - 1; ++k) rw.b(1, true), rw.w(), rw.f(1);
    // 4. the steady state: F0 overlapped with B1, then F1 overlapped with B0. The last
    //    rank runs its very first pair un-overlapped, which shortens the bubble.
    for (int k = 0; k < m - 2 * p + r + 1; ++k) {
      if (k == 0 && last) {
        rw.f(0);
        rw.b(1, false);
      } else {
        rw.fb(0, 1);
      }
      rw.fb(1, 0);
    }
    // 5. chunk-1 backward, then F1 overlapped with B0.
    for (int k = 0; k < p - r - 1; ++k) rw.b(1, false), rw.fb(1, 0);
    // 6. backwards of both chunks; from the middle on they are split so W can fill the
    //    cool-down.
    bool zb = false;
    const int step6 = r + 1;
    for (int k = 0; k < step6; ++k) {
      if (k == step6 / 2 && r % 2 == 1) zb = true;
      rw.b(1, zb);
      if (k == step6 / 2 && r % 2 == 0) zb = true;
      rw.b(0, zb);
    }
    // 7. a queued W, then a split chunk-0 backward.
    for (int k = 0; k < p - r - 1; ++k) rw.w(), rw.b(0, true);
    // 8. the remaining Ws.
    for (int k = 0; k < r + 1; ++k) rw.w();
  }
  return s;
}

}  // namespace bmpipe
