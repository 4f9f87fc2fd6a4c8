// libFuzzer target: YAML text -> Config or ConfigError, then the planner (`bmpipe plan`)
// on it with a small budget. Shares the config corpus and dictionary with fuzz_config.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_run.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace bmpipe;
  const std::string text(reinterpret_cast<const char*>(data), size);
  Overrides overrides;
  overrides.limits = fuzz::small_limits();
  try {
    const Config config =
        parse_config(text, BMPIPE_SOURCE_DIR "/configs/examples/fuzz-input.yaml", overrides);
    fuzz::run_planner(*prepare(config));
  } catch (const ConfigError&) {
  }
  return 0;
}
