// The selective_offload layer mode (issue 43): selective recompute and activation offload in
// one layer, as Megatron-Core runs them together (--recompute-granularity selective with
// --fine-grained-activation-offloading; NVIDIA/Megatron-LM d98e8a64ddf3,
// docs/user-guide/features/fine_grained_activation_offloading.md). The layer keeps what
// selective keeps and moves the offload modules' inputs selective still keeps; a module
// selective checkpoints moves nothing (core_attn: Attention.forward enters its offload
// context only when the core is not checkpointed, megatron/core/transformer/attention.py:
// 1552-1606). Bad inputs exit 2 with FILE:LINE:key; Megatron-LM's flags state a job of
// selective_offload layers exactly.
#include <gtest/gtest.h>

#include "experiment/experiment.hpp"
#include "support/offload_cases.hpp"
#include "support/run_config.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace selective_offload_test {

using test::CliRun;
using test::run_cli;
using test::ScratchDir;
using test::write_file;

// The job: test::offload_job (support/offload_cases.hpp), on the device given.

std::string device(double link_GBps) {
  return "{preset: h200, host_link_GBps: " + std::to_string(link_GBps) + "}";
}

SimInput stages_of(const std::string& modules, const std::string& recompute,
                   double link_GBps = 64) {
  return test::prepare_run(
             parse_config(test::offload_job(device(link_GBps), modules, recompute), "job.yaml"))
      .input;
}

TEST(SelectiveOffload, KeepsSelectivesBytesLessWhatSelectiveStillOffloads) {
  // core_attn and attn_proj offloaded, the core recomputed. Under selective the core is
  // checkpointed, so core_attn moves nothing (q, k and v stay as the checkpoint's inputs);
  // attn_proj moves out_proj's input, the core's output: e T q_cols = 2 bytes x 1024 x
  // (4096 / tp 2 = 2048) = 4 194 304 bytes a layer. (In the offload mode, none's, both
  // move: 16 777 216, OffloadMode.OneOfTwoLayersOffloadsHalfTheStagesBytesAndCopyTime.)
  // Stage 1 holds layers 2 and 3; layer 2 in selective_offload, layer 3 selective.
  const SimInput kept = stages_of("none", "selective");  // selective, nothing offloaded
  const SimInput one = stages_of("core_attn,attn_proj",
                                 "{default: selective, layers: {2: "
                                 "selective_offload}}");
  // Selective's bytes and recompute, with 4 194 304 of them on the host: the stage holds
  // selective's bytes less 4 194 304 once its copy ends.
  EXPECT_EQ(one.stages[1].activation_bytes, kept.stages[1].activation_bytes);
  EXPECT_EQ(one.stages[1].recompute, kept.stages[1].recompute);
  EXPECT_GT(one.stages[1].recompute, 0);
  EXPECT_EQ(one.stages[1].offload_bytes, 4'194'304);
  // One copy on the 64 GB/s link: 4 194 304 / 64e9 s = 65 536 ns.
  EXPECT_EQ(one.stages[1].offload_time, 65'536);
  // The other stages keep all of theirs (the per-layer form).
  EXPECT_EQ(one.stages[0].offload_bytes, 0);
  EXPECT_EQ(one.stages[2].offload_bytes, 0);
  // The offload mode on the same layer moves none's 16 777 216 and keeps none's bytes.
  const SimInput none_kept = stages_of("none", "none");
  const SimInput off = stages_of("core_attn,attn_proj",
                                 "{default: selective, layers: {2: "
                                 "offload}}");
  EXPECT_EQ(off.stages[1].offload_bytes, 16'777'216);
  // Layer 2 none (half of none's stage), layer 3 selective (half of selective's).
  EXPECT_EQ(off.stages[1].activation_bytes,
            none_kept.stages[1].activation_bytes / 2 + kept.stages[1].activation_bytes / 2);
  // Without core_attn among the recompute modules nothing is checkpointed: selective
  // recomputes nothing and both modules move, 16 777 216 bytes, as offload's.
  Config plain =
      parse_config(test::offload_job(device(64), "core_attn,attn_proj",
                                     "{default: selective, layers: {2: selective_offload}}") +
                       "  recompute_modules: none\n",
                   "job.yaml");
  EXPECT_EQ(test::prepare_run(plain).input.stages[1].offload_bytes, 16'777'216);
}

double iteration_ms(const ScratchDir& dir, const std::string& name, const std::string& text) {
  const CliRun r = run_cli("simulate " + write_file(dir.file(name), text) + " --json");
  EXPECT_EQ(r.code, 0) << r.all();
  if (r.code != 0) return 0;
  return nlohmann::json::parse(r.out)["iteration_time_ms"].get<double>();
}

TEST(SelectiveOffload, HiddenOnAFastLinkExposedOnASlowOne) {
  // Every layer selective_offload, 4 194 304 bytes a layer, 8 388 608 a stage each way.
  // On NVLink-C2C's 900 GB/s a copy takes 9.3 us, far less than the op it runs beside: the
  // iteration is selective's, to the nanosecond. At 0.25 GB/s a copy takes 8 388 608 /
  // 0.25e9 s = 33.554 ms, and stage 0's first backward waits for its copy out and its copy
  // back, one after the other: the iteration takes at least 2 x 33.554 = 67.109 ms.
  ScratchDir dir;
  const double selective =
      iteration_ms(dir, "sel.yaml", test::offload_job(device(900), "none", "selective"));
  const double fast = iteration_ms(
      dir, "fast.yaml", test::offload_job(device(900), "core_attn,attn_proj", "selective_offload"));
  const double slow =
      iteration_ms(dir, "slow.yaml",
                   test::offload_job(device(0.25), "core_attn,attn_proj", "selective_offload"));
  EXPECT_GT(selective, 0);
  EXPECT_EQ(fast, selective);
  EXPECT_GE(slow, 2 * 33.554432);
  EXPECT_GT(slow, selective);
  // Every layer in selective_offload is Megatron-LM's job-wide form (selective recompute and
  // --offload-modules in every layer), byte for byte in the engine.
  const SimInput per_layer = stages_of("core_attn,attn_proj", "selective_offload");
  const SimInput job_wide = stages_of("core_attn,attn_proj", "selective");
  for (std::size_t s = 0; s < per_layer.stages.size(); ++s) {
    EXPECT_EQ(per_layer.stages[s].offload_bytes, job_wide.stages[s].offload_bytes) << s;
    EXPECT_EQ(per_layer.stages[s].offload_time, job_wide.stages[s].offload_time) << s;
    EXPECT_EQ(per_layer.stages[s].activation_bytes, job_wide.stages[s].activation_bytes) << s;
  }
}

TEST(SelectiveOffload, BadInputsExit2WithFileLineAndKey) {
  ScratchDir dir;
  test::expect_offload_job_refused(
      dir, test::offload_job(device(64), "none", "{default: none, layers: {2: selective_offload}}"),
      "training.recompute.layers.2",
      "selective_offload moves the inputs of training.offload_modules to the host, but "
      "offload_modules is none");
  test::expect_offload_job_refused(
      dir, test::offload_job("{preset: ascend-910b}", "core_attn", "selective_offload"),
      "training.recompute", "selective_offload moves activations to the host, but");
  test::expect_offload_job_refused(
      dir, test::offload_job(device(64), "core_attn", "selective_offlaod"), "training.recompute",
      "expected none, selective, full, offload or selective_offload");
}

TEST(SelectiveOffload, MegatronStatesAJobOfThemExactlyAndAMixInexactly) {
  ScratchDir dir;
  // Every layer selective_offload: selective recompute and the offload modules, the job-wide
  // flags, with no note about offloading in other layers.
  const CliRun all =
      run_cli("export " +
              write_file(dir.file("all.yaml"), test::offload_job(device(64), "core_attn,attn_proj",
                                                                 "selective_offload")) +
              " --format megatron");
  ASSERT_EQ(all.code, 0) << all.all();
  EXPECT_NE(all.out.find("--recompute-granularity selective"), std::string::npos) << all.out;
  EXPECT_NE(all.out.find("--offload-modules core_attn attn_proj"), std::string::npos) << all.out;
  EXPECT_EQ(all.out.find("in every layer that does not recompute in full"), std::string::npos)
      << all.out;
  // One selective_offload layer among selective ones: the flags offload in all 32.
  const CliRun mix = run_cli(
      "export " +
      write_file(dir.file("mix.yaml"),
                 test::offload_job(device(64), "core_attn,attn_proj",
                                   "{default: selective, layers: {2: selective_offload}}")) +
      " --format megatron");
  ASSERT_EQ(mix.code, 0) << mix.all();
  EXPECT_NE(mix.out.find("Not exact:"), std::string::npos) << mix.out;
  EXPECT_NE(mix.out.find("the plan offloads 1 layers and keeps those of 31 others"),
            std::string::npos)
      << mix.out;
  EXPECT_NE(mix.out.find("--offload-modules core_attn attn_proj"), std::string::npos) << mix.out;
}

}  // namespace selective_offload_test
}  // namespace bmpipe
