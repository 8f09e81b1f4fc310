#include "core/half.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace hqekv {
namespace {

TEST(Half, RoundTripsEveryFiniteHalf) {
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const f16_t bits = static_cast<f16_t>(h);
    if (((bits >> 10) & 0x1F) == 0x1F) continue;  // inf / NaN
    EXPECT_EQ(F32ToF16(F16ToF32(bits)), bits) << h;
  }
}

TEST(Half, KnownValues) {
  EXPECT_EQ(F32ToF16(1.0f), 0x3C00);
  EXPECT_EQ(F32ToF16(-2.0f), 0xC000);
  EXPECT_EQ(F32ToF16(65504.0f), 0x7BFF);
  EXPECT_EQ(F32ToF16(1e6f), 0x7C00);                    // overflow -> inf
  EXPECT_EQ(F32ToF16(5.960464477539063e-08f), 0x0001);  // smallest subnormal
  EXPECT_EQ(F32ToF16(1e-9f), 0x0000);
  EXPECT_TRUE(std::isnan(F16ToF32(F32ToF16(std::numeric_limits<float>::quiet_NaN()))));
  // Ties go to even: 1 + 2^-11 is halfway between 1 and 1 + 2^-10.
  EXPECT_EQ(F32ToF16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);
  EXPECT_EQ(F32ToF16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);
}

}  // namespace
}  // namespace hqekv
