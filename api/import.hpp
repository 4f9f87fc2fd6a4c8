#pragma once
/// \file
/// bmpipe import as a library: a job in a framework's own words (Megatron-LM arguments, a
/// MindFormers YAML) or a measured profile, as the bmpipe YAML config `bmpipe import`
/// prints. The importers themselves are frameworks/'s (frameworks/importers.hpp); this is
/// the request every front end makes of them.

#include <optional>
#include <string>
#include <vector>

namespace bmpipe::api {

struct ImportRequest {
  std::string format;                  ///< an importer's name: megatron, mindformers, profile
  std::string input;                   ///< a file, or "-" for standard input
  std::optional<std::string> cluster;  ///< a YAML file with only a cluster: section
  std::optional<std::string> preset;   ///< or a hardware preset ...
  std::optional<long long> devices;    ///< ... on this many devices
  std::optional<int> pp;               ///< profile imports only: pipeline stages
  std::optional<int> microbatches;     ///< profile imports only: micro-batches
  /// Import a job whose flags or keys change time or memory in ways bmpipe does not model
  /// (ImportedJob::unmodelled), with a warning for each, instead of refusing it.
  bool allow_unmodelled = false;
  /// Where the YAML goes ("<stdout>" when printed): its header names it, and relative
  /// paths in it are written relative to it.
  std::string out = "<stdout>";
};

struct ImportOutcome {
  std::string yaml;
  /// Flags and keys bmpipe does not model, and approximations, one line each, with the
  /// user's bytes shown as ConfigError shows them (control characters as \xNN).
  std::vector<std::string> ignored, notes;
  /// With allow_unmodelled: each flag or key bmpipe does not model that makes the simulated
  /// job differ from the user's, one line each.
  std::vector<std::string> warnings;
};

/// What `bmpipe import --help` says above its options: the usage line, each format (from
/// the importer table), what is written, how unknown and unmodelled flags or keys are
/// treated, and the exit codes.
std::string import_help();

/// The importers' names, "megatron, mindformers, torchtitan, profile" (the importer table's
/// order), for messages.
std::string import_format_names();

/// The hardware presets' names, comma-separated, for --preset's help and its messages.
std::string hardware_preset_names_text();

/// The format named by `format` is an importer's: else RequestError("FORMAT", "unknown
/// format 'megatorn' (did you mean 'megatron'?) (megatron, mindformers, torchtitan or
/// profile)"), the closest name offered as a typo's correction.
void check_import_format(const std::string& format);

/// " (did you mean 'h100-sxm'?)" for a hardware preset's name: the one preset that `name`
/// begins ("h100" is h100-sxm, not h200 one edit away), else the closest by edits (as
/// did_you_mean), else "".
std::string preset_suggestion(const std::string& name);

/// The request's preset, when it names one, is a hardware preset: else RequestError(
/// "--preset", "unknown hardware preset 'h100' (did you mean 'h100-sxm'?) (known: ...)").
/// Checked before anything else of the request: a misspelt preset is the first thing to fix.
void check_import_preset(const ImportRequest& request);

/// The request's own values, checked before the input is read: a known format, exactly one
/// way to give the cluster, --pp/--microbatches only where the input has no layout and at
/// least 1. Throws RequestError naming the option (its message is what the command prints).
void check_import_request(const ImportRequest& request);

/// Checks the preset (check_import_preset) and the request, reads the input and writes the
/// config. Throws RequestError, and ConfigError for the
/// input (among them an ImportError for flags or keys bmpipe does not model, unless
/// allow_unmodelled), the cluster file or the preset.
ImportOutcome run_import(const ImportRequest& request);

}  // namespace bmpipe::api
