// libFuzzer target: a YAML config -> what `bmpipe report CONFIG --compare A,B` writes (the
// run, and a comparison of the config's schedule with the next one in the registry), and
// checks that no user string (file name, model name, device name, layer names, and the
// messages that quote them) can change the page's HTML.
//
// The input is a config, as fuzz_config's, whose first line may name its file: "#!NAME"
// makes it configs/examples/NAME ('/' read as '_', so the examples' relative paths still
// resolve), and the file name reaches the page as its title and provenance.
//
// The page is report/report.html with the report's JSON in one
// <script type="application/json" id="bmpipe-data"> element, and every user string lives
// in that JSON. Inside a script element the HTML parser decodes no entities and looks only
// for '<' (to find "</script" or "<!--"), so there the escaping that matters is that no '<'
// is left: '&', '>' and '"' stay as JSON has them (as entities, JSON.parse would read other
// strings). Outside it, the page must be the template, byte for byte: no user string reaches
// the HTML proper at all, escaped or not. So a page passes when
//   - it holds exactly one data element;
//   - the element's text holds no '<';
//   - that text parses back to the report's JSON (bad UTF-8 replaced, as the page writes it);
//   - the page around it is the page around an empty report.
// Anything else aborts, and libFuzzer keeps the input.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "api/report.hpp"
#include "fuzz_run.hpp"

namespace {

using namespace bmpipe;

constexpr std::string_view kOpen = "<script type=\"application/json\" id=\"bmpipe-data\">";
constexpr std::string_view kClose = "</script>";

struct Page {
  std::string around;  ///< the page without the data element's text
  std::string data;    ///< the data element's text
};

Page split(const std::string& html) {
  const std::size_t open = html.find(kOpen);
  if (open == std::string::npos || html.find(kOpen, open + 1) != std::string::npos)
    fuzz::broken("the page does not hold exactly one data element");
  const std::size_t from = open + kOpen.size();
  const std::size_t to = html.find(kClose, from);
  if (to == std::string::npos) fuzz::broken("the data element is never closed");
  return Page{html.substr(0, from) + html.substr(to), html.substr(from, to - from)};
}

// The page around an empty report: report/report.html without its data.
const std::string& template_around() {
  static const std::string around = split(api::report_html(nlohmann::json::object())).around;
  return around;
}

std::string file_name(const std::string& text) {
  if (text.rfind("#!", 0) != 0) return "fuzz-input.yaml";
  std::string name = text.substr(2, text.find('\n') - 2);
  for (char& c : name)
    if (c == '/' || c == '\0') c = '_';
  return name;
}

std::string dumped(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  Overrides overrides;
  overrides.limits = fuzz::small_limits();
  Config config;
  try {
    config =
        parse_config(text, BMPIPE_SOURCE_DIR "/configs/examples/" + file_name(text), overrides);
  } catch (const ConfigError&) {
    return 0;
  }
  api::ReportRequest request;
  const std::span<const ScheduleInfo> all = builtin_schedules();
  std::size_t k = 0;
  while (k < all.size() && all[k].name != config.training.schedule) ++k;
  request.compare = api::CompareRequest{
      {config.training.schedule, std::string(all[(k + 1) % all.size()].name)}, {}, false, {}};
  nlohmann::json report;
  if (!fuzz::answered([&] { report = api::report_data(config, request); })) return 0;
  const std::string html = api::report_html(report);

  const Page page = split(html);
  if (page.data.find('<') != std::string::npos)
    fuzz::broken("a '<' in the data element, where it can end the script: " + page.data);
  const nlohmann::json read = nlohmann::json::parse(page.data, nullptr, false);
  if (read.is_discarded() || dumped(read) != dumped(nlohmann::json::parse(dumped(report))))
    fuzz::broken("the data element does not read back as the report's JSON: " + page.data);
  if (page.around != template_around())
    fuzz::broken(
        "the page around the data is not report/report.html's: user text reached "
        "the HTML\n" +
        html);
  return 0;
}
