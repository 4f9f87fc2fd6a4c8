// Issue 41: a mixture-of-experts job at tp > 1 without sequence parallelism is one
// Megatron-LM refuses to train (NVIDIA/Megatron-LM d98e8a64ddf3,
// megatron/core/transformer/moe/moe_layer.py:636, MoELayer.forward raises "During
// training, performance may degrade if MoE and tensor parallelism are enabled without also
// enabling sequence parallelism."; megatron/core/model_parallel_config.py:560 says of ep > 1
// with tp > 1 "When using expert parallelism and tensor parallelism for training, sequence
// parallelism must be used"). The loader refuses it naming FILE:LINE:key, and MFU counts
// the model's FLOPs, the same for every layout of one model.
#include <gtest/gtest.h>

#include <string>

#include "experiment/config.hpp"
#include "experiment/config_cases.hpp"
#include "experiment/experiment.hpp"
#include "support/run_config.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace {

using test::config_error;
using test::has;
using test::with;

// A small DeepSeek-like model (MLA, a shared expert, a first dense layer) on 8 H100s.
// Line numbers matter: training.tp is on line 15, training.ep on line 16.
const std::string kMoe = R"(cluster:
  nodes: 1
  devices_per_node: 8
  device: {preset: h100-sxm}
model:
  num_layers: 4
  hidden_size: 1024
  num_attention_heads: 16
  ffn_hidden_size: 4096
  vocab_size: 32000
  moe: {num_experts: 8, top_k: 2, expert_ffn_hidden_size: 512, shared_expert_ffn_hidden_size: 512, first_dense_layers: 1, load_imbalance: 1}
  mla: {q_lora_rank: 256, kv_lora_rank: 128, qk_head_dim: 64, qk_pos_emb_head_dim: 32, v_head_dim: 64}
training:
  pp: 2
  tp: 2
  ep: 2
  seq_length: 1024
  global_batch_size: 16
)";

void expect_megatron_words(const ConfigError& e) {
  EXPECT_TRUE(has(e.message(),
                  "During training, performance may degrade if MoE and tensor "
                  "parallelism are enabled without also enabling sequence "
                  "parallelism."))
      << e.message();
  EXPECT_TRUE(has(e.message(),
                  "When using expert parallelism and tensor parallelism for "
                  "training, sequence parallelism must be used"))
      << e.message();
  EXPECT_TRUE(has(e.message(), "expected training.sequence_parallel: true, or training.tp 1"))
      << e.message();
}

TEST(TpEpSequenceParallel, RefusedNamingEpWhenGiven) {
  const ConfigError e = config_error(kMoe);
  EXPECT_EQ(e.file(), "exp.yaml");
  EXPECT_EQ(e.key(), "training.ep");
  EXPECT_EQ(e.line(), 16);
  EXPECT_TRUE(has(e.message(), "sequence parallelism is off with tp = 2 and ep = 2"))
      << e.message();
  expect_megatron_words(e);
  // The same from the command line's training.ep.
  Overrides o;
  o.set = {{"training.ep", "2"}};
  const ConfigError cli = config_error(with("  ep: 2\n", "", kMoe), o);
  EXPECT_EQ(cli.key(), "training.ep (from the command line)");
}

TEST(TpEpSequenceParallel, RefusedNamingSequenceParallelWhenGiven) {
  const ConfigError e =
      config_error(with("  ep: 2\n", "  ep: 2\n  sequence_parallel: false\n", kMoe));
  EXPECT_EQ(e.key(), "training.sequence_parallel");
  EXPECT_EQ(e.line(), 17);
  expect_megatron_words(e);
}

// MoELayer.forward refuses tp > 1 without sequence parallelism whatever ep is: at ep 1
// the rule names tp.
TEST(TpEpSequenceParallel, RefusedAtEp1Too) {
  const ConfigError e = config_error(with("  ep: 2\n", "", kMoe));
  EXPECT_EQ(e.key(), "training.tp");
  EXPECT_EQ(e.line(), 15);
  EXPECT_TRUE(has(e.message(), "sequence parallelism is off with tp = 2 for a")) << e.message();
  expect_megatron_words(e);
}

TEST(TpEpSequenceParallel, AcceptedWithSequenceParallelOrAtTp1OrDense) {
  const Config sp =
      parse_config(with("  ep: 2\n", "  ep: 2\n  sequence_parallel: true\n", kMoe), "exp.yaml");
  EXPECT_TRUE(sp.training.sequence_parallel);
  EXPECT_EQ(sp.training.tp, 2);
  EXPECT_EQ(sp.training.ep, 2);
  EXPECT_EQ(parse_config(with("  tp: 2\n", "  tp: 1\n", kMoe), "exp.yaml").training.ep, 2);
  // A dense model at tp 2 without sequence parallelism is a job Megatron-LM runs.
  const std::string dense = with(
      "  moe: {num_experts: 8, top_k: 2, expert_ffn_hidden_size: 512, "
      "shared_expert_ffn_hidden_size: 512, first_dense_layers: 1, load_imbalance: 1}\n",
      "", with("  ep: 2\n", "", kMoe));
  EXPECT_FALSE(parse_config(dense, "exp.yaml").training.sequence_parallel);
}

struct Rate {
  double tokens_per_s = 0, mfu = 0;
};

Rate rate_of(const std::string& text) {
  const test::Prepared p = test::prepare_run(parse_config(text, "exp.yaml"));
  const SimResult r = simulate(p.input, p.schedule);
  EXPECT_TRUE(r.ok) << r.error;
  const Throughput t = throughput(p.info, r.iteration_time);
  EXPECT_TRUE(t.tokens_per_s && t.mfu);
  return {t.tokens_per_s.value_or(0), t.mfu.value_or(0)};
}

// MFU is model FLOPs / (time x peak x devices) with the model's FLOPs the same for every
// layout of one model, so on the same devices two layouts' MFUs stand as their tokens/s.
// Executed FLOPs would not: tp repeats MLA's down-projections on every rank.
TEST(TpEpSequenceParallel, MfuIsInProportionToTokensPerSecond) {
  const std::string sp = with("  ep: 2\n", "  ep: 2\n  sequence_parallel: true\n", kMoe);
  const Rate tp2 = rate_of(sp);
  const Rate tp1 = rate_of(with("  tp: 2\n", "  tp: 1\n", sp));
  const Rate tp4 = rate_of(with("  tp: 2\n  ep: 2\n", "  tp: 4\n  ep: 1\n", sp));
  const Rate pp4 = rate_of(with("  pp: 2\n", "  pp: 4\n", with("  tp: 2\n", "  tp: 1\n", sp)));
  for (const Rate& other : {tp1, tp4, pp4}) {
    ASSERT_GT(other.mfu, 0);
    EXPECT_NEAR(tp2.mfu / other.mfu, tp2.tokens_per_s / other.tokens_per_s,
                1e-9 * tp2.tokens_per_s / other.tokens_per_s);
  }
  // The layouts do run at different speeds: the property is not that of equal runs.
  EXPECT_NE(tp1.tokens_per_s, tp2.tokens_per_s);
  EXPECT_NE(tp4.tokens_per_s, tp2.tokens_per_s);
}

}  // namespace
}  // namespace bmpipe
