#pragma once
/// \file
/// "Did you mean ...?" for names the user mistyped: config keys, values, schedule and
/// preset names, command-line options.

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

namespace bmpipe {

/// Edit distance with adjacent transpositions (optimal string alignment: "1fb1" is one
/// edit from "1f1b"), case-insensitive.
inline std::size_t edit_distance(std::string_view a, std::string_view b) {
  auto lower = [](char c) { return static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c); };
  const std::size_t n = a.size(), m = b.size();
  std::vector<std::vector<std::size_t>> d(n + 1, std::vector<std::size_t>(m + 1));
  for (std::size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= n; ++i)
    for (std::size_t j = 1; j <= m; ++j) {
      const std::size_t cost = lower(a[i - 1]) == lower(b[j - 1]) ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && lower(a[i - 1]) == lower(b[j - 2]) &&
          lower(a[i - 2]) == lower(b[j - 1]))
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[n][m];
}

/// " (did you mean 'x'?)" for the candidate closest to `name`, when it is close enough to
/// be a typo (at most a third of the name's length in edits, or a difference of case);
/// "" when `name` is one of them or nothing is close.
template <typename Names>
std::string did_you_mean(std::string_view name, const Names& candidates) {
  std::string best;
  std::size_t best_distance = std::max<std::size_t>(1, name.size() / 3) + 1;  // exclusive
  if (name.size() > 256) return {};                                           // not a typo: garbage
  for (const auto& c : candidates)
    if (std::string_view(c) == name) return {};  // a real name is not a typo
  for (const auto& c : candidates) {
    const std::string_view candidate(c);
    const std::size_t d = edit_distance(name, candidate);  // 0: differs in case only
    if (d < best_distance) best_distance = d, best = std::string(candidate);
  }
  return best.empty() ? std::string() : " (did you mean '" + best + "'?)";
}

/// "a, b, c": names as the messages and the help list them.
inline std::string comma_list(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

/// Splits a comma-separated list of names ("a, b, c") as the messages print them.
inline std::vector<std::string> split_names(std::string_view list) {
  std::vector<std::string> out;
  std::size_t from = 0;
  while (from <= list.size()) {
    std::size_t comma = list.find(',', from);
    if (comma == std::string_view::npos) comma = list.size();
    std::string_view item = list.substr(from, comma - from);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (!item.empty()) out.emplace_back(item);
    from = comma + 1;
  }
  return out;
}

}  // namespace bmpipe
