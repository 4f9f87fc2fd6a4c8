// ParallelMesh (experiment/parallel_mesh.hpp) on hand-worked meshes: the sizes it derives,
// where each group's devices lie (Megatron-Core's RankGenerator orders, dense
// "tp-cp-ep-dp-pp" and expert "tp-ep-dp-pp" with tp = etp), and every rule with its message.
#include "experiment/parallel_mesh.hpp"

#include <gtest/gtest.h>

#include "experiment/experiment.hpp"

namespace bmpipe {
namespace parallel_mesh_test {

MeshSizes sizes(int tp, int cp, int ep, int etp, int pp, std::optional<int> dp = std::nullopt) {
  MeshSizes s;
  s.tp = tp, s.cp = cp, s.ep = ep, s.etp = etp, s.pp = pp, s.dp = dp;
  return s;
}

// 64 devices, 8 a node; tp 2 cp 2 ep 4 etp 1 pp 2. dp = 64 / (2 x 2 x 2) = 8; a pipeline
// rank holds tp x cp x dp = 32 devices = etp x ep x edp, so edp = 32 / 4 = 8.
TEST(ParallelMesh, DerivesTheSizesOfAMoeMesh) {
  const MeshSizes s = sizes(2, 2, 4, 1, 2);
  EXPECT_FALSE(ParallelMesh::device_violation(s, 64));
  const ParallelMesh m(s, 64, 8);
  EXPECT_EQ(m.dp(), 8);
  EXPECT_EQ(m.edp(), 8);
  EXPECT_EQ(m.stage_devices(), 32);
  EXPECT_EQ(m.devices(), 64);
  EXPECT_EQ(m.model_parallel(), 8);  // tp x cp x pp
  EXPECT_FALSE(m.expert_violation());
}

TEST(ParallelMesh, GroupsSpanTheDevicesOfTheirRankOrder) {
  const ParallelMesh m(sizes(2, 2, 4, 1, 2), 64, 8);
  // Dense "tp-cp-dp-pp": tp 1 apart, cp tp apart, dp tp x cp apart, pp a stage apart.
  EXPECT_EQ(m.stride(MeshGroup::tp), 1);
  EXPECT_EQ(m.span(MeshGroup::tp), 2);
  EXPECT_EQ(m.stride(MeshGroup::cp), 2);
  EXPECT_EQ(m.span(MeshGroup::cp), 4);  // tp x cp
  EXPECT_EQ(m.stride(MeshGroup::dp), 4);
  EXPECT_EQ(m.span(MeshGroup::dp), 32);  // tp x cp x dp
  EXPECT_EQ(m.size(MeshGroup::dp_cp), 16);
  EXPECT_EQ(m.stride(MeshGroup::dp_cp), 2);
  EXPECT_EQ(m.span(MeshGroup::dp_cp), 32);
  EXPECT_EQ(m.stride(MeshGroup::pp), 32);
  EXPECT_EQ(m.span(MeshGroup::pp), 64);
  // Expert "etp-ep-edp-pp": the ep group spans etp x ep = 4 devices.
  EXPECT_EQ(m.span(MeshGroup::etp), 1);
  EXPECT_EQ(m.stride(MeshGroup::ep), 1);
  EXPECT_EQ(m.span(MeshGroup::ep), 4);
  EXPECT_EQ(m.stride(MeshGroup::edp), 4);
  EXPECT_EQ(m.span(MeshGroup::edp), 32);
  // In a node of 8: tp, cp, ep stay; dp (32 devices) and pp leave it.
  EXPECT_FALSE(m.crosses_domain(MeshGroup::tp));
  EXPECT_FALSE(m.crosses_domain(MeshGroup::cp));
  EXPECT_FALSE(m.crosses_domain(MeshGroup::ep));
  EXPECT_FALSE(m.crosses_domain(MeshGroup::etp));
  EXPECT_TRUE(m.crosses_domain(MeshGroup::dp));
  EXPECT_TRUE(m.crosses_domain(MeshGroup::dp_cp));
  EXPECT_TRUE(m.crosses_domain(MeshGroup::edp));
  EXPECT_TRUE(m.crosses_domain(MeshGroup::pp));
  EXPECT_EQ(m.ep_per_domain(), 4);  // the whole ep group in one node
}

TEST(ParallelMesh, ATpLargerThanTheNodeCrossesIt) {
  const ParallelMesh m(sizes(16, 1, 1, 1, 1), 16, 8);
  EXPECT_EQ(m.dp(), 1);
  EXPECT_TRUE(m.crosses_domain(MeshGroup::tp));
  // A scale-up domain of 16 (NVL-style) holds it.
  EXPECT_FALSE(ParallelMesh(sizes(16, 1, 1, 1, 1), 16, 16).crosses_domain(MeshGroup::tp));
}

// etp 2 ep 8 on 8-device nodes: the ep group spans 16 devices, two nodes of 4 ep ranks.
TEST(ParallelMesh, AnEpGroupOfTwoNodes) {
  const ParallelMesh m(sizes(2, 1, 8, 2, 1), 32, 8);
  EXPECT_EQ(m.dp(), 16);
  EXPECT_EQ(m.edp(), 2);  // 32 / (2 x 8)
  EXPECT_TRUE(m.crosses_domain(MeshGroup::ep));
  EXPECT_FALSE(m.crosses_domain(MeshGroup::etp));
  EXPECT_EQ(m.ep_per_domain(), 4);
  // etp larger than the domain: one ep rank a domain, at least.
  EXPECT_EQ(ParallelMesh(sizes(16, 1, 2, 16, 1), 32, 8).ep_per_domain(), 1);
}

// 32 devices, tp 2 pp 4: a pipeline rank holds 8 devices, its dp group 4 of them 2 apart
// (devices 8, 10, 12, 14 for rank 1).
TEST(ParallelMesh, TheDpGroupOfOnePipelineRank) {
  const MeshSizes s = sizes(2, 1, 1, 1, 4);
  EXPECT_FALSE(ParallelMesh(s, 32, 8).crosses_domain_at(MeshGroup::dp_cp, 1));
  // Nodes of 4: devices 8..11 and 12..15.
  EXPECT_TRUE(ParallelMesh(s, 32, 4).crosses_domain_at(MeshGroup::dp_cp, 1));
  EXPECT_FALSE(ParallelMesh(s, 32, 4).crosses_domain_at(MeshGroup::tp, 1));
}

// Members of a group in one domain, for the hierarchical collectives: the dp group of
// tp-strided ranks fits domain / tp of them in a domain.
TEST(ParallelMesh, MembersPerDomain) {
  // tp 2, pp 4 on 32 devices: dp 4, 2 apart. Nodes of 8: all 4 in one; nodes of 4: 2 a node.
  const MeshSizes s = sizes(2, 1, 1, 1, 4);
  EXPECT_EQ(ParallelMesh(s, 32, 8).members_per_domain(MeshGroup::dp_cp), 4);
  EXPECT_EQ(ParallelMesh(s, 32, 4).members_per_domain(MeshGroup::dp_cp), 2);
  EXPECT_EQ(ParallelMesh(s, 32, 4).members_per_domain_at(MeshGroup::dp_cp, 1), 2);
  EXPECT_EQ(ParallelMesh(s, 32, 8).members_per_domain_at(MeshGroup::dp_cp, 1), 4);
  // tp 8, pp 1 on 64 devices of 8-GPU nodes: dp 8, one a node; tp 1: dp 64, 8 a node.
  EXPECT_EQ(ParallelMesh(sizes(8, 1, 1, 1, 1), 64, 8).members_per_domain(MeshGroup::dp_cp), 1);
  EXPECT_EQ(ParallelMesh(sizes(1, 1, 1, 1, 1), 64, 8).members_per_domain(MeshGroup::dp_cp), 8);
  // Experts: etp 1, ep 8 on 16 devices (tp 1, dp 16): edp 2, 8 apart, one a node of 8.
  const ParallelMesh moe(sizes(1, 1, 8, 1, 1), 16, 8);
  EXPECT_EQ(moe.edp(), 2);
  EXPECT_EQ(moe.members_per_domain(MeshGroup::edp), 1);
  EXPECT_EQ(moe.members_per_domain(MeshGroup::tp), 1);
}

TEST(ParallelMesh, AGivenDpIsKept) {
  const ParallelMesh m(sizes(2, 2, 1, 1, 2, 4), 32, 8);
  EXPECT_EQ(m.dp(), 4);
  EXPECT_EQ(m.devices(), 32);
  EXPECT_EQ(ParallelMesh::data_parallel(sizes(2, 2, 1, 1, 2), 32), 4);
  EXPECT_EQ(ParallelMesh::data_parallel(sizes(2, 2, 1, 1, 2, 3), 32), 3);
}

// Each rule on the devices, in check_config's order, with its key and both wordings.
TEST(ParallelMesh, RefusesEachRuleOnTheDevices) {
  auto v = ParallelMesh::device_violation(sizes(1, 1, 1, 1, 5), 12);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->rule, MeshRule::pp_divides_devices);
  EXPECT_STREQ(v->key, "training.pp");
  EXPECT_EQ(v->message(), "pp = 5 does not divide the 12 devices of the cluster");

  v = ParallelMesh::device_violation(sizes(3, 1, 1, 1, 2), 16);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->rule, MeshRule::tp_divides_devices);
  EXPECT_STREQ(v->key, "training.tp");
  EXPECT_EQ(v->message(), "pp * tp = 6 does not divide the 16 devices");
  EXPECT_EQ(v->layout_message(), "tp x pp = 6 does not divide the 16 devices");
  // The search tries tp alone first.
  EXPECT_EQ(ParallelMesh::device_violation(sizes(3, 1, 1, 1, 1), 16)->layout_message(),
            "tp 3 does not divide the 16 devices");

  v = ParallelMesh::device_violation(sizes(2, 8, 1, 1, 2), 16);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->rule, MeshRule::cp_divides_devices);
  EXPECT_STREQ(v->key, "training.cp");
  EXPECT_EQ(v->message(), "tp * pp * cp = 2 * 2 * 8 = 32 does not divide the 16 devices");
  EXPECT_EQ(v->layout_message(), "tp x pp x cp = 32 does not divide the 16 devices");

  v = ParallelMesh::device_violation(sizes(2, 1, 1, 1, 2, 2), 16);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->rule, MeshRule::dp_fills_devices);
  EXPECT_STREQ(v->key, "training.dp");
  EXPECT_EQ(v->message(),
            "pp * tp * dp = 8 but the cluster has 16 devices: use dp 4 (--dp 4), or pp 4 (--pp 4)");
  v = ParallelMesh::device_violation(sizes(2, 2, 1, 1, 1, 2), 16);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->message(),
            "pp * tp * cp * dp = 8 but the cluster has 16 devices: use dp 4 "
            "(--dp 4), or pp 2 (--pp 2)");
  // No pp fits a dp of 3 on 16 devices: only the dp is offered.
  EXPECT_EQ(ParallelMesh::device_violation(sizes(2, 1, 1, 1, 1, 3), 16)->message(),
            "pp * tp * dp = 6 but the cluster has 16 devices: use dp 8 (--dp 8)");

  // The first rule broken is the one said: pp before tp.
  EXPECT_EQ(ParallelMesh::device_violation(sizes(3, 1, 1, 1, 5), 16)->rule,
            MeshRule::pp_divides_devices);
  EXPECT_FALSE(ParallelMesh::device_violation(sizes(2, 2, 1, 1, 2, 4), 32));
  // cp 1 never breaks the cp rule.
  EXPECT_FALSE(ParallelMesh::device_violation(sizes(4, 1, 1, 1, 2), 8));
}

TEST(ParallelMesh, RefusesATpTheModelCannotSplit) {
  auto v = ParallelMesh::model_violation(sizes(3, 1, 1, 1, 1), 32, 96);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->rule, MeshRule::tp_divides_heads);
  EXPECT_STREQ(v->key, "training.tp");
  EXPECT_EQ(v->message(), "tp = 3 does not divide the 32 attention heads");
  EXPECT_EQ(v->layout_message(), "tp 3 does not divide the 32 attention heads");
  v = ParallelMesh::model_violation(sizes(8, 1, 1, 1, 1), 32, 100);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->rule, MeshRule::tp_divides_ffn);
  EXPECT_EQ(v->message(), "tp = 8 does not divide ffn_hidden_size = 100");
  EXPECT_EQ(v->layout_message(), "tp 8 does not divide ffn_hidden_size 100");
  EXPECT_FALSE(ParallelMesh::model_violation(sizes(4, 1, 1, 1, 1), 32, 100));
}

TEST(ParallelMesh, RefusesAnExpertFoldThatDoesNotFitTheStage) {
  // 16 devices, tp 2, dp 8: a stage of 16 devices; etp 2 x ep 16 = 32 do not fit.
  auto v = ParallelMesh(sizes(2, 1, 16, 2, 1), 16, 8).expert_violation();
  ASSERT_TRUE(v);
  EXPECT_EQ(v->rule, MeshRule::expert_fold_fits_stage);
  EXPECT_STREQ(v->key, "training.ep");
  EXPECT_EQ(v->message(),
            "etp x ep = 32 is more than the tp x dp = 16 devices of a pipeline stage: the MoE "
            "layers' experts are spread over the stage's own devices (use a smaller ep or etp, "
            "or more dp)");
  // cp counts in the stage: tp 2 cp 2 dp 4 is 16 devices, and 3 does not divide them.
  v = ParallelMesh(sizes(2, 2, 3, 1, 1), 16, 8).expert_violation();
  ASSERT_TRUE(v);
  EXPECT_EQ(v->rule, MeshRule::expert_fold_divides_stage);
  EXPECT_EQ(v->message(),
            "etp x ep = 3 does not divide the tp x dp = 16 devices of a pipeline "
            "stage, which the MoE layers share");
  EXPECT_FALSE(ParallelMesh(sizes(2, 2, 8, 2, 1), 16, 8).expert_violation());
}

TEST(ParallelMesh, ContextParallelRulesOnTheSequenceAndHeads) {
  EXPECT_FALSE(cp_split_problem(4096, 1));
  EXPECT_FALSE(cp_split_problem(4096, 4));
  EXPECT_EQ(cp_split_problem(4096, 3).value_or(""),
            "2 cp = 6 does not divide seq_length 4096: the load-balanced causal split cuts "
            "each sequence into 2 cp equal chunks");
  EXPECT_FALSE(ulysses_heads_problem(32, 4, 8));
  EXPECT_EQ(ulysses_heads_problem(32, 4, 3).value_or(""),
            "a2a (Ulysses) splits each tp rank's 8 attention heads over cp = 3, which does not "
            "divide them");
}

// The config's mesh is the one the cost settings, ZeRO-3's sharding and the pipeline ranks'
// devices are read from: Mixtral 8x7B on 64 H100 (8 nodes of 8), tp 2 cp 2 ep 4 pp 2.
TEST(ParallelMesh, TheConfigsMeshIsTheOneTheCostsRead) {
  const Config c = parse_config(
      "cluster:\n  nodes: 8\n  devices_per_node: 8\n  device: {preset: h100-sxm}\n"
      "model:\n  hf_config: \"" +
          std::string(BMPIPE_SOURCE_DIR) +
          "/configs/presets/hf/mixtral-8x7b.json\"\n"
          "training:\n  pp: 2\n  tp: 2\n  cp: 2\n  ep: 4\n  sequence_parallel: true\n"
          "  seq_length: 4096\n  microbatches: 4\n  optimizer: {zero_stage: 3}\n",
      "mixtral.yaml");
  const ParallelMesh m = c.mesh();
  EXPECT_EQ(m.dp(), 8);
  EXPECT_EQ(m.edp(), 8);
  const auto e = prepare(c);
  const AnalyticCosts& a = *e->analytic;
  EXPECT_EQ(a.dp, 8);
  EXPECT_EQ(a.edp, 8);
  EXPECT_FALSE(a.settings.tp_crosses_nodes);
  EXPECT_FALSE(a.settings.cp_crosses_nodes);  // tp x cp = 4 devices
  EXPECT_FALSE(a.settings.ep_crosses_nodes);  // etp x ep = 4 devices
  EXPECT_EQ(a.settings.ep_per_domain, 4);
  // ZeRO-3 shards over dp x cp = 16 ranks spread over tp x cp x dp = 32 devices: 4 nodes.
  EXPECT_EQ(a.settings.param_shard_dp, 16);
  EXPECT_EQ(a.settings.param_shard_edp, 8);
  EXPECT_TRUE(a.settings.dp_crosses_nodes);
  // ... 4 of them a node (tp 2 apart), edp's 8 members etp x ep = 4 apart: 2 a node.
  EXPECT_EQ(a.settings.param_shard_dp_per_domain, 4);
  EXPECT_EQ(a.settings.param_shard_edp_per_domain, 2);
  EXPECT_EQ(e->rank_device, (std::vector<int>{0, 32}));
}

}  // namespace parallel_mesh_test
}  // namespace bmpipe
