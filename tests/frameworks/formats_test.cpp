// The vocabulary the importers and the exports share (frameworks/common/formats.hpp): the
// prefix-count reading of recompute lists, full before selective from each stage's first
// layer, as both frameworks count. Each framework's own vocabulary is tested in
// megatron_test.cpp and mindformers_test.cpp.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "frameworks/common/formats.hpp"

namespace bmpipe {
namespace {

TEST(PrefixCounts, FullFirstThenSelectiveFromTheStageStart) {
  using R = Recompute;
  EXPECT_EQ(modes_from_prefix_counts({3, 2}, {1, 0}, {2, 5}),
            (std::vector<R>{R::full, R::selective, R::none, R::selective, R::selective}));
  // A select count below the full count selects nothing more.
  EXPECT_EQ(modes_from_prefix_counts({2}, {2}, {1}), (std::vector<R>{R::full, R::full}));
  const std::vector<R> modes{R::none, R::full, R::none, R::selective};
  EXPECT_EQ(covering_prefix({2, 2}, modes, 0, R::full), 2);
  EXPECT_EQ(covering_prefix({2, 2}, modes, 1, R::full), 0);
  EXPECT_EQ(covering_prefix({2, 2}, modes, 1, R::selective), 2);
}

}  // namespace
}  // namespace bmpipe
