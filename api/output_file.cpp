#include "api/output_file.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace bmpipe::api {

namespace {

std::string errno_text(int err) {
  return err ? std::string(" (") + std::strerror(err) + ")" : "";
}

}  // namespace

OutputFile::OutputFile(std::string path, std::string option)
    : path_(std::move(path)), option_(std::move(option)), to_stdout_(path_ == "-") {
  if (to_stdout_) return;
  struct stat st {};
  const bool exists = ::stat(path_.c_str(), &st) == 0;
  if (exists && S_ISDIR(st.st_mode))
    throw OutputError(path_, option_, "cannot open for writing" + errno_text(EISDIR));
  if (exists && !S_ISREG(st.st_mode)) {
    // A device or a fifo: renaming over it would replace it, so write in place.
    errno = 0;
    file_.open(path_, std::ios::binary | std::ios::trunc);
    if (!file_) throw OutputError(path_, option_, "cannot open for writing" + errno_text(errno));
    return;
  }
  if (exists && ::access(path_.c_str(), W_OK) != 0)
    throw OutputError(path_, option_, "cannot open for writing" + errno_text(errno));
  const std::size_t slash = path_.rfind('/');
  const std::string dir = slash == std::string::npos ? "" : path_.substr(0, slash + 1);
  const std::string base = slash == std::string::npos ? path_ : path_.substr(slash + 1);
  std::string name = dir + "." + base + ".bmpipe-XXXXXX";
  const int fd = ::mkstemp(name.data());
  if (fd < 0) throw OutputError(path_, option_, "cannot open for writing" + errno_text(errno));
  // mkstemp makes the file 0600; give it the mode a plain open would (0666 less the umask).
  const mode_t mask = ::umask(0);
  ::umask(mask);
  ::fchmod(fd, 0666 & ~mask);
  ::close(fd);
  temp_ = name;
  errno = 0;
  file_.open(temp_, std::ios::binary | std::ios::trunc);
  if (!file_) {
    const int err = errno;
    ::unlink(temp_.c_str());
    temp_.clear();
    throw OutputError(path_, option_, "cannot open for writing" + errno_text(err));
  }
}

OutputFile::~OutputFile() {
  if (temp_.empty()) return;
  file_.close();
  ::unlink(temp_.c_str());
}

void OutputFile::close() {
  if (to_stdout_) {
    std::cout.flush();
    if (!std::cout) throw OutputError("standard output", option_, "write failed");
    return;
  }
  file_.flush();
  if (!file_) throw OutputError(path_, option_, "write failed");
  file_.close();
  if (!file_) throw OutputError(path_, option_, "write failed");
  if (temp_.empty()) return;  // written in place
  if (::rename(temp_.c_str(), path_.c_str()) != 0)
    throw OutputError(path_, option_, "cannot replace the file" + errno_text(errno));
  temp_.clear();
}

void write_output(const std::string& path, const std::string& option, const std::string& text) {
  OutputFile out(path, option);
  out.stream() << text;
  out.close();
}

}  // namespace bmpipe::api
