// The seam from a config to a run: prepare once, assemble any plan as a re-summation of the
// layer table, and the labels, run info and schedules that come out of it.
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "experiment/experiment.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace {

using test::kTiny;

// tiny.yaml: 8 unit layers (F = I = W = 0.5 ms, 1 MiB activations and weights each) on 4
// ranks of one node.
TEST(Assemble, StageCostsAreSumsOfTheirLayers) {
  const auto e = prepare(load_config(kTiny));
  const Schedule sch = make_schedule(*e);
  const Plan plan{{1, 3, 2, 2}, std::vector<Recompute>(8, Recompute::none)};
  ASSERT_EQ(check_plan(*e, plan, sch.num_stages), "");
  const SimInput in = assemble(*e, plan, sch);
  ASSERT_EQ(in.stages.size(), 4u);
  const std::int64_t mib = 1 << 20;
  const int layers[] = {1, 3, 2, 2};
  for (int s = 0; s < 4; ++s) {
    EXPECT_EQ(in.stages[s].forward, layers[s] * 500'000) << s;
    EXPECT_EQ(in.stages[s].backward_input, layers[s] * 500'000) << s;
    EXPECT_EQ(in.stages[s].backward_weight, layers[s] * 500'000) << s;
    EXPECT_EQ(in.stages[s].activation_bytes, layers[s] * mib) << s;
    EXPECT_EQ(in.static_bytes[s], layers[s] * mib) << s;  // no reserve in tiny.yaml
    EXPECT_EQ(in.capacity_bytes[s], 1024 * mib) << s;
  }
  EXPECT_EQ(in.rank_device, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_TRUE(in.tail_time.empty());  // measured layers carry no dp model
}

TEST(Assemble, ReusedInputGivesTheSameResultAsAFreshOne) {
  const auto e = prepare(load_config(kTiny));
  const Schedule sch = make_schedule(*e);
  SimInput reused;
  for (const auto& partition :
       {std::vector<int>{5, 1, 1, 1}, std::vector<int>{2, 2, 2, 2}, std::vector<int>{1, 1, 1, 5}}) {
    const Plan plan{partition, std::vector<Recompute>(8, Recompute::none)};
    assemble(*e, plan, sch, reused);
    const SimInput fresh = assemble(*e, plan, sch);
    ASSERT_EQ(reused.stages.size(), fresh.stages.size());
    for (std::size_t s = 0; s < fresh.stages.size(); ++s) {
      EXPECT_EQ(reused.stages[s].forward, fresh.stages[s].forward);
      EXPECT_EQ(reused.stages[s].activation_bytes, fresh.stages[s].activation_bytes);
    }
    EXPECT_EQ(reused.static_bytes, fresh.static_bytes);
    // 1F1B, free communication: a stage s runs all m of its F + B back to back once the
    // first micro-batch has reached it, and the last gradient must still travel back, so
    // T = max_s (sum_{j<s} F_j + m (F_s + B_s) + sum_{j<s} B_j). It is exact here because
    // each stage's warm-up forwards cover the round trip below it (F = I = W = 0.5 ms per
    // layer, B = I + W).
    const SimResult r = simulate(reused, sch);
    ASSERT_TRUE(r.ok) << r.error;
    Time expected = 0, before = 0;
    for (int st = 0; st < 4; ++st) {
      const Time f = partition[st] * 500'000;
      expected = std::max(expected, before + 8 * 3 * f);  // before = sum of F + B above
      before += 3 * f;
    }
    EXPECT_EQ(r.pipeline_time, expected);
  }
}

TEST(Assemble, RefusesAPlanThatDoesNotMatch) {
  const auto e = prepare(load_config(kTiny));
  const Schedule sch = make_schedule(*e);
  const std::vector<Recompute> none(8, Recompute::none);
  EXPECT_NE(check_plan(*e, Plan{{4, 4}, none}, 4).find("2 stages"), std::string::npos);
  EXPECT_NE(check_plan(*e, Plan{{2, 2, 2, 1}, none}, 4).find("7 layers"), std::string::npos);
  EXPECT_NE(check_plan(*e, Plan{{2, 2, 2, 2}, {Recompute::none}}, 4).find("1 recompute"),
            std::string::npos);
  // Measured layers without a recompute map run 'none' only.
  std::vector<Recompute> full = none;
  full[3] = Recompute::full;
  EXPECT_NE(check_plan(*e, Plan{{2, 2, 2, 2}, full}, 4).find("layer 3"), std::string::npos);
  EXPECT_THROW(assemble(*e, Plan{{2, 2, 2, 2}, full}, sch), std::invalid_argument);
  EXPECT_THROW(assemble(*e, Plan{{2, 2, 2}, none}, sch), std::invalid_argument);
}

// An analytic config: the cost model's layers go into the table once, the embedding into
// the first layer and the head into the last, whatever the partition.
Config analytic(const std::string& recompute) {
  return parse_config(
      "cluster: {nodes: 1, devices_per_node: 4, device: {preset: h200}}\n"
      "model: {preset: llama2-7b}\n"
      "training: {pp: 4, seq_length: 1024, microbatches: 4, recompute: " +
          recompute + "}\n",
      "analytic.yaml");
}

TEST(Assemble, AnalyticEmbeddingAndHeadStayOnTheEndStages) {
  const auto e = prepare(analytic("none"));
  ASSERT_TRUE(e->analytic);
  const AnalyticCosts& a = *e->analytic;
  const Schedule sch = make_schedule(*e);
  for (const auto& partition : {std::vector<int>{8, 8, 8, 8}, std::vector<int>{2, 10, 10, 10},
                                std::vector<int>{10, 10, 10, 2}}) {
    const Plan plan{partition, std::vector<Recompute>(32, Recompute::none)};
    const SimInput in = assemble(*e, plan, sch);
    const auto act = [&](const LayerCost& l) { return l.activation_bytes[Recompute::none]; };
    EXPECT_EQ(in.stages[0].activation_bytes, partition[0] * act(a.decoder) + act(a.embedding));
    EXPECT_EQ(in.stages[1].activation_bytes, partition[1] * act(a.decoder));
    EXPECT_EQ(in.stages[3].activation_bytes, partition[3] * act(a.decoder) + act(a.head));
    // The tail (dp reduction + optimizer step) follows the parameters a rank holds.
    const int heavier = partition[1] > partition[0] ? 1 : 0;
    EXPECT_GE(in.tail_time[heavier], in.tail_time[1 - heavier]);
  }
}

TEST(Labels, EveryStageNamesItsRecomputeModeAndMixedStagesCountThem) {
  // Stage 0 (layers 0-7) selective; stage 1 (8-15) one full layer among none.
  const auto e = prepare(analytic("{stages: {0: selective}, layers: {9: full}}"));
  const Schedule sch = make_schedule(*e);
  const Plan plan = config_plan(*e, sch.num_stages);
  const std::vector<StageInfo> stages = stage_info(*e, plan);
  EXPECT_EQ(stage_recompute_labels(stages),
            (std::vector<std::string>{"selective", "mixed", "none", "none"}));
  EXPECT_EQ(stage_recompute_counts(stages)[1], "none 7, full 1");
  EXPECT_EQ(stages[1].first_layer, 8);
  EXPECT_EQ(stages[1].modes[Recompute::full], 1);
  // The offload modes count as layers too: a stage of 2 selective_offload and 1 offload
  // layers, and one of 3 selective_offload layers.
  std::vector<StageInfo> off(2);
  off[0].num_layers = 3, off[0].modes[Recompute::selective_offload] = 2;
  off[0].modes[Recompute::offload] = 1;
  off[1].num_layers = 3, off[1].modes[Recompute::selective_offload] = 3;
  EXPECT_EQ(stage_recompute_counts(off),
            (std::vector<std::string>{"offload 1, selective_offload 2", "selective_offload 3"}));
  EXPECT_EQ(stage_recompute_labels(off), (std::vector<std::string>{"mixed", "selective_offload"}));
}

TEST(RunInfo, VppComesFromTheScheduleThatRan) {
  const auto e = prepare(load_config(kTiny));
  for (const char* name : {"1f1b", "zb-v", "dualpipe-v"}) {
    const int vpp = effective_vpp(*find_schedule(name), e->config.training.vpp);
    const Schedule sch = make_schedule(*e, name, vpp);
    const RunInfo info = make_run_info(*e, config_plan(*e, sch.num_stages), sch);
    EXPECT_EQ(info.vpp, sch.num_stages / sch.num_ranks) << name;
    EXPECT_EQ(info.vpp, std::string(name) == "1f1b" ? 1 : 2) << name;
    EXPECT_EQ(info.schedule, name);
  }
}

TEST(Prepare, IsSharedSafelyByThreads) {
  // One experiment, many threads assembling and simulating different plans: the same
  // answers as one thread.
  const auto e = prepare(load_config(kTiny));
  const Schedule sch = make_schedule(*e);
  const std::vector<std::vector<int>> partitions = {
      {5, 1, 1, 1}, {2, 2, 2, 2}, {1, 1, 1, 5}, {1, 5, 1, 1}};
  std::vector<Time> alone;
  for (const auto& p : partitions)
    alone.push_back(
        simulate(assemble(*e, Plan{p, std::vector<Recompute>(8, Recompute::none)}, sch), sch)
            .iteration_time);
  std::vector<Time> together(partitions.size());
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < partitions.size(); ++i)
    threads.emplace_back([&, i] {
      SimInput in;
      for (int k = 0; k < 50; ++k) {
        assemble(*e, Plan{partitions[i], std::vector<Recompute>(8, Recompute::none)}, sch, in);
        together[i] = simulate(in, sch).iteration_time;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(alone, together);
}

TEST(Config, VSchedulesCountTheirRealStagesWhateverVppSays) {
  // zb-v holds two stages per device: a partition and per-stage recompute with vpp 1 are
  // checked against 2p stages, not p.
  const std::string base =
      "cluster: {nodes: 1, devices_per_node: 4, device: {name: u, memory_GiB: 1},\n"
      "          intra_node: {bandwidth_GBps: 100, latency_us: 0}}\n"
      "model: {layers: [{name: u, count: 8, forward_ms: 0.5, backward_input_ms: 0.5,\n"
      "                  backward_weight_ms: 0.5, activation_bytes: 1, output_bytes: 0,\n"
      "                  param_bytes: 1}]}\n"
      "training: {schedule: zb-v, pp: 4, microbatches: 8, ";
  const Config ok = parse_config(base + "partition: [1, 1, 1, 1, 1, 1, 1, 1]}\n", "v.yaml");
  const auto e = prepare(ok);
  const Schedule sch = make_schedule(*e);
  EXPECT_EQ(config_plan(*e, sch.num_stages).partition, std::vector<int>(8, 1));
  try {
    parse_config(base + "partition: [2, 2, 2, 2]}\n", "v.yaml");
    FAIL() << "a 4-entry partition for 8 stages loaded";
  } catch (const ConfigError& err) {
    EXPECT_EQ(err.key(), "training.partition");
    EXPECT_NE(err.message().find("8 stages"), std::string::npos) << err.what();
  }
}

}  // namespace
}  // namespace bmpipe
