// Jobs on part of a cluster (issue 41, item 4): training.devices puts the job on the
// cluster's first devices and leaves the rest idle, stated in the output. The job on 64 of an
// NVL72's 72 GPUs is the job on a 64-GPU domain, to the nanosecond (every group stays inside
// the one NVLink domain either way); 1 024 NPUs of three 384-NPU SuperPoDs, which no cluster
// of 1 024 can state (384 divides no such cluster), run; the search lays out only the job's
// devices; every bad value exits 2 naming training.devices or the size it breaks.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "experiment/config_cases.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace {

using test::config_error;
using test::has;
using test::run_cli;

// Llama 3 70B on GB200: `cluster` is the cluster: section's body; line 3 is training.
std::string job(const std::string& cluster, const std::string& extra) {
  return "cluster: {" + cluster +
         ", device: {preset: gb200}}\n"
         "model: {preset: llama3-70b}\n"
         "training: {pp: 4, tp: 4, seq_length: 8192, global_batch_size: 64, kernels: fused, "
         "recompute: full" +
         extra + "}\n";
}

nlohmann::json simulate_json(const test::ScratchDir& dir, const std::string& name,
                             const std::string& yaml) {
  const test::CliRun r =
      run_cli("simulate '" + test::write_file(dir.file(name), yaml) + "' --json");
  EXPECT_EQ(r.code, 0) << r.err;
  return r.code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json{};
}

TEST(PartialCluster, SixtyFourOfAnNvl72RunAsSixtyFourAlone) {
  const test::ScratchDir dir;
  const std::string part =
      job("nodes: 1, devices_per_node: 72, scale_up_domain: 72", ", devices: 64");
  const nlohmann::json a = simulate_json(dir, "part.yaml", part);
  const nlohmann::json b =
      simulate_json(dir, "whole.yaml", job("nodes: 1, devices_per_node: 64", ""));
  // dp = 64 / (pp 4 x tp 4) = 4 in both; 64 samples of micro-batch 1 make 16 micro-batches.
  EXPECT_EQ(a["dp"], 4);
  EXPECT_EQ(a["microbatches"], 16);
  EXPECT_EQ(a["iteration_time_ms"], b["iteration_time_ms"]);
  EXPECT_EQ(a["mfu"], b["mfu"]);
  EXPECT_EQ(a["job"]["devices"], 64);
  EXPECT_EQ(a["job"]["cluster_devices"], 72);
  EXPECT_EQ(a["idle_devices"], 8);
  EXPECT_FALSE(b.contains("idle_devices"));
  const test::CliRun text = run_cli("simulate '" + dir.file("part.yaml") + "'");
  EXPECT_TRUE(has(text.out, "\ndevices          64 of the cluster's 72 (8 idle)\n"));
}

TEST(PartialCluster, ThousandTwentyFourNpusOfThreeSuperPods) {
  const test::ScratchDir dir;
  // Ascend 910C: 8 NPUs a node, 384 a SuperPoD (the preset's domain). 1 024 NPUs as one
  // cluster cannot be written: 384 does not divide 1 024.
  const std::string head = "cluster: {nodes: ";
  const std::string rest =
      ", devices_per_node: 8, device: {preset: ascend-910c}}\n"
      "model: {preset: llama2-7b}\n"
      "training: {pp: 4, tp: 8, seq_length: 4096, global_batch_size: 256";
  const test::CliRun whole = run_cli(
      "simulate '" + test::write_file(dir.file("1024.yaml"), head + "128" + rest + "}\n") + "'");
  EXPECT_EQ(whole.code, 2);
  EXPECT_TRUE(has(whole.err, "expected a divisor of nodes x devices_per_node = 128 x 8 = 1024"));
  // Three SuperPoDs, 144 nodes = 1 152 NPUs, the job on 1 024: dp = 1024 / 32 = 32, 128 idle.
  const nlohmann::json j =
      simulate_json(dir, "pods.yaml", head + "144" + rest + ", devices: 1024}\n");
  EXPECT_EQ(j["dp"], 32);
  EXPECT_EQ(j["idle_devices"], 128);
  EXPECT_EQ(j["global_batch_size"], 256);
}

TEST(PartialCluster, TheSearchLaysOutOnlyTheJobsDevices) {
  const test::ScratchDir dir;
  const std::string yaml =
      test::write_file(dir.file("search.yaml"),
                       job("nodes: 1, devices_per_node: 72, scale_up_domain: 72", ", devices: 64"));
  const test::CliRun r = run_cli("search '" + yaml + "' --planner off --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_GT(j["layouts"].size(), 10u);
  for (const auto& l : j["layouts"])
    EXPECT_EQ(l["tp"].get<int>() * l["pp"].get<int>() * l["dp"].get<int>(), 64) << l.dump();
}

TEST(PartialCluster, BadValuesNameTheirKey) {
  const std::string cluster = "nodes: 1, devices_per_node: 72, scale_up_domain: 72";
  ConfigError e = config_error(job(cluster, ", devices: 80"));
  EXPECT_EQ(e.key(), "training.devices");
  EXPECT_EQ(e.line(), 3);
  EXPECT_TRUE(has(e.message(),
                  "80 devices, but the cluster has nodes x devices_per_node = 1 x "
                  "72 = 72 (expected at most that"));
  e = config_error(job(cluster, ", devices: 0"));
  EXPECT_EQ(e.key(), "training.devices");
  // pp 4 x tp 4 = 16 does not divide 60; dp 3 does not fill 64.
  e = config_error(job(cluster, ", devices: 60"));
  EXPECT_EQ(e.key(), "training.tp");
  EXPECT_TRUE(has(e.message(), "pp * tp = 16 does not divide the 60 devices"));
  e = config_error(test::with("pp: 4", "pp: 3", job(cluster, ", devices: 64")));
  EXPECT_TRUE(has(e.message(), "pp = 3 does not divide the 64 devices of training.devices"));
  e = config_error(job(cluster, ", devices: 64, dp: 2"));
  EXPECT_TRUE(has(e.message(), "pp * tp * dp = 32 but training.devices is 64 devices"));
}

}  // namespace
}  // namespace bmpipe
