// training.cp and training.cp_comm_type (issue 19, item 2) in the experiment: dp is what is
// left of the devices after pp x tp x cp, the cp group's link follows Megatron's placement
// after tp, the dense gradients reduce over dp x cp, the job's model FLOPs and tokens do
// not depend on cp, and every bad value exits with its file, line and key.
#include <gtest/gtest.h>

#include "experiment/config_cases.hpp"
#include "experiment/experiment.hpp"
#include "support/run_config.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace {

using test::config_error;
using test::has;

// Llama 3 8B on `nodes` HGX H100 nodes of 8. Lines: training.tp on 8, cp on 9, the
// extra training keys from 13 on.
std::string cp_config(int nodes, int tp, int pp, int cp, int gbs = 32,
                      const std::string& extra = "") {
  return "cluster:\n  nodes: " + std::to_string(nodes) +
         "\n  device: {preset: h100-sxm}\n"
         "model: {preset: llama3-8b}\n"
         "training:\n"
         "  schedule: 1f1b\n"
         "  pp: " +
         std::to_string(pp) + "\n  tp: " + std::to_string(tp) + "\n  cp: " + std::to_string(cp) +
         "\n"
         "  seq_length: 8192\n"
         "  micro_batch_size: 1\n"
         "  global_batch_size: " +
         std::to_string(gbs) + "\n" + extra;
}

TEST(CpConfig, DpIsWhatIsLeftAfterPpTpCp) {
  // 16 devices, tp 2, pp 2, cp 2: dp 2, and 32 samples make 16 micro-batches.
  const Config c = parse_config(cp_config(2, 2, 2, 2), "a.yaml");
  EXPECT_EQ(c.training.data_parallel(16), 2);
  EXPECT_EQ(c.training.microbatches, 16);
  const auto e = prepare(c);
  EXPECT_EQ(e->analytic->dp, 2);
  EXPECT_EQ(e->analytic->cp, 2);
  EXPECT_EQ(e->analytic->dense_group(), 4);
  EXPECT_EQ(e->analytic->settings.cp, 2);
  // Pipeline rank 1 starts after the tp x cp x dp = 8 devices of rank 0.
  EXPECT_EQ(e->rank_device, (std::vector<int>{0, 8}));
  const test::Prepared run = test::prepare_run(c);
  EXPECT_EQ(run.info.dp, 2);
  EXPECT_EQ(run.info.devices, 16);
  // 16 micro-batches x 1 sample x dp 2 x 8192 tokens: every sample once, not per cp rank.
  EXPECT_DOUBLE_EQ(run.info.tokens_per_iteration, 16.0 * 2 * 8192);
}

TEST(CpConfig, TheJobsModelFlopsAndTokensDoNotDependOnCp) {
  // The same 32 samples on the same 16 devices: cp 1 (dp 4) or cp 2 (dp 2).
  const test::Prepared one = test::prepare_run(parse_config(cp_config(2, 2, 2, 1), "a.yaml"));
  const test::Prepared two = test::prepare_run(parse_config(cp_config(2, 2, 2, 2), "b.yaml"));
  EXPECT_DOUBLE_EQ(one.info.tokens_per_iteration, two.info.tokens_per_iteration);
  EXPECT_NEAR(two.info.model_flops_per_iteration, one.info.model_flops_per_iteration,
              1e-12 * one.info.model_flops_per_iteration);
  EXPECT_EQ(one.info.devices, two.info.devices);
}

TEST(CpConfig, TheDenseGradientsReduceOverDpTimesCp) {
  // dp 2 x cp 2 on 16 devices is the same 4-device group, same stride (tp 2), as dp 4 at
  // cp 1: the same all-reduce of the same parameters.
  const auto one = prepare(parse_config(cp_config(2, 2, 2, 1), "a.yaml"));
  const auto two = prepare(parse_config(cp_config(2, 2, 2, 2), "b.yaml"));
  const std::int64_t params = 1'000'000'000;
  const Time t1 = stage_grad_reduce_time(*one, 0, params, 0);
  EXPECT_GT(t1, 0);
  EXPECT_EQ(stage_grad_reduce_time(*two, 0, params, 0), t1);
  // By hand: 4 devices inside one node (rank 0's group is devices 0, 2, 4, 6): NVLink SHARP
  // (sim/cost/collectives.hpp) at 450 GB/s x 0.61, 6 x 5 us, faster than the ring's
  // 2 x 3/4 x 4e9 bytes / 337.5e9 + 6 x 5 us that this pinned before NVLS was modelled.
  const double expect = 4e9 / (450e9 * 0.61) + 6 * 5e-6;
  EXPECT_EQ(t1, s_to_ns(expect));
  // ... where dp 2 alone would be a group of 2 (the ring: NVLS is slower on two).
  const double dp_only = 2.0 * 1 / 2 * 4e9 / 337.5e9 + 2 * 5e-6;
  EXPECT_NE(stage_grad_reduce_time(*two, 0, params, 0), s_to_ns(dp_only));
}

TEST(CpConfig, TheCpGroupIsPlacedAfterTp) {
  // tp 4 x cp 2 = 8 consecutive devices: inside an HGX node.
  EXPECT_FALSE(
      prepare(parse_config(cp_config(2, 4, 2, 2), "a.yaml"))->analytic->settings.cp_crosses_nodes);
  // tp 8 x cp 2 = 16: leaves it, the ring runs on the NICs.
  EXPECT_TRUE(
      prepare(parse_config(cp_config(2, 8, 1, 2), "b.yaml"))->analytic->settings.cp_crosses_nodes);
}

TEST(CpConfig, UlyssesIsRead) {
  const Config c = parse_config(cp_config(2, 2, 2, 2, 32, "  cp_comm_type: a2a\n"), "a.yaml");
  EXPECT_EQ(c.training.cp_comm(), CpComm::a2a);
  EXPECT_EQ(prepare(c)->analytic->settings.cp_comm, CpComm::a2a);
  EXPECT_EQ(parse_config(cp_config(2, 2, 2, 2), "b.yaml").training.cp_comm(), CpComm::p2p);
}

TEST(CpConfig, BadValuesNameFileLineAndKey) {
  {
    const ConfigError e = config_error(cp_config(2, 2, 2, 0));
    EXPECT_EQ(e.key(), "training.cp");
    EXPECT_EQ(e.line(), 9);
    EXPECT_EQ(e.file(), "exp.yaml");
  }
  {  // 2 cp = 6 chunks do not divide 8192 tokens.
    const ConfigError e = config_error(cp_config(3, 2, 2, 3, 24));
    EXPECT_EQ(e.key(), "training.cp");
    EXPECT_EQ(e.line(), 9);
    EXPECT_TRUE(has(e.message(), "2 cp = 6 does not divide seq_length 8192")) << e.message();
  }
  {  // tp 2 x pp 2 x cp 8 = 32 on 16 devices.
    const ConfigError e = config_error(cp_config(2, 2, 2, 8));
    EXPECT_EQ(e.key(), "training.cp");
    EXPECT_EQ(e.line(), 9);
    EXPECT_TRUE(has(e.message(), "tp * pp * cp = 2 * 2 * 8 = 32 does not divide the 16 devices"))
        << e.message();
  }
  {
    const ConfigError e = config_error(cp_config(2, 2, 2, 2, 32, "  cp_comm_type: ring\n"));
    EXPECT_EQ(e.key(), "training.cp_comm_type");
    EXPECT_EQ(e.line(), 13);
    EXPECT_TRUE(has(e.message(), "p2p")) << e.message();
  }
  {  // Ulysses splits the 32 / tp 8 = 4 heads of a tp rank over cp: 8 does not divide 4.
    const std::string text = cp_config(8, 8, 1, 8, 32, "  cp_comm_type: a2a\n");
    const ConfigError e = config_error(text);
    EXPECT_EQ(e.key(), "training.cp_comm_type");
    EXPECT_EQ(e.line(), 13);
  }
  {  // dp given against the devices left after cp.
    const ConfigError e = config_error(cp_config(2, 2, 2, 2, 32, "  dp: 4\n"));
    EXPECT_EQ(e.key(), "training.dp");
    EXPECT_TRUE(has(e.message(), "pp * tp * cp * dp = 32")) << e.message();
  }
  // The batch divides over dp = devices / (pp tp cp): 2 samples per step at dp 2.
  EXPECT_NO_THROW(parse_config(cp_config(2, 2, 2, 2, 2), "ok.yaml"));
  EXPECT_EQ(parse_config(cp_config(2, 2, 2, 2, 2), "ok.yaml").training.microbatches, 1);
}

// training.cp_hierarchy (hierarchical cp, cp_comm_type a2a+p2p): read, inner level first,
// and its levels placed as Megatron-LM's create_hierarchical_groups lays them (the a2a
// level: consecutive cp ranks, tp apart).
std::string hcp(const std::string& sizes) {
  return "  cp_comm_type: a2a+p2p\n  cp_hierarchy: " + sizes + "\n";
}

TEST(CpConfig, HierarchyIsReadAndPlaced) {
  // tp 2 x cp 8 on 8-GPU nodes, [4, 2]: a group of 4 a2a ranks spans 2 x 4 = 8 devices,
  // one node; the ring across the 2 groups spans 16, two nodes.
  const Config c = parse_config(cp_config(2, 2, 1, 8, 32, hcp("[4, 2]")), "a.yaml");
  EXPECT_EQ(c.training.cp_comm(), CpComm::a2a_p2p);
  EXPECT_EQ(c.training.cp_hierarchy, (std::vector<int>{4, 2}));
  const CostSettings st = prepare(c)->analytic->settings;
  EXPECT_EQ(st.cp_comm, CpComm::a2a_p2p);
  EXPECT_EQ(st.cp_a2a, 4);
  EXPECT_FALSE(st.cp_a2a_crosses_nodes);
  EXPECT_TRUE(st.cp_crosses_nodes);
  // [8, 1]: the a2a level is the whole group, 16 devices: across nodes.
  EXPECT_TRUE(prepare(parse_config(cp_config(2, 2, 1, 8, 32, hcp("[8, 1]")), "b.yaml"))
                  ->analytic->settings.cp_a2a_crosses_nodes);
  // tp 1 x cp 4 [2, 2] on one node: both levels inside it.
  const CostSettings one =
      prepare(parse_config(cp_config(1, 1, 1, 4, 32, hcp("[2, 2]")), "c.yaml"))->analytic->settings;
  EXPECT_FALSE(one.cp_a2a_crosses_nodes);
  EXPECT_FALSE(one.cp_crosses_nodes);
}

// [cp, 1] and [1, cp] run as a2a and p2p: the same iteration, to the nanosecond, on a job
// whose cp group leaves the node (tp 4 x cp 4 = 16 devices).
TEST(CpConfig, OneRankLevelsRunAsThePlainExchanges) {
  const auto time = [](const std::string& extra) {
    const test::Prepared p =
        test::prepare_run(parse_config(cp_config(2, 4, 1, 4, 32, extra), "a.yaml"));
    return simulate(p.input, p.schedule).iteration_time;
  };
  const Time a2a = time("  cp_comm_type: a2a\n"), p2p = time("  cp_comm_type: p2p\n");
  EXPECT_NE(a2a, p2p);
  EXPECT_EQ(time(hcp("[4, 1]")), a2a);
  EXPECT_EQ(time(hcp("[1, 4]")), p2p);
  const Time both = time(hcp("[2, 2]"));
  EXPECT_NE(both, a2a);
  EXPECT_NE(both, p2p);
}

// Megatron-LM's and TransformerEngine's own checks, with their messages, each on its key's
// line (training.cp on 9, cp_comm_type on 13, cp_hierarchy on 14).
TEST(CpConfig, BadHierarchiesNameFileLineAndKey) {
  struct Case {
    std::string extra;
    std::string key;
    int line;
    std::string says;
  };
  const Case cases[] = {
      {"  cp_comm_type: a2a+p2p\n", "training.cp_comm_type", 13,
       "--hierarchical-context-parallel-sizes must be set when a2a+p2p is used in cp comm"},
      {"  cp_comm_type: p2p\n  cp_hierarchy: [2, 2]\n", "training.cp_hierarchy", 14,
       "is read with cp_comm_type a2a+p2p only"},
      {hcp("[2, 1, 2]"), "training.cp_hierarchy", 14,
       "CP implementation a2a+p2p requires cp_group = [a2a_cp_group, p2p_cp_group]!"},
      {hcp("[4]"), "training.cp_hierarchy", 14, "[4] has 1 levels"},
      {hcp("[2, 4]"), "training.cp_hierarchy", 14,
       "[2, 4] multiplies to 8, not training.cp = 4 (Megatron-LM asserts "
       "context_parallel_size == prod(hierarchical_context_parallel_sizes)"},
      {hcp("2"), "training.cp_hierarchy", 14, "expected a list of sizes"},
      {hcp("[0, 4]"), "training.cp_hierarchy[0]", 14, ""},
  };
  for (const Case& k : cases) {
    const ConfigError e = config_error(cp_config(1, 2, 1, 4, 32, k.extra));
    EXPECT_EQ(e.key(), k.key) << k.extra;
    EXPECT_EQ(e.line(), k.line) << k.extra;
    EXPECT_TRUE(has(e.message(), k.says)) << e.message();
  }
  {  // The a2a level splits a tp rank's 32 / 8 = 4 heads: 8 does not divide them.
    const ConfigError e = config_error(cp_config(8, 8, 1, 8, 32, hcp("[8, 1]")));
    EXPECT_EQ(e.key(), "training.cp_hierarchy");
    EXPECT_TRUE(has(e.message(),
                    "a2a (Ulysses) splits each tp rank's 4 attention heads over "
                    "cp = 8"))
        << e.message();
  }
  {  // A sliding window under a ring level of 2 (TE runs windows with a2a alone); [4, 1],
     // all a2a, takes it.
    std::string text = cp_config(1, 2, 1, 4, 32, hcp("[2, 2]"));
    const std::string plain = "model: {preset: llama3-8b}";
    const std::string windowed = "model: {preset: llama3-8b, sliding_window: 1024}";
    text.replace(text.find(plain), plain.size(), windowed);
    const ConfigError e = config_error(text);
    EXPECT_EQ(e.key(), "training.cp_hierarchy");
    EXPECT_EQ(e.line(), 14);
    EXPECT_TRUE(has(e.message(),
                    "Context parallelism does not support sliding window attention "
                    "with cp_comm_type='a2a+p2p'!"))
        << e.message();
    std::string all_a2a = cp_config(1, 2, 1, 4, 32, hcp("[4, 1]"));
    all_a2a.replace(all_a2a.find(plain), plain.size(), windowed);
    EXPECT_NO_THROW(parse_config(all_a2a, "w.yaml"));
  }
  {  // A hierarchy at cp 1 (bmpipe's rule: no group to split, a setting that changes
     // nothing); [1, 1] meets Megatron-LM's product assertion, so bmpipe's own check says it.
    const ConfigError e = config_error(cp_config(1, 2, 1, 1, 32, hcp("[1, 1]")));
    EXPECT_EQ(e.key(), "training.cp_hierarchy");
    EXPECT_EQ(e.line(), 14);
    EXPECT_TRUE(has(e.message(), "[1, 1] at training.cp 1: there is no context-parallel group"))
        << e.message();
    // [2, 2] at cp 1 breaks Megatron-LM's product assertion first.
    EXPECT_TRUE(has(config_error(cp_config(1, 2, 1, 1, 32, hcp("[2, 2]"))).message(),
                    "[2, 2] multiplies to 4, not training.cp = 1"));
  }
  {  // Levels of INT_MAX ranks: the product is held, not overflowed, and refused.
    const ConfigError e =
        config_error(cp_config(1, 2, 1, 4, 32, hcp("[2147483647, 2147483647, 2147483647]")));
    EXPECT_EQ(e.key(), "training.cp_hierarchy");
    EXPECT_TRUE(has(e.message(), "multiplies to more than 1099511627776, not training.cp = 4"))
        << e.message();
  }
  // The CLI exits 2 with FILE:LINE: key.
  const test::ScratchDir dir;
  const std::string path =
      test::write_file(dir.file("hcp.yaml"), cp_config(1, 2, 1, 4, 32, hcp("[2, 4]")));
  const test::CliRun r = test::run_cli("cost " + path);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(path + ":14: training.cp_hierarchy: [2, 4] multiplies to 8"),
            std::string::npos)
      << r.err;
  // The search keeps a hierarchy's own cp: another --cp is bad input.
  const std::string ok =
      test::write_file(dir.file("ok.yaml"), cp_config(1, 2, 1, 4, 32, hcp("[2, 2]")));
  const test::CliRun s = test::run_cli("search " + ok + " --cp 2");
  EXPECT_EQ(s.code, 2);
  EXPECT_NE(s.err.find("--cp: cp 2: a hierarchical cp (cp_comm_type a2a+p2p) is searched at "
                       "its training.cp_hierarchy's cp 4 only"),
            std::string::npos)
      << s.err;
}

}  // namespace
}  // namespace bmpipe
