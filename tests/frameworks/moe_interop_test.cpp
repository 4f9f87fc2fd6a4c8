// Mixture-of-experts settings through Megatron-LM's flags and MindFormers' keys, both ways:
// --moe-layer-freq as Megatron-LM reads it (its own help's examples), the Mixtral launch script
// imported as the Mixtral of its HF config, every bad flag exit 2 naming FILE:LINE:flag, and export
// -> script -> import giving back the same job (the same shape, ep and etp, and the time the export
// quoted, to the digit); the same for MindFormers' moe_config and parallel_config.expert_parallel.
#include <gtest/gtest.h>

#include <yaml-cpp/yaml.h>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "experiment/config.hpp"
#include "experiment/hf_config.hpp"
#include "frameworks/common/formats.hpp"
#include "frameworks/megatron/formats.hpp"
#include "support/framework_files.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace {

using test::run_cli;

const std::string kData = std::string(BMPIPE_TEST_DATA_DIR);
const std::string kMixtralArgs = kData + "/megatron/mixtral_8x7b_args.txt";
const std::string kMixtralExample =
    std::string(BMPIPE_SOURCE_DIR) + "/configs/examples/h100_mixtral_8x7b_ep8.yaml";

std::vector<int> repeat(std::vector<int> unit, int times) {
  std::vector<int> out;
  for (int k = 0; k < times; ++k) out.insert(out.end(), unit.begin(), unit.end());
  return out;
}

TEST(MegatronMoeLayerFreq, ReadsTheFormsMegatronAccepts) {
  // moe_freq_type's help: "([1]*3+[0]*1)*3" is [1,1,1,0,1,1,1,0,1,1,1,0]; "([0]+[1]*23)" one
  // dense layer then 23 expert layers; "([1]*3+[0]*2)*2" three expert, two dense, twice.
  EXPECT_EQ(megatron_moe_pattern("([1]*3+[0]*1)*3", 12), repeat({1, 1, 1, 0}, 3));
  std::vector<int> one_dense(24, 1);
  one_dense[0] = 0;
  EXPECT_EQ(megatron_moe_pattern("([0]+[1]*23)", 24), one_dense);
  EXPECT_EQ(megatron_moe_pattern("([1]*3+[0]*2)*2", 10), repeat({1, 1, 1, 0, 0}, 2));
  // DeepSeek-V3 in Megatron-LM's recipes: 3 dense layers, 58 MoE.
  std::vector<int> ds(61, 1);
  ds[0] = ds[1] = ds[2] = 0;
  EXPECT_EQ(megatron_moe_pattern("([0]*3+[1]*58)", 61), ds);
  EXPECT_EQ(megatron_moe_pattern("[0,0,0]+[1]*58", 61), ds);
  EXPECT_EQ(megatron_moe_pattern("2*[1,0]", 4), repeat({1, 0}, 2));
  // An int N: layer i is MoE when i % N == 0 (gpt_layer_specs.py).
  EXPECT_EQ(megatron_moe_pattern("2", 6), repeat({1, 0}, 3));
  EXPECT_EQ(megatron_moe_pattern("1", 3), std::vector<int>(3, 1));
  // Written back in the shortest form.
  EXPECT_EQ(megatron_moe_freq_text(ds), "([0]*3+[1]*58)");
  EXPECT_EQ(megatron_moe_freq_text(repeat({1, 0, 0}, 4)), "3");
  EXPECT_EQ(megatron_moe_freq_text(std::vector<int>(5, 1)), "1");
  EXPECT_EQ(megatron_moe_freq_text(repeat({0, 1}, 2)), "([0]+[1]+[0]+[1])");
  for (const std::string& bad :
       {std::string("([0]*3+[1]*57)"), std::string("[2]*61"), std::string("__import__('os')"),
        std::string("([0]*3+[1]*58"), std::string("0"), std::string("x"), std::string("[[1]]*61"),
        std::string("[1]*[1]")})
    EXPECT_THROW(megatron_moe_pattern(bad, 61), FormatError) << bad;
}

TEST(MegatronMoeImport, TheMixtralScriptIsTheMixtralOfItsHfConfig) {
  test::ScratchDir dir;
  const std::string job = dir.file("job.yaml");
  const test::CliRun r = run_cli("import megatron '" + kMixtralArgs +
                                 "' --preset h100-sxm --devices 64 --out '" + job + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  const Config c = load_config(job);
  const ModelShape hf = read_hf_config(kData + "/hf/mixtral_8x7b_config.json");
  const ModelShape& m = *c.model.shape;
  EXPECT_EQ(m.num_layers, hf.num_layers);
  EXPECT_EQ(m.moe.num_experts, hf.moe.num_experts);
  EXPECT_EQ(m.moe.top_k, hf.moe.top_k);
  EXPECT_EQ(m.moe.expert_ffn, hf.moe.expert_ffn);
  EXPECT_EQ(m.moe.shared_ffn, 0);
  for (int i = 0; i < m.num_layers; ++i) EXPECT_TRUE(m.is_moe_layer(i)) << i;
  EXPECT_EQ(c.training.ep, 8);
  EXPECT_EQ(c.training.etp, 1);  // Megatron-LM's default: the tp size, 1
  // The model card's 46.7B / 12.9B (hf_moe_test.cpp counts them by hand).
  const nlohmann::json cost = nlohmann::json::parse(run_cli("cost '" + job + "' --json").out);
  EXPECT_EQ(cost["parameters_total"], 46'702'792'704LL);
  EXPECT_EQ(cost["parameters_active"], 12'879'925'248LL);
  // The same job as the example written from the HF config, with the kernels Megatron-LM
  // runs (the import says training.kernels: fused): the same time.
  EXPECT_EQ(c.training.kernels, "fused");
  const nlohmann::json a = nlohmann::json::parse(run_cli("simulate '" + job + "' --json").out);
  const nlohmann::json b = nlohmann::json::parse(
      run_cli("simulate '" + kMixtralExample + "' --json --set training.kernels=fused").out);
  EXPECT_EQ(a["iteration_time_ms"], b["iteration_time_ms"]);
}

TEST(MegatronMoeImport, ExpertTensorParallelDefaultsToTp) {
  test::ScratchDir dir;
  const std::string script = test::write_file(
      dir.file("tp2.txt"),
      test::slurp(kMixtralArgs) + "  --tensor-model-parallel-size 2 --sequence-parallel\n");
  const std::string job = dir.file("job.yaml");
  const test::CliRun r = run_cli("import megatron '" + script +
                                 "' --preset h100-sxm --devices 64 --out '" + job + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(load_config(job).training.etp, 2);
}

TEST(MegatronMoeImport, BadFlagsNameFileLineAndFlag) {
  test::ScratchDir dir;
  // Lines 1-3 are the header; the case's flags go on line 4 of a minimal script.
  const std::string base =
      "--num-layers 4 --hidden-size 1024 --num-attention-heads 8 --swiglu \\\n"  // 1
      "  --seq-length 1024 --vocab-size 32000 --micro-batch-size 1 --bf16 \\\n"  // 2
      "  --pipeline-model-parallel-size 2 --global-batch-size 16 \\\n";          // 3
  struct Case {
    std::string flags;  ///< line 4
    std::string expect;
  };
  const Case cases[] = {
      {"  --num-experts 8 --moe-router-topk 9 --moe-token-dispatcher-type alltoall\n",
       ":4: --moe-router-topk: 9 experts per token, but --num-experts is 8"},
      {"  --num-experts 8 --moe-layer-freq \"([0]*3+[1]*2)\" --moe-token-dispatcher-type "
       "alltoall\n",
       ":4: --moe-layer-freq: --moe-layer-freq: the pattern has 5 entries, but --num-layers is 4"},
      {"  --num-experts 8 --moe-layer-freq \"[0]*4\" --moe-token-dispatcher-type alltoall\n",
       ":4: --moe-layer-freq: makes no layer an MoE layer"},
      {"  --num-experts 0\n", ":4: --num-experts: must be at least 1"},
      {"  --num-experts 8\n",
       ":4: --num-experts: not modelled yet; the simulated job would "
       "differ from yours (the allgather token dispatcher"},
      {"  --num-experts 8 --moe-token-dispatcher-type flex\n",
       ":4: --moe-token-dispatcher-type: not modelled yet"},
      {"  --num-experts 8 --moe-token-dispatcher-type alltoall "
       "--overlap-moe-expert-parallel-comm\n",
       // Modelled now (training.moe_overlap), and refused with ep 1: nothing to overlap.
       ":4: --overlap-moe-expert-parallel-comm: true, but ep = 1"},
      {"  --multi-latent-attention --kv-lora-rank 2048\n",
       ":4: --kv-lora-rank: 2048 is wider than --hidden-size 1024"},
      // DeepEP and group-limited routing (training.moe_dispatcher, model.moe.router_*).
      {"  --num-experts 8 --moe-token-dispatcher-type alltoall --moe-flex-dispatcher-backend "
       "deepep\n",
       ":4: --moe-flex-dispatcher-backend: works with --moe-token-dispatcher-type flex only"},
      {"  --num-experts 8 --moe-token-dispatcher-type flex --moe-flex-dispatcher-backend "
       "hybridep\n",
       ":4: --moe-token-dispatcher-type: not modelled yet; the simulated job would differ from "
       "yours (the flex token dispatcher: bmpipe costs the alltoall dispatcher's permute, "
       "all-to-all and unpermute, or DeepEP's; give --moe-token-dispatcher-type alltoall, or "
       "flex with --moe-flex-dispatcher-backend deepep)"},
      {"  --num-experts 8 --moe-token-dispatcher-type alltoall --moe-router-num-groups 4\n",
       ":4: --moe-router-num-groups: needs --moe-router-group-topk beside it"},
      {"  --num-experts 8 --moe-token-dispatcher-type alltoall --moe-router-num-groups 3 "
       "--moe-router-group-topk 1\n",
       ":4: --moe-router-num-groups: 3 groups do not split --num-experts 8 evenly"},
      {"  --num-experts 8 --moe-router-topk 4 --moe-token-dispatcher-type alltoall "
       "--moe-router-num-groups 4 --moe-router-group-topk 1\n",
       ":4: --moe-router-group-topk: 1 of 4 groups cannot hold the --moe-router-topk 4 experts"},
  };
  int n = 0;
  for (const Case& c : cases) {
    const std::string path =
        test::write_file(dir.file(std::to_string(n++) + ".txt"), base + c.flags);
    const test::CliRun r = run_cli("import megatron '" + path + "' --preset h100-sxm --devices 16");
    EXPECT_EQ(r.code, 2) << c.flags << r.out;
    EXPECT_NE(r.err.find(path + c.expect), std::string::npos) << c.flags << r.err;
  }
  // Without --swiglu the layers are gpt's, which have no MoE layer in bmpipe.
  std::string gpt = base;
  gpt.replace(gpt.find(" --swiglu"), 9, "");
  const std::string path = test::write_file(dir.file("gpt.txt"), gpt + "  --num-experts 8\n");
  const test::CliRun r = run_cli("import megatron '" + path + "' --preset h100-sxm --devices 16");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(path + ":4: --num-experts: bmpipe costs the mixture-of-experts layer with "
                              "llama-style experts only"),
            std::string::npos)
      << r.err;
}

TEST(MegatronMoeImport, DeepEpEitherWayAndRouterGroups) {
  test::ScratchDir dir;
  const std::string base =
      "--num-layers 4 --hidden-size 1024 --num-attention-heads 8 --swiglu \\\n"
      "  --seq-length 1024 --vocab-size 32000 --micro-batch-size 1 --bf16 \\\n"
      "  --pipeline-model-parallel-size 2 --global-batch-size 16 --num-experts 8 \\\n"
      "  --expert-model-parallel-size 8 --moe-token-dispatcher-type flex \\\n";
  for (const std::string deepep : {"--moe-enable-deepep", "--moe-flex-dispatcher-backend deepep"}) {
    const std::string path = test::write_file(
        dir.file("deepep.txt"),
        base + "  " + deepep + " --moe-router-num-groups 4 --moe-router-group-topk 2\n");
    const std::string job = dir.file("job.yaml");
    const test::CliRun r = run_cli("import megatron '" + path +
                                   "' --preset h100-sxm --devices 16 --out '" + job + "'");
    ASSERT_EQ(r.code, 0) << deepep << r.err;
    const Config c = load_config(job);
    EXPECT_EQ(c.training.moe_dispatcher, "deepep") << deepep;
    EXPECT_EQ(c.model.shape->moe.router_groups, 4);
    EXPECT_EQ(c.model.shape->moe.router_group_top_k, 2);
    // Each value says where it came from.
    const std::string text = test::slurp(job);
    EXPECT_NE(text.find("moe_dispatcher: deepep"), std::string::npos) << text;
    EXPECT_NE(text.find("# " + deepep.substr(0, deepep.find(' ')) + " (line 5)"), std::string::npos)
        << text;
  }
}

/// export --format megatron of `config`, given back to `script` (flags to remove taken
/// out), imported on 64 H100: the re-imported config's path, and the export's JSON.
std::pair<std::string, nlohmann::json> round_trip(const test::ScratchDir& dir,
                                                  const std::string& config,
                                                  const std::string& script) {
  const test::CliRun x = run_cli("export '" + config + "' --format megatron --json");
  EXPECT_EQ(x.code, 0) << x.err;
  const nlohmann::json j = nlohmann::json::parse(x.out);
  const std::string text = j["text"].get<std::string>();
  const std::string given =
      test::write_file(dir.file("given.txt"), test::script_with_export(script, text));
  const std::string back = dir.file("back.yaml");
  const test::CliRun r = run_cli("import megatron '" + given +
                                 "' --preset h100-sxm --devices 64 --out '" + back + "'");
  EXPECT_EQ(r.code, 0) << r.err << "\n" << test::slurp(given);
  return {back, j};
}

TEST(MegatronMoeExport, ImportOfTheExportIsTheSameJob) {
  test::ScratchDir dir;
  // A script with the Mixtral dimensions and none of its expert flags, plus flags the
  // export must say to remove: the export alone makes it the MoE job.
  std::string dense = test::slurp(kMixtralArgs);
  for (const char* f : {"--num-experts", "--moe-router-topk", "--moe-token-dispatcher-type",
                        "--expert-model-parallel-size"})
    dense = test::without_flag(dense, f);
  dense = test::without_flag(dense, "--moe-grouped-gemm");
  dense += "  --multi-latent-attention --mtp-num-layers 1\n";
  const auto [back, x] = round_trip(dir, kMixtralExample, dense);
  const Config a = load_config(kMixtralExample), b = load_config(back);
  EXPECT_EQ(b.model.shape->moe.num_experts, a.model.shape->moe.num_experts);
  EXPECT_EQ(b.model.shape->moe.top_k, a.model.shape->moe.top_k);
  EXPECT_EQ(b.model.shape->moe.expert_ffn, a.model.shape->moe.expert_ffn);
  EXPECT_FALSE(b.model.shape->is_mla());
  EXPECT_EQ(b.model.shape->mtp_layers, 0);
  EXPECT_EQ(b.training.ep, 8);
  EXPECT_EQ(b.training.etp, 1);
  const nlohmann::json sim = nlohmann::json::parse(run_cli("simulate '" + back + "' --json").out);
  EXPECT_EQ(sim["iteration_time_ms"], x["iteration_time_ms"]) << x["text"];
}

// The cluster and the dense dimensions of the small MoE configs below (the model: section
// goes on after them), and a script with those dimensions and no expert flags.
const std::string kSmallMoeModel =
    "cluster: {nodes: 8, devices_per_node: 8, device: {preset: h100-sxm}}\n"
    "model:\n"
    "  num_layers: 8\n  hidden_size: 2048\n  num_attention_heads: 16\n  num_kv_heads: 4\n"
    "  ffn_hidden_size: 8192\n  vocab_size: 32000\n";
const std::string kSmallMoeScript =
    "--num-layers 8 --hidden-size 2048 --num-attention-heads 16 --group-query-attention \\\n"
    "  --num-query-groups 4 --ffn-hidden-size 8192 --swiglu "
    "--untie-embeddings-and-output-weights \\\n"
    "  --vocab-size 32000 --attention-dropout 0 --hidden-dropout 0 --use-flash-attn \\\n"
    "  --seq-length 2048 --micro-batch-size 1 --bf16\n";

TEST(MegatronMoeExport, ALayerPatternSharedExpertsAndEtpComeBack) {
  test::ScratchDir dir;
  // 8 layers: the first 2 dense, then every other layer MoE; a shared expert; etp 2 x ep 4
  // over tp 2 x dp 8 = 16 devices a stage.
  const std::string config = test::write_file(
      dir.file("c.yaml"),
      kSmallMoeModel +
          "  moe: {num_experts: 16, top_k: 4, expert_ffn_hidden_size: 1024,\n"
          "        shared_expert_ffn_hidden_size: 2048, first_dense_layers: 2, layer_freq: 2}\n"
          "training:\n  pp: 4\n  tp: 2\n  sequence_parallel: true\n  ep: 4\n  etp: 2\n"
          "  seq_length: 2048\n  micro_batch_size: 1\n  global_batch_size: 64\n  dtype: bf16\n");
  const auto [back, x] = round_trip(dir, config, kSmallMoeScript);
  EXPECT_NE(
      x["text"].get<std::string>().find("--moe-layer-freq \"([0]*2+[1]+[0]+[1]+[0]+[1]+[0])\""),
      std::string::npos)
      << x["text"];
  const Config a = load_config(config), b = load_config(back);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(b.model.shape->is_moe_layer(i), i >= 2 && i % 2 == 0) << i;
  EXPECT_EQ(b.model.shape->moe.shared_ffn, 2048);
  EXPECT_EQ(b.model.shape->moe.expert_ffn, 1024);
  EXPECT_EQ(b.training.tp, 2);
  EXPECT_EQ(b.training.ep, 4);
  EXPECT_EQ(b.training.etp, 2);
  const nlohmann::json sim = nlohmann::json::parse(run_cli("simulate '" + back + "' --json").out);
  EXPECT_EQ(sim["iteration_time_ms"], x["iteration_time_ms"]) << x["text"];
}

TEST(MegatronMoeExport, DeepEpAndRouterGroupsComeBack) {
  test::ScratchDir dir;
  // ep 16 over two nodes of 8, DeepEP's dispatcher, 4 groups of 4 experts, top 2 groups.
  const std::string config = test::write_file(
      dir.file("c.yaml"),
      kSmallMoeModel +
          "  moe: {num_experts: 16, top_k: 4, expert_ffn_hidden_size: 1024,\n"
          "        router_groups: 4, router_group_top_k: 2}\n"
          "training:\n  pp: 4\n  ep: 16\n  seq_length: 2048\n  moe_dispatcher: deepep\n"
          "  micro_batch_size: 1\n  global_batch_size: 64\n  dtype: bf16\n");
  const auto [back, x] = round_trip(dir, config, kSmallMoeScript);
  const std::string text = x["text"].get<std::string>();
  EXPECT_NE(text.find("--moe-token-dispatcher-type flex\n--moe-flex-dispatcher-backend deepep\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("--moe-router-num-groups 4\n--moe-router-group-topk 2\n"), std::string::npos)
      << text;
  const Config b = load_config(back);
  EXPECT_EQ(b.training.moe_dispatcher, "deepep");
  EXPECT_EQ(b.model.shape->moe.router_groups, 4);
  EXPECT_EQ(b.model.shape->moe.router_group_top_k, 2);
  EXPECT_EQ(b.training.ep, 16);
  const nlohmann::json sim = nlohmann::json::parse(run_cli("simulate '" + back + "' --json").out);
  EXPECT_EQ(sim["iteration_time_ms"], x["iteration_time_ms"]) << text;
  // And with the alltoall dispatcher, the export lists the DeepEP flags to remove.
  const test::CliRun a2a =
      run_cli("export '" + config + "' --format megatron --set training.moe_dispatcher=alltoall");
  ASSERT_EQ(a2a.code, 0) << a2a.err;
  EXPECT_NE(a2a.out.find("--moe-token-dispatcher-type alltoall\n"), std::string::npos);
  EXPECT_NE(a2a.out.find("#   --moe-flex-dispatcher-backend\n"), std::string::npos) << a2a.out;
}

// ---- MindFormers ------------------------------------------------------------------------

const std::string kMixtralMf = kData + "/mindformers/mixtral_8x7b.yaml";

TEST(MindFormersMoe, TheMixtralYamlIsTheMixtralOfItsHfConfig) {
  test::ScratchDir dir;
  const std::string job = dir.file("job.yaml");
  const test::CliRun r = run_cli("import mindformers '" + kMixtralMf +
                                 "' --preset h100-sxm --devices 64 --out '" + job + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  const Config c = load_config(job);
  const ModelShape& m = *c.model.shape;
  EXPECT_EQ(m.moe.num_experts, 8);
  EXPECT_EQ(m.moe.top_k, 2);
  EXPECT_EQ(m.moe.expert_ffn, 14336);  // LlamaConfig's intermediate_size: each expert's
  EXPECT_EQ(m.moe.shared_ffn, 0);
  EXPECT_EQ(c.training.ep, 8);
  const nlohmann::json cost = nlohmann::json::parse(run_cli("cost '" + job + "' --json").out);
  EXPECT_EQ(cost["parameters_total"], 46'702'792'704LL);
  EXPECT_EQ(cost["parameters_active"], 12'879'925'248LL);
}

TEST(MindFormersMoe, BadKeysNameFileLineAndKey) {
  test::ScratchDir dir;
  const std::string yaml = test::slurp(kMixtralMf);
  struct Case {
    std::string from, to, expect;
  };
  const Case cases[] = {
      {"num_experts_chosen: 2", "num_experts_chosen: 9",
       // MindFormers' own message (fd4deebc1, mindformers/modules/transformer/moe.py:162-164).
       ":25: moe_config.num_experts_chosen: 9 experts per token, but expert_num is 8: "
       "MindFormers refuses it (\"'num_experts_chosen' must not be larger than "
       "'expert_num'\""},
      {"expert_num: 8", "expert_num: 0", ":24: moe_config.expert_num: must be at least 1"},
      {"expert_num: 8", "expert_num: 1",
       ":19: parallel_config.expert_parallel: is more than 1, but the model has no experts"},
      {"expert_num: 8", "expert_num: 8\n  first_k_dense_replace: 32",
       ":25: moe_config.first_k_dense_replace: leaves no MoE layer of the 32"},
      {"expert_parallel: 8", "expert_parallel: 3",
       ":19: parallel_config.expert_parallel: ep = 3 does not divide the 8 experts"},
      // Expert parallelism without MindSpore's all-to-all (its AllGather path, unmodelled).
      {"enable_alltoall: True", "enable_alltoall: False",
       ":11: parallel.enable_alltoall: not modelled yet; the simulated job would differ from "
       "yours (expert parallelism without all-to-all"},
  };
  int n = 0;
  for (const Case& c : cases) {
    std::string text = yaml;
    text.replace(text.find(c.from), c.from.size(), c.to);
    const std::string path = test::write_file(dir.file(std::to_string(n++) + ".yaml"), text);
    const test::CliRun r =
        run_cli("import mindformers '" + path + "' --preset h100-sxm --devices 64");
    EXPECT_EQ(r.code, 2) << c.to << r.out;
    EXPECT_NE(r.err.find(path + c.expect), std::string::npos) << c.to << "\n" << r.err;
  }
}

/// export --format mindformers of `config` merged into `run` (a MindFormers YAML), imported
/// on 64 H100: the re-imported config, and the export's JSON.
std::pair<std::string, nlohmann::json> mf_round_trip(const test::ScratchDir& dir,
                                                     const std::string& config,
                                                     const std::string& run) {
  const test::CliRun x = run_cli("export '" + config + "' --format mindformers --json");
  EXPECT_EQ(x.code, 0) << x.err;
  const nlohmann::json j = nlohmann::json::parse(x.out);
  const std::string given = test::write_file(
      dir.file("given.yaml"), test::yaml_with_export(run, j["text"].get<std::string>()));
  const std::string back = dir.file("back.yaml");
  const test::CliRun r = run_cli("import mindformers '" + given +
                                 "' --preset h100-sxm --devices 64 --out '" + back + "'");
  EXPECT_EQ(r.code, 0) << r.err << "\n" << test::slurp(given);
  return {back, j};
}

TEST(MindFormersMoe, ImportOfTheExportIsTheSameJob) {
  test::ScratchDir dir;
  // The Mixtral run without its expert keys: the export alone makes it the MoE job.
  YAML::Node run = YAML::LoadFile(kMixtralMf);
  run.remove("moe_config");
  run["parallel_config"].remove("expert_parallel");
  YAML::Emitter e;
  e << run;
  const std::string dense = test::write_file(dir.file("dense.yaml"), e.c_str());
  const auto [back, x] = mf_round_trip(dir, kMixtralExample, dense);
  const Config b = load_config(back);
  EXPECT_EQ(b.model.shape->moe.num_experts, 8);
  EXPECT_EQ(b.model.shape->moe.top_k, 2);
  EXPECT_EQ(b.training.ep, 8);
  const nlohmann::json sim = nlohmann::json::parse(run_cli("simulate '" + back + "' --json").out);
  EXPECT_EQ(sim["iteration_time_ms"], x["iteration_time_ms"]) << x["text"];
}

TEST(MindFormersMoe, SharedExpertsFirstDenseLayersAndExpertWidthComeBack) {
  test::ScratchDir dir;
  // Mixtral's dimensions with 16 experts of 7168, two shared ones, the first 4 layers dense.
  const std::string config = test::write_file(
      dir.file("c.yaml"),
      "cluster: {nodes: 8, devices_per_node: 8, device: {preset: h100-sxm}}\n"
      "model:\n"
      "  num_layers: 32\n  hidden_size: 4096\n  num_attention_heads: 32\n  num_kv_heads: 8\n"
      "  ffn_hidden_size: 14336\n  vocab_size: 32000\n"
      "  moe: {num_experts: 16, top_k: 2, expert_ffn_hidden_size: 7168,\n"
      "        shared_expert_ffn_hidden_size: 14336, first_dense_layers: 4}\n"
      "training:\n  pp: 4\n  ep: 8\n  seq_length: 4096\n"
      "  micro_batch_size: 1\n  global_batch_size: 256\n  recompute: selective\n"
      "  optimizer: {zero_stage: 1}\n");  // the run's enable_parallel_optimizer
  const auto [back, x] = mf_round_trip(dir, config, kMixtralMf);
  const std::string text = x["text"].get<std::string>();
  EXPECT_NE(text.find("  shared_expert_num: 2\n  moe_intermediate_size: 7168\n"
                      "  first_k_dense_replace: 4\n"),
            std::string::npos)
      << text;
  const Config b = load_config(back);
  const ModelShape& m = *b.model.shape;
  EXPECT_EQ(m.moe.num_experts, 16);
  EXPECT_EQ(m.moe.expert_ffn, 7168);
  EXPECT_EQ(m.moe.shared_ffn, 14336);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(m.is_moe_layer(i), i >= 4) << i;
  const nlohmann::json sim = nlohmann::json::parse(run_cli("simulate '" + back + "' --json").out);
  EXPECT_EQ(sim["iteration_time_ms"], x["iteration_time_ms"]) << text;
}

}  // namespace
}  // namespace bmpipe
