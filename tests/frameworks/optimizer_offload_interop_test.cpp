// Megatron-LM's optimizer offload flags through `bmpipe import megatron` and `bmpipe export
// --format megatron`: --optimizer-cpu-offload with --optimizer-offload-fraction (its parser
// default 1.0; inert without --optimizer-cpu-offload) is training.optimizer.offload_fraction,
// with the preconditions Megatron-LM asserts, and an export of it imports back to the same
// fraction and the time the export quoted.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "support/framework_files.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace optimizer_offload_interop_test {

using test::run_cli;

const std::string kMegatronArgs =
    std::string(BMPIPE_SOURCE_DIR) + "/configs/examples/llama2_13b_megatron_args.txt";
const std::string kH100Cluster = std::string(BMPIPE_SOURCE_DIR) + "/configs/clusters/h100_2x8.yaml";

// The example script (which ends with --bf16 --use-distributed-optimizer) with `extra` on a
// line of its own: line 10 of the file.
std::string script(const test::ScratchDir& dir, const std::string& extra) {
  return test::write_file(dir.file("args.txt"), test::slurp(kMegatronArgs) + extra + "\n");
}

struct Imported {
  test::CliRun run;
  std::optional<Config> config;
};

Imported import_megatron(const test::ScratchDir& dir, const std::string& args_file) {
  Imported i;
  const std::string out = dir.file("job.yaml");
  i.run = run_cli("import megatron '" + args_file + "' --cluster '" + kH100Cluster + "' --out '" +
                  out + "'");
  if (i.run.code == 0) i.config = parse_config(test::slurp(out), out);
  return i;
}

double offload_of(const Imported& i) {
  EXPECT_EQ(i.run.code, 0) << i.run.all();
  return i.config ? i.config->training.optimizer.offload_fraction : -1;
}

TEST(OptimizerOffloadInterop, FractionIsImported) {
  test::ScratchDir dir;
  EXPECT_DOUBLE_EQ(offload_of(import_megatron(
                       dir, script(dir,
                                   "  --use-precision-aware-optimizer --optimizer-cpu-offload "
                                   "--optimizer-offload-fraction 0.25"))),
                   0.25);
}

TEST(OptimizerOffloadInterop, OffloadWithoutFractionTakesMegatronsDefaultOne) {
  // megatron/training/arguments.py: --optimizer-offload-fraction, type=float, default=1.0.
  test::ScratchDir dir;
  EXPECT_DOUBLE_EQ(
      offload_of(import_megatron(
          dir, script(dir, "  --use-precision-aware-optimizer --optimizer-cpu-offload"))),
      1.0);
}

TEST(OptimizerOffloadInterop, FractionWithoutOffloadIsInert) {
  // Megatron-LM builds the HybridDeviceOptimizer, the only reader of the fraction, only
  // under --optimizer-cpu-offload: the fraction alone changes nothing.
  test::ScratchDir dir;
  const Imported i = import_megatron(dir, script(dir, "  --optimizer-offload-fraction 0.5"));
  EXPECT_DOUBLE_EQ(offload_of(i), 0.0);
  EXPECT_NE(i.run.err.find("no effect without --optimizer-cpu-offload"), std::string::npos)
      << i.run.err;
}

TEST(OptimizerOffloadInterop, MegatronsPreconditionsAreRefusedWithFileLineFlag) {
  test::ScratchDir dir;
  // arguments.py asserts --use-precision-aware-optimizer beside --optimizer-cpu-offload.
  const std::string no_precision = script(dir, "  --optimizer-cpu-offload");
  const Imported a = import_megatron(dir, no_precision);
  EXPECT_EQ(a.run.code, 2) << a.run.all();
  EXPECT_NE(a.run.err.find(no_precision + ":10: --optimizer-cpu-offload"), std::string::npos)
      << a.run.err;
  // optimizer/__init__.py: the precision-aware optimizer needs the distributed optimizer.
  std::string text = test::slurp(kMegatronArgs);
  text.replace(text.find(" --use-distributed-optimizer"), 28, "");
  const std::string no_distributed = test::write_file(
      dir.file("nodist.txt"), text + "  --use-precision-aware-optimizer --optimizer-cpu-offload\n");
  const Imported b = import_megatron(dir, no_distributed);
  EXPECT_EQ(b.run.code, 2) << b.run.all();
  EXPECT_NE(b.run.err.find(no_distributed + ":10: --use-precision-aware-optimizer"),
            std::string::npos)
      << b.run.err;
  // A fraction outside [0, 1], or not a number.
  for (const char* bad : {"1.5", "-0.1", "half"}) {
    SCOPED_TRACE(bad);
    const std::string file = script(dir, std::string("  --use-precision-aware-optimizer "
                                                     "--optimizer-cpu-offload "
                                                     "--optimizer-offload-fraction ") +
                                             bad);
    const Imported c = import_megatron(dir, file);
    EXPECT_EQ(c.run.code, 2) << c.run.all();
    EXPECT_NE(c.run.err.find(file + ":10: --optimizer-offload-fraction"), std::string::npos)
        << c.run.err;
  }
}

TEST(OptimizerOffloadInterop, UnpinnedHostBuffersAreUnmodelledOnlyUnderOffload) {
  // hybrid_optimizer.py pins its host gradient and parameter buffers unless told not to;
  // pageable copies are not what the host link's speed costs. Without offload nothing reads
  // the two flags: they stay ignored.
  test::ScratchDir dir;
  const std::string with_offload =
      script(dir, "  --use-precision-aware-optimizer --optimizer-cpu-offload --no-pin-cpu-grads");
  const Imported a = import_megatron(dir, with_offload);
  EXPECT_EQ(a.run.code, 2) << a.run.all();
  EXPECT_NE(a.run.err.find(with_offload + ":10: --no-pin-cpu-grads"), std::string::npos)
      << a.run.err;
  const Imported b = import_megatron(dir, script(dir, "  --no-pin-cpu-grads --no-pin-cpu-params"));
  EXPECT_DOUBLE_EQ(offload_of(b), 0.0);
  EXPECT_NE(b.run.err.find("--no-pin-cpu-params (not modelled)"), std::string::npos) << b.run.err;
}

TEST(OptimizerOffloadInterop, ExportImportRoundTrip) {
  test::ScratchDir dir;
  const Imported first =
      import_megatron(dir, script(dir,
                                  "  --use-precision-aware-optimizer --optimizer-cpu-offload "
                                  "--optimizer-offload-fraction 0.375"));
  ASSERT_DOUBLE_EQ(offload_of(first), 0.375);
  const std::string config =
      test::write_file(dir.file("first.yaml"), test::slurp(dir.file("job.yaml")));
  const test::CliRun exported = run_cli("export '" + config + "' --format megatron --json");
  ASSERT_EQ(exported.code, 0) << exported.all();
  const nlohmann::json j = nlohmann::json::parse(exported.out);
  const std::string text = j["text"].get<std::string>();
  for (const char* flag : {"--use-distributed-optimizer\n", "--use-precision-aware-optimizer\n",
                           "--optimizer-cpu-offload\n", "--optimizer-offload-fraction 0.375\n"})
    EXPECT_NE(text.find(flag), std::string::npos) << flag << text;
  // The exported flags, appended to the example script without offload, import back to
  // the same fraction, and simulate to the time the export quoted.
  const std::string back = test::write_file(
      dir.file("back.txt"), test::script_with_export(test::slurp(kMegatronArgs), text));
  const Imported second = import_megatron(dir, back);
  EXPECT_DOUBLE_EQ(offload_of(second), 0.375);
  const test::CliRun sim = run_cli("simulate '" + dir.file("job.yaml") + "' --json");
  ASSERT_EQ(sim.code, 0) << sim.all();
  EXPECT_DOUBLE_EQ(nlohmann::json::parse(sim.out)["iteration_time_ms"].get<double>(),
                   j["iteration_time_ms"].get<double>());
}

TEST(OptimizerOffloadInterop, NoOffloadExportsNoOffloadFlags) {
  test::ScratchDir dir;
  const Imported i =
      import_megatron(dir, test::write_file(dir.file("plain.txt"), test::slurp(kMegatronArgs)));
  ASSERT_EQ(i.run.code, 0) << i.run.all();
  const test::CliRun exported = run_cli("export '" + dir.file("job.yaml") + "' --format megatron");
  ASSERT_EQ(exported.code, 0) << exported.all();
  EXPECT_EQ(exported.out.find("offload"), std::string::npos) << exported.out;
  EXPECT_EQ(exported.out.find("--use-precision-aware-optimizer"), std::string::npos);
}

}  // namespace optimizer_offload_interop_test
}  // namespace bmpipe
