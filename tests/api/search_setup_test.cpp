// The search's setup as a library call (issue 38): api::read_config_bytes,
// api::search_inputs_hash and api::prepare_file_search, which `bmpipe search CONFIG` and
// Python's search(journal=...) share, so that either front end resumes the other's journal.
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>

#include "api/search_journal.hpp"
#include "support/support.hpp"

namespace bmpipe::search_setup_test {
namespace {

using test::kTiny;
using test::ScratchDir;
using test::slurp;

/// The ConfigError `f` throws as "file|line|key|message"; "none" when it throws nothing.
template <class F>
std::string config_error(F f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.file() + "|" + std::to_string(e.line()) + "|" + e.key() + "|" + e.message();
  }
  return "none";
}

TEST(SearchSetup, AFormatRanksOnlyItsFrameworksLayoutsAndNoOther) {
  // search --format F is --expressible F; F beside another --expressible is refused, and
  // an unknown F is named as --format.
  api::SearchRequest r;
  api::rank_for_format(r, "megatron");
  EXPECT_EQ(r.framework, std::optional<std::string>("megatron"));
  api::rank_for_format(r, "megatron");  // the same framework twice is one
  try {
    api::rank_for_format(r, "mindformers");
    ADD_FAILURE() << "two frameworks were taken";
  } catch (const api::RequestError& e) {
    EXPECT_EQ(std::string(e.what()),
              "--expressible: 'megatron' beside --format 'mindformers': --format ranks only the "
              "layouts its framework runs; give one framework");
  }
  api::SearchRequest fresh;
  try {
    api::rank_for_format(fresh, "megatorn");
    ADD_FAILURE() << "an unknown format was taken";
  } catch (const api::RequestError& e) {
    EXPECT_EQ(e.key(), "--format");
  }
}

TEST(SearchSetup, TheConfigsBytesAreReadAsTheyAre) {
  ScratchDir dir;
  // No YAML at all: the bytes are read, not parsed.
  const std::string bytes = std::string("a: 1\r\n\0b", 9);
  const std::string path = test::write_file(dir.file("c.yaml"), bytes);
  EXPECT_EQ(api::read_config_bytes(path), bytes);
}

TEST(SearchSetup, AnUnreadableConfigIsAConfigErrorOfItsPath) {
  ScratchDir dir;
  const std::string missing = dir.file("missing.yaml");
  EXPECT_EQ(config_error([&] { api::read_config_bytes(missing); }),
            missing + "|0||cannot open the file");
  EXPECT_EQ(config_error([&] { api::read_config_bytes(dir.path().string()); }),
            dir.path().string() + "|0||is a directory, not a config");
  // A device that never ends stops at the bound, 16 MiB.
  EXPECT_EQ(config_error([] { api::read_config_bytes("/dev/zero"); }),
            "/dev/zero|0||is larger than 16 MiB, which no config is");
}

TEST(SearchSetup, TheHashIsTheJournalsOfTheRequestsOptionsAsTheCommandLineSpellsThem) {
  api::SearchRequest r;
  r.space.tp = {1, 2};
  r.space.pp = {4};
  r.overrides.set = {{"training.sequence_parallel", "true"}};
  // Written out by hand: the request's options, the defaults among them (SearchRequest's:
  // quick planner, 64 screening evaluations, 20000 per layout, seed 1, the bound on),
  // and the margin given (none: 5 %, SearchRequest{}.screen_margin 0.05 as a percentage).
  std::map<std::string, std::string> options{{"layout-evals", "20000"},
                                             {"margin-GiB", "0"},
                                             {"no-bound", "false"},
                                             {"planner", "quick"},
                                             {"pp", "4"},
                                             {"refine", "0"},
                                             {"screen-evals", "64"},
                                             {"screen-margin-pct", "5"},
                                             {"seed", "1"},
                                             {"set", "training.sequence_parallel=true\n"},
                                             {"tp", "1,2"}};
  EXPECT_EQ(api::search_inputs_hash("text", r, std::nullopt),
            api::journal_inputs_hash("text", options));
  EXPECT_EQ(api::search_inputs_hash("text", r, 5.0), api::journal_inputs_hash("text", options));
  options["screen-margin-pct"] = "7.5";
  EXPECT_EQ(api::search_inputs_hash("text", r, 7.5), api::journal_inputs_hash("text", options));
  // Another byte of config, another hash.
  EXPECT_NE(api::search_inputs_hash("text", r, 7.5), api::search_inputs_hash("text ", r, 7.5));
}

TEST(SearchSetup, AFileSearchParsesTheBytesItHashesWithTheRequestsOverrides) {
  ScratchDir dir;
  const std::string path = test::write_file(dir.file("tiny.yaml"), slurp(kTiny));
  api::SearchRequest r;
  // tiny.yaml: 4 devices, 8 layers; pp 4 with tp 1 leaves dp 1: one layout.
  r.space.tp = {1};
  r.space.pp = {4};
  r.space.vpp = {1};
  r.space.micro_batch_size = {1};
  r.space.schedules = {"1f1b"};
  r.overrides.set = {{"training.microbatches", "16"}};  // the file says 8
  const api::FileSearch f = api::prepare_file_search(path, r, std::nullopt);
  EXPECT_EQ(f.setup.config.file, path);
  EXPECT_EQ(f.setup.config.training.microbatches, 16);
  ASSERT_EQ(f.setup.layouts.size(), 1u);
  EXPECT_EQ(f.setup.layouts[0].pp, 4);
  EXPECT_EQ(f.setup.layouts[0].dp, 1);
  EXPECT_EQ(f.inputs_hash, api::search_inputs_hash(slurp(kTiny), r, std::nullopt));
  // A config that cannot be read is named as the command names it.
  EXPECT_EQ(config_error([&] { api::prepare_file_search(dir.file("no.yaml"), r, std::nullopt); }),
            dir.file("no.yaml") + "|0||cannot open the file");
}

}  // namespace
}  // namespace bmpipe::search_setup_test
