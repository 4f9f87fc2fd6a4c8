#pragma once
// The search tests' medium space (support.hpp's medium_search_args) as the library's
// request: GPT-3's layer cut to 24 layers on 64 A100s, tp 4,8, pp 4,8, micro-batch sizes 1,2:
// 28 layouts, some of them skipped by the bound.

#include <string>

#include "api/search.hpp"

namespace bmpipe::test {

inline const std::string kMediumConfig =
    std::string(BMPIPE_TEST_DATA_DIR) + "/search_gpt3_24_layers.yaml";

inline api::SearchRequest medium_search_request() {
  api::SearchRequest r;
  r.space.tp = {4, 8};
  r.space.pp = {4, 8};
  r.space.micro_batch_size = {1, 2};
  return r;
}

}  // namespace bmpipe::test
