// read_hf_config on what a HuggingFace config.json should not be: every case is a
// ShapeError naming the file and, for a bad field, its JSON Pointer; nothing escapes as
// nlohmann::json::type_error or std::ios_base::failure.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "experiment/hf_config.hpp"
#include "support/support.hpp"

namespace bmpipe {
namespace {

const char* kLlama = R"({"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64,
  "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 1000})";

/// The ShapeError reading `path` raises; a test failure for anything else.
std::string shape_error(const std::string& path) {
  try {
    read_hf_config(path);
  } catch (const ShapeError& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not a ShapeError: " << e.what();
    return {};
  }
  ADD_FAILURE() << "accepted " << path;
  return {};
}

// `kLlama` with `field` set (added or replaced) to the JSON text `value`.
std::string llama_with(const std::string& field, const std::string& value) {
  nlohmann::json j = nlohmann::json::parse(kLlama);
  j[field] = nlohmann::json::parse(value);
  return j.dump();
}

TEST(HfConfigGuard, TheBaseCaseReads) {
  const test::ScratchDir dir;
  const ModelShape m = read_hf_config(test::write_file(dir.file("config.json"), kLlama));
  EXPECT_EQ(m.num_layers, 2);
  EXPECT_EQ(m.num_kv_heads, 4);  // absent: the attention heads
  EXPECT_FALSE(m.tied_embeddings);
}

TEST(HfConfigGuard, WrongTypesNameTheJsonPointer) {
  const test::ScratchDir dir;
  struct Case {
    std::string field, value, expected;
  };
  const Case cases[] = {
      {"model_type", "7", "/model_type: expected a string, got number"},
      {"tie_word_embeddings", "\"yes\"",
       "/tie_word_embeddings: expected true or false, got string"},
      {"tie_word_embeddings", "null", "/tie_word_embeddings: expected true or false, got null"},
      {"num_key_value_heads", "[4]",
       "/num_key_value_heads: HF config field 'num_key_value_heads' "
       "must be a positive integer, got array"},
      {"num_key_value_heads", "2.5", "must be a positive integer, got number"},
      {"num_key_value_heads", "true", "must be a positive integer, got boolean"},
      {"num_key_value_heads", "18446744073709551615", "at most 100000000"},
      {"num_key_value_heads", "0", "at most 100000000"},
  };
  int n = 0;
  for (const Case& c : cases) {
    const std::string path =
        test::write_file(dir.file(std::to_string(n++) + ".json"), llama_with(c.field, c.value));
    const std::string e = shape_error(path);
    EXPECT_NE(e.find(path + ": /" + c.field), std::string::npos) << e;
    EXPECT_NE(e.find(c.expected), std::string::npos) << e;
  }
}

TEST(HfConfigGuard, NullForARequiredFieldIsMissing) {
  const test::ScratchDir dir;
  const std::string e =
      shape_error(test::write_file(dir.file("c.json"), llama_with("vocab_size", "null")));
  EXPECT_NE(e.find("lacks the field 'vocab_size'"), std::string::npos) << e;
}

TEST(HfConfigGuard, Gpt2DropoutsMustBeNumbers) {
  const test::ScratchDir dir;
  const std::string text = R"({"model_type": "gpt2", "n_layer": 2, "n_embd": 64, "n_head": 4,
    "vocab_size": 100, "attn_pdrop": "0.1"})";
  const std::string e = shape_error(test::write_file(dir.file("c.json"), text));
  EXPECT_NE(e.find("/attn_pdrop: expected a number, got string"), std::string::npos) << e;
}

TEST(HfConfigGuard, WhatIsNotAJsonObject) {
  const test::ScratchDir dir;
  EXPECT_NE(shape_error(dir.path().string()).find("is a directory"), std::string::npos);
  EXPECT_NE(shape_error(test::write_file(dir.file("empty.json"), "")).find("is empty"),
            std::string::npos);
  EXPECT_NE(shape_error(test::write_file(dir.file("blank.json"), " \n\t\n")).find("is empty"),
            std::string::npos);
  EXPECT_NE(shape_error(test::write_file(dir.file("list.json"), "[1, 2]"))
                .find("expected a JSON object, got array"),
            std::string::npos);
  EXPECT_NE(shape_error(test::write_file(dir.file("bad.json"), "{\"a\": ")).find("not valid JSON"),
            std::string::npos);
  // A string holding bytes that are not UTF-8.
  EXPECT_NE(shape_error(test::write_file(dir.file("bytes.json"), "{\"model_type\": \"\xff\"}"))
                .find("not valid JSON"),
            std::string::npos);
  EXPECT_NE(shape_error(dir.file("missing\xff\xfe.json")).find("cannot open"), std::string::npos);
  EXPECT_NE(shape_error("/dev/null").find("is empty"), std::string::npos);
  const std::string big = test::write_file(dir.file("big.json"), std::string((4u << 20) + 1, ' '));
  EXPECT_NE(shape_error(big).find("larger than 4 MiB"), std::string::npos);
}

TEST(HfConfigGuard, DeepNestingIsJustInvalid) {
  const test::ScratchDir dir;
  // 100000 levels: a recursive parser would overflow the stack.
  const std::string deep = std::string(100'000, '[') + std::string(100'000, ']');
  EXPECT_NE(
      shape_error(test::write_file(dir.file("deep.json"), deep)).find("expected a JSON object"),
      std::string::npos);
}

}  // namespace
}  // namespace bmpipe
