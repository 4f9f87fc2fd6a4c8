#include "experiment/layer_layout.hpp"

#include <cctype>
#include <cstddef>

// [MG-layout] Megatron-LM at d98e8a64ddf3,
// megatron/core/transformer/pipeline_parallel_layer_layout.py (read, not copied).

namespace bmpipe {

long long read_repeat_count(std::string_view s, std::size_t& i) {
  long long n = 0;
  const std::size_t begin = i;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
    n = n * 10 + (s[i] - '0');
    if (n > kMaxLayoutLayers)
      throw LayoutError("repeat count " + std::string(s.substr(begin, i - begin + 1)) +
                        "... is more than " + std::to_string(kMaxLayoutLayers) + " layers");
    ++i;
  }
  return n;
}

namespace {

void append_repeated(std::string& out, std::string_view what, long long n) {
  if (static_cast<long long>(out.size()) + n * static_cast<long long>(what.size()) >
      kMaxLayoutLayers * 2)
    throw LayoutError("the layout unrolls to more than " + std::to_string(kMaxLayoutLayers) +
                      " layers");
  for (long long k = 0; k < n; ++k) out.append(what);
}

}  // namespace

std::vector<LayoutStage> parse_layer_layout(std::string_view layout) {
  // [MG-layout] parse_str_to_list: commas are cosmetic and go first.
  std::string text;
  for (char c : layout)
    if (c != ',') text += c;

  // "(X)*n" becomes X n times. Megatron's pattern takes the first ')' after a '(', so a
  // group inside a group never unrolls and leaves parentheses, which are no layer.
  std::string grouped;
  for (std::size_t i = 0; i < text.size();) {
    if (text[i] != '(') {
      grouped += text[i++];
      continue;
    }
    const std::size_t close = text.find(')', i + 1);
    if (close == std::string::npos)
      throw LayoutError("'(' at character " + std::to_string(i + 1) + " is never closed");
    const std::string_view body = std::string_view(text).substr(i + 1, close - i - 1);
    if (body.find('(') != std::string_view::npos)
      throw LayoutError("nested parentheses at character " + std::to_string(i + 1) +
                        " (Megatron-LM unrolls one level of (...)*n)");
    if (body.empty()) throw LayoutError("empty parentheses at character " + std::to_string(i + 1));
    std::size_t j = close + 1;
    if (j + 1 >= text.size() || text[j] != '*' ||
        !std::isdigit(static_cast<unsigned char>(text[j + 1])))
      throw LayoutError("the group at character " + std::to_string(i + 1) +
                        " must be followed by *n, a repeat count");
    ++j;
    const long long n = read_repeat_count(text, j);
    append_repeated(grouped, body, n);
    i = j;
  }

  // "x*n" becomes x n times, for any one character x, scanning left to right.
  std::string unrolled;
  for (std::size_t i = 0; i < grouped.size();) {
    if (i + 2 < grouped.size() && grouped[i + 1] == '*' &&
        std::isdigit(static_cast<unsigned char>(grouped[i + 2]))) {
      std::size_t j = i + 2;
      const long long n = read_repeat_count(grouped, j);
      append_repeated(unrolled, std::string_view(grouped).substr(i, 1), n);
      i = j;
    } else {
      unrolled += grouped[i++];
    }
  }

  std::vector<LayoutStage> stages(1);
  int embeddings = 0, losses = 0;
  char first = 0, last = 0;
  for (char c : unrolled) {
    if (c == '|') {
      stages.emplace_back();
      continue;
    }
    LayoutStage& st = stages.back();
    switch (c) {
      case 'E':
        st.embedding = true;
        ++embeddings;
        break;
      case 'L':
        st.loss = true;
        ++losses;
        break;
      case 't':
        ++st.decoders;
        break;
      case 'm':
        ++st.mtp;
        break;
      default: {
        const bool printable = c > 0x20 && c < 0x7f;
        throw LayoutError(
            "invalid layer character " +
            (printable ? "'" + std::string(1, c) + "'" : std::string("(a space or control)")) +
            " (known: E embedding, t decoder layer, L loss, m MTP layer; | between stages; "
            "(...)*n and x*n repeat)");
      }
    }
    if (!first) first = c;
    last = c;
  }
  // [MG-layout] validate_layer_layout: the first layer is the embedding, the last the loss,
  // each exactly once.
  if (first != 'E')
    throw LayoutError("the first layer must be the embedding E, got " +
                      (first ? "'" + std::string(1, first) + "'" : std::string("no layer")));
  if (last != 'L') throw LayoutError("the last layer must be the loss L");
  if (embeddings != 1)
    throw LayoutError("the embedding E must appear exactly once, got " +
                      std::to_string(embeddings));
  if (losses != 1)
    throw LayoutError("the loss L must appear exactly once, got " + std::to_string(losses));
  // The MTP block runs on the main model's last hidden state (Megatron-Core's GPTModel
  // runs it after the decoder), so no decoder layer may follow an MTP layer.
  int decoders = 0, after = -1;
  for (char c : unrolled) {
    if (c == 'm' && after < 0) after = decoders;
    if (c == 't') {
      ++decoders;
      if (after >= 0) {
        int total = 0;
        for (char d : unrolled) total += d == 't';
        throw LayoutError("puts decoder layer " + std::to_string(decoders) + " of " +
                          std::to_string(total) +
                          " (t) after a multi-token prediction layer (m); the MTP layers run on "
                          "the last decoder layer's output, so they come after every t");
      }
    }
  }
  return stages;
}

std::string layout_string(const std::vector<LayoutStage>& stages) {
  std::string out;
  const auto repeated = [&out](char kind, int n) {
    if (n == 1) out += kind;
    if (n > 1) out += std::string(1, kind) + "*" + std::to_string(n);
  };
  for (std::size_t s = 0; s < stages.size(); ++s) {
    if (s > 0) out += '|';
    if (stages[s].embedding) out += 'E';
    repeated('t', stages[s].decoders);
    repeated('m', stages[s].mtp);
    if (stages[s].loss) out += 'L';
  }
  return out;
}

std::string folded_layout_mismatch(const std::vector<LayoutStage>& stages) {
  for (std::size_t s = 0; s < stages.size(); ++s) {
    const std::string at = "stage " + std::to_string(s) + " of " + std::to_string(stages.size());
    if (stages[s].decoders == 0) return "leaves " + at + " without decoder layers (t)";
    if (stages[s].mtp > 0 && s + 1 != stages.size())
      return "puts multi-token prediction layers (m) on " + at + ", before the last";
  }
  return {};
}

}  // namespace bmpipe
