// The layering the architecture promises, checked on the sources themselves: data flows one
// way, so no folder includes a header of a folder above it.
//   schedules  <  sim (engine, cost model)  <  traces (outputs), experiment  <  planner  <  api
//   <  cli (the executable), python (the module)
// api/ is the library every front end calls; cli/ and python/ only parse, call and print.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <set>
#include <string>

namespace {

namespace fs = std::filesystem;

// What each folder may include besides itself.
const std::map<std::string, std::set<std::string>> kAllowed = {
    {"schedules", {}},
    {"sim", {"schedules"}},
    {"traces", {"schedules", "sim"}},
    {"experiment", {"schedules", "sim"}},
    {"planner", {"schedules", "sim", "experiment"}},
    {"api", {"schedules", "sim", "traces", "experiment", "planner"}},
    {"cli", {"schedules", "sim", "traces", "experiment", "planner", "api"}},
    // The module binds api/ and lists the schedules; nothing else of the layers below.
    {"python", {"schedules", "api"}},
};

TEST(Layering, NoFolderIncludesALayerAboveIt) {
  const std::regex include(R"re(#include "([a-z_]+)/)re");
  int files = 0;
  for (const auto& [folder, allowed] : kAllowed) {
    const fs::path root = fs::path(BMPIPE_SOURCE_DIR) / folder;
    if (!fs::exists(root)) continue;
    for (const auto& entry : fs::recursive_directory_iterator(root)) {
      const std::string ext = entry.path().extension().string();
      if (ext != ".hpp" && ext != ".cpp") continue;
      ++files;
      std::ifstream in(entry.path());
      std::string line;
      int number = 0;
      while (std::getline(in, line)) {
        ++number;
        std::smatch m;
        if (!std::regex_search(line, m, include)) continue;
        const std::string target = m[1];
        EXPECT_TRUE(target == folder || allowed.count(target))
            << entry.path().string() << ":" << number << " includes " << target << "/";
      }
    }
  }
  EXPECT_GT(files, 40);  // the walk found the sources
}

/// Every .hpp/.cpp under the source root whose text contains `needle`, as paths relative to
/// the root.
std::set<std::string> files_containing(const std::string& needle) {
  std::set<std::string> out;
  const fs::path root(BMPIPE_SOURCE_DIR);
  for (const char* folder : {"schedules", "sim", "traces", "experiment", "planner", "api", "cli",
                             "python", "frameworks"}) {
    if (!fs::exists(root / folder)) continue;
    for (const auto& entry : fs::recursive_directory_iterator(root / folder)) {
      const std::string ext = entry.path().extension().string();
      if (ext != ".hpp" && ext != ".cpp") continue;
      std::ifstream in(entry.path());
      const std::string text((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
      if (text.find(needle) != std::string::npos)
        out.insert(fs::relative(entry.path(), root).string());
    }
  }
  return out;
}

TEST(Layering, OnlyTheExecutableParsesCommandLinesAndOnlyItsDriverCallsMpi) {
  // The library under every front end holds no front end's machinery: Python gets the
  // same functions without Boost.Program_options, and MPI stays in one file.
  EXPECT_EQ(files_containing("#include <mpi.h>"), std::set<std::string>{"cli/search_mpi.cpp"});
  for (const std::string& f : files_containing("boost/program_options"))
    EXPECT_EQ(f.rfind("cli/", 0), 0u) << f << " parses a command line outside cli/";
  EXPECT_FALSE(files_containing("boost/program_options").empty());  // the check can see them
}

TEST(Layering, TheEngineLinksNoParserOrJsonLibrary) {
  // sim/ may not include yaml-cpp or nlohmann-json (the CMake target does not link them).
  int files = 0;
  for (const auto& entry : fs::recursive_directory_iterator(fs::path(BMPIPE_SOURCE_DIR) / "sim")) {
    if (entry.path().string().find("/sim/cost/") != std::string::npos) continue;  // HF reader
    const std::string ext = entry.path().extension().string();
    if (ext != ".hpp" && ext != ".cpp") continue;
    ++files;
    std::ifstream in(entry.path());
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(text.find("yaml-cpp"), std::string::npos) << entry.path();
    EXPECT_EQ(text.find("nlohmann"), std::string::npos) << entry.path();
  }
  EXPECT_GT(files, 5);
}

}  // namespace
