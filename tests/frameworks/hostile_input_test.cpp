// Issue 42, the framework slice: bad input to `bmpipe import` and `bmpipe export` is exit 2
// naming the user's file, line and flag or key; never an internal error (exit 70), never a
// config that `bmpipe simulate` then refuses, never a line of the YAML bmpipe writes. Every
// input is written here; the lines the messages must name are counted by hand from it.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "support/support.hpp"

namespace bmpipe {
namespace hostile_input_test {

std::string q(const std::string& path) {
  return "'" + path + "'";
}

/// `err` holds "FILE:LINE: KEY:" for the file at `path`.
::testing::AssertionResult names(const test::CliRun& r, const std::string& path, int line,
                                 const std::string& key) {
  const std::string want = path + ":" + std::to_string(line) + ": " + key + ":";
  if (r.err.find(want) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "stderr lacks '" << want << "':\n" << r.err;
}

// ---- export: layouts no framework states --------------------------------------------------

// Line 10 holds the schedule, line 11 pp (counted from the text below).
std::string one_rank_config(const std::string& schedule) {
  return "cluster:\n"                                                          // 1
         "  nodes: 1\n"                                                        // 2
         "  devices_per_node: 1\n"                                             // 3
         "  device: {name: unit, memory_GiB: 1}\n"                             // 4
         "  intra_node: {bandwidth_GBps: 100, latency_us: 0}\n"                // 5
         "model:\n"                                                            // 6
         "  layers:\n"                                                         // 7
         "    - {name: unit, count: 4, forward_ms: 1, backward_input_ms: 1, "  //
         "backward_weight_ms: 1, activation_bytes: 1024, output_bytes: 0, "    //
         "param_bytes: 1024}\n"                                                // 8
         "training:\n"                                                         // 9
         "  schedule: " +                                                      //
         schedule +                                                            //
         "\n"                                                                  // 10
         "  pp: 1\n"                                                           // 11
         "  microbatches: 4\n";                                                // 12
}

TEST(HostileExport, VScheduleAtPp1IsRefusedAgainstTheSchedule) {
  const test::ScratchDir dir;
  for (const std::string schedule : {"zb-v", "v-half", "v-min", "dualpipe-v"}) {
    const std::string path =
        test::write_file(dir.file(schedule + ".yaml"), one_rank_config(schedule));
    // It is a config bmpipe itself runs: only the export cannot state it.
    ASSERT_EQ(test::run_cli("simulate " + q(path)).code, 0) << schedule;
    for (const std::string format : {"megatron", "mindformers"}) {
      const test::CliRun r = test::run_cli("export " + q(path) + " --format " + format);
      EXPECT_EQ(r.code, 2) << schedule << " " << format << "\n" << r.err;
      EXPECT_TRUE(names(r, path, 10, "training.schedule")) << schedule << " " << format;
      EXPECT_NE(r.err.find("training.pp > 1"), std::string::npos) << r.err;
      EXPECT_EQ(r.err.find("internal error"), std::string::npos) << r.err;
    }
  }
  // The same layers under 1F1B at pp 1 export.
  const std::string plain = test::write_file(dir.file("plain.yaml"), one_rank_config("1f1b"));
  EXPECT_EQ(test::run_cli("export " + q(plain) + " --format megatron").code, 0);
}

TEST(HostileExport, AModelWithoutDecoderLayersIsRefusedAgainstItsLayers) {
  const test::ScratchDir dir;
  std::string text = one_rank_config("1f1b");
  // An embedding and a head, by their names, and nothing between them.
  const std::string unit = "    - {name: unit, count: 4,";
  text.replace(text.find(unit), unit.size(), "    - {name: embedding, count: 1,");
  text.insert(text.find("training:"),
              "    - {name: lm_head, count: 1, forward_ms: 1, backward_input_ms: 1, "
              "backward_weight_ms: 1, activation_bytes: 1024, output_bytes: 0, "
              "param_bytes: 1024}\n");
  const std::string path = test::write_file(dir.file("ends.yaml"), text);
  for (const std::string format : {"megatron", "mindformers"}) {
    const test::CliRun r = test::run_cli("export " + q(path) + " --format " + format);
    EXPECT_EQ(r.code, 2) << format << "\n" << r.err;
    EXPECT_TRUE(names(r, path, 8, "model.layers")) << format;  // the list's first item
    EXPECT_NE(r.err.find("no decoder layer"), std::string::npos) << r.err;
  }
}

// ---- export: the sharding implementation ---------------------------------------------------

/// The "# Remove these flags" list of a Megatron-LM export.
std::string remove_list(const std::string& text) {
  const std::size_t from = text.find("# Remove these flags");
  const std::size_t to = text.find("\n# data parallel", from);
  return from == std::string::npos || to == std::string::npos ? ""
                                                              : text.substr(from, to - from + 1);
}

TEST(HostileExport, TheScriptsFsdpImplementationIsOnTheRemoveList) {
  const test::ScratchDir dir;
  // Llama-like, ZeRO-3 through torch FSDP2 (line 3).
  const std::string args = test::write_file(
      dir.file("fsdp2.txt"),
      "--num-layers 8 --hidden-size 1024 --num-attention-heads 8 --seq-length 1024\n"  // 1
      "--vocab-size 32000 --swiglu --micro-batch-size 1 --global-batch-size 16 --bf16\n"
      "--use-torch-fsdp2\n");
  const std::string job = dir.file("fsdp2.yaml");
  const test::CliRun imported = test::run_cli("import megatron " + q(args) +
                                              " --preset h100-sxm --devices 8 --out " + q(job));
  ASSERT_EQ(imported.code, 0) << imported.err;
  const test::CliRun r = test::run_cli("export " + q(job) + " --format megatron");
  ASSERT_EQ(r.code, 0) << r.err;
  // The export states Megatron-FSDP; the script's FSDP2 must go (Megatron-LM refuses both).
  EXPECT_NE(r.out.find("\n--use-megatron-fsdp\n"), std::string::npos) << r.out;
  EXPECT_NE(remove_list(r.out).find("#   --use-torch-fsdp2\n"), std::string::npos) << r.out;

  // Megatron-FSDP given as the script's own: stated again, so not on the list; FSDP2 is.
  test::write_file(args, test::slurp(args) +
                             "--use-megatron-fsdp "
                             "--data-parallel-sharding-strategy optim_grads\n");
  std::string script = test::slurp(args);
  script.replace(script.find("--use-torch-fsdp2\n"), 18, "");
  test::write_file(args, script);
  ASSERT_EQ(
      test::run_cli("import megatron " + q(args) + " --preset h100-sxm --devices 8 --out " + q(job))
          .code,
      0);
  const test::CliRun zero2 = test::run_cli("export " + q(job) + " --format megatron");
  ASSERT_EQ(zero2.code, 0) << zero2.err;
  EXPECT_NE(zero2.out.find("\n--data-parallel-sharding-strategy optim_grads\n"), std::string::npos)
      << zero2.out;
  EXPECT_NE(remove_list(zero2.out).find("#   --use-torch-fsdp2\n"), std::string::npos) << zero2.out;
  EXPECT_EQ(remove_list(zero2.out).find("--use-megatron-fsdp"), std::string::npos) << zero2.out;
}

// ---- import megatron: a flag without its value ---------------------------------------------

const std::string kArgsHead =
    "torchrun --nproc_per_node 8 pretrain_gpt.py \\\n"                                    // 1
    "  --num-layers 8 --hidden-size 1024 --num-attention-heads 8 --seq-length 1024 \\\n"  // 2
    "  --vocab-size 32000 --swiglu --micro-batch-size 1 --global-batch-size 16 \\\n"      // 3
    "  --tensor-model-parallel-size 2 --pipeline-model-parallel-size 4 \\\n";             // 4

TEST(HostileImport, AFlagThatTakesAValueWithoutOneIsRefused) {
  const test::ScratchDir dir;
  const struct {
    std::string tail;  // lines 5 and on
    int line;
    std::string flag;
    std::string follows;  // what the message says comes instead
  } cases[] = {
      // A flag bmpipe reads, followed by another flag (the example).
      {"  --bf16 --ffn-hidden-size --hidden-size 1024\n", 5, "--ffn-hidden-size",
       "'--hidden-size' follows it"},
      // A flag bmpipe ignores (not modelled), then a flag on the next line.
      {"  --bf16 --seed \\\n  --lr 1e-4\n", 5, "--seed", "'--lr' follows it (line 6)"},
      // A value flag at the very end of the script.
      {"  --bf16 \\\n  --save\n", 6, "--save", "nothing follows it"},
      // One before a pipe.
      {"  --bf16 --load | tee log.txt\n", 5, "--load", "the command ends there (at '|')"},
      // A flag that takes one or more values, given none.
      {"  --bf16 --recompute-modules\n", 5, "--recompute-modules", "nothing follows it"},
      // One that takes three, given two.
      {"  --bf16 --rampup-batch-size 4 4\n", 5, "--rampup-batch-size", "expects 3 values, got 2"},
  };
  for (const auto& c : cases) {
    const std::string path = test::write_file(dir.file("args.txt"), kArgsHead + c.tail);
    const test::CliRun r =
        test::run_cli("import megatron " + q(path) + " --preset h100-sxm --devices 16");
    EXPECT_EQ(r.code, 2) << c.tail << r.err;
    EXPECT_TRUE(names(r, path, c.line, c.flag)) << c.tail;
    EXPECT_NE(r.err.find(c.follows), std::string::npos) << c.tail << r.err;
    EXPECT_NE(r.err.find("would not start"), std::string::npos) << r.err;
  }
  // Switches, a '*' flag with no value and an --flag=value are fine.
  const std::string ok = test::write_file(
      dir.file("ok.txt"), kArgsHead + "  --bf16 --data-path --save=/ckpt --use-flash-attn\n");
  const test::CliRun r =
      test::run_cli("import megatron " + q(ok) + " --preset h100-sxm --devices 16");
  EXPECT_EQ(r.code, 0) << r.err;
}

// ---- import: a config `simulate` would refuse ----------------------------------------------

TEST(HostileImport, MegatronInterleavedWithMicroBatchesNotAMultipleOfPpIsRefused) {
  const test::ScratchDir dir;
  // pp 4, vpp 2, 16 devices of tp 2: dp 2, global batch 12 = 6 micro-batches of 1 per replica.
  const std::string args = test::write_file(
      dir.file("vpp.txt"),
      "--num-layers 16 --hidden-size 1024 --num-attention-heads 8 --seq-length 1024\n"  // 1
      "--vocab-size 32000 --swiglu --bf16 --micro-batch-size 1\n"                       // 2
      "--global-batch-size 12\n"                                                        // 3
      "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 4\n"               // 4
      "--num-virtual-stages-per-pipeline-rank 2\n");                                    // 5
  const std::string out = dir.file("vpp.yaml");
  const test::CliRun r = test::run_cli("import megatron " + q(args) +
                                       " --preset h100-sxm --devices 16 --out " + q(out));
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_TRUE(names(r, args, 3, "--global-batch-size"));
  EXPECT_NE(r.err.find("multiple of pp"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--pipeline-model-parallel-size (line 4)"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(out), std::string::npos) << "names bmpipe's own YAML:\n" << r.err;

  // 16 = 8 micro-batches per replica, a multiple of 4: imports, and simulates.
  std::string fixed = test::slurp(args);
  fixed.replace(fixed.find("--global-batch-size 12"), 22, "--global-batch-size 16");
  test::write_file(args, fixed);
  ASSERT_EQ(test::run_cli("import megatron " + q(args) + " --preset h100-sxm --devices 16 --out " +
                          q(out))
                .code,
            0);
  EXPECT_EQ(test::run_cli("simulate " + q(out)).code, 0);
}

// Lines: 2 data_parallel, 4 pipeline_stage, 5 micro_batch_num, 7 pipeline_interleave,
// 11 num_layers, 16 pp_interleave_num.
std::string mindformers(int pp, int micro_batch_num, int layers, int interleave) {
  return "parallel_config:\n"                              // 1
         "  data_parallel: 1\n"                            // 2
         "  model_parallel: 1\n"                           // 3
         "  pipeline_stage: " +                            //
         std::to_string(pp) +                              //
         "\n"                                              // 4
         "  micro_batch_num: " +                           //
         std::to_string(micro_batch_num) +                 //
         "\n"                                              // 5
         "parallel:\n"                                     // 6
         "  pipeline_config: {pipeline_interleave: " +     //
         std::string(interleave > 1 ? "True" : "False") +  //
         "}\n"                                             // 7
         "model:\n"                                        // 8
         "  model_config:\n"                               // 9
         "    type: LlamaConfig\n"                         // 10
         "    num_layers: " +                              //
         std::to_string(layers) +                          //
         "\n"                                              // 11
         "    hidden_size: 1024\n"                         // 12
         "    num_heads: 8\n"                              // 13
         "    vocab_size: 32000\n"                         // 14
         "    seq_length: 1024\n"                          // 15
         "    pp_interleave_num: " +                       //
         std::to_string(interleave) +                      //
         "\n"                                              // 16
         "    compute_dtype: bfloat16\n";                  // 17
}

TEST(HostileImport, MindFormersInterleavedWithMicroBatchesNotAMultipleOfPpIsRefused) {
  const test::ScratchDir dir;
  const std::string path = test::write_file(dir.file("mf.yaml"), mindformers(4, 6, 16, 2));
  const std::string out = dir.file("mf_out.yaml");
  const test::CliRun r =
      test::run_cli("import mindformers " + q(path) + " --preset ascend-910b --out " + q(out));
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_TRUE(names(r, path, 5, "parallel_config.micro_batch_num"));
  EXPECT_NE(r.err.find("multiple of pp"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("parallel_config.pipeline_stage (line 4)"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(out), std::string::npos) << "names bmpipe's own YAML:\n" << r.err;
  EXPECT_EQ(r.err.find("<stdout>"), std::string::npos) << r.err;

  test::write_file(path, mindformers(4, 8, 16, 2));
  ASSERT_EQ(
      test::run_cli("import mindformers " + q(path) + " --preset ascend-910b --out " + q(out)).code,
      0);
  EXPECT_EQ(test::run_cli("simulate " + q(out)).code, 0);
}

TEST(HostileImport, MegatronRefusalsOfDerivedValuesNameTheFlagTheyComeFrom) {
  const test::ScratchDir dir;
  // 2e9 samples are 1e9 micro-batches per replica: over the work limit. The micro-batches
  // are no flag of their own; the refusal names --global-batch-size and its line.
  const std::string args = test::write_file(
      dir.file("big.txt"), kArgsHead + "  --bf16\n  --global-batch-size 2000000000\n");
  const test::CliRun r =
      test::run_cli("import megatron " + q(args) + " --preset h100-sxm --devices 16");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_TRUE(names(r, args, 6, "--global-batch-size"));
  EXPECT_NE(r.err.find("training.microbatches"), std::string::npos) << r.err;
}

TEST(HostileImport, LayerCountsBeyondTheConfigsBoundAreRefusedAtOnce) {
  const test::ScratchDir dir;
  std::string text = kArgsHead + "  --bf16\n";
  text.replace(text.find("--num-layers 8"), 14, "--num-layers 2000000000");
  const std::string args = test::write_file(dir.file("layers.txt"), text);
  const test::CliRun r =
      test::run_cli("import megatron " + q(args) + " --preset h100-sxm --devices 16");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_TRUE(names(r, args, 2, "--num-layers"));
  EXPECT_NE(r.err.find("at most 100000"), std::string::npos) << r.err;

  const std::string mf =
      test::write_file(dir.file("layers.yaml"), mindformers(2, 8, 2000000000, 1));
  const test::CliRun m = test::run_cli("import mindformers " + q(mf) + " --preset ascend-910b");
  EXPECT_EQ(m.code, 2) << m.err;
  EXPECT_TRUE(names(m, mf, 11, "model.model_config.num_layers"));
  EXPECT_NE(m.err.find("at most 100000"), std::string::npos) << m.err;
}

// ---- import mindformers: every refusal names the user's file ---------------------------------

TEST(HostileImport, MindFormersRefusalsOfWholeSectionsNameTheUsersLine) {
  const test::ScratchDir dir;
  // 3 kv heads do not divide 8 heads: the config loader refuses the model as a whole (its
  // key is "model"), which has no flag of its own; the message must still point into
  // mf.yaml (model_config, whose mapping starts on line 10), not at a line of the YAML
  // bmpipe would have written.
  std::string text = mindformers(2, 8, 16, 1);
  text.insert(text.find("    vocab_size:"), "    n_kv_heads: 3\n");
  const std::string path = test::write_file(dir.file("mf.yaml"), text);
  const std::string out = dir.file("mf_out.yaml");
  const test::CliRun r = test::run_cli("import mindformers " + q(path) +
                                       " --preset ascend-910b --devices 2 --out " + q(out));
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_TRUE(names(r, path, 10, "model.model_config"));
  EXPECT_NE(r.err.find("num_kv_heads = 3"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(out), std::string::npos) << "names bmpipe's own YAML:\n" << r.err;
  EXPECT_EQ(r.err.find("does not load"), std::string::npos) << r.err;
}

// ---- import mindformers: more stages than layers -------------------------------------------

TEST(HostileImport, MindFormersWithFarMoreStagesThanLayersIsRefusedQuickly) {
  const test::ScratchDir dir;
  const struct {
    int pp, interleave, line;
    std::string key;
  } cases[] = {
      {64, 1, 4, "parallel_config.pipeline_stage"},
      // Billions of stages: refused before anything per stage exists (no allocation).
      {2000000000, 1, 4, "parallel_config.pipeline_stage"},
      {4, 1000000000, 16, "model.model_config.pp_interleave_num"},
  };
  for (const auto& c : cases) {
    const std::string path =
        test::write_file(dir.file("many.yaml"), mindformers(c.pp, 64, 4, c.interleave));
    const auto start = std::chrono::steady_clock::now();
    const test::CliRun r =
        test::run_cli("import mindformers " + q(path) + " --preset ascend-910b --devices 8");
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(r.code, 2) << c.pp << " x " << c.interleave << "\n" << r.err;
    EXPECT_TRUE(names(r, path, c.line, c.key)) << c.pp << " x " << c.interleave;
    EXPECT_NE(r.err.find("stages for num_layers = 4"), std::string::npos) << r.err;
    EXPECT_LT(seconds, 10.0);
  }
}

// ---- import mindformers: the devices it counts ---------------------------------------------

TEST(HostileImport, MindFormersDevicesWithoutDevicesCountContextParallelism) {
  const test::ScratchDir dir;
  std::string text = mindformers(2, 8, 16, 1);
  // dp 2 x tp 1 x cp 2 x pp 2 = 8 devices: one Ascend 910B node.
  text.replace(text.find("  data_parallel: 1"), 18, "  data_parallel: 2");
  text.insert(text.find("parallel:\n"), "  context_parallel: 2\n");
  const std::string path = test::write_file(dir.file("cp.yaml"), text);
  const std::string out = dir.file("cp_out.yaml");
  const test::CliRun r =
      test::run_cli("import mindformers " + q(path) + " --preset ascend-910b --out " + q(out));
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string yaml = test::slurp(out);
  EXPECT_NE(yaml.find("\n  nodes: 1\n  devices_per_node: 8\n"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("dp x tp x cp x pp = 2 x 1 x 2 x 2 = 8 devices"), std::string::npos) << yaml;
  EXPECT_EQ(test::run_cli("simulate " + q(out)).code, 0);

  // 3 x 2 x 2 = 12 devices are not whole nodes of 8: the job runs on 12 of the 2 nodes'
  // 16 (training.devices), the origin the job's keys, not --devices, which was not given.
  text.replace(text.find("  data_parallel: 2"), 18, "  data_parallel: 3");
  test::write_file(path, text);
  const test::CliRun odd =
      test::run_cli("import mindformers " + q(path) + " --preset ascend-910b --out " + q(out));
  ASSERT_EQ(odd.code, 0) << odd.err;
  const std::string odd_yaml = test::slurp(out);
  EXPECT_NE(odd_yaml.find("\n  nodes: 2\n  devices_per_node: 8\n"), std::string::npos) << odd_yaml;
  EXPECT_NE(odd_yaml.find("  devices: 12"), std::string::npos) << odd_yaml;
  EXPECT_NE(odd_yaml.find("dp x tp x cp x pp = 3 x 1 x 2 x 2 = 12 devices"), std::string::npos)
      << odd_yaml;
  const test::CliRun sim = test::run_cli("simulate " + q(out));
  EXPECT_EQ(sim.code, 0) << sim.err;
  EXPECT_NE(sim.out.find("devices          12 of the cluster's 16 (4 idle)"), std::string::npos)
      << sim.out;

  // The same 12 devices against a cluster file of 3 nodes (24): the job runs on the first
  // 12, with a note, rather than the loader refusing the cluster.
  const std::string cluster =
      test::write_file(dir.file("cluster.yaml"),
                       "cluster: {nodes: 3, devices_per_node: 8, device: {preset: ascend-910b}}\n");
  const test::CliRun file_run = test::run_cli("import mindformers " + q(path) + " --cluster " +
                                              q(cluster) + " --out " + q(out));
  ASSERT_EQ(file_run.code, 0) << file_run.err;
  EXPECT_NE(file_run.err.find("the job's dp x tp x cp x pp = 12 devices are 12 of the cluster's "
                              "24: it runs on the first of them (training.devices)"),
            std::string::npos)
      << file_run.err;
  EXPECT_NE(test::slurp(out).find("  devices: 12"), std::string::npos) << test::slurp(out);
  EXPECT_EQ(test::run_cli("simulate " + q(out)).code, 0);
}

}  // namespace hostile_input_test
}  // namespace bmpipe
