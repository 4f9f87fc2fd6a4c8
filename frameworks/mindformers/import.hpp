#pragma once
/// \file
/// `bmpipe import mindformers`: a MindFormers training YAML (Llama family) as a bmpipe job.
/// Reads parallel_config (data_parallel, model_parallel, pipeline_stage, micro_batch_num,
/// use_seq_parallel), model.model_config (the shape, seq_length, compute_dtype,
/// use_flash_attention, tie_word_embeddings, offset, pp_interleave_num), recompute_config
/// (recompute, select_recompute), runner_config (batch_size, gradient_accumulation_steps)
/// and parallel (pipeline_config, enable_parallel_optimizer), each with MindFormers' own
/// defaults and rules; every other key is listed in ImportedJob::ignored.

#include <string>

#include "frameworks/common/import_common.hpp"

namespace bmpipe {

/// Reads the MindFormers YAML `text` (the contents of `name`). Throws ImportError naming the
/// file, the line and the key path for a value MindFormers would refuse or bmpipe cannot
/// model (a mixture-of-experts model, fp32 compute, offsets that do not add up, ...).
ImportedJob read_mindformers_yaml(const std::string& text, const std::string& name);

}  // namespace bmpipe
