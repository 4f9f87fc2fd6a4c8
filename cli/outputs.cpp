#include "cli/outputs.hpp"

#include <cerrno>
#include <cstring>
#include <sstream>

namespace bmpipe::cli {

OutputFile::OutputFile(std::string path, std::string option)
    : path_(std::move(path)), option_(std::move(option)), to_stdout_(path_ == "-") {
  if (!to_stdout_) open_output(file_, path_, option_);
}

void OutputFile::close() {
  if (to_stdout_) {
    std::cout.flush();
    if (!std::cout) throw OutputError("standard output", option_, "write failed");
    return;
  }
  close_output(file_, path_, option_);
}

void open_output(std::ofstream& file, const std::string& path, const std::string& option) {
  errno = 0;
  file.open(path, std::ios::binary | std::ios::trunc);
  if (!file)
    throw OutputError(path, option,
                      std::string("cannot open for writing") +
                          (errno ? std::string(" (") + std::strerror(errno) + ")" : ""));
}

void close_output(std::ofstream& file, const std::string& path, const std::string& option) {
  file.flush();
  if (!file) throw OutputError(path, option, "write failed");
  file.close();
  if (!file) throw OutputError(path, option, "write failed");
}

void write_edited_config(const std::string& config_path, const std::string& out_path,
                         const ConfigEdits& edits, const std::string& header,
                         std::optional<double> device_memory_GiB) {
  std::ifstream in(config_path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  const std::string body =
      config_with_edits(text.str(), config_path, out_path, edits, header, device_memory_GiB);
  std::ofstream file;
  open_output(file, out_path, "--out");
  file << body;
  close_output(file, out_path, "--out");
}

std::string json_text(const nlohmann::json& j) {
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

TraceLabels trace_labels(const Experiment& e, const Plan& plan) {
  const std::vector<StageInfo> stages = stage_info(e, plan);
  return TraceLabels{layer_range_labels(plan.partition), stage_recompute_labels(stages),
                     stage_recompute_counts(stages)};
}

}  // namespace bmpipe::cli
