// The single-ISA attention kernels (attn/multi_query_q16.cc,
// attn/multi_query_rows_q16.cc, attn/multi_query_rows_bf16.cc) are raw
// AVX-512 code compiled once, not per Highway target: their functions carry
// the instruction sets below (HQEKV_SINGLE_ISA_BEGIN ... _END around the
// kernel code), and the public entry points call them only when
// Avx3DlRuns() says they may run; elsewhere they report "no kernel" and
// the caller keeps the portable Highway kernels.
//
// The instruction sets are Highway 1.0's AVX3_DL target string (the target
// these kernels used to be compiled for, so the code generated is the same),
// plus what each file adds (VNNI, BF16). GCC only (x86-64): clang's target
// attributes differ, and there the kernels are not compiled.
#pragma once

#include <hwy/base.h>  // HWY_PUSH_ATTRIBUTES, HWY_INLINE

#if defined(__x86_64__) && HWY_COMPILER_GCC && !HWY_COMPILER_CLANG
#define HQEKV_SINGLE_ISA 1
// GCC's AVX-512 headers leave lanes undefined on purpose (the casts from
// 256-bit vectors) and then warn where those functions are inlined; Highway
// includes them with the same two warnings off (hwy/ops/x86_512-inl.h).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#else
#define HQEKV_SINGLE_ISA 0
#endif

#define HQEKV_AVX3_DL_TARGET_STR                                                              \
  "sse2,ssse3,sse4.1,sse4.2,pclmul,aes,avx,avx2,bmi,bmi2,fma,f16c,avx512f,avx512vl,avx512dq," \
  "avx512bw,vpclmulqdq,avx512vbmi,avx512vbmi2,vaes,avxvnni,avx512bitalg,avx512vpopcntdq"

// Opens / closes a region whose functions use the AVX3_DL instruction sets
// plus `extra` (a string literal starting with a comma). Include every header
// before it: an inline function defined inside would carry these attributes.
#define HQEKV_SINGLE_ISA_BEGIN(extra) HWY_PUSH_ATTRIBUTES(HQEKV_AVX3_DL_TARGET_STR extra)
#define HQEKV_SINGLE_ISA_END HWY_POP_ATTRIBUTES

namespace hqekv::attn {

// True when the kernels of the region may run: Highway's dispatcher has
// chosen its AVX3_DL target (attn/single_isa.cc), i.e. the CPU has AVX3_DL and
// no test forced another target (tests/simd_targets.h) -- the condition these
// kernels ran under when they were compiled per Highway target. One atomic
// load and one indirect call per kernel call; hwy::SupportedTargets() runs
// CPUID every time (DecodeAttention/int8/4096 of bench_attention took 30x as
// long with it).
bool Avx3DlRuns();

}  // namespace hqekv::attn
