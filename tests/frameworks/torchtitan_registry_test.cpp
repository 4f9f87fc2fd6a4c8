// `bmpipe import torchtitan` of torchtitan's 2026 launch form, a config registry function
// named by --module/--config with --section.option overrides (pytorch/torchtitan at
// b5bcd76c66d0, torchtitan/config/manager.py). The expected values are worked by hand from
// that commit's torchtitan/models/llama3/config_registry.py and
// torchtitan/models/deepseek_v3/config_registry.py: a micro-batch of
// num_tokens_per_microbatch_per_dp_rank tokens is that many over max_context_length
// sequences (torchtitan/config/configs.py); FullAC is full recomputation, SelectiveAC the
// per-op policy; Float8LinearConverter's default recipe is rowwise; CUDA graphs are on unless
// training.disable_cuda_graphs, and refused with pipeline or (standard) expert parallelism
// (torchtitan/trainer.py, _validate_cuda_graphs).
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>

#include "frameworks/importers.hpp"
#include "frameworks/torchtitan/import.hpp"
#include "frameworks/torchtitan/registry.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace torchtitan_registry_test {

using test::run_cli;

ImportedJob import(const std::string& command) {
  return read_torchtitan_command(command, "launch.sh");
}

/// The message of the ImportError `command` raises, "" if none.
std::string refusal(const std::string& command) {
  try {
    import(command);
  } catch (const ImportError& e) {
    return e.what();
  }
  return "";
}

std::string source(const std::string& path) {
  return std::string(BMPIPE_SOURCE_DIR) + "/" + path;
}

TEST(TorchTitanRegistry, TheImporterTellsACommandLineFromAToml) {
  EXPECT_TRUE(is_torchtitan_command("--module llama3 --config llama3_8b\n"));
  EXPECT_TRUE(is_torchtitan_command("NGPU=8 CONFIG=llama3_8b MODULE=llama3 ./run_train.sh\n"));
  EXPECT_TRUE(is_torchtitan_command("python -m torchtitan.train --module=llama3 --config=x"));
  EXPECT_FALSE(is_torchtitan_command("# --module llama3\n[model]\nname = \"llama3\"\n"));
  EXPECT_FALSE(is_torchtitan_command("[job]\ndescription = \"--module x\"\n"));
  EXPECT_EQ(find_importer("torchtitan")->read, &read_torchtitan);
}

TEST(TorchTitanRegistry, Llama3_8bIsItsRegistryFunction) {
  const ImportedJob job = import("--module llama3 --config llama3_8b\n");
  EXPECT_EQ(job.model_name, "llama3-8b");
  EXPECT_EQ(job.seq_length, 8192);     // max_context_length 8192
  EXPECT_EQ(job.micro_batch_size, 1);  // 1 * 8192 tokens / 8192
  EXPECT_EQ(job.microbatches, 1);      // num_tokens_per_train_step -1
  EXPECT_EQ(job.tp, 1);
  EXPECT_FALSE(job.dp.has_value());  // data_parallel_shard_degree -1: the devices decide
  EXPECT_EQ(job.fsdp, true);
  EXPECT_EQ(job.kernels, "eager");               // CompileConfig() is off
  EXPECT_EQ(job.cuda_graphs, "full_iteration");  // disable_cuda_graphs False
  ASSERT_EQ(job.recompute.size(), 32u);
  EXPECT_EQ(job.recompute[0], Recompute::selective);  // SelectiveAC: per op
  EXPECT_TRUE(job.unmodelled.empty());
}

TEST(TorchTitanRegistry, Llama3_70bAnd405bAreTheirRegistryFunctions) {
  const ImportedJob b70 = import("--module llama3 --config llama3_70b\n");
  EXPECT_EQ(b70.micro_batch_size, 8);  // 8 * 8192 / 8192
  EXPECT_EQ(b70.tp, 8);
  EXPECT_EQ(b70.recompute.at(79), Recompute::full);  // FullAC
  EXPECT_EQ(b70.kernels, "eager");
  EXPECT_TRUE(b70.unmodelled.empty());

  const ImportedJob b405 = import("--module torchtitan.models.llama3 --config llama3_405b\n");
  EXPECT_EQ(b405.model_name, "llama3-405b");
  EXPECT_EQ(b405.micro_batch_size, 2);  // 2 * 8192 / 8192
  EXPECT_EQ(b405.tp, 8);
  EXPECT_EQ(b405.kernels, "fused");       // compile enable, components model and loss
  EXPECT_EQ(b405.tp_comm_overlap, true);  // compile.enable_async_tensor_parallel
  EXPECT_EQ(b405.recompute.at(0), Recompute::full);
  // Float8LinearConverter's default recipe at b5bcd76c66d0 is rowwise: e4m3 for every
  // operand (bmpipe's fp8_recipe rowwise), read from the --config line.
  EXPECT_TRUE(b405.unmodelled.empty());
  EXPECT_EQ(b405.fp8, "e4m3");
  EXPECT_EQ(b405.fp8_recipe, "rowwise");
  EXPECT_EQ(b405.origin.at("training.fp8_recipe").line, 1);
  EXPECT_EQ(b405.origin.at("training.fp8_recipe").key, "--config llama3_405b");
}

TEST(TorchTitanRegistry, DeepSeekV3IsItsRegistryFunctions) {
  for (const auto& [config, ep] : {std::pair{"deepseek_v3_16b", 8}, {"deepseek_v3_671b", 2}}) {
    const ImportedJob job = import(std::string("--module deepseek_v3 --config ") + config + "\n");
    EXPECT_EQ(job.seq_length, 4096) << config;
    EXPECT_EQ(job.micro_batch_size, 4) << config;  // 4 * 4096 / 4096
    EXPECT_EQ(job.ep, ep) << config;
    EXPECT_EQ(job.moe_dispatcher, "alltoall") << config;
    EXPECT_EQ(job.kernels, "eager") << config;            // compile components ["loss"]: no model
    EXPECT_FALSE(job.cuda_graphs.has_value()) << config;  // disable_cuda_graphs True
    EXPECT_EQ(job.schedule, "1f1b") << config;            // Interleaved1F1B, but no pipeline
    EXPECT_TRUE(job.unmodelled.empty()) << config;
  }
}

TEST(TorchTitanRegistry, AnOverrideChangesItsFieldAndNamesItsLine) {
  const ImportedJob job = import(
      "NGPU=64 MODULE=llama3 CONFIG=llama3_70b ./run_train.sh \\\n"
      "  --parallelism.tensor_parallel_degree 4 \\\n"
      "  --training.steps=20\n");
  EXPECT_EQ(job.tp, 4);
  EXPECT_EQ(job.micro_batch_size, 8);  // the function's, unchanged
  EXPECT_EQ(job.seq_length, 8192);
  const Origin& tp = job.origin.at("training.tp");
  EXPECT_EQ(tp.line, 2);
  EXPECT_EQ(tp.key, "--parallelism.tensor_parallel_degree");

  // A new option of 2026: the context length; the micro-batch keeps its 8192 tokens.
  const ImportedJob ctx =
      import("--module llama3 --config llama3_8b --training.max_context_length 4096\n");
  EXPECT_EQ(ctx.seq_length, 4096);
  EXPECT_EQ(ctx.micro_batch_size, 2);  // 8192 / 4096

  // Pipeline parallelism needs the CUDA graphs off; 4 micro-batches of 8192 tokens.
  const ImportedJob pp = import(
      "python -m torchtitan.train --module llama3 --config llama3_8b \\\n"
      "  --training.disable_cuda_graphs --parallelism.pipeline_parallel_degree 2 \\\n"
      "  --parallelism.num_pp_microbatches 4 --compile.enable\n");
  EXPECT_EQ(pp.pp, 2);
  EXPECT_EQ(pp.microbatches, 4);
  EXPECT_EQ(pp.micro_batch_size, 1);
  EXPECT_EQ(pp.kernels, "fused");
  EXPECT_FALSE(pp.cuda_graphs.has_value());

  // A step of 131072 tokens over dp 8 (replicate 8, shard 1) is 2 gradient accumulation steps
  // of 1 sequence of 8192 a rank: 16 sequences a step.
  const ImportedJob step = import(
      "--module llama3 --config llama3_8b --parallelism.data_parallel_shard_degree 1 "
      "--parallelism.data_parallel_replicate_degree 8 --training.dtype bfloat16 "
      "--training.num_tokens_per_train_step 131072\n");
  EXPECT_EQ(step.global_batch_size, 16);
}

TEST(TorchTitanRegistry, BadCommandsAreRefusedWithTheirLineAndFlag) {
  EXPECT_EQ(refusal("--module llama3 --config llama3_7b\n"),
            "launch.sh:1: --config: Config function 'llama3_7b' not found in "
            "torchtitan.models.llama3.config_registry (did you mean 'llama3_8b'?) (bmpipe "
            "carries llama3_8b, llama3_70b, llama3_405b)");
  EXPECT_EQ(refusal("--module llama3 \\\n --config llama3_debugmodel\n"),
            "launch.sh:2: --config: torchtitan registers llama3_debugmodel, but bmpipe has no "
            "table of it (a debug model, or a change in the model spec bmpipe does not read); "
            "it carries llama3_8b, llama3_70b, llama3_405b");
  EXPECT_EQ(refusal("--config llama3_8b\n"),
            "launch.sh:1: --module: --module is required. Example: --module llama3 --config "
            "llama3_8b");
  EXPECT_EQ(refusal("--module llama3 --config llama3_8b \\\n"
                    "  --parallelism.tensor_paralel_degree 2\n"),
            "launch.sh:2: --parallelism.tensor_paralel_degree: unknown option: torchtitan has "
            "no --parallelism.tensor_paralel_degree (did you mean "
            "'parallelism.tensor_parallel_degree'?)");
  EXPECT_EQ(refusal("--module llama3 --config llama3_8b \\\n"
                    "  --parallelism.tensor_parallel_degree two\n"),
            "launch.sh:2: --parallelism.tensor_parallel_degree: expected an integer, got \"two\"");
  EXPECT_EQ(refusal("--module llama3 --config llama3_8b --parallelism.tensor_parallel_degree\n"),
            "launch.sh:1: --parallelism.tensor_parallel_degree: expected a value after "
            "--parallelism.tensor_parallel_degree");
  EXPECT_EQ(refusal("--module llama3 --config llama3_8b\n--training.seq_len 4096\n"),
            "launch.sh:2: --training.seq_len: not an option of torchtitan at b5bcd76c66d0 (it "
            "was in v0.2.2's job TOML); torchtitan says it with --training.max_context_length");
  EXPECT_EQ(refusal("--module llama3 --config llama3_8b --model.flavor 70B\n"),
            "launch.sh:1: --model.flavor: not an option of torchtitan's command line at "
            "b5bcd76c66d0: Trainer.Config.model_spec is tyro.conf.Suppress, so the model, its "
            "flavor and converters come from the --config function");
  EXPECT_EQ(refusal("--module llama3 --config llama3_8b \\\n"
                    "  --parallelism.pipeline_parallel_degree 2\n"),
            "launch.sh:2: --parallelism.pipeline_parallel_degree: CUDA graphs do not support "
            "pipeline parallelism yet. Set --training.disable_cuda_graphs (torchtitan's check, "
            "trainer.py)");
  EXPECT_EQ(refusal("--module llama3 --config llama3_8b --training.max_context_length 3000\n"),
            "launch.sh:1: --training.max_context_length: bmpipe models whole sequences of "
            "max_context_length: 8192 tokens a micro-batch are not a multiple of 3000");
  EXPECT_EQ(refusal("--module llama3 --config llama3_8b stray\n"),
            "launch.sh:1: stray: expected --module NAME, --config FUNCTION or an option "
            "--section.option [VALUE] (torchtitan's command line), got 'stray'");
  EXPECT_EQ(refusal("--module llama3 --config $CONFIG\n"),
            "launch.sh:1: --config: a shell expansion ($ or `), which bmpipe does not perform; "
            "write the value");
  EXPECT_EQ(refusal("--module qwen3 --config qwen3_8b\n"),
            "launch.sh:1: --module: bmpipe carries the config registries of llama3 and "
            "deepseek_v3, not qwen3");
}

// Trainer.Config's 2026 fields (torchtitan/trainer.py): paths and components that cannot
// change time or memory are listed as ignored; the loss's options and code overrides can.
TEST(TorchTitanRegistry, TheNewComponentsAreIgnoredOrUnmodelled) {
  const ImportedJob job = import(
      "--module llama3 --config llama3_8b --hf_assets_path ./assets/hf/Llama-3.1-8B \\\n"
      "  --profiler.no-enable_profiling --dataloader.shuffle false \\\n"
      "  --loss.chunk_size 4096\n");
  const auto ignored = [&](const std::string& what) {
    return std::find(job.ignored.begin(), job.ignored.end(), what) != job.ignored.end();
  };
  EXPECT_TRUE(ignored("hf_assets_path (not modelled)"));
  EXPECT_TRUE(ignored("profiler.no-enable_profiling (not modelled)"));
  EXPECT_TRUE(ignored("dataloader.shuffle (not modelled)"));
  ASSERT_EQ(job.unmodelled.size(), 1u);
  EXPECT_EQ(job.unmodelled[0].given, "--loss.chunk_size 4096");
  EXPECT_EQ(job.unmodelled[0].origin.line, 3);
  EXPECT_EQ(refusal("--module llama3 --config llama3_8b --parallelism.num_pp_microbatches "
                    "99999999999\n"),
            "launch.sh:1: --parallelism.num_pp_microbatches: must be at most 2147483647, got "
            "99999999999");
}

// The CLI: the shipped command files import and simulate, and a bad one exits 2.
TEST(TorchTitanRegistry, ShippedCommandsImportAndSimulate) {
  test::ScratchDir dir;
  for (const char* config :
       {"llama3_8b", "llama3_70b", "llama3_405b", "deepseek_v3_16b", "deepseek_v3_671b"}) {
    const std::string module =
        std::string(config).rfind("llama3", 0) == 0 ? "llama3" : "deepseek_v3";
    const std::string cmd = test::write_file(dir.file(std::string(config) + ".sh"),
                                             "--module " + module + " --config " + config + "\n");
    const std::string out = dir.file(std::string(config) + ".yaml");
    // Issue 41: the registry's entries import as they are, with no --allow-unmodelled.
    const test::CliRun imported = run_cli("import torchtitan '" + cmd +
                                          "' --preset h100-sxm --devices 64 --out '" + out + "'");
    ASSERT_EQ(imported.code, 0) << config << "\n" << imported.err;
    EXPECT_EQ(imported.err.find("warning:"), std::string::npos) << config << "\n" << imported.err;
    const nlohmann::json sim = test::run_json("simulate '" + out + "' --json");
    EXPECT_GT(sim["iteration_time_ms"].get<double>(), 0.0) << config;
    EXPECT_EQ(sim["job"]["dp"].get<int>() * sim["job"]["tp"].get<int>(), 64) << config;
  }
  for (const char* file : {"registry_llama3_70b_tp4.sh", "registry_deepseek_v3_16b_pp2.sh"}) {
    const std::string path = source("tests/data/torchtitan/") + file;
    const std::string out = dir.file(std::string(file) + ".yaml");
    const test::CliRun imported = run_cli("import torchtitan '" + path +
                                          "' --preset h100-sxm --devices 64 --out '" + out + "'");
    ASSERT_EQ(imported.code, 0) << file << "\n" << imported.err;
    EXPECT_EQ(test::run_json("simulate '" + out + "' --json")["ok"], true) << file;
  }
  const std::string bad =
      test::write_file(dir.file("bad.sh"), "--module llama3 --config llama3_8b \\\n --x.y 1\n");
  const test::CliRun r = run_cli("import torchtitan '" + bad + "' --preset h100-sxm --devices 8");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("bad.sh:2: --x.y: unknown option"), std::string::npos) << r.err;
}

}  // namespace torchtitan_registry_test
}  // namespace bmpipe
