#pragma once
/// \file
/// Built-in schedules as an explicit table {name, description, generator, placement,
/// requirements}. Generators are pure functions of ScheduleParams; nothing registers itself
/// at static-init time. Callers decide by the table's properties (placement, needs_costs,
/// ranks_candidates), never by a schedule's name or generator.

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "schedules/op.hpp"

namespace bmpipe {

/// Costs the generators marked needs_costs (zb-auto, zb-v, v-half) plan with. Plain numbers,
/// because schedules/ must not depend on the engine: the config layer fills them from its
/// own cost model.
struct ScheduleCosts {
  /// Per stage of the schedule's placement (p for one stage per rank, 2p for V): forward,
  /// input-grad and weight-grad times in ns. Empty means unit costs F = I = W = 1.
  std::vector<std::int64_t> forward;
  std::vector<std::int64_t> backward_input;
  std::vector<std::int64_t> backward_weight;
  /// Time one activation or gradient takes to reach the neighbouring rank, ns.
  std::int64_t transfer = 0;
  /// Most micro-batches of one stage's activations a device may hold at once
  /// (F started, W not finished). Not given: 2p, which is what zb-h2 needs.
  std::optional<int> activation_limit;
};

/// Scores a candidate schedule: its simulated iteration time in ns, or nullopt when it
/// cannot run (deadlock). Generators marked ranks_candidates (zb-auto, zb-v) keep the
/// candidate it scores lowest, the first of equals. The experiment layer passes one that
/// runs the real engine on the config; schedules/ itself does not depend on the engine.
///
/// Without one (a direct call), they rank by their own planner's makespan under
/// ScheduleParams::costs (unit costs if none; every hop between ranks takes
/// costs.transfer, links never contended), which equals the engine's time when the engine
/// sees the same costs and free links. Only what that planner drew can be ranked so:
/// zb-auto then leaves out ZB-H1 and ZB-H2, and zb-v, when costs are given, its variants
/// drawn with unit costs.
using ScheduleEvaluator = std::function<std::optional<std::int64_t>(const Schedule&)>;

struct ScheduleParams {
  int pp = 1;                ///< pipeline devices
  int microbatches = 1;      ///< micro-batches per iteration
  int vpp = 1;               ///< chunks (virtual stages) per device, for schedules that use them
  ScheduleCosts costs = {};  ///< only generators marked needs_costs read these
  ScheduleEvaluator evaluate = {};  ///< only generators marked ranks_candidates call it
};

/// Thrown by a generator when its parameters are impossible (pp < 1, m < 1, ...).
struct ScheduleError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

using ScheduleGenerator = Schedule (*)(const ScheduleParams&);

/// Which rank holds which stage. A closed set: every built-in schedule uses one of these.
enum class Placement : std::uint8_t {
  kOnePerRank,  ///< p stages, stage s on rank s
  kLoop,        ///< p * vpp stages, stage s on rank s mod p (Megatron's interleaving)
  kV,           ///< 2p stages, rank r holds stages r and 2p-1-r, whatever vpp says
};

/// The fewest micro-batches a schedule runs: per_rank * p + extra.
struct MicrobatchMinimum {
  int per_rank = 0;
  int extra = 1;
  constexpr int at(int p) const { return per_rank * p + extra; }
};

/// The vpp values a schedule accepts, from `lo` to `hi` inclusive.
struct VppRange {
  int lo = 1;
  int hi = 1;
  constexpr bool contains(int vpp) const { return lo <= vpp && vpp <= hi; }
};
/// VppRange::hi of a schedule that takes any vpp from `lo` up.
inline constexpr int kAnyVpp = std::numeric_limits<int>::max();

/// One row of the schedule table: what `bmpipe schedules`, `compare` and the config layer
/// need to know about a schedule without running it.
struct ScheduleInfo {
  std::string_view name;
  std::string_view description;
  ScheduleGenerator generate;
  Placement placement = Placement::kOnePerRank;
  /// Reads ScheduleParams::costs (the config layer fills them only for these).
  bool needs_costs = false;
  /// Builds several candidates and keeps the one ScheduleParams::evaluate finds fastest.
  bool ranks_candidates = false;
  MicrobatchMinimum min_microbatches = {};
  /// Beyond p micro-batches, m must be a multiple of p (micro-batches run in groups of p).
  bool microbatches_in_groups_of_pp = false;
  VppRange vpp = {};
  // Where else the schedule appears. Lists of schedules elsewhere are read off these, so a
  // new row is found by all of them without editing any.
  /// `plan --schedule auto` plans it and ranks it against the others (auto_candidates).
  bool auto_candidate = false;
  /// `bmpipe search` tries it when --schedules is not given (search_default_schedules).
  bool search_default = false;
  // Which frameworks run it is each framework's to say, in its own folder
  // (frameworks/*/schedules.hpp): this table names no framework.
};

/// Every built-in schedule, in the order `bmpipe schedules` lists them.
std::span<const ScheduleInfo> builtin_schedules();

/// The table entry called `name`, or nullptr.
const ScheduleInfo* find_schedule(std::string_view name);

/// The chunks per rank a schedule is tried with when none are given, by `plan --schedule
/// auto` and `bmpipe search` alike (one rule): a loop-placed schedule 2, 3 and 4, each only
/// while every stage gets a layer (pp x chunks <= layers; the planner splits the layers
/// unevenly when they do not divide) and none when pp is 1; any other schedule its one vpp.
std::vector<int> default_vpps(const ScheduleInfo& info, int pp, int layers);

/// What `plan --schedule auto` plans for a pipeline of `pp` ranks, `microbatches`
/// micro-batches and `layers` layers, as (name, vpp), in table order: every
/// auto_candidate row whose stages the layers can fill and whose micro-batch rules hold;
/// a loop-placed schedule once for each vpp of 2, 3 and 4 that fits (none when pp is 1).
std::vector<std::pair<std::string, int>> auto_candidates(int pp, int microbatches, int layers);

/// The schedules `bmpipe search` tries by default (search_default rows), in table order.
std::vector<std::string> search_default_schedules();

/// Comma-separated names of all built-in schedules, for error messages and --help.
std::string schedule_names();

/// The schedule list for `bmpipe schedules` and `compare --help`: one entry per schedule
/// with its placement, what it requires of pp, vpp and m, and its description. Generated
/// from the table, so it cannot fall out of step with it.
std::string schedule_help();

/// Stages each rank holds under `placement` when the config asks for `vpp`: 1, vpp, or 2.
int chunks_per_rank(Placement placement, int vpp);

/// The vpp a schedule really runs with when the config asks for `config_vpp`.
int effective_vpp(const ScheduleInfo& info, int config_vpp);

/// The rank that holds `stage` of a pipeline of `p` ranks under `placement`.
int stage_rank(Placement placement, int stage, int p);

/// The stage that chunk `chunk` (0 .. chunks_per_rank - 1) of rank `rank` holds: the
/// inverse of stage_rank.
int chunk_stage(Placement placement, int rank, int chunk, int p);

/// A schedule with its shape set (p ranks, p * chunks_per_rank(placement, vpp) stages
/// placed by stage_rank, m micro-batches) and p empty op lists.
Schedule empty_schedule(std::string name, Placement placement, int p, int vpp, int m);

/// Throws ScheduleError when `params` break a rule of `info` (pp < 1, m below the minimum or
/// not in groups of pp, vpp outside the accepted range), naming the schedule. Every
/// generator calls it first, so a direct call checks exactly what the table says.
void check_params(const ScheduleInfo& info, const ScheduleParams& params);

/// How every built-in generator starts: check_params against the table row called `name`
/// (which must exist), then empty_schedule with that row's placement.
Schedule start_schedule(std::string_view name, const ScheduleParams& params);

// Generators (also callable directly).
Schedule make_gpipe(const ScheduleParams& params);
Schedule make_1f1b(const ScheduleParams& params);
/// Megatron-LM's interleaved 1F1B (Narayanan et al., SC 2021).
Schedule make_interleaved(const ScheduleParams& params);
/// Handcrafted zero-bubble schedules (Qi et al., "Zero Bubble Pipeline Parallelism",
/// ICLR 2024): ZB-H1 keeps 1F1B's memory, ZB-H2 holds up to 2p-1 micro-batches.
Schedule make_zb_h1(const ScheduleParams& params);
Schedule make_zb_h2(const ScheduleParams& params);
/// The V-shaped zero-bubble schedule ZB-V (Qi et al., "Pipeline Parallelism with
/// Controllable Memory", 2024): device r holds stages r and 2p-1-r; 1F1B's activation
/// memory, and with F = I = W no bubble beyond the (p-1)F warm-up.
Schedule make_zb_v(const ScheduleParams& params);
/// V-Min (same paper): V placement at about 1/3 of 1F1B's activation memory, about 2/3
/// of its bubble, built by repeating one tightly drawn block per micro-batch.
Schedule make_v_min(const ScheduleParams& params);
/// V-Half (same paper): V placement at about 1/2 of 1F1B's activation memory and, with
/// F = I = W, 1/2 of its bubble; one repeated block per micro-batch (see v_half.cpp).
Schedule make_v_half(const ScheduleParams& params);
/// The automatic zero-bubble scheduler: greedy, cost-aware, under a memory limit.
Schedule make_zb_auto(const ScheduleParams& params);
/// DeepSeek's DualPipeV (DeepSeek-V3 technical report, 2024): V placement with
/// overlapped forward-and-backward pairs.
Schedule make_dualpipe_v(const ScheduleParams& params);

}  // namespace bmpipe
