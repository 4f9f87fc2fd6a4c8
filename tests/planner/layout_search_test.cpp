// bmpipe search: the enumeration's rules on a hand-counted case, the filters' reasons, the
// anchors from Megatron-LM's GPT-3 run and Narayanan et al. 2021's findings, and the
// command line (--out reproduced by simulate, bad input, MPI against one process).
#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "planner/layout_search.hpp"
#include "schedules/registry.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace {

using test::run_cli;

// 8 devices on one node, Llama-2-7B (32 heads, FFN 11008, 32 layers), global batch 16.
Config small() {
  return parse_config(
      "cluster: {nodes: 1, devices_per_node: 8, device: {preset: a100-80g}}\n"
      "model: {preset: llama2-7b}\n"
      "training: {schedule: 1f1b, pp: 2, seq_length: 1024, micro_batch_size: 1,\n"
      "           global_batch_size: 16, recompute: full}\n",
      "small.yaml");
}

using Key = std::tuple<int, int, int, int, int, std::string>;  // tp pp dp vpp mbs schedule

TEST(LayoutSearch, EnumerationOfAHandCountedCase) {
  LayoutSpace space;
  space.tp = {1, 2};
  space.pp = {2, 4};
  space.micro_batch_size = {1, 2};
  space.vpp = {2};
  space.schedules = {"1f1b", "interleaved"};
  std::vector<LayoutResult> rejected;
  const std::vector<Layout> layouts = enumerate_layouts(small(), space, &rejected);
  // tp x pp in {1,2} x {2,4}: dp = 8 / (tp pp) = 4, 2, 2, 1; mbs x dp divides 16 in every
  // case; m = 16 / (mbs dp) is at most pp or a multiple of it everywhere; pp x vpp <= 32.
  // So every combination: 2 tp x 2 pp x 2 mbs x 2 schedules = 16.
  std::set<Key> got;
  for (const Layout& l : layouts)
    got.insert({l.tp, l.pp, l.dp, l.vpp, l.micro_batch_size, l.schedule});
  std::set<Key> want;
  for (int tp : {1, 2})
    for (int pp : {2, 4})
      for (int mbs : {1, 2}) {
        want.insert({tp, pp, 8 / (tp * pp), 1, mbs, "1f1b"});
        want.insert({tp, pp, 8 / (tp * pp), 2, mbs, "interleaved"});
      }
  EXPECT_EQ(got, want);
  EXPECT_EQ(layouts.size(), 16u);
  EXPECT_TRUE(rejected.empty());
}

TEST(LayoutSearch, DivisibilityRulesRejectWithAReason) {
  LayoutSpace space;
  space.tp = {1};
  space.pp = {2, 8};
  space.micro_batch_size = {1, 3};
  space.vpp = {3};
  space.schedules = {"interleaved", "dualpipe-v"};
  std::vector<LayoutResult> rejected;
  const std::vector<Layout> layouts = enumerate_layouts(small(), space, &rejected);
  // mbs 3 never divides 16; interleaved needs pp x vpp to divide nothing here but m rules:
  // pp 2, dp 4, mbs 1: m = 4 (a multiple of 2) fits; pp 8, dp 1: m = 16 fits; dualpipe-v
  // needs m >= 2p: pp 8 has m = 16 >= 16, pp 2 has m = 4 >= 4.
  for (const Layout& l : layouts) {
    EXPECT_EQ(l.micro_batch_size, 1);
    EXPECT_EQ(l.tp * l.pp * l.dp, 8);
  }
  ASSERT_FALSE(rejected.empty());
  bool mbs_reason = false;
  for (const LayoutResult& r : rejected) {
    EXPECT_FALSE(r.rejected.empty());
    EXPECT_EQ(r.filter, "divisibility");
    mbs_reason =
        mbs_reason || r.rejected.find("does not divide the global batch") != std::string::npos;
  }
  EXPECT_TRUE(mbs_reason);
}

// Issue 21: `search` dropped vpp 3 for 80 layers at pp 8 (it asked that pp x vpp divide the
// layers) while `plan --schedule auto` planned it (it asks only that every stage gets a
// layer). One rule now: 32 layers at pp 8 take vpp 2, 3 and 4 (16, 24, 32 stages), though
// 24 stages do not divide 32 layers, exactly the vpps plan --schedule auto tries.
TEST(LayoutSearch, VppsAreTheOnesPlanAutoTries) {
  LayoutSpace space;
  space.tp = {1};
  space.pp = {8};
  space.micro_batch_size = {1};
  space.schedules = {"interleaved"};
  const std::vector<Layout> layouts = enumerate_layouts(small(), space, nullptr);
  std::vector<int> vpps;
  for (const Layout& l : layouts) vpps.push_back(l.vpp);
  EXPECT_EQ(vpps, (std::vector<int>{2, 3, 4}));
  std::vector<int> planned;
  for (const auto& [name, v] : auto_candidates(8, 16, 32))
    if (name == "interleaved") planned.push_back(v);
  EXPECT_EQ(planned, vpps);
}

TEST(LayoutSearch, BadRequestsAreConfigErrors) {
  LayoutSpace tp3;
  tp3.tp = {3};
  EXPECT_THROW(enumerate_layouts(small(), tp3, nullptr), ConfigError);  // divides nothing
  LayoutSpace mbs;
  mbs.micro_batch_size = {3, 5};
  EXPECT_THROW(enumerate_layouts(small(), mbs, nullptr), ConfigError);  // no batch divides
  LayoutSpace bad;
  bad.pp = {0};
  EXPECT_THROW(enumerate_layouts(small(), bad, nullptr), ConfigError);
}

// Issue 19: cp as a dimension. small(): 8 devices, seq 1024, global batch 16. tp 2 x pp 2
// leaves 8 / 4 = 2 devices per pipeline rank: cp 1 gives dp 2, cp 2 gives dp 1, cp 4 does
// not divide 2 (tp x pp x cp = 16 of 8 devices). m = 16 / (mbs dp) = 8 and 16.
TEST(LayoutSearch, ContextParallelTakesItsRanksOutOfDp) {
  LayoutSpace space;
  space.tp = {2};
  space.pp = {2};
  space.cp = {1, 2, 4};
  space.micro_batch_size = {1};
  space.schedules = {"1f1b"};
  std::vector<LayoutResult> rejected;
  const std::vector<Layout> layouts = enumerate_layouts(small(), space, &rejected);
  ASSERT_EQ(layouts.size(), 2u);
  EXPECT_EQ(layouts[0].cp, 1);
  EXPECT_EQ(layouts[0].dp, 2);
  EXPECT_EQ(layouts[1].cp, 2);
  EXPECT_EQ(layouts[1].dp, 1);
  ASSERT_EQ(rejected.size(), 1u);
  EXPECT_EQ(rejected[0].layout.cp, 4);
  EXPECT_EQ(rejected[0].filter, "divisibility");
  EXPECT_NE(rejected[0].rejected.find("tp x pp x cp = 16 does not divide the 8 devices"),
            std::string::npos)
      << rejected[0].rejected;
  const Config c = layout_config(small(), layouts[1]);
  EXPECT_EQ(c.training.cp, 2);
  EXPECT_EQ(c.training.data_parallel(8), 1);
  EXPECT_EQ(c.training.microbatches, 16);
  EXPECT_EQ(to_string(layouts[1]), "tp 2 pp 2 dp 1 vpp 1 mbs 1 1f1b cp 2");
}

// A config with TransformerEngine's tp overlap: its tp-1 layouts are the job without it
// (Megatron-LM and check_config refuse --tp-comm-overlap at tp 1), not refused; its tp-2
// layouts keep it.
TEST(LayoutSearch, TpOverlapIsDroppedAtTp1NotTheLayout) {
  const Config base = parse_config(
      "cluster: {nodes: 1, devices_per_node: 8, device: {preset: a100-80g}}\n"
      "model: {preset: llama2-7b}\n"
      "training: {schedule: 1f1b, tp: 2, pp: 2, seq_length: 1024, micro_batch_size: 1,\n"
      "           global_batch_size: 16, sequence_parallel: true, tp_comm_overlap: true}\n",
      "overlap.yaml");
  LayoutSpace space;
  space.tp = {1, 2};
  space.pp = {2};
  space.micro_batch_size = {1};
  space.schedules = {"1f1b"};
  const std::vector<Layout> layouts = enumerate_layouts(base, space, nullptr);
  ASSERT_EQ(layouts.size(), 2u);
  for (const Layout& l : layouts) {
    const Config c = layout_config(base, l);
    EXPECT_EQ(c.training.tp_comm_overlap, l.tp > 1) << to_string(l);
  }
}

TEST(LayoutSearch, BadCpValuesAreConfigErrors) {
  for (int cp : {0, 3}) {  // 0 is no size; 1024 tokens do not cut into 2 x 3 = 6 chunks
    LayoutSpace space;
    space.cp = {cp};
    try {
      enumerate_layouts(small(), space, nullptr);
      ADD_FAILURE() << "cp " << cp << " accepted";
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.key(), "--cp");
    }
  }
}

// The bound reads cp through the prepared Experiment (its costs are cp's), so it stays
// below what the planner finds for a cp 2 layout.
TEST(LayoutSearch, BoundHoldsForContextParallelLayouts) {
  LayoutSpace space;
  space.tp = {2};
  space.pp = {2, 4};
  space.cp = {2};
  space.micro_batch_size = {1};
  space.schedules = {"1f1b", "interleaved"};
  const Config base = small();
  const std::vector<Layout> layouts = enumerate_layouts(base, space, nullptr);
  ASSERT_FALSE(layouts.empty());
  PlannerOptions o;
  o.threads = 1;
  o.seed = 1;
  for (const Layout& l : layouts) {
    ASSERT_EQ(l.cp, 2);
    const LayoutScreen screen = screen_layout(base, l, o);
    ASSERT_FALSE(screen.refused) << to_string(l) << ": " << screen.refused->rejected;
    const LayoutResult r = evaluate_layout(base, l, PlannerEffort::quick, o);
    ASSERT_TRUE(r.rejected.empty()) << to_string(l) << ": " << r.rejected;
    EXPECT_GT(screen.bound, 0) << to_string(l);
    EXPECT_LE(screen.bound, r.iteration_time) << to_string(l);
  }
}

// Issue 38 ("the search stays fast"): bmpipe search's layouts share one Topology of the
// cluster and skip megatron-offload, the baseline plan_pipeline never keeps as the plan (its
// runs are of another experiment). Neither may change a plan: on a GB200 node (a host link,
// so megatron-offload does run when asked), every layout's result with both is the result
// without them, field by field, and the skipped baseline says it was not run.
TEST(LayoutSearch, SharedTopologyAndSkippedOffloadBaselineKeepEveryPlan) {
  const Config base = parse_config(
      "cluster: {nodes: 1, devices_per_node: 8, device: {preset: gb200}}\n"
      "model: {preset: llama2-7b}\n"
      "training: {schedule: 1f1b, pp: 2, seq_length: 4096, micro_batch_size: 1,\n"
      "           global_batch_size: 16}\n",
      "gb200.yaml");
  LayoutSpace space;
  space.tp = {1, 2};
  space.pp = {2, 4};
  space.micro_batch_size = {1};
  space.schedules = {"1f1b", "interleaved"};
  const std::vector<Layout> layouts = enumerate_layouts(base, space, nullptr);
  ASSERT_GE(layouts.size(), 4u);
  PlannerOptions every;
  every.threads = 1;
  every.memory_limit_bytes = std::int64_t{40} << 30;  // tight enough that recompute matters
  PlannerOptions kept = every;
  kept.report_baselines = false;
  const auto topology = std::make_shared<const Topology>(base.cluster);
  for (const Layout& l : layouts) {
    const LayoutResult a = evaluate_layout(base, l, PlannerEffort::quick, every, 64, 96);
    const LayoutResult b = evaluate_layout(base, l, PlannerEffort::quick, kept, 64, 96, topology);
    EXPECT_EQ(a.rejected, b.rejected) << to_string(l);
    EXPECT_EQ(a.iteration_time, b.iteration_time) << to_string(l);
    EXPECT_EQ(a.plan, b.plan) << to_string(l);
    EXPECT_EQ(a.max_peak_bytes, b.max_peak_bytes) << to_string(l);
    EXPECT_EQ(a.evaluations, b.evaluations) << to_string(l);
    const LayoutScreen sa = screen_layout(base, l, every);
    const LayoutScreen sb = screen_layout(base, l, kept, topology);
    EXPECT_EQ(sa.bound, sb.bound) << to_string(l);
  }
  // The baseline itself: run with report_baselines, "not run" without.
  const std::shared_ptr<const Experiment> e = prepare(layout_config(base, layouts.front()));
  PlannerOptions o = every;
  o.schedule = layouts.front().schedule;
  o.vpp = layouts.front().vpp;
  o.exhaustive_limit = 0;
  o.max_evals = 32;
  const auto offload_row = [](const PlanOutcome& out) {
    const BaselineRun* b = find_baseline(out, "megatron-offload");
    EXPECT_NE(b, nullptr);
    return b;
  };
  const PlanOutcome with = plan_pipeline(*e, o);
  o.report_baselines = false;
  const PlanOutcome without = plan_pipeline(*e, o);
  ASSERT_TRUE(offload_row(with) && offload_row(without));
  EXPECT_TRUE(offload_row(with)->run.has_value()) << offload_row(with)->error;
  EXPECT_FALSE(offload_row(without)->run.has_value());
  EXPECT_NE(offload_row(without)->error.find("not run"), std::string::npos);
  EXPECT_EQ(with.best.plan, without.best.plan);
  EXPECT_EQ(with.best.result.iteration_time, without.best.result.iteration_time);
}

LayoutResult off(const Config& c, const Layout& l, double limit_gib = 0) {
  PlannerOptions o;
  o.threads = 1;
  if (limit_gib > 0) o.memory_limit_bytes = static_cast<std::int64_t>(limit_gib * (1 << 30));
  return evaluate_layout(c, l, PlannerEffort::off, o);
}

Config narayanan(int gbs, const char* recompute) {
  // Llama-2-13B on 4 nodes of 4 A100, sequence 2048.
  return parse_config(
      "cluster: {nodes: 4, devices_per_node: 4, device: {preset: a100-80g}}\n"
      "model: {preset: llama2-13b}\n"
      "training: {schedule: 1f1b, pp: 2, tp: 4, seq_length: 2048, micro_batch_size: 1,\n"
      "           global_batch_size: " +
          std::to_string(gbs) + ", recompute: " + recompute + "}\n",
      "narayanan.yaml");
}

TEST(Narayanan2021, WithPpFixedTensorParallelismBeyondANodeHurts) {
  // Section 5.4.1: tp within a node, not across. With 4 devices per node, pp 2: tp 8
  // puts every tensor-parallel all-reduce on the NICs.
  const Config c = narayanan(64, "full");
  const LayoutResult in_node = off(c, Layout{4, 2, 2, 1, 1, "1f1b"});
  const LayoutResult across = off(c, Layout{8, 2, 1, 1, 1, "1f1b"});
  ASSERT_TRUE(in_node.fits && across.fits);
  EXPECT_GT(across.iteration_time, 2 * in_node.iteration_time);
}

TEST(Narayanan2021, InterleavingHelpsMostAtSmallBatches) {
  // Section 5.4.3 (figure 12): the interleaved schedule's gain shrinks as the batch grows.
  auto gain = [](int gbs) {
    const Config c = narayanan(gbs, "full");
    const LayoutResult plain = off(c, Layout{4, 4, 1, 1, 1, "1f1b"});
    const LayoutResult inter = off(c, Layout{4, 4, 1, 2, 1, "interleaved"});
    return static_cast<double>(plain.iteration_time) / static_cast<double>(inter.iteration_time);
  };
  const double small_batch = gain(16), large_batch = gain(128);
  EXPECT_GT(small_batch, 1.03);
  EXPECT_GT(small_batch, large_batch);
}

TEST(Narayanan2021, LargerMicroBatchesHelpUntilMemoryRunsOut) {
  // Section 5.7 (figure 15): throughput grows with the micro-batch size until it no longer
  // fits; no recompute, so activations grow with it.
  const Config c = narayanan(1024, "none");
  std::vector<LayoutResult> r;
  for (int mbs : {1, 2, 4, 8}) r.push_back(off(c, Layout{4, 2, 2, 1, mbs, "1f1b"}, 500));
  for (std::size_t i = 1; i < r.size(); ++i)
    EXPECT_GT(r[i].tokens_per_s, r[i - 1].tokens_per_s) << i;
  // With 60 GiB the two largest run out: the best that fits is mbs 2.
  EXPECT_TRUE(off(c, Layout{4, 2, 2, 1, 2, "1f1b"}, 60).fits);
  const LayoutResult big = off(c, Layout{4, 2, 2, 1, 4, "1f1b"}, 60);
  EXPECT_FALSE(big.fits);
  EXPECT_NE(big.rejected.find("needs"), std::string::npos) << big.rejected;
}

TEST(Megatron2021, Gpt3LayoutFitsAndCrossingNodesRanksBelow) {
  // Megatron-LM's GPT-3 175B run: tp 8, pp 16, dp 8 on 1024 A100 (8 per node).
  const Config c = load_config(test::examples() + "gpt3_175b_a100.yaml");
  LayoutSpace space;
  space.tp = {8, 16};
  space.pp = {8, 16};
  space.micro_batch_size = {1};
  space.schedules = {"1f1b"};
  std::vector<LayoutResult> results;
  for (const Layout& l : enumerate_layouts(c, space, &results)) results.push_back(off(c, l));
  rank_layouts(results);
  auto position = [&](int tp, int pp) {
    for (std::size_t i = 0; i < results.size(); ++i)
      if (results[i].layout.tp == tp && results[i].layout.pp == pp) return i;
    return results.size();
  };
  const std::size_t megatron = position(8, 16);
  ASSERT_LT(megatron, results.size());
  EXPECT_TRUE(results[megatron].fits) << results[megatron].rejected;
  EXPECT_GT(results[megatron].tflops_per_device, 100);
  // tp 16 crosses nodes: below its tp 8 counterpart with the same pp.
  EXPECT_LT(position(8, 16), position(16, 16));
  EXPECT_LT(position(8, 8), position(16, 8));
}

// ---- the command line ----------------------------------------------------------------------

const std::string kNarayanan =
    "cluster: {nodes: 2, devices_per_node: 4, device: {preset: a100-80g}}\n"
    "model: {preset: llama2-7b}\n"
    "training: {schedule: 1f1b, pp: 2, tp: 4, seq_length: 1024, micro_batch_size: 1,\n"
    "           global_batch_size: 32, recompute: full}\n";

TEST(SearchCli, BestLayoutWrittenOutReSimulatesToItsTime) {
  const test::ScratchDir dir;
  const std::string cfg = test::write_file(dir.file("c.yaml"), kNarayanan);
  const std::string out = dir.file("best.yaml");
  const test::CliRun r =
      run_cli("search " + cfg +
              " --json --quiet --planner quick --tp 4 --pp 2,8 --micro-batch-size 1,2 --schedules "
              "1f1b,interleaved --vpp 2 --out " +
              out);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_FALSE(j["layouts"].empty());
  const auto& best = j["layouts"][0];
  ASSERT_TRUE(best["fits"].get<bool>());
  for (const char* k : {"tp", "pp", "dp", "vpp", "micro_batch_size", "schedule",
                        "iteration_time_ms", "tokens_per_s", "mfu", "fits", "rejected"})
    EXPECT_TRUE(best.contains(k)) << k;
  for (const char* k : {"rejected_by", "evaluations", "processes", "wall_s"})
    EXPECT_TRUE(j["search"].contains(k)) << k;
  const test::CliRun sim = run_cli("simulate " + out + " --json");
  ASSERT_EQ(sim.code, 0) << sim.err;
  EXPECT_EQ(nlohmann::json::parse(sim.out)["iteration_time_ms"], best["iteration_time_ms"]);
  // Ranked: fitting layouts by time, then the rejected ones, each with its reason.
  bool in_rejected = false;
  double last = 0;
  for (const auto& l : j["layouts"]) {
    if (!l["fits"].get<bool>()) {
      in_rejected = true;
      EXPECT_TRUE(l["rejected"].is_string()) << l.dump();
      continue;
    }
    EXPECT_FALSE(in_rejected) << "a fitting layout after a rejected one";
    EXPECT_GE(l["iteration_time_ms"].get<double>(), last);
    last = l["iteration_time_ms"].get<double>();
  }
}

TEST(SearchCli, BadInputNamesTheOption) {
  const test::ScratchDir dir;
  const std::string cfg = test::write_file(dir.file("c.yaml"), kNarayanan);
  for (const char* args : {"--tp ,", "--tp 3", "--micro-batch-size 3,5", "--planner fast",
                           "--schedules nope", "--tp x"}) {
    const test::CliRun r = run_cli("search " + cfg + " --quiet " + args);
    EXPECT_EQ(r.code, 2) << args << ": " << r.err;
    // The option, or the config key it clashes with.
    EXPECT_TRUE(r.err.find("--") != std::string::npos ||
                r.err.find("training.global_batch_size") != std::string::npos)
        << args << ": " << r.err;
  }
}

TEST(SearchCli, MpiGivesTheSameLayoutsAsOneProcess) {
  if (std::system("command -v mpirun >/dev/null 2>&1") != 0) GTEST_SKIP() << "no mpirun";
  const test::ScratchDir dir;
  const std::string cfg = test::write_file(dir.file("c.yaml"), kNarayanan);
  const std::string args = "search " + cfg +
                           " --json --quiet --planner quick --tp 4 --pp 2,8 --micro-batch-size 1,2 "
                           "--schedules 1f1b,interleaved --vpp 2";
  const test::CliRun one = run_cli(args);
  ASSERT_EQ(one.code, 0) << one.err;
  const std::string single = nlohmann::json::parse(one.out)["layouts"].dump();
  // Open MPI keeps allocations in its MCA components until exit and unloads the components
  // first, so a sanitizer build reports them from "<unknown module>", where no suppression
  // can name them. The processes under mpirun run without leak checking; the same search
  // code is leak-checked in the single-process run above.
  const std::string mpirun = "ASAN_OPTIONS=\"${ASAN_OPTIONS:-}:detect_leaks=0\" mpirun";
  for (int np : {2, 3}) {
    const std::string cmd = mpirun + " -np " + std::to_string(np) +
                            " --oversubscribe --allow-run-as-root " + std::string(BMPIPE_BINARY) +
                            " " + args + " >" + dir.file("mpi.json") + " 2>" + dir.file("mpi.err");
    const int status = std::system(cmd.c_str());
    ASSERT_EQ(status, 0) << test::slurp(dir.file("mpi.err"));
    const auto j = nlohmann::json::parse(test::slurp(dir.file("mpi.json")));
    EXPECT_EQ(j["layouts"].dump(), single) << "np " << np;
    EXPECT_EQ(j["search"]["processes"], np);
  }
  // A bad config under MPI: exit 2 everywhere, the message once.
  const std::string bad = test::write_file(dir.file("bad.yaml"), "cluster: {nodes: 0}\n");
  const std::string cmd = mpirun + " -np 2 --oversubscribe --allow-run-as-root " +
                          std::string(BMPIPE_BINARY) + " search " + bad + " --quiet >/dev/null 2>" +
                          dir.file("bad.err");
  const int status = std::system(cmd.c_str());
  EXPECT_NE(status, 0);
  const std::string err = test::slurp(dir.file("bad.err"));
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n') >= 1, true) << err;
  EXPECT_EQ(err.find("bad.yaml"), err.rfind("bad.yaml")) << "reported more than once: " << err;
}

}  // namespace
}  // namespace bmpipe
