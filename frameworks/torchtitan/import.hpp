#pragma once
/// \file
/// `bmpipe import torchtitan`: a torchtitan job TOML (its releases up to v0.2.2) as a bmpipe
/// job. Reads [model] (name and flavor, through frameworks/torchtitan/flavors.hpp; the Float8
/// and MXFP8 converters), [training] (local_batch_size, or batch_size before torchtitan
/// 8570415c3; global_batch_size, seq_len, the mixed precision), [parallelism] (the data
/// parallel replicate and shard degrees as FSDP, tensor, pipeline, context and expert
/// parallelism, the pipeline schedule and its micro-batch size, the split into stages),
/// [activation_checkpoint] (none, full, selective op or every n-th layer), [compile] (or
/// training.compile before it) and the float8 and mx sections, each with torchtitan's own
/// defaults and checks. Every key is looked up in frameworks/torchtitan/keys.tsv: one that
/// cannot change time or memory is listed in ImportedJob::ignored, one that can and is not
/// modelled goes to ImportedJob::unmodelled, and an unknown key is an error, as torchtitan's
/// own config manager refuses it.

#include <string>
#include <string_view>

#include "frameworks/common/import_common.hpp"

namespace bmpipe {

/// Reads the torchtitan TOML `text` (the contents of `name`). Throws ImportError naming the
/// file, the line, the key and what was expected, for a value torchtitan refuses or bmpipe
/// cannot read (an unknown key, a flavor bmpipe has no shape of, a schedule name torch does
/// not know, ...). ImportedJob::dp is left empty when data_parallel_shard_degree is -1 (the
/// devices left over): the cluster then says how many.
ImportedJob read_torchtitan_toml(const std::string& text, const std::string& name);

/// The text of frameworks/torchtitan/keys.tsv, compiled in.
std::string_view torchtitan_keys_text();

/// That table, parsed once.
const Vocabulary& torchtitan_vocabulary();

}  // namespace bmpipe
