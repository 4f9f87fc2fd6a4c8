#pragma once
// What every subcommand that takes a CONFIG shares: the positional CONFIG, --help, the
// messages for bad options, and the --pp/--vpp/--microbatches overrides.

#include <algorithm>
#include <boost/program_options.hpp>
#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "api/api.hpp"
#include "api/errors.hpp"
#include "api/request_table.hpp"
#include "api/ticker.hpp"

namespace bmpipe::cli {

/// Adds --help and the positional CONFIG to `opts`.
void add_config_options(boost::program_options::options_description& opts);

/// Adds the options of a request table (api/request_table.hpp) to `opts`, each with its
/// kind's value type, its value name and the default --help shows.
void add_request_option(boost::program_options::options_description& opts,
                        const api::OptionSpec& option);
/// Rows [from, to) of `table` (to: past the end by default), for a command whose --help
/// lists its own options between the request's.
template <class R>
void add_request_options(boost::program_options::options_description& opts,
                         const api::RequestTable<R>& table, std::size_t from = 0,
                         std::size_t to = static_cast<std::size_t>(-1)) {
  for (std::size_t i = from; i < std::min(to, table.size()); ++i)
    add_request_option(opts, table[i]);
}

/// The rows of `table` before its last override_options ("rows after which the config's
/// overrides start"), for add_request_options.
template <class R>
std::size_t rows_before_overrides(const api::RequestTable<R>& table) {
  return table.size() - api::override_options("").size();
}

/// The value of `option` given in `vm`; none when not given (or only its default). Throws
/// api::RequestError for a list that is not one ("--tp: expected a comma-separated list of
/// integers, got 'x'").
std::optional<api::OptionValue> given_value(const boost::program_options::variables_map& vm,
                                            const api::OptionSpec& option);

/// Sets `request` from the options of `table` given in `vm` (api::apply_options).
template <class R>
void fill_request(const api::RequestTable<R>& table,
                  const boost::program_options::variables_map& vm, R& request) {
  api::apply_options<R>(
      table, [&vm](const api::OptionSpec& option) { return given_value(vm, option); }, request);
}

/// Adds --pp, --vpp, --microbatches, --max-ops, --max-devices and the config keys
/// (api::override_options); `vpp_help` says what vpp means for the command.
void add_override_options(boost::program_options::options_description& opts, const char* vpp_help);

/// Adds --quiet and --progress-interval-s (default 5), as every command that can run for
/// long takes them; `carries` lists what a progress line says, for --help.
void add_progress_options(boost::program_options::options_description& opts,
                          const std::string& carries);

/// Writes `text` to stderr at once (a progress line of api/progress_lines.hpp).
void print_to_stderr(const std::string& text);

/// --progress-interval-s from `vm`. Throws api::RequestError when it is negative or not finite.
double progress_interval_s(const boost::program_options::variables_map& vm);

/// The progress line of `command` as its options ask: none with --quiet, redrawn when
/// stderr is a terminal, else one line per --progress-interval-s.
api::Ticker progress_ticker(std::string command, const boost::program_options::variables_map& vm);

/// Parses `args` for `bmpipe <command>`. Returns an exit code when the command should stop
/// now: 0 after printing --help (followed by `epilogue`), 2 after a usage error: a bad
/// option or value in one line ("bmpipe simulate: --pp: expected an integer, got 'abc'"),
/// no CONFIG with the option list. nullopt: go on with `vm`. `hidden` options are parsed
/// but not listed by --help (an option a command refuses with its reason).
std::optional<int> parse_command_line(
    const std::string& command, const std::vector<std::string>& args,
    const boost::program_options::options_description& opts, const std::string& epilogue,
    boost::program_options::variables_map& vm,
    const boost::program_options::options_description* hidden = nullptr);

/// Stores `args` in `vm` with `opts` and `pos`, accepting only exact option names (Boost
/// takes an unambiguous prefix by default: --microbatch would silently be --microbatches).
/// Throws what boost::program_options throws.
void store_exact(const std::vector<std::string>& args,
                 const boost::program_options::options_description& opts,
                 const boost::program_options::positional_options_description& pos,
                 boost::program_options::variables_map& vm);

/// One line for a parse error, without the "bmpipe <command>: " prefix: "--pp: expected an
/// integer, got 'abc'", or "unrecognised option '--microbatch' (did you mean
/// '--microbatches'?)", the names offered being those of `opts`.
std::string parse_error_line(const boost::program_options::error& e,
                             const boost::program_options::options_description& opts);

/// The overrides (api::override_options) present in `vm`. Throws RequestError for a limit
/// below 1 or a --set without '='.
Overrides overrides_from(const boost::program_options::variables_map& vm);

}  // namespace bmpipe::cli
