// DeepSeek-V3's multi-token-prediction module: its parameters are ModelShape's
// mtp_module_params, and it runs on the last stage only, which grows by its cost.
#include <gtest/gtest.h>

#include <string>

#include "experiment/experiment.hpp"
#include "experiment/hf_config.hpp"
#include "sim/cost/cost_model.hpp"
#include "sim/cost/hardware.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace {

const std::string kDeepSeek =
    std::string(BMPIPE_SOURCE_DIR) + "/configs/presets/hf/deepseek-v3.json";

bool has_op(const LayerCost& c, const std::string& name) {
  for (const auto& o : c.ops)
    if (o.name == name) return true;
  return false;
}

TEST(Mtp, ModuleCountsWhatModelShapeCounts) {
  const ModelShape m = read_hf_config(kDeepSeek);
  ASSERT_EQ(m.mtp_layers, 1);
  CostSettings st;
  st.seq_length = 4096;
  const LayerCost c = mtp_module_cost(m, *find_hardware_preset("h800"), st);
  // enorm, hnorm, shared_head.norm (3 x 7168), eh_proj 2 x 7168^2 and one MoE layer.
  EXPECT_EQ(c.param_count, m.mtp_module_params(false));
  EXPECT_EQ(c.active_param_count, m.mtp_module_params(true));
  EXPECT_EQ(c.param_count, m.decoder_layer_params(60, false) + 3 * 7168LL + 2 * 7168LL * 7168);
  // Its sub-ops: the lookup, the norms, eh_proj, an MoE decoder layer, the head pass.
  for (const char* name : {"mtp.lookup", "mtp.enorm", "mtp.hnorm", "mtp.eh_proj", "mtp.kv_b_proj",
                           "mtp.experts_gate_up", "mtp.lm_head", "mtp.cross_entropy"})
    EXPECT_TRUE(has_op(c, name)) << name;
  // ep 8: the module's MoE layer holds 256 / 8 experts of 3 x 7168 x 2048.
  st.ep = 8;
  EXPECT_EQ(mtp_module_cost(m, *find_hardware_preset("h800"), st).expert_param_count,
            32LL * 3 * 7168 * 2048);
}

TEST(Mtp, TheLastStageGrowsByTheModule) {
  const test::ScratchDir dir;
  const std::string yaml =
      test::write_file(dir.file("ds.yaml"),
                       "cluster: {nodes: 8, devices_per_node: 8, device: {preset: h800}}\n"
                       "model: {hf_config: \"" +
                           kDeepSeek +
                           "\"}\n"
                           "training: {pp: 4, ep: 8, seq_length: 4096, global_batch_size: 64}\n");
  const Config with = load_config(yaml);
  Config without = with;
  without.model.shape->mtp_layers = 0;
  const auto a = prepare(with), b = prepare(without);
  const LayerCost& mtp = *a->analytic->mtp;
  EXPECT_FALSE(b->analytic->mtp.has_value());
  ASSERT_EQ(a->num_layers(), 61);
  // Every layer but the last is the same.
  for (int l = 0; l < 60; ++l) {
    EXPECT_EQ(a->layers.layers[l].forward, b->layers.layers[l].forward) << l;
    EXPECT_EQ(a->layers.layers[l].static_bytes, b->layers.layers[l].static_bytes) << l;
  }
  const LayerRow &last = a->layers.layers.back(), &plain = b->layers.layers.back();
  EXPECT_EQ(last.name, "moe_decoder.60+mtp+lm_head");
  EXPECT_EQ(plain.name, "moe_decoder.60+lm_head");
  // The layer's time is rounded to ns once: within 1 ns of the sum.
  EXPECT_NEAR(static_cast<double>(last.forward - plain.forward), mtp.forward_s * 1e9, 1.0);
  EXPECT_NEAR(static_cast<double>(last.backward_input - plain.backward_input),
              mtp.backward_input_s * 1e9, 1.0);
  EXPECT_NEAR(static_cast<double>(last.backward_weight - plain.backward_weight),
              mtp.backward_weight_s * 1e9, 1.0);
  EXPECT_EQ(last.param_count - plain.param_count, mtp.param_count);
  EXPECT_EQ(last.expert_param_count - plain.expert_param_count, mtp.expert_param_count);
  EXPECT_EQ(last.modes[Recompute::none]->activation_bytes -
                plain.modes[Recompute::none]->activation_bytes,
            mtp.activation_bytes[Recompute::none]);
  EXPECT_GT(mtp.forward_s, 0.0);
}

}  // namespace
}  // namespace bmpipe
