// The planner's third lever (issue 43): `plan --offload auto` plans once per activation-
// offload choice and keeps the fastest fitting plan, and the planner's memory estimate
// counts offloaded bytes as the engine holds them (memory_model.hpp, moment_bytes).
#include <gtest/gtest.h>

#include "planner/memory_model.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace offload_plan_test {

using test::run_cli;

TEST(OffloadMemoryModel, OffloadedBytesStayForTheResidentMicroBatchesOnly) {
  // 8 micro-batches of 10 bytes in flight, 6 of each offloaded, 3 resident:
  // 8 x (10 - 6) + 3 x 6 = 50; and 2 retained of 4 bytes: + 8.
  EXPECT_EQ(moment_bytes(8, 2, 10, 4, 6, 3), 50 + 8);
  // Fewer in flight than resident: all of it, 2 x 10.
  EXPECT_EQ(moment_bytes(2, 0, 10, 4, 6, 3), 20);
  // Nothing offloaded: the old count, full x A + retained x R.
  EXPECT_EQ(moment_bytes(8, 2, 10, 4, 0, 3), 88);
  // 1F1B on 4 ranks, 8 micro-batches: rank 0 holds 4 at its peak; with 2 resident,
  // 4 x (10 - 6) + 2 x 6 = 28 against 40 without offload.
  const Schedule sch = test::generate("1f1b", 4, 8);
  const std::vector<RankMemory> plain = memory_profile(sch);
  const std::vector<RankMemory> off = memory_profile(sch, 2);
  EXPECT_EQ(peak_activation(plain[0], {10}, {10}), 40);
  EXPECT_EQ(peak_activation(off[0], {10}, {10}, {6}), 28);
  EXPECT_EQ(peak_activation(off[0], {10}, {10}), 40);  // no offload vector: as before
}

// Llama-3.1-405B, 1F1B on 1 024 H100 (tp 8, cp 2, pp 8), at a 60 GiB limit: offloading the
// attention's inputs to the host lets fewer layers recompute, so the joint plan is faster
// than recompute alone, which is one of the choices tried.
TEST(OffloadPlan, JointPlanIsNeverSlowerThanRecomputeAlone) {
  const nlohmann::json j = test::run_json(
      "plan " + test::kExamples +
      "h100_llama31_405b_fp8_cp2.yaml --schedule 1f1b --max-evals 200 --quiet --json --set "
      "training.recompute=none --memory-limit-GiB 60 --offload auto");
  const auto& tried = j["offload"]["tried"];
  ASSERT_EQ(tried.size(), 3u);
  EXPECT_EQ(tried[0]["offload_modules"], "none");
  EXPECT_EQ(tried[1]["offload_modules"], "core_attn,attn_proj");
  EXPECT_EQ(tried[2]["offload_modules"], "qkv_linear,core_attn,attn_proj");
  double least = 1e300;
  for (const auto& row : tried) least = std::min(least, row["iteration_time_ms"].get<double>());
  const double recompute_alone = tried[0]["iteration_time_ms"].get<double>();
  EXPECT_EQ(j["plan"]["iteration_time_ms"].get<double>(), least);
  EXPECT_LT(least, recompute_alone);
  EXPECT_NE(j["offload"]["chosen"], "none");
}

TEST(OffloadPlan, BadChoicesAndHostlessDevicesAreRefused) {
  const test::CliRun bad = run_cli("plan " + test::kTiny + " --offload sometimes --quiet");
  EXPECT_EQ(bad.code, 2) << bad.all();
  EXPECT_NE(bad.err.find("--offload"), std::string::npos) << bad.err;
  // The tiny example has measured layers and no host link.
  const test::CliRun hostless = run_cli("plan " + test::kTiny + " --offload auto --quiet");
  EXPECT_EQ(hostless.code, 2) << hostless.all();
  EXPECT_NE(hostless.err.find("needs an analytic model on a device with a host link"),
            std::string::npos)
      << hostless.err;
}

}  // namespace offload_plan_test
}  // namespace bmpipe
