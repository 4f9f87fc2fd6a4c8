// The request tables (api/request_table.hpp): the options set the request's members as the
// command line always has, in the order it applies them (--set after the knobs), the
// defaults shown are the request structs' own, and an option that does not apply is refused
// with the command's message. Every expected value is written out by hand.
#include "api/request_table.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace bmpipe::api {
namespace {

/// Applies `given` (option name -> value) to a default request through `table`.
template <class R>
R applied(const RequestTable<R>& table, const std::map<std::string, OptionValue>& given) {
  R r;
  apply_options<R>(
      table,
      [&](const OptionSpec& o) -> std::optional<OptionValue> {
        const auto it = given.find(o.name);
        if (it == given.end()) return std::nullopt;
        return it->second;
      },
      r);
  return r;
}

const OptionSpec& row(const std::vector<OptionSpec>& specs, const std::string& name) {
  for (const OptionSpec& o : specs)
    if (o.name == name) return o;
  throw std::logic_error("no option " + name);
}

TEST(RequestTable, PlanOptionsSetTheirMembers) {
  const PlanRequest r = applied(plan_options(), {{"schedule", std::string("auto")},
                                                 {"memory-limit-GiB", 40.0},
                                                 {"margin-GiB", 2.5},
                                                 {"threads", 3},
                                                 {"seed", std::uint64_t{7}},
                                                 {"max-evals", std::int64_t{500}},
                                                 {"baseline", std::string("sapp-ilp")},
                                                 {"pp", 4},
                                                 {"max-ops", std::int64_t{99}}});
  EXPECT_EQ(r.overrides.schedule, "auto");
  EXPECT_EQ(r.memory_limit_GiB, 40.0);
  EXPECT_EQ(r.margin_GiB, 2.5);
  EXPECT_EQ(r.threads, 3);
  EXPECT_EQ(r.seed, 7u);
  EXPECT_EQ(r.max_evals, 500);
  EXPECT_EQ(r.baseline, "sapp-ilp");
  EXPECT_EQ(r.overrides.pp, 4);
  ASSERT_TRUE(r.overrides.limits);
  EXPECT_EQ(r.overrides.limits->max_ops, 99);
  EXPECT_FALSE(r.time_limit_s);  // not given: none, as the struct has it
}

TEST(RequestTable, ConfigKeysGoInInTheCommandLinesOrderSetLast) {
  // The order cli/options.cpp's overrides_from always used: the knobs tp, dp,
  // micro-batch-size, recompute, partition, then --global-batch-size, --seq-length, --set.
  const PlanRequest r =
      applied(plan_options(), {{"set", std::vector<std::string>{"training.tp=8", "a.b=x=y"}},
                               {"seq-length", std::string("4096")},
                               {"global-batch-size", std::string("512")},
                               {"partition", std::string("9,9,8,6")},
                               {"recompute", std::string("full")},
                               {"tp", std::string("2")}});
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"training.tp", "2"},
      {"training.recompute", "full"},
      {"training.partition", "[9,9,8,6]"},
      {"training.global_batch_size", "512"},
      {"training.seq_length", "4096"},
      {"training.tp", "8"},
      {"a.b", "x=y"}};
  EXPECT_EQ(r.overrides.set, expected);
}

TEST(RequestTable, SearchOptionsSetTheirMembers) {
  const SearchRequest r =
      applied(search_options(), {{"tp", std::vector<int>{1, 2}},
                                 {"schedules", std::vector<std::string>{"zb-v"}},
                                 {"planner", std::string("quick")},
                                 {"screen-evals", std::int64_t{32}},
                                 {"screen-margin-pct", 20.0},
                                 {"no-bound", true},
                                 {"refine", 2}});
  EXPECT_EQ(r.space.tp, (std::vector<int>{1, 2}));
  EXPECT_EQ(r.space.schedules, (std::vector<std::string>{"zb-v"}));
  EXPECT_EQ(r.screen_evals, 32);
  EXPECT_DOUBLE_EQ(r.screen_margin, 0.20);  // a percent on the command line, a fraction here
  EXPECT_FALSE(r.bound);
  EXPECT_EQ(r.refine, 2);
}

TEST(RequestTable, DefaultsShownAreTheStructs) {
  const std::vector<OptionSpec> search = specs(search_options());
  EXPECT_EQ(default_shown(row(search, "screen-evals")), "64");
  EXPECT_EQ(default_shown(row(search, "screen-margin-pct")), "5");
  EXPECT_EQ(default_shown(row(search, "layout-evals")), "20000");
  EXPECT_EQ(default_shown(row(search, "planner")), "quick");
  EXPECT_EQ(default_shown(row(search, "threads")), "all cores");
  EXPECT_EQ(default_shown(row(search, "max-evals")), "");  // none: no bound
  const std::vector<OptionSpec> plan = specs(plan_options());
  EXPECT_EQ(default_shown(row(plan, "max-evals")), "20000");
  EXPECT_EQ(default_shown(row(plan, "margin-GiB")), "0");
  EXPECT_EQ(default_shown(row(plan, "seed")), "1");
  EXPECT_EQ(python_name("memory-limit-GiB"), "memory_limit_GiB");
}

TEST(RequestTable, OptionTextIsReadAsTheCommandLineSpellsIt) {
  // Each kind from its command-line text, and the message for text that is not one.
  const auto value = [](OptionKind kind, const std::string& text) {
    OptionSpec o;
    o.name = "x";
    o.kind = kind;
    return option_value_from_text(o, text);
  };
  EXPECT_EQ(std::get<std::vector<int>>(value(OptionKind::int_list, "1,2,4")),
            (std::vector<int>{1, 2, 4}));
  EXPECT_EQ(std::get<std::vector<std::string>>(value(OptionKind::name_list, "1f1b, zb-v")),
            (std::vector<std::string>{"1f1b", "zb-v"}));
  EXPECT_EQ(std::get<int>(value(OptionKind::int32, "-3")), -3);
  EXPECT_EQ(std::get<std::int64_t>(value(OptionKind::int64, "8589934592")), 8589934592);
  EXPECT_EQ(std::get<std::uint64_t>(value(OptionKind::uint64, "7")), 7u);
  EXPECT_EQ(std::get<double>(value(OptionKind::number, "0.5")), 0.5);
  EXPECT_EQ(std::get<bool>(value(OptionKind::flag, "true")), true);
  EXPECT_EQ(std::get<std::string>(value(OptionKind::yaml, "a,b")), "a,b");
  EXPECT_EQ(std::get<std::vector<std::string>>(value(OptionKind::repeated, "k=v")),
            (std::vector<std::string>{"k=v"}));
  const std::pair<OptionKind, std::string> bad[] = {
      {OptionKind::int_list, "1,,2"}, {OptionKind::int_list, "1,x"}, {OptionKind::int32, "3x"},
      {OptionKind::int32, ""},        {OptionKind::uint64, "-1"},    {OptionKind::number, "n"},
      {OptionKind::flag, "yes"}};
  const std::string expected[] = {"--x: expected a comma-separated list of integers, got '1,,2'",
                                  "--x: expected a comma-separated list of integers, got '1,x'",
                                  "--x: expected an integer, got '3x'",
                                  "--x: expected an integer, got ''",
                                  "--x: expected a non-negative integer, got '-1'",
                                  "--x: expected a number, got 'n'",
                                  "--x: expected true or false, got 'yes'"};
  for (std::size_t i = 0; i < std::size(bad); ++i) {
    try {
      value(bad[i].first, bad[i].second);
      ADD_FAILURE() << bad[i].second << " was taken";
    } catch (const RequestError& e) {
      EXPECT_EQ(std::string(e.what()), expected[i]);
    }
  }
}

TEST(RequestTable, BadValuesAndOptionsThatDoNotApplyAreRefused) {
  auto message = [](const std::map<std::string, OptionValue>& given) {
    try {
      applied(search_options(), given);
    } catch (const RequestError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message({{"planner", std::string("full")}, {"screen-evals", std::int64_t{32}}}),
            "--screen-evals: applies to --planner quick only (got --planner full)");
  // The table's order decides nothing here: --planner comes after the screen is set.
  EXPECT_EQ(message({{"screen-margin-pct", 10.0}, {"planner", std::string("off")}}),
            "--screen-margin-pct: applies to --planner quick only (got --planner off)");
  EXPECT_EQ(message({{"cp", std::vector<int>{}}}), "--cp: the list is empty");
  EXPECT_EQ(message({{"set", std::vector<std::string>{"=1"}}}),
            "--set: expected KEY=VALUE, e.g. training.sequence_parallel=true, got '=1'");
  EXPECT_EQ(message({{"planner", std::string("fast")}}),
            "--planner: unknown value 'fast' (off, quick, full)");
  try {
    applied(plan_options(), {{"max-devices", 0}});
    ADD_FAILURE() << "no error";
  } catch (const RequestError& e) {
    EXPECT_EQ(std::string(e.what()), "--max-devices: must be at least 1");
  }
}

}  // namespace
}  // namespace bmpipe::api
