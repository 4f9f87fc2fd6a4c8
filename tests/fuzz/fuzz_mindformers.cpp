// libFuzzer target: a MindFormers training YAML -> what `bmpipe import mindformers FILE
// --preset ascend-910b` does (fuzz_import.hpp; the job's parallel_config says how many
// devices it runs on), then the config it prints run as `bmpipe simulate` runs it.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_import.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace bmpipe;
  const std::string text(reinterpret_cast<const char*>(data), size);
  api::ImportRequest request;
  request.format = "mindformers";
  request.preset = "ascend-910b";
  fuzz::import_and_run(request, "mindformers.yaml", text);
  return 0;
}
