// libFuzzer target: YAML text -> Config or ConfigError, then the whole simulate path.
// The input is named as a file in configs/examples/, so the relative hf_config paths of
// the examples (../presets/hf/...) resolve as they do for the real files.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_run.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace bmpipe;
  const std::string text(reinterpret_cast<const char*>(data), size);
  Overrides overrides;
  overrides.limits = fuzz::small_limits();
  Config config;
  try {
    config = parse_config(text, BMPIPE_SOURCE_DIR "/configs/examples/fuzz-input.yaml", overrides);
  } catch (const ConfigError&) {
    return 0;
  }
  fuzz::run_config(config);
  return 0;
}
