#pragma once
// What every command shares on the way out: the library's atomic output files
// (api/output_file.hpp), and JSON that never throws on odd bytes.

#include <nlohmann/json.hpp>
#include <string>

#include "api/output_file.hpp"

namespace bmpipe::cli {

/// `j` as indented text; bytes that are not UTF-8 (a path, say) become U+FFFD instead of
/// throwing.
inline std::string json_text(const nlohmann::json& j) {
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace bmpipe::cli
