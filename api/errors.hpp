#pragma once
/// \file
/// The api's own errors, beside the ones of the layers below (ConfigError for a config,
/// ScheduleFileError for a schedule file). The executable maps every one of them to exit
/// 2 in one place (cli/guard.hpp); the Python module to ValueError.

#include <stdexcept>
#include <string>

namespace bmpipe::api {

/// An argument of a request that makes no sense whatever the config says. `key` is the
/// command-line spelling ("--max-evals"); what() reads "key: message".
class RequestError : public std::invalid_argument {
 public:
  RequestError(std::string key, std::string message);
  const std::string& key() const { return key_; }
  const std::string& message() const { return message_; }

 private:
  std::string key_;
  std::string message_;
};

/// A file a command writes could not be written (a journal's line, an output file); what()
/// reads "PATH: OPTION: what went wrong".
class OutputError : public std::runtime_error {
 public:
  OutputError(const std::string& path, const std::string& option, const std::string& what)
      : std::runtime_error(path + ": " + option + ": " + what) {}
};

/// No plan of any schedule tried fits the memory limit; what() names the config, the
/// limit and the rank that comes closest, as `bmpipe plan` prints it.
class NoPlanFits : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace bmpipe::api
