// `bmpipe import torchtitan` and `bmpipe export --format torchtitan`: torchtitan's stock
// v0.2.2 job TOMLs (tests/data/torchtitan, copied from pytorch/torchtitan at
// 73a0e6979dd1) read with torchtitan's own defaults and rules and simulated; its refusals by
// their messages; its split into stages and layer-selective checkpointing worked by hand from
// torchtitan/distributed/pipeline_parallel.py and activation_checkpoint.py; and the round
// trip of every shipped example torchtitan's TOML can state, export -> import -> simulate,
// which must give the exported time to the digit.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "frameworks/torchtitan/export.hpp"
#include "frameworks/torchtitan/flavors.hpp"
#include "frameworks/torchtitan/formats.hpp"
#include "frameworks/torchtitan/import.hpp"
#include "support/support.hpp"
#include "support/torchtitan_round_trip.hpp"

namespace bmpipe {
namespace torchtitan_test {

namespace fs = std::filesystem;
using R = Recompute;
using test::run_cli;

std::string source(const std::string& path) {
  return std::string(BMPIPE_SOURCE_DIR) + "/" + path;
}

std::string stock(const std::string& name) {
  return source("tests/data/torchtitan/" + name + ".toml");
}

ImportedJob import(const std::string& toml) {
  return read_torchtitan_toml(toml, "job.toml");
}

/// The message of the ImportError `toml` raises, "" if none.
std::string refusal(const std::string& toml) {
  try {
    import(toml);
  } catch (const ImportError& e) {
    return e.what();
  }
  return "";
}

/// The reasons of the job's unmodelled keys, joined.
std::string unmodelled(const ImportedJob& job) {
  std::string out;
  for (const Unmodelled& u : job.unmodelled) out += u.given + ": " + u.reason + "\n";
  return out;
}

// A small job written for these tests; line numbers matter below.
const std::string kJob = R"([model]
name = "llama3"
flavor = "8B"

[training]
local_batch_size = 8
seq_len = 4096

[parallelism]
data_parallel_shard_degree = 2
tensor_parallel_degree = 2
pipeline_parallel_degree = 2
pipeline_parallel_schedule = "Interleaved1F1B"
pipeline_parallel_microbatch_size = 1

[activation_checkpoint]
mode = "selective"
selective_ac_option = "2"
)";

TEST(TorchTitanImport, TheStockTomlsImportWithoutAllowingUnmodelledKeys) {
  for (const char* name :
       {"llama3_8b", "llama3_70b", "llama3_405b", "deepseek_v3_16b", "deepseek_v3_671b"}) {
    const ImportedJob job = read_torchtitan_toml(test::slurp(stock(name)), stock(name));
    EXPECT_TRUE(job.unmodelled.empty()) << name << "\n" << unmodelled(job);
    // data_parallel_shard_degree = -1: the devices decide dp.
    EXPECT_FALSE(job.dp.has_value()) << name;
    EXPECT_EQ(job.pp, 1) << name;
  }
}

TEST(TorchTitanImport, Llama3_405bReadsAsItsTomlStatesIt) {
  const ImportedJob job = read_torchtitan_toml(test::slurp(stock("llama3_405b")), "405b.toml");
  ASSERT_TRUE(job.shape);
  EXPECT_EQ(job.model_name, "llama3-405b");
  EXPECT_EQ(job.shape->num_layers, 126);
  EXPECT_EQ(job.shape->hidden_size, 16384);
  EXPECT_EQ(job.shape->ffn_hidden_size, 53248);  // [TT-ffn]: 1.2 x 43690, to 4096
  EXPECT_EQ(job.tp, 8);
  EXPECT_EQ(job.sequence_parallel, true);
  EXPECT_EQ(job.tp_comm_overlap, true);  // enable_async_tensor_parallel, with compile
  EXPECT_EQ(job.kernels, "fused");       // [compile] enable, "model" in components
  EXPECT_EQ(job.fp8, "hybrid");          // converters = ["float8"], recipe unset
  EXPECT_EQ(job.fp8_recipe, "tensorwise");
  EXPECT_EQ(job.micro_batch_size, 2);
  EXPECT_EQ(job.seq_length, 8192);
  EXPECT_EQ(job.fsdp, true);
  EXPECT_EQ(job.recompute, std::vector<R>(126, R::full));
  EXPECT_EQ(job.origin.at("training.tp").line, 43);
  // "float8" is v0.1.0's name, read with v0.2.2's [quantize.linear.float8] section.
  std::string notes;
  for (const std::string& n : job.notes) notes += n + "\n";
  EXPECT_NE(notes.find("quantize.linear.float8.enable_fsdp_float8_all_gather: FSDP gathers the "
                       "weights in float8"),
            std::string::npos)
      << notes;  // the copy's two header lines + 41
}

TEST(TorchTitanImport, Llama3_8bAndDeepSeekReadTheirCheckpointingAndExperts) {
  const ImportedJob l = read_torchtitan_toml(test::slurp(stock("llama3_8b")), "8b.toml");
  EXPECT_EQ(l.kernels, "eager");                             // compile.enable = false
  EXPECT_EQ(l.recompute, std::vector<R>(32, R::selective));  // selective_ac_option "op"
  EXPECT_EQ(l.micro_batch_size, 1);
  EXPECT_EQ(l.microbatches, 1);
  EXPECT_EQ(l.fp8, std::nullopt);  // the converters line is a comment
  const ImportedJob d = read_torchtitan_toml(test::slurp(stock("deepseek_v3_16b")), "16b.toml");
  ASSERT_TRUE(d.shape);
  EXPECT_EQ(d.shape->num_layers, 27);
  EXPECT_EQ(d.shape->moe.num_experts, 64);
  EXPECT_EQ(d.shape->moe.top_k, 6);
  EXPECT_EQ(d.shape->moe.shared_ffn, 2 * 1408);
  EXPECT_EQ(d.shape->moe.first_dense_layers, 1);
  EXPECT_EQ(d.shape->mla.q_lora_rank, 0);
  EXPECT_EQ(d.shape->mla.kv_lora_rank, 512);
  EXPECT_EQ(d.ep, 8);
  EXPECT_EQ(d.etp, 1);
  EXPECT_EQ(d.moe_dispatcher, "alltoall");
  EXPECT_EQ(d.kernels, "eager");  // compile components = ["loss"]: the model is not compiled
  const ImportedJob v3 = read_torchtitan_toml(test::slurp(stock("deepseek_v3_671b")), "671b.toml");
  ASSERT_TRUE(v3.shape);
  EXPECT_EQ(v3.shape->num_layers, 61);
  EXPECT_EQ(v3.shape->mtp_layers, 0);  // torchtitan's DeepSeek-V3 has no MTP module
  EXPECT_EQ(v3.shape->moe.router_groups, 8);
  EXPECT_EQ(v3.ep, 1);
}

TEST(TorchTitanImport, TheStockTomlsSimulateOnTheDevicesGiven) {
  test::ScratchDir dir;
  for (const char* name :
       {"llama3_8b", "llama3_70b", "llama3_405b", "deepseek_v3_16b", "deepseek_v3_671b"}) {
    const std::string out = dir.file(std::string(name) + ".yaml");
    const test::CliRun imported = run_cli("import torchtitan '" + stock(name) +
                                          "' --preset h100-sxm --devices 64 --out '" + out + "'");
    ASSERT_EQ(imported.code, 0) << name << ": " << imported.err;
    EXPECT_EQ(imported.err.find("warning:"), std::string::npos) << name << ": " << imported.err;
    const test::CliRun sim = run_cli("simulate '" + out + "' --json");
    ASSERT_EQ(sim.code, 0) << name << ": " << sim.err;
    const nlohmann::json j = nlohmann::json::parse(sim.out);
    EXPECT_TRUE(j["ok"].get<bool>()) << name;
    // tp 8 in the 70B and 405B TOMLs.
    EXPECT_EQ(
        j["dp"].get<int>(),
        std::string(name).rfind("llama3_", 0) == 0 && std::string(name) != "llama3_8b" ? 8 : 64)
        << name;
  }
}

TEST(TorchTitanImport, ShardDegreeMinusOneNeedsDevices) {
  const test::CliRun r =
      run_cli("import torchtitan '" + stock("llama3_8b") + "' --preset h100-sxm");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("llama3_8b.toml:42: parallelism.data_parallel_shard_degree: the job "
                       "takes the devices left over (data_parallel_shard_degree -1: the devices "
                       "left over), so it does not say how many it runs on: give --devices N"),
            std::string::npos)
      << r.err;
}

TEST(TorchTitanImport, APipelineOfTwoRanksAndTwoStagesEach) {
  const ImportedJob job = import(kJob);
  EXPECT_EQ(job.schedule, "interleaved");
  EXPECT_EQ(job.pp, 2);
  EXPECT_EQ(job.vpp, 2);
  EXPECT_EQ(job.dp, 2);
  // generate_llm_fqn_per_model_part(4, 32, 1, 1): 34 effective layers, 8 per stage and 2
  // extra: 9 - 1, 9, 8, 8 - 1.
  EXPECT_EQ(job.partition, (std::vector<int>{8, 9, 8, 7}));
  EXPECT_EQ(job.micro_batch_size, 1);
  EXPECT_EQ(job.microbatches, 8);  // local_batch_size / pipeline_parallel_microbatch_size
  // Under a pipeline, FSDP gathers once a step and reduce-scatters after the last backward.
  EXPECT_EQ(job.zero_stage, 1);
  EXPECT_EQ(job.overlap_param_gather, true);
  EXPECT_EQ(job.fsdp, std::nullopt);
  // _apply_layer_sac: rank 0 builds stages 0 and 2 (layers 0-7, 17-24), rank 1 stages 1 and
  // 3 (8-16, 25-31), each counting from 1; every 2nd layer it builds is checkpointed.
  std::vector<R> want(32, R::none);
  for (int i : {1, 3, 5, 7, 18, 20, 22, 24, 9, 11, 13, 15, 25, 27, 29, 31}) want[i] = R::full;
  EXPECT_EQ(job.recompute, want);
}

TEST(TorchTitanImport, OlderKeyNamesReadAsTheyWere) {
  // training.batch_size before 8570415c3, [float8] and training.compile of v0.1.0.
  const ImportedJob job = import(R"([model]
name = "llama3"
flavor = "70B"
converters = ["float8"]
[training]
batch_size = 4
seq_len = 2048
compile = true
[float8]
enable_fsdp_float8_all_gather = true
[activation_checkpoint]
mode = "none"
)");
  EXPECT_EQ(job.micro_batch_size, 4);
  EXPECT_EQ(job.kernels, "fused");
  EXPECT_EQ(job.fp8, "hybrid");
  EXPECT_EQ(job.recompute, std::vector<R>(80, R::none));
  EXPECT_TRUE(job.unmodelled.empty()) << unmodelled(job);
}

TEST(TorchTitanImport, RefusalsNameFileLineKeyAndWhatWasExpected) {
  auto edit = [](const std::string& from, const std::string& to) {
    std::string t = kJob;
    t.replace(t.find(from), from.size(), to);
    return t;
  };
  EXPECT_EQ(refusal(edit("seq_len", "seq_length")),
            "job.toml:7:1: training.seq_length: unknown key: torchtitan has no key "
            "'seq_length' in [training] (did you mean 'seq_len'?)");
  EXPECT_EQ(refusal(edit("\"8B\"", "\"8b\"")),
            "job.toml:3:10: model.flavor: bmpipe has no shape of llama3 flavor '8b' (did you "
            "mean '8B'?) (it reads llama3 8B, 70B, 405B; deepseek_v3 16B, 671B)");
  EXPECT_EQ(refusal(edit("\"8B\"", "\"debugmodel\"")),
            "job.toml:3:10: model.flavor: bmpipe has no shape of llama3 flavor 'debugmodel' (it "
            "reads llama3 8B, 70B, 405B; deepseek_v3 16B, 671B)");
  EXPECT_EQ(refusal(edit("\"llama3\"", "\"llama4\"")),
            "job.toml:2:8: model.name: bmpipe has no shape of torchtitan's model 'llama4' (it "
            "reads llama3 8B, 70B, 405B; deepseek_v3 16B, 671B)");
  EXPECT_EQ(refusal(edit("\"Interleaved1F1B\"", "\"Interleaved1FB\"")),
            "job.toml:13:30: parallelism.pipeline_parallel_schedule: Unknown schedule name "
            "'Interleaved1FB' (did you mean 'Interleaved1F1B'?) (torch's get_schedule_class "
            "takes 1F1B, Interleaved1F1B, GPipe, LoopedBFS, InterleavedZeroBubble, "
            "PipelineScheduleSingle, PipelineScheduleMulti, ZBVZeroBubble and DualPipeV)");
  EXPECT_EQ(refusal(edit("microbatch_size = 1", "microbatch_size = 3")),
            "job.toml:14:37: parallelism.pipeline_parallel_microbatch_size: Batch size 8 must "
            "be divisible by microbatch_size 3 (torchtitan's check)");
  EXPECT_EQ(refusal(edit("\"2\"", "\"two\"")),
            "job.toml:18:23: activation_checkpoint.selective_ac_option: Invalid selective AC "
            "option: two. Valid options: 'op' or a positive int representing layer frequency");
  EXPECT_EQ(refusal(edit("tensor_parallel_degree = 2",
                         "tensor_parallel_degree = 2\nenable_async_tensor_parallel = true")),
            "job.toml:12:32: parallelism.enable_async_tensor_parallel: Async TP requires "
            "'model' in --compile.components and --compile.enable (torchtitan's check)");
  EXPECT_EQ(refusal(edit("[training]", "[training")).substr(0, 30),
            "job.toml:5:10: malformed TOML:");
  // train.py's check of the global batch; pipeline_llm's of the stages per rank.
  EXPECT_EQ(refusal(edit("seq_len = 4096", "seq_len = 4096\nglobal_batch_size = 20")),
            "job.toml:8:21: training.global_batch_size: global batch size must be multiple of "
            "local batch size times data-parallel degree (20 % (8 * 2) != 0)");
  EXPECT_EQ(
      refusal(edit("\"Interleaved1F1B\"", "\"1F1B\"\npipeline_parallel_layers_per_stage = 3")),
      "job.toml:14:38: parallelism.pipeline_parallel_layers_per_stage: Single stage "
      "schedule requires exactly 1 stage per rank (1F1B with 6 stages per rank)");
  EXPECT_EQ(refusal(edit("\"Interleaved1F1B\"",
                         "\"ZBVZeroBubble\"\npipeline_parallel_layers_per_stage = 6")),
            "job.toml:14:38: parallelism.pipeline_parallel_layers_per_stage: v schedules "
            "assume 2 stages per rank (ZBVZeroBubble with 3 stages per rank)");
  EXPECT_EQ(refusal(edit("data_parallel_shard_degree = 2", "data_parallel_shard_degree = 0")),
            "job.toml:10:30: parallelism.data_parallel_shard_degree: must be -1 (the devices "
            "left over) or at least 1, got 0");
}

// toml++ 3.3.0 reaches an unreachable branch classifying some non-ASCII characters as
// whitespace (the fuzz target's crash-tomlplusplus-unreachable-whitespace.toml): they are
// refused before it reads the file; others pass.
TEST(TorchTitanImport, CharactersTomlPlusPlusMisreadsAreRefusedFirst) {
  EXPECT_EQ(refusal("[model]\nflavor = \"8B\" # \xc8\x8f\n"),
            "job.toml:2:17: the character U+020F: toml++ 3.3, which reads the TOML, cannot "
            "classify it safely (a bug of that version); remove it");
  EXPECT_EQ(refusal("[model]\nflavor = \"8B\" # \xef\xad\x80\n").substr(0, 36),
            "job.toml:2:17: the character U+FB40:");
  EXPECT_EQ(refusal("[model]\nflavor = \"8B\" # \xe4\xb8\xad \xe3\x80\x80\n"), "");
}

TEST(TorchTitanImport, WhatBmpipeDoesNotModelIsRefusedUnlessAllowed) {
  auto given = [](const std::string& extra, const std::string& section = "[parallelism]") {
    std::string t = kJob;
    t.replace(t.find(section), section.size(), section + "\n" + extra);
    return unmodelled(import(t));
  };
  // Hybrid sharding is modelled (training.fsdp_shard_group, hsdp_interop_test.cpp).
  EXPECT_EQ(given("data_parallel_replicate_degree = 2"), "");
  std::string looped = kJob;
  looped.replace(looped.find("Interleaved1F1B"), 15, "LoopedBFS");
  EXPECT_EQ(unmodelled(import(looped)),
            "parallelism.pipeline_parallel_schedule = \"LoopedBFS\": a looped breadth-first "
            "schedule (every micro-batch through a rank's first stage, then its next), which "
            "bmpipe has no schedule for; simulated as Interleaved1F1B\n");
  EXPECT_EQ(given("enable_cpu_offload = true", "[training]"),
            "training.enable_cpu_offload = true: FSDP2 keeps parameters, gradients and "
            "optimizer state on the host and moves them for every layer, which bmpipe does not "
            "model\n");
  // At torchtitan's default the same keys are inert.
  EXPECT_EQ(given("enable_cpu_offload = false", "[training]"), "");
  EXPECT_EQ(given("pipeline_parallel_schedule_csv = \"\""), "");
}

TEST(TorchTitanFormats, SplitAndPlacementAsTorchTitanComputesThem) {
  EXPECT_EQ(torchtitan_partition(126, 8, 1, 1), (std::vector<int>{15, 16, 16, 16, 16, 16, 16, 15}));
  EXPECT_EQ(torchtitan_partition(4, 1, 1, 1), (std::vector<int>{4}));
  EXPECT_THROW(torchtitan_partition(2, 5, 1, 1), FormatError);
  EXPECT_EQ(torchtitan_rank_stages(1, 4, 8, true), (std::vector<int>{1, 6}));
  EXPECT_EQ(torchtitan_rank_stages(1, 4, 8, false), (std::vector<int>{1, 5}));
  EXPECT_EQ(find_torchtitan_schedule("interleaved1f1b")->schedule, "interleaved");
  EXPECT_EQ(find_torchtitan_schedule("zbvzerobubble")->schedule, "zb-v");
  EXPECT_EQ(find_torchtitan_schedule("Interleaved"), nullptr);
}

TEST(TorchTitanExport, OneCheckpointRuleForEveryLayer) {
  ExportLayout l;
  l.pp = 2;
  l.stage_rank = {0, 1};
  l.partition = {2, 2};
  l.recompute = {R::none, R::full, R::none, R::full};  // every 2nd layer of each rank
  TorchTitanExport x = torchtitan_plan(l);
  EXPECT_TRUE(x.exact);
  EXPECT_EQ(x.mode, "selective");
  EXPECT_EQ(x.option, "2");
  l.recompute = {R::full, R::none, R::none, R::none};
  x = torchtitan_plan(l);
  EXPECT_FALSE(x.exact);
  EXPECT_EQ(x.mode, "full");
  EXPECT_EQ(x.expressed.recompute, std::vector<R>(4, R::full));
}

TEST(TorchTitanExport, AModelThatIsNoFlavorIsRefused) {
  const test::CliRun r = run_cli(
      "export '" + source("configs/examples/h100_mixtral_8x7b_ep8.yaml") + "' --format torchtitan");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--format: torchtitan's TOML names a model by [model] name and flavor, "
                       "and this model is none of the flavors bmpipe knows the shape of"),
            std::string::npos)
      << r.err;
}

// Every shipped example torchtitan's TOML can state goes out and comes back: export, import
// on the example's own cluster, simulate; the time must be the exported one, to the digit.
// The others are refused for their model, by name, and the hierarchical cp example for
// its cp_hierarchy (torchtitan's context parallelism is the ring alone).
TEST(TorchTitanExport, EveryStatableExampleRoundTripsToTheExportedTime) {
  EXPECT_EQ(
      test::torchtitan_round_trips(
          "torchtitan", "torchtitan's TOML names a model by [model] name and flavor",
          {{"h100_llama3_8b_32k_hcp",
            "torchtitan's TOML cannot state training.cp_comm_type a2a+p2p"}}),
      (std::set<std::string>{"gb200_llama3_70b_128k_cp8", "h100_llama31_405b_fp8_cp2",
                             "h100_llama3_70b_fp8", "h100_llama3_8b_fsdp", "h200_llama3_8b_hf"}));
}

TEST(TorchTitanExport, WhatTheTomlDropsIsSaidAndTheTimeIsItsOwn) {
  const test::CliRun x =
      run_cli("export '" + source("configs/examples/h100_llama31_405b_fp8_cp2.yaml") +
              "' --format torchtitan --json");
  ASSERT_EQ(x.code, 0) << x.err;
  const nlohmann::json j = nlohmann::json::parse(x.out);
  EXPECT_FALSE(j["exact"].get<bool>());
  const std::string notes = j["notes"].dump();
  EXPECT_NE(notes.find("Not stated: training.fp8 hybrid with the delayed recipe"),
            std::string::npos)
      << notes;
  EXPECT_NE(j["iteration_time_ms"].get<double>(), j["config_iteration_time_ms"].get<double>());
}

}  // namespace torchtitan_test
}  // namespace bmpipe
