#pragma once
/// \file
/// A plan in MindFormers' words: its YAML keys. Pure functions of the layout; nothing here
/// simulates.

#include <string>
#include <vector>

#include "frameworks/common/export_layout.hpp"  // ExportLayout, ExportJob

namespace bmpipe {

/// What MindFormers' keys state of a plan, before it is written out.
struct MindFormersExport {
  std::vector<int> offset;         ///< model_config.offset, per stage
  std::vector<int> full, select;   ///< recompute and select_recompute counts, per stage
  std::vector<std::string> notes;  ///< what the keys cannot say exactly (empty if none)
  /// The plan the keys describe: the same partition on interleaved placement, and per
  /// stage its first `full` layers full, the next up to `select` selective, the rest none.
  ExportLayout expressed;
};
MindFormersExport mindformers_plan(const ExportLayout& layout);

/// The whole job in MindFormers' keys, a YAML fragment to merge into the run's config
/// (every key it gives replaces the run's): parallel_config (data_parallel,
/// model_parallel, pipeline_stage, micro_batch_num, use_seq_parallel),
/// runner_config.batch_size (and gradient_accumulation_steps without pipeline stages),
/// parallel.pipeline_config (pipeline_interleave, pipeline_scheduler: `scheduler`),
/// model.model_config (pp_interleave_num, offset) and recompute_config (recompute,
/// select_recompute). `x.notes` are the caller's to print.
std::string mindformers_job_yaml(const MindFormersExport& x, const ExportJob& job,
                                 const std::string& scheduler);

/// Whether MindFormers' keys state `layout` exactly (`plan --expressible mindformers`): stage
/// j of every interleave on rank j, the embedding first and the head last, every stage with
/// a decoder layer, and per stage the first n layers in full and the next selective.
bool mindformers_states(const ExportLayout& layout);

/// MindFormers keys (a YAML fragment): model.model_config.offset and pp_interleave_num,
/// recompute_config.recompute and select_recompute, as lists per stage (2-D when vpp > 1).
/// `notes` gets one line per thing MindFormers cannot express exactly (empty if none).
std::string export_mindformers(const ExportLayout& layout, std::vector<std::string>* notes);

/// Why MindFormers' keys cannot state the experts of `m` (with expert tensor parallel size
/// `etp`), or "" when they can (a dense model, or experts that moe_config states: every
/// layer MoE after the first k, shared experts a multiple of the experts' width, etp 1).
std::string mindformers_moe_refusal(const ModelShape& m, int etp);

/// Why MindFormers' Llama keys cannot state the layers of `m`, or "" when they can: they have
/// no hybrid (Mamba) layers, no MLP but SwiGLU, and always RoPE (a head width of its own is
/// LlamaConfig's head_dim, which the export writes).
std::string mindformers_shape_refusal(const ModelShape& m);

}  // namespace bmpipe
