// The format table: one row per quant::Kind with everything the rest of
// quant/ needs to know about a kind — its spec name and legal bit widths, its
// plane sizes, and its scalar reference (the oracle) and fast (Highway)
// functions. Parsing, naming, validation, sizes and the chunk entry points
// (format.cc, dispatch.cc, ref.cc) look a kind up here
// instead of switching on it, so a new format is one row plus its own
// reference and kernel files (checklist: quant/README.md, "Adding a format").
//
// Dispatch granularity: one table lookup and one indirect call per chunk
// (T × D values); the per-element loops live inside the row's functions.
// Not part of the public API (quant/format.h); tests may use it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "quant/format.h"

namespace hqekv::quant {

// Scalar reference, storage domain (Hadamard rotation handled by the caller).
// Precondition: Validate(f, T, D).ok(); src already sanitized as the kind
// requires (FormatTraits::sanitize).
using QuantizeFn = void (*)(const Format& f, const float* src, int T, int D, uint8_t* codes,
                            uint8_t* meta);
using DequantizeFn = void (*)(const Format& f, const uint8_t* codes, const uint8_t* meta, int T,
                              int D, float* dst);

// Fast (Highway, runtime-dispatched) kernels: each returns false, doing
// nothing, when it has no fast path for this format and shape; the caller
// then runs the reference. Same contracts as quant/internal.h's simd::.
// (Multi-query attention kernels choose by kind in attn/multi_query.cc.)
using FastQuantizeFn = bool (*)(const Format& f, const float* src, int T, int D, uint8_t* codes,
                                uint8_t* meta);
using FastDequantizeFn = bool (*)(const Format& f, const uint8_t* codes, const uint8_t* meta, int T,
                                  int D, float* dst);
using FastDotFn = bool (*)(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                           const float* q, float* scores);
using FastAxpyFn = bool (*)(const Format& f, const uint8_t* codes, const uint8_t* meta, int T,
                            int D, const float* w, float* acc);

// Plane sizes in bytes of one T × D chunk (T, D > 0).
using PlaneBytesFn = size_t (*)(const Format& f, int T, int D);

struct FormatTraits {
  Kind kind;
  // Spec name ("f16", "int8"); for kinds with a bit width in the name, its
  // prefix ("u" -> "u4").
  const char* name;
  bool bits_in_name;
  const char* description;  // for messages: "uniform quantization"
  int default_bits;         // Format::bits of a spec without a width in its name
  uint64_t legal_bits;      // bit b set: b bits are legal
  // Grouped kinds (uniform / normal) take ":tok", ":chan" and ":g=N".
  bool grouped;
  // Input is sanitized (NaN -> 0, clamp to +-65504) before rotation; false
  // only for f32, which stores its input bit-exactly.
  bool sanitize;
  PlaneBytesFn code_bytes;
  PlaneBytesFn meta_bytes;
  // Scalar reference (oracle). Dot / Axpy have one reference for every kind
  // (dequantize, then a float loop: ref::DotChunk / ref::AxpyChunk).
  QuantizeFn ref_quantize;
  DequantizeFn ref_dequantize;
  // Fast kernels; nullptr: none for this kind (the reference always runs).
  FastQuantizeFn fast_quantize;
  FastDequantizeFn fast_dequantize;
  FastDotFn fast_dot;
  FastAxpyFn fast_axpy;
  // Values per block along D of one token (llama.cpp block types: 32; D must
  // be a multiple); 0: no such constraint.
  int d_block;
};

// The row of a kind (O(1): the table is indexed by the enum value).
const FormatTraits& Traits(Kind kind);

// Every row, in Kind order (for parsing and listing the formats).
const FormatTraits* AllTraits(size_t* count);

}  // namespace hqekv::quant
