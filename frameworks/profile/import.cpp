#include "frameworks/profile/import.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <string_view>

#include "experiment/config_fields.hpp"

namespace bmpipe {

const char* const kProfileColumns[15] = {"name",
                                         "count",
                                         "forward_ms",
                                         "backward_input_ms",
                                         "backward_weight_ms",
                                         "activation_bytes",
                                         "output_bytes",
                                         "param_bytes",
                                         "grad_bytes",
                                         "optimizer_bytes",
                                         "recompute_ms",
                                         "selective_recompute_ms",
                                         "selective_activation_bytes",
                                         "full_recompute_ms",
                                         "full_activation_bytes"};

namespace {

constexpr int kRequired = 8;  // the first eight columns

struct Cell {
  std::string text;
  int column = 0;  // 1-based
};

/// The fields of one CSV line (RFC 4180 quoting: "a, b" and "" for a quote), trimmed of
/// blanks outside quotes. `row` for messages.
std::vector<Cell> split_row(std::string_view line, const std::string& file, int row) {
  std::vector<Cell> cells;
  std::size_t i = 0;
  while (true) {
    Cell c;
    c.column = static_cast<int>(cells.size()) + 1;
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    if (i < line.size() && line[i] == '"') {
      ++i;
      while (true) {
        if (i >= line.size())
          throw ImportError(file, row, c.column, "", "a quoted cell is never closed");
        if (line[i] == '"') {
          if (i + 1 < line.size() && line[i + 1] == '"') {
            c.text += '"';
            i += 2;
            continue;
          }
          ++i;
          break;
        }
        c.text += line[i++];
      }
      while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
      if (i < line.size() && line[i] != ',')
        throw ImportError(file, row, c.column, "", "text after a quoted cell, before the comma");
    } else {
      const std::size_t end = line.find(',', i);
      c.text = std::string(
          line.substr(i, end == std::string_view::npos ? std::string_view::npos : end - i));
      while (!c.text.empty() && (c.text.back() == ' ' || c.text.back() == '\t')) c.text.pop_back();
      i = end == std::string_view::npos ? line.size() : end;
    }
    cells.push_back(std::move(c));
    if (i >= line.size()) break;
    ++i;  // the comma
  }
  return cells;
}

template <class T, std::size_t N>
const detail::Field<T>& field(const std::array<detail::Field<T>, N>& table, std::string_view name) {
  for (const auto& f : table)
    if (f.name == name) return f;
  throw std::logic_error("no field " + std::string(name));
}

/// Why `v` is outside `r` (the config key's range, so that the CSV and the YAML agree), or
/// nullopt.
std::optional<std::string> range_problem(const detail::Range& r, double v) {
  std::string unit;
  if (!r.unit.empty()) unit.append(" ").append(r.unit);
  std::string why;
  if (v < r.min || (r.min_open && v == r.min))
    why.append(r.min_open ? "must be greater than " : "must be at least ")
        .append(detail::format_number(r.min))
        .append(unit);
  else if (v != 0 && std::fpclassify(v) == FP_SUBNORMAL)
    why = "must not be a denormal";
  else if (v < r.low)
    why.append("must be at least ").append(detail::format_number(r.low)).append(unit);
  else if (v > r.max) {
    why.append("must be at most ").append(detail::format_number(r.max)).append(unit);
    if (!r.max_note.empty()) why.append(" (").append(r.max_note).append(")");
  }
  if (why.empty()) return std::nullopt;
  return why;
}

}  // namespace

ImportedJob read_profile_csv(const std::string& text, const std::string& name) {
  const std::string file = shown_path(name);
  ImportedJob job;
  job.source = name;
  job.framework = "layer profile CSV";
  job.model_name = model_name_of(name, "profile");
  job.from("model.name", Origin{file, 0, 0, "", "the CSV file's name"});

  std::map<std::string, int> column_of;  // column name -> 1-based index
  std::vector<std::string> header;
  int row = 0, header_row = 0;
  long long total_layers = 0;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t end = std::min(text.find('\n', pos), text.size());
    std::string_view line = std::string_view(text).substr(pos, end - pos);
    pos = end + 1;
    ++row;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const std::size_t first = line.find_first_not_of(" \t");
    if (first == std::string_view::npos || line[first] == '#') {
      if (end == text.size()) break;
      continue;
    }
    std::vector<Cell> cells = split_row(line, file, row);

    if (header.empty()) {
      header_row = row;
      for (const Cell& c : cells) {
        const auto known = std::find_if(std::begin(kProfileColumns), std::end(kProfileColumns),
                                        [&](const char* k) { return c.text == k; });
        if (known == std::end(kProfileColumns)) {
          std::string names;
          for (const char* k : kProfileColumns)
            names += (names.empty() ? "" : ", ") + std::string(k);
          throw ImportError(file, row, c.column, c.text.empty() ? "(empty)" : c.text,
                            "unknown column (expected: " + names + ")");
        }
        if (!column_of.emplace(c.text, c.column).second)
          throw ImportError(file, row, c.column, c.text,
                            "given twice, in columns " + std::to_string(column_of[c.text]) +
                                " and " + std::to_string(c.column));
        header.push_back(c.text);
      }
      for (int k = 0; k < kRequired; ++k)
        if (!column_of.count(kProfileColumns[k]))
          throw ImportError(file, row, 0, kProfileColumns[k], "missing required column");
      for (const char* mode : {"selective", "full"}) {
        const std::string ms = std::string(mode) + "_recompute_ms";
        const std::string bytes = std::string(mode) + "_activation_bytes";
        if (column_of.count(ms) != column_of.count(bytes))
          throw ImportError(file, row, column_of.count(ms) ? column_of[ms] : column_of[bytes],
                            column_of.count(ms) ? ms : bytes,
                            "comes with " + (column_of.count(ms) ? bytes : ms) +
                                ": a recompute mode needs both its time and its bytes");
      }
      if (end == text.size()) break;
      continue;
    }

    if (cells.size() != header.size())
      throw ImportError(file, row, 0, "",
                        "has " + std::to_string(cells.size()) + " cells; the header has " +
                            std::to_string(header.size()));
    const std::size_t index = job.layers.size();
    const std::string p = "model.layers[" + std::to_string(index) + "]";
    auto cell = [&](const char* column) -> const Cell* {
      const auto it = column_of.find(column);
      if (it == column_of.end()) return nullptr;
      const Cell& c = cells[static_cast<std::size_t>(it->second - 1)];
      return c.text.empty() ? nullptr : &c;
    };
    auto fail = [&](const Cell& c, const std::string& message) -> void {
      throw ImportError(file, row, c.column, header[static_cast<std::size_t>(c.column - 1)],
                        message);
    };
    auto required = [&](const char* column) -> const Cell& {
      const Cell* c = cell(column);
      if (!c)
        throw ImportError(file, row, column_of[column], column, "empty; the column is required");
      return *c;
    };
    auto origin = [&](const Cell& c) {
      return Origin{file, row, c.column, header[static_cast<std::size_t>(c.column - 1)], ""};
    };
    auto range = [&](const Cell& c, double v, const detail::Range& r) {
      if (const auto why = range_problem(r, v)) fail(c, *why + ", got " + c.text);
    };
    auto ms = [&](const Cell& c, const detail::Range& r) {
      double v = 0;
      const auto res = std::from_chars(c.text.data(), c.text.data() + c.text.size(), v);
      if (res.ec != std::errc() || res.ptr != c.text.data() + c.text.size() || !std::isfinite(v))
        fail(c, "expected a number of milliseconds, got '" + c.text + "'");
      range(c, v, r);
      return v;
    };
    auto integer = [&](const Cell& c, const detail::Range& r, const char* what) {
      long long v = 0;
      const auto res = std::from_chars(c.text.data(), c.text.data() + c.text.size(), v);
      if (res.ec == std::errc::result_out_of_range) fail(c, "is too large, got '" + c.text + "'");
      if (res.ec != std::errc() || res.ptr != c.text.data() + c.text.size())
        fail(c, std::string("expected ") + what + " in full digits, got '" + c.text + "'");
      range(c, static_cast<double>(v), r);
      return v;
    };

    LayerGroup g;
    const Cell& name_cell = required("name");
    g.name = name_cell.text;
    job.from(p, origin(name_cell));
    job.from(p + ".name", origin(name_cell));
    const Cell& count_cell = required("count");
    g.count = static_cast<int>(integer(count_cell, detail::kLayers, "an integer"));
    job.from(p + ".count", origin(count_cell));
    total_layers += g.count;
    if (total_layers > detail::kLayers.max)
      fail(count_cell, "the rows up to here hold " + std::to_string(total_layers) +
                           " layers; a model has at most " +
                           detail::format_number(detail::kLayers.max));
    const auto& lf = detail::kLayerFields;
    struct TimeColumn {
      const char* column;
      double LayerGroup::*slot;
    };
    for (const TimeColumn& t : {TimeColumn{"forward_ms", &LayerGroup::forward_ms},
                                TimeColumn{"backward_input_ms", &LayerGroup::backward_input_ms},
                                TimeColumn{"backward_weight_ms", &LayerGroup::backward_weight_ms},
                                TimeColumn{"recompute_ms", &LayerGroup::recompute_ms}}) {
      const bool optional = std::string_view(t.column) == "recompute_ms";
      const Cell* c = optional ? cell(t.column) : &required(t.column);
      if (!c) continue;
      g.*t.slot = ms(*c, field(lf, t.column).range);
      job.from(p + "." + t.column, origin(*c));
    }
    struct BytesColumn {
      const char* column;
      std::int64_t LayerGroup::*slot;
      bool optional;
    };
    for (const BytesColumn& b :
         {BytesColumn{"activation_bytes", &LayerGroup::activation_bytes, false},
          BytesColumn{"output_bytes", &LayerGroup::output_bytes, false},
          BytesColumn{"param_bytes", &LayerGroup::param_bytes, false},
          BytesColumn{"grad_bytes", &LayerGroup::grad_bytes, true},
          BytesColumn{"optimizer_bytes", &LayerGroup::optimizer_bytes, true}}) {
      const Cell* c = b.optional ? cell(b.column) : &required(b.column);
      if (!c) continue;
      g.*b.slot = integer(*c, field(lf, b.column).range, "a byte count");
      job.from(p + "." + b.column, origin(*c));
    }
    for (Recompute mode : kRecomputingModes) {
      const std::string m(recompute_name(mode));
      const std::string ms_col = m + "_recompute_ms", bytes_col = m + "_activation_bytes";
      const Cell* t = cell(ms_col.c_str());
      const Cell* b = cell(bytes_col.c_str());
      if (!t && !b) continue;
      if (!t || !b) {
        const std::string missing = t ? bytes_col : ms_col;
        throw ImportError(file, row, column_of[missing], missing,
                          "empty, while " + (t ? ms_col : bytes_col) +
                              " is given: a recompute mode needs both its time and its bytes");
      }
      LayerModeCosts costs;
      costs.recompute_ms = ms(*t, field(detail::kLayerModeFields, "recompute_ms").range);
      costs.activation_bytes =
          integer(*b, field(detail::kLayerModeFields, "activation_bytes").range, "a byte count");
      if (costs.activation_bytes > g.activation_bytes)
        fail(*b, "cannot exceed activation_bytes (" + std::to_string(g.activation_bytes) +
                     "), what the layer keeps without recompute");
      g.recompute[mode] = costs;
      const std::string mp = p + ".recompute." + m;
      job.from(mp, origin(*t));
      job.from(mp + ".recompute_ms", origin(*t));
      job.from(mp + ".activation_bytes", origin(*b));
    }
    job.layers.push_back(std::move(g));
    if (end == text.size()) break;
  }
  if (header.empty()) throw ImportError(file, 0, 0, "", "no header row (and no data)");
  if (job.layers.empty())
    throw ImportError(file, header_row, 0, "", "no layer rows after the header");
  job.pp = 1;
  job.microbatches = 1;
  return job;
}

}  // namespace bmpipe
