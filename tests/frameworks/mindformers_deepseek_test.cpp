// Issue 41: MindFormers' DeepSeek-V3 pretraining YAML (tests/data/mindformers/
// deepseek3_671b_pretrain.yaml, r1.5.0 ece44cc45) imported with DeepseekV3Config's
// multi-latent attention and MTP (research/deepseek3/deepseek3_config.py,
// deepseek2_model.py at that commit); parallel_config.vocab_emb_dp (training.vocab_parallel);
// and the experts' capacity factor from both importers (training.moe_capacity_factor), each
// exported and imported back to the same time.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "experiment/config.hpp"
#include "support/framework_files.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace mindformers_deepseek_test {

using test::run_cli;

const std::string kData = std::string(BMPIPE_TEST_DATA_DIR);
const std::string kDeepSeek = kData + "/mindformers/deepseek3_671b_pretrain.yaml";
const std::string kMixtralMf = kData + "/mindformers/mixtral_8x7b.yaml";
const std::string kMixtralArgs = kData + "/megatron/mixtral_8x7b_args.txt";
const std::string kMixtralExample = test::kExamples + "h100_mixtral_8x7b_ep8.yaml";

/// `text` with its first `from` replaced by `to`.
std::string with(std::string text, const std::string& from, const std::string& to) {
  const std::size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

// ---- DeepSeek-V3 -------------------------------------------------------------------------

TEST(MindFormersDeepSeekV3, NamesExactlyTheKeysBmpipeDoesNotModel) {
  // Every MLA and MTP key, vocab_emb_dp and the MoE keys are read; what is left is the
  // graph compilation and Ascend options, the optimizer's own sharding and a recompute
  // option of communication. recompute_slice_activation is listed as without effect: its
  // recompute is a list of layers, which MindFormers recomputes without slicing
  // (mindformers/models/utils.py:403-409 at r1.5.0: only recompute: True passes it on).
  const test::CliRun r = run_cli("import mindformers '" + kDeepSeek + "' --preset ascend-910b");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(kDeepSeek +
                       ":84: context.jit_config: not modelled yet; the simulated job would "
                       "differ from yours (a graph compilation level, whose speed bmpipe does "
                       "not have); also not modelled: context.ascend_config (line 86), "
                       "parallel.parallel_optimizer_config (line 114), "
                       "recompute_config.parallel_optimizer_comm_recompute (line 122). To "
                       "import"),
            std::string::npos)
      << r.err;
}

TEST(MindFormersDeepSeekV3, ImportsTheYamlsModelAndLayoutAndSimulates) {
  test::ScratchDir dir;
  const std::string job = dir.file("job.yaml");
  const test::CliRun r = run_cli("import mindformers '" + kDeepSeek +
                                 "' --preset ascend-910b --allow-unmodelled --out '" + job + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  const Config c = load_config(job);
  const ModelShape& m = *c.model.shape;
  // model.model_config (lines 130-167) and moe_config (lines 175-196) of the YAML.
  EXPECT_EQ(m.num_layers, 61);
  EXPECT_EQ(m.hidden_size, 7168);
  EXPECT_EQ(m.num_attention_heads, 128);
  EXPECT_EQ(m.vocab_size, 129280);
  EXPECT_EQ(m.ffn_hidden_size, 18432);
  EXPECT_EQ(m.mla.q_lora_rank, 1536);
  EXPECT_EQ(m.mla.kv_lora_rank, 512);
  EXPECT_EQ(m.mla.qk_nope_head_dim, 128);
  EXPECT_EQ(m.mla.qk_rope_head_dim, 64);
  EXPECT_EQ(m.mla.v_head_dim, 128);
  EXPECT_EQ(m.mtp_layers, 1);
  EXPECT_EQ(m.moe.num_experts, 256);
  EXPECT_EQ(m.moe.top_k, 8);
  EXPECT_EQ(m.moe.expert_ffn, 2048);
  EXPECT_EQ(m.moe.shared_ffn, 2048);  // shared_expert_num 1 x moe_intermediate_size
  EXPECT_EQ(m.moe.first_dense_layers, 3);
  // parallel_config: dp 16, mp 4, 16 stages, ep 8, 32 micro-batches.
  EXPECT_EQ(c.training.dp, 16);
  EXPECT_EQ(c.training.tp, 4);
  EXPECT_EQ(c.training.pp, 16);
  EXPECT_EQ(c.training.ep, 8);
  EXPECT_EQ(c.training.microbatches, 32);
  // LayerSetting over num_layers + mtp_depth = 62: 62 // 16 = 3 per stage plus the offset
  // [1 x 15, -1]: 4 x 15 and 2, the last of which is the MTP layer.
  std::vector<int> partition(15, 4);
  partition.push_back(1);
  EXPECT_EQ(c.training.partition, partition);
  // vocab_emb_dp: True is reset to False at pipeline_stage 16; use_gmm: the dropless
  // grouped matmuls, so capacity_factor 1.5 pads nothing.
  EXPECT_TRUE(c.training.vocab_parallel);
  EXPECT_EQ(c.training.moe_capacity_factor, 0.0);
  EXPECT_NE(r.err.find("vocab_emb_dp: True has no effect with pipeline_stage > 1"),
            std::string::npos)
      << r.err;
  // The parameters: DeepSeek-V3's 671,026,419,200 (tests/frameworks/hf_moe_test.cpp, worked
  // from its config.json) less the 58 MoE layers' 256 router correction biases, which
  // MindFormers keeps as a buffer outside training (moe.py TopkRouterV2: topk_bias,
  // requires_grad=False) and bmpipe does not count here.
  const nlohmann::json cost = test::run_json("cost '" + job + "' --json");
  EXPECT_EQ(cost["parameters_total"], 671'026'419'200LL - 58 * 256);
  const nlohmann::json sim = test::run_json("simulate '" + job + "' --json");
  EXPECT_GT(sim["iteration_time_ms"].get<double>(), 0.0);
}

TEST(MindFormersDeepSeekV3, AbsentMlaKeysTakeDeepseekV3ConfigsDefaults) {
  test::ScratchDir dir;
  std::string yaml = test::slurp(kDeepSeek);
  for (const char* k :
       {"    kv_lora_rank: 512\n", "    q_lora_rank: 1536\n", "    qk_rope_head_dim: 64\n",
        "    v_head_dim: 128\n", "    qk_nope_head_dim: 128\n"})
    yaml = with(yaml, k, "");
  const std::string path = test::write_file(dir.file("defaults.yaml"), yaml);
  const test::CliRun r =
      run_cli("import mindformers '" + path + "' --preset ascend-910b --allow-unmodelled");
  ASSERT_EQ(r.code, 0) << r.err;
  // DeepseekV3Config.__init__: kv_lora_rank 512, q_lora_rank 1536, qk_rope_head_dim 64,
  // v_head_dim 128, qk_nope_head_dim 128.
  for (const char* line : {"q_lora_rank: 1536 ", "kv_lora_rank: 512 ", "qk_head_dim: 128 ",
                           "qk_pos_emb_head_dim: 64 ", "v_head_dim: 128 "})
    EXPECT_NE(r.out.find(line), std::string::npos) << line << r.out;
  EXPECT_NE(r.out.find("# DeepseekV3Config's default: 512"), std::string::npos) << r.out;
  // A value given is read: kv_lora_rank 256.
  const std::string narrow =
      test::write_file(dir.file("narrow.yaml"),
                       with(test::slurp(kDeepSeek), "kv_lora_rank: 512", "kv_lora_rank: 256"));
  const test::CliRun n =
      run_cli("import mindformers '" + narrow + "' --preset ascend-910b --allow-unmodelled");
  ASSERT_EQ(n.code, 0) << n.err;
  EXPECT_NE(n.out.find("kv_lora_rank: 256 "), std::string::npos) << n.out;
}

TEST(MindFormersDeepSeekV3, RefusalsNameFileLineAndKey) {
  test::ScratchDir dir;
  const std::string yaml = test::slurp(kDeepSeek);
  struct Case {
    std::string from, to, expect;
  };
  const Case cases[] = {
      // Without the MTP layer the offsets (summing to 14) no longer fit 61 % 16 = 13.
      {"mtp_depth: &mtp_depth 1", "mtp_depth: &mtp_depth 0",
       ":163: model.model_config.offset: the offsets add up to 14; MindFormers requires "
       "num_layers % (pipeline_stage * pp_interleave_num) = 61 % 16 = 13"},
      {"mtp_depth: &mtp_depth 1", "mtp_depth: &mtp_depth 2",
       ":163: model.model_config.offset: the offsets add up to 14; MindFormers requires "
       "(num_layers + mtp_depth) % (pipeline_stage * pp_interleave_num) = 63 % 16 = 15"},
      // The last stage holds 2 of the 62 layers: the last decoder layer and the MTP layer.
      // With offset -3 there it holds none, and the MTP layer would land on stage 14.
      {"offset: [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, -1]",
       "offset: [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 3, -3]",
       ":163: model.model_config.offset: leaves the last stage 0 of the 62 layers"},
      {"type: DeepseekV3Config", "type: LlamaConfig",
       ":140: model.model_config.q_lora_rank: is a DeepseekV3Config key"},
      {"kv_lora_rank: 512", "kv_lora_rank: 8000",
       ":138: model.model_config.kv_lora_rank: 8000 is wider than hidden_size 7168"},
      {"q_lora_rank: 1536", "q_lora_rank: 0",
       ":140: model.model_config.q_lora_rank: must be at least 1, got 0"},
  };
  int n = 0;
  for (const Case& c : cases) {
    const std::string path =
        test::write_file(dir.file(std::to_string(n++) + ".yaml"), with(yaml, c.from, c.to));
    const test::CliRun r =
        run_cli("import mindformers '" + path + "' --preset ascend-910b --allow-unmodelled");
    EXPECT_EQ(r.code, 2) << c.to;
    EXPECT_NE(r.err.find(path + c.expect), std::string::npos) << c.to << "\n" << r.err;
  }
}

TEST(MindFormersDeepSeekV3, ExportStatesMlaAndMtpAndImportGivesTheSameTime) {
  test::ScratchDir dir;
  const std::string job = dir.file("job.yaml");
  ASSERT_EQ(run_cli("import mindformers '" + kDeepSeek +
                    "' --preset ascend-910b --allow-unmodelled --out '" + job + "'")
                .code,
            0);
  const test::CliRun x = run_cli("export '" + job + "' --format mindformers --json");
  ASSERT_EQ(x.code, 0) << x.err;
  const nlohmann::json j = nlohmann::json::parse(x.out);
  const std::string text = j["text"].get<std::string>();
  // DeepseekV3Config's keys, and the offsets over num_layers + mtp_depth: the YAML's own.
  for (const char* line :
       {"    type: DeepseekV3Config\n", "    q_lora_rank: 1536\n", "    kv_lora_rank: 512\n",
        "    qk_nope_head_dim: 128\n", "    qk_rope_head_dim: 64\n", "    v_head_dim: 128\n",
        "    mtp_depth: 1\n", "    offset: [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, -1]\n"})
    EXPECT_NE(text.find(line), std::string::npos) << line << text;
  // Given back to the shipped YAML, it imports as the job that was exported.
  const std::string given =
      test::write_file(dir.file("given.yaml"), test::yaml_with_export(kDeepSeek, text));
  const std::string back = dir.file("back.yaml");
  ASSERT_EQ(run_cli("import mindformers '" + given +
                    "' --preset ascend-910b --allow-unmodelled --out '" + back + "'")
                .code,
            0);
  const Config b = load_config(back);
  EXPECT_EQ(b.model.shape->mtp_layers, 1);
  EXPECT_EQ(b.model.shape->mla.kv_lora_rank, 512);
  EXPECT_EQ(test::run_json("simulate '" + back + "' --json")["iteration_time_ms"],
            j["iteration_time_ms"]);
}

// ---- vocab_emb_dp ------------------------------------------------------------------------

// Llama-2-13B at mp 2 without pipeline stages on 16 Ascend 910B.
const std::string kNoPipeline = R"(parallel:
  parallel_mode: 1
parallel_config:
  data_parallel: 8
  model_parallel: 2
  pipeline_stage: 1
  use_seq_parallel: False
model:
  model_config:
    type: LlamaConfig
    seq_length: 4096
    hidden_size: 5120
    num_layers: 40
    num_heads: 40
    intermediate_size: 13824
    vocab_size: 32000
    compute_dtype: "float16"
    use_flash_attention: True
)";

Config import_yaml(const test::ScratchDir& dir, const std::string& name, const std::string& yaml,
                   std::string* err = nullptr) {
  const std::string path = test::write_file(dir.file(name + ".yaml"), yaml);
  const std::string job = dir.file(name + "-job.yaml");
  const test::CliRun r = run_cli("import mindformers '" + path +
                                 "' --preset ascend-910b --devices 16 --out '" + job + "'");
  EXPECT_EQ(r.code, 0) << r.err;
  if (err) *err = r.err;
  return load_config(job);
}

TEST(MindFormersVocabEmbDp, AbsentIsMindFormersDefaultTrue) {
  test::ScratchDir dir;
  // template.py ParallelConfig: vocab_emb_dp = True.
  EXPECT_FALSE(import_yaml(dir, "absent", kNoPipeline).training.vocab_parallel);
  EXPECT_FALSE(import_yaml(dir, "true",
                           with(kNoPipeline, "  pipeline_stage: 1\n",
                                "  pipeline_stage: 1\n  vocab_emb_dp: True\n"))
                   .training.vocab_parallel);
  EXPECT_TRUE(import_yaml(dir, "false",
                          with(kNoPipeline, "  pipeline_stage: 1\n",
                               "  pipeline_stage: 1\n  vocab_emb_dp: False\n"))
                  .training.vocab_parallel);
  // build_parallel_config resets it to False with pipeline stages.
  std::string err;
  const Config staged =
      import_yaml(dir, "staged",
                  with(with(kNoPipeline, "  pipeline_stage: 1\n",
                            "  pipeline_stage: 2\n  micro_batch_num: 4\n  vocab_emb_dp: True\n"),
                       "  data_parallel: 8", "  data_parallel: 4"),
                  &err);
  EXPECT_TRUE(staged.training.vocab_parallel);
  EXPECT_NE(err.find("note: parallel_config.vocab_emb_dp: True has no effect"), std::string::npos)
      << err;
  // models/llama/llama.py: a vocabulary mp does not divide keeps the head and loss whole.
  const std::string odd = test::write_file(
      dir.file("odd.yaml"), with(kNoPipeline, "vocab_size: 32000", "vocab_size: 32001"));
  const test::CliRun r =
      run_cli("import mindformers '" + odd + "' --preset ascend-910b --devices 16");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(odd + ":16: model.model_config.vocab_size: not modelled yet"),
            std::string::npos)
      << r.err;
}

TEST(MindFormersVocabEmbDp, ExportStatesItAndImportGivesTheSameTime) {
  test::ScratchDir dir;
  const std::string job = dir.file("job.yaml");
  const std::string run = test::write_file(
      dir.file("run.yaml"),
      with(kNoPipeline, "  pipeline_stage: 1\n", "  pipeline_stage: 1\n  vocab_emb_dp: False\n"));
  // The replicated job: the run without the key (MindFormers' default True).
  const std::string replicated = test::write_file(dir.file("replicated.yaml"), kNoPipeline);
  ASSERT_EQ(run_cli("import mindformers '" + replicated +
                    "' --preset ascend-910b --devices 16 --out '" + job + "'")
                .code,
            0);
  const test::CliRun x = run_cli("export '" + job + "' --format mindformers --json");
  ASSERT_EQ(x.code, 0) << x.err;
  const nlohmann::json j = nlohmann::json::parse(x.out);
  const std::string text = j["text"].get<std::string>();
  EXPECT_NE(text.find("  vocab_emb_dp: True\n"), std::string::npos) << text;
  const std::string given =
      test::write_file(dir.file("given.yaml"), test::yaml_with_export(run, text));
  const std::string back = dir.file("back.yaml");
  ASSERT_EQ(run_cli("import mindformers '" + given + "' --preset ascend-910b --devices 16 --out '" +
                    back + "'")
                .code,
            0);
  EXPECT_FALSE(load_config(back).training.vocab_parallel);
  const nlohmann::json sim = test::run_json("simulate '" + back + "' --json");
  EXPECT_EQ(sim["iteration_time_ms"], j["iteration_time_ms"]);
  // Megatron-LM's embedding and output layer are always vocab-parallel.
  const test::CliRun m = run_cli("export '" + job + "' --format megatron");
  EXPECT_EQ(m.code, 2);
  EXPECT_NE(m.err.find("cannot state training.vocab_parallel: false"), std::string::npos) << m.err;
}

// ---- capacity factor ---------------------------------------------------------------------

TEST(CapacityFactorImport, MindFormersPadsWithoutUseGmm) {
  test::ScratchDir dir;
  const std::string yaml = test::slurp(kMixtralMf);
  auto imported = [&](const std::string& name, const std::string& text) {
    const std::string path = test::write_file(dir.file(name + ".yaml"), text);
    const std::string job = dir.file(name + "-job.yaml");
    const test::CliRun r = run_cli("import mindformers '" + path +
                                   "' --preset h100-sxm --devices 64 --out '" + job + "'");
    EXPECT_EQ(r.code, 0) << r.err;
    return load_config(job).training.moe_capacity_factor;
  };
  // The YAML's 1.1 (MoEV2, no use_gmm); MoEConfig's default 1.1 when absent; 1.5 given.
  EXPECT_EQ(imported("given", yaml), 1.1);
  EXPECT_EQ(imported("absent", with(yaml, "  capacity_factor: 1.1\n", "")), 1.1);
  EXPECT_EQ(imported("wider", with(yaml, "capacity_factor: 1.1", "capacity_factor: 1.5")), 1.5);
  // use_gmm: MoEV3's dropless grouped matmuls; a factor <= 0: the busiest expert's load.
  EXPECT_EQ(
      imported("gmm", with(yaml, "capacity_factor: 1.1", "capacity_factor: 1.1\n  use_gmm: True")),
      0.0);
  EXPECT_EQ(imported("dynamic", with(yaml, "capacity_factor: 1.1", "capacity_factor: -1")), 0.0);
}

TEST(CapacityFactorImport, MegatronPadsOnlyWithPadToCapacity) {
  test::ScratchDir dir;
  const std::string script = test::slurp(kMixtralArgs);
  auto imported = [&](const std::string& name, const std::string& flags, test::CliRun* out) {
    const std::string path = test::write_file(dir.file(name + ".txt"), script + flags + "\n");
    const std::string job = dir.file(name + "-job.yaml");
    *out = run_cli("import megatron '" + path + "' --preset h100-sxm --devices 64 --out '" + job +
                   "'");
    return out->code == 0 ? load_config(job).training.moe_capacity_factor : -1.0;
  };
  test::CliRun r;
  EXPECT_EQ(
      imported("pad", "  --moe-expert-capacity-factor 1.25 --moe-pad-expert-input-to-capacity", &r),
      1.25)
      << r.err;
  EXPECT_EQ(imported("drop", "  --moe-expert-capacity-factor 1.25", &r), 0.0) << r.err;
  EXPECT_NE(r.err.find("drops the tokens over capacity only"), std::string::npos) << r.err;
  // Megatron-LM's own refusals (transformer_config.py __post_init__).
  imported("alone", "  --moe-pad-expert-input-to-capacity", &r);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--moe-pad-expert-input-to-capacity: needs --moe-expert-capacity-factor "
                       "(Megatron-LM: \"moe_expert_capacity_factor must be set to use "
                       "moe_pad_expert_input_to_capacity\")"),
            std::string::npos)
      << r.err;
  imported("sinkhorn",
           "  --moe-expert-capacity-factor 1.25 --moe-router-load-balancing-type sinkhorn", &r);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("moe_expert_capacity_factor only works with aux_loss, seq_aux_loss, "
                       "global_aux_loss or none load balancing"),
            std::string::npos)
      << r.err;
}

TEST(CapacityFactorExport, BothFrameworksGiveBackTheSameTime) {
  test::ScratchDir dir;
  const std::string config = "'" + kMixtralExample + "' --set training.moe_capacity_factor=1.25";
  // Megatron-LM: both flags, read back by the import.
  {
    const test::CliRun x = run_cli("export " + config + " --format megatron --json");
    ASSERT_EQ(x.code, 0) << x.err;
    const nlohmann::json j = nlohmann::json::parse(x.out);
    const std::string text = j["text"].get<std::string>();
    EXPECT_NE(text.find("--moe-expert-capacity-factor 1.25\n--moe-pad-expert-input-to-capacity\n"),
              std::string::npos)
        << text;
    const std::string given = test::write_file(
        dir.file("given.txt"), test::script_with_export(test::slurp(kMixtralArgs), text));
    const std::string back = dir.file("back.yaml");
    ASSERT_EQ(run_cli("import megatron '" + given + "' --preset h100-sxm --devices 64 --out '" +
                      back + "'")
                  .code,
              0);
    EXPECT_EQ(load_config(back).training.moe_capacity_factor, 1.25);
    EXPECT_EQ(test::run_json("simulate '" + back + "' --json")["iteration_time_ms"],
              j["iteration_time_ms"]);
  }
  // MindFormers: capacity_factor with MoEV2 (use_gmm False), into the Mixtral run.
  {
    const test::CliRun x = run_cli("export " + config + " --format mindformers --json");
    ASSERT_EQ(x.code, 0) << x.err;
    const nlohmann::json j = nlohmann::json::parse(x.out);
    const std::string text = j["text"].get<std::string>();
    EXPECT_NE(text.find("  capacity_factor: 1.25\n  use_gmm: False\n"), std::string::npos) << text;
    const std::string given =
        test::write_file(dir.file("given.yaml"), test::yaml_with_export(kMixtralMf, text));
    const std::string back = dir.file("back-mf.yaml");
    ASSERT_EQ(run_cli("import mindformers '" + given + "' --preset h100-sxm --devices 64 --out '" +
                      back + "'")
                  .code,
              0);
    EXPECT_EQ(load_config(back).training.moe_capacity_factor, 1.25);
    EXPECT_EQ(test::run_json("simulate '" + back + "' --json")["iteration_time_ms"],
              j["iteration_time_ms"]);
  }
  // Dropless: the Megatron export says to remove a script's factor; MindFormers' says use_gmm.
  const test::CliRun m = run_cli("export '" + kMixtralExample + "' --format megatron");
  EXPECT_NE(m.out.find("#   --moe-expert-capacity-factor\n"), std::string::npos) << m.out;
  const test::CliRun f = run_cli("export '" + kMixtralExample + "' --format mindformers");
  EXPECT_NE(f.out.find("  use_gmm: True\n"), std::string::npos) << f.out;
}

}  // namespace mindformers_deepseek_test
}  // namespace bmpipe
