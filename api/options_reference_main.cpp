// bmpipe_options_reference FILE...: rewrites the option tables of each Markdown FILE (the
// blocks between "<!-- options: NAME -->" and "<!-- /options -->") from the request tables
// (api/request_table.hpp). Run on docs/plan.md docs/search.md docs/python.md after changing
// an option; tests/docs/options_reference_test.cpp fails until then.
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>

#include "api/request_table.hpp"

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::ifstream in(argv[i]);
    if (!in) {
      std::cerr << argv[i] << ": cannot open the file\n";
      return 2;
    }
    std::stringstream text;
    text << in.rdbuf();
    std::string page;
    try {
      page = bmpipe::api::with_option_tables(text.str());
    } catch (const std::invalid_argument& e) {
      std::cerr << argv[i] << ": " << e.what() << "\n";
      return 2;
    }
    std::ofstream(argv[i]) << page;
  }
  return 0;
}
