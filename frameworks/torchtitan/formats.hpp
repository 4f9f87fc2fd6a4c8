#pragma once
/// \file
/// torchtitan's pipeline vocabulary: its schedule names as bmpipe's schedules, how it splits
/// the layers into stages and places them on ranks, and which layers its layer-selective
/// activation checkpointing wraps. The importer reads with these and the exporter writes with
/// them, so both follow one reading of torchtitan's sources. Pure functions; a value
/// torchtitan refuses is a FormatError whose message says why.

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "frameworks/common/formats.hpp"
#include "sim/recompute.hpp"

namespace bmpipe {

/// One of the schedules torch.distributed.pipelining names (get_schedule_class).
struct TorchTitanSchedule {
  std::string_view name;      ///< as torchtitan spells it: "Interleaved1F1B"
  std::string_view schedule;  ///< bmpipe's schedule that runs it, or "" for none
  bool multi = false;         ///< several stages per rank (PipelineScheduleMulti)
  bool v = false;             ///< V placement: rank r holds stages r and 2pp-1-r
  /// Why bmpipe cannot run it, when `schedule` is empty.
  std::string_view why;
};

/// Every schedule name torchtitan takes, in get_schedule_class's order.
std::span<const TorchTitanSchedule> torchtitan_schedules();

/// The schedule called `name`, compared as torch does (case-insensitively), or nullptr.
const TorchTitanSchedule* find_torchtitan_schedule(std::string_view name);

/// The torchtitan name of bmpipe's schedule `schedule`, or "" when torchtitan has none.
std::string_view torchtitan_schedule_name(std::string_view schedule);

/// torchtitan's split of `layers` decoder layers into `stages` stages when the embedding
/// counts as `input_weight` layers and the norm and output as `output_weight`
/// (generate_llm_fqn_per_model_part). Throws FormatError where torchtitan raises.
std::vector<int> torchtitan_partition(int layers, int stages, int input_weight, int output_weight);

/// The stage indices rank `rank` of `pp` holds, in the order torchtitan builds them: r, r +
/// pp, ... (looped), or r and 2pp - 1 - r (V).
std::vector<int> torchtitan_rank_stages(int rank, int pp, int stages, bool v);

/// The modes of every layer (model order) under layer-selective checkpointing every
/// `freq`-th layer (selective_ac_option "freq"; 0 wraps every layer): each rank counts the
/// layers of its stages, in build order, from 1, and wraps those whose count is a multiple
/// of freq (torchtitan's _apply_layer_sac). `partition` is per stage, `pp` ranks.
std::vector<Recompute> torchtitan_layer_sac(const std::vector<int>& partition, int pp, bool v,
                                            int freq);

/// "layers.N" names of each stage, with "tok_embeddings" first and "norm", "output" last: a
/// module_fqns_per_model_part list of `partition`, in TOML.
std::string torchtitan_module_fqns(const std::vector<int>& partition);

}  // namespace bmpipe
