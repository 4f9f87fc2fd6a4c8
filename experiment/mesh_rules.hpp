#pragma once
/// \file
/// Divisibility rules of the parallel mesh that more than one place checks (the config's
/// cross-field checks, experiment/field_checks.cpp, and the layout search,
/// planner/layout_search.cpp), each written once with its message: a rule returns what is
/// wrong, or nothing. The caller names the key or the option.

#include <optional>
#include <string>

namespace bmpipe {

/// Context parallelism's load-balanced causal split (Megatron / TransformerEngine) cuts each
/// sequence into 2 cp equal chunks: 2 cp must divide the sequence.
inline std::optional<std::string> cp_split_problem(long long seq_length, int cp) {
  if (cp <= 1 || seq_length % (2LL * cp) == 0) return std::nullopt;
  return "2 cp = " + std::to_string(2 * cp) + " does not divide seq_length " +
         std::to_string(seq_length) +
         ": the load-balanced causal split cuts each sequence into 2 cp equal chunks";
}

/// Ulysses (cp_comm_type a2a) trades the sequence split for a head split: cp must divide a tp
/// rank's heads.
inline std::optional<std::string> ulysses_heads_problem(int heads, int tp, int cp) {
  if (cp <= 1 || (heads / tp) % cp == 0) return std::nullopt;
  return "a2a (Ulysses) splits each tp rank's " + std::to_string(heads / tp) +
         " attention heads over cp = " + std::to_string(cp) + ", which does not divide them";
}

}  // namespace bmpipe
