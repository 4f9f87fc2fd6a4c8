#include "schedules/schedule_file.hpp"
#include "io/read_file.hpp"

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include "schedules/validate.hpp"

namespace bmpipe {

ScheduleFileError::ScheduleFileError(std::string file, int row, int column, std::string message)
    : std::runtime_error(file + ":" + std::to_string(row) + ":" + std::to_string(column) + ": " +
                         message),
      file_(std::move(file)),
      row_(row),
      column_(column),
      message_(std::move(message)) {}

namespace {

constexpr std::string_view kOverlapSuffix = ")OVERLAP_F_B";

struct Action {
  OpKind kind;
  int stage;
  int microbatch;
};

/// `<stage><kind><microbatch>`, digits only (at most 9 of them, so no overflow).
std::optional<Action> parse_action(std::string_view t) {
  std::size_t k = 0;
  while (k < t.size() && t[k] >= '0' && t[k] <= '9') ++k;
  if (k == 0 || k > 9 || k + 1 >= t.size()) return std::nullopt;
  Action a{};
  switch (t[k]) {
    case 'F':
      a.kind = OpKind::F;
      break;
    case 'B':
      a.kind = OpKind::B;
      break;
    case 'I':
      a.kind = OpKind::I;
      break;
    case 'W':
      a.kind = OpKind::W;
      break;
    default:
      return std::nullopt;
  }
  const std::string_view mb = t.substr(k + 1);
  if (mb.size() > 9 ||
      !std::all_of(mb.begin(), mb.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  a.stage = std::stoi(std::string(t.substr(0, k)));
  a.microbatch = std::stoi(std::string(mb));
  return a;
}

/// A cell as messages quote it: at most 60 bytes, so that one absurd cell cannot make an
/// absurd message.
std::string shown(std::string_view cell) {
  return cell.size() > 60 ? std::string(cell.substr(0, 60)) + "..." : std::string(cell);
}

}  // namespace

Schedule parse_schedule_csv(const std::string& text, const std::string& file,
                            const std::string& name) {
  std::vector<std::string> rows;
  {
    std::stringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      rows.push_back(line);
    }
    // Blank lines at the end are not ranks (a final newline, an editor's extra line).
    while (!rows.empty() && rows.back().find_first_not_of(" \t") == std::string::npos)
      rows.pop_back();
  }
  if (rows.empty())
    throw ScheduleFileError(file, 1, 1, "no rows: a schedule needs one row per rank");

  Schedule s;
  s.name = name;
  s.num_ranks = static_cast<int>(rows.size());
  s.ops.resize(rows.size());
  std::vector<std::vector<int>> columns(rows.size());  // 1-based column of every op
  std::map<int, std::pair<int, int>> holder;           // stage -> (rank, column first seen)
  int max_stage = -1;
  int max_mb = -1;
  // Where the largest ids were seen, to blame them if the file cannot hold them.
  std::pair<int, int> max_stage_at{0, 0}, max_mb_at{0, 0};
  std::int64_t actions = 0;  // ops, an overlapped pair counting as two

  for (int r = 0; r < static_cast<int>(rows.size()); ++r) {
    const std::string& line = rows[r];
    std::size_t start = 0;
    while (start <= line.size()) {
      std::size_t stop = line.find(',', start);
      if (stop == std::string::npos) stop = line.size();
      std::size_t a = start, b = stop;
      while (a < b && (line[a] == ' ' || line[a] == '\t')) ++a;
      while (b > a && (line[b - 1] == ' ' || line[b - 1] == '\t')) --b;
      const std::string_view cell(line.data() + a, b - a);
      const int col = static_cast<int>(a) + 1;
      start = stop + 1;
      if (cell.empty()) continue;
      auto fail = [&](const std::string& msg) -> ScheduleFileError {
        return ScheduleFileError(file, r + 1, col, msg);
      };
      Op op;
      std::vector<std::pair<int, int>> held;  // stages this op touches
      if (cell.front() == '(') {
        const std::size_t semi = cell.find(';');
        if (cell.size() <= kOverlapSuffix.size() || semi == std::string_view::npos ||
            cell.substr(cell.size() - kOverlapSuffix.size()) != kOverlapSuffix)
          throw fail("unknown token '" + shown(cell) +
                     "' (an overlapped pair is written (0F7;7B3)OVERLAP_F_B)");
        const auto fwd = parse_action(cell.substr(1, semi - 1));
        const auto bwd =
            parse_action(cell.substr(semi + 1, cell.size() - kOverlapSuffix.size() - semi - 1));
        if (!fwd || !bwd || fwd->kind != OpKind::F || bwd->kind != OpKind::B)
          throw fail(
              "an overlapped pair must hold a forward then a full backward, e.g. "
              "(0F7;7B3)OVERLAP_F_B, not '" +
              shown(cell) + "'");
        op = Op::fb(fwd->stage, fwd->microbatch, bwd->stage, bwd->microbatch);
        held = {{fwd->stage, fwd->microbatch}, {bwd->stage, bwd->microbatch}};
      } else {
        const auto act = parse_action(cell);
        if (!act)
          throw fail("unknown token '" + shown(cell) +
                     "' (expected <stage><F|B|I|W><microbatch>, e.g. 0F3)");
        op = Op{act->kind, act->stage, act->microbatch, -1, -1};
        held = {{act->stage, act->microbatch}};
      }
      for (const auto& [stage, mb] : held) {
        auto [it, fresh] = holder.try_emplace(stage, r, col);
        if (!fresh && it->second.first != r)
          throw fail("stage " + std::to_string(stage) + " is held by two ranks: rank " +
                     std::to_string(it->second.first) + " (row " +
                     std::to_string(it->second.first + 1) + ", column " +
                     std::to_string(it->second.second) + ") lists it too");
        if (stage > max_stage) max_stage = stage, max_stage_at = {r + 1, col};
        if (mb > max_mb) max_mb = mb, max_mb_at = {r + 1, col};
      }
      actions += static_cast<std::int64_t>(held.size());
      s.ops[r].push_back(op);
      columns[r].push_back(col);
    }
    // A rank with nothing to run holds no stage, which no schedule means: it is a blank or
    // comma-only line, and one at the end would not even survive schedule_to_csv.
    if (s.ops[r].empty())
      throw ScheduleFileError(file, r + 1, 1,
                              "row " + std::to_string(r + 1) +
                                  " lists no ops, but every row is a rank and needs at least "
                                  "one (only blank lines at the end are not ranks)");
  }
  if (max_stage < 0) throw ScheduleFileError(file, 1, 1, "the file lists no ops");
  // Every (stage, micro-batch) pair needs its own forward, so a valid file lists at least
  // stages x micro-batches ops. Checked before the tables sized by those ids are built: an
  // id of 999999999 must not allocate a billion slots. (A file with fewer forwards than
  // pairs but enough ops gets validate_schedule's precise "never run" instead.)
  const std::int64_t slots = (static_cast<std::int64_t>(max_stage) + 1) * (max_mb + 1);
  if (slots > actions) {
    const bool stage_wide = max_stage >= max_mb;
    const auto [row, col] = stage_wide ? max_stage_at : max_mb_at;
    throw ScheduleFileError(
        file, row, col,
        std::string(stage_wide ? "stage " : "micro-batch ") +
            std::to_string(stage_wide ? max_stage : max_mb) + " makes " +
            std::to_string(max_stage + 1) + " stages x " + std::to_string(max_mb + 1) +
            " micro-batches = " + std::to_string(slots) +
            " (stage, micro-batch) pairs, each needing its own forward, but the file lists " +
            std::to_string(actions) + " ops (ids count from 0, without gaps)");
  }
  s.num_stages = max_stage + 1;
  s.num_microbatches = max_mb + 1;
  s.stage_rank.assign(s.num_stages, -1);
  for (const auto& [stage, where] : holder) s.stage_rank[stage] = where.first;
  for (int st = 0; st < s.num_stages; ++st)
    if (s.stage_rank[st] < 0)
      throw ScheduleFileError(file, 1, 1,
                              "stage " + std::to_string(st) +
                                  " is listed by no rank (stages go 0.." +
                                  std::to_string(max_stage) + ")");

  if (const auto issue = validate_schedule(s)) {
    const int r = std::max(issue->rank, 0);
    const int col =
        issue->position >= 0 ? columns[r][issue->position] : static_cast<int>(rows[r].size()) + 1;
    throw ScheduleFileError(file, r + 1, col, issue->message);
  }
  return s;
}

Schedule load_schedule_file(const std::string& path) {
  // 10^8 ops (the default work limit) take well under 1 GiB of text; a bound keeps a wrong
  // path (/dev/zero, a disk image) from reading forever.
  std::string text;
  try {
    text = read_untrusted_file(path, std::size_t{1} << 30, "schedule file");
  } catch (const ReadFileError& e) {
    throw ScheduleFileError(path, 0, 0, e.what());
  }
  return parse_schedule_csv(text, path, path);
}

std::string schedule_to_csv(const Schedule& s) {
  std::string out;
  auto action = [&out](int stage, char kind, int mb) {
    out.append(std::to_string(stage));
    out.push_back(kind);
    out.append(std::to_string(mb));
  };
  for (const auto& list : s.ops) {
    for (std::size_t k = 0; k < list.size(); ++k) {
      if (k) out.push_back(',');
      const Op& op = list[k];
      if (op.kind == OpKind::FB) {
        out.push_back('(');
        action(op.stage, 'F', op.microbatch);
        out.push_back(';');
        action(op.stage2, 'B', op.microbatch2);
        out.append(kOverlapSuffix);
      } else {
        action(op.stage, op_kind_char(op.kind), op.microbatch);
      }
    }
    out.push_back('\n');
  }
  return out;
}

void save_schedule_file(const Schedule& schedule, const std::string& path) {
  std::ofstream out(path, std::ios::binary);
  if (!out) throw std::runtime_error(path + ": cannot open for writing");
  out << schedule_to_csv(schedule);
  if (!out) throw std::runtime_error(path + ": write failed");
}

}  // namespace bmpipe
