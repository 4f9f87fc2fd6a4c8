// The exporter table (frameworks/exporters.hpp) that `bmpipe export --format`, `plan
// --format` and `plan --expressible` dispatch through: each row's name finds it, the names
// are the importers' that read a layout back, each framework's schedules are its own
// column, and an unknown name is refused with the table's names.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "api/api.hpp"
#include "api/export.hpp"
#include "experiment/suggest.hpp"
#include "frameworks/exporters.hpp"
#include "frameworks/importers.hpp"
#include "frameworks/megatron/schedules.hpp"
#include "frameworks/mindformers/schedules.hpp"
#include "frameworks/torchtitan/formats.hpp"
#include "schedules/registry.hpp"

namespace bmpipe {
namespace {

TEST(Exporters, EveryRowIsFoundByItsNameAndComplete) {
  std::set<std::string> names;
  for (const Exporter& x : exporters()) {
    EXPECT_TRUE(names.insert(std::string(x.name)).second) << x.name << " twice";
    EXPECT_EQ(find_exporter(x.name), &x);
    EXPECT_FALSE(x.framework.empty()) << x.name;
    EXPECT_FALSE(x.words.empty()) << x.name;
    EXPECT_TRUE(x.runs && x.runs_as && x.not_run && x.refusal && x.state && x.states &&
                x.recompute_rules)
        << x.name;
  }
  EXPECT_EQ(find_exporter("Megatron"), nullptr);
  EXPECT_EQ(find_exporter("profile"), nullptr);
  EXPECT_EQ(find_exporter(""), nullptr);
}

// What a framework exports it imports back (the round trips of export_roundtrip_test): the
// exporters are exactly the importers that read a training layout from their input, every
// importer but a profile's.
// torchtitan's two forms, the job TOML and the registry's command line, are both read back
// by `import torchtitan`.
TEST(Exporters, AreTheImportersThatReadALayout) {
  std::vector<std::string> importing, read_back;
  for (const Importer& i : importers())
    if (!i.takes_layout) importing.emplace_back(i.name);
  for (const Exporter& x : exporters()) {
    const std::string_view by = x.importer.empty() ? x.name : x.importer;
    if (read_back.empty() || read_back.back() != by) read_back.emplace_back(by);
  }
  EXPECT_EQ(read_back, importing);
  EXPECT_EQ(exporter_names(), api::export_formats());
  EXPECT_EQ(exporter_names(), (std::vector<std::string>{"megatron", "mindformers", "torchtitan",
                                                        "torchtitan-registry"}));
}

TEST(Exporters, AnUnknownFrameworkIsRefusedWithTheTablesNames) {
  try {
    api::check_export_request({"torch", {}});
    FAIL() << "accepted";
  } catch (const api::RequestError& e) {
    EXPECT_EQ(e.key(), "--format");
    EXPECT_EQ(e.message(), "unknown format 'torch' (" + comma_list(exporter_names()) + ")");
    EXPECT_EQ(e.message(),
              "unknown format 'torch' (megatron, mindformers, torchtitan, torchtitan-registry)");
  }
}

TEST(Exporters, EachFrameworksSchedulesAreItsOwnColumn) {
  std::set<std::string> megatron;
  std::map<std::string, std::string> mindformers, torchtitan;
  for (const ScheduleInfo& info : builtin_schedules()) {
    if (!torchtitan_schedule_name(info.name).empty())
      torchtitan[std::string(info.name)] = std::string(torchtitan_schedule_name(info.name));
    EXPECT_EQ(find_exporter("torchtitan")->runs(info.name),
              !torchtitan_schedule_name(info.name).empty());
    if (megatron_runs(info.name)) megatron.insert(std::string(info.name));
    if (!mindformers_scheduler(info.name).empty())
      mindformers[std::string(info.name)] = std::string(mindformers_scheduler(info.name));
    EXPECT_EQ(find_exporter("megatron")->runs(info.name), megatron_runs(info.name));
    EXPECT_EQ(find_exporter("mindformers")->runs(info.name),
              !mindformers_scheduler(info.name).empty());
  }
  // Megatron-LM's pipeline schedules: forward_backward_pipelining_without_interleaving and
  // ..._with_interleaving (megatron/core/pipeline_parallel/schedules.py).
  EXPECT_EQ(megatron, (std::set<std::string>{"1f1b", "interleaved"}));
  // MindFormers' parallel_config.pipeline_scheduler: "1f1b" (interleaved when
  // pp_interleave_num > 1) and "gpipe".
  EXPECT_EQ(mindformers, (std::map<std::string, std::string>{
                             {"gpipe", "gpipe"}, {"1f1b", "1f1b"}, {"interleaved", "1f1b"}}));
  // torchtitan's: the names of torch.distributed.pipelining's get_schedule_class that bmpipe
  // has a schedule for (LoopedBFS and InterleavedZeroBubble it has not).
  EXPECT_EQ(torchtitan, (std::map<std::string, std::string>{{"1f1b", "1F1B"},
                                                            {"interleaved", "Interleaved1F1B"},
                                                            {"gpipe", "GPipe"},
                                                            {"zb-v", "ZBVZeroBubble"},
                                                            {"dualpipe-v", "DualPipeV"}}));
  // Every name in a framework's column is a schedule of the table.
  for (std::string_view n : megatron_schedules()) EXPECT_NE(find_schedule(n), nullptr) << n;
  for (const MindFormersSchedule& s : mindformers_schedules())
    EXPECT_NE(find_schedule(s.schedule), nullptr) << s.schedule;
  // What each runs a layout of a schedule with.
  const Exporter& m = *find_exporter("megatron");
  const Exporter& f = *find_exporter("mindformers");
  EXPECT_EQ(m.runs_as("zb-v", 1), "1f1b");
  EXPECT_EQ(m.runs_as("interleaved", 2), "interleaved");
  EXPECT_EQ(f.runs_as("gpipe", 1), "gpipe");
  EXPECT_EQ(f.runs_as("zb-h1", 1), "1f1b");
  EXPECT_EQ(f.runs_as("interleaved", 3), "interleaved");
  // torchtitan: a V schedule it lacks runs as ZBVZeroBubble, a looped one as Interleaved1F1B.
  const Exporter& t = *find_exporter("torchtitan");
  EXPECT_EQ(t.runs_as("v-half", 2), "zb-v");
  EXPECT_EQ(t.runs_as("dualpipe-v", 2), "dualpipe-v");
  EXPECT_EQ(t.runs_as("zb-h2", 1), "1f1b");
  EXPECT_EQ(t.runs_as("gpipe", 1), "gpipe");
  EXPECT_EQ(t.runs_as("interleaved", 2), "interleaved");
}

}  // namespace
}  // namespace bmpipe
