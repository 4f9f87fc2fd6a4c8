#pragma once
/// \file
/// `bmpipe import megatron`: a Megatron-LM launch script's arguments as a bmpipe job. The
/// flags are those of megatron/training/arguments.py (exact names, as its parser takes no
/// abbreviations); the model, the parallel layout, the batch, the partition and the
/// recompute are read with Megatron-LM's own defaults and checks. Every flag is looked up in
/// frameworks/megatron/flags.tsv, the table of every flag of Megatron-LM's parser: one bmpipe
/// does not model is listed in ImportedJob::ignored when it cannot change time or memory,
/// and in ImportedJob::unmodelled when it can; an unknown flag is an error.

#include <string>
#include <string_view>
#include <vector>

#include "frameworks/common/import_common.hpp"
#include "frameworks/common/shell_words.hpp"  // split_shell_words, which the flags are read from

namespace bmpipe {

/// Reads the arguments in `text` (the contents of `name`). Throws ImportError naming the
/// file, the line and the flag for an unknown flag (with the closest known one), a flag
/// Megatron-LM no longer takes, or a value Megatron-LM would refuse or bmpipe cannot model.
/// Flags that change time or memory and that bmpipe does not model are returned in
/// ImportedJob::unmodelled; the caller refuses or allows them.
ImportedJob read_megatron_args(const std::string& text, const std::string& name);

/// The text of frameworks/megatron/flags.tsv, compiled in.
std::string_view megatron_flags_text();

/// That table, parsed once.
const Vocabulary& megatron_vocabulary();

/// The flags read_megatron_args reads (the table's modelled rows must be exactly these).
std::vector<std::string_view> megatron_modelled_flags();

}  // namespace bmpipe
