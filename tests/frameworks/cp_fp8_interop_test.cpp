// Context parallelism and FP8 through Megatron-LM's flags (issue 19, item 6):
// --context-parallel-size, --cp-comm-type, --fp8-format and --fp8-recipe are read into
// training.cp, cp_comm_type, fp8 and fp8_recipe, an exchange or a recipe bmpipe does not
// model is refused naming FILE:LINE:flag, and import -> export -> import gives the same
// job back, with the time the export quoted; the same for MindFormers'
// parallel_config.context_parallel and context_parallel_algo.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "experiment/config.hpp"
#include "support/framework_files.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace {

using test::run_cli;

// Llama-3-8B-like dimensions, 4 layers. Line 4 holds the flags under test.
std::string script(const std::string& flags) {
  return "--num-layers 4 --hidden-size 4096 --num-attention-heads 32 --group-query-attention \\\n"
         "  --num-query-groups 8 --ffn-hidden-size 14336 --swiglu "
         "--untie-embeddings-and-output-weights \\\n"
         "  --vocab-size 128256 --attention-dropout 0 --hidden-dropout 0 --use-flash-attn \\\n"
         "  " +
         flags +
         " \\\n"
         "  --seq-length 8192 --micro-batch-size 1 --global-batch-size 16 --bf16 \\\n"
         "  --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2\n";
}

/// `bmpipe import megatron` of `text` on 16 H100 into `dir`/job.yaml.
test::CliRun import(const test::ScratchDir& dir, const std::string& text,
                    const std::string& name = "args.txt") {
  const std::string given = test::write_file(dir.file(name), text);
  return run_cli("import megatron '" + given + "' --preset h100-sxm --devices 16 --out '" +
                 dir.file("job.yaml") + "'");
}

// --fp8-param-gather (FP8 GEMM weights alone, training.fp8_param_gather) is read, written
// back by the export, and imported again to the time the export quoted; beside no FP8 it
// is ignored with the reason, as it changes nothing there.
TEST(CpFp8Interop, Fp8ParamGatherGoesBothWays) {
  test::ScratchDir dir;
  const test::CliRun r =
      import(dir, script("--fp8-format hybrid --fp8-recipe tensorwise --fp8-param-gather "
                         "--use-distributed-optimizer"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(load_config(dir.file("job.yaml")).training.fp8_param_gather);
  const test::CliRun x = run_cli("export '" + dir.file("job.yaml") + "' --format megatron --json");
  ASSERT_EQ(x.code, 0) << x.err;
  const nlohmann::json j = nlohmann::json::parse(x.out);
  const std::string text = j["text"].get<std::string>();
  EXPECT_NE(text.find("--fp8-param-gather\n"), std::string::npos) << text;
  const test::CliRun back = import(dir, test::script_with_export(script(""), text), "back.txt");
  ASSERT_EQ(back.code, 0) << back.err;
  const nlohmann::json sim =
      nlohmann::json::parse(run_cli("simulate '" + dir.file("job.yaml") + "' --json").out);
  EXPECT_EQ(sim["iteration_time_ms"], j["iteration_time_ms"]);
  const test::CliRun bf16 = import(dir, script("--fp8-param-gather --use-distributed-optimizer"));
  ASSERT_EQ(bf16.code, 0) << bf16.err;
  EXPECT_NE(bf16.err.find("--fp8-param-gather (no --fp8-format: the weights stay bf16)"),
            std::string::npos)
      << bf16.err;
  EXPECT_FALSE(load_config(dir.file("job.yaml")).training.fp8_param_gather);
}

TEST(CpFp8Interop, MegatronFlagsAreRead) {
  test::ScratchDir dir;
  const test::CliRun r =
      import(dir, script("--context-parallel-size 2 --cp-comm-type a2a --fp8-format hybrid "
                         "--fp8-recipe tensorwise"));
  ASSERT_EQ(r.code, 0) << r.err;
  const Config c = load_config(dir.file("job.yaml"));
  EXPECT_EQ(c.training.cp, 2);
  EXPECT_EQ(c.training.cp_comm_type, "a2a");
  EXPECT_EQ(c.training.fp8, "hybrid");
  EXPECT_EQ(c.training.fp8_recipe, "tensorwise");
  // 16 devices / (tp 2 x pp 2 x cp 2) = dp 2: 16 samples make 8 micro-batches.
  EXPECT_EQ(c.training.data_parallel(16), 2);
  EXPECT_EQ(c.training.microbatches, 8);
  // Each value names its flag.
  const std::string yaml = test::slurp(dir.file("job.yaml"));
  EXPECT_NE(yaml.find("cp: 2"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("--context-parallel-size"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("--fp8-recipe"), std::string::npos) << yaml;
}

TEST(CpFp8Interop, WithoutTheFlagsNothingIsWritten) {
  test::ScratchDir dir;
  ASSERT_EQ(import(dir, script("--use-distributed-optimizer")).code, 0);
  const Config c = load_config(dir.file("job.yaml"));
  EXPECT_EQ(c.training.cp, 1);
  EXPECT_EQ(c.training.fp8, "none");
  const std::string yaml = test::slurp(dir.file("job.yaml"));
  EXPECT_EQ(yaml.find("cp:"), std::string::npos) << yaml;
  EXPECT_EQ(yaml.find("fp8"), std::string::npos) << yaml;
}

TEST(CpFp8Interop, UnmodelledExchangesAndRecipesAreRefusedNamingTheFlag) {
  test::ScratchDir dir;
  for (const std::string& flags :
       {std::string("--context-parallel-size 2 --cp-comm-type allgather"),
        std::string("--context-parallel-size 2 --cp-comm-type p2p a2a p2p a2a"),
        std::string("--fp8-format hybrid --fp8-recipe custom")}) {
    const std::string path = dir.file("bad.txt");
    const test::CliRun r = import(dir, script(flags), "bad.txt");
    EXPECT_EQ(r.code, 2) << flags << "\n" << r.err;
    const std::string flag =
        flags.find("--cp-comm-type") != std::string::npos ? "--cp-comm-type" : "--fp8-recipe";
    EXPECT_NE(r.err.find(path + ":4: " + flag), std::string::npos) << flags << "\n" << r.err;
  }
  // An --fp8-format Megatron-LM does not know.
  const test::CliRun e = import(dir, script("--fp8-format e5m2"), "e5.txt");
  EXPECT_EQ(e.code, 2);
  EXPECT_NE(e.err.find(dir.file("e5.txt") + ":4: --fp8-format"), std::string::npos) << e.err;
  // cp not dividing seq_length / 2 is the config's own bad input, named on the flag's line.
  const test::CliRun odd = import(dir, script("--context-parallel-size 3"), "odd.txt");
  EXPECT_EQ(odd.code, 2) << odd.err;
}

TEST(CpFp8Interop, ImportExportImportIsTheSameJob) {
  test::ScratchDir dir;
  ASSERT_EQ(import(dir, script("--context-parallel-size 2 --cp-comm-type p2p --fp8-format e4m3 "
                               "--fp8-recipe blockwise"))
                .code,
            0);
  const std::string first = dir.file("job.yaml");
  const test::CliRun x = run_cli("export '" + first + "' --format megatron --json");
  ASSERT_EQ(x.code, 0) << x.err;
  const nlohmann::json j = nlohmann::json::parse(x.out);
  const std::string text = j["text"].get<std::string>();
  for (const char* flag : {"--context-parallel-size 2\n", "--cp-comm-type p2p\n",
                           "--fp8-format e4m3\n", "--fp8-recipe blockwise\n"})
    EXPECT_NE(text.find(flag), std::string::npos) << flag << "\n" << text;
  EXPECT_NE(text.find("x cp 2)"), std::string::npos) << text;
  // The export's flags, given to a script without them, import to the same job.
  const std::string given =
      test::write_file(dir.file("given.txt"), test::script_with_export(script("--lr 3e-4"), text));
  const std::string back = dir.file("back.yaml");
  const test::CliRun r = run_cli("import megatron '" + given +
                                 "' --preset h100-sxm --devices 16 --out '" + back + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  const Config a = load_config(first), b = load_config(back);
  EXPECT_EQ(b.training.cp, a.training.cp);
  EXPECT_EQ(b.training.cp_comm_type, a.training.cp_comm_type);
  EXPECT_EQ(b.training.fp8, a.training.fp8);
  EXPECT_EQ(b.training.fp8_recipe, a.training.fp8_recipe);
  EXPECT_EQ(b.training.tp, a.training.tp);
  EXPECT_EQ(b.training.pp, a.training.pp);
  EXPECT_EQ(b.training.microbatches, a.training.microbatches);
  const nlohmann::json sim = nlohmann::json::parse(run_cli("simulate '" + back + "' --json").out);
  EXPECT_EQ(sim["iteration_time_ms"], j["iteration_time_ms"]) << text;
}

// Hierarchical cp: --cp-comm-type a2a+p2p with --hierarchical-context-parallel-sizes (inner
// first) becomes training.cp_hierarchy and comes back through the export to the same job
// and time; MindFormers and torchtitan refuse it by name.
TEST(CpFp8Interop, HierarchicalCpGoesBothWays) {
  test::ScratchDir dir;
  const test::CliRun r = import(dir, script("--context-parallel-size 4 --cp-comm-type a2a+p2p "
                                            "--hierarchical-context-parallel-sizes 2 2"));
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string first = dir.file("job.yaml");
  const Config a = load_config(first);
  EXPECT_EQ(a.training.cp, 4);
  EXPECT_EQ(a.training.cp_comm_type, "a2a+p2p");
  EXPECT_EQ(a.training.cp_hierarchy, (std::vector<int>{2, 2}));
  EXPECT_NE(test::slurp(first).find("cp_hierarchy: [2, 2]"), std::string::npos);
  const test::CliRun x = run_cli("export '" + first + "' --format megatron --json");
  ASSERT_EQ(x.code, 0) << x.err;
  const nlohmann::json j = nlohmann::json::parse(x.out);
  const std::string text = j["text"].get<std::string>();
  EXPECT_NE(text.find("--context-parallel-size 4\n--cp-comm-type a2a+p2p\n"
                      "--hierarchical-context-parallel-sizes 2 2\n"),
            std::string::npos)
      << text;
  const test::CliRun back =
      import(dir, test::script_with_export(script("--lr 3e-4"), text), "back.txt");
  ASSERT_EQ(back.code, 0) << back.err;
  const Config b = load_config(dir.file("job.yaml"));
  EXPECT_EQ(b.training.cp_hierarchy, a.training.cp_hierarchy);
  EXPECT_EQ(b.training.cp_comm_type, a.training.cp_comm_type);
  const nlohmann::json sim =
      nlohmann::json::parse(run_cli("simulate '" + dir.file("job.yaml") + "' --json").out);
  EXPECT_EQ(sim["iteration_time_ms"], j["iteration_time_ms"]) << text;
  for (const char* format : {"mindformers", "torchtitan"}) {
    const test::CliRun e = run_cli("export '" + first + "' --format " + format);
    EXPECT_EQ(e.code, 2) << format << e.all();
    EXPECT_NE(e.err.find("cannot state training.cp_comm_type a2a+p2p"), std::string::npos) << e.err;
  }
}

// Megatron-LM's own checks, each naming FILE:LINE:flag with its message.
TEST(CpFp8Interop, BadHierarchiesAreRefusedWithMegatronsMessages) {
  test::ScratchDir dir;
  struct Case {
    std::string flags, flag, says;
  };
  const Case cases[] = {
      {"--context-parallel-size 4 --cp-comm-type a2a+p2p", "--cp-comm-type",
       "--hierarchical-context-parallel-sizes must be set when a2a+p2p is used in cp comm"},
      {"--context-parallel-size 4 --cp-comm-type a2a+p2p "
       "--hierarchical-context-parallel-sizes 2 4",
       "--hierarchical-context-parallel-sizes",
       "multiply to 8, not --context-parallel-size 4 (Megatron-LM asserts"},
      // Levels of INT_MAX ranks: the product is held, not overflowed.
      {"--context-parallel-size 4 --cp-comm-type a2a+p2p "
       "--hierarchical-context-parallel-sizes 2147483647 2147483647 2147483647",
       "--hierarchical-context-parallel-sizes", "multiply to more than 1099511627776, not"},
      // Asserted whatever the exchange.
      {"--context-parallel-size 4 --hierarchical-context-parallel-sizes 2 4",
       "--hierarchical-context-parallel-sizes", "multiply to 8"},
      {"--context-parallel-size 4 --cp-comm-type a2a+p2p "
       "--hierarchical-context-parallel-sizes 2 x",
       "--hierarchical-context-parallel-sizes", "expected sizes of at least 1, got"},
  };
  int n = 0;
  for (const Case& k : cases) {
    const std::string name = "bad" + std::to_string(n++) + ".txt";
    const test::CliRun r = import(dir, script(k.flags), name);
    EXPECT_EQ(r.code, 2) << k.flags << "\n" << r.err;
    EXPECT_NE(r.err.find(dir.file(name) + ":4: " + k.flag), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(k.says), std::string::npos) << r.err;
  }
  // Beside another exchange the sizes change nothing: ignored with the reason.
  const test::CliRun p2p = import(
      dir, script("--context-parallel-size 4 --hierarchical-context-parallel-sizes 2 2"), "p.txt");
  ASSERT_EQ(p2p.code, 0) << p2p.err;
  EXPECT_NE(p2p.err.find("--hierarchical-context-parallel-sizes (read by --cp-comm-type a2a+p2p "
                         "only)"),
            std::string::npos)
      << p2p.err;
  EXPECT_TRUE(load_config(dir.file("job.yaml")).training.cp_hierarchy.empty());
  // At cp 1 sizes multiplying to 1 meet Megatron-LM's checks and run no context
  // parallelism: both flags are ignored with the reason, and the job is cp 1, p2p.
  const test::CliRun one = import(
      dir, script("--cp-comm-type a2a+p2p --hierarchical-context-parallel-sizes 1 1"), "one.txt");
  ASSERT_EQ(one.code, 0) << one.err;
  EXPECT_NE(one.err.find("--cp-comm-type a2a+p2p and --hierarchical-context-parallel-sizes "
                         "(no context parallelism at --context-parallel-size 1)"),
            std::string::npos)
      << one.err;
  const Config c1 = load_config(dir.file("job.yaml"));
  EXPECT_TRUE(c1.training.cp_hierarchy.empty());
  EXPECT_EQ(c1.training.cp_comm(), CpComm::p2p);
  EXPECT_EQ(c1.training.cp, 1);
}

const std::string kMindFormers =
    std::string(BMPIPE_SOURCE_DIR) + "/configs/examples/mindformers/llama2_13b.yaml";

/// The MindFormers example run (dp 2, pp 8) with `cp_keys` after its data_parallel line.
std::string mf_run(const std::string& cp_keys) {
  std::string yaml = test::slurp(kMindFormers);
  const std::string at = "  data_parallel: 2\n";
  yaml.replace(yaml.find(at), at.size(), at + cp_keys);
  return yaml;
}

TEST(CpFp8Interop, MindFormersContextParallelComesBack) {
  test::ScratchDir dir;
  const std::string run = test::write_file(
      dir.file("run.yaml"), mf_run("  context_parallel: 2\n  context_parallel_algo: ulysses_cp\n"));
  const std::string job = dir.file("job.yaml");
  const test::CliRun r = run_cli("import mindformers '" + run +
                                 "' --preset ascend-910b --devices 32 --out '" + job + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  const Config a = load_config(job);
  EXPECT_EQ(a.training.cp, 2);
  EXPECT_EQ(a.training.cp_comm_type, "a2a");
  EXPECT_EQ(a.training.data_parallel(32), 2);
  // Export, merged into the run without its cp keys, imported again: the same job.
  const test::CliRun x = run_cli("export '" + job + "' --format mindformers --json");
  ASSERT_EQ(x.code, 0) << x.err;
  const nlohmann::json j = nlohmann::json::parse(x.out);
  const std::string text = j["text"].get<std::string>();
  EXPECT_NE(text.find("  context_parallel: 2\n  context_parallel_algo: ulysses_cp\n"),
            std::string::npos)
      << text;
  const std::string plain = test::write_file(dir.file("plain.yaml"), mf_run(""));
  const std::string given =
      test::write_file(dir.file("given.yaml"), test::yaml_with_export(plain, text));
  const std::string back = dir.file("back.yaml");
  const test::CliRun r2 = run_cli("import mindformers '" + given +
                                  "' --preset ascend-910b --devices 32 --out '" + back + "'");
  ASSERT_EQ(r2.code, 0) << r2.err;
  const Config b = load_config(back);
  EXPECT_EQ(b.training.cp, 2);
  EXPECT_EQ(b.training.cp_comm_type, "a2a");
  const nlohmann::json sim = nlohmann::json::parse(run_cli("simulate '" + back + "' --json").out);
  EXPECT_EQ(sim["iteration_time_ms"], j["iteration_time_ms"]) << text;
  // An algorithm bmpipe does not model is refused, naming FILE:LINE:key.
  const std::string bad = test::write_file(
      dir.file("bad.yaml"), mf_run("  context_parallel: 2\n  context_parallel_algo: hybrid_cp\n"));
  const test::CliRun e =
      run_cli("import mindformers '" + bad + "' --preset ascend-910b --devices 32");
  EXPECT_EQ(e.code, 2);
  EXPECT_NE(e.err.find(bad + ":22: parallel_config.context_parallel_algo"), std::string::npos)
      << e.err;
}

// LlamaConfig's head_dim (issue 41): read as model.head_dim, written back by the export, and
// the same job and time after the round trip. Without it the key used to stop the import.
TEST(CpFp8Interop, MindFormersHeadDimComesBack) {
  test::ScratchDir dir;
  std::string yaml = mf_run("");
  const std::string at = "  model_config:\n";
  ASSERT_NE(yaml.find(at), std::string::npos);
  yaml.replace(yaml.find(at), at.size(), at + "    head_dim: 256\n");
  const std::string run = test::write_file(dir.file("run.yaml"), yaml);
  const std::string job = dir.file("job.yaml");
  const test::CliRun r = run_cli("import mindformers '" + run +
                                 "' --preset ascend-910b --devices 16 --out '" + job + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  const Config a = load_config(job);
  EXPECT_EQ(a.model.shape->explicit_head_dim, 256);
  const test::CliRun x = run_cli("export '" + job + "' --format mindformers --json");
  ASSERT_EQ(x.code, 0) << x.err;
  const nlohmann::json j = nlohmann::json::parse(x.out);
  const std::string text = j["text"].get<std::string>();
  EXPECT_NE(text.find("    head_dim: 256\n"), std::string::npos) << text;
  const std::string plain = test::write_file(dir.file("plain.yaml"), mf_run(""));
  const std::string given =
      test::write_file(dir.file("given.yaml"), test::yaml_with_export(plain, text));
  const std::string back = dir.file("back.yaml");
  const test::CliRun r2 = run_cli("import mindformers '" + given +
                                  "' --preset ascend-910b --devices 16 --out '" + back + "'");
  ASSERT_EQ(r2.code, 0) << r2.err;
  EXPECT_EQ(load_config(back).model.shape->explicit_head_dim, 256);
  const nlohmann::json sim = nlohmann::json::parse(run_cli("simulate '" + back + "' --json").out);
  EXPECT_EQ(sim["iteration_time_ms"], j["iteration_time_ms"]) << text;
}

}  // namespace
}  // namespace bmpipe
