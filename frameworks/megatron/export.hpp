#pragma once
/// \file
/// A plan in Megatron-LM's words: its command-line flags. Pure functions of the layout;
/// nothing here simulates.

#include <string>
#include <vector>

#include "frameworks/common/export_layout.hpp"  // ExportLayout, ExportJob

namespace bmpipe {

/// Megatron-LM flags, one per line.
struct MegatronExport {
  bool exact = true;       ///< false: Megatron cannot express the plan; see `note`
  std::string note;        ///< why not, in one or two sentences (empty when exact)
  ExportLayout expressed;  ///< the plan the flags describe (the nearest one when !exact)
  std::string flags;       ///< e.g. "--pipeline-model-parallel-size 8\n..."
};
MegatronExport export_megatron(const ExportLayout& layout);

/// The whole job in Megatron-LM's flags, to append to a launch script (argparse keeps a
/// flag's last value): first, as `#` lines, the flags to remove from the script because
/// no value of theirs below would undo them (the other partition and vpp flags, the
/// recompute flags the plan does not use, --sequence-parallel when it is off); then
/// --tensor-model-parallel-size, `x.flags` (pp, layers, partition, recompute),
/// --micro-batch-size, --global-batch-size and --sequence-parallel (tp > 1 only: Megatron-LM
/// turns it off at tp 1). dp is not a flag: Megatron-LM takes the world size / (tp x pp),
/// which a comment states. An analytic model with experts, latent attention or MTP modules
/// (job.shape) adds their flags (--num-experts, ..., --expert-model-parallel-size,
/// --expert-tensor-parallel-size), which import reads back to the same shape; so does a
/// model with squared ReLU (--squared-relu, --normalization RMSNorm) or a head width of its
/// own (--kv-channels). A hybrid model's --hybrid-layer-pattern takes the place of
/// --num-layers and of the partition flags: '|' between its stages (pp x vpp of them) gives
/// the split and the virtual stages; its --spec and Mamba flags follow.
std::string megatron_job_flags(const MegatronExport& x, const ExportJob& job);
/// Why Megatron-LM's flags cannot state `m` (a hybrid model whose Mamba mixer has another
/// conv1d width or scan chunk than MambaMixer's fixed 4 and 128, or hybrid MTP blocks), or "".
std::string megatron_model_refusal(const ModelShape& m);
/// --context-parallel-size and --cp-comm-type when job.cp > 1, --fp8-format and
/// --fp8-recipe when job.fp8 is not none, --cuda-graph-impl and --cuda-graph-modules when
/// job.cuda_graphs names scopes; nothing for a job at Megatron-LM's defaults.
std::string megatron_cp_fp8_flags(const ExportJob& job);

/// Every per-layer recompute choice Megatron-LM's flags can state for a partition (decoder
/// layers per stage): none; selective everywhere; full for the first N layers of every
/// stage (`--recompute-method block`, N = 1 .. largest stage - 1); full everywhere
/// (`uniform`). For a plan it cannot express, the caller simulates these and keeps the
/// fastest that fits (`bmpipe plan --format megatron`).
std::vector<std::vector<Recompute>> megatron_recompute_choices(const std::vector<int>& partition);

}  // namespace bmpipe
