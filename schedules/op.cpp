#include "schedules/op.hpp"

namespace bmpipe {

char op_kind_char(OpKind kind) {
  switch (kind) {
    case OpKind::F:
      return 'F';
    case OpKind::B:
      return 'B';
    case OpKind::I:
      return 'I';
    case OpKind::W:
      return 'W';
    case OpKind::FB:
      return 'X';
  }
  return '?';
}

std::string to_string(const Op& op) {
  // Built with append: GCC 12 warns falsely (-Wrestrict) on "literal" + std::string.
  auto part = [](std::string& out, char kind, int mb, int stage) {
    out.push_back(kind);
    out.append(std::to_string(mb));
    out.append("@s");
    out.append(std::to_string(stage));
  };
  std::string text;
  if (op.kind == OpKind::FB) {
    part(text, 'F', op.microbatch, op.stage);
    text.push_back('&');
    part(text, 'B', op.microbatch2, op.stage2);
  } else {
    part(text, op_kind_char(op.kind), op.microbatch, op.stage);
  }
  return text;
}

std::size_t Schedule::total_ops() const {
  std::size_t n = 0;
  for (const auto& list : ops) n += list.size();
  return n;
}

}  // namespace bmpipe
