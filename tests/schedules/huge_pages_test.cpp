// HugePageAllocator (schedules/huge_pages.hpp): a block of at least one huge page starts on
// a 2 MiB boundary, so that the kernel can back its whole pages with transparent huge pages;
// smaller ones take the ordinary allocator. Either way a vector holds and moves its
// elements as std::vector does.
#include <gtest/gtest.h>

#include <cstdint>

#include "schedules/huge_pages.hpp"
#include "schedules/op.hpp"

namespace bmpipe {
namespace {

constexpr std::size_t kHuge = std::size_t{2} << 20;

std::uintptr_t address(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p);
}

TEST(HugePages, LargeBlocksStartOnAHugePageBoundary) {
  for (std::size_t mib : {2, 3, 17, 100}) {
    HugeVector<std::uint32_t> v(mib * (std::size_t{1} << 20) / sizeof(std::uint32_t));
    EXPECT_EQ(address(v.data()) % kHuge, 0u) << mib << " MiB";
  }
  // Just under one huge page: the ordinary allocator, which aligns for the type only (a
  // 2 MiB boundary would be a 1-in-512 coincidence; three blocks in a row, 1 in 10^8).
  int aligned = 0;
  std::vector<HugeVector<std::uint32_t>> small;
  for (int k = 0; k < 3; ++k) {
    small.emplace_back(kHuge / sizeof(std::uint32_t) - 1024);
    aligned += address(small.back().data()) % kHuge == 0;
  }
  EXPECT_LT(aligned, 3);
}

TEST(HugePages, AVectorKeepsItsElementsAcrossGrowthAndCopies) {
  // Grows through the threshold: ordinary blocks first, then huge-page ones.
  HugeVector<std::int64_t> v;
  const std::int64_t n = 3 * static_cast<std::int64_t>(kHuge / sizeof(std::int64_t)) + 7;
  for (std::int64_t i = 0; i < n; ++i) v.push_back(i * i);
  ASSERT_EQ(static_cast<std::int64_t>(v.size()), n);
  for (std::int64_t i = 0; i < n; i += 4099) EXPECT_EQ(v[i], i * i);
  EXPECT_EQ(v.back(), (n - 1) * (n - 1));
  const HugeVector<std::int64_t> copy = v;
  EXPECT_TRUE(copy == v);
  v.clear();
  v.shrink_to_fit();
  EXPECT_EQ(copy.back(), (n - 1) * (n - 1));
}

TEST(HugePages, ScheduleOpListsUseThem) {
  // A rank's op list of 200,000 ops (4 MB) is one of the blocks the engine's faults came
  // from at 65,536 micro-batches.
  Schedule s;
  s.ops.resize(1);
  s.ops[0].reserve(200000);
  for (int k = 0; k < 200000; ++k) s.ops[0].push_back(Op::f(0, k));
  EXPECT_EQ(address(s.ops[0].data()) % kHuge, 0u);
  EXPECT_EQ(s.ops[0][123456], Op::f(0, 123456));
}

}  // namespace
}  // namespace bmpipe
