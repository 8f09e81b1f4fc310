// attn/kernel_set.h: the kernel chosen once per (format, D, options) gives
// the same bits, chunk by chunk, as the full candidate ladder the cache used
// to try for every chunk (LadderDotK / LadderAxpyV), for every format at the
// head dims the tests and bundled models use, full and ragged chunk lengths.
#include "attn/kernel_set.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "quant/format_traits.h"

namespace hqekv::attn {
namespace {

// Every kind × legal width × grouping (and group sizes for per-token), with
// and without Hadamard rotation.
std::vector<quant::Format> AllFormats() {
  std::vector<quant::Format> out;
  size_t n = 0;
  const quant::FormatTraits* rows = quant::AllTraits(&n);
  for (size_t i = 0; i < n; ++i) {
    const quant::FormatTraits& t = rows[i];
    for (int bits = 1; bits <= 32; ++bits) {
      if (!((t.legal_bits >> bits) & 1u)) continue;
      for (bool had : {false, true}) {
        quant::Format f;
        f.kind = t.kind;
        f.bits = bits;
        f.hadamard = had;
        if (!t.grouped) {
          out.push_back(f);
          continue;
        }
        f.grouping = quant::Grouping::kPerChannel;
        out.push_back(f);
        f.grouping = quant::Grouping::kPerToken;
        for (int g : {16, 32, 64, 128}) {
          f.group = g;
          out.push_back(f);
        }
      }
    }
  }
  return out;
}

constexpr int kDims[] = {8, 32, 64, 128, 256};

TEST(KernelSet, EachFormatHasOneCandidateBesidesTheFallback) {
  int checked = 0;
  for (const quant::Format& f : AllFormats()) {
    for (int D : kDims) {
      for (bool rq : {false, true}) {
        for (bool rw : {false, true}) {
          const ChunkKernels k = SelectKernels(f, D, KernelOptions{rq, rw});
          SCOPED_TRACE(quant::FormatName(f) + " D=" + std::to_string(D));
          EXPECT_NE(k.dot_path, DotPath::kLadder);
          EXPECT_NE(k.axpy_path, AxpyPath::kLadder);
          EXPECT_TRUE(k.dot_k != nullptr && k.axpy_v != nullptr);
          if (!rq) EXPECT_EQ(k.dot_path, DotPath::kFp32);
          ++checked;
        }
      }
    }
  }
  EXPECT_GT(checked, 400);
}

TEST(KernelSet, KnownFormatsPickTheirKernels) {
  const KernelOptions on{true, true};
  EXPECT_EQ(SelectKernels(quant::F16(), 128, on).dot_path, DotPath::kF16Pieces);
  EXPECT_EQ(SelectKernels(quant::F16(), 128, on).axpy_path, AxpyPath::kF16Pieces);
  EXPECT_EQ(SelectKernels(quant::Int8PerToken(), 128, on).dot_path, DotPath::kInt8Rows);
  EXPECT_EQ(SelectKernels(quant::Int8PerToken(), 128, on).axpy_path, AxpyPath::kInt8Rows);
  EXPECT_EQ(SelectKernels(quant::GgmlBlock(quant::Kind::kQ8_0), 128, on).dot_path,
            DotPath::kQ8_0Rows);
  EXPECT_EQ(SelectKernels(quant::Uniform(2, quant::Grouping::kPerChannel), 128, on).dot_path,
            DotPath::kInt16Query);
  EXPECT_EQ(SelectKernels(quant::Uniform(2, quant::Grouping::kPerToken), 128, on).axpy_path,
            AxpyPath::kInt16Weights);
  EXPECT_EQ(SelectKernels(quant::F32(), 128, on).dot_path, DotPath::kFp32);
  EXPECT_TRUE(SelectKernels(quant::Int8PerToken(), 128, on).takes_lines);
  EXPECT_FALSE(SelectKernels(quant::Fp8E4M3(), 128, on).takes_lines);
  // The cached entry is the selection, and stays put.
  const ChunkKernels& a = CachedKernels(quant::Int8PerToken(), 64, on);
  EXPECT_EQ(&a, &CachedKernels(quant::Int8PerToken(), 64, on));
  EXPECT_EQ(a.dot_path, SelectKernels(quant::Int8PerToken(), 64, on).dot_path);
  EXPECT_NE(&a, &CachedKernels(quant::Int8PerToken(), 64, KernelOptions{false, true}));
}

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> x(n);
  for (float& v : x) v = d(rng);
  return x;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Scores and sums of the selected kernels against the ladder, bit for bit,
// with a later block's lines to request (the fp16 pieces path) and without.
TEST(KernelSet, SelectedKernelsGiveTheLadderBits) {
  constexpr int kGroup = 4;
  int compared = 0;
  for (const quant::Format& f : AllFormats()) {
    for (int D : kDims) {
      for (int T : {1, 2, 17, 32, 48, 64}) {
        if (!quant::Validate(f, T, D).ok()) continue;
        SCOPED_TRACE(quant::FormatName(f) + " T=" + std::to_string(T) + " D=" + std::to_string(D));
        std::vector<float> x = Random(static_cast<size_t>(T) * D, 7 + T + D);
        std::vector<uint8_t> codes(quant::CodeBytes(f, T, D)), meta(quant::MetaBytes(f, T, D) + 1);
        quant::QuantizeChunk(f, x.data(), T, D, codes.data(), meta.data());
        const ChunkRef c{f, codes.data(), meta.data(), T, D};
        const std::vector<float> q = Random(static_cast<size_t>(kGroup) * D, 11 + D);
        const std::vector<float> w = Random(static_cast<size_t>(kGroup) * T, 13 + T);
        std::vector<uint8_t> later(16384, 1);
        for (bool rq : {false, true}) {
          for (bool with_lines : {false, true}) {
            const ChunkKernels k = SelectKernels(f, D, KernelOptions{rq, rq});
            const size_t ss = static_cast<size_t>(T) + 3;
            std::vector<float> got(ss * kGroup, -7.0f), want(got);
            PreparedQuery pq_got, pq_want;
            attn::PrefetchLines a_got, a_want;
            if (with_lines) {
              a_got.Set(later.data(), later.size());
              a_want.Set(later.data(), later.size());
            }
            k.dot_k(c, q.data(), kGroup, got.data(), ss, pq_got, &a_got);
            LadderDotK(c, q.data(), kGroup, want.data(), ss, rq, pq_want, &a_want);
            EXPECT_TRUE(SameBits(got, want)) << "dot, rounded=" << rq;
            EXPECT_EQ(a_got.next, a_want.next);

            std::vector<float> acc_got(static_cast<size_t>(kGroup) * D, 0.5f), acc_want(acc_got);
            k.axpy_v(c, w.data(), T, kGroup, acc_got.data(), &a_got);
            LadderAxpyV(c, w.data(), T, kGroup, acc_want.data(), rq, &a_want);
            EXPECT_TRUE(SameBits(acc_got, acc_want)) << "axpy, rounded=" << rq;
            EXPECT_EQ(a_got.next, a_want.next);
            ++compared;
          }
        }
      }
    }
  }
  EXPECT_GT(compared, 500);
}

}  // namespace
}  // namespace hqekv::attn
