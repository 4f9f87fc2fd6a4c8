// training.offload_layers (Megatron-LM's --cpu-offloading-num-layers) end to end: Megatron-
// Core's refusals exit 2 with FILE:LINE:key, and a job that offloads holds W = L - k layers'
// activations on the device, the bytes of Korthikanti et al.'s closed form
// (tests/cost/memory_closed_form_test.cpp), and waits as sim/layer_offload.hpp's recurrence
// says on a slow link.
#include <gtest/gtest.h>

#include "support/support.hpp"

namespace bmpipe {
namespace layer_offload_config_test {

using test::CliRun;
using test::run_cli;
using test::ScratchDir;
using test::write_file;

// Korthikanti's GPT layer (h 4096, 32 heads, no flash attention, dropout) x 8 on 8 A100s,
// tp 1, s 2048, b 2, 2 micro-batches, the embedding and the loss as rows of their own;
// `device` is line 4, `line` line 20.
std::string yaml(const std::string& device, const std::string& line, int pp = 1) {
  return "cluster:\n"               // 1
         "  nodes: 1\n"             // 2
         "  devices_per_node: 8\n"  // 3
         "  device: " +
         device +
         "\n"                           // 4
         "model:\n"                     // 5
         "  architecture: gpt\n"        // 6
         "  num_layers: 8\n"            // 7
         "  hidden_size: 4096\n"        // 8
         "  num_attention_heads: 32\n"  // 9
         "  ffn_hidden_size: 16384\n"   // 10
         "  vocab_size: 51200\n"        // 11
         "  flash_attention: false\n"   // 12
         "  dropout: true\n"            // 13
         "training:\n"                  // 14
         "  pp: " +
         std::to_string(pp) +
         "\n"                       // 15
         "  seq_length: 2048\n"     // 16
         "  micro_batch_size: 2\n"  // 17
         "  microbatches: 2\n"      // 18
         "  separate_ends: true\n"  // 19
         "  " +
         line + "\n";  // 20
}

CliRun simulate(const ScratchDir& dir, const std::string& text, const std::string& args = "") {
  return run_cli("simulate " + write_file(dir.file("job.yaml"), text) + args);
}

void expect_refused(const CliRun& r, const ScratchDir& dir, int line, const std::string& says) {
  EXPECT_EQ(r.code, 2) << r.all();
  EXPECT_NE(
      r.err.find(dir.file("job.yaml") + ":" + std::to_string(line) + ": training.offload_layers"),
      std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
}

// One layer's activations: sbh(34 + 5as/h) + the LayerNorms' fp32 statistics (2 x 8 bytes
// a token), s 2048, b 2, h 4096, a 32: 16 777 216 x 114 + 65 536 bytes.
constexpr std::int64_t kLayer = std::int64_t{16777216} * 114 + 65536;

TEST(LayerOffloadConfig, MegatronCoresRefusalsNameTheKey) {
  ScratchDir dir;
  const std::string a100 = "{preset: a100-80g}";
  expect_refused(simulate(dir, yaml(a100, "offload_layers: 8")), dir, 20,
                 "CPU offloading can be done only for layers less than 8");
  expect_refused(simulate(dir, yaml(a100, "offload_layers: 2", 2)), dir, 20,
                 "no support for Pipeline parallelism with CPU offloading");
  expect_refused(simulate(dir, yaml(a100, "offload_layers: 2\n  recompute: selective")), dir, 20,
                 "does not work when activation recomputation is enabled");
  expect_refused(simulate(dir, yaml(a100, "offload_layers: 2\n  offload_modules: core_attn")), dir,
                 20, "cannot be enabled with cpu_offloading");
  expect_refused(simulate(dir, yaml("{preset: ascend-910b}", "offload_layers: 2")), dir, 20,
                 "no host link figure");
  // 4 layers' 7.1 GiB on a 1 GiB host shared by 8 devices.
  expect_refused(simulate(dir, yaml("{preset: a100-80g, host_memory_GiB: 1}", "offload_layers: 4")),
                 dir, 20, "4 layers put 7.1 GiB of activations on the host");
  EXPECT_EQ(simulate(dir, yaml(a100, "offload_layers: -1")).code, 2);
}

// plan --offload auto tries offload modules, which Megatron-Core refuses beside layer offload:
// refused as a request, before any plan.
TEST(LayerOffloadConfig, OffloadAutoIsRefusedBesideIt) {
  ScratchDir dir;
  const std::string file =
      write_file(dir.file("job.yaml"), yaml("{preset: a100-80g}", "offload_layers: 2"));
  const CliRun r = run_cli("plan " + file + " --offload auto --quiet");
  EXPECT_EQ(r.code, 2) << r.all();
  EXPECT_NE(r.err.find("--offload: auto tries training.offload_modules"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("training.offload_layers 2"), std::string::npos) << r.err;
}

TEST(LayerOffloadConfig, TheDeviceHoldsTheLastLayersAndTheHostTheFirst) {
  // A link fast enough to hide every copy: 4 of 8 layers offloaded leave W = 4 layers'
  // activations on the device, 4 x kLayer fewer than without, and 4 x kLayer on the host.
  ScratchDir dir;
  const std::string fast = "{preset: a100-80g, host_link_GBps: 1000000}";
  const CliRun off = simulate(dir, yaml(fast, "offload_layers: 4"), " --json");
  const CliRun none = simulate(dir, yaml(fast, "offload_layers: 0"), " --json");
  ASSERT_EQ(off.code, 0) << off.all();
  ASSERT_EQ(none.code, 0) << none.all();
  const auto j = nlohmann::json::parse(off.out), n = nlohmann::json::parse(none.out);
  const auto& o = j["layer_offload"];
  EXPECT_EQ(o["layers"], 4);
  EXPECT_EQ(o["of"], 8);
  EXPECT_EQ(o["host_bytes"], 4 * kLayer);
  EXPECT_EQ(o["device_activation_bytes"], 4 * kLayer);
  EXPECT_EQ(o["forward_wait_ms"], 0.0);
  EXPECT_EQ(o["backward_wait_ms"], 0.0);
  EXPECT_FALSE(n.contains("layer_offload"));
  EXPECT_EQ(n["devices"][0]["peak_activation_bytes"].get<std::int64_t>() -
                j["devices"][0]["peak_activation_bytes"].get<std::int64_t>(),
            4 * kLayer);
  EXPECT_EQ(j["iteration_time_ms"], n["iteration_time_ms"]);
}

TEST(LayerOffloadConfig, ASlowLinkWaitsAsTheRecurrenceSays) {
  // 1 GB/s: a copy takes c = kLayer / 1e9 s = 1.912668 s, far more than a layer's forward f
  // or backward b (under 0.1 s and 0.2 s: 1.8 TFLOP at A100's 312 TFLOP/s is 6 ms). With 4
  // of 8 layers offloaded the copies run back to back from the end of layer 0's forward:
  // layer 7 ends at 2f + 4c, so the forward waits 4c - 6f; in backward, layer 3's copy
  // back starts after layer 7's backward and the four copies run back to back, layer 0 ends
  // at 2b + 4c: the backward waits 4c - 6b. Each of the 2 micro-batches pays both.
  ScratchDir dir;
  const std::string slow = "{preset: a100-80g, host_link_GBps: 1}";
  const CliRun off = simulate(dir, yaml(slow, "offload_layers: 4"), " --json");
  const CliRun none = simulate(dir, yaml(slow, "offload_layers: 0"), " --json");
  ASSERT_EQ(off.code, 0) << off.all();
  ASSERT_EQ(none.code, 0) << none.all();
  const auto j = nlohmann::json::parse(off.out), n = nlohmann::json::parse(none.out);
  const double c = static_cast<double>(kLayer) / 1e9 * 1e3;  // ms
  const double fw = j["layer_offload"]["forward_wait_ms"],
               bw = j["layer_offload"]["backward_wait_ms"];
  EXPECT_LT(fw, 4 * c);
  EXPECT_GT(fw, 4 * c - 6 * 100.0);
  EXPECT_LT(bw, 4 * c);
  EXPECT_GT(bw, 4 * c - 6 * 200.0);
  // The backward runs twice the forward's work here, so it hides more (b > f).
  EXPECT_LT(bw, fw);
  EXPECT_NEAR(j["iteration_time_ms"].get<double>() - n["iteration_time_ms"].get<double>(),
              2 * (fw + bw), 1e-3);
  // The text names it.
  const CliRun text = simulate(dir, yaml(slow, "offload_layers: 4"));
  EXPECT_NE(text.out.find("layer offload: 4 of 8 decoder layers' activations to the host"),
            std::string::npos)
      << text.out;
}

}  // namespace layer_offload_config_test
}  // namespace bmpipe
