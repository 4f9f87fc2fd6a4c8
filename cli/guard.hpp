#pragma once
// The one place where a command's failures become exit codes: every subcommand runs its
// body through guarded(), so each catches the same errors and prints them the same way.

#include <functional>
#include <string>

namespace bmpipe::cli {

/// Runs `body` and returns its exit code. Bad input of every kind (api::RequestError,
/// api::NoPlanFits, OutputError, ConfigError, ScheduleFileError) is
/// printed on stderr as "bmpipe <command>: <what>" (a ScheduleFileError names its file
/// itself, as a compiler does) and returns 2. Anything else propagates to main(), which
/// reports it as an internal error (exit 70).
int guarded(const std::string& command, const std::function<int()>& body);

}  // namespace bmpipe::cli
