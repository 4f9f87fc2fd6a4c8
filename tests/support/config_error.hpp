#pragma once
/// \file
/// The ConfigError a config text raises, for the tests that check refusals in-process.

#include <gtest/gtest.h>

#include <string>

#include "experiment/config.hpp"

namespace bmpipe::test {

/// What parse_config(text, file) throws; a test failure, and an empty error, when it
/// accepts the text.
inline ConfigError config_error_of(const std::string& text, const std::string& file) {
  try {
    parse_config(text, file);
  } catch (const ConfigError& e) {
    return e;
  }
  ADD_FAILURE() << "no ConfigError for:\n" << text;
  return ConfigError("", 0, "", "");
}

}  // namespace bmpipe::test
