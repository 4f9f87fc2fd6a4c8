#include "sim/simulate.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "schedules/validate.hpp"
#include "sim/event_queue.hpp"

namespace bmpipe {
namespace {

// Two kinds of event. kOpDone: the op running on `rank` ends. kWake: an input `rank` may
// be waiting for arrives; the rank re-checks its next op. Arrivals are not events of their
// own: a transfer writes its arrival time into the consumer's slot when it is placed, and
// a wake-up is queued only if the consumer could be idle then. Most transfers land while
// their consumer is busy, so this halves the heap traffic. At equal times completions go
// first; either order gives the same timings, fixing it keeps observer calls reproducible.
enum EventKind : std::uint32_t { kOpDone = 0, kWake = 1 };

struct Payload {
  std::uint32_t rank;
  std::uint32_t kind;
};

struct RankState {
  std::size_t next = 0;  // index of the op running or about to run
  bool busy = false;
  Time start = 0;
  Time device_free = 0;
  Time inputs_ready = 0;
  int binding_stage = -1;
  int binding_transfer = -1;
  Time busy_time = 0;
  Time first_start = kNever;
  Time last_end = 0;
  std::int64_t activation = 0;
  std::int64_t activation_peak = 0;
  int inflight = 0;
  int inflight_peak = 0;
  // The latest wake-up queued for this rank and not yet taken, to avoid duplicates. It is
  // cleared when that wake-up is taken: a later input arriving at the same instant (0 ns
  // ops and transfers) must queue its own, or the rank would sleep through it.
  Time wake_at = kNever;
};

// A precomputed route for one stage boundary in one direction.
struct Hop {
  bool remote = false;
  Route route;
  std::int64_t bytes = 0;
  Time serialization = 0;
};

class Engine {
 public:
  Engine(const SimInput& in, const Schedule& sch, Observer* obs)
      : in_(in), sch_(sch), obs_(obs), S_(sch.num_stages), M_(sch.num_microbatches) {}

  SimResult run();

 private:
  std::size_t slot(int stage, int mb) const { return static_cast<std::size_t>(stage) * M_ + mb; }
  std::string check_input();
  void prepare();
  void try_start(int rank);
  void finish(int rank);
  void complete_forward(int rank, int stage, int mb);
  void complete_backward_input(int rank, int stage, int mb, bool full);
  void send(int from_stage, int to_stage, int mb, bool gradient);
  void allocate(int rank, std::int64_t bytes, int live_delta);
  Time duration(const Op& op) const;
  std::string unmet(const Op& op) const;
  SimResult collect();

  const SimInput& in_;
  const Schedule& sch_;
  Observer* obs_;
  const int S_;
  const int M_;
  Time now_ = 0;
  EventQueue<Payload> queue_;
  std::vector<RankState> ranks_;
  // Per (stage, micro-batch): when each input is (or will be) present here, kNever while
  // its producer has not run, and which transfer carries it (-1 if produced on this rank).
  std::vector<Time> fwd_ready_, grad_ready_, f_done_, i_done_;
  std::vector<std::int32_t> fwd_src_, grad_src_;
  std::vector<Hop> fwd_hop_;   // [s]: stage s -> s+1
  std::vector<Hop> grad_hop_;  // [s]: stage s -> s-1
  std::vector<Time> link_free_;
  std::int32_t transfers_ = 0;
  std::uint64_t executed_ = 0;
};

std::string Engine::check_input() {
  if (auto issue = validate_schedule(sch_)) {
    std::string where;
    if (issue->rank >= 0) where = "device " + std::to_string(issue->rank);
    if (issue->position >= 0) where += ", op " + std::to_string(issue->position);
    return "invalid schedule" + (where.empty() ? "" : " (" + where + ")") + ": " + issue->message;
  }
  const std::size_t p = static_cast<std::size_t>(sch_.num_ranks);
  if (in_.stages.size() != static_cast<std::size_t>(S_))
    return "costs are given for " + std::to_string(in_.stages.size()) +
           " stages but the schedule has " + std::to_string(S_);
  if (in_.rank_device.size() != p)
    return "rank_device has " + std::to_string(in_.rank_device.size()) + " entries for " +
           std::to_string(p) + " ranks";
  auto sized = [&](std::size_t n) { return n == 0 || n == p; };
  if (!sized(in_.static_bytes.size()) || !sized(in_.capacity_bytes.size()) ||
      !sized(in_.tail_time.size()))
    return "static_bytes, capacity_bytes and tail_time need one entry per rank (or none)";
  for (const StageCost& c : in_.stages)
    if (c.forward < 0 || c.backward_input < 0 || c.backward_weight < 0 || c.recompute < 0 ||
        c.activation_bytes < 0 || c.output_bytes < 0)
      return "stage costs must not be negative";
  if (!(in_.fb_overlap_factor > 0.0)) return "fb_overlap_factor must be positive";
  if (static_cast<std::int64_t>(S_) * M_ >= (std::int64_t{1} << 30))
    return "stages x micro-batches must stay below 2^30";
  for (std::size_t r = 0; r < p; ++r) {
    const int d = in_.rank_device[r];
    const int limit = in_.topology ? in_.topology->num_devices() : static_cast<int>(p);
    if (d < 0 || d >= limit)
      return "rank " + std::to_string(r) + " is mapped to device " + std::to_string(d) +
             ", which does not exist";
  }
  return {};
}

void Engine::prepare() {
  const std::size_t n = static_cast<std::size_t>(S_) * M_;
  fwd_ready_.assign(n, kNever);
  grad_ready_.assign(n, kNever);
  f_done_.assign(n, kNever);
  i_done_.assign(n, kNever);
  fwd_src_.assign(n, -1);
  grad_src_.assign(n, -1);
  for (int mb = 0; mb < M_; ++mb) fwd_ready_[slot(0, mb)] = 0;  // the batch is already here
  ranks_.assign(sch_.num_ranks, RankState{});
  if (in_.topology) link_free_.assign(in_.topology->links().size(), 0);

  fwd_hop_.assign(S_, Hop{});
  grad_hop_.assign(S_, Hop{});
  auto make_hop = [&](int from, int to, std::int64_t bytes) {
    Hop h;
    const int a = in_.rank_device[sch_.stage_rank[from]];
    const int b = in_.rank_device[sch_.stage_rank[to]];
    h.bytes = bytes;
    if (sch_.stage_rank[from] == sch_.stage_rank[to]) return h;
    h.remote = true;
    if (a != b) {
      if (!in_.topology) throw std::invalid_argument("stages on different devices need a topology");
      h.route = in_.topology->route(a, b, bytes);
      h.serialization = h.route.serialization(bytes);
    }
    return h;
  };
  for (int s = 0; s + 1 < S_; ++s) fwd_hop_[s] = make_hop(s, s + 1, in_.stages[s].output_bytes);
  for (int s = 1; s < S_; ++s) grad_hop_[s] = make_hop(s, s - 1, in_.stages[s - 1].output_bytes);
  queue_.reserve(static_cast<std::size_t>(sch_.num_ranks) * 4);
}

Time Engine::duration(const Op& op) const {
  const StageCost& c = in_.stages[op.stage];
  switch (op.kind) {
    case OpKind::F:
      return c.forward;
    case OpKind::B:
      return c.backward_full() + c.recompute;
    case OpKind::I:
      return c.backward_input + c.recompute;
    case OpKind::W:
      return c.backward_weight;
    case OpKind::FB: {
      if (in_.fb_pair_time) return *in_.fb_pair_time;
      const StageCost& b = in_.stages[op.stage2];
      const double pair = static_cast<double>(c.forward + b.backward_full() + b.recompute);
      return static_cast<Time>(std::llround(pair * in_.fb_overlap_factor));
    }
  }
  return 0;
}

void Engine::allocate(int rank, std::int64_t bytes, int live_delta) {
  RankState& st = ranks_[rank];
  st.activation += bytes;
  st.inflight += live_delta;
  st.activation_peak = std::max(st.activation_peak, st.activation);
  st.inflight_peak = std::max(st.inflight_peak, st.inflight);
  if (obs_ && bytes != 0) obs_->on_memory(rank, now_, st.activation);
}

void Engine::try_start(int rank) {
  RankState& st = ranks_[rank];
  const auto& list = sch_.ops[rank];
  if (st.busy || st.next == list.size()) return;
  const Op& op = list[st.next];

  Time ready = 0;
  int stage = -1, transfer = -1;
  // Each dependency: false if its producer has not run yet; otherwise remember the latest
  // one, which may still be in flight (a time after now).
  auto need = [&](Time t, int producer, int via) {
    if (t == kNever) return false;
    if (t >= ready) ready = t, stage = producer, transfer = via;
    return true;
  };
  auto forward_inputs = [&](int s, int mb) {
    return s == 0 || need(fwd_ready_[slot(s, mb)], s - 1, fwd_src_[slot(s, mb)]);
  };
  auto backward_inputs = [&](int s, int mb) {
    const std::size_t k = slot(s, mb);
    if (!need(f_done_[k], s, -1)) return false;
    return s == S_ - 1 || need(grad_ready_[k], s + 1, grad_src_[k]);
  };
  bool ok = false;
  switch (op.kind) {
    case OpKind::F:
      ok = forward_inputs(op.stage, op.microbatch);
      break;
    case OpKind::B:
    case OpKind::I:
      ok = backward_inputs(op.stage, op.microbatch);
      break;
    case OpKind::W:
      ok = need(i_done_[slot(op.stage, op.microbatch)], op.stage, -1);
      break;
    case OpKind::FB:
      ok = forward_inputs(op.stage, op.microbatch) && backward_inputs(op.stage2, op.microbatch2);
      break;
  }
  if (!ok) return;
  if (ready > now_) {  // every input is on its way; look again when the last one lands
    if (st.wake_at != ready) {
      st.wake_at = ready;
      queue_.push(ready, kWake, Payload{static_cast<std::uint32_t>(rank), kWake});
    }
    return;
  }

  st.busy = true;
  st.start = now_;
  st.inputs_ready = ready;
  st.binding_stage = stage;
  st.binding_transfer = transfer;
  if (st.first_start == kNever) st.first_start = now_;
  if (op.kind == OpKind::F || op.kind == OpKind::FB)
    allocate(rank, in_.stages[op.stage].activation_bytes, 1);
  queue_.push(now_ + duration(op), kOpDone, Payload{static_cast<std::uint32_t>(rank), kOpDone});
}

void Engine::send(int from_stage, int to_stage, int mb, bool gradient) {
  const std::size_t k = slot(to_stage, mb);
  const Hop& hop = gradient ? grad_hop_[from_stage] : fwd_hop_[from_stage];
  auto& ready = gradient ? grad_ready_ : fwd_ready_;
  auto& src = gradient ? grad_src_ : fwd_src_;
  if (!hop.remote) {  // same rank: the data is simply there
    ready[k] = now_;
    src[k] = -1;
    return;
  }
  Time start = now_;
  for (int link : hop.route.links) start = std::max(start, link_free_[link]);
  for (int link : hop.route.links) link_free_[link] = start + hop.serialization;
  const Time arrive = start + hop.serialization + hop.route.latency;
  const std::int32_t id = transfers_++;
  const int dst_rank = sch_.stage_rank[to_stage];
  ready[k] = arrive;
  src[k] = id;
  // A busy consumer re-checks when its op ends; an idle one must be woken.
  RankState& dst = ranks_[dst_rank];
  if (!dst.busy && dst.wake_at != arrive) {
    dst.wake_at = arrive;
    queue_.push(arrive, kWake, Payload{static_cast<std::uint32_t>(dst_rank), kWake});
  }
  if (obs_) {
    TransferRecord t;
    t.id = id;
    t.src_rank = sch_.stage_rank[from_stage];
    t.dst_rank = dst_rank;
    t.src_stage = from_stage;
    t.dst_stage = to_stage;
    t.microbatch = mb;
    t.gradient = gradient;
    t.bytes = hop.bytes;
    t.requested = now_;
    t.start = start;
    t.end = arrive;
    obs_->on_transfer(t);
  }
}

void Engine::complete_forward(int rank, int stage, int mb) {
  (void)rank;
  const std::size_t k = slot(stage, mb);
  f_done_[k] = now_;
  if (stage + 1 < S_) {
    send(stage, stage + 1, mb, false);
  } else {  // the loss is computed where the last stage lives
    grad_ready_[k] = now_;
    grad_src_[k] = -1;
  }
}

void Engine::complete_backward_input(int rank, int stage, int mb, bool full) {
  const StageCost& c = in_.stages[stage];
  if (full) {
    allocate(rank, -c.activation_bytes, -1);
  } else {
    i_done_[slot(stage, mb)] = now_;
    const std::int64_t retained =
        std::min(c.weight_grad_retained_bytes.value_or(c.activation_bytes), c.activation_bytes);
    allocate(rank, -(c.activation_bytes - retained), 0);
  }
  if (stage > 0) send(stage, stage - 1, mb, true);
}

void Engine::finish(int rank) {
  RankState& st = ranks_[rank];
  const Op op = sch_.ops[rank][st.next];
  st.busy = false;
  st.busy_time += now_ - st.start;
  st.last_end = now_;
  ++executed_;
  switch (op.kind) {
    case OpKind::F:
      complete_forward(rank, op.stage, op.microbatch);
      break;
    case OpKind::B:
      complete_backward_input(rank, op.stage, op.microbatch, true);
      break;
    case OpKind::I:
      complete_backward_input(rank, op.stage, op.microbatch, false);
      break;
    case OpKind::W: {
      const StageCost& c = in_.stages[op.stage];
      const std::int64_t retained =
          std::min(c.weight_grad_retained_bytes.value_or(c.activation_bytes), c.activation_bytes);
      allocate(rank, -retained, -1);
      break;
    }
    case OpKind::FB:
      complete_forward(rank, op.stage, op.microbatch);
      complete_backward_input(rank, op.stage2, op.microbatch2, true);
      break;
  }
  if (obs_) {
    OpRecord rec;
    rec.rank = rank;
    rec.op = op;
    rec.start = st.start;
    rec.end = now_;
    rec.device_free = st.device_free;
    rec.inputs_ready = st.inputs_ready;
    rec.binding_stage = st.binding_stage;
    rec.binding_transfer = st.binding_transfer;
    obs_->on_op(rec);
  }
  st.device_free = now_;
  ++st.next;
}

std::string Engine::unmet(const Op& op) const {
  std::vector<std::string> parts;
  auto rank_of = [&](int s) { return std::to_string(sch_.stage_rank[s]); };
  auto forward_inputs = [&](int s, int mb) {
    if (s > 0 && fwd_ready_[slot(s, mb)] == kNever)
      parts.push_back("output of " + to_string(Op::f(s - 1, mb)) + " from device " +
                      rank_of(s - 1));
  };
  auto backward_inputs = [&](int s, int mb) {
    if (f_done_[slot(s, mb)] == kNever)
      parts.push_back(to_string(Op::f(s, mb)) + " on this device");
    if (s + 1 < S_ && grad_ready_[slot(s, mb)] == kNever)
      parts.push_back("gradient of backward " + std::to_string(mb) + "@s" + std::to_string(s + 1) +
                      " from device " + rank_of(s + 1));
  };
  switch (op.kind) {
    case OpKind::F:
      forward_inputs(op.stage, op.microbatch);
      break;
    case OpKind::B:
    case OpKind::I:
      backward_inputs(op.stage, op.microbatch);
      break;
    case OpKind::W:
      parts.push_back(to_string(Op::i(op.stage, op.microbatch)) + " on this device");
      break;
    case OpKind::FB:
      forward_inputs(op.stage, op.microbatch);
      backward_inputs(op.stage2, op.microbatch2);
      break;
  }
  std::string text;
  for (const auto& p : parts) text += (text.empty() ? "" : " and ") + p;
  return text;
}

SimResult Engine::collect() {
  SimResult r;
  r.ops_executed = executed_;
  const int p = sch_.num_ranks;
  for (int rank = 0; rank < p; ++rank) {
    const RankState& st = ranks_[rank];
    if (st.next < sch_.ops[rank].size()) {
      const Op& op = sch_.ops[rank][st.next];
      r.blocked.push_back(BlockedOp{rank, static_cast<int>(st.next), op, unmet(op)});
    }
  }
  if (!r.blocked.empty()) {
    r.ok = false;
    r.error = "deadlock: no event is left but " + std::to_string(r.blocked.size()) +
              " device(s) still have ops to run;";
    for (const auto& b : r.blocked)
      r.error += " device " + std::to_string(b.rank) + " is blocked at op " +
                 std::to_string(b.position) + " (" + to_string(b.op) + ") waiting for " +
                 b.waiting_for + ";";
    r.error.pop_back();
    return r;
  }
  r.ok = true;
  Time first = kNever, last = 0, iteration_end = 0;
  for (int rank = 0; rank < p; ++rank) {
    const RankState& st = ranks_[rank];
    first = std::min(first, st.first_start);
    last = std::max(last, st.last_end);
  }
  if (first == kNever) first = 0;
  std::int64_t busy_total = 0;
  for (int rank = 0; rank < p; ++rank) {
    const RankState& st = ranks_[rank];
    DeviceResult d;
    d.rank = rank;
    d.device = in_.rank_device[rank];
    d.busy = st.busy_time;
    d.first_start = st.first_start == kNever ? first : st.first_start;
    d.last_end = st.last_end;
    d.static_bytes = in_.static_bytes.empty() ? 0 : in_.static_bytes[rank];
    d.capacity_bytes = in_.capacity_bytes.empty() ? 0 : in_.capacity_bytes[rank];
    d.peak_activation_bytes = st.activation_peak;
    d.peak_bytes = d.static_bytes + st.activation_peak;
    d.peak_inflight = st.inflight_peak;
    d.fits = in_.capacity_bytes.empty() || d.peak_bytes <= d.capacity_bytes;
    r.fits = r.fits && d.fits;
    busy_total += st.busy_time;
    const Time tail = in_.tail_time.empty() ? 0 : in_.tail_time[rank];
    iteration_end = std::max(iteration_end, std::max(st.last_end, first) + tail);
    r.devices.push_back(d);
  }
  r.pipeline_time = last - first;
  r.iteration_time = std::max(iteration_end, last) - first;
  r.bubble_ratio = r.pipeline_time > 0 ? 1.0 - static_cast<double>(busy_total) /
                                                   (static_cast<double>(p) * r.pipeline_time)
                                       : 0.0;
  return r;
}

SimResult Engine::run() {
  if (std::string problem = check_input(); !problem.empty()) {
    SimResult r;
    r.error = problem;
    return r;
  }
  try {
    prepare();
  } catch (const std::exception& e) {
    SimResult r;
    r.error = e.what();
    return r;
  }
  for (int rank = 0; rank < sch_.num_ranks; ++rank) try_start(rank);
  while (!queue_.empty()) {
    const auto e = queue_.pop();
    now_ = e.time;
    const int rank = static_cast<int>(e.payload.rank);
    if (e.payload.kind == kOpDone) {
      finish(rank);
    } else if (ranks_[rank].wake_at == now_) {
      ranks_[rank].wake_at = kNever;
    }
    try_start(rank);
  }
  return collect();
}

}  // namespace

SimResult simulate(const SimInput& input, const Schedule& schedule, Observer* observer) {
  Engine engine(input, schedule, observer);
  return engine.run();
}

}  // namespace bmpipe
