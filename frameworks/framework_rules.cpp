#include "frameworks/framework_rules.hpp"

#include <vector>

#include "experiment/rules_megatron.hpp"
#include "frameworks/mindformers/rules.hpp"
#include "frameworks/torchtitan/rules.hpp"

namespace bmpipe {

std::span<const FrameworkRule> framework_rules(const Exporter& x) {
  return x.rules ? x.rules() : std::span<const FrameworkRule>{};
}

std::optional<RuleRefusal> framework_refusal(const Exporter& x, const Config& job) {
  return first_refusal(framework_rules(x), job);
}

Config stated_job(const Exporter& x, const Config& config) {
  std::vector<std::string> dropped;
  return x.restated ? x.restated(config, dropped) : config;
}

std::string framework_rules_markdown() {
  std::string out;
  for (const auto& [name, rules] :
       {std::pair{"Megatron-LM", megatron_rules()}, std::pair{"MindFormers", mindformers_rules()},
        std::pair{"torchtitan", torchtitan_rules()}}) {
    out += std::string(out.empty() ? "" : "\n") + "#### " + name + "\n\n";
    out += rules_markdown(rules);
  }
  return out;
}

}  // namespace bmpipe
