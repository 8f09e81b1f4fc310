// ParseFormat / FormatName / Validate errors, the exact plane sizes, and the
// format table (quant/format_traits.h).
#include <gtest/gtest.h>

#include "quant/format.h"
#include "quant/format_traits.h"

namespace hqekv::quant {
namespace {

TEST(QuantFormat, ParsesEveryNameAndRoundTripsItsName) {
  for (const char* name : {"f16", "f32", "fp8e4m3", "fp8e5m2", "int8", "u1:tok", "u2:tok", "u4:tok",
                           "u8:tok", "n1:tok", "n2:tok", "n4:chan", "u4:chan", "n1:chan",
                           "u2:tok:g=16", "u4:chan:had", "f16:had"}) {
    auto f = ParseFormat(name);
    ASSERT_TRUE(f.ok()) << name << ": " << f.message();
    EXPECT_EQ(FormatName(*f), name);
  }
  auto f = ParseFormat("u2:chan:had");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->kind, Kind::kUniform);
  EXPECT_EQ(f->bits, 2);
  EXPECT_EQ(f->grouping, Grouping::kPerChannel);
  EXPECT_TRUE(f->hadamard);
  EXPECT_EQ(ParseFormat("u4")->grouping, Grouping::kPerToken);  // default grouping
  EXPECT_EQ(ParseFormat("n2:g=64")->group, 64);
}

TEST(QuantFormat, ParseErrorsNameTheBadPart) {
  struct Case {
    const char* text;
    const char* needle;
  };
  for (const Case& c : {Case{"q4", "q4"}, Case{"u5", "5"}, Case{"u16", "16"}, Case{"n8", "8"},
                        Case{"n0", "0"}, Case{"u4:foo", "foo"}, Case{"u4:g=0", "g=0"},
                        Case{"u4:g=x", "g=x"}, Case{"int8:chan", "chan"}, Case{"f16:g=32", "group"},
                        Case{"", "unknown format"}, Case{"ux", "ux"}}) {
    auto f = ParseFormat(c.text);
    ASSERT_FALSE(f.ok()) << c.text;
    EXPECT_NE(f.message().find(c.needle), std::string::npos) << c.text << " -> " << f.message();
  }
}

TEST(QuantFormat, ValidateRejectsIllegalShapesAndBits) {
  EXPECT_TRUE(Validate(Uniform(4, Grouping::kPerToken), 32, 128).ok());
  EXPECT_TRUE(Validate(Uniform(4, Grouping::kPerChannel, 7), 7, 100).ok());  // group unused
  EXPECT_FALSE(Validate(Uniform(3, Grouping::kPerToken), 32, 128).ok());
  EXPECT_FALSE(Validate(Uniform(0, Grouping::kPerToken), 32, 128).ok());
  EXPECT_TRUE(Validate(Normal(4, Grouping::kPerToken), 32, 128).ok());
  EXPECT_FALSE(Validate(Normal(8, Grouping::kPerToken), 32, 128).ok());
  EXPECT_FALSE(Validate(Format{Kind::kInt8, 4}, 32, 128).ok());
  EXPECT_FALSE(Validate(Format{Kind::kF16, 8}, 32, 128).ok());
  const Status g = Validate(Uniform(4, Grouping::kPerToken, 48), 32, 128);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.message().find("does not divide"), std::string::npos);
  EXPECT_FALSE(Validate(Uniform(4, Grouping::kPerToken, 0), 32, 128).ok());
  EXPECT_FALSE(Validate(F16(), 0, 128).ok());
  EXPECT_FALSE(Validate(F16(), -1, 128).ok());
  EXPECT_FALSE(Validate(F16(), 32, 0).ok());
  EXPECT_FALSE(Validate(F16(), 32, -8).ok());
  Format had = F16();
  had.hadamard = true;
  EXPECT_TRUE(Validate(had, 32, 128).ok());
  const Status h = Validate(had, 32, 96);
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.message().find("power-of-two"), std::string::npos);
  EXPECT_FALSE(Validate(F16(), 1 << 15, 1 << 15).ok());  // too large
}

TEST(QuantFormat, PlaneSizesAreExact) {
  const Grouping tok = Grouping::kPerToken, chan = Grouping::kPerChannel;
  EXPECT_EQ(CodeBytes(F16(), 32, 128), 8192u);
  EXPECT_EQ(MetaBytes(F16(), 32, 128), 0u);
  EXPECT_EQ(CodeBytes(F32(), 32, 128), 16384u);
  EXPECT_EQ(CodeBytes(Fp8E4M3(), 32, 128), 4096u);
  EXPECT_EQ(MetaBytes(Fp8E4M3(), 32, 128), 2u);
  EXPECT_EQ(MetaBytes(Fp8E5M2(), 7, 64), 2u);
  EXPECT_EQ(CodeBytes(Int8PerToken(), 32, 128), 4096u);
  EXPECT_EQ(MetaBytes(Int8PerToken(), 32, 128), 64u);
  EXPECT_EQ(CodeBytes(Uniform(4, tok), 32, 128), 2048u);
  EXPECT_EQ(MetaBytes(Uniform(4, tok), 32, 128), 512u);  // 128 groups x (scale, min) x 2 B
  EXPECT_EQ(CodeBytes(Uniform(2, chan), 32, 128), 1024u);
  EXPECT_EQ(MetaBytes(Uniform(2, chan), 32, 128), 512u);  // 128 channels x 2 x 2 B
  EXPECT_EQ(CodeBytes(Uniform(1, chan), 7, 8), 7u);       // 56 bits, no padding
  EXPECT_EQ(CodeBytes(Uniform(1, chan), 7, 9), 8u);       // 63 bits -> 8 bytes
  EXPECT_EQ(CodeBytes(Uniform(2, tok, 1), 1, 3), 1u);     // 6 bits
  EXPECT_EQ(MetaBytes(Uniform(2, tok, 1), 1, 3), 12u);
  EXPECT_EQ(CodeBytes(Uniform(8, chan), 7, 64), 448u);
  EXPECT_EQ(CodeBytes(Normal(1, tok), 32, 128), 512u);
  EXPECT_EQ(MetaBytes(Normal(1, tok), 32, 128), 512u);
  EXPECT_EQ(MetaBytes(Normal(2, chan), 1, 64), 256u);
  // u3: a 2-bit plane then a 1-bit plane, each rounded up to whole bytes.
  EXPECT_EQ(CodeBytes(Uniform3(chan), 32, 64), 768u);
  EXPECT_EQ(MetaBytes(Uniform3(chan), 32, 64), 256u);
  EXPECT_EQ(CodeBytes(Uniform3(tok, 64), 32, 64), 768u);
  EXPECT_EQ(MetaBytes(Uniform3(tok, 64), 32, 64), 128u);  // 32 groups x 2 x 2 B
  EXPECT_EQ(CodeBytes(Uniform3(tok, 1), 1, 3), 2u);       // 6 bits + 3 bits: 1 + 1 bytes
  EXPECT_EQ(CodeBytes(F16(), 0, 128), 0u);
  EXPECT_EQ(MetaBytes(Uniform(4, tok, 48), 32, 128), 0u);  // invalid: 0, never a crash
}

// Every row of the table is complete and names a parseable format whose
// kind is the row's; a row's spec head is what FormatName prints.
TEST(QuantFormatTraits, EveryRowParsesAndRoundTrips) {
  size_t n = 0;
  const FormatTraits* rows = AllTraits(&n);
  ASSERT_EQ(n, static_cast<size_t>(Kind::kCount));
  for (size_t i = 0; i < n; ++i) {
    const FormatTraits& tr = rows[i];
    EXPECT_EQ(&Traits(tr.kind), &tr);
    for (int bits = 1; bits < 64; ++bits) {
      if (((tr.legal_bits >> bits) & 1u) == 0) continue;
      if (!tr.bits_in_name && bits != tr.default_bits) continue;
      const std::string head =
          tr.bits_in_name ? tr.name + std::to_string(bits) : std::string(tr.name);
      auto f = ParseFormat(head);
      ASSERT_TRUE(f.ok()) << head << ": " << f.message();
      EXPECT_EQ(f->kind, tr.kind) << head;
      EXPECT_EQ(f->bits, bits) << head;
      EXPECT_TRUE(Validate(*f, 32, 128).ok()) << head;
      EXPECT_EQ(FormatName(*f).substr(0, head.size()), head);
      EXPECT_EQ(CodeBytes(*f, 32, 128), tr.code_bytes(*f, 32, 128)) << head;
      EXPECT_EQ(MetaBytes(*f, 32, 128), tr.meta_bytes(*f, 32, 128)) << head;
      const size_t packed = (32u * 128u * static_cast<size_t>(bits) + 7) / 8;
      if (tr.d_block == 0) {
        EXPECT_EQ(CodeBytes(*f, 32, 128), packed) << head;
      } else {
        // llama.cpp block types: the q5 high bits live in the metadata plane
        // (quant/internal.h), so only codes + metadata hold every code bit.
        EXPECT_LE(CodeBytes(*f, 32, 128), packed) << head;
        EXPECT_GT(CodeBytes(*f, 32, 128) + MetaBytes(*f, 32, 128), packed) << head;
      }
    }
  }
}

}  // namespace
}  // namespace hqekv::quant
