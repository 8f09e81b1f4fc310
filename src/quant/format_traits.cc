// The format table (quant/format_traits.h): one row per quant::Kind, in enum
// order. A new format adds its Kind, one row here, its reference file
// (quant/<name>_ref.cc) and, optionally, its codec kernels (quant/simd.cc
// family): see quant/README.md, "Adding a format".
#include "quant/format_traits.h"

#include <initializer_list>

#include "core/check.h"
#include "quant/internal.h"
#include "quant/iq4_nl.h"

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

constexpr FormatTraits kTable[] = {
    {
        .kind = Kind::kF16,
        .name = "f16",
        .bits_in_name = false,
        .description = "fp16",
        .default_bits = 16,
        .legal_bits = Bits({16}),
        .grouped = false,
        .sanitize = true,
        .code_bytes = ElementCodeBytes<2>,
        .meta_bytes = NoMeta,
        .ref_quantize = ref::QuantizeRaw,
        .ref_dequantize = ref::DequantizeRaw,
        .fast_quantize = simd::QuantizeF16,
        .fast_dequantize = simd::DequantizeF16,
        .fast_dot = simd::DotF16,
        .fast_axpy = simd::AxpyF16,
        .d_block = 0,
    },
    {
        .kind = Kind::kF32,
        .name = "f32",
        .bits_in_name = false,
        .description = "fp32",
        .default_bits = 32,
        .legal_bits = Bits({32}),
        .grouped = false,
        .sanitize = false,
        .code_bytes = ElementCodeBytes<4>,
        .meta_bytes = NoMeta,
        .ref_quantize = ref::QuantizeRaw,
        .ref_dequantize = ref::DequantizeRaw,
        .fast_quantize = nullptr,
        .fast_dequantize = nullptr,
        .fast_dot = nullptr,
        .fast_axpy = nullptr,
        .d_block = 0,
    },
    {
        .kind = Kind::kFp8E4M3,
        .name = "fp8e4m3",
        .bits_in_name = false,
        .description = "fp8 E4M3",
        .default_bits = 8,
        .legal_bits = Bits({8}),
        .grouped = false,
        .sanitize = true,
        .code_bytes = ElementCodeBytes<1>,
        .meta_bytes = ChunkScaleMeta,
        .ref_quantize = ref::QuantizeFp8,
        .ref_dequantize = ref::DequantizeFp8,
        .fast_quantize = simd::QuantizeFp8,
        .fast_dequantize = simd::DequantizeFp8,
        .fast_dot = simd::DotFp8,
        .fast_axpy = simd::AxpyFp8,
        .d_block = 0,
    },
    {
        .kind = Kind::kFp8E5M2,
        .name = "fp8e5m2",
        .bits_in_name = false,
        .description = "fp8 E5M2",
        .default_bits = 8,
        .legal_bits = Bits({8}),
        .grouped = false,
        .sanitize = true,
        .code_bytes = ElementCodeBytes<1>,
        .meta_bytes = ChunkScaleMeta,
        .ref_quantize = ref::QuantizeFp8,
        .ref_dequantize = ref::DequantizeFp8,
        .fast_quantize = simd::QuantizeFp8,
        .fast_dequantize = simd::DequantizeFp8,
        .fast_dot = simd::DotFp8,
        .fast_axpy = simd::AxpyFp8,
        .d_block = 0,
    },
    {
        .kind = Kind::kInt8,
        .name = "int8",
        .bits_in_name = false,
        .description = "int8",
        .default_bits = 8,
        .legal_bits = Bits({8}),
        .grouped = false,
        .sanitize = true,
        .code_bytes = ElementCodeBytes<1>,
        .meta_bytes = TokenScaleMeta,
        .ref_quantize = ref::QuantizeInt8,
        .ref_dequantize = ref::DequantizeInt8,
        .fast_quantize = simd::QuantizeInt8,
        .fast_dequantize = simd::DequantizeInt8,
        .fast_dot = simd::DotInt8,
        .fast_axpy = simd::AxpyInt8,
        .d_block = 0,
    },
    {
        .kind = Kind::kUniform,
        .name = "u",
        .bits_in_name = true,
        .description = "uniform quantization",
        .default_bits = 4,
        .legal_bits = Bits({1, 2, 4, 8}),
        .grouped = true,
        .sanitize = true,
        .code_bytes = PackedCodeBytes,
        .meta_bytes = GroupPlanesMeta,
        .ref_quantize = ref::QuantizeUniform,
        .ref_dequantize = ref::DequantizeUniform,
        .fast_quantize = simd::QuantizeGrouped,
        .fast_dequantize = simd::DequantizeGrouped,
        .fast_dot = simd::DotGrouped,
        .fast_axpy = simd::AxpyGrouped,
        .d_block = 0,
    },
    {
        .kind = Kind::kNormal,
        .name = "n",
        .bits_in_name = true,
        .description = "normalized quantization",
        .default_bits = 2,
        .legal_bits = Bits({1, 2, 4}),
        .grouped = true,
        .sanitize = true,
        .code_bytes = PackedCodeBytes,
        .meta_bytes = GroupPlanesMeta,
        .ref_quantize = ref::QuantizeNormal,
        .ref_dequantize = ref::DequantizeNormal,
        .fast_quantize = simd::QuantizeGrouped,
        .fast_dequantize = simd::DequantizeGrouped,
        .fast_dot = simd::DotGrouped,
        .fast_axpy = simd::AxpyGrouped,
        .d_block = 0,
    },
    {
        .kind = Kind::kUniform3,
        .name = "u3",
        .bits_in_name = false,
        .description = "uniform 3-bit quantization",
        .default_bits = 3,
        .legal_bits = Bits({3}),
        .grouped = true,
        .sanitize = true,
        .code_bytes = Split3CodeBytes,
        .meta_bytes = GroupPlanesMeta,
        .ref_quantize = ref::QuantizeUniform3,
        .ref_dequantize = ref::DequantizeUniform3,
        .fast_quantize = simd::QuantizeUniform3,
        .fast_dequantize = simd::DequantizeUniform3,
        .fast_dot = simd::DotUniform3,
        .fast_axpy = simd::AxpyUniform3,
        .d_block = 0,
    },
    {
        .kind = Kind::kQ8_0,
        .name = "q8_0",
        .bits_in_name = false,
        .description = "llama.cpp q8_0",
        .default_bits = 8,
        .legal_bits = Bits({8}),
        .grouped = false,
        .sanitize = true,
        .code_bytes = GgmlBlockCodes,
        .meta_bytes = GgmlBlockMeta,
        .ref_quantize = ref::QuantizeGgmlBlock,
        .ref_dequantize = ref::DequantizeGgmlBlock,
        .fast_quantize = simd::QuantizeGgmlBlock,
        .fast_dequantize = simd::DequantizeGgmlBlock,
        .fast_dot = simd::DotGgmlBlock,
        .fast_axpy = simd::AxpyGgmlBlock,
        .d_block = kBlockValues,
    },
    {
        .kind = Kind::kQ4_0,
        .name = "q4_0",
        .bits_in_name = false,
        .description = "llama.cpp q4_0",
        .default_bits = 4,
        .legal_bits = Bits({4}),
        .grouped = false,
        .sanitize = true,
        .code_bytes = GgmlBlockCodes,
        .meta_bytes = GgmlBlockMeta,
        .ref_quantize = ref::QuantizeGgmlBlock,
        .ref_dequantize = ref::DequantizeGgmlBlock,
        .fast_quantize = simd::QuantizeGgmlBlock,
        .fast_dequantize = simd::DequantizeGgmlBlock,
        .fast_dot = simd::DotGgmlBlock,
        .fast_axpy = simd::AxpyGgmlBlock,
        .d_block = kBlockValues,
    },
    {
        .kind = Kind::kQ4_1,
        .name = "q4_1",
        .bits_in_name = false,
        .description = "llama.cpp q4_1",
        .default_bits = 4,
        .legal_bits = Bits({4}),
        .grouped = false,
        .sanitize = true,
        .code_bytes = GgmlBlockCodes,
        .meta_bytes = GgmlBlockMeta,
        .ref_quantize = ref::QuantizeGgmlBlock,
        .ref_dequantize = ref::DequantizeGgmlBlock,
        .fast_quantize = simd::QuantizeGgmlBlock,
        .fast_dequantize = simd::DequantizeGgmlBlock,
        .fast_dot = simd::DotGgmlBlock,
        .fast_axpy = simd::AxpyGgmlBlock,
        .d_block = kBlockValues,
    },
    {
        .kind = Kind::kQ5_0,
        .name = "q5_0",
        .bits_in_name = false,
        .description = "llama.cpp q5_0",
        .default_bits = 5,
        .legal_bits = Bits({5}),
        .grouped = false,
        .sanitize = true,
        .code_bytes = GgmlBlockCodes,
        .meta_bytes = GgmlBlockMeta,
        .ref_quantize = ref::QuantizeGgmlBlock,
        .ref_dequantize = ref::DequantizeGgmlBlock,
        .fast_quantize = simd::QuantizeGgmlBlock,
        .fast_dequantize = simd::DequantizeGgmlBlock,
        .fast_dot = simd::DotGgmlBlock,
        .fast_axpy = simd::AxpyGgmlBlock,
        .d_block = kBlockValues,
    },
    {
        .kind = Kind::kQ5_1,
        .name = "q5_1",
        .bits_in_name = false,
        .description = "llama.cpp q5_1",
        .default_bits = 5,
        .legal_bits = Bits({5}),
        .grouped = false,
        .sanitize = true,
        .code_bytes = GgmlBlockCodes,
        .meta_bytes = GgmlBlockMeta,
        .ref_quantize = ref::QuantizeGgmlBlock,
        .ref_dequantize = ref::DequantizeGgmlBlock,
        .fast_quantize = simd::QuantizeGgmlBlock,
        .fast_dequantize = simd::DequantizeGgmlBlock,
        .fast_dot = simd::DotGgmlBlock,
        .fast_axpy = simd::AxpyGgmlBlock,
        .d_block = kBlockValues,
    },
    {
        .kind = Kind::kIq4Nl,
        .name = "iq4_nl",
        .bits_in_name = false,
        .description = "llama.cpp iq4_nl",
        .default_bits = 4,
        .legal_bits = Bits({4}),
        .grouped = false,
        .sanitize = true,
        .code_bytes = Iq4NlCodeBytes,
        .meta_bytes = Iq4NlMetaBytes,
        .ref_quantize = ref::QuantizeIq4Nl,
        .ref_dequantize = ref::DequantizeIq4Nl,
        .fast_quantize = nullptr,
        .fast_dequantize = simd::DequantizeIq4Nl,
        .fast_dot = simd::DotIq4Nl,
        .fast_axpy = simd::AxpyIq4Nl,
        .d_block = kBlockValues,
    },
};

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
static_assert(kRows == static_cast<size_t>(Kind::kCount), "one row per quant::Kind");
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
