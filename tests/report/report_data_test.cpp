// `bmpipe report`'s data (api/report.hpp): the JSON the page embeds holds the numbers
// `bmpipe simulate --json` prints, its compact timeline decodes to the run, the page holds
// it safely, and a pp 64, m 1024 page stays under 10 MB.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/report.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace {

using nlohmann::json;

const std::string kLlama = test::examples() + "h200_llama2_7b.yaml";
using test::kTiny;
const std::string kPp64 = test::examples() + "h200_8x8_pp64.yaml";

/// The JSON embedded in a page.
json embedded(const std::string& html) {
  const std::string open = "<script type=\"application/json\" id=\"bmpipe-data\">";
  const std::size_t from = html.find(open);
  EXPECT_NE(from, std::string::npos);
  const std::size_t to = html.find("</script>", from);
  return json::parse(html.substr(from + open.size(), to - from - open.size()));
}

TEST(ReportColumns, PackHandWorkedColumnsShortest) {
  // Runs: four 5s are [5, 4].
  EXPECT_EQ(api::pack_column({5, 5, 5, 5, 5, 5, 5, 5}), json::parse(R"({"r": [5, 8]})"));
  // A count: differences 0 then 1 seven times.
  EXPECT_EQ(api::pack_column({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}),
            json::parse(R"({"dr": [0, 1, 1, 9]})"));
  // Short and irregular: as it is.
  EXPECT_EQ(api::pack_column({3, 1, 2}), json::parse("[3, 1, 2]"));
  EXPECT_EQ(api::pack_column({}), json::array());
  // Two long values alternating: a table and indices.
  std::vector<std::int64_t> alternating;
  for (int i = 0; i < 40; ++i) alternating.push_back(i % 2 ? 10500000 : 6998080);
  const json packed = api::pack_column(alternating);
  ASSERT_TRUE(packed.contains("t")) << packed;
  EXPECT_EQ(packed["t"], json::parse("[6998080, 10500000]"));
  EXPECT_EQ(api::unpack_column(packed), alternating);
}

TEST(ReportColumns, UnpackInvertsEveryForm) {
  const std::vector<std::vector<std::int64_t>> columns = {
      {}, {7}, {1, 1, 1, 2, 2, 3}, {0, 64, 1, 65, 2, 66}, {-5, -5, 9, 9, 9, 9, 9, 9, -5}};
  for (const auto& c : columns) EXPECT_EQ(api::unpack_column(api::pack_column(c)), c);
}

TEST(ReportData, HoldsWhatSimulateJsonPrints) {
  const test::CliRun cli = test::run_cli("simulate " + kLlama + " --json");
  ASSERT_EQ(cli.code, 0) << cli.err;
  const json simulated = json::parse(cli.out);
  const json data = api::report_data(load_config(kLlama), api::ReportRequest{});
  EXPECT_EQ(data.at("report"), api::kReportVersion);
  EXPECT_EQ(data.at("bmpipe").at("config"), kLlama);
  EXPECT_EQ(data.at("kind"), "simulate");
  const json& s = data.at("summary");
  // The README's numbers (1786.471 ms, 18.20 %, rank 0 37.83 GiB), as --json has them.
  EXPECT_EQ(s.at("iteration_time_ms"), simulated.at("iteration_time_ms"));
  EXPECT_EQ(s.at("bubble_ratio"), simulated.at("bubble_ratio"));
  ASSERT_EQ(s.at("devices").size(), 8u);
  for (std::size_t r = 0; r < 8; ++r)
    EXPECT_EQ(s["devices"][r].at("peak_memory_bytes"),
              simulated["devices"][r].at("peak_memory_bytes"));
  EXPECT_EQ(s, simulated);  // and everything else
  // The table's text is the one `bmpipe simulate` prints after its first line.
  const test::CliRun table = test::run_cli("simulate " + kLlama);
  EXPECT_EQ("bmpipe simulate " + kLlama + "\n" + data.at("summary_text").get<std::string>(),
            table.out);
}

TEST(ReportData, TimelineDecodesToTheRun) {
  // 1F1B at pp 8, m 32: every rank runs 32 F and 32 B; its busy time is the sum of its ops'
  // durations, its peak the static bytes plus the highest point of the activation curve,
  // and every stage sends one activation and one gradient per micro-batch across each of
  // the 7 boundaries.
  const json data = api::report_data(load_config(kLlama), api::ReportRequest{});
  const json& t = data.at("timeline");
  const json& devices = data.at("summary").at("devices");
  ASSERT_EQ(t.at("ranks"), 8);
  for (int r = 0; r < 8; ++r) {
    const json& ops = t.at("ops")[r];
    const std::string kinds = ops.at("k");
    EXPECT_EQ(std::count(kinds.begin(), kinds.end(), 'F'), 32);
    EXPECT_EQ(std::count(kinds.begin(), kinds.end(), 'B'), 32);
    const auto durations = api::unpack_column(ops.at("d"));
    const auto gaps = api::unpack_column(ops.at("g"));
    ASSERT_EQ(durations.size(), 64u);
    ASSERT_EQ(gaps.size(), 64u);
    std::int64_t busy = 0;
    for (auto d : durations) busy += d;
    EXPECT_NEAR(static_cast<double>(busy) / 1e6, devices[r].at("busy_ms").get<double>(), 1e-6);
    EXPECT_EQ(api::unpack_column(ops.at("s")), std::vector<std::int64_t>(64, r));
    const auto changes = api::unpack_column(t.at("memory")[r].at("v"));
    std::int64_t now = 0, peak = 0;
    for (auto v : changes) peak = std::max(peak, now += v);
    EXPECT_EQ(now, 0) << "rank " << r << " ends holding activations";
    EXPECT_EQ(t.at("static_bytes")[r].get<std::int64_t>() + peak,
              devices[r].at("peak_memory_bytes").get<std::int64_t>());
  }
  EXPECT_EQ(api::unpack_column(t.at("transfers").at("s")).size(), 2u * 7 * 32);
}

TEST(ReportHtml, EmbedsTheDataSafelyInThePage) {
  json data = {{"report", 1}, {"title", "</script><script>alert(1)</script> <!-- x"}};
  const std::string html = api::report_html(data);
  EXPECT_EQ(html.find("{{BMPIPE_DATA}}"), std::string::npos);
  EXPECT_EQ(html.find("alert(1)</script>"), std::string::npos);
  EXPECT_EQ(embedded(html), data);
  // Self-contained: nothing is fetched.
  for (const char* fetch : {"src=\"http", "href=\"http", "@import", "fetch(", "XMLHttpRequest"})
    EXPECT_EQ(html.find(fetch), std::string::npos) << fetch;
}

TEST(ReportCli, ALongReportSaysWhatRunsOffATerminal) {
  // The pp-64 example at 2048 micro-batches: the comparison's zb-v spends about 0.4 s
  // making its schedule, so a line every 0.05 s names it. The page is written as ever.
  test::ScratchDir dir;
  const std::string page = dir.file("r.html");
  const test::CliRun run =
      test::run_cli("report " + kPp64 + " --microbatches 2048 --compare 1f1b,zb-v " +
                    "--progress-interval-s 0.05 --out " + page);
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_NE(run.err.find("report: comparing: zb-v (2 of 2): making the schedule, "),
            std::string::npos)
      << run.err;
  EXPECT_EQ(embedded(test::slurp(page)).at("summary").at("microbatches"), 2048);
  const test::CliRun quiet = test::run_cli(
      "report " + kTiny + " --quiet --progress-interval-s 0 --out " + dir.file("q.html"));
  ASSERT_EQ(quiet.code, 0) << quiet.err;
  EXPECT_EQ(quiet.err, "");
}

TEST(ReportCli, WritesThePageOfTheRun) {
  test::ScratchDir dir;
  const std::string page = dir.file("r.html");
  const test::CliRun run = test::run_cli("report " + kTiny + " --pp 2 --out " + page);
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_EQ(run.out, "");
  const json data = embedded(test::slurp(page));
  EXPECT_EQ(data.at("summary").at("pp"), 2);
  const test::CliRun simulated = test::run_cli("simulate " + kTiny + " --pp 2 --json");
  EXPECT_EQ(data.at("summary"), json::parse(simulated.out));
}

TEST(ReportCli, ADeadlockedRunStillGetsItsPageAndExit1) {
  // Rank 1 runs its backward before its forward: nothing can start it.
  test::ScratchDir dir;
  const std::string csv = test::write_file(dir.file("dead.csv"), "0F0,0B0\n1B0,1F0\n");
  const std::string page = dir.file("dead.html");
  const test::CliRun run =
      test::run_cli("report " + kTiny + " --schedule-file " + csv + " --out " + page);
  EXPECT_EQ(run.code, 1) << run.err;
  const json data = embedded(test::slurp(page));
  EXPECT_EQ(data.at("summary").at("ok"), false);
  EXPECT_NE(data.at("summary_text").get<std::string>().find("simulation failed: deadlock"),
            std::string::npos);
}

TEST(ReportCli, RefusesBadUsageInOneLine) {
  test::ScratchDir dir;
  const test::CliRun no_out = test::run_cli("report " + kTiny);
  EXPECT_EQ(no_out.code, 2);
  EXPECT_EQ(no_out.err, "bmpipe report: missing --out FILE.html\n");
  const test::CliRun auto_alone =
      test::run_cli("report " + kTiny + " --schedule auto --out " + dir.file("a.html"));
  EXPECT_EQ(auto_alone.code, 2);
  EXPECT_EQ(auto_alone.err,
            "bmpipe report: --schedule: 'auto' plans every schedule: it needs --plan\n");
  const test::CliRun typo =
      test::run_cli("report " + kTiny + " --compare 1f1b,zbh1 --out " + dir.file("b.html"));
  EXPECT_EQ(typo.code, 2);
  EXPECT_EQ(typo.err.rfind("bmpipe report: --compare: ", 0), 0u) << typo.err;
  EXPECT_NE(typo.err.find("zb-h1"), std::string::npos) << typo.err;
  EXPECT_FALSE(std::filesystem::exists(dir.file("b.html")));
}

/// The words bash offers for `bmpipe WORDS...` with cli/bmpipe-completion.bash (as
/// tests/cli/rough_edges_test.cpp asks it).
std::string complete(const std::string& words) {
  test::ScratchDir dir;
  const std::string script =
      test::write_file(dir.file("c.sh"), "source '" + std::string(BMPIPE_SOURCE_DIR) +
                                             "/cli/bmpipe-completion.bash'\nCOMP_WORDS=(" +
                                             BMPIPE_BINARY + " " + words +
                                             ")\nCOMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))\n"
                                             "_bmpipe\nprintf '%s\\n' \"${COMPREPLY[@]}\"\n");
  const std::string out = dir.file("out");
  [[maybe_unused]] const int rc =
      std::system(("bash '" + script + "' > '" + out + "' 2>&1").c_str());
  return test::slurp(out);
}

TEST(ReportCli, IsListedAndCompleted) {
  EXPECT_EQ(complete("rep"), "report\n");
  EXPECT_EQ(complete("help rep"), "report\n");
  EXPECT_EQ(complete("report --comp"), "--compare\n");
  EXPECT_EQ(complete("report x.yaml --planner f"), "full\n");
  const test::CliRun usage = test::run_cli("--help");
  EXPECT_NE(usage.out.find("\n  report CONFIG "), std::string::npos) << usage.out;
  const test::CliRun typo = test::run_cli("reprot");
  EXPECT_NE(typo.err.find("did you mean 'report'"), std::string::npos) << typo.err;
}

TEST(ReportSize, Pp64With1024MicroBatchesStaysUnder10MB) {
  // 131 072 ops, 129 024 transfers, 262 144 memory changes.
  test::ScratchDir dir;
  const std::string page = dir.file("big.html");
  const test::CliRun run = test::run_cli("report " + kPp64 + " --microbatches 1024 --out " + page);
  ASSERT_EQ(run.code, 0) << run.err;
  const auto bytes = std::filesystem::file_size(page);
  EXPECT_LT(bytes, 10u * 1000 * 1000);
  const json data = embedded(test::slurp(page));
  std::size_t ops = 0;
  for (const json& row : data.at("timeline").at("ops"))
    ops += row.at("k").get<std::string>().size();
  EXPECT_EQ(ops, 64u * 1024 * 2);
}

}  // namespace
}  // namespace bmpipe
