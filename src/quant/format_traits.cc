// The format table (quant/format_traits.h): one row per quant::Kind, in enum
// order. A new format adds its Kind, one row here, its reference file
// (quant/<name>_ref.cc) and, optionally, its codec kernels (quant/simd.cc
// family): see quant/README.md, "Adding a format".
#include "quant/format_traits.h"

#include <initializer_list>

#include "core/check.h"
#include "quant/internal.h"

namespace hqekv::quant {
namespace {

// ---- plane sizes (T, D > 0)

// kBytes bytes per value, token-major: f16 (2), f32 (4), int8 / fp8 (1).
template <size_t kBytes>
size_t ElementCodeBytes(const Format&, int T, int D) {
  return kBytes * NumCodes(T, D);
}
// Dense LSB-first stream of f.bits-bit codes (quant/README.md, "Dense packing").
size_t PackedCodeBytes(const Format& f, int T, int D) {
  return (NumCodes(T, D) * static_cast<size_t>(f.bits) + 7) / 8;
}

// kUniform3: a 2-bit plane of the low bits, then a 1-bit plane of the high bits.
size_t Split3CodeBytes(const Format&, int T, int D) { return Split3Bytes(NumCodes(T, D)); }

size_t NoMeta(const Format&, int, int) { return 0; }
size_t ChunkScaleMeta(const Format&, int, int) { return 2; }                             // one fp16
size_t TokenScaleMeta(const Format&, int T, int) { return 2 * static_cast<size_t>(T); }  // T fp16
// Two fp16 planes of one entry per group (multiplier, then offset); 0 for a
// per-token group that does not divide D (Validate rejects it).
size_t GroupPlanesMeta(const Format& f, int T, int D) {
  if (f.grouping == Grouping::kPerToken && (f.group <= 0 || D % f.group != 0)) return 0;
  return 4 * static_cast<size_t>(NumGroups(f, T, D));
}

// ggml block types: per block of 32 values, the codes plane bytes (32 or 16)
// and the metadata: fp16 d [, fp16 m] [, 32-bit high-bit mask].
size_t GgmlBlockCodes(const Format& f, int T, int D) {
  return static_cast<size_t>(BlockLayoutOf(f.kind).code_bytes) * (NumCodes(T, D) / kBlockValues);
}
size_t GgmlBlockMeta(const Format& f, int T, int D) {
  return static_cast<size_t>(BlockLayoutOf(f.kind).meta_bytes()) * (NumCodes(T, D) / kBlockValues);
}

constexpr uint64_t Bits(std::initializer_list<int> widths) {
  uint64_t mask = 0;
  for (int b : widths) mask |= uint64_t{1} << b;
  return mask;
}

// clang-format off
constexpr FormatTraits kTable[] = {
    {Kind::kF16, "f16", false, "fp16", 16, Bits({16}), false, true,
     ElementCodeBytes<2>, NoMeta, ref::QuantizeRaw, ref::DequantizeRaw,
     simd::QuantizeF16, simd::DequantizeF16, simd::DotF16, simd::AxpyF16,
     0},
    {Kind::kF32, "f32", false, "fp32", 32, Bits({32}), false, /*sanitize=*/false,
     ElementCodeBytes<4>, NoMeta, ref::QuantizeRaw, ref::DequantizeRaw,
     nullptr, nullptr, nullptr, nullptr, 0},
    {Kind::kFp8E4M3, "fp8e4m3", false, "fp8 E4M3", 8, Bits({8}), false, true,
     ElementCodeBytes<1>, ChunkScaleMeta, ref::QuantizeFp8, ref::DequantizeFp8,
     simd::QuantizeFp8, simd::DequantizeFp8, simd::DotFp8, simd::AxpyFp8,
     0},
    {Kind::kFp8E5M2, "fp8e5m2", false, "fp8 E5M2", 8, Bits({8}), false, true,
     ElementCodeBytes<1>, ChunkScaleMeta, ref::QuantizeFp8, ref::DequantizeFp8,
     simd::QuantizeFp8, simd::DequantizeFp8, simd::DotFp8, simd::AxpyFp8,
     0},
    {Kind::kInt8, "int8", false, "int8", 8, Bits({8}), false, true,
     ElementCodeBytes<1>, TokenScaleMeta, ref::QuantizeInt8, ref::DequantizeInt8,
     simd::QuantizeInt8, simd::DequantizeInt8, simd::DotInt8, simd::AxpyInt8,
     0},
    {Kind::kUniform, "u", true, "uniform quantization", 4, Bits({1, 2, 4, 8}), true, true,
     PackedCodeBytes, GroupPlanesMeta, ref::QuantizeUniform, ref::DequantizeUniform,
     simd::QuantizeGrouped, simd::DequantizeGrouped, simd::DotGrouped, simd::AxpyGrouped,
     0},
    {Kind::kNormal, "n", true, "normalized quantization", 2, Bits({1, 2, 4}), true, true,
     PackedCodeBytes, GroupPlanesMeta, ref::QuantizeNormal, ref::DequantizeNormal,
     simd::QuantizeGrouped, simd::DequantizeGrouped, simd::DotGrouped, simd::AxpyGrouped,
     0},
    {Kind::kUniform3, "u3", false, "uniform 3-bit quantization", 3, Bits({3}), true, true,
     Split3CodeBytes, GroupPlanesMeta, ref::QuantizeUniform3, ref::DequantizeUniform3,
     simd::QuantizeUniform3, simd::DequantizeUniform3, simd::DotUniform3, simd::AxpyUniform3,
     0},
    {Kind::kQ8_0, "q8_0", false, "llama.cpp q8_0", 8, Bits({8}), false, true,
     GgmlBlockCodes, GgmlBlockMeta, ref::QuantizeGgmlBlock, ref::DequantizeGgmlBlock,
     simd::QuantizeGgmlBlock, simd::DequantizeGgmlBlock, simd::DotGgmlBlock, simd::AxpyGgmlBlock,
     kBlockValues},
    {Kind::kQ4_0, "q4_0", false, "llama.cpp q4_0", 4, Bits({4}), false, true,
     GgmlBlockCodes, GgmlBlockMeta, ref::QuantizeGgmlBlock, ref::DequantizeGgmlBlock,
     simd::QuantizeGgmlBlock, simd::DequantizeGgmlBlock, simd::DotGgmlBlock, simd::AxpyGgmlBlock,
     kBlockValues},
    {Kind::kQ4_1, "q4_1", false, "llama.cpp q4_1", 4, Bits({4}), false, true,
     GgmlBlockCodes, GgmlBlockMeta, ref::QuantizeGgmlBlock, ref::DequantizeGgmlBlock,
     simd::QuantizeGgmlBlock, simd::DequantizeGgmlBlock, simd::DotGgmlBlock, simd::AxpyGgmlBlock,
     kBlockValues},
    {Kind::kQ5_0, "q5_0", false, "llama.cpp q5_0", 5, Bits({5}), false, true,
     GgmlBlockCodes, GgmlBlockMeta, ref::QuantizeGgmlBlock, ref::DequantizeGgmlBlock,
     simd::QuantizeGgmlBlock, simd::DequantizeGgmlBlock, simd::DotGgmlBlock, simd::AxpyGgmlBlock,
     kBlockValues},
    {Kind::kQ5_1, "q5_1", false, "llama.cpp q5_1", 5, Bits({5}), false, true,
     GgmlBlockCodes, GgmlBlockMeta, ref::QuantizeGgmlBlock, ref::DequantizeGgmlBlock,
     simd::QuantizeGgmlBlock, simd::DequantizeGgmlBlock, simd::DotGgmlBlock, simd::AxpyGgmlBlock,
     kBlockValues},
};
// clang-format on

constexpr size_t kRows = sizeof(kTable) / sizeof(kTable[0]);

// Row i describes Kind i (Traits indexes the table), and every row is complete.
constexpr bool RowsInKindOrder() {
  for (size_t i = 0; i < kRows; ++i) {
    if (static_cast<size_t>(kTable[i].kind) != i) return false;
  }
  return true;
}
constexpr bool RowsComplete() {
  for (const FormatTraits& t : kTable) {
    if (t.name == nullptr || t.code_bytes == nullptr || t.meta_bytes == nullptr ||
        t.ref_quantize == nullptr || t.ref_dequantize == nullptr ||
        ((t.legal_bits >> t.default_bits) & 1u) == 0) {
      return false;
    }
  }
  return true;
}
static_assert(RowsInKindOrder(), "kTable rows must follow quant::Kind order");
static_assert(kRows == static_cast<size_t>(Kind::kQ5_1) + 1, "one row per quant::Kind");
// GCC's UBSan instruments the function-pointer null checks, which makes them
// non-constant: the sanitizer build skips this one (the release build, which
// CI also runs, keeps it).
#ifndef HQEKV_SANITIZED
static_assert(RowsComplete(), "every row needs sizes, a reference and a legal default width");
#endif

}  // namespace

const FormatTraits& Traits(Kind kind) {
  const size_t i = static_cast<size_t>(kind);
  HQEKV_DCHECK(i < kRows);
  return kTable[i];
}

const FormatTraits* AllTraits(size_t* count) {
  *count = kRows;
  return kTable;
}

// Any kind's fast kernel through its row (used by the tests and callers that
// only need "is there a fast path").
namespace simd {
bool Quantize(const Format& f, const float* src, int T, int D, uint8_t* codes, uint8_t* meta) {
  const FastQuantizeFn fn = Traits(f.kind).fast_quantize;
  return fn != nullptr && fn(f, src, T, D, codes, meta);
}
bool DequantizeStored(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                      float* dst) {
  const FastDequantizeFn fn = Traits(f.kind).fast_dequantize;
  return fn != nullptr && fn(f, codes, meta, T, D, dst);
}
bool Dot(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D, const float* q,
         float* scores) {
  const FastDotFn fn = Traits(f.kind).fast_dot;
  return fn != nullptr && fn(f, codes, meta, T, D, q, scores);
}
bool Axpy(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D, const float* w,
          float* acc) {
  const FastAxpyFn fn = Traits(f.kind).fast_axpy;
  return fn != nullptr && fn(f, codes, meta, T, D, w, acc);
}
}  // namespace simd

}  // namespace hqekv::quant
