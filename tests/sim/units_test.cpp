// The one formatter of bytes and times every output uses (sim/units.hpp), on values whose
// text is known by hand.
#include <gtest/gtest.h>

#include "sim/units.hpp"

namespace bmpipe {
namespace {

constexpr std::int64_t kMiB = 1LL << 20, kGiB = 1LL << 30;

TEST(Units, BytesTakeTheLargestUnitReachedNotBelowTheSmallestAllowed) {
  // Always GiB: the summary tables' "peak mem / capacity".
  EXPECT_EQ(format_bytes(80 * kGiB, 2, ByteUnit::GiB), "80.00 GiB");
  EXPECT_EQ(format_bytes(kGiB / 4, 2, ByteUnit::GiB), "0.25 GiB");
  EXPECT_EQ(format_bytes(3 * kGiB / 2, 1, ByteUnit::GiB), "1.5 GiB");
  // MiB below a GiB: the pictures' labels.
  EXPECT_EQ(format_bytes(512 * kMiB, 1, ByteUnit::MiB), "512.0 MiB");
  EXPECT_EQ(format_bytes(kGiB, 1, ByteUnit::MiB), "1.0 GiB");  // exactly 1 GiB is GiB
  EXPECT_EQ(format_bytes(kGiB - 1, 1, ByteUnit::MiB), "1024.0 MiB");
  EXPECT_EQ(format_bytes(1024, 1, ByteUnit::MiB), "0.0 MiB");
  // KiB below a MiB: the planner's "over by" messages.
  EXPECT_EQ(format_bytes(1536, 2, ByteUnit::KiB), "1.50 KiB");
  EXPECT_EQ(format_bytes(3 * kMiB, 2, ByteUnit::KiB), "3.00 MiB");
  // The sign is kept and the unit is chosen by magnitude.
  EXPECT_EQ(format_bytes(-2 * kGiB, 2, ByteUnit::KiB), "-2.00 GiB");
  EXPECT_EQ(format_bytes(-3 * kMiB, 1, ByteUnit::MiB), "-3.0 MiB");
  EXPECT_EQ(format_bytes(0, 2, ByteUnit::KiB), "0.00 KiB");
}

TEST(Units, MillisecondsAreNanosecondsOverAMillion) {
  EXPECT_EQ(format_ms(30'781'349'000, 3), "30781.349");
  EXPECT_EQ(format_ms(30'781'349'000, 1), "30781.3");
  EXPECT_EQ(format_ms(1'500'000, 3), "1.500");
  EXPECT_EQ(format_ms(0, 1), "0.0");
  EXPECT_EQ(format_ms(999, 3), "0.001");  // 0.000999 ms rounds up
}

}  // namespace
}  // namespace bmpipe
