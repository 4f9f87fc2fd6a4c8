#pragma once
/// \file
/// The partition and recompute vocabulary that Megatron-LM and MindFormers share (each
/// framework's own is in its folder's formats.hpp). The exporters (frameworks/*/export.cpp) write
/// it and the importers (frameworks/*/import.cpp) read it, so that both follow the same reading of
/// the frameworks' sources. Pure functions; a value a framework refuses is a FormatError whose
/// message says why, and the caller adds the file and the flag or key.
///
/// Stage order is bmpipe's, which is both frameworks' layer order: stage v * pp + r is
/// virtual stage (chunk, interleave) v of pipeline rank r.

#include <stdexcept>
#include <string>
#include <vector>

#include "sim/recompute.hpp"

namespace bmpipe {

/// A value the framework would refuse, or one bmpipe cannot model.
struct FormatError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

/// "[1, 2, 3]" (the empty list is "[]").
std::string format_int_list(const std::vector<int>& v);

/// Index of the first layer (model order) of every stage, plus one past the last.
std::vector<int> stage_starts(const std::vector<int>& partition);

/// The modes of every layer when stage s recomputes its first `full[s]` layers fully and,
/// of the others, the first `select[s]` counted from the stage's first layer selectively.
/// Counts above a stage's size take the whole stage. This is how both frameworks count:
/// MindFormers' recompute / select_recompute lists, and Megatron-LM's block method.
std::vector<Recompute> modes_from_prefix_counts(const std::vector<int>& partition,
                                                const std::vector<int>& full,
                                                const std::vector<int>& select);

/// The shortest n such that every layer of stage s whose mode is at least `at_least` lies
/// among the stage's first n layers.
int covering_prefix(const std::vector<int>& partition, const std::vector<Recompute>& modes, int s,
                    Recompute at_least);

}  // namespace bmpipe
