#include "frameworks/megatron/formats.hpp"

#include <algorithm>
#include <cctype>
#include <cstddef>

// Sources (read, not copied), cited below by these short names:
//  [MG-layout] Megatron-LM, megatron/core/transformer/pipeline_parallel_layer_layout.py
//              (parse_str_to_list, validate_layer_layout) and
//              docs/user-guide/features/pipeline_parallel_layout.md, at d98e8a64ddf3.
//  [MG-args]   Megatron-LM, megatron/training/arguments.py (validate_args), same commit.
//  [MG-block]  Megatron-LM, megatron/core/transformer/transformer_block.py
//              (get_num_layers_to_build), same commit.

namespace bmpipe {

std::string megatron_layout_string(const std::vector<int>& partition, int mtp_layers,
                                   const std::vector<int>& mtp_per_stage) {
  std::vector<LayoutStage> stages(partition.size());
  for (std::size_t s = 0; s < partition.size(); ++s) {
    stages[s].decoders = partition[s];
    if (s < mtp_per_stage.size()) stages[s].mtp = mtp_per_stage[s];
  }
  if (!stages.empty()) {
    stages.front().embedding = true;
    stages.back().loss = true;
    if (mtp_per_stage.empty()) stages.back().mtp = mtp_layers;
  }
  return layout_string(stages);
}

namespace {

constexpr long long kMaxUnrolled = kMaxLayoutLayers;

long long repeat_count(std::string_view s, std::size_t& i) {
  try {
    return read_repeat_count(s, i);
  } catch (const LayoutError& e) {
    throw FormatError(e.what());
  }
}

}  // namespace

std::string megatron_layout_unsupported(const std::vector<MegatronLayoutStage>& stages) {
  const std::string why = folded_layout_mismatch(stages);
  if (why.empty()) return why;
  return why +
         "; bmpipe runs the embedding, the MTP module and the loss with the first and last "
         "decoder layers here, and runs this layout as written only as the config's "
         "training.megatron_layout (layers with separate end rows)";
}

std::vector<MegatronLayoutStage> parse_megatron_layout(std::string_view layout) {
  try {
    return parse_layer_layout(layout);
  } catch (const LayoutError& e) {
    throw FormatError(e.what());
  }
}

std::optional<std::vector<int>> megatron_uneven(int layers, int pp, int vpp,
                                                std::optional<int> first, std::optional<int> last) {
  // [MG-block] get_num_layers_to_build (with the uneven-PP checks of TransformerConfig):
  // each given count is > 0 and, with vpp, divisible by vpp; the layers left are split
  // evenly over the middle ranks, which must divide them (and each middle rank's share must
  // divide by vpp); no middle layers iff no middle ranks. A rank's layers are split evenly
  // over its vpp chunks.
  int left = layers;
  int middle_ranks = pp;
  for (const auto& given : {first, last}) {
    if (!given) continue;
    if (*given <= 0 || *given % vpp != 0) return std::nullopt;
    left -= *given;
    --middle_ranks;
  }
  if (left < 0 || (left > 0) != (middle_ranks > 0)) return std::nullopt;
  const int per_middle = middle_ranks > 0 ? left / middle_ranks : 0;
  if (middle_ranks > 0 && (left % middle_ranks != 0 || per_middle % vpp != 0)) return std::nullopt;
  std::vector<int> per_rank(pp, per_middle);
  if (first) per_rank.front() = *first;
  if (last) per_rank.back() = *last;
  std::vector<int> partition(static_cast<std::size_t>(pp) * vpp);
  for (int v = 0; v < vpp; ++v)
    for (int r = 0; r < pp; ++r)
      partition[static_cast<std::size_t>(v) * pp + r] = per_rank[r] / vpp;
  return partition;
}

std::vector<int> megatron_even(int layers, int pp, int vpp, bool account_embedding,
                               bool account_loss) {
  // [MG-args] and [MG-block]: the embedding and the loss count as one layer each when
  // accounted for; the total must divide by pp, and a rank's share by vpp.
  const long long total = static_cast<long long>(layers) + account_embedding + account_loss;
  const std::string total_text =
      std::to_string(layers) +
      (account_embedding || account_loss
           ? std::string(" layers + ") + (account_embedding ? "the embedding" : "") +
                 (account_embedding && account_loss ? " + " : "") +
                 (account_loss ? "the loss" : "") + " = " + std::to_string(total)
           : std::string(" layers"));
  if (total % pp != 0)
    throw FormatError(total_text + " do not split evenly over " + std::to_string(pp) +
                      " pipeline ranks, which Megatron-LM requires without uneven-partition "
                      "flags");
  const long long per_rank = total / pp;
  if (per_rank % vpp != 0)
    throw FormatError(std::to_string(per_rank) +
                      " layers per pipeline rank do not split evenly "
                      "over " +
                      std::to_string(vpp) + " virtual stages");
  std::vector<int> partition(static_cast<std::size_t>(pp) * vpp, static_cast<int>(per_rank / vpp));
  if (account_embedding) --partition.front();
  if (account_loss) --partition.back();
  // [MG-block]: "Not enough layers in the first (last) virtual pipeline stage".
  if (partition.front() < 0 || partition.back() < 0)
    throw FormatError("the first or last virtual stage would hold fewer than 0 decoder layers");
  return partition;
}

// ---- --moe-layer-freq ------------------------------------------------------------------------

namespace {

/// A recursive-descent reader of the list expressions moe_freq_type accepts: sums of
/// products of list literals, parenthesised expressions and integers, as Python evaluates
/// them (list + list concatenates, list * n and n * list repeat, int arithmetic otherwise).
class PatternReader {
 public:
  explicit PatternReader(std::string_view s) : s_(s) {}

  struct Value {
    bool is_list = false;
    long long n = 0;
    std::vector<int> list;
  };

  Value whole() {
    Value v = sum();
    if (i_ != s_.size()) bad("unexpected '" + std::string(1, s_[i_]) + "'");
    return v;
  }

 private:
  [[noreturn]] void bad(const std::string& why) const {
    throw FormatError("--moe-layer-freq: " + why + " at character " + std::to_string(i_ + 1) +
                      " of '" + std::string(s_) + "'");
  }
  bool eat(char c) {
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  Value sum() {
    Value v = product();
    while (eat('+')) {
      Value r = product();
      if (v.is_list != r.is_list) bad("cannot add a list and a number");
      if (v.is_list) {
        v.list.insert(v.list.end(), r.list.begin(), r.list.end());
        if (static_cast<long long>(v.list.size()) > kMaxUnrolled) bad("the list is too long");
      } else {
        v.n += r.n;
        if (v.n > kMaxUnrolled) bad("the number is too large");
      }
    }
    return v;
  }
  Value product() {
    Value v = atom();
    while (eat('*')) {
      Value r = atom();
      if (v.is_list && r.is_list) bad("cannot multiply two lists");
      if (!v.is_list && !r.is_list) {
        v.n *= r.n;
        if (v.n > kMaxUnrolled) bad("the number is too large");
        continue;
      }
      Value& list = v.is_list ? v : r;
      const long long times = v.is_list ? r.n : v.n;
      if (times * static_cast<long long>(list.list.size()) > kMaxUnrolled)
        bad("the list is too long");
      std::vector<int> out;
      for (long long k = 0; k < times; ++k)
        out.insert(out.end(), list.list.begin(), list.list.end());
      v.is_list = true;
      v.list = std::move(out);
    }
    return v;
  }
  Value atom() {
    Value v;
    if (eat('(')) {
      v = sum();
      if (!eat(')')) bad("expected ')'");
      return v;
    }
    if (eat('[')) {
      v.is_list = true;
      if (eat(']')) return v;
      do {
        const Value e = sum();
        if (e.is_list) bad("a list inside a list");
        v.list.push_back(static_cast<int>(e.n));
      } while (eat(','));
      if (!eat(']')) bad("expected ']'");
      return v;
    }
    if (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) {
      v.n = repeat_count(s_, i_);
      return v;
    }
    bad(i_ < s_.size() ? "unexpected '" + std::string(1, s_[i_]) + "'" : "unexpected end");
  }

  std::string_view s_;
  std::size_t i_ = 0;
};

}  // namespace

std::vector<int> megatron_moe_pattern(std::string_view text, int layers) {
  std::vector<int> out;
  if (text.find('[') == std::string_view::npos) {
    // int(x): optional surrounding whitespace, an optional sign, digits.
    std::size_t i = 0;
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    if (i < text.size() && text[i] == '+') ++i;
    const std::size_t digits = i;
    long long n = 0;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])) &&
           n <= kMaxUnrolled)
      n = n * 10 + (text[i++] - '0');
    const std::size_t end = i;
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    if (end == digits || i != text.size())
      throw FormatError(
          "--moe-layer-freq: expected an integer or a list expression such as "
          "([0]*3+[1]*58), got '" +
          std::string(text) + "'");
    if (n < 1 || n > kMaxUnrolled)
      throw FormatError("--moe-layer-freq: " + std::string(text) +
                        " must be at least 1 (one MoE layer every N layers)");
    // gpt_layer_specs.py get_moe_layer_pattern: 1 if i % N == 0 else 0.
    for (int i2 = 0; i2 < layers; ++i2) out.push_back(i2 % n == 0 ? 1 : 0);
    return out;
  }
  // _eval_pattern: only these characters reach eval.
  for (char c : text)
    if (!std::isdigit(static_cast<unsigned char>(c)) &&
        std::string_view(",[]()+*").find(c) == std::string_view::npos)
      throw FormatError("--moe-layer-freq: Megatron-LM refuses the character '" +
                        std::string(1, c) + "' in a pattern (it allows digits and ,[]()+*)");
  const PatternReader::Value v = PatternReader(text).whole();
  if (!v.is_list)
    throw FormatError("--moe-layer-freq: '" + std::string(text) +
                      "' evaluates to a number, not a list");
  if (static_cast<int>(v.list.size()) != layers)
    throw FormatError("--moe-layer-freq: the pattern has " + std::to_string(v.list.size()) +
                      " entries, but --num-layers is " + std::to_string(layers) +
                      " (Megatron-LM asserts one per layer)");
  for (std::size_t k = 0; k < v.list.size(); ++k)
    if (v.list[k] != 0 && v.list[k] != 1)
      throw FormatError("--moe-layer-freq: entry " + std::to_string(k) + " is " +
                        std::to_string(v.list[k]) + "; expected 1 (MoE) or 0 (dense)");
  return v.list;
}

std::string megatron_moe_freq_text(const std::vector<int>& pattern) {
  const int layers = static_cast<int>(pattern.size());
  for (int n = 1; n <= std::max(layers, 1); ++n) {
    bool same = true;
    for (int i = 0; i < layers && same; ++i) same = pattern[i] == (i % n == 0 ? 1 : 0);
    if (same) return std::to_string(n);
  }
  std::string out = "(";
  for (int i = 0; i < layers;) {
    int j = i;
    while (j < layers && pattern[j] == pattern[i]) ++j;
    if (i > 0) out += '+';
    out += '[';
    out += pattern[i] == 1 ? '1' : '0';
    out += ']';
    if (j - i > 1) out.append("*").append(std::to_string(j - i));
    i = j;
  }
  return out + ")";
}

}  // namespace bmpipe
