// libFuzzer target: a Megatron-LM launch script's arguments -> what `bmpipe import megatron
// FILE --preset b200 --devices N` does (fuzz_import.hpp), then the config it prints run as
// `bmpipe simulate` runs it. N is the devices the job's own sizes ask for (tp x pp x cp x ep
// x etp: data parallelism 1 for a dense job, ep x etp for an MoE one), so that a job the
// fuzzer has not broken imports; b200 has FP8 and NVFP4, so --fp8-* and --fp4-* import.
//
// Bounded input: an unknown flag ends an import at its "did you mean" (an edit distance to
// each of the 900-odd flags of frameworks/megatron/flags.tsv), which costs about 70 ms a
// name under the sanitizers and the fuzzer's comparison tracing, and nearly every mutation
// of a flag's name is unknown: 20 000 runs would take half an hour. So the target looks the
// script's flags up in that table first and turns away (returns -1: not kept in the corpus)
// an input with an unknown flag longer than kUnknownFlagChars; short ones still reach the
// suggestion. The launcher's own flags ("torchrun --nproc_per_node 8 pretrain_gpt.py") are
// not Megatron-LM's and are not looked up, as the importer does not.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "frameworks/megatron/import.hpp"
#include "fuzz_import.hpp"

namespace {

using namespace bmpipe;

constexpr std::size_t kUnknownFlagChars = 4;

long long clamped(long long v) {
  return std::clamp(v, 1LL, 1LL << 16);
}

// Whether the script names a flag the table lacks, longer than kUnknownFlagChars.
bool long_unknown_flag(const std::string& text) {
  std::vector<ShellWord> words;
  try {
    words = split_shell_words(text, "fuzz-input.sh");
  } catch (const ConfigError&) {
    return false;  // the import says so, at no cost
  }
  // The launcher's words, [from, to): from the command word before the first Python script
  // to the script, when that command does not start with a flag (frameworks/megatron/
  // import.cpp, launcher_words).
  std::size_t from = 0, to = 0;
  for (std::size_t i = 0; i < words.size(); ++i) {
    const std::string& t = words[i].text;
    if (words[i].boundary) {
      from = i + 1;
      continue;
    }
    if (t.size() > 3 && t[0] != '-' && t.ends_with(".py")) {
      if (from < i && !words[from].text.starts_with("--")) to = i;
      break;
    }
  }
  if (to == 0) from = 0;
  const Vocabulary& flags = megatron_vocabulary();
  for (std::size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i].text;
    if ((i >= from && i < to) || w.size() <= 2 || !w.starts_with("--")) continue;
    const std::string flag = w.substr(0, w.find('='));
    if (flag.size() > kUnknownFlagChars && !flags.find(flag)) return true;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  if (long_unknown_flag(text)) return -1;
  // The job's sizes, read through the importer table as `bmpipe import` dispatches.
  const Importer* megatron = find_importer("megatron");
  if (!megatron) fuzz::broken("no megatron importer in the table");
  ImportedJob job;
  if (!fuzz::answered([&] { job = megatron->read(text, "fuzz-input.sh"); })) return 0;
  long long devices = 1;
  for (const long long n :
       {static_cast<long long>(job.tp), static_cast<long long>(job.pp),
        static_cast<long long>(job.cp.value_or(1)), static_cast<long long>(job.ep.value_or(1)),
        static_cast<long long>(job.etp.value_or(1))})
    devices = std::min(devices * clamped(n), 1LL << 20);
  api::ImportRequest request;
  request.format = "megatron";
  request.preset = "b200";
  request.devices = devices;
  fuzz::import_and_run(request, "megatron-args.sh", text);
  return 0;
}
