// Highway helpers shared by the quant kernels (quant/simd.cc: single query;
// attn/multi_query.cc: multi query): vector tags, per-thread scratch, code
// fetching and unpacking, fp16 metadata planes, the affine map of a group and
// the fast-path shape checks. Included once per SIMD target by a .cc that uses
// hwy/foreach_target.h, after <hwy/highway.h> (the gemma.cpp "-inl.h" style:
// the toggle guard below admits one inclusion per target).
//
// Everything here has internal linkage (unnamed namespace): each including
// translation unit compiles its own copy under its own floating-point
// contraction setting (simd.cc forbids fusing a*b+c, see no_contract.h;
// multi_query.cc allows it), so no copy is merged across the two by the linker.
//
// Vectors on the code-fetch paths are capped at 8 float lanes (DF): 8 codes of
// <= 4 bits fill at most one 32-bit word.

#if defined(HQEKV_QUANT_SIMD_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef HQEKV_QUANT_SIMD_INL_H_
#undef HQEKV_QUANT_SIMD_INL_H_
#else
#define HQEKV_QUANT_SIMD_INL_H_
#endif

#include <cstring>
#include <vector>

#include <hwy/highway.h>

#include "quant/internal.h"

// fp16 <-> fp32 conversion in hardware (F16C: rounds like core/half.h).
// Highway 1.0.3 emulates DemoteTo(f16) by truncation elsewhere: those targets
// use the scalar conversion.
#ifdef HQEKV_HW_F16
#undef HQEKV_HW_F16
#endif
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
#define HQEKV_HW_F16 1
#else
#define HQEKV_HW_F16 0
#endif

HWY_BEFORE_NAMESPACE();
namespace hqekv::quant {
namespace HWY_NAMESPACE {
namespace {  // internal linkage: see the file comment
namespace hn = hwy::HWY_NAMESPACE;

// Layout constants the fetch paths rely on.
inline constexpr int kMaxFetchLanes = 8;  // DF's cap
inline constexpr int kMaxFetchBits = 4;   // widest packed code read N at a time
static_assert(kMaxFetchLanes * kMaxFetchBits <= 32, "N codes of a vector must fit one 32-bit word");
inline constexpr int kChannelChunkT = 32;  // per-channel fast path: T == 32 tokens per chunk,
static_assert(kChannelChunkT * kMaxFetchBits % 32 == 0,  // so a channel is whole 32-bit words
              "a per-channel chunk's codes must be whole 32-bit words per channel");

using DF = hn::CappedTag<float, kMaxFetchLanes>;  // code fetch / dot paths
using DI = hn::RebindToSigned<DF>;
using DU = hn::RebindToUnsigned<DF>;
using VF = hn::Vec<DF>;
using VI = hn::Vec<DI>;
using VU = hn::Vec<DU>;

// Inside a kernel templated on its float tag: DF, DI, DU (tags) and VF, VI,
// VU (vectors) for that tag, shadowing the capped defaults above.
#define HQEKV_QUANT_TAGS(D)                             \
  using DF [[maybe_unused]] = D;                        \
  using DI [[maybe_unused]] = hn::RebindToSigned<DF>;   \
  using DU [[maybe_unused]] = hn::RebindToUnsigned<DF>; \
  using VF [[maybe_unused]] = hn::Vec<DF>;              \
  using VI [[maybe_unused]] = hn::Vec<DI>;              \
  using VU [[maybe_unused]] = hn::Vec<DU>

// Reusable per-thread scratch, so a chunk call allocates nothing after warm-up.
inline constexpr int kScratchSlots = 6;
inline float* Scratch(int slot, size_t n) {
  thread_local std::vector<float> bufs[kScratchSlots];
  if (bufs[slot].size() < n) bufs[slot].resize(n);
  return bufs[slot].data();
}

// Input sanitizing of quant/internal.h (NaN -> 0, clamp to +-65504), per lane.
template <class D>
HWY_INLINE hn::Vec<D> SanitizeV(D df, hn::Vec<D> v) {
  v = hn::IfThenZeroElse(hn::IsNaN(v), v);
  return hn::Min(hn::Max(v, hn::Set(df, -kF16Max)), hn::Set(df, kF16Max));
}

HWY_INLINE float Sum(DF df, VF v) { return hn::GetLane(hn::SumOfLanes(df, v)); }

HWY_INLINE uint32_t Load32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Lane i holds i * bits: the shift that moves code i of a packed word to bit 0.
template <class DUT>
HWY_INLINE hn::Vec<DUT> LaneShifts(DUT du, int bits) {
  return hn::Mul(hn::Iota(du, 0), hn::Set(du, static_cast<uint32_t>(bits)));
}

// Reads n <= 32 bits at bit position pos of a stream of nbytes bytes, never
// reading past its end.
HWY_INLINE uint32_t GetBits(const uint8_t* p, size_t nbytes, size_t pos, int n) {
  const size_t byte = pos >> 3;
  uint64_t v = 0;
  if (byte + 8 <= nbytes) {
    std::memcpy(&v, p + byte, 8);  // fixed size: inlined to one load
  } else {
    std::memcpy(&v, p + byte, nbytes - byte);
  }
  v >>= (pos & 7);
  return static_cast<uint32_t>(v & ((uint64_t{1} << n) - 1));
}

// N codes of `bits` bits (in the low bits of `word`) -> one u32 lane each.
HWY_INLINE VI SplitCodes(DU du, uint32_t word, VU shifts, VU mask) {
  return hn::BitCast(DI(), hn::And(hn::Set(du, word) >> shifts, mask));
}

// The N codes starting at code index pos of a stream of nbytes bytes. When
// they start on a byte boundary and 4 bytes are readable, one 32-bit load
// (folded into the broadcast); bits beyond N*b are masked off per lane.
HWY_INLINE VI FetchCodes(DU du, const uint8_t* codes, size_t nbytes, size_t pos, int bits, int N,
                         VU shifts, VU mask) {
  const size_t bit = pos * static_cast<size_t>(bits);
  if ((bit & 7) == 0 && (bit >> 3) + 4 <= nbytes) {
    return SplitCodes(du, Load32(codes + (bit >> 3)), shifts, mask);
  }
  return SplitCodes(du, GetBits(codes, nbytes, bit, N * bits), shifts, mask);
}

// Per-channel layout: channel d's codes are `nw` = bits 32-bit words at byte
// 4·bits·d, so a vector of word w over N channels is a strided (interleaved)
// load.
template <class DUT, class VUT = hn::Vec<DUT>>
HWY_INLINE void LoadWords(DUT du, const uint8_t* in, int nw, VUT* words) {
  const uint32_t* p = reinterpret_cast<const uint32_t*>(in);
  if (nw == 1) {
    words[0] = hn::LoadU(du, p);
  } else if (nw == 2) {
    hn::LoadInterleaved2(du, p, words[0], words[1]);
  } else {
    hn::LoadInterleaved4(du, p, words[0], words[1], words[2], words[3]);
  }
}

// N int8 codes -> floats.
template <class D>
HWY_INLINE hn::Vec<D> LoadInt8(D df, const uint8_t* p) {
  const hn::RebindToSigned<D> di;
  const hn::Rebind<int8_t, decltype(di)> d8;
  return hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(d8, reinterpret_cast<const int8_t*>(p))));
}

#if HQEKV_HW_F16
// N fp16 values (little-endian) -> floats.
template <class D>
HWY_INLINE hn::Vec<D> LoadF16V(D df, const uint8_t* p) {
  const hn::Rebind<hwy::float16_t, D> dh;
  return hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(p)));
}
#endif

// n fp16 values at p (little-endian) -> floats. Not inlined: once per chunk,
// and inlining it into the per-token decoders measurably slowed them.
[[maybe_unused]] HWY_NOINLINE void LoadPlane(const uint8_t* p, int n, float* out) {
  int i = 0;
#if HQEKV_HW_F16
  const DF df;
  const int N = static_cast<int>(hn::Lanes(df));
  for (; i + N <= n; i += N) hn::StoreU(LoadF16V(df, p + 2 * i), df, out + i);
#endif
  for (; i < n; ++i) out[i] = F16ToF32(LoadF16(p + 2 * i));
}

// How AffineFromPlanes rounds the normal-1 offset mu − c·sigma: the
// single-query kernels round the product and the difference separately; the
// multi-query kernels (multi_query.cc, and the int16 kernels of
// multi_query_q16.cc) use one fused multiply-add where the target has FMA.
// Both are kept so every kernel's results stay bit-identical to what they were.
enum class Offset { kRoundTwice, kFusedOnFmaTargets };

// Normal-1 folded into the affine map of the code, one vector of groups:
// b = mu - c·sigma (rounded as kOffset says), a = 2c·sigma (the Highway home
// of this fold, used by AffineFromPlanes below; attn/multi_query_q16.cc, raw
// AVX-512 compiled once, spells the fused form in its AffineAt).
template <Offset kOffset, class D>
HWY_INLINE void FoldNormal1(D d, hn::Vec<D>& a, hn::Vec<D>& b) {
  const float c = kNormalCentres1[1];
  if constexpr (kOffset == Offset::kFusedOnFmaTargets) {
    b = hn::NegMulAdd(hn::Set(d, c), a, b);
  } else {
    b = hn::Sub(b, hn::Mul(hn::Set(d, c), a));
  }
  a = hn::Mul(hn::Set(d, 2.0f * c), a);
}

// Per-group affine dequantization x^ = level(code) * a + b from the two fp16
// metadata planes (plane 0 = multiplier, plane 1 = offset; quant/README.md),
// where level is the code itself for uniform and normal-1 (mu +- c*sigma =
// (mu - c*sigma) + code * 2c*sigma) and the centre table for normal-2 (see
// Levels). The one home of this map for every kernel.
template <Offset kOffset>
inline void AffineFromPlanes(const Format& f, const uint8_t* meta, int groups, float* a, float* b) {
  LoadPlane(meta, groups, a);
  LoadPlane(meta + 2 * static_cast<size_t>(groups), groups, b);
  if (f.kind == Kind::kNormal && f.bits == 1) {
    // Vectors, then the tail one lane at a time (the same operations, so
    // bit-identical lane by lane).
    auto fold = [](auto d, float* pa, float* pb) {
      auto va = hn::LoadU(d, pa), vb = hn::LoadU(d, pb);
      FoldNormal1<kOffset>(d, va, vb);
      hn::StoreU(va, d, pa);
      hn::StoreU(vb, d, pb);
    };
    const DF df;
    const int N = static_cast<int>(hn::Lanes(df));
    int g = 0;
    for (; g + N <= groups; g += N) fold(df, a + g, b + g);
    for (; g < groups; ++g) fold(hn::CappedTag<float, 1>(), a + g, b + g);
  }
}

// Level of a code: the code itself, or the normal-2 reconstruction point
// (a 4-entry table lookup inside the vector).
template <class D>
struct Levels {
  bool table = false;
  hn::Vec<D> centres;
  HWY_INLINE explicit Levels(const Format& f) {
    table = f.kind == Kind::kNormal && f.bits == 2;
    static_assert(HWY_MAX_BYTES / sizeof(float) <= 64, "ctab must cover every lane");
    float ctab[64] = {0};
    if (table) std::memcpy(ctab, kNormalCentres2, sizeof kNormalCentres2);
    centres = hn::LoadU(D(), ctab);
  }
  HWY_INLINE hn::Vec<D> operator()(hn::Vec<hn::RebindToSigned<D>> code) const {
    const D d;
    if (table) return hn::TableLookupLanes(centres, hn::IndicesFromVec(d, code));
    return hn::ConvertTo(d, code);
  }
};

// Uniform and normal 1/2-bit have kernels; normal-4 (16 centres) does not:
// it is a study format, not a store tier.
inline bool IsGrouped(const Format& f) {
  return f.kind == Kind::kUniform || (f.kind == Kind::kNormal && f.bits <= 2);
}

// Fast-path shape checks (grouping only; the caller checks IsGrouped).
// Per-token: groups of whole N-lane vectors. Per-channel: T == 32 and b <= 4,
// so channel d's codes are exactly b 32-bit words.
inline bool PerTokenFast(const Format& f, int D, int N) {
  return f.grouping == Grouping::kPerToken && f.group % N == 0 && D % f.group == 0;
}
inline bool PerChannelFast(const Format& f, int T, int D, int N) {
  return f.grouping == Grouping::kPerChannel && T == kChannelChunkT && f.bits <= kMaxFetchBits &&
         D % N == 0;
}

// llama.cpp block codes (level + zero; signed for q8_0) of the Lanes(di)
// consecutive values j0.. of a block (layout: quant/internal.h); qh: the q5
// high-bit mask. Shared by ggml_block_simd.cc and the multi-query kernels.
template <int kBits, class DIT>
HWY_INLINE hn::Vec<DIT> BlockCodes(DIT di, const uint8_t* blk, uint32_t qh, int j0) {
  const hn::RebindToUnsigned<DIT> du;
  if constexpr (kBits == 8) {
    const hn::Rebind<int8_t, DIT> d8;
    return hn::PromoteTo(di, hn::LoadU(d8, reinterpret_cast<const int8_t*>(blk + j0)));
  } else {
    const hn::Rebind<uint8_t, decltype(du)> du8;
    const auto b = hn::PromoteTo(du, hn::LoadU(du8, blk + (j0 & 15)));
    auto c = j0 < 16 ? hn::And(b, hn::Set(du, 0xFu)) : hn::ShiftRight<4>(b);
    if constexpr (kBits == 5) {
      const auto shift = hn::Add(hn::Iota(du, 0), hn::Set(du, static_cast<uint32_t>(j0)));
      const auto high = hn::And(hn::Shr(hn::Set(du, qh), shift), hn::Set(du, 1u));
      c = hn::Or(c, hn::ShiftLeft<4>(high));
    }
    return hn::BitCast(di, c);
  }
}

}  // namespace
}  // namespace HWY_NAMESPACE
}  // namespace hqekv::quant
HWY_AFTER_NAMESPACE();

#endif  // HQEKV_QUANT_SIMD_INL_H_ toggle
