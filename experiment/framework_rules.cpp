#include "experiment/framework_rules.hpp"

#include <stdexcept>

namespace bmpipe {

std::optional<RuleRefusal> first_refusal(std::span<const FrameworkRule> rules, const Config& c) {
  for (const FrameworkRule& r : rules)
    if (std::optional<RuleBreach> b = r.check(c)) return RuleRefusal{&r, std::move(*b)};
  return std::nullopt;
}

std::optional<RuleRefusal> first_export_refusal(std::span<const FrameworkRule> rules,
                                                const Config& c) {
  for (const FrameworkRule& r : rules)
    if (!r.export_restates)
      if (std::optional<RuleBreach> b = r.check(c)) return RuleRefusal{&r, std::move(*b)};
  return std::nullopt;
}

void apply_rules(std::span<const FrameworkRule> rules, const Config& c) {
  if (const std::optional<RuleRefusal> r = first_refusal(rules, c))
    c.fail(r->breach.key, r->breach.message);
}

const FrameworkRule& rule_by_id(std::span<const FrameworkRule> rules, std::string_view id) {
  for (const FrameworkRule& r : rules)
    if (r.id == id) return r;
  throw std::logic_error("no framework rule " + std::string(id));
}

std::string rules_markdown(std::span<const FrameworkRule> rules) {
  std::string out;
  for (const FrameworkRule& r : rules) {
    out += "- `" + std::string(r.id) + "` (" + std::string(r.keys) +
           "): " + std::string(r.assertion) + " — " + std::string(r.source);
    if (r.export_restates) out += "; the export restates the job to meet it, in a note";
    out += "\n";
  }
  return out;
}

std::string given_key(const Config& c, std::initializer_list<const char*> keys) {
  for (const char* k : keys)
    if (c.lines.count(k)) return k;
  return *keys.begin();
}

std::string recompute_mode_key(const Config& c, Recompute want) {
  const RecomputeSpec& r = c.training.recompute;
  if (r.global == want)
    return c.lines.count("training.recompute.default") ? "training.recompute.default"
                                                       : "training.recompute";
  for (const auto& [index, mode] : r.stages)
    if (mode == want) return "training.recompute.stages." + std::to_string(index);
  for (const auto& [index, mode] : r.layers)
    if (mode == want) return "training.recompute.layers." + std::to_string(index);
  return "";
}

}  // namespace bmpipe
