// The table of built-in schedules. Adding a schedule = one generator + one row here; the
// row's properties drive the parameter check, the placement, `bmpipe schedules` and the
// config layer, so none of those needs to know schedule names.
#include "schedules/registry.hpp"

#include <algorithm>
#include <sstream>

namespace bmpipe {

namespace {

constexpr VppRange kVppOne{1, 1};
constexpr VppRange kVppAny{1, kAnyVpp};
// A V schedule always runs two chunks; vpp 1 is accepted so that a config written for
// one-stage schedules can be compared with it unchanged.
constexpr VppRange kVppV{1, 2};

constexpr ScheduleInfo kBuiltins[] = {
    {.name = "gpipe",
     .description = "GPipe: all forwards, then all backwards; holds m micro-batches of activations",
     .generate = &make_gpipe,
     .placement = Placement::kOnePerRank,
     .vpp = kVppOne},
    {.name = "1f1b",
     .description = "1F1B (PipeDream-flush): p-r-1 warm-up forwards, then alternate F and B",
     .generate = &make_1f1b,
     .placement = Placement::kOnePerRank,
     .vpp = kVppOne,
     .auto_candidate = true,
     .search_default = true},
    {.name = "interleaved",
     .description = "Megatron interleaved 1F1B (Narayanan et al. 2021), vpp chunks per device",
     .generate = &make_interleaved,
     .placement = Placement::kLoop,
     .microbatches_in_groups_of_pp = true,
     .vpp = kVppAny,
     .auto_candidate = true,
     .search_default = true},
    {.name = "zb-h1",
     .description = "Zero Bubble H1 (Qi et al. 2024): split backward (I, W); 1F1B's memory, bubble "
                    "(p-1)(F+I-W)",
     .generate = &make_zb_h1,
     .placement = Placement::kOnePerRank,
     .vpp = kVppOne,
     .auto_candidate = true},
    {.name = "zb-h2",
     .description =
         "Zero Bubble H2: extra warm-up forwards, up to 2p-1 micro-batches; bubble (p-1)(F+I-2W)",
     .generate = &make_zb_h2,
     .placement = Placement::kOnePerRank,
     .vpp = kVppOne},
    {.name = "zb-v",
     .description = "ZB-V (Qi et al., Controllable Memory): split backward; 1F1B's memory, and at "
                    "F=I=W no bubble beyond the warm-up",
     .generate = &make_zb_v,
     .placement = Placement::kV,
     .needs_costs = true,
     .ranks_candidates = true,
     .vpp = kVppV,
     .auto_candidate = true},
    {.name = "v-min",
     .description = "V-Min (Qi et al., Controllable Memory): ~1/3 of 1F1B's activations, ~2/3 of "
                    "its bubble",
     .generate = &make_v_min,
     .placement = Placement::kV,
     .vpp = kVppV},
    {.name = "v-half",
     .description =
         "V-Half (Qi et al., Controllable Memory): repeated block; ~1/2 of 1F1B's activations "
         "(p+2 of 2p half-stages for even p, p+1 for odd), 1/2 of its bubble at F=I=W (~0.7 at "
         "F=I=2W); steady state keeps full speed for F <= I <= F+W",
     .generate = &make_v_half,
     .placement = Placement::kV,
     .needs_costs = true,
     .vpp = kVppV},
    {.name = "zb-auto",
     .description = "automatic zero-bubble: greedy on the config's F/I/W, transfer time and "
                    "training.activation_limit_microbatches (default 2p)",
     .generate = &make_zb_auto,
     .placement = Placement::kOnePerRank,
     .needs_costs = true,
     .ranks_candidates = true,
     .vpp = kVppOne},
    {.name = "dualpipe-v",
     .description = "DeepSeek DualPipeV: overlapped F&B pairs (training.overlap_factor / "
                    "overlap_ms)",
     .generate = &make_dualpipe_v,
     .placement = Placement::kV,
     .min_microbatches = {2, 0},
     .vpp = kVppV},
};

/// "2p", "2p + 1", "3": the minimum as a formula of p, for messages and help.
std::string formula(const MicrobatchMinimum& min) {
  if (min.per_rank == 0) return std::to_string(min.extra);
  std::string text = (min.per_rank == 1 ? "" : std::to_string(min.per_rank)) + "p";
  if (min.extra > 0) text += " + " + std::to_string(min.extra);
  if (min.extra < 0) text += " - " + std::to_string(-min.extra);
  return text;
}

std::string placement_text(Placement placement) {
  switch (placement) {
    case Placement::kOnePerRank:
      return "one stage per device, stage s on rank s";
    case Placement::kLoop:
      return "loop, stage s on rank s mod p, vpp stages per device";
    case Placement::kV:
      return "V, rank r holds stages r and 2p-1-r";
  }
  return "?";
}

std::string vpp_text(const VppRange& vpp) {
  if (vpp.lo == vpp.hi) return "vpp " + std::to_string(vpp.lo);
  if (vpp.hi == kAnyVpp) return "vpp >= " + std::to_string(vpp.lo);
  if (vpp.hi == vpp.lo + 1)
    return "vpp " + std::to_string(vpp.lo) + " or " + std::to_string(vpp.hi);
  return "vpp " + std::to_string(vpp.lo) + ".." + std::to_string(vpp.hi);
}

/// Appends `text` to `out` in lines of at most `width` characters (longer words stay
/// whole), every line after the first starting with `indent` spaces.
void wrap(std::string& out, std::string_view text, std::size_t indent, std::size_t width) {
  std::size_t column = indent;
  bool first = true;
  std::istringstream words{std::string(text)};
  for (std::string word; words >> word;) {
    if (!first && column + 1 + word.size() > width) {
      out += '\n';
      out.append(indent, ' ');
      column = indent;
      first = true;
    }
    if (!first) out += ' ', ++column;
    out += word;
    column += word.size();
    first = false;
  }
  out += '\n';
}

}  // namespace

std::span<const ScheduleInfo> builtin_schedules() {
  return kBuiltins;
}

const ScheduleInfo* find_schedule(std::string_view name) {
  for (const auto& info : kBuiltins)
    if (info.name == name) return &info;
  return nullptr;
}

std::vector<int> default_vpps(const ScheduleInfo& info, int pp, int layers) {
  // A loop needs several ranks to interleave over; it is tried with 2, 3 and 4 chunks.
  if (info.placement != Placement::kLoop) return {effective_vpp(info, 1)};
  std::vector<int> out;
  if (pp > 1)
    for (int v : {2, 3, 4})
      if (pp * chunks_per_rank(info.placement, v) <= layers) out.push_back(v);
  return out;
}

std::vector<std::pair<std::string, int>> auto_candidates(int pp, int microbatches, int layers) {
  std::vector<std::pair<std::string, int>> out;
  for (const ScheduleInfo& info : kBuiltins) {
    if (!info.auto_candidate) continue;
    if (info.microbatches_in_groups_of_pp && microbatches > pp && microbatches % pp != 0) continue;
    // A schedule that refuses the config (too few micro-batches, say) is listed by the
    // planner as refused, with its reason, rather than left out here.
    for (int v : default_vpps(info, pp, layers))
      if (pp * chunks_per_rank(info.placement, v) <= layers) out.emplace_back(info.name, v);
  }
  return out;
}

std::vector<std::string> search_default_schedules() {
  std::vector<std::string> out;
  for (const ScheduleInfo& info : kBuiltins)
    if (info.search_default) out.emplace_back(info.name);
  return out;
}

std::string schedule_names() {
  std::string names;
  for (const auto& info : kBuiltins) {
    if (!names.empty()) names += ", ";
    names += info.name;
  }
  return names;
}

std::string schedule_help() {
  constexpr std::size_t kIndent = 14;
  constexpr std::size_t kWidth = 100;
  std::string out;
  for (const auto& info : kBuiltins) {
    out += info.name;
    out.append(info.name.size() + 1 < kIndent ? kIndent - info.name.size() : 1, ' ');
    wrap(out, info.description, kIndent, kWidth);
    std::string placement = "placement: " + placement_text(info.placement) + " (" +
                            vpp_text(info.vpp) +
                            (info.placement == Placement::kV ? ", runs with 2)" : ")");
    std::string needs;
    if (info.min_microbatches.per_rank > 0 || info.min_microbatches.extra > 1)
      needs = "needs m >= " + formula(info.min_microbatches);
    if (info.microbatches_in_groups_of_pp) needs = "needs m <= p or a multiple of p";
    std::string uses;
    if (info.needs_costs) uses = "plans with the config's stage costs";
    if (info.ranks_candidates)
      uses += (uses.empty() ? "" : "; ") +
              std::string("keeps the fastest of its candidates as simulated");
    for (const std::string* line : {&placement, &needs, &uses}) {
      if (line->empty()) continue;
      out.append(kIndent, ' ');
      wrap(out, *line, kIndent, kWidth);
    }
  }
  return out;
}

int chunks_per_rank(Placement placement, int vpp) {
  switch (placement) {
    case Placement::kOnePerRank:
      return 1;
    case Placement::kLoop:
      return vpp;
    case Placement::kV:
      return 2;
  }
  return 1;
}

int effective_vpp(const ScheduleInfo& info, int config_vpp) {
  return chunks_per_rank(info.placement, config_vpp);
}

int stage_rank(Placement placement, int stage, int p) {
  switch (placement) {
    case Placement::kOnePerRank:
      return stage;
    case Placement::kLoop:
      return stage % p;
    case Placement::kV:
      return stage < p ? stage : 2 * p - 1 - stage;
  }
  return stage;
}

int chunk_stage(Placement placement, int rank, int chunk, int p) {
  switch (placement) {
    case Placement::kOnePerRank:
      return rank;
    case Placement::kLoop:
      return chunk * p + rank;
    case Placement::kV:
      return chunk == 0 ? rank : 2 * p - 1 - rank;
  }
  return rank;
}

Schedule empty_schedule(std::string name, Placement placement, int p, int vpp, int m) {
  Schedule s;
  s.name = std::move(name);
  s.num_ranks = p;
  s.num_stages = p * chunks_per_rank(placement, vpp);
  s.num_microbatches = m;
  s.stage_rank.resize(s.num_stages);
  for (int st = 0; st < s.num_stages; ++st) s.stage_rank[st] = stage_rank(placement, st, p);
  s.ops.resize(p);
  return s;
}

void check_params(const ScheduleInfo& info, const ScheduleParams& params) {
  const std::string name(info.name);
  const int p = params.pp;
  const int m = params.microbatches;
  const int v = params.vpp;
  if (p < 1) throw ScheduleError(name + ": pp must be at least 1");
  const MicrobatchMinimum& min = info.min_microbatches;
  if (min.per_rank == 0 && m < std::max(min.extra, 1))
    throw ScheduleError(name + ": microbatches must be at least " +
                        std::to_string(std::max(min.extra, 1)));
  if (!info.vpp.contains(v)) {
    switch (info.placement) {
      case Placement::kOnePerRank:
        throw ScheduleError(name + " holds one stage per device; vpp must be 1 (got " +
                            std::to_string(v) + ")");
      case Placement::kV:
        throw ScheduleError(name +
                            " always holds 2 stages per device (V placement); vpp must be 1 or 2 "
                            "(got " +
                            std::to_string(v) + ")");
      case Placement::kLoop:
        throw ScheduleError(
            name + ": vpp must be at least " + std::to_string(info.vpp.lo) +
            (info.vpp.hi == kAnyVpp ? "" : " and at most " + std::to_string(info.vpp.hi)) +
            " (got " + std::to_string(v) + ")");
    }
  }
  if (min.per_rank > 0 && m < std::max(min.at(p), 1))
    throw ScheduleError(name + " needs at least " + formula(min) + " = " +
                        std::to_string(min.at(p)) + " micro-batches (got " + std::to_string(m) +
                        ")");
  // Micro-batches run in groups of p. A smaller last group after full ones deadlocks with
  // Megatron's warm-up depth (a rank needs the gradient of a micro-batch whose forward it
  // has not yet sent on), so such m is refused rather than silently reordered. A single
  // group (m <= p) is fine.
  if (info.microbatches_in_groups_of_pp && m > p && m % p != 0)
    throw ScheduleError(
        name +
        " needs microbatches to be a multiple of pp (or at most pp); got m = " + std::to_string(m) +
        ", pp = " + std::to_string(p) + " (try m = " + std::to_string((m / p) * p) + " or " +
        std::to_string((m / p + 1) * p) + ")");
}

Schedule start_schedule(std::string_view name, const ScheduleParams& params) {
  const ScheduleInfo* info = find_schedule(name);
  // Only the generators call this, each with its own row's name: a miss is a bug here.
  if (!info) throw std::logic_error("start_schedule: no schedule '" + std::string(name) + "'");
  check_params(*info, params);
  return empty_schedule(std::string(name), info->placement, params.pp, params.vpp,
                        params.microbatches);
}

}  // namespace bmpipe
