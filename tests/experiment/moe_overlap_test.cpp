// training.moe_overlap (Megatron-LM's --overlap-moe-expert-parallel-comm) and the F&B pairs
// timed from their parts (sim/fb_pair.hpp): its bad inputs, its gain on the Mixtral example
// against a closed-form bound, and the schedule it runs.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "experiment/config.hpp"
#include "schedules/fb_pairing.hpp"
#include "sim/fb_pair.hpp"
#include "support/run_config.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace moe_overlap_test {

const std::string kHfPresets = std::string(BMPIPE_SOURCE_DIR) + "/configs/presets/hf/";

using test::run_json;

/// 16 H100 (2 nodes of 8), pp 2; `training` starts at line 11.
std::string yaml(const std::string& hf, const std::string& training) {
  return "cluster:\n"                      // 1
         "  nodes: 2\n"                    // 2
         "  devices_per_node: 8\n"         // 3
         "  device: {preset: h100-sxm}\n"  // 4
         "model:\n"                        // 5
         "  hf_config: \"" +
         hf + "\"\n" +            // 6
         "training:\n"            // 7
         "  pp: 2\n"              // 8
         "  seq_length: 4096\n"   // 9
         "  microbatches: 4\n" +  // 10
         training;
}

void expect_exit2(const std::string& name, const std::string& text, const std::string& expect) {
  const test::ScratchDir dir;
  const std::string path = test::write_file(dir.file(name + ".yaml"), text);
  const test::CliRun r = test::run_cli("simulate " + path);
  EXPECT_EQ(r.code, 2) << name << "\n" << r.all();
  EXPECT_NE(r.err.find(path + expect), std::string::npos) << name << "\n" << r.err;
}

TEST(MoeOverlap, RefusedOnADenseModel) {
  expect_exit2("dense", yaml(kHfPresets + "meta-llama-3-8b.json", "  moe_overlap: true\n"),
               ":11: training.moe_overlap: true, but");
}

TEST(MoeOverlap, RefusedWithEp1) {
  expect_exit2("ep1", yaml(kHfPresets + "mixtral-8x7b.json", "  moe_overlap: true\n"),
               ":11: training.moe_overlap: true, but ep = 1");
}

// Megatron-Core's rules beside --overlap-moe-expert-parallel-comm (NVIDIA/Megatron-LM
// d98e8a64, megatron/core/transformer/transformer_config.py:3002-3046), each refused at the
// key that breaks it. The job: Mixtral at pp 2, ep 8.
TEST(MoeOverlap, MegatronCoresRulesAreRefusedAtTheirKeys) {
  const std::string mixtral = kHfPresets + "mixtral-8x7b.json";
  expect_exit2("pp_1f1b", yaml(mixtral, "  ep: 8\n  moe_overlap: true\n"),
               ":12: training.moe_overlap: Megatron-LM's all-to-all overlap at pp 2 with "
               "schedule 1f1b and no virtual stages: Megatron-Core refuses it (\"If enabling EP "
               "A2A overlap, "
               "virtual_pipeline_model_parallel_size must be specified when "
               "pipeline_model_parallel_size > 1\"; expected schedule interleaved");
  expect_exit2("pp_dualpipe",
               yaml(mixtral, "  ep: 8\n  moe_overlap: true\n  schedule: dualpipe-v\n"),
               ":12: training.moe_overlap: pairs the forwards and backwards of Megatron-LM's "
               "1F1B and interleaved schedules, but the schedule is dualpipe-v");
  const std::string interleaved =
      "  ep: 8\n  moe_overlap: true\n  schedule: interleaved\n  vpp: 2\n";  // 11-14
  expect_exit2("full", yaml(mixtral, interleaved + "  recompute: full\n"),
               ":15: training.recompute: full recomputes a whole layer, which Megatron-Core "
               "refuses beside training.moe_overlap (\"disable full recomputation when "
               "enabling overlap_moe_expert_parallel_comm\"");
  expect_exit2("full_layer",
               yaml(mixtral, interleaved + "  recompute: {default: none, layers: {3: full}}\n"),
               ":15: training.recompute.layers.3: full recomputes a whole layer");
  expect_exit2("moe_module", yaml(mixtral, interleaved + "  recompute_modules: moe\n"),
               ":15: training.recompute_modules: names moe, which Megatron-Core refuses beside "
               "training.moe_overlap (\"disable moe in recompute_modules when enabling "
               "overlap_moe_expert_parallel_comm\"");
}

TEST(MoeOverlap, InterleavedUnderAPipelineLoadsAndThePlannerKeepsFullRecomputeOut) {
  const std::string mixtral = kHfPresets + "mixtral-8x7b.json";
  const test::ScratchDir dir;
  const std::string path = test::write_file(
      dir.file("ok.yaml"),
      yaml(mixtral, "  ep: 8\n  moe_overlap: true\n  schedule: interleaved\n  vpp: 2\n"));
  const test::CliRun r = test::run_cli("simulate " + path);
  EXPECT_EQ(r.code, 0) << r.all();
  // Megatron-Core runs no full recomputation beside the overlap: no layer offers the mode.
  const Config c = load_config(path);
  const test::Prepared p = test::prepare_run(c);
  for (const LayerRow& row : p.experiment->layers.layers) {
    EXPECT_FALSE(row.has(Recompute::full)) << row.name;
    EXPECT_TRUE(row.has(Recompute::none)) << row.name;
  }
}

TEST(MoeOverlap, OneFOneBPairsAfterAWarmUpOfTwoPerRankDown) {
  // 1F1B, p 2, m 4. Rank 0 warms up with 2 (p - 0 - 1) + 1 = 3 forwards, rank 1 with 1;
  // then each backward goes with the next forward (schedules/fb_pairing.hpp).
  const Schedule s = pair_steady_state(test::generate("1f1b", 2, 4));
  const OpList r0 = {Op::f(0, 0), Op::f(0, 1), Op::f(0, 2), Op::fb(0, 3, 0, 0),
                     Op::b(0, 1), Op::b(0, 2), Op::b(0, 3)};
  const OpList r1 = {Op::f(1, 0), Op::fb(1, 1, 1, 0), Op::fb(1, 2, 1, 1), Op::fb(1, 3, 1, 2),
                     Op::b(1, 3)};
  EXPECT_EQ(s.ops[0], r0);
  EXPECT_EQ(s.ops[1], r1);
}

TEST(MoeOverlap, InterleavedPairsAfterOneMoreWarmUpForward) {
  // Interleaved, p 2, v 2, m 4: rank 1 warms up with 2 x 0 + (2 - 1) x 2 = 2 forwards,
  // one more under the overlap; its steady state then pairs as Megatron-Core's does.
  const Schedule plain = test::generate("interleaved", 2, 4, 2);
  const Schedule s = pair_steady_state(plain);
  OpList f, b;
  for (const Op& op : plain.ops[1]) (op.kind == OpKind::F ? f : b).push_back(op);
  ASSERT_EQ(f.size(), 8u);
  OpList expected(f.begin(), f.begin() + 3);
  for (int k = 0; k < 5; ++k)
    expected.push_back(Op::fb(f[3 + k].stage, f[3 + k].microbatch, b[k].stage, b[k].microbatch));
  expected.insert(expected.end(), b.begin() + 5, b.end());
  EXPECT_EQ(s.ops[1], expected);
}

TEST(MoeOverlap, MixtralIsFasterByNoMoreThanItsExposedAllToAll) {
  // Interleaved, vpp 2: Megatron-Core needs virtual stages for the overlap at pp 4.
  const std::string base = test::examples() + "h100_mixtral_8x7b_ep8.yaml" +
                           " --set training.schedule=interleaved --set training.vpp=2";
  const nlohmann::json cost = run_json("cost " + base + " --json --ops");
  double a2a_ms = 0;  // one exchange (dispatch or combine) of one MoE layer
  for (const auto& l : cost["layers"])
    if (l["name"] == "moe_decoder")
      for (const auto& o : l["ops"])
        if (o["name"] == "a2a-dispatch") a2a_ms = o["forward_ms"].get<double>();
  ASSERT_GT(a2a_ms, 0.0);
  const nlohmann::json off = run_json("simulate " + base + " --json");
  const nlohmann::json on =
      run_json("simulate " + base + " --json --set training.moe_overlap=true");
  const double t_off = off["iteration_time_ms"].get<double>();
  const double t_on = on["iteration_time_ms"].get<double>();
  EXPECT_LT(t_on, t_off);
  // The bound: the longest chain of ops holds m micro-batches' forwards on one rank plus
  // the warm-up's p - 1 hops of a micro-batch, as many backwards (m = 16, p = 4; interleaved
  // splits a rank's 32 / 4 = 8 layers into 2 chunks of 4, and its warm-up's hops over v
  // chunks come to the same p - 1 ranks' 8 layers), each MoE layer two a2a in F and two in
  // B; a pair can hide at most its a2a, so the run gains at most the a2a on that chain:
  //   (16 + 4 - 1) x 2 x 8 x 2 x a2a.
  EXPECT_LE(t_off - t_on, (16 + 4 - 1) * 2.0 * 8 * 2 * a2a_ms);
}

TEST(MoeOverlap, PairsOfTheRunAreTimedFromTheirParts) {
  // The Mixtral example with moe_overlap: every FB op of the run lasts what fb_pair_time
  // gives for its halves' parts, which hide a2a (shorter than F + B) but not computation.
  Overrides o;
  o.set.emplace_back("training.moe_overlap", "true");
  o.set.emplace_back("training.schedule", "interleaved");
  o.set.emplace_back("training.vpp", "2");
  const Config c = load_config(test::examples() + "h100_mixtral_8x7b_ep8.yaml", o);
  const test::Prepared p = test::prepare_run(c);
  ASSERT_EQ(p.input.stage_parts.size(), 8u);  // pp 4 x vpp 2
  const auto& f = p.input.stage_parts[0].forward;
  const auto& b = p.input.stage_parts[1].backward;
  ASSERT_EQ(f.size(), 2u * 2 * 4 + 1);  // 4 MoE layers: dispatch and combine each
  Time sum_f = 0, sum_b = 0, comm = 0;
  for (std::size_t k = 0; k < f.size(); ++k) sum_f += f[k], comm += k % 2 ? f[k] : 0;
  for (std::size_t k = 0; k < b.size(); ++k) sum_b += b[k], comm += k % 2 ? b[k] : 0;
  EXPECT_EQ(sum_f, p.input.stages[0].forward);
  EXPECT_EQ(sum_b, p.input.stages[1].backward_full() + p.input.stages[1].recompute);
  const Time pair = fb_pair_time(f, b);
  EXPECT_LT(pair, sum_f + sum_b);
  EXPECT_GE(pair, sum_f + sum_b - comm);
  const SimResult r = run(*p.experiment, p.plan, p.schedule);
  ASSERT_TRUE(r.ok) << r.error;
}

}  // namespace moe_overlap_test
}  // namespace bmpipe
