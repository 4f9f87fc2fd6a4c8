// The importer table (frameworks/importers.hpp) that `bmpipe import` dispatches from: each
// row's name finds it, the names and the help read as `bmpipe import --help` prints them,
// and each reader is the framework's own.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "frameworks/importers.hpp"
#include "frameworks/megatron/import.hpp"
#include "frameworks/mindformers/import.hpp"
#include "frameworks/profile/import.hpp"
#include "frameworks/torchtitan/import.hpp"
#include "frameworks/torchtitan/registry.hpp"

namespace bmpipe {
namespace {

TEST(Importers, EveryRowIsFoundByItsName) {
  std::set<std::string> names;
  for (const Importer& i : importers()) {
    EXPECT_TRUE(names.insert(std::string(i.name)).second) << i.name << " twice";
    EXPECT_EQ(find_importer(i.name), &i);
    EXPECT_NE(i.read, nullptr) << i.name;
    EXPECT_FALSE(i.input.empty()) << i.name;
    EXPECT_FALSE(i.summary.empty()) << i.name;
  }
  EXPECT_EQ(find_importer("Megatron"), nullptr);
  EXPECT_EQ(find_importer(""), nullptr);
}

TEST(Importers, TheReadersAndOptionsOfEachFormat) {
  ASSERT_NE(find_importer("megatron"), nullptr);
  ASSERT_NE(find_importer("mindformers"), nullptr);
  ASSERT_NE(find_importer("profile"), nullptr);
  ASSERT_NE(find_importer("torchtitan"), nullptr);
  EXPECT_EQ(find_importer("megatron")->read, &read_megatron_args);
  EXPECT_EQ(find_importer("mindformers")->read, &read_mindformers_yaml);
  EXPECT_EQ(find_importer("profile")->read, &read_profile_csv);
  EXPECT_EQ(find_importer("torchtitan")->read, &read_torchtitan);  // a TOML or a command
  // Only a profile lacks a training layout; MindFormers and torchtitan say how many devices
  // they use (torchtitan unless its shard degree is -1).
  for (const Importer& i : importers()) {
    EXPECT_EQ(i.takes_layout, i.name == "profile") << i.name;
    EXPECT_EQ(i.counts_devices, i.name == "mindformers" || i.name == "torchtitan") << i.name;
  }
}

TEST(Importers, NamesAndHelpAsTheCommandPrintsThem) {
  EXPECT_EQ(importer_names(), "megatron, mindformers, torchtitan or profile");
  EXPECT_EQ(importer_help(),
            "  megatron ARGS     a Megatron-LM launch script's arguments (flags as\n"
            "                    megatron/training/arguments.py spells them, one or many per "
            "line,\n"
            "                    '\\' continuations and '#' comments allowed; '-' reads stdin)\n"
            "  mindformers YAML  a MindFormers training config (Llama family, DeepSeek-V3)\n"
            "  torchtitan FILE   a torchtitan job TOML (its form up to v0.2.2; llama3 and\n"
            "                    deepseek_v3 flavors), or a command line of its 2026 config\n"
            "                    registry (--module llama3 --config llama3_8b --section.option\n"
            "                    VALUE ...); data_parallel_shard_degree -1 takes what --devices\n"
            "                    leaves\n"
            "  profile CSV       measured per-layer costs, one row per run of identical layers\n"
            "                    (columns: see docs/import.md)\n");
}

}  // namespace
}  // namespace bmpipe
