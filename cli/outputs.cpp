#include "cli/outputs.hpp"

#include <cerrno>
#include <cstring>

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

std::string json_text(const nlohmann::json& j) {
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

TraceLabels trace_labels(const Experiment& e, const Plan& plan) {
  const std::vector<StageInfo> stages = stage_info(e, plan);
  return TraceLabels{layer_range_labels(plan.partition), stage_recompute_labels(stages),
                     stage_recompute_counts(stages)};
}

}  // namespace bmpipe::cli
