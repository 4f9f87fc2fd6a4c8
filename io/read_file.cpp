#include "io/read_file.hpp"

#include <filesystem>
#include <fstream>
#include <iostream>
#include <vector>

namespace bmpipe {

std::string byte_size_text(std::size_t bytes) {
  if (bytes >= (std::size_t{1} << 30) && bytes % (std::size_t{1} << 30) == 0)
    return std::to_string(bytes >> 30) + " GiB";
  if (bytes >= (std::size_t{1} << 20) && bytes % (std::size_t{1} << 20) == 0)
    return std::to_string(bytes >> 20) + " MiB";
  if (bytes >= (std::size_t{1} << 10) && bytes % (std::size_t{1} << 10) == 0)
    return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " bytes";
}

std::string read_untrusted_file(const std::string& path, std::size_t max_bytes,
                                const std::string& what) {
  std::string text;
  std::vector<char> buf(1 << 16);
  auto slurp = [&](std::istream& in) {
    while (in.read(buf.data(), static_cast<std::streamsize>(buf.size())), in.gcount() > 0) {
      text.append(buf.data(), static_cast<std::size_t>(in.gcount()));
      if (text.size() > max_bytes)
        throw ReadFileError("is larger than " + byte_size_text(max_bytes) + ", which no " + what +
                            " is");
    }
    if (in.bad()) throw ReadFileError("cannot read the file");
  };
  if (path == "-") {
    slurp(std::cin);
    return text;
  }
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw ReadFileError("is a directory, not a " + what);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ReadFileError("cannot open the file");
  slurp(in);
  return text;
}

}  // namespace bmpipe
