#include "sim/simulate.hpp"

#include <algorithm>
#include <cmath>
#include <deque>
#include <set>
#include <stdexcept>
#include <utility>

#include "sim/event_queue.hpp"
#include "sim/fb_pair.hpp"

namespace bmpipe {
namespace {

constexpr std::uint32_t kNoSlot = CompiledSchedule::kNoSlot;
constexpr std::uint32_t kLocal = CompiledSchedule::kLocal;
constexpr std::uint32_t kNoOp = 0xffffffffu;  // past every flat index (they stay below 2^32)

// ---- per-run tables: what the input makes of the compiled schedule ------------------------

// One row per CompiledOp::cost. Releases are never negative (retained bytes are clamped to
// the activation and checked), so a rank's peaks can only move when an op starts.
struct CostRow {
  Time duration = 0;
  std::int64_t alloc = 0;     // activation bytes taken when the op starts (F, FB)
  std::int64_t release = 0;   // bytes given back when it ends (B, I, W, FB)
  std::int32_t live_in = 0;   // +1: a (stage, micro-batch) becomes alive at the start
  std::int32_t live_out = 0;  // -1: one dies at the end
};

// One stage boundary in one direction: hop h < S is stage h -> h+1, hop S+s is s -> s-1.
struct HopRun {
  Time serialization = 0;
  Time latency = 0;
  std::int64_t bytes = 0;
  std::uint32_t link_begin = 0;  // Tables::links[link_begin, link_begin + link_count)
  std::uint32_t link_count = 0;
  int from_stage = 0;
  int to_stage = 0;
};

struct Tables {
  std::vector<CostRow> costs;
  std::vector<HopRun> hops;
  std::vector<std::uint32_t> links;  // compact ids 0..num_links-1
  std::size_t num_links = 0;
  // Some link carries transfers from more than one rank, so the order of same-time requests
  // on it (the event order) decides who goes first.
  bool shared_links = false;
  // Some stage offloads activations (StageCost::offload_bytes): the ordered engine runs.
  bool offload = false;
  std::vector<std::int64_t> offload_bytes;  // per stage (StageCost)
  std::vector<Time> offload_time;
  // BPipe (SimInput::bpipe) evicts some micro-batch: the ordered engine runs. Per (stage,
  // micro-batch), whether it goes to the partner's device (plan_bpipe), and per stage the
  // copy to the partner (hop s) and back (hop S + s).
  bool bpipe = false;
  std::vector<char> evict;
  std::vector<HopRun> bpipe_hops;
};

// What either engine leaves behind for each rank.
struct RankTotals {
  std::uint32_t next = 0;  // flat index of the first op not run
  Time busy = 0;
  Time first_start = kNever;
  Time last_end = 0;
  std::int64_t activation = 0;  // live now
  std::int64_t activation_peak = 0;
  int inflight = 0;
  int inflight_peak = 0;
  std::uint32_t grad_next = 0;  // CompiledSchedule::grad_done index of the next to see
  Time reload_wait = 0;         // DeviceResult::reload_wait
  std::int64_t host_peak = 0;   // DeviceResult::peak_host_bytes
};

bool add(std::int64_t a, std::int64_t b, std::int64_t& out) {
  return !__builtin_add_overflow(a, b, &out);
}
bool mul_add(std::int64_t& acc, std::int64_t count, std::int64_t value) {
  std::int64_t product;
  return !__builtin_mul_overflow(count, value, &product) && add(acc, product, acc);
}

std::string check_input(const SimInput& in, const CompiledSchedule& cs) {
  if (!cs.ok()) return cs.error();
  const std::size_t p = static_cast<std::size_t>(cs.num_ranks());
  const int S = cs.num_stages();
  if (in.stages.size() != static_cast<std::size_t>(S))
    return "costs are given for " + std::to_string(in.stages.size()) +
           " stages but the schedule has " + std::to_string(S);
  if (in.rank_device.size() != p)
    return "rank_device has " + std::to_string(in.rank_device.size()) + " entries for " +
           std::to_string(p) + " ranks";
  auto sized = [&](std::size_t n) { return n == 0 || n == p; };
  if (!sized(in.static_bytes.size()) || !sized(in.capacity_bytes.size()) ||
      !sized(in.tail_time.size()) || !sized(in.outside_allocator_bytes.size()) ||
      !sized(in.host_capacity_bytes.size()))
    return "static_bytes, capacity_bytes, host_capacity_bytes, outside_allocator_bytes and "
           "tail_time need one entry per rank (or none)";
  for (std::size_t r = 0; r < in.outside_allocator_bytes.size(); ++r)
    if (in.outside_allocator_bytes[r] < 0 ||
        in.outside_allocator_bytes[r] > (in.static_bytes.empty() ? 0 : in.static_bytes[r]))
      return "outside_allocator_bytes must be part of the rank's static_bytes";
  if (!(in.allocator_overhead >= 0.0 && in.allocator_overhead <= 10.0))
    return "allocator_overhead must be in [0, 10]";
  for (const StageCost& c : in.stages)
    if (c.forward < 0 || c.backward_input < 0 || c.backward_weight < 0 || c.recompute < 0 ||
        c.activation_bytes < 0 || c.output_bytes < 0 || c.offload_bytes < 0 || c.offload_time < 0 ||
        (c.weight_grad_retained_bytes && *c.weight_grad_retained_bytes < 0))
      return "stage costs must not be negative";
  for (std::size_t s = 0; s < in.stages.size(); ++s)
    if (in.stages[s].offload_bytes > in.stages[s].activation_bytes)
      return "stage " + std::to_string(s) + " offloads " +
             std::to_string(in.stages[s].offload_bytes) + " bytes of its " +
             std::to_string(in.stages[s].activation_bytes) + " activation bytes";
  if (in.offload_lead < 0) return "offload_lead must not be negative";
  if (in.bpipe) {
    const Schedule& sch = cs.schedule();
    if (S != cs.num_ranks() || !cs.fb_pairs().empty())
      return "bpipe needs one stage per rank and no paired F&B ops (1F1B), but schedule " +
             sch.name + " has " + std::to_string(S) + " stages on " +
             std::to_string(cs.num_ranks()) + " ranks";
    for (const auto& list : sch.ops)
      for (const Op& op : list)
        if (op.kind != OpKind::F && op.kind != OpKind::B)
          return "bpipe needs a schedule of F and B ops (1F1B), but " + sch.name + " has " +
                 to_string(op);
    for (const StageCost& c : in.stages)
      if (c.offload_bytes > 0) return "bpipe and activation offload cannot be combined";
  }
  if (!(in.fb_overlap_factor > 0.0)) return "fb_overlap_factor must be positive";
  if (in.fb_pair_time && *in.fb_pair_time < 0) return "fb_pair_time must not be negative";
  if (!in.stage_parts.empty() && in.stage_parts.size() != static_cast<std::size_t>(S))
    return "stage_parts has " + std::to_string(in.stage_parts.size()) + " entries for " +
           std::to_string(S) + " stages (give one per stage, or none)";
  for (const SimInput::StageParts& parts : in.stage_parts)
    for (const auto* half : {&parts.forward, &parts.backward})
      for (Time t : *half)
        if (t < 0) return "stage_parts must not be negative";
  for (Time t : in.tail_time)
    if (t < 0) return "tail_time must not be negative";
  if (!in.grad_buckets.empty() && in.grad_buckets.size() != static_cast<std::size_t>(S))
    return "grad_buckets has " + std::to_string(in.grad_buckets.size()) + " entries for " +
           std::to_string(S) + " stages (give one list per stage, or none)";
  for (const auto& stage : in.grad_buckets)
    for (const GradBucket& b : stage)
      if (b.time < 0 || !(b.ready_b >= 0 && b.ready_b <= 1) || !(b.ready_w >= 0 && b.ready_w <= 1))
        return "a gradient bucket needs a time of at least 0 and ready fractions in [0, 1]";
  if (const auto& t = in.tied_reduce) {
    const auto bad = [&](int r) { return r < 0 || static_cast<std::size_t>(r) >= p; };
    if (bad(t->rank_a) || bad(t->rank_b))
      return "tied_reduce joins ranks " + std::to_string(t->rank_a) + " and " +
             std::to_string(t->rank_b) + ", but the schedule has ranks 0 to " +
             std::to_string(p - 1);
    if (t->time < 0) return "tied_reduce's time must not be negative";
  }
  for (std::size_t r = 0; r < p; ++r) {
    const int d = in.rank_device[r];
    const int limit = in.topology ? in.topology->num_devices() : static_cast<int>(p);
    if (d < 0 || d >= limit)
      return "rank " + std::to_string(r) + " is mapped to device " + std::to_string(d) +
             ", which does not exist";
  }
  return {};
}

const char* const kTooLong =
    "the run would last longer than 2^63 ns (about 292 years): op durations and transfer times "
    "add up past the engine's 64-bit clock";

const char* const kTooBig =
    "activation and static bytes add up past 2^63: the engine's 64-bit byte counts would "
    "overflow";

// BPipe's eviction plan (simulate.hpp, "BPipe"), for a schedule of one stage per rank and F
// and B ops only. For each stage s that would hold more than K = bpipe_keep(p) of its
// micro-batches, walk its rank's list: op position i holds the micro-batches j with
// F(s, j) at or before i and B(s, j) at or after it, less the evicted ones away then (from
// two places after F(s, j) to two places before B(s, j)); wherever that is more than K,
// evict the latest micro-batch that can be away at i and is not yet. O(n log m) a stage.
void plan_bpipe(const CompiledSchedule& cs, Tables& t) {
  const Schedule& sch = cs.schedule();
  const int S = cs.num_stages();
  const int m = cs.num_microbatches();
  const int keep = bpipe_keep(S);
  t.evict.assign(static_cast<std::size_t>(S) * m, 0);
  for (int s = 0; s < S - 1 - s; ++s) {
    const auto& ops = sch.ops[sch.stage_rank[s]];
    const int n = static_cast<int>(ops.size());
    std::vector<int> pf(m, 0), pb(m, 0);
    for (int i = 0; i < n; ++i) (ops[i].kind == OpKind::F ? pf : pb)[ops[i].microbatch] = i;
    std::vector<int> delta(n + 1, 0);        // change of the count at each position
    std::vector<std::vector<int>> enter(n);  // micro-batches that can be away from i on
    for (int j = 0; j < m; ++j) {
      ++delta[pf[j]];
      --delta[pb[j] + 1];
      if (pf[j] + 2 <= pb[j] - 2) enter[pf[j] + 2].push_back(j);
    }
    std::set<int> can;  // candidates; those whose window has passed are dropped lazily
    int count = 0;
    for (int i = 0; i < n; ++i) {
      count += delta[i];
      can.insert(enter[i].begin(), enter[i].end());
      while (count > keep && !can.empty()) {
        const int j = *can.rbegin();
        can.erase(j);
        if (pb[j] - 2 < i) continue;  // back on the device by now
        t.evict[static_cast<std::size_t>(s) * m + j] = 1;
        --count;
        ++delta[pb[j] - 1];  // away until two places before its backward
        t.bpipe = true;
      }
    }
  }
}

// Fills `t` from the input; an error message if the input cannot be run.
std::string build_tables(const SimInput& in, const CompiledSchedule& cs, Tables& t) {
  const Schedule& sch = cs.schedule();
  const int S = cs.num_stages();
  const auto pairs = cs.fb_pairs();
  t.costs.assign(static_cast<std::size_t>(4) * S + pairs.size(), CostRow{});
  t.offload_bytes.resize(S);
  t.offload_time.resize(S);
  for (int s = 0; s < S; ++s)
    t.offload_bytes[s] = in.stages[s].offload_bytes, t.offload_time[s] = in.stages[s].offload_time;
  for (int s = 0; s < S; ++s) {
    const StageCost& c = in.stages[s];
    const std::int64_t act = c.activation_bytes;
    const std::int64_t retained = std::min(c.weight_grad_retained_bytes.value_or(act), act);
    CostRow& f = t.costs[s];
    CostRow& b = t.costs[S + s];
    CostRow& i = t.costs[2 * S + s];
    CostRow& w = t.costs[3 * S + s];
    f = CostRow{c.forward, act, 0, 1, 0};
    if (!add(c.backward_input, c.recompute, i.duration) ||
        !add(i.duration, c.backward_weight, b.duration))
      return kTooLong;
    b.release = act, b.live_out = -1;
    i.release = act - retained;
    w = CostRow{c.backward_weight, 0, retained, 0, -1};
  }
  for (std::size_t k = 0; k < pairs.size(); ++k) {
    const StageCost& f = in.stages[pairs[k].stage];
    const StageCost& b = in.stages[pairs[k].stage2];
    CostRow& row = t.costs[4 * S + k];
    row = CostRow{0, f.activation_bytes, b.activation_bytes, 1, -1};
    if (in.fb_pair_time) {
      row.duration = *in.fb_pair_time;
    } else if (!in.stage_parts.empty() && !in.fb_factor_explicit) {
      // Each part is below 2^63 and their sum bounds the pair, checked like the costs.
      std::int64_t sum = 0;
      for (const auto* half :
           {&in.stage_parts[pairs[k].stage].forward, &in.stage_parts[pairs[k].stage2].backward})
        for (Time part : *half)
          if (!add(sum, part, sum)) return kTooLong;
      row.duration = fb_pair_time(in.stage_parts[pairs[k].stage].forward,
                                  in.stage_parts[pairs[k].stage2].backward);
    } else {
      std::int64_t pair;
      if (!add(f.forward, b.backward_input, pair) || !add(pair, b.backward_weight, pair) ||
          !add(pair, b.recompute, pair))
        return kTooLong;
      const double scaled = static_cast<double>(pair) * in.fb_overlap_factor;
      if (!(scaled < 9.2e18)) return kTooLong;  // llround beyond int64 has no defined result
      row.duration = static_cast<Time>(std::llround(scaled));
    }
  }

  // Routes, and a compact numbering of the links they use.
  t.hops.assign(static_cast<std::size_t>(2) * S, HopRun{});
  const auto uses = cs.hop_uses();
  std::vector<std::pair<int, int>> link_rank;  // (topology link, sending rank)
  std::vector<Route> routes(t.hops.size());
  // Routes `hop` (its stages and bytes set) between its ranks' devices.
  auto route_hop = [&](HopRun& hop, Route& route) -> std::string {
    const int from_rank = sch.stage_rank[hop.from_stage];
    const int a = in.rank_device[from_rank];
    const int b = in.rank_device[sch.stage_rank[hop.to_stage]];
    if (a == b) return {};  // two ranks on one device: the data is simply there
    if (!in.topology) return "stages on different devices need a topology";
    route = in.topology->route(a, b, hop.bytes);
    hop.serialization = route.serialization(hop.bytes);
    hop.latency = route.latency;
    if (hop.serialization < 0 || hop.latency < 0) return kTooLong;
    for (int link : route.links) link_rank.emplace_back(link, from_rank);
    return {};
  };
  for (std::size_t h = 0; h < t.hops.size(); ++h) {
    HopRun& hop = t.hops[h];
    const bool forward = h < static_cast<std::size_t>(S);
    hop.from_stage = forward ? static_cast<int>(h) : static_cast<int>(h) - S;
    hop.to_stage = forward ? hop.from_stage + 1 : hop.from_stage - 1;
    if (uses[h] == 0) continue;  // same rank, or a boundary that does not exist
    hop.bytes = in.stages[std::min(hop.from_stage, hop.to_stage)].output_bytes;
    if (std::string problem = route_hop(hop, routes[h]); !problem.empty()) return problem;
  }
  // BPipe's copies between each evicting stage's rank and its partner's.
  std::vector<Route> bpipe_routes;
  if (in.bpipe) {
    plan_bpipe(cs, t);
    t.bpipe_hops.assign(static_cast<std::size_t>(2) * S, HopRun{});
    bpipe_routes.resize(t.bpipe_hops.size());
    for (int s = 0; t.bpipe && s < S - 1 - s; ++s)
      for (const bool out : {true, false}) {
        const std::size_t h = out ? s : S + s;
        HopRun& hop = t.bpipe_hops[h];
        hop.from_stage = out ? s : S - 1 - s;
        hop.to_stage = out ? S - 1 - s : s;
        hop.bytes = in.stages[s].activation_bytes;
        if (std::string problem = route_hop(hop, bpipe_routes[h]); !problem.empty()) return problem;
      }
  }
  std::sort(link_rank.begin(), link_rank.end());
  link_rank.erase(std::unique(link_rank.begin(), link_rank.end()), link_rank.end());
  std::vector<int> ids;
  for (std::size_t k = 0; k < link_rank.size(); ++k) {
    if (k > 0 && link_rank[k].first == link_rank[k - 1].first) {
      t.shared_links = true;
      continue;
    }
    ids.push_back(link_rank[k].first);
  }
  t.num_links = ids.size();
  // Each hop's links in the compact numbering, one run of t.links per hop.
  auto lay_links = [&](std::vector<HopRun>& hops, const std::vector<Route>& hop_routes) {
    for (std::size_t h = 0; h < hops.size(); ++h) {
      hops[h].link_begin = static_cast<std::uint32_t>(t.links.size());
      hops[h].link_count = static_cast<std::uint32_t>(hop_routes[h].links.size());
      for (int link : hop_routes[h].links)
        t.links.push_back(static_cast<std::uint32_t>(
            std::lower_bound(ids.begin(), ids.end(), link) - ids.begin()));
    }
  };
  lay_links(t.hops, routes);
  lay_links(t.bpipe_hops, bpipe_routes);

  // Every time in a run is the end of a chain of ops, transfers and reductions, each used at
  // most once, so the sum of them all bounds every clock reading (tails come last).
  std::int64_t total = 0, bytes = 0;
  const auto cost_uses = cs.cost_uses();
  for (std::size_t row = 0; row < t.costs.size(); ++row) {
    if (!mul_add(total, cost_uses[row], t.costs[row].duration)) return kTooLong;
    if (!mul_add(bytes, cost_uses[row], t.costs[row].alloc)) return kTooBig;
  }
  for (std::size_t h = 0; h < t.hops.size(); ++h) {
    std::int64_t hop_time;
    if (!add(t.hops[h].serialization, t.hops[h].latency, hop_time) ||
        !mul_add(total, uses[h], hop_time))
      return kTooLong;
  }
  // Every forward half of an offloading stage adds a copy out and one back.
  for (std::size_t row = 0; row < t.costs.size(); ++row) {
    const int s = row < static_cast<std::size_t>(S)        ? static_cast<int>(row)
                  : row >= static_cast<std::size_t>(4) * S ? pairs[row - 4 * S].stage
                                                           : -1;
    if (s < 0 || in.stages[s].offload_bytes == 0) continue;
    t.offload = true;
    if (!mul_add(total, 2 * std::int64_t{cost_uses[row]}, in.stages[s].offload_time))
      return kTooLong;
  }
  // Every evicted micro-batch adds a copy to its partner and one back.
  for (std::size_t k = 0; k < t.evict.size(); ++k) {
    if (!t.evict[k]) continue;
    const std::size_t s = k / static_cast<std::size_t>(cs.num_microbatches());
    for (const HopRun* hop : {&t.bpipe_hops[s], &t.bpipe_hops[S + s]}) {
      std::int64_t hop_time;
      if (!add(hop->serialization, hop->latency, hop_time) || !add(total, hop_time, total))
        return kTooLong;
    }
  }
  for (const auto& stage : in.grad_buckets)
    for (const GradBucket& b : stage)
      if (!add(total, b.time, total)) return kTooLong;
  if (in.tied_reduce && !add(total, in.tied_reduce->time, total)) return kTooLong;
  Time tail = 0;
  for (Time x : in.tail_time) tail = std::max(tail, x);
  if (!add(total, tail, total)) return kTooLong;
  std::int64_t static_max = 0;
  for (std::int64_t x : in.static_bytes) static_max = std::max(static_max, x);
  if (!add(bytes, static_max, bytes)) return kTooBig;
  // The allocator's overhead scales the peak (DeviceResult::peak_reserved_bytes).
  if (static_cast<double>(bytes) * (1.0 + in.allocator_overhead) >= 9.2e18) return kTooBig;
  return {};
}

// ---- the data-flow engine ------------------------------------------------------------------
//
// Without an observer and with no link shared between ranks, nothing in the result depends
// on the order in which same-time events are taken: an op starts at max(device free, last
// input present), and a link's FIFO order is the order of its only sender's list. So the
// run is the fixpoint of that recurrence, and it is reached by sweeping the ranks, running
// each as far as its inputs allow, until a sweep runs nothing. No events, no queue.
//
// kGrads: also note when each stage's gradients are complete (the end of its
// CompiledSchedule::grad_done op) in grad_end, indexed like grad_done. A template flag, so
// that runs without gradient reductions pay nothing for it in the inner loop.

template <bool kGrads>
void run_data_flow(const CompiledSchedule& cs, const Tables& t, std::vector<RankTotals>& ranks,
                   std::uint64_t& executed, Time* grad_end) {
  const auto ops = cs.ops();
  HugeVector<Time> slot(cs.num_slots(), kNever);
  slot[CompiledSchedule::kReadySlot] = 0;
  std::vector<Time> link_free(t.num_links, 0);
  const CostRow* const costs = t.costs.data();
  const HopRun* const hops = t.hops.data();
  const std::uint32_t* const links = t.links.data();
  const GradDone* const grad_done = cs.grad_done().data();

  auto deliver = [&](std::uint32_t h, std::uint32_t into, Time when) {
    const HopRun& hop = hops[h];
    const std::uint32_t* l = links + hop.link_begin;
    Time start = when;
    for (std::uint32_t k = 0; k < hop.link_count; ++k) start = std::max(start, link_free[l[k]]);
    const Time done = start + hop.serialization;
    for (std::uint32_t k = 0; k < hop.link_count; ++k) link_free[l[k]] = done;
    slot[into] = done + hop.latency;
  };

  const int p = cs.num_ranks();
  for (int r = 0; r < p; ++r) ranks[r].next = cs.rank_begin(r);
  if constexpr (kGrads)
    for (int r = 0; r < p; ++r) ranks[r].grad_next = cs.grad_done_begin(r);
  for (bool progress = true; progress;) {
    progress = false;
    for (int r = 0; r < p; ++r) {
      RankTotals& st = ranks[r];
      const std::uint32_t begin = cs.rank_begin(r), end = cs.rank_begin(r + 1);
      std::uint32_t pos = st.next;
      if (pos == end) continue;
      const std::uint32_t from = pos;
      Time free = st.last_end, busy = st.busy, first = st.first_start;
      std::int64_t act = st.activation, peak = st.activation_peak;
      int live = st.inflight, live_peak = st.inflight_peak;
      [[maybe_unused]] std::uint32_t g = st.grad_next;
      [[maybe_unused]] const std::uint32_t g_end = kGrads ? cs.grad_done_begin(r + 1) : 0;
      [[maybe_unused]] std::uint32_t want = kGrads && g < g_end ? grad_done[g].op : kNoOp;
      while (pos < end) {
        const CompiledOp& op = ops[pos];
        const Time ready = std::max(slot[op.wait[0]], slot[op.wait[1]]);
        if (ready == kNever) break;
        const Time start = std::max(free, ready);
        const CostRow& c = costs[op.cost];
        const Time finish = start + c.duration;
        if (pos == begin) first = start;
        act += c.alloc;
        peak = std::max(peak, act);
        live += c.live_in;
        live_peak = std::max(live_peak, live);
        act -= c.release;
        live += c.live_out;
        busy += c.duration;
        if (op.send[0] != kNoSlot) deliver(op.hop[0], op.send[0], finish);
        if (op.send[1] != kNoSlot) deliver(op.hop[1], op.send[1], finish);
        if constexpr (kGrads) {
          if (pos == want) {
            grad_end[g] = finish;
            ++g;
            want = g < g_end ? grad_done[g].op : kNoOp;
          }
        }
        free = finish;
        ++pos;
      }
      if (pos == from) continue;
      progress = true;
      executed += pos - from;
      st.next = pos;
      st.last_end = free;
      st.busy = busy;
      st.first_start = first;
      st.activation = act;
      st.activation_peak = peak;
      st.inflight = live;
      st.inflight_peak = live_peak;
      if constexpr (kGrads) st.grad_next = g;
    }
  }
}

// ---- the ordered engine --------------------------------------------------------------------
//
// Events in (time, priority, sequence) order, for when the order shows: an observer sees
// every op, transfer and memory change in it, and on a link shared by several ranks it
// decides whose same-time transfer goes first. Two kinds of event. kOpDone: the op running
// on `rank` ends. kWake: an input `rank` may be waiting for arrives; the rank re-checks its
// next op. Arrivals are not events of their own: a transfer writes its arrival time into
// the consumer's slot when it is placed, and a wake-up is queued only if the consumer could
// be idle then. At equal times completions go first; either order gives the same timings,
// fixing it keeps observer calls reproducible.
// Offloaded runs add two more (SimInput::offload_lead): kCopyOut, a copy to the host ends
// and its bytes leave the device; kCopyBack, a copy back starts and its bytes are charged.
// At one instant a copy out's free goes first and a copy back's charge last. BPipe's copies
// (SimInput::bpipe) change two ranks' memory, at times known when they are placed: a kMemory
// event applies one such change (its payload's `rank` indexes OrderedEngine::changes_), at
// a copy out's priority when it frees bytes and at a copy back's when it charges them.
enum EventKind : std::uint32_t { kCopyOut = 0, kOpDone = 1, kWake = 2, kCopyBack = 3, kMemory = 4 };

struct Payload {
  std::uint32_t rank;
  std::uint32_t kind;
};

struct OrderedRank {
  std::uint32_t next = 0;  // flat index of the op running or about to run
  std::uint32_t end = 0;
  bool busy = false;
  Time start = 0;
  Time device_free = 0;
  Time inputs_ready = 0;
  int binding_stage = -1;
  int binding_transfer = -1;
  bool binding_reload = false;
  // The latest wake-up queued for this rank and not yet taken, to avoid duplicates. It is
  // cleared when that wake-up is taken: a later input arriving at the same instant (0 ns
  // ops and transfers) must queue its own, or the rank would sleep through it.
  Time wake_at = kNever;
  RankTotals totals;
  // Activation offload: when each copy stream is next free, and the copies' pending memory
  // changes (time, bytes) in time order (each stream's copies start and end in order).
  Time out_free = 0;
  Time back_free = 0;
  std::deque<std::pair<Time, std::int64_t>> leaving;
  std::deque<std::pair<Time, std::int64_t>> returning;
  std::int64_t host = 0;
};

class OrderedEngine {
 public:
  OrderedEngine(const CompiledSchedule& cs, const Tables& t, Observer* obs,
                std::vector<RankTotals>& totals, int offload_lead)
      : cs_(cs),
        sch_(cs.schedule()),
        t_(t),
        obs_(obs),
        totals_(totals),
        offload_lead_(offload_lead) {}

  void run();
  std::uint64_t executed() const { return executed_; }
  std::uint64_t events() const { return events_; }
  /// End of the op at flat index `idx` (kNever if it did not run).
  Time op_end(std::uint32_t idx) const { return times_[idx]; }

 private:
  void try_start(int rank);
  void finish(int rank);
  void send(const CompiledOp& c, int half, const Op* op);
  void allocate(int rank, std::int64_t bytes, int live_delta);
  // Activation offload (SimInput::offload_lead).
  std::size_t key(int stage, int mb) const {
    return static_cast<std::size_t>(stage) * cs_.num_microbatches() + mb;
  }
  const Op& op_at(int rank, std::uint32_t idx) const {
    return sch_.ops[rank][idx - cs_.rank_begin(rank)];
  }
  // The (stage, micro-batch) whose offloaded activations the backward half of the op at
  // `idx` needs back, or stage -1.
  std::pair<int, int> reload_of(int rank, std::uint32_t idx) const;
  void copy_out(int rank, int stage, int mb);
  void copy_back(int rank, int stage, int mb, Time issued);
  void trigger(int rank, std::uint32_t idx);
  void settle_copies(int rank, bool back);
  // BPipe (SimInput::bpipe): whether the op at `idx` is the backward of an evicted
  // micro-batch, which is then (stage, micro-batch); a copy of its bytes to the partner
  // (out) or back; a memory change of `bytes` on `rank` at `when`.
  bool evicted_backward(int rank, std::uint32_t idx, int& stage, int& mb) const;
  void bpipe_copy(int rank, int stage, int mb, bool out);
  void change_at(Time when, int rank, std::int64_t bytes);

  const CompiledSchedule& cs_;
  const Schedule& sch_;
  const Tables& t_;
  Observer* obs_;
  std::vector<RankTotals>& totals_;
  int offload_lead_ = 1;
  Time now_ = 0;
  EventQueue<Payload> queue_;
  std::vector<OrderedRank> ranks_;
  // When each input is (or will be) present, kNever until its producer has run: first one
  // entry per op (its end, for same-rank consumers), then one per slot (the arrival of the
  // transfer that fills it); and which transfer that was (-1 for the op entries).
  HugeVector<Time> times_;
  HugeVector<std::int32_t> transfer_;
  std::uint32_t slot_base_ = 0;
  std::vector<Time> link_free_;
  std::int32_t transfers_ = 0;
  std::uint64_t executed_ = 0;
  std::uint64_t events_ = 0;
  // Per (stage, micro-batch): when its copy out ends, when its copy back was asked for
  // (kNever: not yet) and when that copy ends (kNever: not placed).
  HugeVector<Time> out_end_;
  HugeVector<Time> back_asked_;
  HugeVector<Time> back_end_;
  HugeVector<char> kept_;                              // its bytes stayed on the device (copy_out)
  std::vector<std::pair<int, std::int64_t>> changes_;  // BPipe: (rank, bytes), kMemory
};

bool OrderedEngine::evicted_backward(int rank, std::uint32_t idx, int& stage, int& mb) const {
  if (idx >= ranks_[rank].end) return false;
  const Op& o = op_at(rank, idx);
  stage = o.stage, mb = o.microbatch;
  return o.kind == OpKind::B && t_.evict[key(o.stage, o.microbatch)];
}

void OrderedEngine::change_at(Time when, int rank, std::int64_t bytes) {
  const auto at = static_cast<std::uint32_t>(changes_.size());
  changes_.emplace_back(rank, bytes);
  queue_.push(when, bytes < 0 ? kCopyOut : kCopyBack, Payload{at, kMemory});
}

// BPipe: the activations of (stage, mb) go to the partner's device when its forward on
// `rank` ends (out), or come back when the op before its backward starts. A transfer over
// the two devices' route like a pipeline output (send()); a copy back also waits for its
// copy out. Charged on the receiver from its start, freed on the sender at its end.
void OrderedEngine::bpipe_copy(int rank, int stage, int mb, bool out) {
  const int S = cs_.num_stages();
  const int partner = sch_.stage_rank[S - 1 - stage];
  const HopRun& hop = t_.bpipe_hops[out ? stage : S + stage];
  const std::size_t k = key(stage, mb);
  const std::uint32_t* links = t_.links.data() + hop.link_begin;
  Time start = out ? now_ : std::max(now_, out_end_[k]);
  for (std::uint32_t l = 0; l < hop.link_count; ++l) start = std::max(start, link_free_[links[l]]);
  for (std::uint32_t l = 0; l < hop.link_count; ++l)
    link_free_[links[l]] = start + hop.serialization;
  const Time end = start + hop.serialization + hop.latency;
  (out ? out_end_ : back_end_)[k] = end;
  change_at(start, out ? partner : rank, hop.bytes);
  change_at(end, out ? rank : partner, -hop.bytes);
  if (obs_) obs_->on_copy(CopyRecord{rank, stage, mb, out, hop.bytes, now_, start, end, partner});
}

std::pair<int, int> OrderedEngine::reload_of(int rank, std::uint32_t idx) const {
  const Op& o = op_at(rank, idx);
  std::pair<int, int> sm{-1, 0};
  if (o.kind == OpKind::B || o.kind == OpKind::I) sm = {o.stage, o.microbatch};
  if (o.kind == OpKind::FB) sm = {o.stage2, o.microbatch2};
  if (sm.first >= 0 && t_.offload_bytes[sm.first] == 0) sm.first = -1;
  return sm;
}

// The forward of (stage, mb) has ended: its offloaded bytes go to the host on the rank's
// copy-out stream, and leave the device when the copy ends.
void OrderedEngine::copy_out(int rank, int stage, int mb) {
  OrderedRank& st = ranks_[rank];
  const std::size_t k = key(stage, mb);
  // A backward whose copy back would be asked for by the time its forward ends (it comes
  // within the lead, at least right after) keeps its bytes on the device: Megatron-Core keeps
  // such last groups ("so that the reloading won't block the main stream",
  // fine_grained_activation_offload.py post_warmup_callback).
  const std::uint64_t idx = st.next - 1;  // the forward's op, just finished
  const std::uint64_t lead = static_cast<std::uint64_t>(std::max(offload_lead_, 1));
  if (cs_.backward_op(stage, mb) <= idx + lead) {
    kept_[k] = 1;
    back_asked_[k] = out_end_[k] = now_;
    back_end_[k] = 0;  // nothing to wait for
    return;
  }
  const std::int64_t bytes = t_.offload_bytes[stage];
  const Time start = std::max(now_, st.out_free);
  const Time end = start + t_.offload_time[stage];
  st.out_free = end;
  out_end_[k] = end;
  st.leaving.emplace_back(end, bytes);
  queue_.push(end, kCopyOut, Payload{static_cast<std::uint32_t>(rank), kCopyOut});
  st.host += bytes;
  st.totals.host_peak = std::max(st.totals.host_peak, st.host);
  if (obs_) obs_->on_copy(CopyRecord{rank, stage, mb, true, bytes, now_, start, end});
  // A copy back asked for before this forward ran (a lead past it) goes now.
  if (const Time asked = back_asked_[k]; asked != kNever) copy_back(rank, stage, mb, asked);
}

// Places the copy back of (stage, mb), asked for at `issued`: it starts once its copy out
// has ended and the copy-back stream is free, and its bytes are charged from its start.
void OrderedEngine::copy_back(int rank, int stage, int mb, Time issued) {
  OrderedRank& st = ranks_[rank];
  const std::size_t k = key(stage, mb);
  const std::int64_t bytes = t_.offload_bytes[stage];
  const Time start = std::max({issued, out_end_[k], st.back_free});
  const Time end = start + t_.offload_time[stage];
  st.back_free = end;
  back_end_[k] = end;
  st.returning.emplace_back(start, bytes);
  queue_.push(start, kCopyBack, Payload{static_cast<std::uint32_t>(rank), kCopyBack});
  if (obs_) obs_->on_copy(CopyRecord{rank, stage, mb, false, bytes, issued, start, end});
}

// The program reaches the point that asks for the copy back of the op at `idx` (now_).
void OrderedEngine::trigger(int rank, std::uint32_t idx) {
  if (idx >= ranks_[rank].end) return;
  const auto [stage, mb] = reload_of(rank, idx);
  if (stage < 0) return;
  const std::size_t k = key(stage, mb);
  if (back_asked_[k] != kNever) return;
  back_asked_[k] = now_;
  if (out_end_[k] != kNever) copy_back(rank, stage, mb, now_);
}

// Applies the copies' memory changes due by now_ (`back`: charges, else frees).
void OrderedEngine::settle_copies(int rank, bool back) {
  auto& pending = back ? ranks_[rank].returning : ranks_[rank].leaving;
  while (!pending.empty() && pending.front().first <= now_) {
    allocate(rank, back ? pending.front().second : -pending.front().second, 0);
    pending.pop_front();
  }
}

void OrderedEngine::allocate(int rank, std::int64_t bytes, int live_delta) {
  RankTotals& st = ranks_[rank].totals;
  st.activation += bytes;
  st.inflight += live_delta;
  st.activation_peak = std::max(st.activation_peak, st.activation);
  st.inflight_peak = std::max(st.inflight_peak, st.inflight);
  if (obs_ && bytes != 0) obs_->on_memory(rank, now_, st.activation);
}

void OrderedEngine::try_start(int rank) {
  OrderedRank& st = ranks_[rank];
  if (st.busy || st.next == st.end) return;
  const std::uint32_t idx = st.next;

  // Every input must have been produced; remember the latest, which may still be in flight
  // (a time after now). Ties go to the input checked last.
  Time ready = 0;
  int stage = -1, transfer = -1;
  for (const CompiledInput& in : cs_.inputs(idx)) {
    const std::size_t at = in.slot == kLocal ? in.producer : slot_base_ + std::size_t{in.slot};
    const Time t = times_[at];
    if (t == kNever) return;
    const bool later = t >= ready;  // written without branches: which input is later is
    ready = later ? t : ready;      // data, and a mispredicted branch costs more than this
    stage = later ? in.stage : stage;
    transfer = later ? transfer_[at] : transfer;
  }
  bool reload = false;
  int reloaded = -1;          // the stage whose offloaded bytes this op takes back
  const Time inputs = ready;  // the other inputs' latest, before the copy back's
  if (t_.offload) {
    const auto [rs, rm] = reload_of(rank, idx);
    reloaded = rs >= 0 && !kept_[key(rs, rm)] ? rs : -1;
    if (rs >= 0) {
      // Asked for by now (lead 0: when the op before ended, in finish()); kNever only when
      // the forward has not run either.
      const Time back = back_end_[key(rs, rm)];
      if (back == kNever) return;  // its forward has not run: a deadlock the end reports
      if (back >= ready) reload = true, ready = back, stage = rs, transfer = -1;
    }
  }
  if (int bs, bm; t_.bpipe && evicted_backward(rank, idx, bs, bm)) {
    const Time back = back_end_[key(bs, bm)];  // asked for when the op before started
    if (back == kNever) return;                // not asked for: a deadlock the end reports
    if (back >= ready) reload = true, ready = back, stage = bs, transfer = -1;
  }
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
  st.binding_reload = reload;
  if (st.totals.first_start == kNever) st.totals.first_start = now_;
  const CostRow& c = t_.costs[cs_.ops()[idx].cost];
  if (c.live_in != 0) allocate(rank, c.alloc, c.live_in);
  // The wait the copy back alone caused: past the other inputs and the op before.
  if (reload) st.totals.reload_wait += std::max<Time>(0, ready - std::max(inputs, st.device_free));
  // BPipe: this op's start asks for the copy back of the backward just after it.
  if (int bs, bm; t_.bpipe && evicted_backward(rank, idx + 1, bs, bm))
    bpipe_copy(rank, bs, bm, false);
  if (t_.offload) {
    if (reloaded >= 0) st.host -= t_.offload_bytes[reloaded];
    // This op's start asks for the copies back the lead points here.
    if (offload_lead_ > 0) {
      // In 64 bits: a lead near INT_MAX must not wrap round to an earlier op.
      const std::uint64_t begin = cs_.rank_begin(rank);
      const std::uint64_t lead = static_cast<std::uint64_t>(offload_lead_);
      const std::uint64_t last = std::min<std::uint64_t>(idx == begin ? begin + lead : idx + lead,
                                                         std::uint64_t{st.end} - 1);
      for (std::uint64_t i = idx == begin ? begin : idx + lead; i <= last; ++i)
        trigger(rank, static_cast<std::uint32_t>(i));
    }
  }
  queue_.push(now_ + c.duration, kOpDone, Payload{static_cast<std::uint32_t>(rank), kOpDone});
}

void OrderedEngine::send(const CompiledOp& c, int half, const Op* op) {
  const HopRun& hop = t_.hops[c.hop[half]];
  const std::uint32_t* links = t_.links.data() + hop.link_begin;
  Time start = now_;
  for (std::uint32_t k = 0; k < hop.link_count; ++k) start = std::max(start, link_free_[links[k]]);
  for (std::uint32_t k = 0; k < hop.link_count; ++k)
    link_free_[links[k]] = start + hop.serialization;
  const Time arrive = start + hop.serialization + hop.latency;
  const std::int32_t id = transfers_++;
  const std::size_t at = slot_base_ + std::size_t{c.send[half]};
  times_[at] = arrive;
  transfer_[at] = id;
  // A busy consumer re-checks when its op ends; an idle one must be woken.
  const int dst_rank = sch_.stage_rank[hop.to_stage];
  OrderedRank& dst = ranks_[dst_rank];
  if (!dst.busy && dst.wake_at != arrive) {
    dst.wake_at = arrive;
    queue_.push(arrive, kWake, Payload{static_cast<std::uint32_t>(dst_rank), kWake});
  }
  if (obs_) {
    TransferRecord t;
    t.id = id;
    t.src_rank = sch_.stage_rank[hop.from_stage];
    t.dst_rank = dst_rank;
    t.src_stage = hop.from_stage;
    t.dst_stage = hop.to_stage;
    t.microbatch = half == 1 && op->kind == OpKind::FB ? op->microbatch2 : op->microbatch;
    t.gradient = half == 1;
    t.bytes = hop.bytes;
    t.requested = now_;
    t.start = start;
    t.end = arrive;
    obs_->on_transfer(t);
  }
}

void OrderedEngine::finish(int rank) {
  OrderedRank& st = ranks_[rank];
  RankTotals& tot = st.totals;
  const std::uint32_t idx = st.next;
  const Op* op = obs_ ? &sch_.ops[rank][idx - cs_.rank_begin(rank)] : nullptr;
  const CompiledOp& c = cs_.ops()[idx];
  const CostRow& cost = t_.costs[c.cost];
  st.busy = false;
  tot.busy += now_ - st.start;
  tot.last_end = now_;
  ++executed_;
  times_[idx] = now_;
  // The forward half's output leaves first, then the backward half frees its activations
  // and sends its gradient: the order observers have always seen.
  if (c.send[0] != kNoSlot) send(c, 0, op);
  if (cost.release != 0 || cost.live_out != 0) allocate(rank, -cost.release, cost.live_out);
  if (c.send[1] != kNoSlot) send(c, 1, op);
  if (obs_) {
    OpRecord rec;
    rec.rank = rank;
    rec.op = *op;
    rec.start = st.start;
    rec.end = now_;
    rec.device_free = st.device_free;
    rec.inputs_ready = st.inputs_ready;
    rec.binding_stage = st.binding_stage;
    rec.binding_transfer = st.binding_transfer;
    rec.binding_reload = st.binding_reload;
    obs_->on_op(rec);
  }
  st.device_free = now_;
  ++st.next;
  if (t_.offload) {
    const Op& o = op_at(rank, idx);
    if (o.kind == OpKind::F || o.kind == OpKind::FB)
      if (t_.offload_bytes[o.stage] > 0) copy_out(rank, o.stage, o.microbatch);
    if (offload_lead_ == 0) trigger(rank, st.next);
  }
  if (t_.bpipe) {
    const Op& o = op_at(rank, idx);
    if (o.kind == OpKind::F && t_.evict[key(o.stage, o.microbatch)])
      bpipe_copy(rank, o.stage, o.microbatch, true);
  }
}

void OrderedEngine::run() {
  const int p = cs_.num_ranks();
  ranks_.assign(p, OrderedRank{});
  for (int r = 0; r < p; ++r)
    ranks_[r].next = cs_.rank_begin(r), ranks_[r].end = cs_.rank_begin(r + 1);
  slot_base_ = static_cast<std::uint32_t>(cs_.ops().size());
  times_.assign(slot_base_ + std::size_t{cs_.num_slots()}, kNever);
  transfer_.assign(times_.size(), -1);
  link_free_.assign(t_.num_links, 0);
  queue_.reserve(static_cast<std::size_t>(p) * 4);
  if (t_.offload || t_.bpipe) {
    const std::size_t n = static_cast<std::size_t>(cs_.num_stages()) * cs_.num_microbatches();
    out_end_.assign(n, kNever);
    back_asked_.assign(n, kNever);
    back_end_.assign(n, kNever);
    kept_.assign(n, 0);
  }

  for (int rank = 0; rank < p; ++rank) try_start(rank);
  while (!queue_.empty()) {
    const auto e = queue_.pop();
    ++events_;
    now_ = e.time;
    if (e.payload.kind == kMemory) {  // nothing waits on memory: no rank re-checks
      const auto [r, bytes] = changes_[e.payload.rank];
      allocate(r, bytes, 0);
      continue;
    }
    const int rank = static_cast<int>(e.payload.rank);
    if (e.payload.kind == kOpDone) {
      finish(rank);
    } else if (e.payload.kind == kCopyOut || e.payload.kind == kCopyBack) {
      settle_copies(rank, e.payload.kind == kCopyBack);
    } else if (ranks_[rank].wake_at == now_) {
      ranks_[rank].wake_at = kNever;
    }
    try_start(rank);
  }
  for (int r = 0; r < p; ++r) {
    totals_[r] = ranks_[r].totals;
    totals_[r].next = ranks_[r].next;
  }
}

// ---- results -------------------------------------------------------------------------------

// The inputs `op` lacks, in words; "produced" is "its producer has run", which at the end
// of a run is the same for both engines.
std::string unmet(const CompiledSchedule& cs, const std::vector<RankTotals>& ranks, const Op& op) {
  const Schedule& sch = cs.schedule();
  const int S = cs.num_stages();
  auto ran = [&](std::uint32_t idx, int stage) { return idx < ranks[sch.stage_rank[stage]].next; };
  std::vector<std::string> parts;
  auto rank_of = [&](int s) { return std::to_string(sch.stage_rank[s]); };
  auto forward_inputs = [&](int s, int mb) {
    if (s > 0 && !ran(cs.forward_op(s - 1, mb), s - 1))
      parts.push_back("output of " + to_string(Op::f(s - 1, mb)) + " from device " +
                      rank_of(s - 1));
  };
  auto backward_inputs = [&](int s, int mb) {
    if (!ran(cs.forward_op(s, mb), s)) parts.push_back(to_string(Op::f(s, mb)) + " on this device");
    if (s + 1 < S && !ran(cs.backward_op(s + 1, mb), s + 1))
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
  for (const auto& part : parts) text += (text.empty() ? "" : " and ") + part;
  return text;
}

// The ranks' communication streams after the pipeline has run. `ready` holds, per rank, the
// end of its pipeline work; it comes back as the start of its tail. Each rank reduces its
// stages' gradient buckets one after another in the order they became ready: overlapped, a
// bucket's fraction of the op completing its stage's gradients (that op's grad_start to
// grad_end, indexed like CompiledSchedule::grad_done), else the end of the rank's pipeline
// work; then the tied-embedding all-reduce waits for both its ranks. Both engines end here,
// so they cannot disagree about it.
void place_reductions(const SimInput& in, const CompiledSchedule& cs,
                      const std::vector<Time>& grad_end, const std::vector<Time>& grad_start,
                      std::vector<Time>& ready, std::vector<ReductionRecord>* records) {
  const auto done = cs.grad_done();
  const int S = cs.num_stages();
  struct Pending {
    Time at;
    int stage;
    Time duration;
  };
  std::vector<Pending> pending;
  if (!in.grad_buckets.empty())
    for (int r = 0; r < cs.num_ranks(); ++r) {
      pending.clear();
      for (std::uint32_t k = cs.grad_done_begin(r); k < cs.grad_done_begin(r + 1); ++k) {
        const int s = done[k].stage;
        const Time start = in.overlap_grad_reduce ? grad_start[k] : ready[r];
        const Time end = in.overlap_grad_reduce ? grad_end[k] : ready[r];
        const bool w = cs.ops()[done[k].op].cost / static_cast<std::uint32_t>(S) == 3;
        for (const GradBucket& b : in.grad_buckets[s]) {
          if (b.time == 0) continue;
          // Ready part-way through the stage's last weight-gradient op; a whole-stage
          // bucket (1.0) exactly at its end, whatever the op's length in a double.
          const double f = w ? b.ready_w : b.ready_b;
          const Time at =
              f >= 1.0
                  ? end
                  : start + static_cast<Time>(std::llround(f * static_cast<double>(end - start)));
          pending.push_back(Pending{at, s, b.time});
        }
      }
      // First come, first served; at equal times in the order the stages completed.
      std::stable_sort(pending.begin(), pending.end(),
                       [](const Pending& a, const Pending& b) { return a.at < b.at; });
      Time free = 0;
      for (const Pending& g : pending) {
        const Time start = std::max(g.at, free);
        free = start + g.duration;
        if (records) records->push_back(ReductionRecord{r, g.stage, -1, g.at, start, free});
      }
      ready[r] = std::max(ready[r], free);
    }
  if (in.tied_reduce && in.tied_reduce->time > 0) {
    const PairReduction& t = *in.tied_reduce;
    const Time at = std::max(ready[t.rank_a], ready[t.rank_b]);
    const Time end = at + t.time;
    ready[t.rank_a] = ready[t.rank_b] = end;
    if (records) {
      records->push_back(ReductionRecord{t.rank_a, -1, t.rank_b, at, at, end});
      if (t.rank_b != t.rank_a)
        records->push_back(ReductionRecord{t.rank_b, -1, t.rank_a, at, at, end});
    }
  }
}

SimResult collect(const SimInput& in, const CompiledSchedule& cs,
                  const std::vector<RankTotals>& ranks, std::uint64_t executed,
                  const std::vector<Time>& grad_end, const std::vector<Time>& grad_start,
                  Observer* observer) {
  SimResult r;
  r.ops_executed = executed;
  const Schedule& sch = cs.schedule();
  const int p = cs.num_ranks();
  for (int rank = 0; rank < p; ++rank) {
    const std::uint32_t pos = ranks[rank].next - cs.rank_begin(rank);
    if (pos < sch.ops[rank].size()) {
      const Op& op = sch.ops[rank][pos];
      r.blocked.push_back(BlockedOp{rank, static_cast<int>(pos), op, unmet(cs, ranks, op)});
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
  for (const RankTotals& st : ranks) {
    first = std::min(first, st.first_start);
    last = std::max(last, st.last_end);
  }
  if (first == kNever) first = 0;
  std::vector<Time> ready(p);
  for (int rank = 0; rank < p; ++rank) ready[rank] = std::max(ranks[rank].last_end, first);
  std::vector<ReductionRecord> records;
  place_reductions(in, cs, grad_end, grad_start, ready, observer ? &records : nullptr);
  for (const ReductionRecord& rec : records) observer->on_reduction(rec);
  std::int64_t busy_total = 0;
  for (int rank = 0; rank < p; ++rank) {
    const RankTotals& st = ranks[rank];
    DeviceResult d;
    d.rank = rank;
    d.device = in.rank_device[rank];
    d.busy = st.busy;
    d.first_start = st.first_start == kNever ? first : st.first_start;
    d.last_end = st.last_end;
    d.tail_start = ready[rank];
    d.static_bytes = in.static_bytes.empty() ? 0 : in.static_bytes[rank];
    d.capacity_bytes = in.capacity_bytes.empty() ? 0 : in.capacity_bytes[rank];
    d.peak_activation_bytes = st.activation_peak;
    const std::int64_t outside =
        in.outside_allocator_bytes.empty() ? 0 : in.outside_allocator_bytes[rank];
    d.peak_allocated_bytes = d.static_bytes - outside + st.activation_peak;
    // (1 + f) x the tensors' peak; exactly the tensors' peak at f = 0.
    d.peak_reserved_bytes =
        in.allocator_overhead > 0
            ? d.peak_allocated_bytes +
                  static_cast<std::int64_t>(std::llround(
                      in.allocator_overhead * static_cast<double>(d.peak_allocated_bytes)))
            : d.peak_allocated_bytes;
    d.peak_bytes = outside + d.peak_reserved_bytes;
    d.peak_inflight = st.inflight_peak;
    d.reload_wait = st.reload_wait;
    d.peak_host_bytes = st.host_peak;
    d.fits = (in.capacity_bytes.empty() || d.peak_bytes <= d.capacity_bytes) &&
             (in.host_capacity_bytes.empty() || d.peak_host_bytes <= in.host_capacity_bytes[rank]);
    r.fits = r.fits && d.fits;
    busy_total += st.busy;
    const Time tail = in.tail_time.empty() ? 0 : in.tail_time[rank];
    iteration_end = std::max(iteration_end, ready[rank] + tail);
    r.devices.push_back(d);
  }
  r.pipeline_time = last - first;
  r.iteration_time = std::max(iteration_end, last) - first;
  r.bubble_ratio = r.pipeline_time > 0 ? 1.0 - static_cast<double>(busy_total) /
                                                   (static_cast<double>(p) * r.pipeline_time)
                                       : 0.0;
  return r;
}

SimResult failure(std::string message) {
  SimResult r;
  r.error = std::move(message);
  return r;
}

SimResult run(const SimInput& input, const CompiledSchedule& schedule, Observer* observer) {
  if (std::string problem = check_input(input, schedule); !problem.empty())
    return failure(std::move(problem));
  Tables tables;
  try {
    if (std::string problem = build_tables(input, schedule, tables); !problem.empty())
      return failure(std::move(problem));
  } catch (const std::exception& e) {  // a route the topology cannot give
    return failure(e.what());
  }
  std::vector<RankTotals> ranks(schedule.num_ranks());
  std::uint64_t executed = 0, events = 0;
  // When each stage's gradients are complete; needed only for overlapped reductions.
  const bool grads = input.overlap_grad_reduce && !input.grad_buckets.empty();
  std::vector<Time> grad_end(grads ? schedule.grad_done().size() : 0, kNever);
  if (observer || tables.shared_links || tables.offload || tables.bpipe) {
    OrderedEngine engine(schedule, tables, observer, ranks, input.offload_lead);
    engine.run();
    executed = engine.executed();
    events = engine.events();
    for (std::size_t k = 0; k < grad_end.size(); ++k)
      grad_end[k] = engine.op_end(schedule.grad_done()[k].op);
  } else if (grads) {
    run_data_flow<true>(schedule, tables, ranks, executed, grad_end.data());
  } else {
    run_data_flow<false>(schedule, tables, ranks, executed, nullptr);
  }
  // And when the op that completes them started: buckets become ready part-way through it.
  std::vector<Time> grad_start(grad_end.size());
  for (std::size_t k = 0; k < grad_end.size(); ++k)
    grad_start[k] =
        grad_end[k] - tables.costs[schedule.ops()[schedule.grad_done()[k].op].cost].duration;
  SimResult r = collect(input, schedule, ranks, executed, grad_end, grad_start, observer);
  r.events = events;
  return r;
}

}  // namespace

SimResult simulate(const SimInput& input, const CompiledSchedule& schedule, Observer* observer) {
  SimResult r = run(input, schedule, observer);
  if (observer) observer->on_result(r);
  return r;
}

SimResult simulate(const SimInput& input, const Schedule& schedule, Observer* observer) {
  return simulate(input, CompiledSchedule::borrowing(schedule), observer);
}

}  // namespace bmpipe
