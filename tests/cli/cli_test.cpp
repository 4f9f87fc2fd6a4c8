// The bmpipe executable end to end: exit codes, messages, JSON contract, overrides.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "support/support.hpp"

namespace {

using bmpipe::test::CliRun;

// stdout and stderr together: the messages tested here go to either.
CliRun run(const std::string& args) {
  CliRun r = bmpipe::test::run_cli(args);
  r.out += r.err;
  return r;
}

std::string stdout_of(const std::string& args) {
  return bmpipe::test::run_cli(args).out;
}

using bmpipe::test::kTiny;

TEST(Cli, HelpExplainsEveryOption) {
  const CliRun top = run("--help");
  EXPECT_EQ(top.code, 0);
  EXPECT_NE(top.out.find("simulate"), std::string::npos);
  const CliRun sim = run("simulate --help");
  EXPECT_EQ(sim.code, 0);
  for (const char* opt : {"--json", "--schedule", "--pp", "--microbatches"})
    EXPECT_NE(sim.out.find(opt), std::string::npos) << opt;
}

TEST(Cli, JsonSummaryHasTheContractKeys) {
  const CliRun r = run("simulate --json " + kTiny);
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  for (const char* key : {"schedule", "pp", "vpp", "microbatches", "iteration_time_ms",
                          "pipeline_time_ms", "bubble_ratio", "fits", "devices"})
    EXPECT_TRUE(j.contains(key)) << key;
  ASSERT_EQ(j["devices"].size(), 4u);
  for (const char* key :
       {"rank", "busy_ms", "idle_ms", "peak_memory_bytes", "capacity_bytes", "fits"})
    EXPECT_TRUE(j["devices"][0].contains(key)) << key;
  // tiny.yaml: p = 4, m = 8, F = 1 ms, B = 2 ms per stage: (m + p - 1)(F + B) = 33 ms.
  EXPECT_DOUBLE_EQ(j["pipeline_time_ms"].get<double>(), 33.0);
  EXPECT_NEAR(j["bubble_ratio"].get<double>(), 3.0 / 11.0, 1e-12);
  EXPECT_DOUBLE_EQ(j["devices"][0]["idle_ms"].get<double>(), 9.0);
}

TEST(Cli, OverridesWinOverTheFile) {
  const auto j = nlohmann::json::parse(
      stdout_of("simulate --json --schedule gpipe --pp 2 --microbatches 4 " + kTiny));
  EXPECT_EQ(j["schedule"], "gpipe");
  EXPECT_EQ(j["pp"], 2);
  // 8 layers on 2 stages: F = 2 ms, B = 4 ms per stage; (4 + 2 - 1) x 6 ms.
  EXPECT_DOUBLE_EQ(j["pipeline_time_ms"].get<double>(), 30.0);
  EXPECT_EQ(j["devices"][0]["peak_inflight_microbatches"], 4);
}

TEST(Cli, SameInputGivesByteIdenticalOutput) {
  EXPECT_EQ(stdout_of("simulate --json " + kTiny), stdout_of("simulate --json " + kTiny));
  EXPECT_EQ(stdout_of("simulate " + kTiny), stdout_of("simulate " + kTiny));
}

TEST(Cli, TableShowsOneRowPerDeviceWithUnits) {
  const CliRun r = run("simulate " + kTiny);
  ASSERT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("iteration time   33.000 ms"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("bubble ratio     27.27 %"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("GiB"), std::string::npos);
}

TEST(Cli, BadConfigExitsTwoWithFileLineAndKey) {
  std::ifstream in(kTiny);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  text.replace(text.find("  pp: 4"), 7, "  pp: 3");
  const bmpipe::test::ScratchDir dir;
  const std::string path = bmpipe::test::write_file(dir.file("bad_pp.yaml"), text);
  const CliRun r = run("simulate " + path);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find(path + ":"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("training.pp"), std::string::npos) << r.out;
}

TEST(Cli, UsageErrorsExitTwo) {
  EXPECT_EQ(run("").code, 2);
  EXPECT_EQ(run("frobnicate").code, 2);
  EXPECT_EQ(run("simulate").code, 2);
  EXPECT_EQ(run("simulate --pp notanumber " + kTiny).code, 2);
  EXPECT_EQ(run("simulate --pp 0 " + kTiny).code, 2);
  EXPECT_EQ(run("simulate /nonexistent.yaml").code, 2);
}

TEST(Cli, DoesNotFitIsAResultNotAFailure) {
  std::ifstream in(kTiny);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  text.replace(text.find("memory_GiB: 1"), 13, "memory_GiB: 0.005");
  const bmpipe::test::ScratchDir dir;
  const CliRun r = run("simulate --json " + bmpipe::test::write_file(dir.file("small.yaml"), text));
  EXPECT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_FALSE(j["fits"].get<bool>());
  EXPECT_FALSE(j["devices"][0]["fits"].get<bool>());
}

TEST(Cli, SchedulesAreListed) {
  const CliRun r = run("schedules");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("gpipe"), std::string::npos);
  EXPECT_NE(r.out.find("1f1b"), std::string::npos);
}

TEST(Cli, NonUtf8PathsDoNotAbortTheJsonWriter) {
  // Regression: a schedule file whose name is not UTF-8 became the schedule's name, and
  // the JSON writer threw (exit 134). It now prints U+FFFD in its place.
  const bmpipe::test::ScratchDir dir;
  const std::string csv = dir.file("sched_\xe9.csv");
  ASSERT_EQ(run("simulate " + kTiny + " --export-schedule '" + csv + "'").code, 0);
  const CliRun r =
      bmpipe::test::run_cli("simulate " + kTiny + " --json --schedule-file '" + csv + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_NE(j["schedule"].get<std::string>().find("\xef\xbf\xbd"), std::string::npos);
}

TEST(Cli, UnwritableOutputsAreNamedAndExitTwo) {
  for (const char* option : {"--svg", "--trace", "--export-schedule"}) {
    const CliRun r = run("simulate " + kTiny + " " + option + " /nonexistent-dir/out");
    EXPECT_EQ(r.code, 2) << option;
    EXPECT_NE(r.out.find(std::string("/nonexistent-dir/out: ") + option), std::string::npos)
        << r.out;
  }
}

TEST(Cli, VppInTheSummaryIsTheScheduleOne) {
  const auto j = nlohmann::json::parse(stdout_of("simulate --json --schedule zb-v " + kTiny));
  EXPECT_EQ(j["vpp"], 2);
  EXPECT_EQ(j["schedule"], "zb-v");
}

TEST(Cli, InternalErrorsHaveTheirOwnExitCode) {
  // 70 (EX_SOFTWARE) is documented for bugs; the usage text says so.
  const CliRun r = run("--help");
  EXPECT_NE(r.out.find("70 internal error"), std::string::npos) << r.out;
}

TEST(Cli, JsonEchoesTheResolvedLayout) {
  // h200_llama3_8b_hf.yaml: 16 devices, pp 4, tp 2, so dp = 2 is derived; global batch 64 =
  // 32 micro-batches x 1 x 2; 32 layers in 4 even stages, all selective.
  const auto j = nlohmann::json::parse(
      stdout_of("simulate --json " + bmpipe::test::examples() + "h200_llama3_8b_hf.yaml"));
  EXPECT_EQ(j["tp"], 2);
  EXPECT_EQ(j["dp"], 2);
  EXPECT_EQ(j["pp"], 4);
  EXPECT_EQ(j["micro_batch_size"], 1);
  EXPECT_EQ(j["global_batch_size"], 64);
  EXPECT_EQ(j["microbatches"], 32);
  EXPECT_EQ(j["partition"], (std::vector<int>{8, 8, 8, 8}));
  EXPECT_EQ(j["recompute_per_stage"], std::vector<std::string>(4, "selective"));
}

}  // namespace
