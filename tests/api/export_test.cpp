// api::export_config on configs whose times are worked out by hand: tiny.yaml (p = 4,
// m = 8, two unit layers per stage: F = 1 ms, I = W = 1 ms per stage, free communication).
// The export's time is the framework's schedule's, whatever the config's schedule is.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "api/api.hpp"
#include "api/contracts.hpp"
#include "api/export.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace {

using test::kTiny;

api::ExportOutcome export_tiny(const std::string& format, const std::string& schedule,
                               int vpp = 1) {
  Overrides o;
  o.schedule = schedule;
  if (vpp > 1) o.vpp = vpp;
  return api::export_config(load_config(kTiny, o), api::ExportRequest{format, {}});
}

bool has_line(const std::string& text, const std::string& line) {
  return ("\n" + text).find("\n" + line + "\n") != std::string::npos;
}

// 1F1B: (m + p - 1)(F + B) = 11 x 3 = 33 ms, and Megatron-LM runs 1F1B itself: exact.
TEST(ExportConfig, OneFOneBIsExactAndComplete) {
  const api::ExportOutcome x = export_tiny("megatron", "1f1b");
  EXPECT_EQ(x.schedule, "1f1b");
  EXPECT_EQ(x.result.iteration_time, ms_to_ns(33.0));
  EXPECT_EQ(x.config_result.iteration_time, ms_to_ns(33.0));
  EXPECT_TRUE(x.exact);
  EXPECT_TRUE(x.states_plan);
  EXPECT_TRUE(x.notes.empty());
  // tp 1, pp 4, 8 layers, dp 4 / (1 x 4) = 1, global batch 1 x 1 x 8 = 8.
  for (const char* flag : {"--tensor-model-parallel-size 1", "--pipeline-model-parallel-size 4",
                           "--num-layers 8", "--micro-batch-size 1", "--global-batch-size 8"})
    EXPECT_TRUE(has_line(x.text, flag)) << flag << " in\n" << x.text;
  // No recompute: the script's recompute flags must go; at tp 1 --sequence-parallel is moot.
  for (const char* flag : {"--recompute-granularity", "--recompute-method",
                           "--recompute-num-layers", "--recompute-activations"})
    EXPECT_TRUE(has_line(x.text, std::string("#   ") + flag)) << flag;
  EXPECT_EQ(x.text.find("sequence-parallel"), std::string::npos);
}

// ZB-H1 takes m(F + I + W) + (p - 1)(F + I - W) = 24 + 3 = 27 ms; Megatron-LM has no ZB-H1
// and runs the same flags as 1F1B, 33 ms.
TEST(ExportConfig, ZeroBubbleQuotesOneFOneB) {
  const api::ExportOutcome x = export_tiny("megatron", "zb-h1");
  EXPECT_EQ(x.config_result.iteration_time, ms_to_ns(27.0));
  EXPECT_EQ(x.schedule, "1f1b");
  EXPECT_EQ(x.result.iteration_time, ms_to_ns(33.0));
  EXPECT_FALSE(x.exact);
  EXPECT_TRUE(x.states_plan);  // the flags state the plan; only the schedule differs
  ASSERT_FALSE(x.notes.empty());
  EXPECT_NE(x.notes.front().find("no zb-h1 schedule"), std::string::npos) << x.notes.front();
  const nlohmann::json j = api::export_document(x);
  EXPECT_EQ(j["iteration_time_ms"].get<double>(), 33.0);
  EXPECT_EQ(j["config_iteration_time_ms"].get<double>(), 27.0);
  EXPECT_FALSE(j["exact"].get<bool>());
}

// Interleaved with v = 2 (one layer per stage): m(F + B) + (p - 1)(F + B)/v per device, with
// F + B = 3 ms of a device's two chunks per micro-batch: 24 + 4.5 = 28.5 ms. Megatron-LM
// runs it as it is.
TEST(ExportConfig, InterleavedIsExact) {
  const api::ExportOutcome x = export_tiny("megatron", "interleaved", 2);
  EXPECT_EQ(x.schedule, "interleaved");
  EXPECT_EQ(x.vpp, 2);
  EXPECT_EQ(x.result.iteration_time, ms_to_ns(28.5));
  EXPECT_TRUE(x.exact);
  EXPECT_TRUE(has_line(x.text, "--num-virtual-stages-per-pipeline-rank 2")) << x.text;
}

// A V schedule (rank r holds stages r and 2p-1-r) becomes Megatron-LM's interleaved
// placement of the same stages: the interleaved 28.5 ms, not the V schedule's own time.
TEST(ExportConfig, VPlacementQuotesInterleaved) {
  const api::ExportOutcome x = export_tiny("megatron", "zb-v");
  EXPECT_EQ(x.schedule, "interleaved");
  EXPECT_EQ(x.vpp, 2);
  EXPECT_EQ(x.result.iteration_time, ms_to_ns(28.5));
  EXPECT_NE(x.config_result.iteration_time, ms_to_ns(28.5));
  EXPECT_FALSE(x.exact);
}

// MindFormers has GPipe: (m + p - 1)(F + B) = 33 ms, scheduler gpipe, exact.
TEST(ExportConfig, MindFormersKeepsGpipe) {
  const api::ExportOutcome x = export_tiny("mindformers", "gpipe");
  EXPECT_EQ(x.schedule, "gpipe");
  EXPECT_EQ(x.result.iteration_time, ms_to_ns(33.0));
  EXPECT_TRUE(x.exact);
  for (const char* key : {"    pipeline_scheduler: gpipe", "  data_parallel: 1",
                          "  model_parallel: 1", "  pipeline_stage: 4", "  micro_batch_num: 8",
                          "  batch_size: 1", "    offset: [0, 0, 0, 0]"})
    EXPECT_TRUE(has_line(x.text, key)) << key << " in\n" << x.text;
}

TEST(ExportConfig, BadRequestsNameTheOption) {
  auto key_of = [](const api::ExportRequest& r) {
    try {
      api::check_export_request(r);
    } catch (const api::RequestError& e) {
      return e.key() + ": " + e.message();
    }
    return std::string("accepted");
  };
  EXPECT_EQ(key_of({"megatorn", {}}),
            "--format: unknown format 'megatorn' (did you mean 'megatron'?) (megatron, "
            "mindformers, torchtitan, torchtitan-registry)");
  EXPECT_EQ(key_of({"megatron", -1.0}), "--memory-limit-GiB: must be a positive number of GiB");
  EXPECT_EQ(key_of({"mindformers", 60.0}), "accepted");
}

// A plan filled in memory is the plan --out would write: its own run, and it is checked.
TEST(ExportConfig, ConfigWithPlanIsChecked) {
  const Config tiny = load_config(kTiny);
  const ConfigEdits edits{"1f1b", 4, 1, 8, {3, 2, 2, 1}, std::vector<Recompute>(8), {}, {}, {}};
  const Config planned = api::config_with_plan(tiny, edits);
  EXPECT_EQ(planned.training.partition, (std::vector<int>{3, 2, 2, 1}));
  ConfigEdits bad = edits;
  bad.partition = {3, 3, 3, 3};
  EXPECT_THROW(api::config_with_plan(tiny, bad), ConfigError);
}

}  // namespace
}  // namespace bmpipe
