#pragma once
/// \file
/// One question, asked alike on import, in the loader for a framework's exports, in `plan
/// --expressible FRAMEWORK` and in the exporter: does the framework run this job, and which
/// of its rules refuses it? Each framework's rules are one table (experiment/
/// framework_rules.hpp): Megatron-LM's in experiment/rules_megatron.cpp, MindFormers' in
/// frameworks/mindformers/rules.cpp, torchtitan's in frameworks/torchtitan/rules.cpp. The
/// exporter and importer rows (exporters.hpp, importers.hpp) name their table.

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "experiment/framework_rules.hpp"
#include "frameworks/exporters.hpp"

namespace bmpipe {

/// The rules of the framework `x` writes for.
std::span<const FrameworkRule> framework_rules(const Exporter& x);

/// Whether x's framework runs `job` (the job x's text states: Exporter::restated of the
/// config): none when it does, else the first of its rules that refuses it and why.
std::optional<RuleRefusal> framework_refusal(const Exporter& x, const Config& job);

/// The job x's text states of `config` (Exporter::restated, or the config itself).
Config stated_job(const Exporter& x, const Config& config);

/// Every framework's table as docs/export.md lists it: a heading per framework, a line per
/// rule.
std::string framework_rules_markdown();

}  // namespace bmpipe
