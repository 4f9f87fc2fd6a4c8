// Issue 41: the layout search over a mixture-of-experts config without sequence
// parallelism. Megatron-LM refuses MoE at tp > 1 without it (the loader's rule,
// experiment/field_checks.cpp), so a tp > 1 layout is neither refused nor ranked as the
// refused job: it is the job Megatron runs, with sequence parallelism on, and its export
// says --sequence-parallel.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "api/export.hpp"
#include "experiment/config.hpp"
#include "experiment/config_cases.hpp"
#include "planner/layout_search.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace {

using test::has;

// A small DeepSeek-like model (MLA, a shared expert, a first dense layer) on 8 H100s, at
// tp 1 and without sequence parallelism: a job Megatron-LM runs.
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
  ep: 2
  seq_length: 1024
  global_batch_size: 16
)";

LayoutSpace space() {
  LayoutSpace s;
  s.tp = {1, 2};
  s.pp = {2};
  s.ep = {1, 2};
  s.micro_batch_size = {1};
  s.schedules = {"1f1b"};
  return s;
}

TEST(TpEpSearch, TpTwoLayoutsGetSequenceParallelism) {
  const Config base = parse_config(kMoe, "moe.yaml");
  ASSERT_FALSE(base.training.sequence_parallel);
  std::vector<LayoutResult> rejected;
  const std::vector<Layout> layouts = enumerate_layouts(base, space(), &rejected);
  for (const LayoutResult& r : rejected) ADD_FAILURE() << to_string(r.layout) << ": " << r.rejected;
  // tp 1, 2 x ep 1, 2: none refused by the experts' rules or the config.
  ASSERT_EQ(layouts.size(), 4u);
  bool tp2_ep2 = false;
  for (const Layout& l : layouts) {
    const Config c = layout_config(base, l);
    EXPECT_EQ(c.training.sequence_parallel, l.tp > 1) << to_string(l);
    tp2_ep2 = tp2_ep2 || (l.tp == 2 && l.ep == 2);
    // Each is planned and ranked as a run, not rejected.
    const LayoutResult r = evaluate_layout(base, l, PlannerEffort::off, PlannerOptions{});
    EXPECT_EQ(r.rejected, "") << to_string(l) << " (" << r.filter << ")";
    EXPECT_GT(r.iteration_time, 0) << to_string(l);
  }
  EXPECT_TRUE(tp2_ep2);
}

TEST(TpEpSearch, TheTp2Ep2LayoutExportsSequenceParallel) {
  const Config base = parse_config(kMoe, "moe.yaml");
  Layout l;
  bool found = false;
  for (const Layout& x : enumerate_layouts(base, space(), nullptr))
    if (x.tp == 2 && x.ep == 2) {
      l = x;
      found = true;
    }
  ASSERT_TRUE(found);
  const api::ExportOutcome out =
      api::export_config(layout_config(base, l), api::ExportRequest{"megatron", std::nullopt});
  EXPECT_TRUE(has(out.text, "--tensor-model-parallel-size 2\n")) << out.text;
  EXPECT_TRUE(has(out.text, "--expert-model-parallel-size 2\n")) << out.text;
  EXPECT_TRUE(has(out.text, "\n--sequence-parallel\n")) << out.text;
}

// Megatron-LM runs a dense model at tp 2 without sequence parallelism: the search leaves
// the config's choice alone there.
TEST(TpEpSearch, ADenseModelIsLeftAsGiven) {
  const Config dense = parse_config(
      "cluster: {nodes: 1, devices_per_node: 8, device: {preset: a100-80g}}\n"
      "model: {preset: llama2-7b}\n"
      "training: {schedule: 1f1b, tp: 2, pp: 2, seq_length: 1024, micro_batch_size: 1,\n"
      "           global_batch_size: 16}\n",
      "dense.yaml");
  LayoutSpace s;
  s.tp = {1, 2};
  s.pp = {2};
  s.micro_batch_size = {1};
  s.schedules = {"1f1b"};
  const std::vector<Layout> layouts = enumerate_layouts(dense, s, nullptr);
  ASSERT_EQ(layouts.size(), 2u);
  for (const Layout& l : layouts)
    EXPECT_FALSE(layout_config(dense, l).training.sequence_parallel) << to_string(l);
}

}  // namespace
}  // namespace bmpipe
