// The library under every front end (api/): its answers are the executable's, byte for
// byte, and its request checks name the option and suggest the name meant.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "api/api.hpp"
#include "api/contracts.hpp"
#include "api/search.hpp"
#include "api/search_driver.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace {

using test::kTiny;
const std::string kGpt3 = test::examples() + "gpt3_175b_a100.yaml";

/// A search document without its wall-clock seconds, the one field that differs by run.
nlohmann::json timeless(nlohmann::json doc) {
  EXPECT_TRUE(doc.at("search").at("wall_s").is_number());
  doc["search"].erase("wall_s");
  return doc;
}

/// A GPT-3 search small enough for a test (2 pipeline sizes, 2 schedules, 1 micro-batch
/// size) that still rejects layouts by more than one rule and plans the rest.
api::SearchRequest small_gpt3_search() {
  api::SearchRequest r;
  r.space.tp = {8};
  r.space.pp = {8, 16};
  r.space.micro_batch_size = {1};
  r.effort = PlannerEffort::off;
  return r;
}

/// Two layouts, each planned (a quick planner run apiece).
api::SearchRequest planned_gpt3_search() {
  api::SearchRequest r;
  r.space.tp = {8};
  r.space.pp = {16};
  r.space.micro_batch_size = {1};
  r.space.schedules = {"1f1b", "zb-h1"};
  return r;
}

TEST(ApiSearch, GivesTheDocumentTheExecutablePrints) {
  const test::CliRun cli = test::run_cli("search " + kGpt3 +
                                         " --planner off --tp 8 --pp 8,16 --micro-batch-size 1 "
                                         "--json --quiet");
  ASSERT_EQ(cli.code, 0) << cli.err;
  const nlohmann::json lib = api::run_search(load_config(kGpt3), small_gpt3_search());
  EXPECT_EQ(timeless(lib), timeless(nlohmann::json::parse(cli.out)));
  EXPECT_GT(lib.at("layouts").size(), 2u);
}

TEST(ApiSearch, TableIsTheTextTheExecutablePrints) {
  const test::CliRun cli = test::run_cli("search " + kGpt3 +
                                         " --planner off --tp 8 --pp 8,16 --micro-batch-size 1 "
                                         "--top 2 --quiet");
  ASSERT_EQ(cli.code, 0) << cli.err;
  const api::SearchSetup s = api::prepare_search(load_config(kGpt3), small_gpt3_search());
  api::ThreadExecutor threads(s, 0);
  const api::SearchReport report =
      api::rank_search(s, api::drive_search(s, threads).results, 1, 0.0);
  // The last line's wall-clock seconds are the run's own.
  const auto timeless_table = [](std::string text) {
    const std::size_t at = text.rfind(", 1 process, ");
    EXPECT_NE(at, std::string::npos) << text;
    return text.substr(0, at);
  };
  const std::string table = api::search_table(report, kGpt3, 2);
  EXPECT_EQ(timeless_table(table), timeless_table(cli.out));
  EXPECT_NE(table.find("(2 shown; --top N for more"), std::string::npos) << table;
}

TEST(ApiSearch, CsvIsTheFileTheExecutableWrites) {
  test::ScratchDir dir;
  const std::string csv = dir.file("layouts.csv");
  const test::CliRun cli = test::run_cli("search " + kGpt3 +
                                         " --planner off --tp 8 --pp 8,16 --micro-batch-size 1 "
                                         "--quiet --csv " +
                                         csv);
  ASSERT_EQ(cli.code, 0) << cli.err;
  const api::SearchSetup s = api::prepare_search(load_config(kGpt3), small_gpt3_search());
  api::ThreadExecutor threads(s, 0);
  const api::SearchReport report =
      api::rank_search(s, api::drive_search(s, threads).results, 1, 0.0);
  EXPECT_EQ(api::search_csv(report), test::slurp(csv));
}

/// Every layout of `s` planned as the first pass plans it, on `threads` threads.
std::vector<LayoutResult> first_pass(const api::SearchSetup& s,
                                     const std::vector<std::size_t>& which, int threads) {
  std::vector<api::SearchTask> tasks;
  for (const std::size_t i : which) tasks.push_back(api::SearchTask{i, std::nullopt});
  std::vector<LayoutResult> out;
  for (api::TaskOutcome& o : api::run_tasks(s, api::SearchPass{}, tasks, threads))
    out.push_back(std::get<LayoutResult>(std::move(o)));
  return out;
}

TEST(ApiSearch, SameResultsWhateverTheSplitOfTheRange) {
  // What the MPI transport relies on: a layout's result depends on nothing but the layout.
  const api::SearchSetup s = api::prepare_search(load_config(kGpt3), planned_gpt3_search());
  ASSERT_GE(s.layouts.size(), 2u);
  std::vector<std::size_t> all;
  for (std::size_t i = 0; i < s.layouts.size(); ++i) all.push_back(i);
  const std::vector<LayoutResult> whole = first_pass(s, all, 2);
  for (std::size_t i = s.layouts.size(); i-- > 0;)
    EXPECT_EQ(api::encode_result(first_pass(s, {i}, 1).at(0)), api::encode_result(whole[i])) << i;
}

TEST(ApiSearch, WireFormatRoundTripsEveryField) {
  const api::SearchSetup s = api::prepare_search(load_config(kGpt3), planned_gpt3_search());
  std::vector<std::size_t> all;
  for (std::size_t i = 0; i < s.layouts.size(); ++i) all.push_back(i);
  bool planned = false;
  for (const LayoutResult& r : first_pass(s, all, 0)) {
    const LayoutResult back = api::decode_result(api::encode_result(r));
    EXPECT_EQ(back.layout, r.layout);
    EXPECT_EQ(back.iteration_time, r.iteration_time);  // exact ns, not the rounded ms
    EXPECT_EQ(back.plan, r.plan);
    EXPECT_EQ(back.fits, r.fits);
    EXPECT_EQ(back.rejected, r.rejected);
    EXPECT_EQ(back.evaluations, r.evaluations);
    planned = planned || !r.plan.partition.empty();
  }
  EXPECT_TRUE(planned);
}

// The MPI wire and the journal carry a layout's offload form: job as no key, the others
// by name (the JSON's offload_form column).
TEST(ApiSearch, WireFormatCarriesTheOffloadForm) {
  for (const OffloadForm form : {OffloadForm::job, OffloadForm::per_layer, OffloadForm::only}) {
    LayoutResult r;
    r.layout = Layout{1, 8, 1, 1, 1, "1f1b"};
    r.layout.offload = "core_attn,attn_proj";
    r.layout.offload_lead = 2;
    r.layout.offload_form = form;
    r.rejected = "static";
    r.filter = "static-memory";
    const std::string text = api::encode_result(r);
    EXPECT_EQ(text.find("\"offload_form\":\"per_layer\"") != std::string::npos,
              form == OffloadForm::per_layer)
        << text;
    EXPECT_EQ(text.find("\"offload_form\":\"only\"") != std::string::npos,
              form == OffloadForm::only)
        << text;
    EXPECT_EQ(api::decode_result(text).layout, r.layout) << text;
  }
}

TEST(ApiSearch, RequestIsCheckedBeforeAnyConfig) {
  api::SearchRequest r;
  r.max_evals = 0;
  EXPECT_THROW(api::check_search_request(r), api::RequestError);
  r = {};
  r.threads = -1;
  EXPECT_THROW(api::check_search_request(r), api::RequestError);
  r = {};
  r.memory_limit_GiB = -3;
  try {
    api::check_search_request(r);
    FAIL() << "a negative memory limit passed";
  } catch (const api::RequestError& e) {
    EXPECT_EQ(e.key(), "--memory-limit-GiB");
  }
  EXPECT_THROW(api::planner_effort("fast"), api::RequestError);
  EXPECT_EQ(api::planner_effort("full"), PlannerEffort::full);
}

// ---- schedule names: one check, "did you mean" everywhere -----------------------------------

TEST(ApiSchedules, UnknownNameSuggestsTheNearest) {
  try {
    api::require_schedule("intreleaved", "--schedules");
    FAIL() << "an unknown schedule passed";
  } catch (const api::RequestError& e) {
    EXPECT_EQ(e.key(), "--schedules");
    EXPECT_NE(e.message().find("unknown schedule 'intreleaved' (did you mean 'interleaved'?)"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(api::require_schedule("zb-v", "--schedules").name, "zb-v");
}

TEST(ApiSchedules, CompareChecksItsListBeforeTheConfig) {
  api::CompareRequest r;
  try {
    api::check_compare_request(r);
    FAIL() << "an empty list passed";
  } catch (const api::RequestError& e) {
    EXPECT_STREQ(e.what(), "--schedules: the list is empty");
  }
  r.schedules = {"1f1b", "zb-h3"};
  EXPECT_THROW(api::check_compare_request(r), api::RequestError);
}

TEST(ApiSchedules, EveryFrontEndSaysDidYouMean) {
  // The six places that checked a name by hand said it three ways; now one message.
  for (const std::string& args :
       {"simulate " + kTiny + " --schedule 1fb1", "compare " + kTiny + " --schedules 1f1b,1fb1",
        "plan " + kTiny + " --schedule 1fb1", "search " + kTiny + " --schedules 1fb1 --quiet",
        "cost " + test::examples() + "gpt3_175b_a100.yaml --set training.schedule=1fb1"}) {
    const test::CliRun r = test::run_cli(args);
    EXPECT_EQ(r.code, 2) << args;
    EXPECT_NE(r.err.find("unknown schedule '1fb1' (did you mean '1f1b'?)"), std::string::npos)
        << args << "\n"
        << r.err;
  }
}

TEST(ApiSimulate, ScheduleFileExcludesOverridesBeforeAnyFileIsRead) {
  api::SimulateRequest r;
  r.schedule_file = "/nonexistent/schedule.csv";
  r.overrides.pp = 4;
  try {
    api::check_simulate_request(r);
    FAIL() << "a schedule file with --pp passed";
  } catch (const api::RequestError& e) {
    EXPECT_EQ(e.key(), "--schedule-file");
  }
  r.overrides = {};
  EXPECT_NO_THROW(api::check_simulate_request(r));
}

}  // namespace
}  // namespace bmpipe
