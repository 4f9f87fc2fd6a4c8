// The pictures' rough edges a new user found (issue 21, section 3): the compare SVG in the
// table's order.
#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <vector>

#include "support/support.hpp"

namespace {

using bmpipe::test::CliRun;
using bmpipe::test::run_cli;

/// The schedule names heading each panel of a compare SVG, top to bottom.
std::vector<std::string> panel_names(const std::string& svg) {
  static const std::regex heading(R"re(font-weight="bold">([a-z0-9-]+)<tspan)re");
  std::vector<std::string> names;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), heading);
       it != std::sregex_iterator(); ++it)
    names.push_back((*it)[1]);
  return names;
}

TEST(RoughEdgesSvg, CompareSvgIsInTheTablesOrder) {
  // tiny: zb-h1 27 ms, then gpipe and 1f1b at 33 ms (a tie kept in the order asked for);
  // asked for as gpipe,1f1b,zb-h1, the pictures used to follow the request.
  bmpipe::test::ScratchDir dir;
  const std::string svg = dir.file("c.svg");
  const CliRun r = run_cli("compare " + bmpipe::test::examples() +
                           "tiny.yaml --schedules gpipe,1f1b,zb-h1 --svg " + svg);
  ASSERT_EQ(r.code, 0) << r.err;
  // The table's order, read from the table.
  std::vector<std::string> table;
  std::istringstream lines(r.out);
  std::string line;
  while (std::getline(lines, line))
    for (const char* name : {"gpipe", "1f1b", "zb-h1"})
      if (line.rfind(std::string(name) + " ", 0) == 0) table.push_back(name);
  EXPECT_EQ(table, (std::vector<std::string>{"zb-h1", "gpipe", "1f1b"}));
  EXPECT_EQ(panel_names(bmpipe::test::slurp(svg)), table);
}

}  // namespace
