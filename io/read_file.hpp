#pragma once
// The one reader of untrusted files: configs, search journals, schedule files, launch scripts
// and framework YAMLs are all data from disk, read whole under a size bound.

#include <cstddef>
#include <stdexcept>
#include <string>

namespace bmpipe {

/// Why a file could not be read. what() says it without the file's name (the caller's own
/// error type adds the name, and the line or key when it has them).
class ReadFileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// `path` ("-": standard input) read whole. Refuses a directory, a file that cannot be opened
/// or read, and more than `max_bytes` (a device such as /dev/zero or /dev/full fails after
/// max_bytes, never reads on); `what` names the kind of file in the message ("config",
/// "search journal"). Throws ReadFileError.
std::string read_untrusted_file(const std::string& path, std::size_t max_bytes,
                                const std::string& what);

/// `bytes` as people say it: "16 MiB", "512 KiB", "100 bytes".
std::string byte_size_text(std::size_t bytes);

}  // namespace bmpipe
