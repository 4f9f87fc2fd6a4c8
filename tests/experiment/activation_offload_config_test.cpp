// training.offload_modules and training.offload_lead end to end: each bad input exits 2
// naming FILE:LINE:key, and a job that offloads reports its host memory and reload waits,
// the host bytes worked by hand.
#include <gtest/gtest.h>

#include "support/support.hpp"

namespace bmpipe {
namespace activation_offload_config_test {

using test::CliRun;
using test::run_cli;
using test::ScratchDir;
using test::write_file;

// `preset` on 8 devices of `device`, pp 2, tp 2 (dp 2), 4 micro-batches of 1 x 1024 tokens;
// the line after "training:" items is line 13.
std::string yaml(const std::string& device, const std::string& preset, const std::string& line) {
  return "cluster:\n"               // 1
         "  nodes: 1\n"             // 2
         "  devices_per_node: 8\n"  // 3
         "  device: " +             // 4
         device +
         "\n"
         "model: {preset: " +  // 5
         preset +
         "}\n"
         "training:\n"              // 6
         "  schedule: 1f1b\n"       // 7
         "  pp: 2\n"                // 8
         "  tp: 2\n"                // 9
         "  seq_length: 1024\n"     // 10
         "  micro_batch_size: 1\n"  // 11
         "  microbatches: 4\n"      // 12
         "  " +
         line + "\n";  // 13
}

CliRun simulate(const ScratchDir& dir, const std::string& text, const std::string& args = "") {
  return run_cli("simulate " + write_file(dir.file("job.yaml"), text) + args);
}

void expect_refused(const CliRun& r, const ScratchDir& dir, int line, const std::string& key,
                    const std::string& says) {
  EXPECT_EQ(r.code, 2) << r.all();
  EXPECT_NE(r.err.find(dir.file("job.yaml") + ":" + std::to_string(line) + ": " + key),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
}

TEST(ActivationOffloadConfig, BadModulesAreRefusedByMegatronsRules) {
  ScratchDir dir;
  const std::string key = "training.offload_modules";
  expect_refused(simulate(dir, yaml("{preset: h200}", "llama2-7b", "offload_modules: qkv")), dir,
                 13, key, "'qkv' is not an offload module");
  expect_refused(simulate(dir, yaml("{preset: h200}", "llama2-7b", "offload_modules: attn_proj")),
                 dir, 13, key, "attn_proj needs core_attn");
  expect_refused(simulate(dir, yaml("{preset: h200}", "llama2-7b", "offload_modules: expert_fc1")),
                 dir, 13, key, "need a mixture of experts");
  expect_refused(simulate(dir, yaml("{preset: h200}", "llama2-7b", "offload_modules: attn_norm")),
                 dir, 13, key, "fused into the qkv projection");
}

TEST(ActivationOffloadConfig, NoHostLinkIsRefused) {
  ScratchDir dir;
  expect_refused(
      simulate(dir, yaml("{preset: ascend-910b}", "llama2-7b", "offload_modules: core_attn")), dir,
      13, "training.offload_modules", "no host link figure");
}

TEST(ActivationOffloadConfig, AHostTooSmallIsRefused) {
  // llama2-7b at tp 2, T = 1024: core_attn moves q, k, v, 2 x 1024 x (2048 + 2 x 2048) =
  // 12 MiB a layer, 384 MiB a micro-batch over 32 layers; the first rank holds
  // min(pp, m) = 2 micro-batches of its 16 layers in flight: 384 MiB. A 1 GiB host over 8
  // devices leaves each 128 MiB.
  ScratchDir dir;
  const CliRun r = simulate(
      dir, yaml("{preset: h200, host_memory_GiB: 1}", "llama2-7b", "offload_modules: core_attn"));
  expect_refused(r, dir, 13, "training.offload_modules", "puts at least 384.0 MiB");
}

TEST(ActivationOffloadConfig, NegativeLeadIsRefused) {
  ScratchDir dir;
  EXPECT_EQ(simulate(dir, yaml("{preset: h200}", "llama2-7b", "offload_lead: -1")).code, 2);
}

TEST(ActivationOffloadConfig, HostBytesAsWorkedByHand) {
  // core_attn and attn_proj: q, k, v and the core's output, 2 x 1024 x (2048 + 4096 + 2048)
  // = 16 MiB a layer, 256 MiB a micro-batch of a stage's 16 layers. Rank 0 runs F0 F1 B0 F2
  // B1 F3 B2 B3: two copies out are issued (F0's, F1's ends) before B0 starts; each later
  // F's follows a backward's start. Its host holds at most 2 x 256 MiB. Rank 1, the last
  // stage, runs each backward right after its forward (F B F B ...): it keeps its bytes on
  // the device and its host holds none.
  ScratchDir dir;
  const CliRun r = simulate(
      dir, yaml("{preset: h200}", "llama2-7b", "offload_modules: core_attn,attn_proj"), " --json");
  ASSERT_EQ(r.code, 0) << r.all();
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["devices"][0]["peak_host_bytes"], 2 * 256 * (std::int64_t{1} << 20));
  EXPECT_EQ(j["devices"][1]["peak_host_bytes"], 0);
  EXPECT_TRUE(j["devices"][0].contains("reload_wait_ms"));
  // Without offload the JSON says no host bytes.
  const CliRun plain =
      simulate(dir, yaml("{preset: h200}", "llama2-7b", "offload_lead: 1"), " --json");
  ASSERT_EQ(plain.code, 0) << plain.all();
  EXPECT_EQ(nlohmann::json::parse(plain.out)["devices"][0]["peak_host_bytes"], 0);
  // The text table names the host copies.
  const CliRun text =
      simulate(dir, yaml("{preset: h200}", "llama2-7b", "offload_modules: core_attn,attn_proj"));
  EXPECT_NE(text.out.find("activation offload (host copies)"), std::string::npos) << text.out;
}

}  // namespace activation_offload_config_test
}  // namespace bmpipe
