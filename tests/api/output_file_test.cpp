// api::OutputFile, the atomic output of every command (--out, --trace, --svg, --csv): the
// new bytes go to a temporary file beside the target (".NAME.bmpipe-XXXXXX") and replace
// it only at close(); until then, and when the run fails, the target keeps its old bytes
// and no temporary file stays behind. tests/cli/atomic_output_test.cpp kills the
// executable in mid-write; these call the library.
#include "api/output_file.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "support/support.hpp"

namespace bmpipe::output_file_test {
namespace {

using test::names_in;
using test::ScratchDir;
using test::slurp;
using test::write_file;

TEST(OutputFile, TheTargetChangesOnlyAtClose) {
  ScratchDir dir;
  const std::string target = write_file(dir.file("out.yaml"), "old\n");
  api::OutputFile out(target, "--out");
  EXPECT_FALSE(out.to_stdout());
  out.stream() << "new\n";
  out.stream().flush();
  EXPECT_EQ(slurp(target), "old\n");
  const std::vector<std::string> during = names_in(dir.path());
  ASSERT_EQ(during.size(), 2u);
  EXPECT_EQ(during[0].rfind(".out.yaml.bmpipe-", 0), 0u) << during[0];
  EXPECT_EQ(during[0].size(), std::string(".out.yaml.bmpipe-XXXXXX").size());
  out.close();
  EXPECT_EQ(slurp(target), "new\n");
  EXPECT_EQ(names_in(dir.path()), std::vector<std::string>{"out.yaml"});
}

TEST(OutputFile, AFileNeverClosedLeavesTheOldBytesAndNoTemporaryFile) {
  ScratchDir dir;
  const std::string target = write_file(dir.file("out.yaml"), "old\n");
  {
    api::OutputFile out(target, "--out");
    out.stream() << "half a fi";
  }  // the command failed before close()
  EXPECT_EQ(slurp(target), "old\n");
  EXPECT_EQ(names_in(dir.path()), std::vector<std::string>{"out.yaml"});
}

TEST(OutputFile, WriteOutputMakesANewFile) {
  ScratchDir dir;
  api::write_output(dir.file("a.csv"), "--csv", "x,y\n1,2\n");
  EXPECT_EQ(slurp(dir.file("a.csv")), "x,y\n1,2\n");
  EXPECT_EQ(names_in(dir.path()), std::vector<std::string>{"a.csv"});
}

TEST(OutputFile, APathThatCannotBeWrittenIsAnOutputErrorNamingTheOption) {
  ScratchDir dir;
  auto error = [](const std::string& path, const std::string& option) -> std::string {
    try {
      api::OutputFile out(path, option);
    } catch (const api::OutputError& e) {
      return e.what();
    }
    return "none";
  };
  // A directory, and a folder that does not exist (errno's texts, glibc's).
  EXPECT_EQ(error(dir.path().string(), "--svg"),
            dir.path().string() + ": --svg: cannot open for writing (Is a directory)");
  EXPECT_EQ(
      error(dir.file("no/such/x.svg"), "--trace"),
      dir.file("no/such/x.svg") + ": --trace: cannot open for writing (No such file or directory)");
}

TEST(OutputFile, ADashIsStandardOutput) {
  api::OutputFile out("-", "--trace");
  EXPECT_TRUE(out.to_stdout());
  EXPECT_EQ(&out.stream(), &std::cout);
  out.close();
}

}  // namespace
}  // namespace bmpipe::output_file_test
