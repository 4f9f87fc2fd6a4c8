// libFuzzer target: a torchtitan job TOML -> what `bmpipe import torchtitan FILE --preset
// h100-sxm --devices 64` does (fuzz_import.hpp; --devices, since a shard degree of -1 takes
// the devices left over), then the config it prints run as `bmpipe simulate` runs it.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_import.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace bmpipe;
  const std::string text(reinterpret_cast<const char*>(data), size);
  api::ImportRequest request;
  request.format = "torchtitan";
  request.preset = "h100-sxm";
  request.devices = 64;
  fuzz::import_and_run(request, "torchtitan.toml", text);
  return 0;
}
