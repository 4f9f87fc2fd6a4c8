#pragma once
/// \file
/// `bmpipe import mindformers`: a MindFormers training YAML (Llama family) as a bmpipe job.
/// Reads parallel_config (data_parallel, model_parallel, pipeline_stage, micro_batch_num,
/// use_seq_parallel), model.model_config (the shape, seq_length, compute_dtype,
/// use_flash_attention, tie_word_embeddings, offset, pp_interleave_num), recompute_config
/// (recompute, select_recompute), runner_config (batch_size, gradient_accumulation_steps)
/// and parallel (pipeline_config, enable_parallel_optimizer), each with MindFormers' own
/// defaults and rules; and context.max_device_memory as the device's memory. Every key is
/// looked up in frameworks/mindformers/keys.tsv, the table of MindFormers' keys: one bmpipe
/// does not model is listed in ImportedJob::ignored when it cannot change time or memory,
/// and in ImportedJob::unmodelled when it can; an unknown key is an error.

#include <string>
#include <string_view>

#include "frameworks/common/import_common.hpp"

namespace bmpipe {

/// Reads the MindFormers YAML `text` (the contents of `name`). Throws ImportError naming the
/// file, the line and the key path for a value MindFormers would refuse or bmpipe cannot
/// model (an unknown key, fp32 compute, offsets that do not add up, ...). Keys that change
/// time or memory in ways bmpipe does not model (a mixture-of-experts model, context
/// parallelism, ...) are returned in ImportedJob::unmodelled; the caller refuses or allows them.
ImportedJob read_mindformers_yaml(const std::string& text, const std::string& name);

/// The text of frameworks/mindformers/keys.tsv, compiled in.
std::string_view mindformers_keys_text();

/// That table, parsed once.
const Vocabulary& mindformers_vocabulary();

}  // namespace bmpipe
