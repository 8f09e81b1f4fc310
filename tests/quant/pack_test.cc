// Dense LSB-first packing and the documented code layouts of each grouping.
#include <gtest/gtest.h>

#include <random>

#include "quant_test_util.h"

namespace hqekv::quant {
namespace {

TEST(QuantPack, KnownBytesLsbFirst) {
  const uint8_t codes2[] = {1, 2, 3, 0, 3};
  uint8_t out[2] = {0xFF, 0xFF};
  PackCodes(codes2, 5, 2, out);
  EXPECT_EQ(out[0], 0x39);  // 0b00'11'10'01: first code in the least significant bits
  EXPECT_EQ(out[1], 0x03);  // padding bits after the last code are zero
  const uint8_t codes4[] = {0xA, 0x5, 0xF};
  PackCodes(codes4, 3, 4, out);
  EXPECT_EQ(out[0], 0x5A);
  EXPECT_EQ(out[1], 0x0F);
  const uint8_t codes1[] = {1, 0, 0, 0, 0, 0, 0, 1, 1};
  PackCodes(codes1, 9, 1, out);
  EXPECT_EQ(out[0], 0x81);
  EXPECT_EQ(out[1], 0x01);
}

TEST(QuantPack, PackUnpackIdentity) {
  std::mt19937 rng(3);
  for (int bits : {1, 2, 4, 8}) {
    for (size_t n : {size_t{1}, size_t{3}, size_t{7}, size_t{8}, size_t{33}, size_t{4096}}) {
      std::vector<uint8_t> codes(n), back(n);
      for (auto& c : codes) c = static_cast<uint8_t>(rng() & ((1u << bits) - 1u));
      std::vector<uint8_t> packed((n * bits + 7) / 8 + 1, 0xEE);
      PackCodes(codes.data(), n, bits, packed.data());
      EXPECT_EQ(packed.back(), 0xEE) << "wrote past ceil(n*b/8) bytes";
      UnpackCodes(packed.data(), n, bits, back.data());
      EXPECT_EQ(codes, back) << "bits=" << bits << " n=" << n;
    }
  }
}

// The code of element (t, d) sits at stream index t*D + d (per-token) or
// d*T + t (per-channel), and x^ = code * scale[g] + min[g] with the planes
// as documented in quant/README.md.
TEST(QuantPack, DocumentedLayoutOfEachGrouping) {
  for (const char* name :
       {"u4:tok", "u2:tok:g=16", "u1:tok", "u4:chan", "u2:chan", "u1:chan", "u8:chan"}) {
    const Format f = *ParseFormat(name);
    for (int T : {7, 32}) {
      const int D = 64;
      const std::vector<float> x = testing::Gaussian(T, D, 4);
      const testing::Encoded e = testing::Encode(f, x, T, D, false);
      const std::vector<float> y = testing::Decode(f, e, T, D, false);
      std::vector<uint8_t> c(static_cast<size_t>(T) * D);
      UnpackCodes(e.codes.data(), c.size(), f.bits, c.data());
      const bool chan = f.grouping == Grouping::kPerChannel;
      const int groups = NumGroups(f, T, D);
      for (int t = 0; t < T; ++t) {
        for (int d = 0; d < D; ++d) {
          const int g = chan ? d : t * (D / f.group) + d / f.group;
          const uint8_t code = c[chan ? d * T + t : t * D + d];
          const float want = code * testing::Group16(e.meta.data(), 0, groups, g) +
                             testing::Group16(e.meta.data(), 1, groups, g);
          ASSERT_NEAR(y[t * D + d], want, 1e-5f) << name << " T=" << T << " t=" << t << " d=" << d;
        }
      }
    }
  }
}

TEST(QuantPack, NormalAndSymmetricLayouts) {
  const int T = 32, D = 64;
  const std::vector<float> x = testing::Gaussian(T, D, 6);
  {  // n2:chan: plane 0 = std, plane 1 = mean; x^ = mean + std * centre[code]
    const Format f = *ParseFormat("n2:chan");
    const testing::Encoded e = testing::Encode(f, x, T, D, false);
    const std::vector<float> y = testing::Decode(f, e, T, D, false);
    std::vector<uint8_t> c(static_cast<size_t>(T) * D);
    UnpackCodes(e.codes.data(), c.size(), 2, c.data());
    for (int t = 0; t < T; ++t) {
      for (int d = 0; d < D; ++d) {
        const float want = testing::Group16(e.meta.data(), 1, D, d) +
                           testing::Group16(e.meta.data(), 0, D, d) * kNormalCentres2[c[d * T + t]];
        ASSERT_NEAR(y[t * D + d], want, 1e-5f);
      }
    }
  }
  {  // int8: token-major signed bytes, one fp16 scale per token
    const testing::Encoded e = testing::Encode(Int8PerToken(), x, T, D, false);
    const std::vector<float> y = testing::Decode(Int8PerToken(), e, T, D, false);
    for (int t = 0; t < T; ++t) {
      const float s = F16ToF32(LoadF16(e.meta.data() + 2 * t));
      for (int d = 0; d < D; ++d) {
        ASSERT_FLOAT_EQ(y[t * D + d], static_cast<int8_t>(e.codes[t * D + d]) * s);
      }
    }
  }
  {  // fp8: token-major codes, one fp16 scale for the chunk
    const testing::Encoded e = testing::Encode(Fp8E4M3(), x, T, D, false);
    const std::vector<float> y = testing::Decode(Fp8E4M3(), e, T, D, false);
    const float s = F16ToF32(LoadF16(e.meta.data()));
    for (size_t i = 0; i < y.size(); ++i) ASSERT_FLOAT_EQ(y[i], DecodeFp8(e.codes[i], true) * s);
  }
}

TEST(QuantFp8, EncodeDecodeKnownValues) {
  EXPECT_EQ(EncodeFp8(448.0f, true), 0x7E);
  EXPECT_EQ(EncodeFp8(1e9f, true), 0x7E);  // saturates, never NaN (0x7F)
  EXPECT_EQ(EncodeFp8(-500.0f, true), 0xFE);
  EXPECT_EQ(EncodeFp8(1.0f, true), 0x38);      // exponent 7 (bias 7), mantissa 0
  EXPECT_EQ(EncodeFp8(0x1p-9f, true), 0x01);   // smallest subnormal
  EXPECT_EQ(EncodeFp8(0x1p-11f, true), 0x00);  // below half of it: rounds to zero
  EXPECT_EQ(EncodeFp8(57344.0f, false), 0x7B);
  EXPECT_EQ(EncodeFp8(1e9f, false), 0x7B);  // no inf
  EXPECT_EQ(EncodeFp8(1.0f, false), 0x3C);
  EXPECT_EQ(EncodeFp8(1.125f, true), 0x39);
  EXPECT_EQ(EncodeFp8(1.0625f, true), 0x38);          // tie -> even mantissa
  EXPECT_EQ(EncodeFp8(1.1875f, true), 0x3A);          // tie -> even mantissa (up)
  EXPECT_FLOAT_EQ(DecodeFp8(0x7F, true), 448.0f);     // NaN code never decodes to NaN
  EXPECT_FLOAT_EQ(DecodeFp8(0x7C, false), 57344.0f);  // inf code neither
  // Every finite code round-trips.
  for (int c = 0; c < 256; ++c) {
    for (bool e4m3 : {true, false}) {
      const uint8_t code = static_cast<uint8_t>(c);
      if ((code & 0x7F) > (e4m3 ? 0x7E : 0x7B)) continue;
      if (code == 0x80) continue;  // -0 encodes back to 0x80, checked below
      EXPECT_EQ(EncodeFp8(DecodeFp8(code, e4m3), e4m3), code) << c << " e4m3=" << e4m3;
    }
  }
  EXPECT_EQ(EncodeFp8(-0.0f, true), 0x80);
}

}  // namespace
}  // namespace hqekv::quant
