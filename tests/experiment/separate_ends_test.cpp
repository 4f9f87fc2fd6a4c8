// A training.megatron_layout that puts the embedding, an MTP layer or the loss on a stage
// without decoder layers runs as written: the layer table gets separate rows E, t..., m..., L
// (experiment/layer_table.hpp). Pinned by the cost model's own units (each row is exactly
// one unit, rounded to ns once), the model card's vocabulary x hidden for the MTP stage's
// matrix copies, and Megatron-LM's documented DeepSeek-V3 layout (NVIDIA/Megatron-LM at
// d98e8a64ddf3, docs/user-guide/features/pipeline_parallel_layout.md).
#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

#include "experiment/experiment.hpp"
#include "planner/export_layout.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace separate_ends_test {

const std::string kDeepSeek =
    std::string(BMPIPE_SOURCE_DIR) + "/configs/presets/hf/deepseek-v3.json";
// Megatron-LM's DeepSeek-V3 layout: E and 3 dense layers, 2 layers on each of the next 29
// stages, the MTP layer alone on the 31st and the loss alone on the last.
const std::string kLayout = "Et*3|(tt|)*29,m|L";

std::string deepseek_yaml(const std::string& schedule, const std::string& extra) {
  return "cluster: {nodes: 256, devices_per_node: 8, device: {preset: h800}}\n"
         "model: {hf_config: \"" +
         kDeepSeek +
         "\"}\n"
         "training:\n"
         "  schedule: " +
         schedule +
         "\n"
         "  pp: 16\n"
         "  ep: 64\n"
         "  seq_length: 4096\n"
         "  global_batch_size: 4096\n"
         "  recompute: full\n"
         "  optimizer: {zero_stage: 1}\n" +
         extra;
}

/// DeepSeek-V3 under `schedule` with `extra` training keys, written to `name` in `dir` and
/// loaded.
Config deepseek(const test::ScratchDir& dir, const std::string& name, const std::string& schedule,
                const std::string& extra) {
  return load_config(test::write_file(dir.file(name), deepseek_yaml(schedule, extra)));
}

/// The DualPipeV config with Megatron-LM's DeepSeek-V3 layout.
Config deepseek_layout(const test::ScratchDir& dir) {
  return deepseek(dir, "layout.yaml", "dualpipe-v", "  megatron_layout: \"" + kLayout + "\"\n");
}

Time ns(double s) {
  return s_to_ns(s);
}

/// Llama-2-7B cut to 4 layers on 4 H100s, pp 4; `training` adds keys under training (the
/// first of them on line 7).
std::string tiny_yaml(const std::string& training) {
  return "cluster: {nodes: 1, devices_per_node: 4, device: {preset: h100-sxm}}\n"
         "model: {preset: llama2-7b, num_layers: 4}\n"
         "training:\n  pp: 4\n  seq_length: 1024\n  microbatches: 4\n" +
         training;
}

TEST(SeparateEnds, MegatronsDeepSeekLayoutRunsAsWritten) {
  const test::ScratchDir dir;
  const Config c =
      deepseek(dir, "ds.yaml", "interleaved", "  vpp: 2\n  megatron_layout: \"" + kLayout + "\"\n");
  const auto e = prepare(c);
  const LayerTable& t = e->layers;
  ASSERT_TRUE(t.separate_ends);
  // 1 embedding + 61 decoder layers + 1 MTP layer + 1 loss.
  ASSERT_EQ(e->num_layers(), 64);
  EXPECT_EQ(t.layers.front().kind, LayerKind::embedding);
  EXPECT_EQ(t.layers[62].kind, LayerKind::mtp);
  EXPECT_EQ(t.layers.back().kind, LayerKind::head);
  EXPECT_EQ(decoder_layers(*e).size(), 61u);
  const AnalyticCosts& a = *e->analytic;
  // Each end row is one unit of the cost model.
  EXPECT_EQ(t.layers.front().forward, ns(a.embedding.forward_s));
  EXPECT_EQ(t.layers[62].forward, ns(a.mtp->forward_s));
  EXPECT_EQ(t.layers.back().forward, ns(a.head_single_stage.forward_s));
  EXPECT_EQ(t.layers[1].forward, ns(a.decoder.forward_s));
  EXPECT_EQ(t.layers[61].forward, ns(a.moe_decoder->forward_s));
  // The embedding and the loss run none only; the MTP layer every mode.
  EXPECT_FALSE(t.layers.front().has(Recompute::full));
  EXPECT_FALSE(t.layers.back().has(Recompute::full));
  EXPECT_TRUE(t.layers[62].has(Recompute::full));

  const Schedule sched = make_schedule(*e);
  ASSERT_EQ(sched.num_stages, 32);
  const Plan plan = config_plan(*e, sched.num_stages);
  std::vector<int> rows{4};
  rows.insert(rows.end(), 29, 2);
  rows.insert(rows.end(), {1, 1});
  EXPECT_EQ(plan.partition, rows);
  // recompute: full reaches the decoder and MTP layers, not the ends.
  EXPECT_EQ(plan.recompute.front(), Recompute::none);
  EXPECT_EQ(plan.recompute[1], Recompute::full);
  EXPECT_EQ(plan.recompute[62], Recompute::full);
  EXPECT_EQ(plan.recompute.back(), Recompute::none);

  const SimInput in = assemble(*e, plan, sched);
  // Stage 0: E and three dense layers; stage 30: the MTP layer; stage 31: the loss.
  EXPECT_EQ(in.stages[0].forward, ns(a.embedding.forward_s) + 3 * ns(a.decoder.forward_s));
  EXPECT_EQ(in.stages[30].forward, ns(a.mtp->forward_s));
  EXPECT_EQ(in.stages[31].forward, ns(a.head_single_stage.forward_s));
  // The MTP stage hands on the main model's hidden states and its own, concatenated.
  EXPECT_EQ(in.stages[30].output_bytes, 2 * a.moe_decoder->output_bytes);
  EXPECT_EQ(in.stages[29].output_bytes, a.moe_decoder->output_bytes);

  // Interleaved, stage 30 runs on rank 14, which holds neither E nor L: it keeps copies of
  // the embedding (129280 x 7168) and of the untied output matrix and its norm.
  EXPECT_EQ(t.mtp_embedding_copy_params, 129280LL * 7168);
  EXPECT_EQ(t.mtp_head_copy_params, 129280LL * 7168 + 7168);
  ASSERT_EQ(sched.stage_rank[30], 14);
  auto rows_static = [&](int rank) {
    std::int64_t sum = e->reserved_bytes;
    for (int s = 0, first = 0; s < sched.num_stages; first += plan.partition[s], ++s)
      if (sched.stage_rank[s] == rank)
        for (int l = first; l < first + plan.partition[s]; ++l) sum += t.layers[l].static_bytes;
    return sum;
  };
  EXPECT_EQ(in.static_bytes[14] - rows_static(14),
            t.mtp_embedding_copy_static_bytes + t.mtp_head_copy_static_bytes);
  EXPECT_EQ(in.static_bytes[13], rows_static(13));
  // The copies' state is what ZeRO-1 keeps of that many parameters: at least the bf16
  // weights (2 bytes a parameter).
  EXPECT_GE(t.mtp_embedding_copy_static_bytes, 2 * t.mtp_embedding_copy_params);
  EXPECT_TRUE(run(*e, plan, sched).ok);
}

TEST(SeparateEnds, OverlappedReductionsCarryTheCopiesGradients) {
  // With --overlap-grad-reduce Megatron's buckets hold every parameter of the rank's model
  // chunk, the MTP stage's matrix copies included. Interleaved, stage 30 is the MTP layer
  // alone on rank 14, which holds neither E nor L: its one bucket reduces the layer's
  // parameters and both copies (129280 x 7168, and 129280 x 7168 + 7168 with the norm).
  const test::ScratchDir dir;
  std::string yaml =
      deepseek_yaml("interleaved", "  vpp: 2\n  megatron_layout: \"" + kLayout + "\"\n");
  const std::string zero1 = "{zero_stage: 1}";
  yaml.replace(yaml.find(zero1), zero1.size(), "{zero_stage: 1, overlap_grad_reduce: true}");
  const auto e = prepare(load_config(test::write_file(dir.file("overlap.yaml"), yaml)));
  const Schedule sched = make_schedule(*e);
  const Plan plan = config_plan(*e, sched.num_stages);
  const SimInput in = assemble(*e, plan, sched);
  ASSERT_TRUE(in.overlap_grad_reduce);
  ASSERT_EQ(sched.stage_rank[30], 14);
  const LayerRow& mtp = e->layers.layers[62];
  ASSERT_EQ(mtp.kind, LayerKind::mtp);
  ASSERT_EQ(in.grad_buckets[30].size(), 1u);
  const std::int64_t copies = 129280LL * 7168 + 129280LL * 7168 + 7168;
  EXPECT_EQ(in.grad_buckets[30][0].time,
            stage_grad_reduce_time(*e, 14, mtp.param_count + copies, mtp.expert_param_count));
  EXPECT_GT(in.grad_buckets[30][0].time,
            stage_grad_reduce_time(*e, 14, mtp.param_count, mtp.expert_param_count));
  // Rank 13 (stages 13 and 29, decoder layers only) keeps no copies: its buckets are its
  // rows' parameters.
  ASSERT_EQ(sched.stage_rank[29], 13);
  const LayerRow& a = e->layers.layers[60];
  const LayerRow& b = e->layers.layers[61];
  ASSERT_EQ(in.grad_buckets[29].size(), 2u);  // each MoE layer fills a bucket of its own
  EXPECT_EQ(in.grad_buckets[29][0].time,
            stage_grad_reduce_time(*e, 13, b.param_count, b.expert_param_count));
  EXPECT_EQ(in.grad_buckets[29][1].time,
            stage_grad_reduce_time(*e, 13, a.param_count, a.expert_param_count));
}

TEST(SeparateEnds, DualPipeVSharesTheMatricesOnRankZero) {
  // DualPipeV puts stage 0 (E) and stage 31 (L) on rank 0 and stage 30 (m) on rank 1: only
  // rank 1 pays for the copies (the DeepSeek-V3 report, sec. 3.2.2, shares them physically
  // by putting the MTP module on the rank that holds E and L).
  const test::ScratchDir dir;
  const Config c = deepseek_layout(dir);
  const auto e = prepare(c);
  const Schedule sched = make_schedule(*e);
  const Plan plan = config_plan(*e, sched.num_stages);
  ASSERT_EQ(sched.stage_rank[0], 0);
  ASSERT_EQ(sched.stage_rank[31], 0);
  ASSERT_EQ(sched.stage_rank[30], 1);
  const SimInput in = assemble(*e, plan, sched);
  std::vector<std::int64_t> rows(16, e->reserved_bytes);
  for (int s = 0, first = 0; s < sched.num_stages; first += plan.partition[s], ++s)
    for (int l = first; l < first + plan.partition[s]; ++l)
      rows[sched.stage_rank[s]] += e->layers.layers[l].static_bytes;
  // The tied-copy field is zero here (untied), so the last stage adds nothing more.
  EXPECT_EQ(e->layers.head_copy_static_bytes, 0);
  EXPECT_EQ(in.static_bytes[0], rows[0]);
  EXPECT_EQ(in.static_bytes[1] - rows[1],
            e->layers.mtp_embedding_copy_static_bytes + e->layers.mtp_head_copy_static_bytes);
  // The export writes the layout back as it was given, in Megatron-LM's grammar.
  const ExportLayout x = export_layout(*e, plan, sched);
  std::vector<int> decoders{3};
  decoders.insert(decoders.end(), 29, 2);
  decoders.insert(decoders.end(), {0, 0});
  EXPECT_EQ(x.partition, decoders);
  std::vector<int> mtp(32, 0);
  mtp[30] = 1;
  EXPECT_EQ(x.mtp_per_stage, mtp);
}

TEST(SeparateEnds, TheSamePlacementFoldedOrSeparateIsTheSameRun) {
  // training.separate_ends with the default split puts E on the first stage and the MTP
  // layer and L on the last, where the folded table has them: the same units, summed in
  // another order and rounded per row, so the same run to the ns rounding of each row's
  // parts (64 rows, <= 0.5 ns each per op) and the same bytes exactly.
  const test::ScratchDir dir;
  const auto folded = prepare(deepseek(dir, "folded.yaml", "dualpipe-v", ""));
  const auto separate =
      prepare(deepseek(dir, "separate.yaml", "dualpipe-v", "  separate_ends: true\n"));
  ASSERT_FALSE(folded->layers.separate_ends);
  ASSERT_TRUE(separate->layers.separate_ends);
  ASSERT_EQ(separate->num_layers(), folded->num_layers() + 3);
  const Schedule sf = make_schedule(*folded), ss = make_schedule(*separate);
  const Plan pf = config_plan(*folded, sf.num_stages), ps = config_plan(*separate, ss.num_stages);
  // 61 layers over 32 stages: 2 on the first 29, 1 on the last 3; plus E and m, L.
  EXPECT_EQ(pf.partition.front(), 2);
  EXPECT_EQ(ps.partition.front(), 3);
  EXPECT_EQ(ps.partition.back(), pf.partition.back() + 2);
  const SimResult a = run(*folded, pf, sf), b = run(*separate, ps, ss);
  ASSERT_TRUE(a.ok && b.ok);
  EXPECT_NEAR(static_cast<double>(a.iteration_time), static_cast<double>(b.iteration_time),
              1000.0);  // 1 us in 44.8 s
  ASSERT_EQ(a.devices.size(), b.devices.size());
  for (std::size_t r = 0; r < a.devices.size(); ++r)
    EXPECT_EQ(a.devices[r].peak_bytes, b.devices[r].peak_bytes) << r;
  // The MTP layer runs the last decoder layer's mode, as folded into it.
  EXPECT_EQ(ps.recompute[separate->num_layers() - 2], pf.recompute.back());
}

TEST(SeparateEnds, APlanIsWrittenBackInTheKeysThatStateIt) {
  const test::ScratchDir dir;
  // Megatron-LM's layout: the written keys are the layout itself (Megatron's grammar,
  // repeats unrolled), no partition, and one mode per decoder layer then the MTP layer.
  const Config layout = deepseek_layout(dir);
  const auto e = prepare(layout);
  const Plan plan = config_plan(*e, 32);
  ConfigEdits edits;
  set_plan_keys(edits, layout, plan);
  std::string written = "Et*3";
  for (int s = 0; s < 29; ++s) written += "|t*2";
  written += "|m|L";
  EXPECT_EQ(edits.megatron_layout, written);
  EXPECT_TRUE(edits.partition.empty());
  EXPECT_FALSE(edits.separate_ends);
  ASSERT_EQ(edits.recompute.size(), 62u);
  EXPECT_EQ(edits.recompute.back(), Recompute::full);
  // The config those keys make runs the same plan, row for row.
  Config again = layout;
  again.training.megatron_layout = edits.megatron_layout;
  for (std::size_t l = 0; l < edits.recompute.size(); ++l)
    again.training.recompute.layers[static_cast<int>(l)] = edits.recompute[l];
  EXPECT_EQ(config_plan(*prepare(again), 32), plan);

  // training.separate_ends with the ends where the folded table has them: a partition in
  // decoder layers and the key.
  const Config separate = deepseek(dir, "separate.yaml", "dualpipe-v", "  separate_ends: true\n");
  const auto es = prepare(separate);
  const Plan ps = config_plan(*es, 32);
  set_plan_keys(edits, separate, ps);
  EXPECT_TRUE(edits.megatron_layout.empty());
  EXPECT_TRUE(edits.separate_ends);
  EXPECT_EQ(std::accumulate(edits.partition.begin(), edits.partition.end(), 0), 61);
  EXPECT_EQ(edits.partition,
            stage_layer_counts(deepseek(dir, "folded.yaml", "dualpipe-v", ""), 32));
}

TEST(SeparateEnds, AStageWithoutRowsPassesItsInputOn) {
  const test::ScratchDir dir;
  const Config c = load_config(
      test::write_file(dir.file("tiny.yaml"), tiny_yaml("  megatron_layout: \"Et*2||t*2|L\"\n")));
  const auto e = prepare(c);
  ASSERT_TRUE(e->layers.separate_ends);
  const Schedule sched = make_schedule(*e);
  const Plan plan = config_plan(*e, 4);
  EXPECT_EQ(plan.partition, (std::vector<int>{3, 0, 2, 1}));
  const SimInput in = assemble(*e, plan, sched);
  EXPECT_EQ(in.stages[1].forward, 0);
  EXPECT_EQ(in.stages[1].output_bytes, in.stages[0].output_bytes);
  EXPECT_EQ(in.stages[0].output_bytes, e->analytic->decoder.output_bytes);
  // No MTP layers: no copies anywhere.
  EXPECT_EQ(e->layers.mtp_embedding_copy_params, 0);
}

TEST(SeparateEnds, RecomputeKeysCountDecoderLayers) {
  const test::ScratchDir dir;
  const Config c = load_config(test::write_file(
      dir.file("tiny.yaml"),
      tiny_yaml("  megatron_layout: \"E|t*2|t*2|L\"\n"
                "  recompute: {default: none, layers: {0: full}, stages: {2: selective}}\n")));
  const auto e = prepare(c);
  const Plan plan = config_plan(*e, 4);
  // Rows: E | t0 t1 | t2 t3 | L. Decoder layer 0 is row 1.
  EXPECT_EQ(plan.recompute,
            (std::vector<Recompute>{Recompute::none, Recompute::full, Recompute::none,
                                    Recompute::selective, Recompute::selective, Recompute::none}));
}

TEST(SeparateEnds, BadLayoutsNameTheKey) {
  const test::ScratchDir dir;
  auto error = [&](const std::string& training) {
    const std::string path = test::write_file(dir.file("bad.yaml"), tiny_yaml(training));
    try {
      prepare(load_config(path));
    } catch (const ConfigError& x) {
      return std::string(x.what());
    }
    return std::string("<accepted>");
  };
  // The grammar, at the key's line.
  EXPECT_NE(
      error("  megatron_layout: \"Et*2|x|t*2|L\"\n").find("bad.yaml:7: training.megatron_layout"),
      std::string::npos);
  EXPECT_NE(error("  megatron_layout: \"Et*2|x|t*2|L\"\n").find("invalid layer character 'x'"),
            std::string::npos);
  // Both the layout that places every layer and a partition.
  EXPECT_NE(error("  megatron_layout: \"E|t*2|t*2|L\"\n  partition: [1, 1, 1, 1]\n")
                .find("training.partition: cannot be given with training.megatron_layout"),
            std::string::npos);
  // Another stage count than the schedule's.
  EXPECT_NE(error("  megatron_layout: \"E|t*4|L\"\n").find("has 3 stages but there are 4"),
            std::string::npos);
  // Another number of decoder layers, or of MTP layers.
  EXPECT_NE(error("  megatron_layout: \"E|t*2|t*3|L\"\n").find("holds 5 decoder layers (t)"),
            std::string::npos);
  // Measured layer groups are rows of their own partition.
  const std::string measured = test::write_file(
      dir.file("measured.yaml"),
      "cluster: {nodes: 1, devices_per_node: 4, device: {name: unit, memory_GiB: 1},\n"
      "          intra_node: {bandwidth_GBps: 100, latency_us: 0}}\n"
      "model:\n  layers:\n    - {name: unit, count: 4, forward_ms: 1, backward_input_ms: 1,\n"
      "       backward_weight_ms: 1, activation_bytes: 1024, output_bytes: 0, param_bytes: 1}\n"
      "training: {pp: 4, microbatches: 4, megatron_layout: \"E|t*2|t*2|L\"}\n");
  try {
    load_config(measured);
    ADD_FAILURE() << "a measured model ran a layout with separate ends";
  } catch (const ConfigError& x) {
    EXPECT_NE(std::string(x.what()).find("measured.yaml:7: training.megatron_layout"),
              std::string::npos)
        << x.what();
    EXPECT_NE(std::string(x.what()).find("only an analytic model"), std::string::npos);
  }
  EXPECT_NE(error("  megatron_layout: \"E|t*2|t*2|mL\"\n")
                .find("holds 1 multi-token prediction layers (m) but the model has 0"),
            std::string::npos);
}

}  // namespace separate_ends_test
}  // namespace bmpipe
