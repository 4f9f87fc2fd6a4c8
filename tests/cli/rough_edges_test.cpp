// The rough edges a new user found (issue 21, section 3), one regression test each: option
// names, one-line value errors, help placeholders and exit codes, "did you mean", the
// version, and a pp*tp*dp mismatch that says which override fixes it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "support/support.hpp"

namespace {

using bmpipe::test::CliRun;
using bmpipe::test::run_cli;

using bmpipe::test::kTiny;
const std::string k2x8 = bmpipe::test::examples() + "ascend910b_2x8.yaml";

// ---- 1. options ---------------------------------------------------------------------------

TEST(RoughEdges, OnlyExactOptionNamesAreAccepted) {
  // Boost.Program_options takes an unambiguous prefix by default: --microbatch would be
  // --microbatches. Every command refuses it, naming the option it meant.
  for (const std::string cmd : {"simulate", "cost", "compare --schedules 1f1b", "plan", "export"}) {
    const CliRun r = run_cli(cmd + " " + kTiny + " --microbatch 4");
    EXPECT_EQ(r.code, 2) << cmd << "\n" << r.all();
    EXPECT_NE(r.err.find("did you mean '--microbatches'"), std::string::npos) << cmd << r.err;
  }
  const CliRun search = run_cli("search " + kTiny + " --max-dev 8");
  EXPECT_EQ(search.code, 2) << search.all();
  const CliRun import = run_cli("import profile x.csv --preset h200 --dev 8");
  EXPECT_EQ(import.code, 2) << import.all();
  EXPECT_NE(import.err.find("--dev"), std::string::npos) << import.err;
}

TEST(RoughEdges, ABadValueIsOneLine) {
  const CliRun r = run_cli("simulate " + kTiny + " --pp abc");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "bmpipe simulate: --pp: expected an integer, got 'abc'\n");
  const CliRun eq = run_cli("plan " + kTiny + " --memory-limit-GiB=lots");
  EXPECT_EQ(eq.code, 2);
  EXPECT_EQ(eq.err, "bmpipe plan: --memory-limit-GiB: expected a number, got 'lots'\n");
  const CliRun imp = run_cli("import profile x.csv --preset h200 --devices many");
  EXPECT_EQ(imp.code, 2);
  EXPECT_EQ(imp.err, "bmpipe import: --devices: expected an integer, got 'many'\n");
}

TEST(RoughEdges, ImportHelpHasPlaceholdersAndExitCodes) {
  const CliRun r = run_cli("import --help");
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out.find(" arg "), std::string::npos) << r.out;
  for (const char* s : {"--cluster FILE", "--preset NAME", "--devices N", "--out FILE", "--pp N",
                        "--microbatches N", "Exit codes:"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
}

TEST(RoughEdges, EveryCommandsHelpListsItsExitCodes) {
  for (const char* cmd :
       {"simulate", "cost", "compare", "plan", "search", "import", "export", "schedules"}) {
    const CliRun r = run_cli(std::string(cmd) + " --help");
    EXPECT_EQ(r.code, 0) << cmd;
    EXPECT_NE(r.out.find("Exit codes:"), std::string::npos) << cmd << "\n" << r.out;
  }
}

TEST(RoughEdges, PlanHelpDoesNotListAnOptionItRefuses) {
  const CliRun r = run_cli("plan --help");
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out.find("not accepted"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("--schedule-file"), std::string::npos) << r.out;
  // Given anyway, it is still refused with the reason.
  const CliRun given = run_cli("plan " + kTiny + " --schedule-file s.csv");
  EXPECT_EQ(given.code, 2);
  EXPECT_NE(given.err.find("builds its own schedule"), std::string::npos) << given.err;
}

// ---- 2. did you mean ----------------------------------------------------------------------

TEST(RoughEdges, DidYouMeanForEveryMistypedName) {
  const CliRun compare = run_cli("compare " + kTiny + " --schedules 1f1b,zbh1");
  EXPECT_EQ(compare.code, 2);
  EXPECT_NE(compare.err.find("did you mean 'zb-h1'"), std::string::npos) << compare.err;
  const CliRun format = run_cli("plan " + kTiny + " --format megatrn");
  EXPECT_EQ(format.code, 2);
  EXPECT_NE(format.err.find("did you mean 'megatron'"), std::string::npos) << format.err;
  const CliRun preset = run_cli("import profile x.csv --preset h100 --devices 8");
  EXPECT_EQ(preset.code, 2);
  EXPECT_NE(preset.err.find("did you mean 'h100-sxm'"), std::string::npos) << preset.err;
  const CliRun importer = run_cli("import megatorn args.txt --preset h200 --devices 8");
  EXPECT_EQ(importer.code, 2);
  EXPECT_NE(importer.err.find("did you mean 'megatron'"), std::string::npos) << importer.err;
}

// ---- 3. version ---------------------------------------------------------------------------

TEST(RoughEdges, VersionIsTheProjectsVersion) {
  const CliRun r = run_cli("--version");
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out, std::string("bmpipe ") + BMPIPE_TEST_VERSION + "\n");
}

TEST(RoughEdges, EveryJsonDocumentNamesTheVersionAndTheConfig) {
  const std::string analytic = bmpipe::test::examples() + "ascend910b_llama2_13b_analytic.yaml";
  for (const auto& [cmd, config] : std::vector<std::pair<std::string, std::string>>{
           {"simulate --json", kTiny},
           {"cost --json", analytic},
           {"plan --json --max-evals 50", kTiny},
           {"plan --json --max-evals 50 --format megatron", kTiny},
           {"export --json --format megatron", kTiny},
           {"search --json", kTiny}}) {
    const CliRun r = run_cli(cmd + " " + config);
    ASSERT_EQ(r.code, 0) << cmd << "\n" << r.all();
    const auto j = nlohmann::json::parse(r.out);
    ASSERT_TRUE(j.is_object()) << cmd;
    ASSERT_TRUE(j.contains("bmpipe")) << cmd << "\n" << r.out.substr(0, 400);
    EXPECT_EQ(j["bmpipe"]["version"], BMPIPE_TEST_VERSION) << cmd;
    EXPECT_EQ(j["bmpipe"]["config"], config) << cmd;
  }
}

// compare --json is a list (its contract): each row carries the member, refused rows too,
// and a row's members are those simulate --json prints for its schedule.
TEST(RoughEdges, EveryCompareRowNamesTheVersionAndTheConfig) {
  const CliRun r =
      run_cli("compare " + kTiny + " --schedules 1f1b,dualpipe-v --microbatches 4 --json");
  ASSERT_EQ(r.code, 0) << r.all();
  const auto rows = nlohmann::json::parse(r.out);
  ASSERT_EQ(rows.size(), 2u);
  for (const auto& row : rows) {
    EXPECT_EQ(row["bmpipe"]["version"], BMPIPE_TEST_VERSION);
    EXPECT_EQ(row["bmpipe"]["config"], kTiny);
  }
  EXPECT_EQ(rows[1]["ok"], false);  // dualpipe-v refuses m = 4 < 2p = 8
  // Every member of a row is simulate --json's (which adds the bubble breakdown).
  const CliRun s = run_cli("simulate " + kTiny + " --schedule 1f1b --microbatches 4 --json");
  ASSERT_EQ(s.code, 0) << s.all();
  auto simulated = nlohmann::json::parse(s.out);
  simulated.erase("bubble_breakdown_ms");
  for (auto& d : simulated["devices"]) d.erase("bubble_ms");
  EXPECT_EQ(rows[0], simulated);
}

// Issue 21: with stderr redirected, a 28 s `plan --schedule auto` printed nothing until it
// ended. Off a terminal it prints a line per interval (0 here: every report): schedule,
// phase, the command's evaluations (growing across schedules), best so far, elapsed, ETA.
// Issue 20: the phases before the first evaluation and after the last are named too
// (zb-v at 8192 micro-batches spent 7.5 s there, silent): making the schedule, each
// baseline, the final runs.
TEST(RoughEdges, PlanProgressOffATerminalIsOneLinePerInterval) {
  const CliRun r =
      run_cli("plan " + kTiny + " --schedule auto --max-evals 300 --progress-interval-s 0");
  ASSERT_EQ(r.code, 0) << r.all();
  const std::regex shape(
      R"(plan: ([a-z0-9-]+( v\d)?): (making the schedule|baseline [a-z-]+ \(\d+ of \d+\)|)"
      R"(baselines|search|polish|the final runs), (\d+) evaluations, best )"
      R"((none fits yet|[0-9.]+ ms), [0-9.]+ s, ETA (<1 s|at most \d+ s|unknown))");
  for (const char* phase : {"plan: 1f1b: making the schedule, 0 evaluations",
                            "plan: 1f1b: baseline megatron-no-recompute (1 of 11), 0 evaluations",
                            ": the final runs, "})
    EXPECT_NE(r.err.find(phase), std::string::npos) << phase << "\n" << r.err;
  std::istringstream in(r.err);
  std::string line;
  long long last = 0;
  std::set<std::string> schedules;
  int lines = 0;
  while (std::getline(in, line)) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(line, m, shape)) << line;
    EXPECT_GE(std::stoll(m[4]), last) << line;  // the command's count never goes back
    last = std::stoll(m[4]);
    EXPECT_LE(last, 300);
    schedules.insert(m[1]);
    ++lines;
  }
  EXPECT_GE(lines, 2);
  EXPECT_GE(schedules.size(), 2u) << r.err;  // auto plans several schedules
  EXPECT_TRUE(run_cli("plan " + kTiny + " --quiet").err.empty());
  const CliRun bad = run_cli("plan " + kTiny + " --progress-interval-s -1");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("--progress-interval-s"), std::string::npos) << bad.err;
}

// ---- 4. pp * tp * dp ----------------------------------------------------------------------

TEST(RoughEdges, ADeviceCountMismatchSaysWhichOverrideFixesIt) {
  // The README's command: 2 nodes x 8 = 16 devices, pp 4, tp 1 and dp 2 from the file.
  const CliRun r = run_cli("simulate " + k2x8 + " --schedule gpipe --pp 4 --microbatches 32");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("pp * tp * dp = 8 but the cluster has 16 devices"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("--dp 4"), std::string::npos) << r.err;
  // and the suggestion works
  const CliRun fixed =
      run_cli("simulate " + k2x8 + " --schedule gpipe --pp 4 --microbatches 32 --dp 4");
  EXPECT_EQ(fixed.code, 0) << fixed.all();
}

// ---- 7. the plan file ---------------------------------------------------------------------

TEST(RoughEdges, ThePlanFileKeepsTheMemoryLimitItWasPlannedFor) {
  // tiny's devices hold 1 GiB; planned for 0.5 GiB, the file says 0.5 GiB and simulate
  // checks against 0.5 * 2^30 bytes.
  bmpipe::test::ScratchDir dir;
  const std::string plan = dir.file("p.yaml");
  const CliRun r =
      run_cli("plan " + kTiny + " --memory-limit-GiB 0.5 --max-evals 50 --quiet --out " + plan);
  ASSERT_EQ(r.code, 0) << r.all();
  const std::string text = bmpipe::test::slurp(plan);
  EXPECT_NE(text.find("memory_GiB: 0.5"), std::string::npos) << text;
  EXPECT_EQ(text.find("planned plan"), std::string::npos) << text;
  EXPECT_NE(text.find(": the plan found for 1f1b, "), std::string::npos) << text;
  const CliRun sim = run_cli("simulate --json " + plan);
  ASSERT_EQ(sim.code, 0) << sim.all();
  const auto j = nlohmann::json::parse(sim.out);
  for (const auto& d : j["devices"]) EXPECT_EQ(d["capacity_bytes"], 536870912) << sim.out;
  // Without --memory-limit-GiB the capacity stays the file's.
  const CliRun plain = run_cli("plan " + kTiny + " --max-evals 50 --quiet --out " + plan);
  ASSERT_EQ(plain.code, 0) << plain.all();
  EXPECT_NE(bmpipe::test::slurp(plan).find("memory_GiB: 1"), std::string::npos);
  const CliRun base = run_cli(
      "plan " + kTiny + " --baseline megatron-no-recompute --max-evals 50 --quiet --out " + plan);
  ASSERT_EQ(base.code, 0) << base.all();
  EXPECT_NE(
      bmpipe::test::slurp(plan).find(": the megatron-no-recompute baseline's plan for 1f1b, "),
      std::string::npos);
}

// ---- 5. saturated counts ------------------------------------------------------------------

TEST(RoughEdges, ASaturatedCountReadsAsItsOrderOfMagnitude) {
  // 128 layers in 64 stages: C(127, 63) ~ 1.5e37 partitions, past what an int64 holds.
  const CliRun r =
      run_cli("plan " + bmpipe::test::examples() + "h200_8x8_pp64.yaml --max-evals 10 --quiet");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("exhaustive: refused: more than 10^18 partitions"), std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("9223372036854775807"), std::string::npos) << r.out;
}

// ---- 8. bash completion ------------------------------------------------------------------

/// The words bash would offer for `bmpipe WORDS...` (the last one being completed), using
/// the installed completion script against this build's binary.
std::string complete(const std::string& words) {
  bmpipe::test::ScratchDir dir;
  const std::string script = bmpipe::test::write_file(
      dir.file("c.sh"), "source '" + std::string(BMPIPE_SOURCE_DIR) +
                            "/cli/bmpipe-completion.bash'\n"
                            "COMP_WORDS=(" +
                            std::string(BMPIPE_BINARY) + " " + words +
                            ")\n"
                            "COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))\n"
                            "_bmpipe\nprintf '%s\\n' \"${COMPREPLY[@]}\"\n");
  const std::string out = dir.file("out");
  [[maybe_unused]] const int rc =
      std::system(("bash '" + script + "' > '" + out + "' 2>&1").c_str());
  return bmpipe::test::slurp(out);
}

TEST(RoughEdges, BashCompletionOffersEachCommandsOptions) {
  EXPECT_EQ(complete("simulate --micro"), "--micro-batch-size\n--microbatches\n");
  EXPECT_EQ(complete("plan --memory"), "--memory-limit-GiB\n");
  EXPECT_EQ(complete("import --all"), "--allow-unmodelled\n");
  EXPECT_EQ(complete("comp"), "compare\n");
  EXPECT_EQ(complete("import mega"), "megatron\n");
  EXPECT_EQ(complete("simulate x.yaml --schedule zb-h"), "zb-h1\nzb-h2\n");
}

}  // namespace
