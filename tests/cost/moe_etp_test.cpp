// Expert tensor parallelism (training.etp > 1) in an MoE layer: the all-gather of the
// dispatched rows (and, in a call of its own, of their router probabilities) over the etp
// group before the experts and the reduce-scatter of their outputs after (Megatron-Core's
// MoEAlltoAllTokenDispatcher), worked out by hand on round link figures; etp 1 adds
// nothing; the experts then run etp x the rows at 1/etp of the columns, the same FLOPs a
// device; and where the config places the etp group.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "experiment/experiment.hpp"
#include "experiment/hf_config.hpp"
#include "sim/cost/cost_model.hpp"
#include "sim/cost/hardware.hpp"

namespace bmpipe {
namespace moe_etp_test {

using test::kExamples;

const SubOpCost* find_op(const LayerCost& c, const std::string& name) {
  for (const auto& o : c.ops)
    if (o.name == name) return &o;
  return nullptr;
}

/// Mixtral-8x7B: h 4096, 8 experts, top-2, expert FFN 14336.
ModelShape mixtral() {
  ModelShape m = read_hf_config(std::string(BMPIPE_TEST_DATA_DIR) + "/hf/mixtral_8x7b_config.json");
  m.moe.load_imbalance = 1.0;
  return m;
}

/// Round links (not a preset, which calibration may move): 100 GB/s and 5 us inside the
/// node, 25 GB/s and 10 us on the NIC, all of it reached.
HardwareSpec round_links() {
  HardwareSpec hw = *find_hardware_preset("h100-sxm");
  hw.intra_node = {100, 5};
  hw.inter_node = {25, 10};
  hw.intra_node_mesh = false;
  hw.collective_efficiency = 1.0;
  // The preset's own NIC fraction (nic_efficiency, read by the collectives since
  // sim/cost/collectives.hpp) would otherwise stand for the NIC: all of it here too.
  hw.nic_efficiency = 1.0;
  // No NVLink SHARP: these tests work the ring out by hand.
  hw.nvls_efficiency = 0;
  return hw;
}

/// s 4096, mbs 1, tp 2 with sequence parallelism: 2048 tokens a device at the MLP.
CostSettings settings(int etp, int ep) {
  CostSettings st;
  st.seq_length = 4096;
  st.micro_batch_size = 1;
  st.dtype_bytes = 2;
  st.tp = 2;
  st.sequence_parallel = true;
  st.etp = etp;
  st.ep = ep;
  return st;
}

// 2048 tokens x top_k 2 = 4096 rows dispatched; gathered over etp 2: 8192 rows x h 4096
// x 2 bytes = 67,108,864 bytes. A ring all-gather (or reduce-scatter) over 2 moves
// (2 - 1)/2 of it, 33,554,432 bytes, in one step: 5 us + 33,554,432 / 100e9 s =
// 5 + 335.54432 = 340.54432 us, forward and (the other collective) backward.
TEST(MoeEtp, AllGatherAndReduceScatterAroundTheExpertsByHand) {
  const HardwareSpec hw = round_links();
  const LayerCost c = moe_decoder_layer_cost(mixtral(), hw, settings(2, 1));
  for (const char* name : {"etp-all-gather", "etp-reduce-scatter"}) {
    const SubOpCost* o = find_op(c, name);
    ASSERT_NE(o, nullptr) << name;
    EXPECT_NEAR(o->forward_s, 340.54432e-6, 1e-12) << name;
    EXPECT_NEAR(o->backward_input_s, 340.54432e-6, 1e-12) << name;
    EXPECT_EQ(o->backward_weight_s, 0.0) << name;
    // Full recompute re-runs the forward up to the last saving op, these included.
    EXPECT_EQ(o->recompute_s[Recompute::full], o->forward_s) << name;
    EXPECT_EQ(o->recompute_s[Recompute::selective], 0.0) << name;
  }
}

// The router probabilities of the same 8192 rows, one 4-byte value each: 32,768 bytes
// gathered, half of them moved, 5 us + 16,384 / 100e9 s = 5.16384 us each way. A call of its
// own: the latency is most of it.
TEST(MoeEtp, TheRowsRouterProbabilitiesAreGatheredInACallOfTheirOwn) {
  const LayerCost c = moe_decoder_layer_cost(mixtral(), round_links(), settings(2, 1));
  const SubOpCost* o = find_op(c, "etp-probs-all-gather");
  ASSERT_NE(o, nullptr);
  EXPECT_NEAR(o->forward_s, 5.16384e-6, 1e-15);
  EXPECT_NEAR(o->backward_input_s, 5.16384e-6, 1e-15);
  EXPECT_EQ(o->backward_weight_s, 0.0);
  EXPECT_EQ(find_op(moe_decoder_layer_cost(mixtral(), round_links(), settings(1, 2)),
                    "etp-probs-all-gather"),
            nullptr);
}

TEST(MoeEtp, InsideTheAllToAllsAroundTheExperts) {
  const LayerCost c = moe_decoder_layer_cost(mixtral(), round_links(), settings(2, 2));
  std::vector<std::string> order;
  for (const auto& o : c.ops)
    if (o.name.rfind("a2a-", 0) == 0 || o.name.rfind("etp-", 0) == 0 ||
        o.name.rfind("experts_", 0) == 0)
      order.push_back(o.name);
  EXPECT_EQ(order, (std::vector<std::string>{
                       "a2a-dispatch", "etp-all-gather", "etp-probs-all-gather", "experts_gate_up",
                       "experts_swiglu", "experts_down", "etp-reduce-scatter", "a2a-combine"}));
}

TEST(MoeEtp, TheBusiestDevicesRowsAreGathered) {
  // load_imbalance 1.25: the busiest device receives 4096 x 1.25 = 5120 rows, its etp
  // group gathers 10,240: 10,240 x 4096 x 2 / 2 = 41,943,040 bytes moved,
  // 5 us + 419.4304 us = 424.4304 us.
  ModelShape m = mixtral();
  m.moe.load_imbalance = 1.25;
  const LayerCost c = moe_decoder_layer_cost(m, round_links(), settings(2, 1));
  EXPECT_NEAR(find_op(c, "etp-all-gather")->forward_s, 424.4304e-6, 1e-12);
}

TEST(MoeEtp, AcrossNodesUsesTheNic) {
  CostSettings st = settings(2, 1);
  st.etp_crosses_nodes = true;
  const LayerCost c = moe_decoder_layer_cost(mixtral(), round_links(), st);
  // 10 us + 33,554,432 / 25e9 s = 10 + 1342.17728 = 1352.17728 us.
  EXPECT_NEAR(find_op(c, "etp-reduce-scatter")->forward_s, 1352.17728e-6, 1e-12);
}

TEST(MoeEtp, EtpOneAddsNothing) {
  const HardwareSpec hw = round_links();
  for (int ep : {1, 2}) {
    const LayerCost c = moe_decoder_layer_cost(mixtral(), hw, settings(1, ep));
    EXPECT_EQ(find_op(c, "etp-all-gather"), nullptr);
    EXPECT_EQ(find_op(c, "etp-reduce-scatter"), nullptr);
  }
  EXPECT_EQ(collective_time_s(hw, Collective::all_gather, 1, 1e9, false), 0.0);
}

TEST(MoeEtp, SameExpertFlopsADeviceAtHalfTheParameters) {
  // The etp group's 2 devices run all 2 x 4096 rows at half of each expert's 14336
  // columns: per device 2 x 8192 x 4096 x (2 x 7168) + 2 x 8192 x 7168 x 4096 FLOPs,
  // what one device runs on its 4096 rows at all 14336 columns. Its expert weights halve:
  // 8 experts x 3 x 4096 x 14336 = 1,409,286,144 parameters at etp 1, 704,643,072 at 2.
  const HardwareSpec hw = round_links();
  const LayerCost one = moe_decoder_layer_cost(mixtral(), hw, settings(1, 1));
  const LayerCost two = moe_decoder_layer_cost(mixtral(), hw, settings(2, 1));
  EXPECT_NEAR(two.forward_flops, one.forward_flops, 1e-9 * one.forward_flops);
  EXPECT_EQ(one.expert_param_count, 1'409'286'144);
  EXPECT_EQ(two.expert_param_count, 704'643'072);
  // Saved: the experts' input rows, 2 x their count x h; SwiGLU's four tensors at ef / 2,
  // the same elements. So etp 2 keeps 4096 x 4096 x 2 bytes more (33,554,432).
  EXPECT_EQ(two.activation_bytes[Recompute::none] - one.activation_bytes[Recompute::none],
            33'554'432);
}

TEST(MoeEtp, TheConfigPlacesTheEtpGroupOnConsecutiveDevices) {
  // The Mixtral example, 8 GPUs a node: etp 2 stays in the node; etp 16 (ep 1) does not.
  Overrides two, sixteen;
  two.set = {{"training.etp", "2"}, {"training.ep", "1"}};
  sixteen.set = {{"training.etp", "16"}, {"training.ep", "1"}};
  const auto in_node = prepare(load_config(kExamples + "h100_mixtral_8x7b_ep8.yaml", two));
  EXPECT_FALSE(in_node->analytic->settings.etp_crosses_nodes);
  const auto across = prepare(load_config(kExamples + "h100_mixtral_8x7b_ep8.yaml", sixteen));
  EXPECT_TRUE(across->analytic->settings.etp_crosses_nodes);
}

}  // namespace moe_etp_test
}  // namespace bmpipe
