// KV quantization formats and the chunk-level API every cache uses.
//
// A "chunk" is T consecutive tokens × D channels of one (layer, KV head),
// given as fp32 row-major [T][D]. Quantizing a chunk writes two separate
// planes: the densely packed codes (LSB-first, no padding bits inside the
// chunk) and the metadata (fp16 scales / minima / means / stds, fp8 scale).
// Layout of both planes is defined by the format and documented in
// quant/README.md. Entry points dispatch at run time to the best SIMD target
// (Highway); every one has a scalar reference in quant/*_ref.* that is its
// test oracle.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/status.h"

namespace hqekv::quant {

enum class Kind : uint8_t {
  kF16,       // raw fp16 values (no metadata)
  kF32,       // raw fp32 values (oracle / reference cache)
  kFp8E4M3,   // FP8 E4M3 codes, one fp16 scale per chunk (per head)
  kFp8E5M2,   // FP8 E5M2 codes, one fp16 scale per chunk (per head)
  kInt8,      // symmetric int8, one fp16 scale per token
  kUniform,   // asymmetric min-max, bits in {1,2,4,8}, fp16 scale and minimum per group
  kNormal,    // normalized (Gaussian), bits in {1,2,4} (4: scalar only, for studies), fp16 mean and
              // std per group
  kUniform3,  // uniform 3-bit (quant/uniform3_ref.cc): as kUniform, codes in a 2-bit low plane
              // and a 1-bit high plane
  // llama.cpp / ggml KV cache block types: per token, blocks of 32 values
  // along D (D a multiple of 32), fp16 scale d per block (and fp16 minimum m
  // for the _1 types), ggml's round-to-nearest quantizers (quant/README.md).
  kQ8_0,  // 8-bit signed codes, x^ = q * d
  kQ4_0,  // 4-bit codes, x^ = (q - 8) * d
  kQ4_1,  // 4-bit codes, x^ = q * d + m
  kQ5_0,  // 5-bit codes (high bits in a separate 32-bit mask), x^ = (q - 16) * d
  kQ5_1,  // 5-bit codes (high bits separate), x^ = q * d + m
  // llama.cpp's iq4_nl (quant/iq4_nl.h): per token, blocks of 32 values along
  // D, fp16 scale d per block, 4-bit indices into core/iq4_grid.h's 16
  // values, x^ = d * kIq4Values[q].
  kIq4Nl,
  // Not a kind: the number of kinds (the format table's row count). A new
  // kind goes above this line.
  kCount,
};

enum class Grouping : uint8_t {
  kPerToken,    // a group = `group` consecutive channels of one token (V in KIVI/HqeKV)
  kPerChannel,  // a group = one channel across the chunk's T tokens (K in KIVI/HqeKV); group == T
};

struct Format {
  Kind kind = Kind::kF16;
  int bits = 16;  // 16/32 for raw, 8 for fp8/int8, 1..8 for uniform/normal
  Grouping grouping = Grouping::kPerToken;
  int group = 32;         // channels per group (per-token grouping only)
  bool hadamard = false;  // rotate each token along D by the normalized Walsh-Hadamard
                          // transform before quantizing (D must be a power of two)
};

// Named constructors for the formats the policies use.
Format F16();
Format F32();
Format Fp8E4M3();
Format Fp8E5M2();
Format Int8PerToken();
Format Uniform(int bits, Grouping grouping, int group = 32);
Format Normal(int bits, Grouping grouping, int group = 32);
Format Uniform3(Grouping grouping, int group = 32);  // "u3"
// A llama.cpp block type (kQ8_0 .. kQ5_1) with its code width.
Format GgmlBlock(Kind kind);

// Parses "f16", "f32", "fp8e4m3", "fp8e5m2", "int8", "u4", "u3", "u2", "u1", "u8",
// "n1", "n2", "n4", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl", with
// optional suffixes ":tok" / ":chan" (grouping), ":g=32", ":had" (Hadamard).
// Returns an error naming the bad part.
Result<Format> ParseFormat(const std::string& text);
std::string FormatName(const Format& f);  // inverse of ParseFormat

// True for the kinds with groups of scale/offset metadata (uniform, normal):
// the ones that take ":tok", ":chan" and ":g=N".
bool IsGroupedKind(Kind kind);

// Checks that f can hold a chunk of T tokens × D channels (bit width legal for
// the kind, group divides D, D a power of two when hadamard, T, D > 0).
Status Validate(const Format& f, int T, int D);

// Exact sizes in bytes of the two planes for one T × D chunk.
size_t CodeBytes(const Format& f, int T, int D);
size_t MetaBytes(const Format& f, int T, int D);

// src: [T][D] fp32. Writes CodeBytes(f,T,D) bytes to codes and
// MetaBytes(f,T,D) bytes to meta. Precondition: Validate(f,T,D).ok().
// Finite input never yields NaN on dequantization; constant groups and zeros
// reconstruct exactly (up to fp16 rounding); non-finite input is documented in
// quant/README.md and never crashes.
void QuantizeChunk(const Format& f, const float* src, int T, int D, uint8_t* codes, uint8_t* meta);

// dst: [T][D] fp32, the reconstruction (Hadamard undone).
void DequantizeChunk(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                     float* dst);

// Fused dequantize-and-dot for attention scores, without materializing the
// chunk: scores[t] = sum_d q[d] * x̂[t][d] for t in [0, T). When f.hadamard,
// q must already be rotated (use HadamardRotate), because H is orthonormal
// and symmetric: <q, x> = <Hq, Hx>.
void DotChunk(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
              const float* q, float* scores);

// Fused dequantize-and-accumulate for attention outputs:
// acc[d] += sum_t w[t] * x̂[t][d]. When f.hadamard, acc accumulates in the
// rotated domain; the caller rotates it back once (HadamardRotate again).
void AxpyChunk(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
               const float* w, float* acc);

// In-place normalized Walsh-Hadamard transform of x[0..D) (D a power of two);
// applying it twice is the identity.
void HadamardRotate(float* x, int D);

}  // namespace hqekv::quant
