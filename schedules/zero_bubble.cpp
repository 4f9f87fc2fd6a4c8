// Zero-bubble schedules: ZB-H1, ZB-H2 and the automatic scheduler of Qi et al., "Zero
// Bubble Pipeline Parallelism" (ICLR 2024), and the V-shaped ZB-V of Qi et al., "Pipeline
// Parallelism with Controllable Memory" (2024). (V-Min and V-Half, built from a repeated
// block, are in v_min.cpp and v_half.cpp.)
//
// ZB-H1 and ZB-H2 are written out directly from the paper's figures (below).
//
// ZB-V and zb-auto come out of one greedy list scheduler, the way the Zero Bubble
// paper's automatic scheduling works: run a small simulation of the pipeline and,
// whenever a rank is free, pick
//   1. a ready I (input gradient), because the previous stage is waiting for it -- but
//      right after an I a ready F goes first, 1F1B's rhythm, so the next rank is fed;
//   2. else a ready F, if the rank's activation budget allows another micro-batch;
//   3. else the oldest pending W (weight gradient), which nobody waits for and so fills
//      the bubbles.
// The budget counts (stage, micro-batch) activations held from F until W. A few variants
// of the tie-breaks and budgets are planned, and the caller's evaluator (the engine, in
// the experiment layer) picks the fastest. ZB-V uses V placement and a budget of 2p
// half-size stages, i.e. 1F1B's memory; zb-auto uses one stage per rank and budgets up to
// the user's limit.
#include <algorithm>
#include <limits>
#include <optional>
#include <utility>

#include "schedules/huge_pages.hpp"
#include "schedules/registry.hpp"

namespace bmpipe {
namespace {

using Cost = std::int64_t;
constexpr Cost kNever = std::numeric_limits<Cost>::max();

struct Plan {
  int p = 1;
  int m = 1;
  Placement placement = Placement::kOnePerRank;  // kOnePerRank or kV
  std::vector<Cost> f, i, w;                     // per stage
  Cost transfer = 0;
  int budget = 1;  // activation budget per rank, in (stage, micro-batch) units
  /// When both an F and a W could run: true runs the W first (trades a little time for
  /// fewer live activations; one of the variants zb-auto tries).
  bool w_before_f = false;
  /// false: after an I, a ready F goes first (1F1B's rhythm); true: Is always first.
  bool i_always_first = false;
};

struct Planned {
  Schedule schedule;
  Cost makespan = 0;  ///< when the planner's own simulation finished
  /// The smallest budget that would have let every ready F run: any budget from here up
  /// plans exactly this schedule.
  int saturating_budget = 1;
  /// Whether some rank, not taking an I, could have run either an F or a W: if never,
  /// w_before_f changes nothing.
  bool chose_between_f_and_w = false;
};

/// Which rank decides next: the one with the earliest wake time, the lower rank among
/// equals (so the order of decisions is fixed). A tournament tree over the ranks: a change
/// walks one leaf-to-root path of log p steps without data-dependent branches, where a
/// binary heap's sift mispredicts at every level.
class NextRank {
 public:
  explicit NextRank(int ranks) {
    while (leaves_ < ranks) leaves_ *= 2;
    time_.assign(2 * static_cast<std::size_t>(leaves_), kNever);
    rank_.assign(2 * static_cast<std::size_t>(leaves_), 0);
    for (int r = 0; r < leaves_; ++r) rank_[leaves_ + r] = r;
    for (int i = leaves_ - 1; i >= 1; --i) pull(i);
  }
  Cost time() const { return time_[1]; }
  int rank() const { return rank_[1]; }
  Cost time_of(int rank) const { return time_[leaves_ + rank]; }
  void set(int rank, Cost t) {
    int i = leaves_ + rank;
    time_[i] = t;
    for (i /= 2; i >= 1; i /= 2) pull(i);
  }

 private:
  void pull(int i) {
    const int right = 2 * i + 1;
    const int win = time_[right] < time_[2 * i] ? right : 2 * i;  // left wins ties
    time_[i] = time_[win];
    rank_[i] = rank_[win];
  }
  int leaves_ = 1;
  std::vector<Cost> time_;
  std::vector<int> rank_;
};

/// Runs the greedy list scheduler as an event simulation: a rank decides when it becomes
/// free or, when idle, at the next time one of its inputs arrives, so each op costs
/// O(log p) instead of a scan over every rank.
Planned greedy(const char* name, const Plan& plan) {
  const int p = plan.p;
  const int m = plan.m;
  const int chunks = chunks_per_rank(plan.placement, 1);
  const int stages = p * chunks;
  Planned out{empty_schedule(name, plan.placement, p, chunks, m), 0};
  Schedule& s = out.schedule;
  // Micro-batch-major: the ops in flight at any time touch a window of a few p
  // micro-batches across all stages, which stays in cache; stage-major made every stage
  // its own stream through memory (BM_GenerateRanked_zb-v/64/8192 694 -> 669 ms).
  auto idx = [stages](int st, int mb) { return static_cast<std::size_t>(mb) * stages + st; };
  // When the output of F / I of (stage, mb) is usable on the rank that needs it next, and
  // when F ended on its own rank.
  HugeVector<Cost> f_out(static_cast<std::size_t>(stages) * m, kNever);
  HugeVector<Cost> i_out(static_cast<std::size_t>(stages) * m, kNever);
  HugeVector<Cost> f_end(static_cast<std::size_t>(stages) * m, kNever);
  std::vector<int> next_f(stages, 0), next_i(stages, 0);
  std::vector<Cost> free_at(p, 0);
  std::vector<int> live(p, 0);
  std::vector<char> last_was_i(p, 0);
  std::vector<std::vector<std::pair<int, int>>> pending_w(p);  // FIFO of (stage, mb)
  std::vector<std::size_t> w_head(p, 0);
  std::vector<int> left(p, 3 * m * chunks);
  for (int r = 0; r < p; ++r) s.ops[r].reserve(3 * m * chunks);
  auto crosses = [&](int from, int to) { return s.stage_rank[from] != s.stage_rank[to]; };

  auto f_ready = [&](int st) -> Cost {
    const int mb = next_f[st];
    if (mb >= m) return kNever;
    return st == 0 ? 0 : f_out[idx(st - 1, mb)];
  };
  auto i_ready = [&](int st) -> Cost {
    const int mb = next_i[st];
    if (mb >= m || f_end[idx(st, mb)] == kNever) return kNever;
    const Cost own = f_end[idx(st, mb)];
    if (st == stages - 1) return own;
    return std::max(own, i_out[idx(st + 1, mb)]);
  };

  // A busy rank wakes when its op ends. An idle one wakes at the earliest arrival of an
  // input it can use: one already sent when it went idle, or one sent later (input_at).
  NextRank next(p);
  for (int r = 0; r < p; ++r) next.set(r, 0);
  std::vector<char> idle(p, 0);
  auto input_at = [&](int rank, Cost at) {
    if (idle[rank] && at < next.time_of(rank)) next.set(rank, at);
  };
  auto earliest_input_after = [&](int rank, Cost now) {
    Cost t = kNever;
    for (int c = 0; c < chunks; ++c) {
      const int st = chunk_stage(plan.placement, rank, c, p);
      for (const Cost ready : {f_ready(st), i_ready(st)})
        if (ready > now) t = std::min(t, ready);
    }
    return t;
  };
  int remaining = p;
  while (next.time() != kNever) {
    const Cost now = next.time();
    const int r = next.rank();
    // Best ready I (oldest micro-batch, then later stage) and best ready F (later stage
    // first: it brings a micro-batch closer to its loss) on this rank. For F that is also
    // the oldest micro-batch: a V passes every rank's chunk 0 before any chunk 1, so when
    // chunk 1's F of micro-batch k is ready, chunk 0 has run k and its next is younger.
    int best_i = -1, best_f = -1;
    for (int c = chunks - 1; c >= 0; --c) {
      const int st = chunk_stage(plan.placement, r, c, p);
      if (i_ready(st) <= now && (best_i < 0 || next_i[st] < next_i[best_i])) best_i = st;
      if (best_f < 0 && f_ready(st) <= now) best_f = st;
    }
    // A forward that starts a micro-batch on this rank (chunk 0 of a V) leaves one slot
    // free for a chunk-1 forward, or a V placement could fill every rank with chunk-0
    // activations that nobody can finish.
    const bool starts_new = chunks == 2 && best_f >= 0 && best_f < p;
    const int needs = live[r] + (starts_new ? 1 : 0) + 1;  // budget this F would need
    const bool can_f = best_f >= 0 && needs <= plan.budget;
    if (best_f >= 0) out.saturating_budget = std::max(out.saturating_budget, needs);
    const bool has_w = w_head[r] < pending_w[r].size();
    Op op;
    Cost dur = 0;
    int to = -1;  // rank the op's output goes to, if any, and when it is usable there
    Cost at = 0;
    // 1F1B's rhythm: after an I, a ready forward goes first, so the next rank is fed.
    const bool take_i = best_i >= 0 && (plan.i_always_first || !(last_was_i[r] && can_f));
    if (!take_i && can_f && has_w) out.chose_between_f_and_w = true;
    if (take_i) {
      const int mb = next_i[best_i]++;
      op = Op::i(best_i, mb);
      dur = plan.i[best_i];
      pending_w[r].emplace_back(best_i, mb);
      if (best_i > 0) {
        const bool hop = crosses(best_i, best_i - 1);
        at = now + dur + (hop ? plan.transfer : 0);
        i_out[idx(best_i, mb)] = at;
        to = s.stage_rank[best_i - 1];
      }
    } else if (can_f && !(plan.w_before_f && has_w)) {
      const int mb = next_f[best_f]++;
      op = Op::f(best_f, mb);
      dur = plan.f[best_f];
      f_end[idx(best_f, mb)] = now + dur;
      if (best_f + 1 < stages) {
        const bool hop = crosses(best_f, best_f + 1);
        at = now + dur + (hop ? plan.transfer : 0);
        f_out[idx(best_f, mb)] = at;
        to = s.stage_rank[best_f + 1];
      }
      ++live[r];
    } else if (has_w) {
      const auto [st, mb] = pending_w[r][w_head[r]++];
      op = Op::w(st, mb);
      dur = plan.w[st];
      --live[r];  // the rank makes no decision before this W ends
    } else {
      idle[r] = 1;  // nothing ready: an arriving input will wake it
      next.set(r, earliest_input_after(r, now));
      continue;
    }
    s.ops[r].push_back(op);
    last_was_i[r] = op.kind == OpKind::I;
    free_at[r] = now + dur;
    idle[r] = 0;
    out.makespan = std::max(out.makespan, free_at[r]);
    if (--left[r] == 0) --remaining;
    next.set(r, left[r] == 0 ? kNever : free_at[r]);
    if (to >= 0) input_at(to, at);
  }
  if (remaining > 0)
    throw ScheduleError(std::string(name) + ": an activation budget of " +
                        std::to_string(plan.budget) +
                        " micro-batches per device is too small for this pipeline");
  return out;
}

Plan unit_plan(const ScheduleParams& params, Placement placement, int budget) {
  Plan plan;
  plan.p = params.pp;
  plan.m = params.microbatches;
  plan.placement = placement;
  const int stages = plan.p * chunks_per_rank(placement, 1);
  plan.f.assign(stages, 1);
  plan.i.assign(stages, 1);
  plan.w.assign(stages, 1);
  plan.budget = budget;
  return plan;
}

/// The unit plan with the caller's costs, when it gave any (zb-auto, and zb-v through the
/// config layer); they must cover every stage of the placement.
Plan costed_plan(const ScheduleParams& params, Placement placement, int budget, const char* name) {
  Plan plan = unit_plan(params, placement, budget);
  const ScheduleCosts& c = params.costs;
  if (c.forward.empty()) return plan;
  const std::size_t stages = plan.f.size();
  if (c.forward.size() != stages || c.backward_input.size() != stages ||
      c.backward_weight.size() != stages)
    throw ScheduleError(std::string(name) + ": needs F, I and W times for each of the " +
                        std::to_string(stages) + " stages");
  plan.f = c.forward;
  plan.i = c.backward_input;
  plan.w = c.backward_weight;
  plan.transfer = c.transfer;
  return plan;
}

/// Keeps the fastest candidate. With an evaluator, "fastest" is what it says (the engine,
/// from the experiment layer); without one, the planner's own makespan under the given
/// costs, and candidates that have none comparable are passed over. Ties keep the first,
/// unless the newcomer is offered as `wins_ties`.
class Fastest {
 public:
  explicit Fastest(const ScheduleEvaluator& evaluate) : evaluate_(evaluate) {}

  /// `planned`: the planner's makespan under the given costs, if it has one. Returns
  /// whether the candidate is now the one kept.
  bool offer(Schedule candidate, std::optional<Cost> planned, bool wins_ties = false) {
    std::optional<Cost> t = evaluate_ ? evaluate_(candidate) : planned;
    if (!t || (best_ && (wins_ties ? *t > best_time_ : *t >= best_time_))) return false;
    best_time_ = *t;
    best_ = std::move(candidate);
    return true;
  }

  Schedule take(const char* name) {
    if (!best_)
      throw ScheduleError(std::string(name) +
                          ": every candidate schedule deadlocked when simulated");
    best_->name = name;
    return std::move(*best_);
  }

 private:
  const ScheduleEvaluator& evaluate_;
  std::optional<Schedule> best_;
  Cost best_time_ = kNever;
};

}  // namespace

namespace {

/// ZB-H1 and ZB-H2 share one shape: rank r runs `warmup(r)` forwards, then repeats I,
/// the W of the micro-batch `delay(r)` steps earlier, and the next F; the remaining Ws
/// close the list.
template <typename Warmup, typename Delay>
Schedule handcrafted_zero_bubble(const ScheduleParams& params, const char* name, Warmup warmup,
                                 Delay delay) {
  Schedule s = start_schedule(name, params);
  const int p = params.pp;
  const int m = params.microbatches;
  for (int r = 0; r < p; ++r) {
    auto& list = s.ops[r];
    list.reserve(3 * m);
    int nf = 0;
    int nw = 0;
    for (; nf < std::min(warmup(r), m); ++nf) list.push_back(Op::f(r, nf));
    for (int k = 0; k < m; ++k) {
      list.push_back(Op::i(r, k));
      if (k >= delay(r)) list.push_back(Op::w(r, nw++));
      if (nf < m) list.push_back(Op::f(r, nf++));
    }
    while (nw < m) list.push_back(Op::w(r, nw++));
  }
  return s;
}

}  // namespace

Schedule make_zb_h1(const ScheduleParams& params) {
  // Qi et al. 2024, figure 3 (ZB-H1): 1F1B's order with B replaced by I, and rank r's W
  // running r steps after its I. Rank r starts with p-r forwards (1F1B's p-r-1 warm-up
  // plus the first steady one). Rank r holds at most (p-r) + r = p micro-batches, which
  // is 1F1B's peak (rank 0), and the delayed Ws fill the cool-down, leaving a bubble of
  // (p-1)(F+I-W) where 1F1B has (p-1)(F+I+W).
  const int p = params.pp;
  return handcrafted_zero_bubble(
      params, "zb-h1", [p](int r) { return p - r; }, [](int r) { return r; });
}

Schedule make_zb_h2(const ScheduleParams& params) {
  // Qi et al. 2024, figure 4 (ZB-H2): rank r runs forwards until its first I can arrive,
  // which with F = I = W is 2(p-r)-1 of them, and each W runs 2r steps after its I, so
  // every rank holds up to 2p-1 micro-batches. The deferred Ws let the input gradients
  // race back to rank 0, which then works from its first op to its last without a gap;
  // the bubble per device (from its first op to its last) is (p-1)(F+I-2W), 0 at
  // F = I = W.
  const int p = params.pp;
  return handcrafted_zero_bubble(
      params, "zb-h2", [p](int r) { return 2 * (p - r) - 1; }, [](int r) { return 2 * r; });
}

/// Above kPrefixFromPerRank x p micro-batches, zb-v ranks its candidates with the evaluator
/// on a prefix of kRankPrefixPerRank x p micro-batches and draws only the winner at full
/// length: simulating all 16 candidates of then whole took 122 s and 2.4 GB on the pp-64
/// example at 65 536 micro-batches (issue 20, item 7), where 1F1B takes 2.1 s. The
/// greedy's rules are the same at every length, and past a few p micro-batches every rank
/// is in its steady state, so the prefix shows each variant's rhythm. At or below the
/// threshold (every example and test of today) the ranking is the whole-schedule one,
/// unchanged. (With the threshold at 8p, GPT-3 175B's example, m = 12p, got a schedule
/// 0.37 % slower: 23428.8 ms against 23343.0 ms; hence 16p.)
constexpr int kRankPrefixPerRank = 8;
constexpr int kPrefixFromPerRank = 16;

Schedule make_zb_v(const ScheduleParams& params) {
  check_params(*find_schedule("zb-v"), params);
  // 1F1B holds p micro-batches of a whole device's layers = 2p of half-device stages.
  const int budget = 2 * params.pp;
  const Plan real = costed_plan(params, Placement::kV, budget, "zb-v");
  const bool costed = !params.costs.forward.empty();
  // Four tie-break variants: W before F or not, Is always first or not. (A third rule
  // once doubled them to eight: a chunk-1 forward always first, against the oldest
  // micro-batch first. The two never differ, as the greedy's choice of F says, so every
  // other candidate was a copy of the one before, drawn and simulated for nothing:
  // BM_GenerateRanked_zb-v/16/256 75 ms -> 38 ms, the same schedule chosen.)
  constexpr int kVariants = 4;
  auto draw = [&](bool use_real, int variant, int m) {
    Plan plan = use_real ? real : unit_plan(params, Placement::kV, budget);
    plan.m = m;
    plan.w_before_f = variant & 1;
    plan.i_always_first = variant & 2;
    return greedy("zb-v", plan);
  };
  const int prefix = kRankPrefixPerRank * params.pp;
  if (params.evaluate && params.microbatches > kPrefixFromPerRank * params.pp) {
    std::optional<Cost> best;
    int best_key = -1;
    for (bool use_real : {false, true}) {
      if (use_real && !costed) break;
      for (int variant = 0; variant < kVariants; ++variant) {
        const std::optional<Cost> t = params.evaluate(draw(use_real, variant, prefix).schedule);
        if (t && (!best || *t < *best)) best = t, best_key = kVariants * use_real + variant;
      }
    }
    if (best_key < 0)
      throw ScheduleError("zb-v: every candidate schedule deadlocked when simulated");
    Schedule s = draw(best_key >= kVariants, best_key % kVariants, params.microbatches).schedule;
    s.name = "zb-v";
    return s;
  }
  // Each variant planned with unit costs and (when given) with the real ones: a plan drawn
  // with unit costs is sometimes the faster under the real ones.
  Fastest fastest(params.evaluate);
  for (bool use_real : {false, true}) {
    if (use_real && !costed) break;
    for (int variant = 0; variant < kVariants; ++variant) {
      Planned candidate = draw(use_real, variant, params.microbatches);
      const bool comparable = use_real || !costed;
      fastest.offer(std::move(candidate.schedule),
                    comparable ? std::optional<Cost>(candidate.makespan) : std::nullopt);
    }
  }
  return fastest.take("zb-v");
}

namespace {

/// Which candidate zb-auto kept: the greedy at `budget` (W first or not), or ZB-H1 / ZB-H2.
struct ZbAutoChoice {
  int handcrafted = 0;  ///< 0: the greedy; 1: ZB-H1; 2: ZB-H2
  int budget = 0;
  bool w_first = false;
};

Schedule zb_auto(const ScheduleParams& params, ZbAutoChoice* choice);

}  // namespace

Schedule make_zb_auto(const ScheduleParams& params) {
  check_params(*find_schedule("zb-auto"), params);
  const int p = params.pp;
  const int m = params.microbatches;
  // As zb-v: past 16p micro-batches, choose on a prefix of 8p with the evaluator and draw
  // only the choice at full length (issue 20, item 7).
  if (params.evaluate && m > kPrefixFromPerRank * p) {
    ScheduleParams prefix = params;
    prefix.microbatches = kRankPrefixPerRank * p;
    ZbAutoChoice choice;
    zb_auto(prefix, &choice);
    Schedule s;
    if (choice.handcrafted == 1)
      s = make_zb_h1(ScheduleParams{p, m, 1, {}, {}});
    else if (choice.handcrafted == 2)
      s = make_zb_h2(ScheduleParams{p, m, 1, {}, {}});
    else {
      Plan plan = costed_plan(params, Placement::kOnePerRank, 0, "zb-auto");
      plan.budget = choice.budget;
      plan.w_before_f = choice.w_first;
      s = greedy("zb-auto", plan).schedule;
    }
    s.name = "zb-auto";
    return s;
  }
  return zb_auto(params, nullptr);
}

namespace {

Schedule zb_auto(const ScheduleParams& params, ZbAutoChoice* choice) {
  const int p = params.pp;
  const int m = params.microbatches;
  const Plan plan = costed_plan(params, Placement::kOnePerRank, 0, "zb-auto");
  const int limit = params.costs.activation_limit.value_or(2 * p);
  auto plan_with = [&](int budget, bool w_first) {
    Plan variant = plan;
    variant.budget = budget;
    variant.w_before_f = w_first;
    return greedy("zb-auto", variant);
  };
  // The budget is the warm-up depth of rank 0. More than m changes nothing, and neither
  // does more than the first plan ever needed: every budget from its saturating one up
  // plans the same schedule.
  Planned widest = plan_with(std::min(limit, m), false);
  const int top = std::min(std::min(limit, m), widest.saturating_budget);
  // Time falls with the budget nearly everywhere (more warm-up, Ws deferred into the
  // bubbles), with ripples of a percent or two near the top, so the budgets tried are
  // dense there and thin out below: top, top-1, top-3, top-7, ..., plus p and 2p-1 (the
  // memory of ZB-H1 and ZB-H2, where the shape changes), then a bisection below the best.
  // O(log p) candidates keep zb-auto's time near-linear in the number of ops. Against
  // trying every budget (engine-ranked): the same choice on every example, as fast on
  // 1397 of 1400 random pipelines (p <= 24, random F/I/W and link latency), 1.2% slower
  // at worst.
  std::vector<int> budgets;
  for (int step = 1; top - step + 1 >= 1; step *= 2) budgets.push_back(top - step + 1);
  for (int b : {p, 2 * p - 1})
    if (b <= top) budgets.push_back(b);
  std::sort(budgets.begin(), budgets.end());
  budgets.erase(std::unique(budgets.begin(), budgets.end()), budgets.end());
  // Candidates in rising budget, F-first before W-first, so that equal times keep the
  // smaller budget (less memory).
  Fastest fastest(params.evaluate);
  int kept = 0;  // budget of the candidate kept so far
  bool kept_w_first = false;
  auto offer = [&](int budget, bool w_first, Planned candidate, bool wins_ties) {
    if (!fastest.offer(std::move(candidate.schedule), candidate.makespan, wins_ties)) return;
    kept = budget;
    kept_w_first = w_first;
  };
  for (int budget : budgets) {
    Planned f_first = budget == top ? std::move(widest) : plan_with(budget, false);
    const bool w_matters = f_first.chose_between_f_and_w;
    offer(budget, false, std::move(f_first), false);
    if (w_matters) offer(budget, true, plan_with(budget, true), false);  // else the same plan
  }
  // Between the kept budget and the next one tried below it, bisect for a smaller budget
  // that is as fast: the same time for less memory, or now and then a faster one.
  const auto below = std::lower_bound(budgets.begin(), budgets.end(), kept);
  int lo = below == budgets.begin() ? 0 : *std::prev(below);
  for (int hi = kept; hi - lo > 1;) {
    const int mid = lo + (hi - lo) / 2;
    const int before = kept;
    offer(mid, kept_w_first, plan_with(mid, kept_w_first), true);
    if (kept == before) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  // Without an evaluator there is nothing to time the handcrafted ones with.
  int handcrafted = 0;
  if (params.evaluate) {
    if (limit >= p && fastest.offer(make_zb_h1(ScheduleParams{p, m, 1, {}, {}}), std::nullopt))
      handcrafted = 1;
    if (limit >= 2 * p - 1 &&
        fastest.offer(make_zb_h2(ScheduleParams{p, m, 1, {}, {}}), std::nullopt))
      handcrafted = 2;
  }
  if (choice) *choice = ZbAutoChoice{handcrafted, kept, kept_w_first};
  return fastest.take("zb-auto");
}

}  // namespace

}  // namespace bmpipe
