// Measured layer groups carry per-mode recompute costs, and training.recompute picks a
// mode per layer for measured models too, but only a mode the layer's group defines.
#include <gtest/gtest.h>

#include "experiment/config_cases.hpp"
#include "experiment/experiment.hpp"

namespace bmpipe {
namespace {

using test::config_error;
using test::has;
using test::with;

// The planner issue's example: an embedding without a map (none only), 80 decoder layers
// with selective and full, on 4 devices. Layer 0 is the embedding, layers 1..80 decoders.
const std::string kModel = R"(cluster:
  nodes: 1
  devices_per_node: 4
  device: {name: h200, memory_GiB: 140}
  intra_node: {bandwidth_GBps: 450, latency_us: 5}
model:
  layers:
    - {name: embedding, count: 1, forward_ms: 1, backward_input_ms: 2, backward_weight_ms: 0,
       activation_bytes: 0, output_bytes: 0, param_bytes: 524288000}
    - name: decoder
      count: 80
      forward_ms: 12
      backward_input_ms: 24
      backward_weight_ms: 0
      activation_bytes: 214958080
      output_bytes: 0
      param_bytes: 1711276032
      recompute:
        selective: {recompute_ms: 1.2, activation_bytes: 157286400}
        full:      {recompute_ms: 12,  activation_bytes: 8388608, weight_grad_retained_bytes: 4194304}
training:
  pp: 4
  microbatches: 8
)";

TEST(LayerRecompute, ModesAreParsedIntoTheGroup) {
  const Config c = parse_config(kModel, "exp.yaml");
  const LayerGroup& emb = c.model.layers[0];
  const LayerGroup& dec = c.model.layers[1];
  for (Recompute m : kAllRecompute) {
    EXPECT_FALSE(emb.recompute[m]) << recompute_name(m);
    EXPECT_EQ(emb.has_mode(m), m == Recompute::none);
    EXPECT_TRUE(dec.has_mode(m));
  }
  EXPECT_FALSE(dec.recompute[Recompute::none]);  // the group's own keys are none
  ASSERT_TRUE(dec.recompute[Recompute::selective]);
  EXPECT_DOUBLE_EQ(dec.recompute[Recompute::selective]->recompute_ms, 1.2);
  EXPECT_EQ(dec.recompute[Recompute::selective]->activation_bytes, 157286400);
  EXPECT_FALSE(dec.recompute[Recompute::selective]->weight_grad_retained_bytes);
  ASSERT_TRUE(dec.recompute[Recompute::full]);
  EXPECT_DOUBLE_EQ(dec.recompute[Recompute::full]->recompute_ms, 12);
  EXPECT_EQ(dec.recompute[Recompute::full]->activation_bytes, 8388608);
  EXPECT_EQ(dec.recompute[Recompute::full]->weight_grad_retained_bytes, 4194304);
}

TEST(LayerRecompute, InModeSwapsTheModeCostsIn) {
  const std::string flat = with("      backward_weight_ms: 0\n      activation_bytes: 214958080",
                                "      backward_weight_ms: 0\n      recompute_ms: 0.25\n"
                                "      activation_bytes: 214958080",
                                kModel);
  const LayerGroup dec = parse_config(flat, "exp.yaml").model.layers[1];
  // none: the flat recompute_ms, paid always, and the group's own bytes.
  const LayerGroup none = dec.in_mode(Recompute::none);
  EXPECT_DOUBLE_EQ(none.recompute_ms, 0.25);
  EXPECT_EQ(none.activation_bytes, 214958080);
  const LayerGroup full = dec.in_mode(Recompute::full);
  EXPECT_DOUBLE_EQ(full.recompute_ms, 12);
  EXPECT_EQ(full.activation_bytes, 8388608);
  EXPECT_EQ(full.weight_grad_retained_bytes, 4194304);
  EXPECT_DOUBLE_EQ(full.forward_ms, 12);  // the rest is the group's
  EXPECT_EQ(full.param_bytes, 1711276032);
  EXPECT_THROW(parse_config(kModel, "exp.yaml").model.layers[0].in_mode(Recompute::full),
               std::invalid_argument);
}

TEST(LayerRecompute, TrainingRecomputeAppliesToMeasuredModels) {
  // 81 layers over 4 stages: 21, 20, 20, 20. Layer indices count the embedding.
  const Config c = parse_config(
      with("  pp: 4\n",
           "  pp: 4\n  recompute: {default: none, stages: {1: selective}, layers: {80: full}}\n",
           kModel),
      "exp.yaml");
  EXPECT_EQ(recompute_mode(c, 0, 0), Recompute::none);
  EXPECT_EQ(recompute_mode(c, 1, 21), Recompute::selective);
  EXPECT_EQ(recompute_mode(c, 3, 80), Recompute::full);
  EXPECT_EQ(c.lines.at("training.recompute.layers.80"), 23);
}

TEST(LayerRecompute, DefaultModeMissingFromAGroupNamesTheFirstSuchLayer) {
  const ConfigError e = config_error(with("  pp: 4\n", "  pp: 4\n  recompute: full\n", kModel));
  EXPECT_EQ(e.key(), "training.recompute");
  EXPECT_EQ(e.line(), 23);
  EXPECT_EQ(e.message(),
            "layer 0 (group 'embedding', model.layers[0]) has no full recompute costs: the group "
            "defines none (add full to model.layers[0].recompute)");
  const ConfigError d =
      config_error(with("  pp: 4\n", "  pp: 4\n  recompute: {default: selective}\n", kModel));
  EXPECT_EQ(d.key(), "training.recompute.default");
}

TEST(LayerRecompute, StageModeReachesALayerWithoutIt) {
  // Stage 0 holds the embedding (layer 0) and decoders 1..20.
  const ConfigError e =
      config_error(with("  pp: 4\n", "  pp: 4\n  recompute: {stages: {0: full}}\n", kModel));
  EXPECT_EQ(e.key(), "training.recompute.stages.0");
  EXPECT_TRUE(has(e.message(), "layer 0 (group 'embedding'"));
  // With the embedding on a stage of its own and that stage left alone, it loads.
  EXPECT_NO_THROW(parse_config(
      with("  pp: 4\n", "  pp: 4\n  partition: [1, 30, 30, 20]\n  recompute: {stages: {1: full}}\n",
           kModel),
      "exp.yaml"));
  // A layer entry wins over its stage: layer 0 stays none even with stage 0 at full.
  EXPECT_NO_THROW(parse_config(
      with("  pp: 4\n", "  pp: 4\n  recompute: {stages: {0: full}, layers: {0: none}}\n", kModel),
      "exp.yaml"));
}

TEST(LayerRecompute, LayerIndicesCountEveryGroup) {
  const ConfigError e =
      config_error(with("  pp: 4\n", "  pp: 4\n  recompute: {layers: {81: full}}\n", kModel));
  EXPECT_EQ(e.key(), "training.recompute.layers.81");
  EXPECT_TRUE(has(e.message(), "the model has 81 layers"));
  const ConfigError s =
      config_error(with("  pp: 4\n", "  pp: 4\n  recompute: {stages: {4: full}}\n", kModel));
  EXPECT_EQ(s.key(), "training.recompute.stages.4");
}

TEST(LayerRecompute, ModeBytesAreBoundedByTheNoneMode) {
  const ConfigError a =
      config_error(with("activation_bytes: 157286400", "activation_bytes: 214958081", kModel));
  EXPECT_EQ(a.key(), "model.layers[1].recompute.selective.activation_bytes");
  EXPECT_EQ(a.line(), 19);
  EXPECT_TRUE(has(a.message(), "cannot exceed the group's activation_bytes (214958080)"));
  const ConfigError w = config_error(
      with("weight_grad_retained_bytes: 4194304", "weight_grad_retained_bytes: 8388609", kModel));
  EXPECT_EQ(w.key(), "model.layers[1].recompute.full.weight_grad_retained_bytes");
  EXPECT_TRUE(has(w.message(), "cannot exceed this mode's activation_bytes (8388608)"));
}

TEST(LayerRecompute, MapHoldsExactlyTheOtherModes) {
  const ConfigError none =
      config_error(with("        selective:",
                        "        none: {recompute_ms: 0, activation_bytes: 1}\n"
                        "        selective:",
                        kModel));
  EXPECT_EQ(none.key(), "model.layers[1].recompute.none");
  EXPECT_TRUE(has(none.message(), "its none mode"));
  const ConfigError other = config_error(with("        full:", "        partial:", kModel));
  EXPECT_EQ(other.key(), "model.layers[1].recompute.partial");
  EXPECT_EQ(other.message(), "unknown key (expected one of: selective, full)");
  const ConfigError missing = config_error(with("{recompute_ms: 1.2, ", "{", kModel));
  EXPECT_EQ(missing.key(), "model.layers[1].recompute.selective.recompute_ms");
  EXPECT_TRUE(has(missing.message(), "missing required key"));
  const ConfigError extra =
      config_error(with("{recompute_ms: 1.2, ", "{recompute_ms: 1.2, forward_ms: 3, ", kModel));
  EXPECT_EQ(extra.message(),
            "unknown key (expected one of: recompute_ms, activation_bytes, "
            "weight_grad_retained_bytes)");
}

TEST(LayerRecompute, AnalyticOnlyTrainingKeysAreStillRefusedForMeasuredModels) {
  const ConfigError e = config_error(with("  pp: 4\n", "  pp: 4\n  dtype: fp16\n", kModel));
  EXPECT_EQ(e.key(), "training.dtype");
  EXPECT_TRUE(has(e.message(), "applies only to an analytic model"));
}

}  // namespace
}  // namespace bmpipe
