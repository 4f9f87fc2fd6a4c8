// Activation memory against the closed forms of Korthikanti et al. 2022 ("Reducing
// Activation Recomputation in Large Transformer Models", sec. 4, table 2): a GPT layer
// without flash attention, with dropout, in 16-bit keeps
//   sbh(34 + 5as/h)              at tp 1, no recompute,
//   sbh(10 + 24/t + 5as/(ht))    with tensor parallelism t,
//   sbh/t (34 + 5as/h)           with tensor + sequence parallelism,
//   sbh(34)/t                    with selective recompute (+ sequence parallelism),
//   2sbh                         with full recompute,
// plus the LayerNorm statistics the closed form leaves out (fp32 mean and rstd: 16 bytes per
// token per layer). And 1F1B's first stage holds p micro-batches of activations.
#include <gtest/gtest.h>

#include "experiment/experiment.hpp"
#include "support/run_config.hpp"

namespace bmpipe {
namespace {

ModelShape korthikanti_gpt() {
  ModelShape m;
  m.name = "gpt-test";
  m.architecture = Architecture::gpt;
  m.num_layers = 8;
  m.hidden_size = 4096;
  m.num_attention_heads = 32;
  m.num_kv_heads = 32;
  m.ffn_hidden_size = 4 * 4096;
  m.vocab_size = 51200;
  m.flash_attention = false;
  m.dropout = true;
  return m;
}

constexpr double kS = 2048, kB = 2, kH = 4096, kA = 32;
const double kLnStats = 2 * 8 * kS * kB;  // two LayerNorms x (mean, rstd) x fp32

LayerCost layer(int tp, bool sp) {
  CostSettings st;
  st.seq_length = static_cast<int>(kS);
  st.micro_batch_size = static_cast<int>(kB);
  st.tp = tp;
  st.sequence_parallel = sp;
  return decoder_layer_cost(korthikanti_gpt(), *find_hardware_preset("a100-80g"), st);
}

TEST(KorthikantiClosedForm, NoParallelism) {
  const LayerCost c = layer(1, false);
  const double sbh = kS * kB * kH;
  EXPECT_DOUBLE_EQ(static_cast<double>(c.activation_bytes[Recompute::none]),
                   sbh * (34 + 5 * kA * kS / kH) + kLnStats);
  EXPECT_DOUBLE_EQ(static_cast<double>(c.activation_bytes[Recompute::selective]),
                   sbh * 34 + kLnStats);
  EXPECT_DOUBLE_EQ(static_cast<double>(c.activation_bytes[Recompute::full]), 2 * sbh);
}

TEST(KorthikantiClosedForm, TensorParallel) {
  const double t = 4, sbh = kS * kB * kH;
  const LayerCost c = layer(4, false);
  EXPECT_DOUBLE_EQ(static_cast<double>(c.activation_bytes[Recompute::none]),
                   sbh * (10 + 24 / t + 5 * kA * kS / (kH * t)) + kLnStats);
}

TEST(KorthikantiClosedForm, TensorAndSequenceParallel) {
  const double t = 4, sbh = kS * kB * kH;
  const LayerCost c = layer(4, true);
  EXPECT_DOUBLE_EQ(static_cast<double>(c.activation_bytes[Recompute::none]),
                   sbh / t * (34 + 5 * kA * kS / kH) + kLnStats / t);
  EXPECT_DOUBLE_EQ(static_cast<double>(c.activation_bytes[Recompute::selective]),
                   sbh / t * 34 + kLnStats / t);
  EXPECT_DOUBLE_EQ(static_cast<double>(c.activation_bytes[Recompute::full]), 2 * sbh / t);
}

TEST(KorthikantiClosedForm, LogitsAreFp32OnTheLastStage) {
  CostSettings st;
  st.seq_length = 2048;
  st.micro_batch_size = 2;
  st.tp = 2;
  const ModelShape m = korthikanti_gpt();
  const LayerCost head = head_cost(m, *find_hardware_preset("a100-80g"), st, true);
  const double logits = kB * kS * m.vocab_size * 4 / 2;  // b s V 4 bytes, vocab split by tp
  EXPECT_GE(static_cast<double>(head.activation_bytes[Recompute::none]), logits);
  EXPECT_LE(static_cast<double>(head.activation_bytes[Recompute::none]), logits + 8 * kS * kB * kH);
}

// 1F1B with p stages and recompute none: rank 0 holds p micro-batches at its peak.
TEST(KorthikantiClosedForm, FirstStageOf1F1BHoldsPMicrobatches) {
  const std::string yaml = R"(
cluster:
  nodes: 1
  devices_per_node: 4
  device: {preset: a100-80g}
model:
  architecture: gpt
  num_layers: 8
  hidden_size: 4096
  num_attention_heads: 32
  ffn_hidden_size: 16384
  vocab_size: 51200
  flash_attention: false
  dropout: true
training:
  schedule: 1f1b
  pp: 4
  seq_length: 2048
  micro_batch_size: 2
  global_batch_size: 16
)";
  const Config c = parse_config(yaml, "korthikanti.yaml");
  EXPECT_EQ(c.training.microbatches, 8);
  const test::Prepared run = test::prepare_run(c);
  const Schedule& s = run.schedule;
  const SimInput& in = run.input;
  const SimResult r = simulate(in, s);
  ASSERT_TRUE(r.ok) << r.error;
  const double sbh = kS * kB * kH;
  const double layer_bytes = sbh * (34 + 5 * kA * kS / kH) + kLnStats;
  // Stage 1 is two plain layers; stage 0 adds the embedding (token ids and dropout mask).
  EXPECT_DOUBLE_EQ(static_cast<double>(in.stages[1].activation_bytes), 2 * layer_bytes);
  const double embedding = 8 * kS * kB + sbh;  // int64 ids + 1-byte dropout mask
  EXPECT_DOUBLE_EQ(static_cast<double>(in.stages[0].activation_bytes), 2 * layer_bytes + embedding);
  EXPECT_EQ(r.devices[0].peak_inflight, 4);
  EXPECT_EQ(r.devices[0].peak_activation_bytes, 4 * in.stages[0].activation_bytes);
  EXPECT_EQ(r.devices[3].peak_inflight, 1);
}

}  // namespace
}  // namespace bmpipe
