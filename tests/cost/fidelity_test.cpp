// The fidelity table (bench/fidelity): every published Megatron-Bridge run of the calibration
// set written down and simulated, and its errors pinned, so that a cost change that makes
// them worse fails here. `build/bench/fidelity/bmpipe-fidelity` prints the table;
// docs/cost-model.md ("Kernel model and fidelity") shows it before and after the kernel
// model.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>

#include "bench/fidelity/fidelity.hpp"

namespace bmpipe {
namespace fidelity_test {

const std::string kRuns =
    std::string(BMPIPE_SOURCE_DIR) + "/bench/fidelity/megatron_bridge_runs.json";
const std::string kMoeLayers =
    std::string(BMPIPE_SOURCE_DIR) + "/bench/fidelity/megatron_moe_layer_ci.json";

std::vector<fidelity::RowResult> evaluate_all() {
  std::vector<fidelity::RowResult> rows;
  for (const fidelity::PublishedRun& run : fidelity::load_runs(kRuns))
    rows.push_back(fidelity::evaluate(run, BMPIPE_SOURCE_DIR));
  return rows;
}

TEST(Fidelity, EveryCalibrationRunIsWrittenDownAndSimulated) {
  const auto rows = evaluate_all();
  // 39 runs of transformer models and, since the hybrid layers (issue 40), 5 of Nemotron 3
  // Nano; since the latent MoE and the hybrid MTP block, 8 of Nemotron 3 Super (its 30 table
  // rows are 8 configurations at their latest release) and 1 of Nemotron 3.5 Lightning.
  ASSERT_EQ(rows.size(), 53u);
  for (const fidelity::RowResult& r : rows)
    EXPECT_TRUE(r.predicted_tokens_per_s_per_gpu.has_value()) << r.id << ": " << r.refused;
}

TEST(Fidelity, ErrorsStayWithinWhatTheKernelModelReached) {
  // The table after the kernel model (docs/cost-model.md): mean |time error| 10.4 % over the
  // 39 runs; 15.7 % with the presets and precisions the table needs but the flat kernel
  // model; 31.7 % over the 16 runs bmpipe could write down before b300, gb300 and NVFP4. The
  // bounds are today's figures plus half a point: a worse change fails here.
  // The hybrid Nemotron 3 rows (Nano, Super, 3.5 Lightning) are held apart
  // (HybridRowsReadFastByAKnownMargin, LatentMoeRowsReadFastByAKnownMargin), so that adding
  // them loosens no bound here.
  std::vector<fidelity::RowResult> rows;
  for (fidelity::RowResult& r : evaluate_all())
    if (r.id.rfind("nemotron_3", 0) != 0) rows.push_back(std::move(r));
  ASSERT_EQ(rows.size(), 39u);
  const auto groups = fidelity::summarize(rows);
  // Sliding windows (issue 40) loosened the five groups that hold gpt-oss rows: its 18
  // windowed layers now do 128 keys a query instead of up to 4096, so attention costs about
  // half what it did, and the rows, which already read fast, read 5-14 points faster
  // (docs/cost-model.md's fidelity section). Mean |error| before -> after: blackwell moe bf16
  // 19.3 -> 23.8 %, blackwell moe fp8mx 13.6 -> 18.1 %, blackwell-ultra moe bf16 22.2 -> 25.7 %,
  // blackwell-ultra moe fp8mx 17.1 -> 20.3 %, hopper moe bf16 28.1 -> 33.2 %, all 10.4 ->
  // 11.9 %. The windows are the model's (HF layer_types, Megatron-Bridge's window_size); what
  // the faster rows lack lies elsewhere (the fine-grained MoE blocks), so the bounds follow.
  // The recipes' recompute modules (training.recompute_modules) replaced "taken as bmpipe's
  // selective": DeepSeek-V3 and Kimi-K2 recompute mla_up_proj (and mlp) instead of the
  // attention core, so four of their rows fit now and read closer (blackwell moe fp8mx 18.1
  // -> 17.5 %, blackwell-ultra moe bf16 25.7 -> 24.7 %, blackwell-ultra moe fp8mx 20.3 ->
  // 19.7 %); gpt-oss recomputes layernorm and moe_act, cheaper than the core it was charged,
  // and its rows read faster still (blackwell moe bf16 23.8 -> 24.5 %, hopper moe bf16 33.2
  // -> 33.9 %). All 11.9 -> 11.8 %.
  // The collective model by algorithm (sim/cost/collectives.hpp) loosened four more: dp groups
  // with several members a node now drive that many NICs (8 x 48 GB/s, not one NIC's 37.5 or
  // 75), dp all-reduces inside a node take NVLink SHARP, so the dp tails shrank; rows that
  // read fast read faster. Before -> after: blackwell dense fp8cs 4.4 -> 5.3 % (Llama 3.1 405B
  // on 128 B200, dp 2 over 8-GPU nodes, +0.2 -> -5.9 %), blackwell moe bf16 23.8 -> 26.6 %
  // (gpt-oss 120B on 64 B200, -26.7 -> -35.1 %), blackwell-ultra moe fp8mx 20.3 -> 20.9 %
  // (gpt-oss on b300 -42.3 -> -48.2 %, DeepSeek-V3 on gb300 +14.2 -> +10.3 %), hopper moe
  // bf16 33.2 -> 34.0 %. The collectives' figures are nccl-tests' (collectives_test.cpp);
  // what the MoE rows lack is the MoE blocks' kernels (above), so the bounds follow.
  // Together with Megatron-Core's MoE memory (the experts' outputs no longer kept, the
  // unpermute's backward one read less: MoE rows 0.1-0.5 % faster), the bounds are the
  // figures at this commit plus half a point: blackwell dense fp8cs 5.3 %, blackwell moe bf16
  // 27.6 %, blackwell moe fp8mx 16.8 %, blackwell-ultra moe bf16 26.5 %, blackwell-ultra moe
  // fp8mx 20.5 %, hopper moe bf16 34.9 %, all 39 rows 12.4 %.
  const std::map<std::string, double> bound = {{"blackwell dense fp8cs", 0.058},
                                               {"blackwell dense fp8mx", 0.065},
                                               {"blackwell dense nvfp4", 0.066},
                                               {"blackwell moe bf16", 0.281},
                                               {"blackwell moe fp8mx", 0.174},
                                               {"blackwell-ultra dense fp8cs", 0.043},
                                               {"blackwell-ultra dense fp8mx", 0.067},
                                               {"blackwell-ultra dense nvfp4", 0.006},
                                               {"blackwell-ultra moe bf16", 0.270},
                                               {"blackwell-ultra moe fp8mx", 0.210},
                                               {"hopper dense fp8cs", 0.096},
                                               {"hopper moe bf16", 0.354},
                                               {"all", 0.129}};
  ASSERT_EQ(groups.size(), bound.size());
  for (const fidelity::GroupSummary& g : groups) {
    ASSERT_TRUE(bound.count(g.group)) << g.group;
    EXPECT_EQ(g.refused, 0) << g.group;
    EXPECT_LE(g.mean_abs_error, bound.at(g.group)) << g.group;
  }
  // Every dense group within 10 %, the bound for a group being 15 %.
  for (const fidelity::GroupSummary& g : groups) {
    if (g.group.find("dense") != std::string::npos) {
      EXPECT_LE(g.mean_abs_error, 0.10) << g.group;
    }
  }
}

// Nemotron 3 Nano (23 Mamba-2, 6 attention and 23 MoE layers) on five devices reads 33-36 %
// fast on every one of them, H100 and GB300 alike, so what is missing follows the model,
// not a device constant (docs/cost-model.md: the fine-grained MoE blocks, as gpt-oss's,
// and the scan kernels' real speed, for which no published figure was found). The bound is
// today's worst plus half a point: a change that moves these rows the wrong way fails here,
// one that fixes them will tighten it. (36.5 % before the collective model by algorithm and
// Megatron-Core's MoE memory, which took the H100 row from -36.0 to -36.5 %: its dp tail
// shrank and its unpermute lost a read.)
TEST(Fidelity, HybridRowsReadFastByAKnownMargin) {
  int rows = 0;
  for (const fidelity::RowResult& r : evaluate_all()) {
    if (r.id.rfind("nemotron_3_nano", 0) != 0) continue;
    ++rows;
    ASSERT_TRUE(r.predicted_tokens_per_s_per_gpu.has_value()) << r.id << ": " << r.refused;
    EXPECT_LT(r.time_error(), 0.0) << r.id;
    EXPECT_LE(std::abs(r.time_error()), 0.370) << r.id;
  }
  EXPECT_EQ(rows, 5);
}

// Nemotron 3 Super (40 Mamba-2, 8 attention and 40 latent MoE layers, the MTP block "*E" at
// 2 depths of one block) on B200, GB200, B300 and GB300 in MXFP8 and NVFP4, and Nemotron 3.5
// Lightning (Nano's layers and the same MTP block) on GB200 in MXFP8, each written down from
// its recipe read by hand (extract_megatron_bridge.py, SUPER_RECIPES and LIGHTNING_RECIPES).
// Every one reads fast, as the Nano rows do (by 26 % for Lightning to 55 %), and no constant
// was fitted to them: what the cost model lacks for the fine-grained MoE blocks (Nano's and
// gpt-oss's rows) it lacks here, and the NVFP4 rows read faster still (49-50 %) because
// bmpipe runs every GEMM in NVFP4, where the recipes' te_quant.cfg keeps the attention and
// latent projections in bf16 and the Mamba out_proj in MXFP8. A group of its own so that no
// calibrated bound above moves: the bounds are the figures the first version of the latent
// MoE reads plus half a point, mean |error| blackwell moe fp8mx 34.4 % (3 rows), blackwell
// moe nvfp4 49.2 % (2), blackwell-ultra moe fp8mx 43.8 % (2), blackwell-ultra moe nvfp4 50.3 %
// (2), all 9 rows 43.3 %; a change that moves them the wrong way fails here. ZeRO-1's
// gather after the step in the weights' own bytes under --fp4-param-gather (param_gather_bytes)
// took Super on 64 B300 in NVFP4 from -54.3 to -55.9 %, its group to 51.1 %: the whole model's
// GEMM weights gathered in NVFP4, where the recipe keeps some in bf16 (above), and the group's
// bound follows, 51.6 %.
TEST(Fidelity, LatentMoeRowsReadFastByAKnownMargin) {
  std::vector<fidelity::RowResult> rows;
  for (fidelity::RowResult& r : evaluate_all())
    if (r.id.rfind("nemotron_3_super", 0) == 0 || r.id.rfind("nemotron_3_5_lightning", 0) == 0)
      rows.push_back(std::move(r));
  ASSERT_EQ(rows.size(), 9u);
  for (const fidelity::RowResult& r : rows) {
    ASSERT_TRUE(r.predicted_tokens_per_s_per_gpu.has_value()) << r.id << ": " << r.refused;
    EXPECT_LT(r.time_error(), 0.0) << r.id;
  }
  const std::map<std::string, double> bound = {{"blackwell moe fp8mx", 0.349},
                                               {"blackwell moe nvfp4", 0.497},
                                               {"blackwell-ultra moe fp8mx", 0.443},
                                               {"blackwell-ultra moe nvfp4", 0.516},
                                               {"all", 0.438}};
  const auto groups = fidelity::summarize(rows);
  ASSERT_EQ(groups.size(), bound.size());
  for (const fidelity::GroupSummary& g : groups) {
    ASSERT_TRUE(bound.count(g.group)) << g.group;
    EXPECT_EQ(g.refused, 0) << g.group;
    EXPECT_LE(g.mean_abs_error, bound.at(g.group)) << g.group;
  }
}

TEST(Fidelity, MoeLayerTimingsOfMegatronsCi) {
  // One MoE layer on 8 H100 (Megatron-LM's moe_perf CI at d98e8a64), forward and backward:
  // forward mean |error| 12.8 %, backward 18.6 % (the h100-sxm preset keeps the h200 fit's
  // flat fractions; its bf16 backward reads 28-41 % slow).
  const auto rows = fidelity::moe_layer_rows(kMoeLayers);
  ASSERT_EQ(rows.size(), 12u);
  double f = 0, b = 0;
  for (const fidelity::MoeLayerRow& r : rows) {
    ASSERT_TRUE(r.refused.empty()) << r.name << ": " << r.refused;
    f += std::abs(r.forward_ms / r.published_forward_ms - 1);
    b += std::abs(r.backward_ms / r.published_backward_ms - 1);
  }
  EXPECT_LE(f / 12, 0.133);
  EXPECT_LE(b / 12, 0.191);
}

TEST(Fidelity, ARunWrittenDownNamesItsSourceAndApproximations) {
  for (const fidelity::PublishedRun& run : fidelity::load_runs(kRuns)) {
    if (run.id != "gpt_oss_120b_pretrain_64gpu_gb300_bf16") continue;
    const fidelity::Expressed e = fidelity::express(run, BMPIPE_SOURCE_DIR);
    EXPECT_NE(e.yaml.find("docs/performance-summary-archive.md:234"), std::string::npos) << e.yaml;
    EXPECT_NE(e.yaml.find("  preset: gb300\n"), std::string::npos);
    EXPECT_NE(e.yaml.find("  ep: 64\n"), std::string::npos);
    // The recipe's CUDA graphs (transformer_engine over attn, moe_router, moe_preprocess).
    EXPECT_NE(e.yaml.find("  cuda_graphs: attn,moe_router,moe_preprocess\n"), std::string::npos)
        << e.yaml;
    return;
  }
  FAIL() << "no gpt-oss GB300 BF16 row";
}

// DeepSeek-V3's and Kimi-K2's recipes set their pipeline layout by a function of pp and vp
// (Megatron-Bridge 067f987d recipes/deepseek/h100/deepseek_v3.py,
// _get_deepseek_v3_pipeline_layout: (8, 2) is the embedding with 4 layers, 14 stages of 4,
// then 1 layer with the MTP module and the loss). The 26.06 B300 row gives no vp while its
// recipe overlaps the EP all-to-alls under pp 8, which Megatron-Core refuses without virtual
// stages: it is written down with the recipe's vp 2, and says so.
TEST(Fidelity, DeepSeekRowsTakeTheRecipesLayoutAndVirtualStages) {
  int seen = 0;
  for (const fidelity::PublishedRun& run : fidelity::load_runs(kRuns)) {
    if (run.id == "deepseek_v3_pretrain_256gpu_b200_fp8mx") {
      ++seen;
      EXPECT_NE(fidelity::express(run, BMPIPE_SOURCE_DIR)
                    .yaml.find("  megatron_layout: \"Et*4|(t*4|)*14tmL\"\n"),
                std::string::npos);
    }
    if (run.id == "deepseek_v3_pretrain_256gpu_b300_fp8mx") {
      ++seen;
      const fidelity::Expressed e = fidelity::express(run, BMPIPE_SOURCE_DIR);
      EXPECT_NE(e.yaml.find("  schedule: interleaved\n  pp: 8\n  vpp: 2\n"), std::string::npos)
          << e.yaml;
      EXPECT_NE(e.yaml.find("  megatron_layout: \"Et*4|(t*4|)*14tmL\"\n"), std::string::npos);
      bool said = false;
      for (const std::string& a : e.approximations) said |= a.rfind("vp 2 from the recipe", 0) == 0;
      EXPECT_TRUE(said);
    }
    if (run.id == "kimi_k2_pretrain_256gpu_gb300_fp8mx") {
      ++seen;
      EXPECT_NE(fidelity::express(run, BMPIPE_SOURCE_DIR)
                    .yaml.find("  megatron_layout: \"Et*4|(t*4|)*14tL\"\n"),
                std::string::npos);
    }
  }
  EXPECT_EQ(seen, 3);
}

// The FSDP column is the sharding group, #GPUs / (TP x PP) when it is all of dp x cp
// (Megatron-Bridge 067f987d, docs/performance-summary-archive.md). The published FSDP rows
// (64 of 64 GPUs, 8 of 8, tp = pp = 1) shard over all of dp: no hybrid key. A row with
// FSDP 8 on those 64 GPUs shards over groups of 8: fsdp_shard_group 8.
TEST(Fidelity, AnFsdpGroupSmallerThanDpIsHybridSharding) {
  int fsdp_rows = 0;
  for (fidelity::PublishedRun run : fidelity::load_runs(kRuns)) {
    if (run.fsdp == 0) continue;
    ++fsdp_rows;
    EXPECT_EQ(fidelity::express(run, BMPIPE_SOURCE_DIR).yaml.find("fsdp_shard_group"),
              std::string::npos)
        << run.id;
    if (run.id != "llama3_70b_pretrain_64gpu_gb200_fp8cs") continue;
    run.fsdp = 8;
    const std::string yaml = fidelity::express(run, BMPIPE_SOURCE_DIR).yaml;
    EXPECT_NE(yaml.find("  fsdp: true\n  fsdp_shard_group: 8\n"), std::string::npos) << yaml;
  }
  EXPECT_EQ(fsdp_rows, 3);
}

// Megatron-Bridge runs Llama 3 70B on 64 GB200 with 40 of its 80 layers' activations on the
// host and on 64 GB300 with 20 (the recipes' cpu_offloading_num_layers): written as
// training.offload_layers, both rows fit, as the published runs did; without it neither
// does (every layer's activations of a 2 x 8192-token micro-batch, about 318 GiB, against
// 185 and 286 GiB). On C2C the copies hide (sim/layer_offload.hpp: a layer's copy of about
// 3.6 GiB takes 17 ms at 225 GB/s a GPU, a 40-layer window of forwards about 0.6 s), so the
// time is that of the job without offload.
TEST(Fidelity, WholeLayerOffloadLetsTheLlama70bFsdpRowsFit) {
  int rows = 0;
  for (fidelity::PublishedRun run : fidelity::load_runs(kRuns)) {
    const auto it = run.recipe.find("cpu_offloading_num_layers");
    if (it == run.recipe.end()) continue;
    ++rows;
    const fidelity::RowResult with = fidelity::evaluate(run, BMPIPE_SOURCE_DIR);
    EXPECT_NE(
        fidelity::express(run, BMPIPE_SOURCE_DIR).yaml.find("  offload_layers: " + it->second),
        std::string::npos)
        << run.id;
    EXPECT_TRUE(with.fits) << run.id;
    run.recipe.erase(it);
    const fidelity::RowResult without = fidelity::evaluate(run, BMPIPE_SOURCE_DIR);
    EXPECT_FALSE(without.fits) << run.id;
    ASSERT_TRUE(with.predicted_tokens_per_s_per_gpu && without.predicted_tokens_per_s_per_gpu);
    EXPECT_DOUBLE_EQ(*with.predicted_tokens_per_s_per_gpu, *without.predicted_tokens_per_s_per_gpu)
        << run.id;
  }
  EXPECT_EQ(rows, 2);
}

}  // namespace fidelity_test
}  // namespace bmpipe
