#pragma once
/// \file
/// A framework's own rules, as a table: each rule is one check a framework makes of a job
/// before it trains (an assertion of Megatron-Core's TransformerConfig, of MindFormers'
/// config checks, of torchtitan's ParallelDims), quoted and cited, with the bmpipe key it
/// blames. One table per framework: Megatron-LM's (experiment/rules_megatron.hpp, here
/// because bmpipe's YAML is Megatron-semantics and the loader applies it to every config),
/// MindFormers' (frameworks/mindformers/rules.hpp) and torchtitan's
/// (frameworks/torchtitan/rules.hpp). frameworks/framework_rules.hpp names each exporter's
/// table, and asks it "does the framework run this job, and which rule refuses it?" for
/// import, export and `plan --expressible`.
///
/// The interface sits in experiment/ (below frameworks/, tests/cli/layering_test.cpp) so
/// that the loader, which is here, can hold Megatron-LM's table, and frameworks/ fills the
/// other two with the same struct.

#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "experiment/config.hpp"

namespace bmpipe {

/// Why a rule refuses a config: the key it blames and the message (the framework's own
/// assertion text quoted in it), as Config::fail takes them.
struct RuleBreach {
  std::string key;
  std::string message;
};

struct FrameworkRule {
  std::string_view id;         ///< "megatron.overlap-param-gather-grad-reduce"
  std::string_view framework;  ///< "Megatron-LM"
  std::string_view keys;       ///< the bmpipe keys it may blame, comma-separated
  std::string_view assertion;  ///< the framework's own text (or what it does, unquoted)
  std::string_view source;     ///< repository file at a commit
  /// What the rule finds wrong with `c`, or none when the framework runs it.
  std::optional<RuleBreach> (*check)(const Config& c) = nullptr;
  /// The exporter states the job without the breach (Exporter::restated turns the setting
  /// off, saying so) rather than refusing it: the rule refuses the job the text states,
  /// never the config the user gave.
  bool export_restates = false;
};

/// The first rule of `rules` that refuses `c`, and why; none when the framework runs it.
struct RuleRefusal {
  const FrameworkRule* rule = nullptr;
  RuleBreach breach;
};
std::optional<RuleRefusal> first_refusal(std::span<const FrameworkRule> rules, const Config& c);

/// The same, of the rules the exporter refuses (not FrameworkRule::export_restates).
std::optional<RuleRefusal> first_export_refusal(std::span<const FrameworkRule> rules,
                                                const Config& c);

/// Refuses `c` by the first rule of `rules` it breaks: ConfigError FILE:LINE: key, exit 2.
void apply_rules(std::span<const FrameworkRule> rules, const Config& c);

/// The rule `id` of `rules`; throws std::logic_error when there is none (a typo in code).
const FrameworkRule& rule_by_id(std::span<const FrameworkRule> rules, std::string_view id);

/// The table as a Markdown list, one rule a line: what docs/export.md shows.
std::string rules_markdown(std::span<const FrameworkRule> rules);

/// The first of `keys` the file (or the command line) set, else the first: the key a rule
/// between several keys blames.
std::string given_key(const Config& c, std::initializer_list<const char*> keys);

/// The first key of training.recompute that names `mode` (the default's, then the stages',
/// then the layers'), or "" when none does.
std::string recompute_mode_key(const Config& c, Recompute want);

}  // namespace bmpipe
