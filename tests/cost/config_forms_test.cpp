// The YAML forms of the analytic model (model preset / hf_config / explicit shape, device
// preset with overrides, batch from global_batch_size, recompute globally / per stage / per
// layer), that the measured form still works, and one bad-input test per error class.
#include <gtest/gtest.h>

#include "experiment/config_cases.hpp"
#include "experiment/experiment.hpp"
#include "experiment/hf_config.hpp"
#include "support/run_config.hpp"

namespace bmpipe {
namespace {

const std::string kData = BMPIPE_TEST_DATA_DIR;

// An analytic experiment; `model`, `device` and `training_extra` replace parts of it.
std::string yaml(const std::string& model = "model: {preset: llama2-7b}",
                 const std::string& training_extra = "  global_batch_size: 64\n",
                 const std::string& device = "{preset: h200}") {
  return "cluster:\n  nodes: 2\n  devices_per_node: 8\n  device: " + device + "\n" + model +
         "\ntraining:\n  schedule: 1f1b\n  pp: 4\n  tp: 2\n  seq_length: 4096\n"
         "  micro_batch_size: 2\n" +
         training_extra;
}

ConfigError error_of(const std::string& text) {
  return test::config_error(text, {}, kData + "/inline.yaml");
}

TEST(ConfigForms, ModelPresetAndDevicePreset) {
  const Config c = parse_config(yaml(), "a.yaml");
  ASSERT_TRUE(c.model.analytic());
  EXPECT_EQ(c.model.shape->hidden_size, 4096);
  EXPECT_EQ(c.model.num_layers(), 32);
  EXPECT_EQ(c.model.name, "llama2-7b");
  ASSERT_TRUE(c.device.hardware);
  EXPECT_EQ(c.device.name, "h200");
  EXPECT_DOUBLE_EQ(c.device.memory_GiB, 140);
  // Links come from the preset when the cluster does not give them.
  EXPECT_DOUBLE_EQ(c.cluster.intra_node.bandwidth_GBps, 450);
  EXPECT_DOUBLE_EQ(c.cluster.inter_node.bandwidth_GBps, 50);
  // 16 devices / (pp 4 x tp 2) = dp 2; 64 / (2 x 2) = 16 micro-batches.
  EXPECT_EQ(c.training.microbatches, 16);
}

TEST(ConfigForms, PresetValuesAreOverridable) {
  const Config c = parse_config(
      yaml("model: {preset: llama2-7b, num_layers: 8, name: small}", "  microbatches: 4\n",
           "{preset: h200, memory_GiB: 100, peak_tflops: 500, matmul_efficiency: 0.5}\n"
           "  intra_node: {bandwidth_GBps: 100}"),
      "a.yaml");
  EXPECT_EQ(c.model.num_layers(), 8);
  EXPECT_EQ(c.model.name, "small");
  EXPECT_DOUBLE_EQ(c.device.memory_GiB, 100);
  EXPECT_DOUBLE_EQ(c.device.hardware->peak_tflops, 500);
  EXPECT_DOUBLE_EQ(c.device.hardware->matmul_efficiency, 0.5);
  EXPECT_DOUBLE_EQ(c.device.hardware->hbm_GBps, 4800);
  EXPECT_DOUBLE_EQ(c.cluster.intra_node.bandwidth_GBps, 100);
  EXPECT_DOUBLE_EQ(c.cluster.intra_node.latency_us, 5);  // still the preset's
  EXPECT_DOUBLE_EQ(c.device.hardware->intra_node.bandwidth_GBps, 100);
  EXPECT_EQ(c.training.microbatches, 4);
}

TEST(ConfigForms, NodeSizeFromThePreset) {
  const Config c = parse_config(
      "cluster: {nodes: 2, device: {preset: ascend-910b}}\nmodel: {preset: llama2-13b}\n"
      "training: {pp: 8, seq_length: 4096, global_batch_size: 32}\n",
      "a.yaml");
  EXPECT_EQ(c.cluster.devices_per_node, 8);
  EXPECT_EQ(c.training.microbatches, 16);
  const ConfigError e = error_of(
      "cluster: {nodes: 1, device: {memory_GiB: 8}}\nmodel: {preset: llama2-13b}\ntraining: {pp: "
      "1}\n");
  EXPECT_EQ(e.key(), "cluster.devices_per_node");
  EXPECT_EQ(e.line(), 1);
}

TEST(ConfigForms, ExplicitShape) {
  const Config c =
      parse_config(yaml("model:\n  architecture: gpt\n  num_layers: 4\n  hidden_size: 1024\n"
                        "  num_attention_heads: 16\n  ffn_hidden_size: 4096\n  vocab_size: 50304\n"
                        "  tied_embeddings: true"),
                   "a.yaml");
  const ModelShape& m = *c.model.shape;
  EXPECT_EQ(m.architecture, Architecture::gpt);
  EXPECT_EQ(m.num_kv_heads, 16);  // defaults to the attention heads
  EXPECT_TRUE(m.tied_embeddings);
}

TEST(ConfigForms, HfConfigRelativeToTheYamlFolder) {
  const Config c =
      parse_config(yaml("model: {hf_config: hf/llama3_8b_config.json}"), kData + "/x.yaml");
  const ModelShape& m = *c.model.shape;
  EXPECT_EQ(m.num_layers, 32);
  EXPECT_EQ(m.hidden_size, 4096);
  EXPECT_EQ(m.num_kv_heads, 8);
  EXPECT_EQ(m.ffn_hidden_size, 14336);
  EXPECT_EQ(m.vocab_size, 128256);
  EXPECT_FALSE(m.tied_embeddings);
  // Same layer as the llama3-8b preset.
  EXPECT_EQ(m.layer_params(), find_model_preset("llama3-8b")->layer_params());
}

TEST(ConfigForms, HfGpt2Config) {
  const ModelShape m = read_hf_config(kData + "/hf/gpt2_config.json");
  EXPECT_EQ(m.architecture, Architecture::gpt);
  EXPECT_EQ(m.ffn_hidden_size, 4 * 768);  // n_inner null = 4 h
  EXPECT_TRUE(m.tied_embeddings);
  EXPECT_TRUE(m.dropout);
}

TEST(ConfigForms, MeasuredFormUnchanged) {
  for (const char* f : {"tiny.yaml", "h200_llama2_7b.yaml", "ascend910b_2x8.yaml"}) {
    const Config c = load_config(std::string(BMPIPE_SOURCE_DIR) + "/configs/examples/" + f);
    EXPECT_FALSE(c.model.analytic()) << f;
    EXPECT_FALSE(c.device.hardware) << f;
    const test::Prepared run = test::prepare_run(c);
    const SimInput& in = run.input;
    EXPECT_TRUE(in.tail_time.empty()) << f;
    EXPECT_TRUE(simulate(in, run.schedule).ok) << f;
  }
}

TEST(ConfigForms, AnalyticExamplesRunAndFit) {
  for (const char* f :
       {"gpt3_175b_a100.yaml", "ascend910b_llama2_13b_analytic.yaml", "h200_llama3_8b_hf.yaml"}) {
    const Config c = load_config(std::string(BMPIPE_SOURCE_DIR) + "/configs/examples/" + f);
    EXPECT_TRUE(c.model.analytic()) << f;
    const test::Prepared run = test::prepare_run(c);
    const SimResult r = simulate(run.input, run.schedule);
    EXPECT_TRUE(r.ok) << f;
    EXPECT_TRUE(r.fits) << f;
  }
}

TEST(ConfigForms, RecomputeGlobalPerStagePerLayer) {
  const Config c =
      parse_config(yaml("model: {preset: llama2-7b}",
                        "  global_batch_size: 64\n  recompute:\n    default: selective\n"
                        "    stages: {0: full, 3: none}\n    layers: {1: none, 31: full}\n"),
                   "a.yaml");
  EXPECT_EQ(recompute_mode(c, 0, 0), Recompute::full);  // stage
  EXPECT_EQ(recompute_mode(c, 0, 1), Recompute::none);  // layer wins over stage
  EXPECT_EQ(recompute_mode(c, 1, 8), Recompute::selective);
  EXPECT_EQ(recompute_mode(c, 3, 30), Recompute::none);
  EXPECT_EQ(recompute_mode(c, 3, 31), Recompute::full);
  const test::Prepared run = test::prepare_run(c);
  const SimInput& in = run.input;
  const AnalyticCosts a = analytic_costs(c);
  // Stage 1: eight selective layers.
  EXPECT_EQ(in.stages[1].activation_bytes, 8 * a.decoder.activation_bytes[Recompute::selective]);
  EXPECT_EQ(in.stages[1].recompute,
            8 * ms_to_ns(a.decoder.recompute_extra_s[Recompute::selective] * 1e3));
  // A split backward keeps only what W needs (projection inputs, normalized tensors).
  EXPECT_EQ(in.stages[1].weight_grad_retained_bytes,
            8 * a.decoder.weight_grad_bytes[Recompute::selective]);
  EXPECT_LT(in.stages[1].weight_grad_retained_bytes, in.stages[1].activation_bytes);
  EXPECT_GT(in.stages[1].weight_grad_retained_bytes, 0);
  // Stage 0: seven full layers, one none, plus the embedding.
  EXPECT_EQ(in.stages[0].activation_bytes, 7 * a.decoder.activation_bytes[Recompute::full] +
                                               a.decoder.activation_bytes[Recompute::none] +
                                               a.embedding.activation_bytes[Recompute::none]);
  // Global form.
  const Config g = parse_config(
      yaml("model: {preset: llama2-7b}", "  global_batch_size: 64\n  recompute: full\n"), "a.yaml");
  EXPECT_EQ(recompute_mode(g, 2, 17), Recompute::full);
}

TEST(ConfigForms, AnalyticSimulationHasTailsAndImbalance) {
  const Config c = parse_config(yaml(), "a.yaml");
  const test::Prepared run = test::prepare_run(c);
  const SimInput& in = run.input;
  ASSERT_EQ(in.tail_time.size(), 4u);
  for (Time t : in.tail_time) EXPECT_GT(t, 0);
  // The LM head (fp32 logits over a 32000 vocabulary) makes the last stage heavier.
  EXPECT_GT(in.stages[3].forward, in.stages[1].forward);
  EXPECT_GT(in.stages[3].activation_bytes, in.stages[1].activation_bytes);
  // Megatron placement: pipeline rank r on device r * tp * dp = 4r.
  EXPECT_EQ(in.rank_device, (std::vector<int>{0, 4, 8, 12}));
  const SimResult r = simulate(in, run.schedule);
  ASSERT_TRUE(r.ok);
  EXPECT_GT(r.iteration_time, r.pipeline_time);
  const RunInfo& info = run.info;
  EXPECT_DOUBLE_EQ(info.tokens_per_iteration, 64.0 * 4096);
  EXPECT_EQ(info.devices, 16);
  const double mfu = info.model_flops_per_iteration /
                     (r.iteration_time * 1e-9 * info.peak_flops_per_device * info.devices);
  EXPECT_GT(mfu, 0.1);
  EXPECT_LT(mfu, 0.8);
}

TEST(ConfigForms, OverridesRederiveTheBatch) {
  Config c = parse_config(yaml(), "a.yaml");
  Overrides o;
  o.pp = 8;  // dp becomes 1: 64 / (2 x 1) = 32 micro-batches
  apply_overrides(c, o);
  EXPECT_EQ(c.training.microbatches, 32);
  Overrides m;
  m.microbatches = 5;  // wins over global_batch_size
  apply_overrides(c, m);
  EXPECT_EQ(c.training.microbatches, 5);
}

// ---- bad input: one test per error class ----

TEST(ConfigErrors, TpDoesNotDivideHeads) {
  const ConfigError e = error_of(
      "cluster: {nodes: 1, devices_per_node: 6, device: {preset: h200}}\nmodel: {preset: "
      "llama2-7b}\n"
      "training: {pp: 2, tp: 3, seq_length: 4096, microbatches: 4}\n");
  EXPECT_EQ(e.key(), "training.tp");
  EXPECT_EQ(e.line(), 3);
  EXPECT_NE(e.message().find("does not divide the 32 attention heads"), std::string::npos)
      << e.what();
}

TEST(ConfigErrors, GlobalBatchNotMultipleOfMbsTimesDp) {
  const ConfigError e = error_of(yaml("model: {preset: llama2-7b}", "  global_batch_size: 30\n"));
  EXPECT_EQ(e.key(), "training.global_batch_size");
  EXPECT_GT(e.line(), 0);
  EXPECT_NE(e.message().find("not a multiple of micro_batch_size x dp = 2 x 2 = 4"),
            std::string::npos)
      << e.what();
}

TEST(ConfigErrors, MicrobatchesContradictGlobalBatch) {
  const ConfigError e =
      error_of(yaml("model: {preset: llama2-7b}", "  global_batch_size: 64\n  microbatches: 8\n"));
  EXPECT_EQ(e.key(), "training.microbatches");
  EXPECT_NE(e.message().find("contradicts"), std::string::npos) << e.what();
  EXPECT_NE(e.message().find("= 16"), std::string::npos) << e.what();
}

TEST(ConfigErrors, HfConfigLacksAField) {
  const ConfigError e = error_of(yaml("model: {hf_config: hf/missing_intermediate_size.json}"));
  EXPECT_EQ(e.key(), "model.hf_config");
  EXPECT_GT(e.line(), 0);
  EXPECT_NE(e.message().find("lacks the field 'intermediate_size'"), std::string::npos) << e.what();
  const ConfigError missing = error_of(yaml("model: {hf_config: hf/no_such_file.json}"));
  EXPECT_NE(missing.message().find("cannot open"), std::string::npos) << missing.what();
}

TEST(ConfigErrors, UnknownModelPresetListsKnownNames) {
  const ConfigError e = error_of(yaml("model: {preset: llama4-1t}"));
  EXPECT_EQ(e.key(), "model.preset");
  EXPECT_NE(e.message().find("unknown model preset 'llama4-1t'"), std::string::npos);
  for (const char* name :
       {"llama2-7b", "llama2-13b", "llama2-70b", "llama3-8b", "llama3-70b", "gpt3-175b"})
    EXPECT_NE(e.message().find(name), std::string::npos) << name;
}

TEST(ConfigErrors, UnknownHardwarePresetListsKnownNames) {
  const ConfigError e =
      error_of(yaml("model: {preset: llama2-7b}", "  global_batch_size: 64\n", "{preset: b400}"));
  EXPECT_EQ(e.key(), "cluster.device.preset");
  EXPECT_EQ(e.line(), 4);
  for (const char* name : {"ascend-910b", "ascend-910c", "a100-80g", "b200", "b300", "gb200",
                           "gb300", "h100-sxm", "h200", "h800"})
    EXPECT_NE(e.message().find(name), std::string::npos) << name;
}

TEST(ConfigErrors, AnalyticModelNeedsSeqLengthAndCompute) {
  const ConfigError seq = error_of(
      "cluster: {nodes: 1, devices_per_node: 2, device: {preset: h200}}\nmodel: {preset: "
      "llama2-7b}\n"
      "training: {pp: 2, microbatches: 4}\n");
  EXPECT_NE(seq.message().find("seq_length"), std::string::npos) << seq.what();
  const ConfigError hw = error_of(
      "cluster: {nodes: 1, devices_per_node: 2, device: {memory_GiB: 80},\n"
      "          intra_node: {bandwidth_GBps: 100, latency_us: 1}}\nmodel: {preset: llama2-7b}\n"
      "training: {pp: 2, microbatches: 4, seq_length: 128}\n");
  EXPECT_EQ(hw.key(), "cluster.device");
  EXPECT_NE(hw.message().find("peak_tflops"), std::string::npos) << hw.what();
}

TEST(ConfigErrors, FormsDoNotMix) {
  const ConfigError e = error_of(yaml(
      "model:\n  preset: llama2-7b\n  layers: [{name: x, forward_ms: 1, backward_input_ms: 1,\n"
      "    backward_weight_ms: 1, activation_bytes: 1, output_bytes: 1, param_bytes: 1}]"));
  EXPECT_EQ(e.key(), "model.preset");
  // Keys only the cost model uses are refused for measured layers (recompute is not one of
  // them: measured groups may define their own modes, see tests/experiment).
  const ConfigError measured = error_of(
      "cluster: {nodes: 1, devices_per_node: 1, device: {memory_GiB: 1}}\n"
      "model: {layers: [{name: x, forward_ms: 1, backward_input_ms: 1, backward_weight_ms: 1,\n"
      "        activation_bytes: 1, output_bytes: 1, param_bytes: 1}]}\n"
      "training: {pp: 1, microbatches: 2, sequence_parallel: true}\n");
  EXPECT_EQ(measured.key(), "training.sequence_parallel");
  EXPECT_NE(measured.message().find("only to an analytic model"), std::string::npos);
}

TEST(ConfigErrors, RecomputeValuesAndIndices) {
  const ConfigError mode = error_of(
      yaml("model: {preset: llama2-7b}", "  global_batch_size: 64\n  recompute: partial\n"));
  EXPECT_EQ(mode.key(), "training.recompute");
  EXPECT_NE(mode.message().find("none, selective, full, offload or selective_offload"),
            std::string::npos);
  const ConfigError stage = error_of(yaml(
      "model: {preset: llama2-7b}", "  global_batch_size: 64\n  recompute: {stages: {4: full}}\n"));
  EXPECT_EQ(stage.key(), "training.recompute.stages.4");
  EXPECT_GT(stage.line(), 0);
  const ConfigError layer =
      error_of(yaml("model: {preset: llama2-7b}",
                    "  global_batch_size: 64\n  recompute: {layers: {32: full}}\n"));
  EXPECT_EQ(layer.key(), "training.recompute.layers.32");
}

TEST(ConfigErrors, BadShapeAndEfficiency) {
  const ConfigError heads = error_of(yaml("model: {preset: llama2-7b, num_kv_heads: 5}"));
  EXPECT_EQ(heads.key(), "model");
  EXPECT_NE(heads.message().find("num_kv_heads"), std::string::npos);
  const ConfigError eff = error_of(yaml("model: {preset: llama2-7b}", "  global_batch_size: 64\n",
                                        "{preset: h200, matmul_efficiency: 1.5}"));
  EXPECT_EQ(eff.key(), "cluster.device.matmul_efficiency");
  const ConfigError missing_batch = error_of(yaml("model: {preset: llama2-7b}", ""));
  EXPECT_EQ(missing_batch.key(), "training.microbatches");
}

}  // namespace
}  // namespace bmpipe
