// The FSDP example (configs/examples/h100_llama3_8b_fsdp.yaml, issue 19 item 3): Llama-3.1-8B
// under ZeRO-3 on 8 H100, as TorchTitan's published 1D run. Pinned by what can be worked out
// by hand (sharded static bytes, the gathered working set, the embedding's exposed gather,
// the Adam step over the shard) and by the numbers it prints today.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "support/support.hpp"

namespace bmpipe {
namespace {

const std::string kYaml =
    std::string(BMPIPE_SOURCE_DIR) + "/configs/examples/h100_llama3_8b_fsdp.yaml";

using test::run_json;

double op_ms(const nlohmann::json& l, const std::string& name, const char* pass) {
  for (const auto& o : l["ops"])
    if (o["name"] == name) return o[pass].get<double>();
  throw std::runtime_error("no op " + name);
}

TEST(FsdpExample, Llama3_8bOnEightH100) {
  const nlohmann::json c = run_json("cost " + kYaml + " --json --ops");
  EXPECT_EQ(c["dp"], 8);
  // Llama 3 8B: 32 layers of 218,112,000, the embedding 128256 x 4096 = 525,336,576 and the
  // head 525,336,576 + 4096 (final norm): 8,030,261,248 parameters, all on the one stage.
  EXPECT_EQ(c["parameters_total"], 8'030'261'248LL);
  // ZeRO-3: (2 + 4 + 12) / 8 = 2.25 bytes a parameter.
  EXPECT_EQ(c["static_bytes_per_stage"][0], 18'068'087'808LL);
  // Reserved: the preset's 2 GiB plus two head-sized units gathered in bf16:
  // 2 x 525,340,672 x 2 = 2,101,362,688.
  EXPECT_EQ(c["reserved_bytes"], 2'147'483'648LL + 2'101'362'688LL);
  // The tail is the Adam step over the 1/8 shard: 1,003,782,656 parameters x (4 + 24 + 2)
  // bytes at 2400 GB/s x 0.9 = 13.9414258 ms; no reduction, no gather after it.
  EXPECT_NEAR(c["tail_ms_per_rank"][0].get<double>(), 13.9414258, 1e-6);
  // The embedding runs first and gathers 7/8 x 1,050,673,152 bytes over NVLink at 450 GB/s
  // x 0.75, + 7 x 5 us: 2.75896743 ms, longer than its lookup: its forward is the gather.
  const nlohmann::json& embedding = test::cost_layer(c, "embedding");
  EXPECT_NEAR(embedding["forward_ms"].get<double>(), 2.75896743, 1e-6);
  EXPECT_GT(op_ms(embedding, "param_all_gather", "forward_ms"), 0.0);
  // A decoder layer's gather, 7/8 x 436,224,000 bytes: 1.16595 ms, hides under the ~17 ms
  // forward of the layer before it.
  EXPECT_EQ(op_ms(test::cost_layer(c, "decoder"), "param_all_gather", "forward_ms"), 0.0);

  const nlohmann::json s = run_json("simulate " + kYaml + " --json");
  EXPECT_EQ(s["microbatches"], 1);
  EXPECT_TRUE(s["fits"].get<bool>());
  // The numbers it prints today (TorchTitan measured 5,762 tokens/s/GPU and 82.4 GiB eager,
  // 6,667 with torch.compile; see the example's comment).
  EXPECT_NEAR(s["iteration_time_ms"].get<double>(), 2256.773555, 1e-3);
  EXPECT_NEAR(s["tokens_per_s"].get<double>() / 8, 7259.92, 0.01);
  EXPECT_NEAR(s["mfu"].get<double>(), 0.377827, 1e-6);
  EXPECT_EQ(s["devices"][0]["static_bytes"], 18'068'087'808LL + 4'248'846'336LL);
  EXPECT_EQ(s["devices"][0]["peak_memory_bytes"], 88'203'355'136LL);  // 82.15 GiB
}

}  // namespace
}  // namespace bmpipe
