// Every kind of `bmpipe report` page, opened in a real browser: Debian's chromium,
// headless (scripts/setup.sh installs it). Each page must render to the end
// (body[data-rendered=yes]) with no console message and no uncaught exception (the page
// records both in #bmpipe-errors, and chromium logs them as CONSOLE lines), show the
// numbers of the JSON the commands print in its elements, and give a non-trivial
// screenshot. Skipped, saying why, when chromium is not installed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "api/report.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace {

using nlohmann::json;

const std::string kLlama = test::examples() + "h200_llama2_7b.yaml";
using test::kTiny;
const std::string kAscend = test::examples() + "ascend910b_llama2_13b_analytic.yaml";
const std::string kPp64 = test::examples() + "h200_8x8_pp64.yaml";

bool have_chromium() {
  return std::system("command -v chromium >/dev/null 2>&1") == 0;
}

#define REQUIRE_CHROMIUM()                                                            \
  if (!have_chromium())                                                               \
  GTEST_SKIP() << "chromium is not installed (scripts/setup.sh installs it: apt-get " \
                  "install chromium); the report pages are not checked in a browser here"

struct Page {
  std::string dom;  ///< the DOM after the page's scripts ran
  std::string log;  ///< chromium's stderr
};

/// Loads `html` headless in its own profile folder under `dir` (named by `tag`, unique in
/// the test): dumps the DOM and takes a 1400 x 1000 screenshot, `tag`.png (one launch
/// does both: chromium starts in seconds on a busy machine).
Page load(const test::ScratchDir& dir, const std::string& html, const std::string& tag,
          const std::string& hash = "") {
  const std::string out = dir.file("dom" + tag), err = dir.file("log" + tag);
  const std::string what =
      "--window-size=1400,1000 --screenshot='" + dir.file(tag + ".png") + "' --dump-dom";
  const std::string cmd =
      "timeout 60 chromium --headless --no-sandbox --disable-gpu "
      "--no-first-run --user-data-dir='" +
      dir.file("profile" + tag) + "' --virtual-time-budget=5000 --enable-logging=stderr --v=0 " +
      what + " 'file://" + html + hash + "' >'" + out + "' 2>'" + err + "'";
  const int status = std::system(cmd.c_str());
  EXPECT_EQ(status, 0) << cmd << "\n" << test::slurp(err);
  return Page{test::slurp(out), test::slurp(err)};
}

/// The text of the element with id `id` (up to its first child tag), or "<missing>".
std::string text_of(const std::string& dom, const std::string& id) {
  const std::size_t at = dom.find("id=\"" + id + "\"");
  if (at == std::string::npos) return "<missing " + id + ">";
  const std::size_t from = dom.find('>', at);
  const std::size_t to = dom.find('<', from);
  return dom.substr(from + 1, to - from - 1);
}

std::string format(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

/// The page ran to its end, with nothing on the console and no exception.
void expect_clean(const Page& page) {
  EXPECT_NE(page.dom.find("data-rendered=\"yes\""), std::string::npos)
      << "the page's script did not finish";
  EXPECT_NE(page.dom.find("id=\"bmpipe-errors\" hidden=\"\" data-count=\"0\"></ul>"),
            std::string::npos)
      << page.dom.substr(page.dom.find("bmpipe-errors"), 600);
  EXPECT_EQ(page.log.find(":CONSOLE"), std::string::npos) << page.log;
}

/// A PNG of 1400 x 1000 with more than a blank page's bytes.
void expect_screenshot(const std::string& png) {
  const std::string bytes = test::slurp(png);
  ASSERT_GT(bytes.size(), 24u) << png;
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  auto be32 = [&](std::size_t at) {
    return (static_cast<unsigned char>(bytes[at]) << 24) |
           (static_cast<unsigned char>(bytes[at + 1]) << 16) |
           (static_cast<unsigned char>(bytes[at + 2]) << 8) |
           static_cast<unsigned char>(bytes[at + 3]);
  };
  EXPECT_EQ(be32(16), 1400u);
  EXPECT_EQ(be32(20), 1000u);
  EXPECT_GT(bytes.size(), 30000u) << "a near-blank screenshot";
}

/// Writes the report of `args` and loads it: the DOM, and a screenshot that is kept when
/// BMPIPE_REPORT_SCREENSHOTS names a folder (for the closing note).
Page report(const test::ScratchDir& dir, const std::string& args, const std::string& name,
            const std::string& hash = "") {
  const std::string html = dir.file(name + ".html");
  const test::CliRun run = test::run_cli("report " + args + " --out " + html);
  EXPECT_EQ(run.code, 0) << run.err;
  const Page page = load(dir, html, name, hash);
  expect_clean(page);
  const std::string png = dir.file(name + ".png");
  expect_screenshot(png);
  if (const char* keep = std::getenv("BMPIPE_REPORT_SCREENSHOTS"))
    std::filesystem::copy_file(png, std::string(keep) + "/" + name + ".png",
                               std::filesystem::copy_options::overwrite_existing);
  return page;
}

/// The summary and per-rank table show `simulate --json`'s numbers as the table prints them.
void expect_summary(const std::string& dom, const json& simulated) {
  EXPECT_EQ(text_of(dom, "iteration-time-ms"),
            format("%.3f", simulated.at("iteration_time_ms").get<double>()));
  EXPECT_EQ(text_of(dom, "bubble-ratio"),
            format("%.2f %%", 100 * simulated.at("bubble_ratio").get<double>()));
  for (const json& d : simulated.at("devices")) {
    const std::string r = std::to_string(d.at("rank").get<int>());
    EXPECT_EQ(text_of(dom, "peak-mem-" + r),
              format("%.2f GiB", d.at("peak_memory_bytes").get<double>() / 1073741824.0))
        << "rank " << r;
    EXPECT_EQ(text_of(dom, "busy-ms-" + r), format("%.3f", d.at("busy_ms").get<double>()));
    EXPECT_EQ(text_of(dom, "bubble-idle-" + r),
              format("%.3f", d.at("bubble_ms").at("idle").get<double>()));
  }
}

/// The JSON a page embeds.
json embedded(const std::string& html) {
  const std::string open = "<script type=\"application/json\" id=\"bmpipe-data\">";
  const std::size_t from = html.find(open);
  const std::size_t to = html.find("</script>", from);
  return json::parse(html.substr(from + open.size(), to - from - open.size()));
}

TEST(ReportBrowser, SimulatePageShowsTheSummaryNumbersAndAnOpsCard) {
  REQUIRE_CHROMIUM();
  test::ScratchDir dir;
  // Opened zoomed on the first 200 ms, hovering rank 1's first op: 1F1B starts it with the
  // forward of stage 1, micro-batch 0.
  const Page page = report(dir, kLlama, "simulate", "#zoom=0,200&hover=1,0");
  const test::CliRun cli = test::run_cli("simulate " + kLlama + " --json");
  ASSERT_EQ(cli.code, 0);
  expect_summary(page.dom, json::parse(cli.out));
  EXPECT_EQ(text_of(page.dom, "iteration-time-ms"), "1786.471");  // the README's number
  const json t = embedded(test::slurp(dir.file("simulate.html"))).at("timeline");
  const json& ops = t.at("ops")[1];
  auto first = [](const json& column) {
    return static_cast<double>(api::unpack_column(column).at(0));
  };
  EXPECT_EQ(text_of(page.dom, "card-op"), "F · forward");
  EXPECT_EQ(text_of(page.dom, "card-micro-batch"), "0");
  EXPECT_EQ(text_of(page.dom, "card-stage"), "1");
  EXPECT_EQ(text_of(page.dom, "card-layers"), "4-7");  // 32 layers over 8 stages
  EXPECT_EQ(text_of(page.dom, "card-recompute"), t.at("stage_recompute")[1].get<std::string>());
  // Rank 1 waits for stage 0's forward and its transfer; the card says when it starts.
  const double start_ns = first(ops.at("g")), duration_ns = first(ops.at("d"));
  EXPECT_GT(start_ns, 0);
  EXPECT_EQ(text_of(page.dom, "card-start"), format("%.3f ms", start_ns / 1e6));
  EXPECT_EQ(text_of(page.dom, "card-duration"), format("%.3f ms", duration_ns / 1e6));
}

TEST(ReportBrowser, ConsoleMessagesAndExceptionsAreCaught) {
  // The checks of every other test can fail: a page that logs and throws is seen to.
  REQUIRE_CHROMIUM();
  test::ScratchDir dir;
  const std::string html = dir.file("bad.html");
  ASSERT_EQ(test::run_cli("report " + kTiny + " --out " + html).code, 0);
  std::string text = test::slurp(html);
  text.insert(text.rfind("</body>"),
              "<script>console.log('planted message');</script><script>null.f();</script>");
  test::write_file(html, text);
  const Page page = load(dir, html, "bad");
  EXPECT_NE(page.dom.find("data-count=\"2\""), std::string::npos);
  EXPECT_NE(page.dom.find("console.log: planted message"), std::string::npos);
  EXPECT_NE(page.dom.find("uncaught: "), std::string::npos);
  EXPECT_NE(page.log.find(":CONSOLE"), std::string::npos) << page.log;
}

TEST(ReportBrowser, ComparePageRanksAsCompareDoes) {
  REQUIRE_CHROMIUM();
  test::ScratchDir dir;
  const std::string list = "1f1b,zb-h1,zb-v,dualpipe-v";
  // The run itself under DualPipeV: F&B ops and two chunks a rank on the timeline.
  const Page page = report(dir, kLlama + " --schedule dualpipe-v --compare " + list, "compare",
                           "#compare-section");
  const test::CliRun cli = test::run_cli("compare " + kLlama + " --schedules " + list + " --json");
  ASSERT_EQ(cli.code, 0);
  const json rows = json::parse(cli.out);
  ASSERT_EQ(rows.size(), 4u);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(text_of(page.dom, "compare-schedule-" + std::to_string(i)),
              rows[i].at("schedule").get<std::string>());
    EXPECT_EQ(text_of(page.dom, "compare-ms-" + std::to_string(i)),
              format("%.3f", rows[i].at("iteration_time_ms").get<double>()));
  }
  // The README's ranking: dualpipe-v first.
  EXPECT_EQ(text_of(page.dom, "compare-schedule-0"), "dualpipe-v");
  EXPECT_NE(page.dom.find("id=\"compare-bars\""), std::string::npos);
}

TEST(ReportBrowser, PlanPageShowsThePlanAndItsExports) {
  REQUIRE_CHROMIUM();
  test::ScratchDir dir;
  const std::string options = " --memory-limit-GiB 40 --max-evals 300 --threads 1";
  const Page page = report(dir, kAscend + " --plan" + options, "plan", "#plan-section");
  const test::CliRun cli = test::run_cli("plan " + kAscend + options + " --json --quiet");
  ASSERT_EQ(cli.code, 0) << cli.err;
  const json plan = json::parse(cli.out);
  EXPECT_EQ(text_of(page.dom, "plan-iteration-ms"),
            format("%.3f", plan.at("plan").at("iteration_time_ms").get<double>()) + " ms");
  const test::CliRun flags =
      test::run_cli("plan " + kAscend + options + " --format megatron --quiet");
  ASSERT_EQ(flags.code, 0) << flags.err;
  // The snippet is `plan --format megatron`'s text (the DOM escapes nothing in it but &, <, >).
  std::string first_line = flags.out.substr(0, flags.out.find('\n'));
  EXPECT_NE(page.dom.find(first_line), std::string::npos) << first_line;
  EXPECT_NE(page.dom.find("id=\"export-mindformers\""), std::string::npos);
}

TEST(ReportBrowser, SearchPageMarksTheWinner) {
  REQUIRE_CHROMIUM();
  test::ScratchDir dir;
  const Page page =
      report(dir, kTiny + " --schedule zb-h1 --search --planner off --threads 1", "search",
             "#search-section");  // the run under ZB-H1: I and W ops
  const test::CliRun cli = test::run_cli("search " + kTiny + " --planner off --json --quiet");
  ASSERT_EQ(cli.code, 0) << cli.err;
  const json layouts = json::parse(cli.out).at("layouts");
  ASSERT_FALSE(layouts.empty());
  EXPECT_EQ(text_of(page.dom, "search-ms-0"),
            format("%.1f", layouts[0].at("iteration_time_ms").get<double>()));
  EXPECT_NE(page.dom.find("id=\"search-winner\""), std::string::npos);
}

/// The attribute `name` of the element with id `id`, or "<missing>".
std::string attribute_of(const std::string& dom, const std::string& id, const std::string& name) {
  const std::size_t at = dom.find("id=\"" + id + "\"");
  if (at == std::string::npos) return "<missing " + id + ">";
  const std::size_t open = dom.rfind('<', at), close = dom.find('>', at);
  const std::string tag = dom.substr(open, close - open);
  const std::size_t a = tag.find(" " + name + "=\"");
  if (a == std::string::npos) return "<missing " + name + ">";
  const std::size_t from = a + name.size() + 3;
  return tag.substr(from, tag.find('"', from) - from);
}

// Issue 41: the page says which job it is: the MoE example's settings, as its YAML gives
// them (64 devices, pp 4, ep 8, dp = 64 / 4 = 16, 16 micro-batches of 1 for a global batch
// of 256, sequence 4096, bf16 without FP8, 1F1B, Megatron's default all-to-all dispatcher).
TEST(ReportBrowser, HeaderStatesTheJobOfAnMoeExample) {
  REQUIRE_CHROMIUM();
  test::ScratchDir dir;
  const Page page = report(dir, test::examples() + "h100_mixtral_8x7b_ep8.yaml", "moe");
  EXPECT_EQ(text_of(page.dom, "job-model"), "mixtral");
  EXPECT_EQ(text_of(page.dom, "job-devices"), "64 × h100-sxm");
  EXPECT_EQ(text_of(page.dom, "job-layout"), "tp 1 · pp 4 · dp 16 · cp 1 · ep 8 · etp 1 · vpp 1");
  EXPECT_EQ(text_of(page.dom, "job-precision"), "bf16, no FP8");
  EXPECT_EQ(text_of(page.dom, "job-moe-dispatcher"), "alltoall");
  EXPECT_EQ(text_of(page.dom, "job-schedule"), "1f1b");
  EXPECT_EQ(text_of(page.dom, "job-microbatches"), "16 of 1 sequence");
  EXPECT_EQ(text_of(page.dom, "job-global-batch"), "256 sequences");
  EXPECT_EQ(text_of(page.dom, "job-sequence"), "4096 tokens");
  // Its last stage (the head's) idles less than in a balanced pipeline: a negative
  // imbalance on rank 3 (simulate --json), which the page explains.
  const json sim = json::parse(
      test::run_cli("simulate " + test::examples() + "h100_mixtral_8x7b_ep8.yaml --json").out);
  const double part = sim.at("devices")[3].at("bubble_ms").at("imbalance").get<double>();
  ASSERT_LT(part, 0);
  const std::string why = text_of(page.dom, "bubble-negative");
  EXPECT_NE(why.find("imbalance on rank 3 (" + format("%.3f", part) + " ms)"), std::string::npos)
      << why;
  EXPECT_NE(why.find("is no error"), std::string::npos) << why;
}

// Bars start at zero. tiny.yaml (its header works it out): 1F1B, p 4, m 8, 33 ms a step of
// which each rank is busy 8 x 3 ms, so every rank idles 9 ms, 36 device-ms in all, all of
// it ideal; identical stages, free communication and no recompute: the other parts are 0,
// bars of no width. The chart is 460 wide, labels 110, 90 left for the value: 260 px for
// 36 ms. With a planted imbalance of -18 ms: 70 px more go to the left of zero, 190 px
// span 54 ms, zero sits at 180 + 18 x 190 / 54, and the negative bar ends there.
TEST(ReportBrowser, BubbleBarsStartAtZero) {
  REQUIRE_CHROMIUM();
  test::ScratchDir dir;
  const Page page = report(dir, kTiny, "tiny");
  for (const char* part : {"imbalance", "communication", "recompute"}) {
    EXPECT_EQ(attribute_of(page.dom, std::string("bubble-bar-") + part, "width"), "0") << part;
    EXPECT_EQ(attribute_of(page.dom, std::string("bubble-bar-") + part, "x"), "110") << part;
  }
  EXPECT_EQ(attribute_of(page.dom, "bubble-bar-ideal", "data-value"), "36");
  EXPECT_EQ(attribute_of(page.dom, "bubble-bar-ideal", "width"), "260");
  EXPECT_EQ(attribute_of(page.dom, "bubble-bar-idle", "width"), "260");
  EXPECT_EQ(text_of(page.dom, "bubble-negative"), "");  // hidden: nothing negative

  const std::string html = dir.file("tiny.html");
  std::string text = test::slurp(html);
  json data = embedded(text);
  data["summary"]["bubble_breakdown_ms"]["imbalance"] = -18.0;
  const std::string open = "<script type=\"application/json\" id=\"bmpipe-data\">";
  const std::size_t from = text.find(open) + open.size();
  text.replace(from, text.find("</script>", from) - from, data.dump());
  const std::string planted = dir.file("negative.html");
  test::write_file(planted, text);
  const Page negative = load(dir, planted, "negative");
  expect_clean(negative);
  const double zero = 180 + 18.0 * 190 / 54;
  EXPECT_EQ(attribute_of(negative.dom, "bubble-bar-imbalance", "x"), "180");
  EXPECT_NEAR(std::stod(attribute_of(negative.dom, "bubble-bar-imbalance", "width")), zero - 180,
              1e-9);
  EXPECT_NEAR(std::stod(attribute_of(negative.dom, "bubble-bar-ideal", "x")), zero, 1e-9);
  EXPECT_NEAR(std::stod(attribute_of(negative.dom, "bubble-bar-ideal", "width")), 36.0 * 190 / 54,
              1e-9);
}

// Issue 21: at pp 64 and m 1024 the page stays usable. Its load time (target: under 2 s)
// is measured by bench/report_load.sh, not asserted here (a timed test fails on a busy
// machine); this test holds that the page draws the whole run and shows its numbers.
TEST(ReportBrowser, Pp64With1024MicroBatchesDraws) {
  REQUIRE_CHROMIUM();
  test::ScratchDir dir;
  const Page page = report(dir, kPp64 + " --microbatches 1024", "pp64");
  const test::CliRun cli = test::run_cli("simulate " + kPp64 + " --microbatches 1024 --json");
  expect_summary(page.dom, json::parse(cli.out));
  // The page writes performance.now() into data-render-ms when it has drawn everything.
  const std::string key = "data-render-ms=\"";
  const std::size_t at = page.dom.find(key);
  ASSERT_NE(at, std::string::npos) << "the page did not finish drawing";
  std::printf("pp 64, m 1024: %ju bytes, drawn in %.0f ms\n",
              static_cast<std::uintmax_t>(std::filesystem::file_size(dir.file("pp64.html"))),
              std::stod(page.dom.substr(at + key.size())));
}

}  // namespace
}  // namespace bmpipe
