#pragma once
/// \file
/// The requests' options as tables: for each, its name, what it takes, its default (read
/// off a default-constructed request, so that a default lives in the request struct alone),
/// its help, when it applies, and how it sets the request. The command line's options
/// (cli/options.hpp add_request_options, fill_request), the Python module's keyword
/// arguments and the docs' option lists are all built from them, so the front ends take
/// the same options with the same defaults.
///
/// Nothing here parses a command line: a front end turns what it was given into an
/// OptionValue of the option's kind and calls apply_options.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "api/api.hpp"
#include "api/errors.hpp"
#include "api/export.hpp"
#include "api/report.hpp"
#include "api/search.hpp"

namespace bmpipe::api {

/// What an option takes, and so how each front end reads it.
enum class OptionKind {
  flag,       ///< a switch (bool)
  int32,      ///< int
  int64,      ///< std::int64_t
  uint64,     ///< std::uint64_t
  number,     ///< double
  text,       ///< std::string
  yaml,       ///< std::string: a config key's value, as YAML (Python: a str, bool, int or float)
  int_list,   ///< std::vector<int> (the command line's "1,2,4")
  name_list,  ///< std::vector<std::string> (the command line's "a,b")
  repeated,   ///< std::vector<std::string>, one per occurrence (--set KEY=VALUE)
};

/// A value of an option, of the alternative its kind names: bool (flag), int (int32),
/// std::int64_t, std::uint64_t, double (number), std::string (text, yaml), std::vector<int>
/// (int_list), std::vector<std::string> (name_list, repeated).
using OptionValue = std::variant<bool, int, std::int64_t, std::uint64_t, double, std::string,
                                 std::vector<int>, std::vector<std::string>>;

/// One option as the front ends show it.
struct OptionSpec {
  /// As the command line spells it without "--" ("memory-limit-GiB"); Python's keyword has
  /// '_' for '-' (python_name).
  std::string name;
  OptionKind kind = OptionKind::text;
  std::string value_name;  ///< what --help shows after the name ("GiB"); none for a flag
  std::string help;
  /// The default-constructed request's value, when --help shows one ("(=64)"); none: the
  /// option has no default worth a number (an optional member; the help says what none is).
  std::optional<OptionValue> default_value;
  /// How --help shows the default when not as the value itself ("all cores" for 0 threads).
  std::string default_text;
  /// When the option applies, for the docs ("--planner quick"); empty: always.
  std::string applies;
};

/// One option of request type R.
template <class R>
struct RequestOption : OptionSpec {
  /// Sets the request from a value of the option's kind. Throws RequestError naming the
  /// option for a value out of its range that the request's check would not name.
  std::function<void(R&, OptionValue)> set;
  /// Why the option does not apply to this request ("applies to --planner quick only (got
  /// --planner full)"), after every option given is set; null or none: it applies.
  std::function<std::optional<std::string>(const R&)> refuses;
};

template <class R>
using RequestTable = std::vector<RequestOption<R>>;

/// The Python keyword of an option: "memory-limit-GiB" -> "memory_limit_GiB".
std::string python_name(const std::string& option);

/// " (did you mean 'x'?)" for the name of `names` closest to `name`, or "" (the front ends'
/// message for an unknown option, as experiment/suggest.hpp's did_you_mean).
std::string did_you_mean_option(const std::string& name, const std::vector<std::string>& names);

/// The value of `option` from its text as a command line spells it: an int_list from
/// "1,2,4", a name_list from "a, b" (split_names: blanks around names dropped), a number
/// or an integer of the option's kind, "true" or "false" for a flag, the text itself for
/// text and yaml, one item for repeated. Throws RequestError("--NAME", "expected a
/// comma-separated list of integers, got '1,x'") (or "an integer", "a non-negative
/// integer", "a number", "true or false") for text that is not one.
OptionValue option_value_from_text(const OptionSpec& option, const std::string& text);

/// The default as --help shows it: default_text, else the value ("64", "5", "quick").
std::string default_shown(const OptionSpec& option);

/// Sets `request` from the options `given` returns a value for (none: not given), in the
/// table's order (so --set comes after the knobs it may override), then throws
/// RequestError("--NAME", why) for the first option given that does not apply.
template <class R>
void apply_options(const RequestTable<R>& table,
                   const std::function<std::optional<OptionValue>(const OptionSpec&)>& given,
                   R& request) {
  std::vector<const RequestOption<R>*> used;
  for (const RequestOption<R>& option : table)
    if (std::optional<OptionValue> value = given(option)) {
      option.set(request, std::move(*value));
      used.push_back(&option);
    }
  for (const RequestOption<R>* option : used)
    if (option->refuses)
      if (std::optional<std::string> why = option->refuses(request))
        throw RequestError("--" + option->name, *why);
}

/// The options of simulate, compare and plan over the config (Overrides): --pp, --vpp and
/// --microbatches, --max-ops and --max-devices, the config keys --tp, --dp,
/// --micro-batch-size, --global-batch-size, --seq-length, --recompute, --partition, and
/// --set KEY=VALUE last (it wins over a knob of the same key). `vpp_help` says what vpp
/// means for the command.
RequestTable<Overrides> override_options(const std::string& vpp_help);

/// What --vpp means for bmpipe cost, whose options are override_options(kCostVppHelp).
inline constexpr const char* kCostVppHelp = "chunks per device, overriding training.vpp";

/// --global-batch-size, --seq-length and --set alone (search's: its other knobs are
/// dimensions of the search), into Overrides::set.
RequestTable<Overrides> batch_and_set_options();

/// bmpipe plan's request: --schedule, the limits and budgets, the baselines, --expressible,
/// --offload, then override_options.
RequestTable<PlanRequest> plan_options();

/// bmpipe search's request: the dimensions (lists), --offload, the planner and its budgets,
/// the bound, --refine, the limits, then batch_and_set_options.
RequestTable<SearchRequest> search_options();

/// bmpipe simulate's request: --schedule, --schedule-file, then override_options.
RequestTable<SimulateRequest> simulate_options();

/// bmpipe compare's request: --schedules, then override_options.
RequestTable<CompareRequest> compare_options();

/// What bmpipe export is asked: the export, and the overrides of the config it is made
/// from (ExportRequest holds no config).
struct ExportCommandRequest {
  ExportRequest request;
  Overrides overrides;
};

/// bmpipe export's request: --format, --schedule, --memory-limit-GiB, then
/// override_options.
RequestTable<ExportCommandRequest> export_options();

/// bmpipe report's request: --schedule and --schedule-file (the run's, and with --plan the
/// schedule planned for: "auto" is refused without --plan), --compare, --plan, --search,
/// the limits and budgets both the plan and the search take, then override_options (the
/// run's). finish_report_request then shares them out.
RequestTable<ReportRequest> report_options();

/// After report_options has set `request`: the run's overrides become the comparison's
/// (without the schedule) and the plan's; the plan gets --schedule ("auto" included: the
/// run then keeps training.schedule); then each part is checked as its command checks it
/// (a bad --compare list is named "--compare"). Throws RequestError.
void finish_report_request(ReportRequest& request);

/// The rows of `table` as front ends and docs see them.
template <class R>
std::vector<OptionSpec> specs(const RequestTable<R>& table) {
  return std::vector<OptionSpec>(table.begin(), table.end());
}

/// `options` as a Markdown table: option (as `--name` or, with `python`, the keyword),
/// default, when it applies, what it does.
std::string options_markdown(const std::vector<OptionSpec>& options, bool python);

/// `page` with every block between a line "<!-- options: NAME -->" and a line
/// "<!-- /options -->" replaced by the table of NAME (a command: plan, search, simulate,
/// compare, export, report or cost; python-COMMAND: its keywords): how docs/plan.md, docs/search.md
/// and docs/python.md list the options (bmpipe_options_reference rewrites them;
/// tests/docs/options_reference_test.cpp checks them). Throws std::invalid_argument for an unknown
/// NAME or a block left open.
std::string with_option_tables(const std::string& page);

}  // namespace bmpipe::api
