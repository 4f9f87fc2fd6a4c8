#pragma once
/// \file
/// Built-in schedules as an explicit table {name, description, generator}. Generators are
/// pure functions of ScheduleParams; nothing registers itself at static-init time.

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "schedules/op.hpp"

namespace bmpipe {

/// Costs a cost-aware generator (zb-auto) plans with. Plain numbers, because schedules/
/// must not depend on the engine: the config layer fills them from its own cost model.
struct ScheduleCosts {
  /// Per stage of the schedule (pp stages for zb-auto): forward, input-grad and
  /// weight-grad times in ns. Empty means unit costs F = I = W = 1.
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
/// cannot run (deadlock). Generators that try several candidates (zb-auto, zb-v) keep the
/// fastest by this measure. The experiment layer passes one that runs the real engine on
/// the real stage costs; schedules/ itself does not depend on the engine.
using ScheduleEvaluator = std::function<std::optional<std::int64_t>(const Schedule&)>;

struct ScheduleParams {
  int pp = 1;                ///< pipeline devices
  int microbatches = 1;      ///< micro-batches per iteration
  int vpp = 1;               ///< chunks (virtual stages) per device, for schedules that use them
  ScheduleCosts costs = {};  ///< only cost-aware generators (zb-auto) read these
  ScheduleEvaluator evaluate = {};  ///< only generators that rank candidates call it
};

/// Thrown by a generator when its parameters are impossible (pp < 1, m < 1, ...).
struct ScheduleError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

using ScheduleGenerator = Schedule (*)(const ScheduleParams&);

struct ScheduleInfo {
  std::string_view name;
  std::string_view description;
  ScheduleGenerator generate;
  /// Stages each device holds: 1 (one stage per device), 2 (V placement, whatever vpp
  /// says), or 0 (takes vpp from the parameters). Lets `bmpipe compare` run schedules of
  /// different shapes on one config.
  int chunks = 1;
};

/// Every built-in schedule, in the order `bmpipe schedules` lists them.
std::span<const ScheduleInfo> builtin_schedules();

/// The table entry called `name`, or nullptr.
const ScheduleInfo* find_schedule(std::string_view name);

/// Comma-separated names of all built-in schedules, for error messages and --help.
std::string schedule_names();

/// The vpp a schedule really runs with when the config asks for `config_vpp`.
int effective_vpp(const ScheduleInfo& info, int config_vpp);

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
