// Output files are written to a temporary file beside them and renamed over the target only
// when complete (api/output_file.hpp, OutputFile): a killed or failing run leaves the old file
// byte-identical and, after a normal error, no temporary file behind.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "support/support.hpp"

namespace {

using bmpipe::test::run_cli;
using bmpipe::test::ScratchDir;
using bmpipe::test::slurp;
using bmpipe::test::write_file;

using bmpipe::test::kTiny;
using bmpipe::test::names_in;
const std::string kOld = "the old bytes\n";

/// Bytes in the folder's temporary files (".NAME.bmpipe-XXXXXX").
std::uintmax_t temp_bytes(const std::filesystem::path& dir) {
  std::uintmax_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().filename().string().find(".bmpipe-") != std::string::npos)
      n += std::filesystem::file_size(e.path());
  return n;
}

TEST(AtomicOutput, KilledWhileWritingATraceLeavesTheOldFile) {
  ScratchDir dir;
  const std::string trace = write_file(dir.file("trace.json"), kOld);
  // A trace of a few hundred MB: the run is still writing when it is killed.
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const std::string config = bmpipe::test::examples() + "h200_8x8_pp64.yaml";
    if (!freopen("/dev/null", "w", stdout)) _exit(99);
    execl(BMPIPE_BINARY, BMPIPE_BINARY, "simulate", config.c_str(), "--microbatches", "2048",
          "--trace", trace.c_str(), static_cast<char*>(nullptr));
    _exit(98);
  }
  // Kill once the temporary file has bytes in it (at most 20 s).
  bool writing = false;
  for (int i = 0; i < 2000 && !writing; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    writing = temp_bytes(dir.path()) > 1'000'000;
  }
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(writing) << "the run never wrote its trace";
  ASSERT_TRUE(WIFSIGNALED(status)) << "the run ended before it was killed";
  EXPECT_EQ(slurp(trace), kOld);
}

TEST(AtomicOutput, AFailedRunLeavesTheOldFilesAndNoTemporaryFile) {
  ScratchDir dir;
  const std::string trace = write_file(dir.file("trace.json"), kOld);
  // --trace opens first, then --svg fails (no such folder): the run stops with exit 2.
  const auto r =
      run_cli("simulate " + kTiny + " --trace " + trace + " --svg " + dir.file("missing/x.svg"));
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--svg"), std::string::npos) << r.err;
  EXPECT_EQ(slurp(trace), kOld);
  EXPECT_EQ(names_in(dir.path()), std::vector<std::string>{"trace.json"});
}

TEST(AtomicOutput, ACompleteRunReplacesTheFileWithAPlainFilesMode) {
  ScratchDir dir;
  const std::string trace = write_file(dir.file("trace.json"), kOld);
  const std::string svg = dir.file("t.svg");
  const auto r = run_cli("simulate " + kTiny + " --trace " + trace + " --svg " + svg +
                         " --export-schedule " + dir.file("s.csv"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(slurp(trace).rfind("{\"displayTimeUnit\"", 0), 0u);
  EXPECT_NE(slurp(svg).find("</svg>"), std::string::npos);
  EXPECT_EQ(names_in(dir.path()), (std::vector<std::string>{"s.csv", "t.svg", "trace.json"}));
  // mkstemp makes 0600 files; the output has the mode a plain open gives: 0666 less the
  // umask, as the file written by the test itself has.
  struct stat made {
  }, plain{};
  ASSERT_EQ(stat(svg.c_str(), &made), 0);
  ASSERT_EQ(stat(write_file(dir.file("plain"), "x").c_str(), &plain), 0);
  EXPECT_EQ(made.st_mode & 0777, plain.st_mode & 0777);
}

TEST(AtomicOutput, DevicesAreWrittenInPlaceAndDirectoriesRefusedAtOnce) {
  ScratchDir dir;
  const auto to_null = run_cli("simulate " + kTiny + " --trace /dev/null");
  EXPECT_EQ(to_null.code, 0) << to_null.err;
  struct stat st {};
  ASSERT_EQ(stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  const auto to_dir = run_cli("simulate " + kTiny + " --trace " + dir.path().string());
  EXPECT_EQ(to_dir.code, 2);
  EXPECT_NE(to_dir.err.find("--trace: cannot open for writing"), std::string::npos) << to_dir.err;
  EXPECT_TRUE(names_in(dir.path()).empty());
}

TEST(AtomicOutput, SearchCsvAndOutAreReplacedWhole) {
  ScratchDir dir;
  const std::string csv = write_file(dir.file("s.csv"), kOld);
  const std::string out = write_file(dir.file("best.yaml"), kOld);
  const auto r = run_cli("search " + kTiny + " --quiet --csv " + csv + " --out " + out);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(slurp(csv), kOld);
  EXPECT_NE(slurp(out).find("Written by bmpipe search"), std::string::npos);
  EXPECT_EQ(names_in(dir.path()), (std::vector<std::string>{"best.yaml", "s.csv"}));
}

}  // namespace
