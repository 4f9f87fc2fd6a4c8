// The expert-parallel all-to-all of an MoE layer (a2a-dispatch and a2a-combine), worked
// out by hand from the h100-sxm and ascend-910b presets' link figures, inside a node and
// across nodes, forward and backward; and where the config places the ep group.
#include <gtest/gtest.h>

#include <string>

#include "experiment/experiment.hpp"
#include "experiment/hf_config.hpp"
#include "sim/cost/cost_model.hpp"
#include "sim/cost/hardware.hpp"

namespace bmpipe {
namespace moe_a2a_test {

using test::kExamples;

const SubOpCost* find_op(const LayerCost& c, const std::string& name) {
  for (const auto& o : c.ops)
    if (o.name == name) return &o;
  return nullptr;
}

/// Mixtral-8x7B: h 4096, 8 experts, top-2.
ModelShape mixtral() {
  return read_hf_config(std::string(BMPIPE_TEST_DATA_DIR) + "/hf/mixtral_8x7b_config.json");
}

CostSettings settings(int ep, bool crosses) {
  CostSettings st;
  st.seq_length = 4096;
  st.micro_batch_size = 1;
  st.dtype_bytes = 2;
  st.ep = ep;
  st.ep_crosses_nodes = crosses;
  return st;
}

// Each way, per device: tokens 4096 x top_k 2 x h 4096 x 2 bytes = 67,108,864 bytes to
// scatter, of which (ep - 1)/ep = 7/8 leave the device: 58,720,256 bytes.
constexpr double kBytesOut = 58'720'256.0;

TEST(MoeA2a, InsideANodeByHand) {
  const HardwareSpec& hw = *find_hardware_preset("h100-sxm");
  const LayerCost c = moe_decoder_layer_cost(mixtral(), hw, settings(8, false));
  // NVLink 4: 450 GB/s one way x collective_efficiency 0.75 = 337.5 GB/s, latency 5 us:
  // 5 us + 58,720,256 / 337.5e9 s = 5 + 173.985943 = 178.985943 us.
  const double expect = 5e-6 + kBytesOut / 337.5e9;
  EXPECT_NEAR(expect, 178.985943e-6, 1e-12);
  for (const char* name : {"a2a-dispatch", "a2a-combine"}) {
    const SubOpCost* o = find_op(c, name);
    ASSERT_NE(o, nullptr) << name;
    EXPECT_NEAR(o->forward_s, expect, 1e-12) << name;
    // The backward runs the reverse exchange on the gradients: the same volume.
    EXPECT_NEAR(o->backward_input_s, expect, 1e-12) << name;
    EXPECT_EQ(o->backward_weight_s, 0.0) << name;
    // Full recompute re-runs the forward, all-to-alls included; selective does not.
    EXPECT_EQ(o->recompute_s[Recompute::full], o->forward_s) << name;
    EXPECT_EQ(o->recompute_s[Recompute::selective], 0.0) << name;
  }
  // dispatch after permute, combine before unpermute.
  std::vector<std::string> order;
  for (const auto& o : c.ops)
    if (o.name == "permute" || o.name == "a2a-dispatch" || o.name == "experts_gate_up" ||
        o.name == "experts_down" || o.name == "a2a-combine" || o.name == "unpermute")
      order.push_back(o.name);
  EXPECT_EQ(order, (std::vector<std::string>{"permute", "a2a-dispatch", "experts_gate_up",
                                             "experts_down", "a2a-combine", "unpermute"}));
}

TEST(MoeA2a, AcrossNodesUsesTheNic) {
  const HardwareSpec& hw = *find_hardware_preset("h100-sxm");
  const LayerCost c = moe_decoder_layer_cost(mixtral(), hw, settings(8, true));
  // One 400 Gb/s NIC per GPU: 50 GB/s x 0.75 = 37.5 GB/s, latency 10 us:
  // 10 us + 58,720,256 / 37.5e9 s = 10 + 1565.873493 = 1575.873493 us.
  const double expect = 10e-6 + kBytesOut / 37.5e9;
  EXPECT_NEAR(expect, 1575.873493e-6, 1e-12);
  EXPECT_NEAR(find_op(c, "a2a-dispatch")->forward_s, expect, 1e-12);
  EXPECT_NEAR(find_op(c, "a2a-combine")->backward_input_s, expect, 1e-12);
}

TEST(MoeA2a, SequenceParallelSendsTheDevicesShareOfTheTokens) {
  const HardwareSpec& hw = *find_hardware_preset("h100-sxm");
  CostSettings st = settings(4, false);
  st.tp = 2;
  st.sequence_parallel = true;
  const LayerCost c = moe_decoder_layer_cost(mixtral(), hw, st);
  // 4096 / tp 2 = 2048 tokens x 2 x 4096 x 2 bytes = 33,554,432 bytes, 3/4 of them out:
  // 25,165,824 bytes; 5 us + 25,165,824 / 337.5e9 s = 5 + 74.565404 = 79.565404 us.
  EXPECT_NEAR(find_op(c, "a2a-dispatch")->forward_s, 79.565404e-6, 1e-12);
}

TEST(MoeA2a, AMeshNodeDrivesEveryPeerLink) {
  // Ascend 910B HCCS: 28 GB/s per directed link to each of 7 peers, collective efficiency
  // 0.5, 10 us: 10 us + 58,720,256 / (28e9 x 7 x 0.5) s = 10 + 599.186286 = 609.186286 us.
  const HardwareSpec& hw = *find_hardware_preset("ascend-910b");
  const LayerCost c = moe_decoder_layer_cost(mixtral(), hw, settings(8, false));
  EXPECT_NEAR(find_op(c, "a2a-dispatch")->forward_s, 609.186286e-6, 1e-12);
}

TEST(MoeA2a, EpOneHasNoAllToAll) {
  const HardwareSpec& hw = *find_hardware_preset("h100-sxm");
  const LayerCost c = moe_decoder_layer_cost(mixtral(), hw, settings(1, false));
  EXPECT_EQ(find_op(c, "a2a-dispatch"), nullptr);
  EXPECT_EQ(find_op(c, "a2a-combine"), nullptr);
  EXPECT_EQ(all_to_all_time_s(hw, 1, 1e9, false), 0.0);
}

TEST(MoeA2a, TheConfigPlacesTheEpGroupAfterEtp) {
  // The Mixtral example: 8 GPUs a node, ep 8, etp 1: one node.
  const auto in_node = prepare(load_config(kExamples + "h100_mixtral_8x7b_ep8.yaml"));
  EXPECT_FALSE(in_node->analytic->settings.ep_crosses_nodes);
  // etp 2 x ep 8 = 16 consecutive GPUs: two nodes.
  Overrides etp2;
  etp2.set = {{"training.etp", "2"}};
  const auto across = prepare(load_config(kExamples + "h100_mixtral_8x7b_ep8.yaml", etp2));
  EXPECT_TRUE(across->analytic->settings.ep_crosses_nodes);
  // ... and the layer's all-to-all runs at the NIC's speed: 10 us + 58,720,256 / 37.5e9 s.
  const SubOpCost* a2a = find_op(*across->analytic->moe_decoder, "a2a-dispatch");
  ASSERT_NE(a2a, nullptr);
  EXPECT_NEAR(a2a->forward_s, 1575.873493e-6, 1e-12);
}

}  // namespace moe_a2a_test
}  // namespace bmpipe
