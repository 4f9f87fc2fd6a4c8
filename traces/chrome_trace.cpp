#include "traces/chrome_trace.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>

#include "sim/fb_pair.hpp"

namespace bmpipe {
namespace {

// Thread ids inside a device's process: compute first, then the comm lanes.
constexpr int kComputeTid = 0;
constexpr int kFirstCommTid = 1;
// The gradient reductions' thread: after every comm lane (a rank opens few of those).
constexpr int kReduceTid = 1 << 20;
constexpr int kA2aTid = (1 << 20) + 1;       // after the reductions' thread
constexpr int kCopyOutTid = (1 << 20) + 2;   // activation offload, device to host
constexpr int kCopyBackTid = (1 << 20) + 3;  // and back
// Flush the event buffer to the stream once it holds this much.
constexpr std::size_t kFlushBytes = 1 << 16;
// Memory counters, one quantity each (Perfetto names the tracks "<name> bytes").
constexpr const char* kActivationCounter = "activation memory";
constexpr const char* kStaticCounter = "static memory";
constexpr const char* kTotalCounter = "total memory";

const char* op_name(OpKind kind) {
  switch (kind) {
    case OpKind::F:
      return "F";
    case OpKind::B:
      return "B";
    case OpKind::I:
      return "I";
    case OpKind::W:
      return "W";
    case OpKind::FB:
      return "F&B";
  }
  return "?";
}

// A point strictly inside [start, end] when the slice has room, so that a flow binds to
// this slice and not to a neighbour that touches it.
Time inside_end(Time start, Time end) {
  return end - start >= 2 ? end - 1 : start;
}
Time inside_start(Time start, Time end) {
  return end - start >= 2 ? start + 1 : start;
}

}  // namespace

std::vector<std::string> layer_range_labels(const std::vector<int>& layers_per_stage) {
  std::vector<std::string> out;
  int next = 0;
  for (int count : layers_per_stage) {
    if (count <= 0)
      out.push_back("no layers");
    else if (count == 1)
      out.push_back("layer " + std::to_string(next));
    else
      out.push_back("layers " + std::to_string(next) + "-" + std::to_string(next + count - 1));
    next += std::max(count, 0);
  }
  return out;
}

ChromeTraceWriter::ChromeTraceWriter(std::ostream& out, const SimInput& input,
                                     const Schedule& schedule, TraceLabels labels)
    : out_(out), input_(input), schedule_(schedule), labels_(std::move(labels)) {
  const int p = schedule_.num_ranks;
  ranks_.resize(static_cast<std::size_t>(std::max(p, 0)));
  stage_chunk_.assign(static_cast<std::size_t>(std::max(schedule_.num_stages, 0)), 0);
  std::vector<int> seen(ranks_.size(), 0);
  for (int s = 0;
       s < schedule_.num_stages && static_cast<std::size_t>(s) < schedule_.stage_rank.size(); ++s) {
    const int r = schedule_.stage_rank[s];
    if (r >= 0 && r < p) stage_chunk_[s] = seen[r]++;
  }
  for (int r = 0; r < p; ++r)
    if (static_cast<std::size_t>(r) < input_.static_bytes.size())
      ranks_[r].static_bytes = input_.static_bytes[r];
  buf_.reserve(kFlushBytes + 4096);
  buf_ += "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[";
  write_metadata();
}

ChromeTraceWriter::~ChromeTraceWriter() {
  try {
    finish();
  } catch (...) {  // a destructor must not throw; the stream's state tells the caller
  }
}

std::uint64_t ChromeTraceWriter::key(int stage, int microbatch, bool gradient) const {
  return (static_cast<std::uint64_t>(stage) *
              static_cast<std::uint64_t>(schedule_.num_microbatches) +
          static_cast<std::uint64_t>(microbatch)) *
             2 +
         (gradient ? 1 : 0);
}

void ChromeTraceWriter::begin_event() {
  buf_ += first_event_ ? "\n{" : ",\n{";
  first_event_ = false;
}

void ChromeTraceWriter::append_us(Time ns) {
  // Exact decimal microseconds from integer nanoseconds: no floating point, so the bytes
  // never depend on the C library's rounding.
  if (ns < 0) {
    buf_ += '-';
    ns = -ns;
  }
  char tmp[32];
  auto [end, ec] = std::to_chars(tmp, tmp + sizeof tmp, ns / 1000);
  (void)ec;
  buf_.append(tmp, end);
  const int frac = static_cast<int>(ns % 1000);
  if (frac != 0) {
    char f[5] = {'.', static_cast<char>('0' + frac / 100), static_cast<char>('0' + frac / 10 % 10),
                 static_cast<char>('0' + frac % 10), 0};
    buf_ += f;
  }
}

void ChromeTraceWriter::append_escaped(const std::string& text) {
  buf_ += '"';
  for (char c : text) {
    switch (c) {
      case '"':
        buf_ += "\\\"";
        break;
      case '\\':
        buf_ += "\\\\";
        break;
      case '\n':
        buf_ += "\\n";
        break;
      case '\t':
        buf_ += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char u[8];
          std::snprintf(u, sizeof u, "\\u%04x", static_cast<unsigned>(c));
          buf_ += u;
        } else {
          buf_ += c;
        }
    }
  }
  buf_ += '"';
}

void ChromeTraceWriter::flush_if_large() {
  if (buf_.size() >= kFlushBytes) {
    out_.write(buf_.data(), static_cast<std::streamsize>(buf_.size()));
    buf_.clear();
  }
}

void ChromeTraceWriter::write_metadata() {
  const int p = schedule_.num_ranks;
  auto meta = [&](int pid, int tid, const char* name, const std::string& args) {
    begin_event();
    buf_ += "\"ph\":\"M\",\"pid\":" + std::to_string(pid) + ",\"tid\":" + std::to_string(tid) +
            ",\"name\":\"" + name + "\",\"args\":" + args + "}";
  };
  for (int r = 0; r < p; ++r) {
    const int device =
        static_cast<std::size_t>(r) < input_.rank_device.size() ? input_.rank_device[r] : r;
    const int node = input_.topology && device >= 0 && device < input_.topology->num_devices()
                         ? input_.topology->node_of(device)
                         : 0;
    std::string stages;
    for (std::size_t s = 0; s < schedule_.stage_rank.size(); ++s)
      if (schedule_.stage_rank[s] == r) {
        if (!stages.empty()) stages += ',';
        stages += std::to_string(s);
      }
    std::string name = "rank " + std::to_string(r) + " \u00b7 node " + std::to_string(node) +
                       " \u00b7 dev " + std::to_string(device) + " \u00b7 stage " + stages;
    std::string args = "{\"name\":";
    {
      std::string saved;
      saved.swap(buf_);
      append_escaped(name);
      args += buf_;
      buf_.swap(saved);
    }
    meta(r, kComputeTid, "process_name", args + "}");
    meta(r, kComputeTid, "process_sort_index", "{\"sort_index\":" + std::to_string(r) + "}");
    meta(r, kComputeTid, "thread_name", "{\"name\":\"compute\"}");
    meta(r, kComputeTid, "thread_sort_index", "{\"sort_index\":0}");
    meta(r, kFirstCommTid, "thread_name", "{\"name\":\"comm\"}");
    meta(r, kFirstCommTid, "thread_sort_index", "{\"sort_index\":1}");
    ranks_[r].lane_free.push_back(0);
    // Weights and optimizer state are resident before the first op and never change: one
    // sample of the static counter, and the total starts there.
    counter(r, 0, kStaticCounter, ranks_[r].static_bytes);
    on_memory(r, 0, 0);
  }
}

void ChromeTraceWriter::write_bubble(int rank, Time from, Time to, const std::string& cause,
                                     const std::string& extra) {
  if (to <= from) return;
  begin_event();
  buf_ += "\"ph\":\"X\",\"cat\":\"bubble\",\"name\":\"bubble\",\"pid\":";
  buf_ += std::to_string(rank);
  buf_ += ",\"tid\":0,\"ts\":";
  append_us(from);
  buf_ += ",\"dur\":";
  append_us(to - from);
  buf_ += ",\"args\":{\"cause\":";
  append_escaped(cause);
  buf_ += extra;
  buf_ += "}}";
}

void ChromeTraceWriter::explain_gap(const OpRecord& r, bool first) {
  const Time from = first ? 0 : r.device_free;
  if (r.start <= from) return;
  // The binding input: which transfer carried it, if any, and when its producer finished.
  const InFlight* via = nullptr;
  if (r.binding_transfer >= 0) {
    auto look = [&](int stage, int mb, bool gradient) {
      auto it = in_flight_.find(key(stage, mb, gradient));
      if (it != in_flight_.end() && it->second.id == r.binding_transfer) via = &it->second;
    };
    const Op& op = r.op;
    if (op.kind == OpKind::F || op.kind == OpKind::FB) look(op.stage, op.microbatch, false);
    if (op.kind == OpKind::B || op.kind == OpKind::I) look(op.stage, op.microbatch, true);
    if (op.kind == OpKind::FB) look(op.stage2, op.microbatch2, true);
  }
  auto device_of_rank = [&](int rank) {
    return static_cast<std::size_t>(rank) < input_.rank_device.size() ? input_.rank_device[rank]
                                                                      : rank;
  };
  auto input_wait = [&](int stage, int rank) {
    const int dev = device_of_rank(rank);
    return std::pair<std::string, std::string>(
        "waiting for input from stage " + std::to_string(stage) + " on device " +
            std::to_string(dev),
        ",\"from_stage\":" + std::to_string(stage) + ",\"from_rank\":" + std::to_string(rank) +
            ",\"from_device\":" + std::to_string(dev));
  };
  if (r.binding_reload && !first) {
    write_bubble(r.rank, from, r.start, "waiting for offloaded activations",
                 ",\"stage\":" + std::to_string(r.binding_stage));
    return;
  }
  if (!via) {
    if (first || r.binding_stage < 0) {
      write_bubble(r.rank, from, r.start, "warm-up", "");
    } else {
      const auto [cause, extra] =
          input_wait(r.binding_stage, schedule_.stage_rank[r.binding_stage]);
      write_bubble(r.rank, from, r.start, cause, extra);
    }
    return;
  }
  // Before the producer finished: the device waited for another device's compute (or,
  // before its first op, for the pipeline to fill). After: for the wire.
  const Time produced = std::clamp(via->requested, from, r.start);
  if (first) {
    write_bubble(r.rank, from, produced, "warm-up", "");
  } else {
    const auto [cause, extra] = input_wait(via->src_stage, via->src_rank);
    write_bubble(r.rank, from, produced, cause, extra);
  }
  write_bubble(r.rank, produced, r.start, "waiting for transfer",
               ",\"transfer\":" + std::to_string(via->id) +
                   ",\"from_rank\":" + std::to_string(via->src_rank) +
                   ",\"from_device\":" + std::to_string(device_of_rank(via->src_rank)));
}

void ChromeTraceWriter::write_op(const OpRecord& r) {
  const Op& op = r.op;
  auto half = [&](const char* prefix, int stage, int mb) {
    buf_ += ",\"";
    buf_ += prefix;
    buf_ += "stage\":" + std::to_string(stage) + ",\"" + prefix + "chunk\":" +
            std::to_string(stage >= 0 && stage < static_cast<int>(stage_chunk_.size())
                               ? stage_chunk_[stage]
                               : 0) +
            ",\"" + prefix + "microbatch\":" + std::to_string(mb);
    if (stage >= 0 && static_cast<std::size_t>(stage) < labels_.stage_layers.size()) {
      buf_ += ",\"";
      buf_ += prefix;
      buf_ += "layers\":";
      append_escaped(labels_.stage_layers[stage]);
    }
    buf_ += ",\"";
    buf_ += prefix;
    buf_ += "recompute\":";
    if (stage >= 0 && static_cast<std::size_t>(stage) < labels_.stage_recompute.size()) {
      append_escaped(labels_.stage_recompute[stage]);
      if (labels_.stage_recompute[stage] == "mixed" &&
          static_cast<std::size_t>(stage) < labels_.stage_recompute_layers.size()) {
        buf_ += ",\"";
        buf_ += prefix;
        buf_ += "recompute_layers\":";
        append_escaped(labels_.stage_recompute_layers[stage]);
      }
    } else {
      const bool on = stage >= 0 && static_cast<std::size_t>(stage) < input_.stages.size() &&
                      input_.stages[stage].recompute > 0;
      buf_ += on ? "\"yes\"" : "\"none\"";
    }
  };
  begin_event();
  buf_ += "\"ph\":\"X\",\"cat\":\"op\",\"name\":\"";
  buf_ += op_name(op.kind);
  buf_ += "\",\"pid\":";
  buf_ += std::to_string(r.rank);
  buf_ += ",\"tid\":0,\"ts\":";
  append_us(r.start);
  buf_ += ",\"dur\":";
  append_us(r.end - r.start);
  buf_ += ",\"args\":{\"op\":";
  append_escaped(to_string(op));
  half("", op.stage, op.microbatch);
  if (op.kind == OpKind::FB) half("backward_", op.stage2, op.microbatch2);
  buf_ += "}}";
  write_all_to_all(r);
}

void ChromeTraceWriter::write_all_to_all(const OpRecord& r) {
  const auto& parts = input_.stage_parts;
  const Op& op = r.op;
  const auto known = [&](int stage) {
    return stage >= 0 && static_cast<std::size_t>(stage) < parts.size();
  };
  std::vector<FbPiece> pieces;
  if (op.kind == OpKind::F && known(op.stage)) {
    pieces = fb_chain_timeline(parts[op.stage].forward, false);
  } else if (op.kind == OpKind::B && known(op.stage)) {
    pieces = fb_chain_timeline(parts[op.stage].backward, true);
  } else if (op.kind == OpKind::FB && known(op.stage) && known(op.stage2) && !input_.fb_pair_time &&
             !input_.fb_factor_explicit) {
    pieces = fb_pair_timeline(parts[op.stage].forward, parts[op.stage2].backward);
  }
  // Only where the parts are what the op ran (they add up to its duration).
  Time span = 0;
  for (const FbPiece& p : pieces) span = std::max(span, p.end);
  if (pieces.empty() || span != r.end - r.start) return;
  RankState& st = ranks_[r.rank];
  const std::string pid = std::to_string(r.rank), tid = std::to_string(kA2aTid);
  int count[2] = {0, 0};  // a2a seen per half: dispatch and combine alternate
  for (const FbPiece& p : pieces) {
    if (!p.comm) continue;
    if (!st.a2a_thread) {
      st.a2a_thread = true;
      begin_event();
      buf_ += "\"ph\":\"M\",\"pid\":" + pid + ",\"tid\":" + tid +
              ",\"name\":\"thread_name\",\"args\":{\"name\":\"all-to-all\"}}";
      begin_event();
      buf_ += "\"ph\":\"M\",\"pid\":" + pid + ",\"tid\":" + tid +
              ",\"name\":\"thread_sort_index\",\"args\":{\"sort_index\":" + tid + "}}";
    }
    // The forward runs dispatch, combine per layer; the backward combine-bwd, dispatch-bwd.
    const bool dispatch = (count[p.backward ? 1 : 0]++ % 2 == 0) != p.backward;
    const int stage = p.backward && op.kind == OpKind::FB ? op.stage2 : op.stage;
    const int mb = p.backward && op.kind == OpKind::FB ? op.microbatch2 : op.microbatch;
    begin_event();
    buf_ += "\"ph\":\"X\",\"cat\":\"all-to-all\",\"name\":\"";
    buf_ += dispatch ? "a2a dispatch" : "a2a combine";
    buf_ += "\",\"pid\":" + pid + ",\"tid\":" + tid + ",\"ts\":";
    append_us(r.start + p.start);
    buf_ += ",\"dur\":";
    append_us(p.end - p.start);
    buf_ += ",\"args\":{\"half\":";
    buf_ += p.backward ? "\"backward\"" : "\"forward\"";
    buf_ += ",\"stage\":" + std::to_string(stage) + ",\"microbatch\":" + std::to_string(mb) + "}}";
  }
}

void ChromeTraceWriter::consume(const OpRecord& r, int stage, int microbatch, bool gradient,
                                Time ts) {
  auto it = in_flight_.find(key(stage, microbatch, gradient));
  if (it == in_flight_.end()) return;  // produced on this device: no transfer, no arrow
  const InFlight& t = it->second;
  if (t.producer_ts >= 0) {
    const std::string id = std::to_string(t.id);
    begin_event();
    buf_ += "\"ph\":\"s\",\"cat\":\"flow\",\"name\":\"";
    buf_ += gradient ? "gradient" : "activation";
    buf_ += "\",\"id\":" + id + ",\"pid\":" + std::to_string(t.src_rank) + ",\"tid\":0,\"ts\":";
    append_us(t.producer_ts);
    buf_ += "}";
    begin_event();
    buf_ += "\"ph\":\"f\",\"bp\":\"e\",\"cat\":\"flow\",\"name\":\"";
    buf_ += gradient ? "gradient" : "activation";
    buf_ += "\",\"id\":" + id + ",\"pid\":" + std::to_string(r.rank) + ",\"tid\":0,\"ts\":";
    append_us(ts);
    buf_ += "}";
  }
  in_flight_.erase(it);
}

void ChromeTraceWriter::on_op(const OpRecord& r) {
  if (finished_ || r.rank < 0 || static_cast<std::size_t>(r.rank) >= ranks_.size()) return;
  RankState& st = ranks_[r.rank];
  // The transfers this op just sent now learn where their arrow starts.
  for (std::uint64_t k : st.sent_by_current_op) {
    auto it = in_flight_.find(k);
    if (it != in_flight_.end()) it->second.producer_ts = inside_end(r.start, r.end);
  }
  st.sent_by_current_op.clear();

  explain_gap(r, st.ops_done == 0);
  write_op(r);
  const Time ts = inside_start(r.start, r.end);
  const Op& op = r.op;
  switch (op.kind) {
    case OpKind::F:
      consume(r, op.stage, op.microbatch, false, ts);
      break;
    case OpKind::B:
    case OpKind::I:
      consume(r, op.stage, op.microbatch, true, ts);
      break;
    case OpKind::W:
      break;
    case OpKind::FB:
      consume(r, op.stage, op.microbatch, false, ts);
      consume(r, op.stage2, op.microbatch2, true, ts);
      break;
  }
  ++st.ops_done;
  st.last_end = r.end;
  flush_if_large();
}

void ChromeTraceWriter::on_transfer(const TransferRecord& t) {
  if (finished_ || t.src_rank < 0 || static_cast<std::size_t>(t.src_rank) >= ranks_.size()) return;
  RankState& st = ranks_[t.src_rank];
  // First lane whose previous transfer has ended: lanes never hold overlapping slices.
  std::size_t lane = 0;
  while (lane < st.lane_free.size() && st.lane_free[lane] > t.start) ++lane;
  const int tid = kFirstCommTid + static_cast<int>(lane);
  if (lane == st.lane_free.size()) {
    st.lane_free.push_back(0);
    begin_event();
    buf_ +=
        "\"ph\":\"M\",\"pid\":" + std::to_string(t.src_rank) + ",\"tid\":" + std::to_string(tid) +
        ",\"name\":\"thread_name\",\"args\":{\"name\":\"comm " + std::to_string(lane + 1) + "\"}}";
    begin_event();
    buf_ +=
        "\"ph\":\"M\",\"pid\":" + std::to_string(t.src_rank) + ",\"tid\":" + std::to_string(tid) +
        ",\"name\":\"thread_sort_index\",\"args\":{\"sort_index\":" + std::to_string(tid) + "}}";
  }
  st.lane_free[lane] = std::max(st.lane_free[lane], t.end);

  begin_event();
  buf_ += "\"ph\":\"X\",\"cat\":\"transfer\",\"name\":\"";
  buf_ += t.gradient ? "gradient" : "activation";
  buf_ += " \u2192 rank " + std::to_string(t.dst_rank) +
          "\",\"pid\":" + std::to_string(t.src_rank) + ",\"tid\":" + std::to_string(tid) +
          ",\"ts\":";
  append_us(t.start);
  buf_ += ",\"dur\":";
  append_us(t.end - t.start);
  buf_ += ",\"args\":{\"transfer\":" + std::to_string(t.id) +
          ",\"microbatch\":" + std::to_string(t.microbatch) +
          ",\"from_stage\":" + std::to_string(t.src_stage) +
          ",\"to_stage\":" + std::to_string(t.dst_stage) +
          ",\"to_rank\":" + std::to_string(t.dst_rank) + ",\"bytes\":" + std::to_string(t.bytes) +
          ",\"queued_us\":";
  append_us(t.start - t.requested);
  buf_ += "}}";

  const std::uint64_t k = key(t.dst_stage, t.microbatch, t.gradient);
  in_flight_[k] = InFlight{t.id, t.src_rank, t.src_stage, t.requested, -1};
  st.sent_by_current_op.push_back(k);
  flush_if_large();
}

void ChromeTraceWriter::on_memory(int rank, Time time, std::int64_t activation_bytes) {
  if (finished_ || rank < 0 || static_cast<std::size_t>(rank) >= ranks_.size()) return;
  RankState& st = ranks_[rank];
  const std::int64_t total = st.static_bytes + activation_bytes;
  if (total > st.peak_total) {
    st.peak_total = total;
    st.peak_activation = activation_bytes;
    st.peak_time = time;
  }
  // One counter event per quantity: chrome://tracing stacks the series of one counter
  // event, so activations, static and total in one event would draw twice the memory.
  counter(rank, time, kActivationCounter, activation_bytes);
  counter(rank, time, kTotalCounter, total);
  flush_if_large();
}

void ChromeTraceWriter::counter(int rank, Time time, const char* name, std::int64_t bytes) {
  begin_event();
  buf_ += "\"ph\":\"C\",\"cat\":\"memory\",\"name\":\"";
  buf_ += name;
  buf_ += "\",\"pid\":" + std::to_string(rank) + ",\"tid\":0,\"ts\":";
  append_us(time);
  buf_ += ",\"args\":{\"bytes\":" + std::to_string(bytes) + "}}";
}

void ChromeTraceWriter::on_copy(const CopyRecord& c) {
  if (finished_ || c.rank < 0 || static_cast<std::size_t>(c.rank) >= ranks_.size()) return;
  RankState& st = ranks_[c.rank];
  const std::string pid = std::to_string(c.rank);
  const int tid_n = c.to_host ? kCopyOutTid : kCopyBackTid;
  const std::string tid = std::to_string(tid_n);
  bool& named = c.to_host ? st.copy_out_thread : st.copy_back_thread;
  if (!named) {
    named = true;
    begin_event();
    buf_ += "\"ph\":\"M\",\"pid\":" + pid + ",\"tid\":" + tid +
            ",\"name\":\"thread_name\",\"args\":{\"name\":\"" +
            (c.peer_rank >= 0 ? (c.to_host ? "BPipe evict" : "BPipe load")
                              : (c.to_host ? "offload to host" : "reload from host")) +
            "\"}}";
    begin_event();
    buf_ += "\"ph\":\"M\",\"pid\":" + pid + ",\"tid\":" + tid +
            ",\"name\":\"thread_sort_index\",\"args\":{\"sort_index\":" + tid + "}}";
  }
  begin_event();
  buf_ += "\"ph\":\"X\",\"cat\":\"offload\",\"name\":\"";
  buf_ += (c.to_host ? "offload " : "reload ") + std::to_string(c.microbatch) + "@s" +
          std::to_string(c.stage);
  // BPipe (SimInput::bpipe): the bytes stay on the partner's device, not the host.
  if (c.peer_rank >= 0)
    buf_ += (c.to_host ? " to rank " : " from rank ") + std::to_string(c.peer_rank);
  buf_ += "\",\"pid\":" + pid + ",\"tid\":" + tid + ",\"ts\":";
  append_us(c.start);
  buf_ += ",\"dur\":";
  append_us(c.end - c.start);
  buf_ += ",\"args\":{\"bytes\":" + std::to_string(c.bytes) + ",\"issued_us\":";
  append_us(c.issued);
  buf_ += "}}";
  flush_if_large();
}

void ChromeTraceWriter::on_reduction(const ReductionRecord& g) {
  if (finished_ || g.rank < 0 || static_cast<std::size_t>(g.rank) >= ranks_.size()) return;
  RankState& st = ranks_[g.rank];
  const std::string pid = std::to_string(g.rank), tid = std::to_string(kReduceTid);
  if (!st.reduce_thread) {
    st.reduce_thread = true;
    begin_event();
    buf_ += "\"ph\":\"M\",\"pid\":" + pid + ",\"tid\":" + tid +
            ",\"name\":\"thread_name\",\"args\":{\"name\":\"grad reduce\"}}";
    begin_event();
    buf_ += "\"ph\":\"M\",\"pid\":" + pid + ",\"tid\":" + tid +
            ",\"name\":\"thread_sort_index\",\"args\":{\"sort_index\":" + tid + "}}";
  }
  begin_event();
  buf_ += "\"ph\":\"X\",\"cat\":\"reduce\",\"name\":\"";
  buf_ += g.stage >= 0 ? "dp reduce stage " + std::to_string(g.stage) : "tied embedding all-reduce";
  buf_ += "\",\"pid\":" + pid + ",\"tid\":" + tid + ",\"ts\":";
  append_us(g.start);
  buf_ += ",\"dur\":";
  append_us(g.end - g.start);
  buf_ += ",\"args\":{";
  if (g.stage >= 0)
    buf_ += "\"stage\":" + std::to_string(g.stage);
  else
    buf_ += "\"peer_rank\":" + std::to_string(g.peer_rank);
  buf_ += ",\"ready_us\":";
  append_us(g.ready);
  buf_ += "}}";
  flush_if_large();
}

void ChromeTraceWriter::on_result(const SimResult& result) {
  if (finished_ || !result.ok) return;
  for (const DeviceResult& d : result.devices)
    if (d.rank >= 0 && static_cast<std::size_t>(d.rank) < ranks_.size())
      ranks_[d.rank].tail_start = d.tail_start;
}

void ChromeTraceWriter::finish() {
  if (finished_) return;
  bool complete = true;
  Time pipeline_end = 0;
  for (std::size_t r = 0; r < ranks_.size(); ++r) {
    complete = complete && r < schedule_.ops.size() &&
               ranks_[r].ops_done == static_cast<int>(schedule_.ops[r].size());
    pipeline_end = std::max(pipeline_end, ranks_[r].last_end);
  }
  auto tail_of = [&](std::size_t r) {
    return r < input_.tail_time.size() ? input_.tail_time[r] : 0;
  };
  // Where the engine started the rank's tail (after its gradient reductions); without a
  // result, right after its last op.
  auto tail_start = [&](std::size_t r) {
    return ranks_[r].tail_start >= 0 ? ranks_[r].tail_start : ranks_[r].last_end;
  };
  Time iteration_end = pipeline_end;
  for (std::size_t r = 0; r < ranks_.size(); ++r)
    iteration_end = std::max(iteration_end, tail_start(r) + tail_of(r));

  for (std::size_t r = 0; r < ranks_.size() && complete; ++r) {
    const RankState& st = ranks_[r];
    const Time tail = tail_of(r), start = tail_start(r);
    const int rank = static_cast<int>(r);
    write_bubble(rank, st.last_end, start, "waiting for gradient reduction", "");
    if (tail > 0) {
      begin_event();
      buf_ += "\"ph\":\"X\",\"cat\":\"tail\",\"name\":\"";
      buf_ += "optimizer step";
      buf_ += "\",\"pid\":" + std::to_string(r) + ",\"tid\":0,\"ts\":";
      append_us(start);
      buf_ += ",\"dur\":";
      append_us(tail);
      buf_ += "}";
    }
    const Time free = start + tail;
    write_bubble(rank, free, pipeline_end, "cool-down", "");
    write_bubble(rank, std::max(free, pipeline_end), iteration_end, "dp all-reduce/optimizer", "");
  }
  for (std::size_t r = 0; r < ranks_.size(); ++r) {
    const RankState& st = ranks_[r];
    begin_event();
    buf_ += "\"ph\":\"i\",\"s\":\"p\",\"cat\":\"memory\",\"name\":\"peak memory\",\"pid\":" +
            std::to_string(r) + ",\"tid\":0,\"ts\":";
    append_us(st.peak_time);
    buf_ += ",\"args\":{\"total\":" + std::to_string(st.peak_total) +
            ",\"activations\":" + std::to_string(st.peak_activation) +
            ",\"static\":" + std::to_string(st.static_bytes) + "}}";
  }
  buf_ += "\n],\"otherData\":{\"generator\":\"bmpipe\",\"schedule\":";
  append_escaped(schedule_.name);
  buf_ += ",\"complete\":";
  buf_ += complete ? "true" : "false";
  buf_ += ",\"pipeline_time_us\":";
  append_us(pipeline_end);
  buf_ += ",\"iteration_time_us\":";
  append_us(iteration_end);
  buf_ += "}}\n";
  out_.write(buf_.data(), static_cast<std::streamsize>(buf_.size()));
  out_.flush();
  buf_.clear();
  buf_.shrink_to_fit();
  in_flight_.clear();
  finished_ = true;
}

SimResult simulate_with_trace(const SimInput& input, const Schedule& schedule, std::ostream& out,
                              const TraceLabels& labels) {
  ChromeTraceWriter writer(out, input, schedule, labels);
  SimResult result = simulate(input, schedule, &writer);
  writer.finish();
  return result;
}

}  // namespace bmpipe
