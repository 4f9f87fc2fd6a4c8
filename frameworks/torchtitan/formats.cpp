#include "frameworks/torchtitan/formats.hpp"

#include <array>
#include <cctype>
#include <cstddef>

// Sources (read, not copied), cited below by these short names:
//  [PT-sched]  pytorch/pytorch, torch/distributed/pipelining/schedules.py, get_schedule_class:
//              the names 1F1B, Interleaved1F1B, GPipe, LoopedBFS, InterleavedZeroBubble,
//              PipelineScheduleSingle, PipelineScheduleMulti, ZBVZeroBubble, DualPipeV,
//              compared lower-cased; the PyTorch nightly torchtitan v0.2.2 builds against.
//  [TT-pp]     pytorch/torchtitan at v0.2.2 (73a0e6979dd1),
//              torchtitan/distributed/pipeline_parallel.py: pipeline_llm (1 stage per rank
//              for single-stage schedules, 2 for the others unless
//              pipeline_parallel_layers_per_stage), generate_llm_fqn_per_model_part (the
//              split), pipeline_module_split (_get_stage_indices: "loop" or "v" placement,
//              V for ZBVZeroBubble and DualPipeV with 2 stages per rank).
//  [TT-ac]     the same tag, torchtitan/distributed/activation_checkpoint.py,
//              _apply_layer_sac: a per-process counter of wrapped layers, from 1; a layer is
//              checkpointed when ac_freq is 0 or the counter is a multiple of it.

namespace bmpipe {

namespace {

// clang-format off
constexpr std::array kSchedules = {
    TorchTitanSchedule{"1F1B", "1f1b", false, false, {}},
    TorchTitanSchedule{"Interleaved1F1B", "interleaved", true, false, {}},
    TorchTitanSchedule{"GPipe", "gpipe", false, false, {}},
    TorchTitanSchedule{"LoopedBFS", "", true, false,
                       "a looped breadth-first schedule (every micro-batch through a rank's "
                       "first stage, then its next), which bmpipe has no schedule for"},
    TorchTitanSchedule{"InterleavedZeroBubble", "", true, false,
                       "an interleaved zero-bubble schedule (looped stages with split "
                       "backward), which bmpipe has no schedule for"},
    TorchTitanSchedule{"PipelineScheduleSingle", "", false, false,
                       "a schedule read from pipeline_parallel_schedule_csv, which bmpipe "
                       "does not read"},
    TorchTitanSchedule{"PipelineScheduleMulti", "", true, false,
                       "a schedule read from pipeline_parallel_schedule_csv, which bmpipe "
                       "does not read"},
    TorchTitanSchedule{"ZBVZeroBubble", "zb-v", true, true, {}},
    TorchTitanSchedule{"DualPipeV", "dualpipe-v", true, true, {}},
};
// clang-format on

bool same_lower(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  return true;
}

}  // namespace

std::span<const TorchTitanSchedule> torchtitan_schedules() {
  return kSchedules;
}

const TorchTitanSchedule* find_torchtitan_schedule(std::string_view name) {
  for (const TorchTitanSchedule& s : kSchedules)  // [PT-sched]: case-insensitive
    if (same_lower(s.name, name)) return &s;
  return nullptr;
}

std::string_view torchtitan_schedule_name(std::string_view schedule) {
  for (const TorchTitanSchedule& s : kSchedules)
    if (!s.schedule.empty() && s.schedule == schedule) return s.name;
  return {};
}

std::vector<int> torchtitan_partition(int layers, int stages, int input_weight, int output_weight) {
  // [TT-pp] generate_llm_fqn_per_model_part.
  if (stages < 1) throw FormatError("the number of stages must be at least 1");
  if (stages == 1) return {layers};
  const long long effective = static_cast<long long>(layers) + input_weight + output_weight;
  if (stages > effective)
    throw FormatError("number of stages (" + std::to_string(stages) +
                      ") cannot be greater than effective layers (" + std::to_string(effective) +
                      ")");
  const long long per = effective / stages;
  const long long extra = effective % stages;
  if (input_weight > per)
    throw FormatError("input_weight (" + std::to_string(input_weight) +
                      ") exceeds minimum layers per stage (" + std::to_string(per) + ")");
  if (output_weight > per)
    throw FormatError("output_weight (" + std::to_string(output_weight) +
                      ") exceeds minimum layers per stage (" + std::to_string(per) + ")");
  std::vector<int> partition;
  long long placed = 0;
  for (int s = 0; s < stages; ++s) {
    long long n = per + (s < extra ? 1 : 0);
    if (s == 0) n -= input_weight;
    if (s == stages - 1) n -= output_weight;
    // torchtitan adds layers while any are left; the last stage takes what is left as well.
    n = std::max(0LL, std::min(n, layers - placed));
    if (s == stages - 1) n = layers - placed;
    partition.push_back(static_cast<int>(n));
    placed += n;
  }
  return partition;
}

std::vector<int> torchtitan_rank_stages(int rank, int pp, int stages, bool v) {
  // [TT-pp] _get_stage_indices.
  if (v) return {rank, 2 * pp - 1 - rank};
  std::vector<int> out;
  for (int s = rank; s < stages; s += pp) out.push_back(s);
  return out;
}

std::vector<Recompute> torchtitan_layer_sac(const std::vector<int>& partition, int pp, bool v,
                                            int freq) {
  const std::vector<int> starts = stage_starts(partition);
  const int stages = static_cast<int>(partition.size());
  std::vector<Recompute> modes(static_cast<std::size_t>(starts.back()), Recompute::none);
  for (int r = 0; r < pp; ++r) {
    long long count = 0;  // [TT-ac]: one counter per process
    for (int s : torchtitan_rank_stages(r, pp, stages, v))
      for (int i = starts[s]; i < starts[s + 1]; ++i)
        if (++count, freq == 0 || count % freq == 0) modes[i] = Recompute::full;
  }
  return modes;
}

std::string torchtitan_module_fqns(const std::vector<int>& partition) {
  std::string out = "[";
  int layer = 0;
  for (std::size_t s = 0; s < partition.size(); ++s) {
    out += s > 0 ? ",\n  [" : "\n  [";
    bool first = true;
    auto add = [&](const std::string& name) {
      out += (first ? "\"" : ", \"") + name + "\"";
      first = false;
    };
    if (s == 0) add("tok_embeddings");
    for (int k = 0; k < partition[s]; ++k) add("layers." + std::to_string(layer++));
    if (s + 1 == partition.size()) {
      add("norm");
      add("output");
    }
    out += "]";
  }
  return out + "\n]";
}

}  // namespace bmpipe
