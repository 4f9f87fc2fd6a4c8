// libFuzzer target: HuggingFace config.json text -> ModelShape or ShapeError; a shape that
// reads is then loaded the way a YAML config with model.hf_config loads it (which holds
// its numbers to the YAML fields' ranges) and run through the analytic cost model and the
// engine.
#include <cstddef>
#include <cstdint>
#include <string>

#include "experiment/hf_config.hpp"
#include "fuzz_run.hpp"

namespace {

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
  Overrides overrides;
  overrides.limits = fuzz::small_limits();
  Config config;
  {
    const fuzz::TempFile file("hf.json", text);
    try {
      config = parse_config(config_for(file.path()), "fuzz-input.yaml", overrides);
    } catch (const ConfigError&) {
      return 0;
    }
  }
  fuzz::run_config(config);
  return 0;
}
