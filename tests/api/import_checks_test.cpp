// api::check_import_format, api::preset_suggestion and api::check_import_preset: the checks
// `bmpipe import` and Python's import_config() make before reading the input. The names
// are sim/cost/hardware.cpp's presets and frameworks/importers.cpp's formats; every
// expected message is written out by hand from them.
#include <gtest/gtest.h>

#include <string>

#include "api/errors.hpp"
#include "api/import.hpp"

namespace bmpipe {
namespace {

/// The RequestError `f` throws as "key|message"; "none" when it throws nothing.
template <class F>
std::string refusal(F f) {
  try {
    f();
  } catch (const api::RequestError& e) {
    return e.key() + "|" + e.message();
  }
  return "none";
}

const std::string kKnown =
    " (known: ascend-910b, ascend-910c, a100-80g, b200, b300, gb200, gb300, h100-sxm, h200, "
    "h800)";

TEST(ImportChecks, APresetBeginsOneNameAndThatNameIsOffered) {
  // "h100" is one edit from h200 and h800, but begins only h100-sxm.
  EXPECT_EQ(api::preset_suggestion("h100"), " (did you mean 'h100-sxm'?)");
  EXPECT_EQ(api::preset_suggestion("a100"), " (did you mean 'a100-80g'?)");
}

TEST(ImportChecks, WithoutOneSuchNameTheClosestByEditsIsOffered) {
  // "b2000": one deletion from b200; gb200 is two edits away, past the bound of 5 / 3 + 1.
  EXPECT_EQ(api::preset_suggestion("b2000"), " (did you mean 'b200'?)");
  // "ascend" begins two presets, and is five edits from either: nothing is offered.
  EXPECT_EQ(api::preset_suggestion("ascend"), "");
  EXPECT_EQ(api::preset_suggestion("tpu-v5"), "");
  EXPECT_EQ(api::preset_suggestion(""), "");
}

TEST(ImportChecks, AnUnknownPresetIsRefusedWithTheSuggestionAndTheKnownNames) {
  api::ImportRequest r;
  r.format = "megatron";
  EXPECT_EQ(refusal([&] { api::check_import_preset(r); }), "none");  // no preset: a cluster file
  r.preset = "h200";
  EXPECT_EQ(refusal([&] { api::check_import_preset(r); }), "none");
  r.preset = "h100";
  EXPECT_EQ(refusal([&] { api::check_import_preset(r); }),
            "--preset|unknown hardware preset 'h100' (did you mean 'h100-sxm'?)" + kKnown);
  r.preset = "tpu-v5";
  EXPECT_EQ(refusal([&] { api::check_import_preset(r); }),
            "--preset|unknown hardware preset 'tpu-v5'" + kKnown);
}

TEST(ImportChecks, AnUnknownFormatIsRefusedWithTheClosestFormat) {
  EXPECT_EQ(refusal([] { api::check_import_format("profile"); }), "none");
  EXPECT_EQ(refusal([] { api::check_import_format("megatorn"); }),
            "FORMAT|unknown format 'megatorn' (did you mean 'megatron'?) (megatron, "
            "mindformers, torchtitan or profile)");
  EXPECT_EQ(refusal([] { api::check_import_format("deepspeed"); }),
            "FORMAT|unknown format 'deepspeed' (megatron, mindformers, torchtitan or profile)");
}

TEST(ImportChecks, RunImportChecksThePresetFirst) {
  // Both the format and the preset are wrong: the preset is named, as the command names it,
  // and no input is read (the file does not exist).
  api::ImportRequest r;
  r.format = "deepspeed";
  r.input = "no-such-file.txt";
  r.preset = "h100";
  r.devices = 8;
  EXPECT_EQ(refusal([&] { api::run_import(r); }),
            "--preset|unknown hardware preset 'h100' (did you mean 'h100-sxm'?)" + kKnown);
}

}  // namespace
}  // namespace bmpipe
