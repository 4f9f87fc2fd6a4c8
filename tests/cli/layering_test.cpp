// The layering the architecture promises, checked on the sources themselves: data flows one
// way, so no folder includes a header of a folder above it.
//   io (the bounded file reader)  <  schedules  <  sim (engine, cost model)
//     <  traces (outputs), experiment (the config layer, HF config.json included)
//     <  frameworks (importers, exporters)  <  planner  <  api
//     <  cli (the executable), python (the module)
// frameworks/ is layered by subfolder: common (the shared vocabulary, the imported job) sits
// below each
// framework's folder, and no framework's folder includes another's; frameworks/'s own files
// (the importer table) sit above them all. api/ is the library every front end calls; cli/
// and python/ only parse, call and print (cli/ includes api/ alone).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

// What each layer may include besides itself. A layer is a top folder, except under
// frameworks/, where it is the subfolder ("frameworks/megatron"); "frameworks" alone is the files
// directly in frameworks/.
const std::set<std::string> kFrameworkFolders = {"frameworks/common", "frameworks/megatron",
                                                 "frameworks/mindformers", "frameworks/profile",
                                                 "frameworks/torchtitan"};
const std::map<std::string, std::set<std::string>> kAllowed = {
    {"io", {}},
    {"schedules", {"io"}},
    {"sim", {"io", "schedules"}},
    {"traces", {"io", "schedules", "sim"}},
    {"experiment", {"io", "schedules", "sim"}},
    {"frameworks/common", {"io", "schedules", "sim", "experiment"}},
    {"frameworks/megatron", {"io", "schedules", "sim", "experiment", "frameworks/common"}},
    {"frameworks/mindformers", {"io", "schedules", "sim", "experiment", "frameworks/common"}},
    {"frameworks/profile", {"io", "schedules", "sim", "experiment", "frameworks/common"}},
    {"frameworks/torchtitan", {"io", "schedules", "sim", "experiment", "frameworks/common"}},
    {"frameworks",
     {"io", "schedules", "sim", "experiment", "frameworks/common", "frameworks/megatron",
      "frameworks/mindformers", "frameworks/profile", "frameworks/torchtitan"}},
    {"planner",
     {"io", "schedules", "sim", "experiment", "frameworks/common", "frameworks/megatron",
      "frameworks/mindformers", "frameworks/profile", "frameworks/torchtitan", "frameworks"}},
    {"api",
     {"io", "schedules", "sim", "traces", "experiment", "frameworks/common", "frameworks/megatron",
      "frameworks/mindformers", "frameworks/profile", "frameworks/torchtitan", "frameworks",
      "planner"}},
    // The executable parses, calls api/ and prints: it includes api/ headers alone (issue
    // 38), so what the CLI does Python and the tests can call too.
    {"cli", {"api"}},
    // The module binds api/, lists the schedules and reads files with io/; nothing else below.
    {"python", {"io", "schedules", "api"}},
};

// The layer of a path relative to the source root ("experiment/hf_config.hpp" ->
// "sim/cost/cost_model.hpp" -> "sim").
std::string layer_of(const std::string& relative) {
  const auto first = relative.find('/');
  const std::string top = relative.substr(0, first);
  if (top != "frameworks" || first == std::string::npos) return top;
  const auto second = relative.find('/', first + 1);
  return second == std::string::npos ? top : relative.substr(0, second);
}

TEST(Layering, LayersAreNamedByTheirFolder) {
  EXPECT_EQ(layer_of("sim/cost/cost_model.hpp"), "sim");
  EXPECT_EQ(layer_of("frameworks/megatron/import.hpp"), "frameworks/megatron");
  EXPECT_EQ(layer_of("experiment/hf_config.hpp"), "experiment");
  EXPECT_EQ(layer_of("frameworks/importers.hpp"), "frameworks");
  for (const std::string& f : kFrameworkFolders) {
    EXPECT_TRUE(kAllowed.count(f)) << f;
    EXPECT_TRUE(fs::is_directory(fs::path(BMPIPE_SOURCE_DIR) / f)) << f;
  }
}

TEST(Layering, TheLayersMakeNoCircle) {
  // A depth-first walk of "may include": a layer met again while it is still being walked
  // would be a circle (two layers that may include each other, however far round).
  std::map<std::string, int> state;  // 1: being walked, 2: done
  std::vector<std::string> path;
  std::function<void(const std::string&)> walk = [&](const std::string& layer) {
    state[layer] = 1;
    path.push_back(layer);
    const auto it = kAllowed.find(layer);
    ASSERT_NE(it, kAllowed.end()) << layer << " is included but has no row";
    for (const std::string& below : it->second) {
      std::string trail;
      for (const std::string& p : path) trail += p + " -> ";
      EXPECT_NE(state[below], 1) << "circle: " << trail << below;
      if (state[below] == 0) walk(below);
    }
    path.pop_back();
    state[layer] = 2;
  };
  for (const auto& [layer, allowed] : kAllowed)
    if (state[layer] == 0) walk(layer);
  EXPECT_EQ(state.size(), kAllowed.size());
}

TEST(Layering, NoFolderIncludesALayerAboveIt) {
  const std::regex include(R"re(#include "([a-z_]+/[^"]*)")re");
  int files = 0;
  for (const auto& [folder, allowed] : kAllowed) {
    const fs::path root = fs::path(BMPIPE_SOURCE_DIR) / folder;
    if (!fs::exists(root)) continue;
    for (const auto& entry : fs::recursive_directory_iterator(root)) {
      const std::string ext = entry.path().extension().string();
      if (ext != ".hpp" && ext != ".cpp") continue;
      // frameworks/ is walked once per layer: each file counts in its own.
      const std::string relative =
          entry.path().lexically_relative(fs::path(BMPIPE_SOURCE_DIR)).generic_string();
      if (layer_of(relative) != folder) continue;
      ++files;
      std::ifstream in(entry.path());
      std::string line;
      int number = 0;
      while (std::getline(in, line)) {
        ++number;
        std::smatch m;
        if (!std::regex_search(line, m, include)) continue;
        const std::string target = layer_of(m[1]);
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
  for (const char* folder : {"io", "schedules", "sim", "traces", "experiment", "planner", "api",
                             "cli", "python", "frameworks"}) {
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

TEST(Layering, TheSearchPassesAndTheirThreadsAreTheLibrarys) {
  // Issue 38 item 3: one search driver, in api/ (search_driver.hpp); cli/ parses, prints
  // and, under mpirun, carries messages. No thread pool, no call of the planner's layout
  // functions (a pass) and no handing out of a pass's tasks (TaskFeed: the executor over
  // processes is api/search_remote.hpp's) is left in cli/.
  for (const char* needle :
       {"tbb", "evaluate_layout(", "screen_layout(", "rank_layouts(", "TaskFeed"})
    for (const std::string& f : files_containing(needle))
      EXPECT_NE(f.rfind("cli/", 0), 0u) << f << " holds " << needle;
  EXPECT_TRUE(files_containing("tbb").count("api/search_driver.cpp"));  // the check can see
  EXPECT_TRUE(files_containing("evaluate_layout(").count("api/search_driver.cpp"));
  EXPECT_TRUE(files_containing("TaskFeed").count("api/search_remote.cpp"));
}

TEST(Layering, OnlyTheTorchTitanImporterReadsToml) {
  // README's dependency table: toml++ is there for torchtitan's job TOML, in one file.
  EXPECT_EQ(files_containing("#include <toml++/toml.h>"),
            std::set<std::string>{"frameworks/torchtitan/import.cpp"});
}

TEST(Layering, TheEngineLinksNoParserOrJsonLibrary) {
  // sim/ (the engine and the cost model) may not include yaml-cpp or nlohmann-json (the CMake
  // targets do not link them): HF config.json files are read in experiment/hf_config.cpp.
  int files = 0;
  for (const auto& entry : fs::recursive_directory_iterator(fs::path(BMPIPE_SOURCE_DIR) / "sim")) {
    const std::string ext = entry.path().extension().string();
    if (ext != ".hpp" && ext != ".cpp") continue;
    ++files;
    std::ifstream in(entry.path());
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(text.find("yaml-cpp"), std::string::npos) << entry.path();
    EXPECT_EQ(text.find("nlohmann"), std::string::npos) << entry.path();
  }
  EXPECT_GT(files, 15);  // the engine and the cost model
}

}  // namespace
