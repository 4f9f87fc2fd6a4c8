// The search journal in the library (api/search_journal.hpp, issue 38): the executable and
// the Python module write it through one implementation, hash a search's options alike,
// and a run_search with a journal cut to a prefix resumes to the uninterrupted document.
#include "api/search_journal.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "api/api.hpp"
#include "support/medium_search.hpp"
#include "support/support.hpp"

namespace bmpipe::search_journal_test {
namespace {

using test::ScratchDir;
using test::slurp;

const std::string& kMedium = test::kMediumConfig;

nlohmann::json timeless(nlohmann::json doc) {
  doc["search"].erase("wall_s");
  return doc;
}

api::SearchRequest medium() {
  return test::medium_search_request();
}

TEST(ApiSearchJournal, OptionsAreSpeltAsTheCommandLineHashesThem) {
  api::SearchRequest r = medium();
  r.memory_limit_GiB = 40;
  const auto o = api::journal_options(r, 5, {{"training.sequence_parallel", "true"}});
  const std::map<std::string, std::string> expected{{"layout-evals", "20000"},
                                                    {"margin-GiB", "0"},
                                                    {"memory-limit-GiB", "40"},
                                                    {"micro-batch-size", "1,2"},
                                                    {"no-bound", "false"},
                                                    {"planner", "quick"},
                                                    {"pp", "4,8"},
                                                    {"refine", "0"},
                                                    {"screen-evals", "64"},
                                                    {"screen-margin-pct", "5"},
                                                    {"seed", "1"},
                                                    {"set", "training.sequence_parallel=true\n"},
                                                    {"tp", "4,8"}};
  EXPECT_EQ(o, expected);
  // The hash: the config's bytes, then "\nNAME=VALUE" per option in name order.
  EXPECT_EQ(api::journal_inputs_hash("abc", {{"b", "2"}, {"a", "1"}}),
            api::fnv1a64("\nb=2", api::fnv1a64("\na=1", api::fnv1a64("abc"))));
  EXPECT_NE(api::journal_inputs_hash("abc", {{"a", "1"}}),
            api::journal_inputs_hash("abc", {{"a", "2"}}));
  // FNV-1a's published test vector: "a".
  EXPECT_EQ(api::fnv1a64("a"), 0xaf63dc4c8601ec8cull);
}

TEST(ApiSearchJournal, RunSearchResumesAJournalCutToAPrefix) {
  ScratchDir dir;
  const Config config = load_config(kMedium);
  const api::JournalRequest j{dir.file("journal"), 42};
  const nlohmann::json whole = timeless(api::run_search(config, medium(), j));
  EXPECT_EQ(whole, timeless(api::run_search(config, medium())));
  const std::string text = slurp(j.path);
  std::vector<std::size_t> ends;  // the end of each line
  for (std::size_t i = 0; i < text.size(); ++i)
    if (text[i] == '\n') ends.push_back(i + 1);
  ASSERT_EQ(ends.size(), 29u);  // the header and 28 layouts
  for (std::size_t kept : {0u, 5u, 27u}) {
    test::write_file(j.path, text.substr(0, ends[kept]));
    EXPECT_EQ(timeless(api::run_search(config, medium(), j)), whole) << kept;
    EXPECT_EQ(slurp(j.path).size(), text.size()) << kept;
  }
  // A torn last line: a note, and the line written again.
  test::write_file(j.path, text.substr(0, ends[27] + 10));
  std::vector<std::string> notes;
  EXPECT_EQ(timeless(api::run_search(config, medium(), j,
                                     [&](const std::string& n) { notes.push_back(n); })),
            whole);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0], "--journal " + j.path +
                          ": line 29 was torn (a run killed while writing it): dropped and "
                          "cut off");
  // Other inputs: refused, the file untouched.
  const std::string before = slurp(j.path);
  try {
    api::run_search(config, medium(), api::JournalRequest{j.path, 43});
    ADD_FAILURE() << "a journal of other inputs was taken";
  } catch (const api::RequestError& e) {
    EXPECT_EQ(e.key(), "--journal");
    EXPECT_NE(e.message().find("written for other inputs"), std::string::npos) << e.what();
  }
  EXPECT_EQ(slurp(j.path), before);
}

TEST(ApiSearchJournal, AConfigOnStandardInputIsHashedByItsBytes) {
  // bmpipe search reads the config once and hashes the bytes it parsed: from standard input
  // too (it used to read the file again, and hashed nothing for "-"), so a journal written
  // for the file resumes from the same bytes on standard input, and not from other bytes.
  ScratchDir dir;
  const std::string journal = dir.file("j.jsonl");
  const auto file = test::run_cli("search " + test::kTiny + " --json --quiet --journal " + journal);
  ASSERT_EQ(file.code, 0) << file.err;
  const auto piped =
      test::run_cli("search - --json --quiet --journal " + journal + " < " + test::kTiny);
  ASSERT_EQ(piped.code, 0) << piped.err;
  EXPECT_EQ(nlohmann::json::parse(piped.out)["layouts"],
            nlohmann::json::parse(file.out)["layouts"]);
  const std::string other = test::write_file(dir.file("other.yaml"), slurp(test::kTiny) + "\n");
  const auto refused =
      test::run_cli("search - --json --quiet --journal " + journal + " < " + other);
  EXPECT_EQ(refused.code, 2);
  EXPECT_NE(refused.err.find("written for other inputs"), std::string::npos) << refused.err;
}

TEST(ApiSearchJournal, ConfigSourceTakesOverrides) {
  Overrides o;
  o.set = {{"training.microbatches", "16"}};
  EXPECT_EQ(api::load_config_source(test::kTiny, o).training.microbatches, 16);
  EXPECT_EQ(api::load_config_source(slurp(test::kTiny), o).training.microbatches, 16);
  EXPECT_TRUE(api::config_source_is_path(test::kTiny));
  EXPECT_FALSE(api::config_source_is_path(slurp(test::kTiny)));
}

}  // namespace
}  // namespace bmpipe::search_journal_test
