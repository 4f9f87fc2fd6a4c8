// libFuzzer target: HuggingFace config.json text -> ModelShape or ShapeError; a shape that
// reads is then loaded the way a YAML config with model.hf_config loads it (which holds
// its numbers to the YAML fields' ranges) and run through the analytic cost model and the
// engine.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "frameworks/hf/hf_config.hpp"
#include "fuzz_run.hpp"

namespace {

// Per process, so that parallel fuzzing jobs (-jobs, -workers) do not share it.
std::string temp_path() {
  std::error_code ec;
  std::filesystem::path dir = std::filesystem::temp_directory_path(ec);
  if (ec) dir = "/tmp";
  return (dir / ("bmpipe-fuzz-hf-" + std::to_string(getpid()) + ".json")).string();
}

// Small on purpose: 4 devices, short sequences, so each run takes milliseconds.
std::string config_for(const std::string& hf_path) {
  return "cluster:\n"
         "  nodes: 1\n"
         "  devices_per_node: 4\n"
         "  device: {preset: h200}\n"
         "model:\n"
         "  hf_config: \"" +
         hf_path +
         "\"\n"
         "training:\n"
         "  schedule: zb-h1\n"
         "  pp: 2\n"
         "  seq_length: 64\n"
         "  microbatches: 4\n"
         "  recompute: selective\n";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace bmpipe;
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const ModelShape shape = parse_hf_config(text, "fuzz-input.json");
    check_shape(shape);  // what it returns is a shape check_shape accepts
  } catch (const ShapeError&) {
    return 0;
  }
  const std::string path = temp_path();
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out) fuzz::broken("cannot write " + path);
  }
  Overrides overrides;
  overrides.limits = fuzz::small_limits();
  Config config;
  bool loaded = true;
  try {
    config = parse_config(config_for(path), "fuzz-input.yaml", overrides);
  } catch (const ConfigError&) {
    loaded = false;
  }
  std::remove(path.c_str());
  if (loaded) fuzz::run_config(config);
  return 0;
}
