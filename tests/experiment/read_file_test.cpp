// io/read_file: the one reader of untrusted files. Each refusal on a file of its kind, and the
// size bound on a device that never ends.
#include "io/read_file.hpp"

#include <gtest/gtest.h>

#include <filesystem>

#include "support/support.hpp"

namespace bmpipe {
namespace {

std::string refusal(const std::string& path, std::size_t max_bytes, const std::string& what) {
  try {
    read_untrusted_file(path, max_bytes, what);
  } catch (const ReadFileError& e) {
    return e.what();
  }
  return "(read)";
}

TEST(ReadUntrustedFile, ReadsAFileWholeUpToItsBoundInclusive) {
  test::ScratchDir dir;
  const std::string path = test::write_file(dir.file("a.yaml"), std::string(100, 'x') + "\n");
  EXPECT_EQ(read_untrusted_file(path, 101, "config"), std::string(100, 'x') + "\n");
  EXPECT_EQ(refusal(path, 100, "config"), "is larger than 100 bytes, which no config is");
}

TEST(ReadUntrustedFile, RefusesDirectoriesAndMissingFiles) {
  test::ScratchDir dir;
  EXPECT_EQ(refusal(dir.file(""), 1 << 20, "search journal"),
            "is a directory, not a search journal");
  EXPECT_EQ(refusal(dir.file("missing.yaml"), 1 << 20, "config"), "cannot open the file");
}

TEST(ReadUntrustedFile, ADeviceThatNeverEndsStopsAtTheBound) {
  if (!std::filesystem::exists("/dev/zero")) GTEST_SKIP() << "no /dev/zero";
  // 64 KiB read in one chunk past a 1 KiB bound: refused after the first read, not later.
  EXPECT_EQ(refusal("/dev/zero", 1 << 10, "schedule file"),
            "is larger than 1 KiB, which no schedule file is");
}

TEST(ByteSizeText, NamesWholeUnitsAndBytesOtherwise) {
  EXPECT_EQ(byte_size_text(std::size_t{16} << 20), "16 MiB");
  EXPECT_EQ(byte_size_text(std::size_t{1} << 30), "1 GiB");
  EXPECT_EQ(byte_size_text(std::size_t{8} << 10), "8 KiB");
  EXPECT_EQ(byte_size_text(1536), "1536 bytes");
}

}  // namespace
}  // namespace bmpipe
