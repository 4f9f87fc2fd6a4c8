#include "frameworks/importers.hpp"

#include <algorithm>
#include <array>
#include <cstddef>

#include "experiment/rules_megatron.hpp"
#include "frameworks/megatron/import.hpp"
#include "frameworks/mindformers/import.hpp"
#include "frameworks/mindformers/rules.hpp"
#include "frameworks/profile/import.hpp"
#include "frameworks/torchtitan/registry.hpp"
#include "frameworks/torchtitan/rules.hpp"

namespace bmpipe {

namespace {

// clang-format off
constexpr std::array kImporters = {
    Importer{"megatron", "ARGS",
             "a Megatron-LM launch script's arguments (flags as\n"
             "megatron/training/arguments.py spells them, one or many per line,\n"
             "'\\' continuations and '#' comments allowed; '-' reads stdin)",
             read_megatron_args, false, false, megatron_rules},
    Importer{"mindformers", "YAML", "a MindFormers training config (Llama family, DeepSeek-V3)",
             read_mindformers_yaml, false, true, mindformers_rules},
    Importer{"torchtitan", "FILE",
             "a torchtitan job TOML (its form up to v0.2.2; llama3 and\n"
             "deepseek_v3 flavors), or a command line of its 2026 config\n"
             "registry (--module llama3 --config llama3_8b --section.option\n"
             "VALUE ...); data_parallel_shard_degree -1 takes what --devices\n"
             "leaves",
             read_torchtitan, false, true, torchtitan_rules},
    Importer{"profile", "CSV",
             "measured per-layer costs, one row per run of identical layers\n"
             "(columns: see docs/import.md)",
             read_profile_csv, true, false},
};
// clang-format on

}  // namespace

std::span<const Importer> importers() {
  return kImporters;
}

const Importer* find_importer(std::string_view name) {
  for (const Importer& i : kImporters)
    if (i.name == name) return &i;
  return nullptr;
}

std::string importer_names() {
  std::string out;
  for (std::size_t k = 0; k < kImporters.size(); ++k) {
    if (k > 0) out += k + 1 == kImporters.size() ? " or " : ", ";
    out += kImporters[k].name;
  }
  return out;
}

std::string importer_help() {
  // "  NAME INPUT" padded to the summary's column.
  constexpr std::size_t kColumn = 20;
  std::string out;
  for (const Importer& i : kImporters) {
    std::string line = "  " + std::string(i.name) + " " + std::string(i.input);
    line.resize(std::max(kColumn, line.size() + 1), ' ');
    out += line;
    for (const char c : i.summary) {
      out += c;
      if (c == '\n') out += std::string(kColumn, ' ');
    }
    out += '\n';
  }
  return out;
}

}  // namespace bmpipe
