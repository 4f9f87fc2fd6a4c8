#pragma once
/// \file
/// `bmpipe import profile`: layer costs measured with the user's own profiler, from a CSV
/// with one row per run of identical layers, as the measured form of a config
/// (model.layers). Columns, in any order, named in the first row that is not a comment:
///   name, count, forward_ms, backward_input_ms, backward_weight_ms, activation_bytes,
///   output_bytes, param_bytes                                       (required)
///   grad_bytes, optimizer_bytes, recompute_ms                       (optional)
///   selective_recompute_ms + selective_activation_bytes,
///   full_recompute_ms + full_activation_bytes                       (optional, in pairs)
/// Times are per micro-batch in milliseconds, sizes in bytes (integers), each with the
/// range of the config key of the same name. Lines starting with '#' and blank lines are
/// skipped; a cell may be quoted ("a, b"); an empty cell leaves an optional column unset.

#include <string>

#include "frameworks/common/import_common.hpp"

namespace bmpipe {

/// The column names, in the order docs/import.md documents them.
extern const char* const kProfileColumns[15];

/// Reads the CSV `text` (the contents of `name`) into a job with one layer group per row,
/// pp 1 and one micro-batch (the caller sets the training layout). Throws ImportError
/// naming FILE:ROW:COL and the column.
ImportedJob read_profile_csv(const std::string& text, const std::string& name);

}  // namespace bmpipe
