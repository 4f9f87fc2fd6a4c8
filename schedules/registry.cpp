// The table of built-in schedules. Adding a schedule = one generator + one row here.
#include "schedules/registry.hpp"

namespace bmpipe {

namespace {
constexpr ScheduleInfo kBuiltins[] = {
    {"gpipe", "GPipe: all forwards, then all backwards; holds m micro-batches of activations",
     &make_gpipe, 1},
    {"1f1b", "1F1B (PipeDream-flush): p-r-1 warm-up forwards, then alternate F and B", &make_1f1b,
     1},
    {"interleaved",
     "Megatron interleaved 1F1B, vpp chunks per device (stage s on rank s mod p); "
     "m must be a multiple of p (or at most p)",
     &make_interleaved, 0},
    {"zb-h1",
     "Zero Bubble H1 (Qi et al. 2024): split backward (I, W); 1F1B's memory, bubble (p-1)(F+I-W)",
     &make_zb_h1, 1},
    {"zb-h2",
     "Zero Bubble H2: extra warm-up forwards, up to 2p-1 micro-batches; bubble (p-1)(F+I-2W)",
     &make_zb_h2, 1},
    {"zb-v", "ZB-V: V placement (rank r holds stages r, 2p-1-r), split backward; 1F1B's memory",
     &make_zb_v, 2},
    {"v-min",
     "V-Min (Qi et al., Controllable Memory): V placement, ~1/3 of 1F1B's activations, ~2/3 of its "
     "bubble",
     &make_v_min, 2},
    {"v-half",
     "V-Half (Qi et al., Controllable Memory): V placement, repeated block; ~1/2 of 1F1B's "
     "activations (p+2 of 2p half-stages for even p, p+1 for odd), 1/2 of its bubble at F=I=W "
     "(~0.7 at F=I=2W); steady state keeps full speed for F <= I <= F+W",
     &make_v_half, 2},
    {"zb-auto",
     "automatic zero-bubble: greedy on the config's F/I/W, transfer time and "
     "training.activation_limit_microbatches (default 2p)",
     &make_zb_auto, 1},
    {"dualpipe-v",
     "DeepSeek DualPipeV: V placement, overlapped F&B pairs (training.overlap_factor / "
     "overlap_ms); needs m >= 2p",
     &make_dualpipe_v, 2},
};
}  // namespace

std::span<const ScheduleInfo> builtin_schedules() {
  return kBuiltins;
}

const ScheduleInfo* find_schedule(std::string_view name) {
  for (const auto& info : kBuiltins)
    if (info.name == name) return &info;
  return nullptr;
}

std::string schedule_names() {
  std::string names;
  for (const auto& info : kBuiltins) {
    if (!names.empty()) names += ", ";
    names += info.name;
  }
  return names;
}

int effective_vpp(const ScheduleInfo& info, int config_vpp) {
  return info.chunks == 0 ? config_vpp : info.chunks;
}

}  // namespace bmpipe
