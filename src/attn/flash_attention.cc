// Highway kernel of attn/flash_attention.h, compiled once per SIMD target
// (foreach_target.h) and chosen at run time (one table per target).
//
// Layout of one block of RB = kRv × N query rows (N float lanes), lanes over
// rows, all in per-thread aligned scratch:
//   Qt[D][RB]   the block's queries, transposed once;
//   St[TT][RB]  one tile's scores, then its softmax numerators P;
//   Ot[D][RB]   the running (unnormalised) outputs, transposed;
//   m[RB], l[RB] the running max and sum of exp(score - m) per row.
// Per tile of TT tokens (K, V rows [TT][D] in fp32; fp16 tiles are widened
// into Kb / Vb first):
//   S[t][r] = sum_d K[t][d] Qt[d][r]          (K[t][d] broadcast, kTb × kRv FMAs
//                                              per d from kRv loads)
//   m' = max(m, max_t S), a = exp(m - m'), P = exp(S - m'), l = a l + sum_t P
//   Ot[d][r] = a[r] Ot[d][r] + sum_t V[t][d] P[t][r]   (V broadcast, kDd × kRv)
// Causal mask: token j0 + t is visible to row r iff j0 + t < visible[r]
// (an integer compare per lane; tiles every row sees skip nothing, tiles past
// the block's last visible token are never read).
// Column sums (ColumnSums): St is then the tile's slice of P[tiles][TT][RB],
// m after each tile goes to mt[tiles][RB], and AddColumnSums rescales and
// lane-sums them once the block is done.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "attn/flash_attention.h"

// The kernels of one Highway target: one export and one dispatch for the file.
#ifndef HQEKV_ATTN_FLASH_TABLE_DEFINED_
#define HQEKV_ATTN_FLASH_TABLE_DEFINED_
namespace hqekv::attn {
struct FlashTable {
  int (*rows_block)();
  void (*attend_rows)(const KvTiles& kv, const float* q, size_t q_stride, int R,
                      const int64_t* visible, float* out, size_t out_stride,
                      const ColumnSums& cols);
};
}  // namespace hqekv::attn
#endif

#include "quant/simd_targets.h"
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "attn/flash_attention.cc"
#include <hwy/foreach_target.h>  // NOLINT: re-includes this file once per target
#include <hwy/aligned_allocator.h>
#include <hwy/highway.h>
#include <hwy/contrib/math/math-inl.h>

#include "core/half.h"
#include "attn/flash_attention.h"

HWY_BEFORE_NAMESPACE();
namespace hqekv::attn {
namespace HWY_NAMESPACE {
namespace {

namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;
using DI = hn::RebindToSigned<DF>;
using VF = hn::Vec<DF>;

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
// 32 vector registers: 16 accumulators + 4 row vectors + broadcasts.
constexpr int kRv = 4;  // row vectors per block
constexpr int kTb = 4;  // tokens per score register block
constexpr int kDd = 4;  // channels per output register block
#else
// 16 vector registers: 8 accumulators.
constexpr int kRv = 2;
constexpr int kTb = 4;
constexpr int kDd = 4;
#endif

// Grows-only aligned per-thread buffer.
class Scratch {
 public:
  float* Get(size_t n) {
    if (n > cap_) {
      buf_ = hwy::AllocateAligned<float>(n);
      cap_ = n;
    }
    return buf_.get();
  }

 private:
  hwy::AlignedFreeUniquePtr<float[]> buf_;
  size_t cap_ = 0;
};

// Rows [0, T) of a tile as fp32: fp32 tiles in place, fp16 widened into buf.
const float* TileF32(const KvTiles& kv, const void* tile, int T, float* HWY_RESTRICT buf) {
  if (kv.type == KvRowType::kF32) return static_cast<const float*>(tile);
  const f16_t* src = static_cast<const f16_t*>(tile);
  const size_t n = static_cast<size_t>(T) * kv.D;
  size_t i = 0;
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
  // F16C: exact, like core/half.h's F16ToF32.
  const DF df;
  const hn::Rebind<hwy::float16_t, DF> dh;
  const size_t N = hn::Lanes(df);
  for (; i + N <= n; i += N) {
    hn::Store(hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(src + i))),
              df, buf + i);
  }
#endif
  for (; i < n; ++i) buf[i] = F16ToF32(src[i]);
  return buf;
}

// S[t][0..RB) = sum_d K[t][d] Qt[d][0..RB) for t in [0, TB).
template <int TB>
HWY_INLINE void Scores(const float* HWY_RESTRICT K, int D, const float* HWY_RESTRICT Qt, size_t RB,
                       float* HWY_RESTRICT S) {
  const DF df;
  const size_t N = hn::Lanes(df);
  VF acc[TB][kRv];
  for (int t = 0; t < TB; ++t) {
    for (int v = 0; v < kRv; ++v) acc[t][v] = hn::Zero(df);
  }
  for (int d = 0; d < D; ++d) {
    const float* qd = Qt + d * RB;
    VF qv[kRv];
    for (int v = 0; v < kRv; ++v) qv[v] = hn::Load(df, qd + v * N);
    for (int t = 0; t < TB; ++t) {
      const VF k = hn::Set(df, K[t * D + d]);
      for (int v = 0; v < kRv; ++v) acc[t][v] = hn::MulAdd(k, qv[v], acc[t][v]);
    }
  }
  for (int t = 0; t < TB; ++t) {
    for (int v = 0; v < kRv; ++v) hn::Store(acc[t][v], df, S + t * RB + v * N);
  }
}

// Ot[d0 + i][0..RB) = a · Ot[d0 + i] + sum_t V[t][d0 + i] P[t][0..RB), i < DD.
template <int DD>
HWY_INLINE void Outputs(const float* HWY_RESTRICT V, int D, int d0, int T,
                        const float* HWY_RESTRICT P, const float* HWY_RESTRICT a, size_t RB,
                        float* HWY_RESTRICT Ot) {
  const DF df;
  const size_t N = hn::Lanes(df);
  VF acc[DD][kRv];
  for (int v = 0; v < kRv; ++v) {
    const VF av = hn::Load(df, a + v * N);
    for (int i = 0; i < DD; ++i) acc[i][v] = hn::Mul(hn::Load(df, Ot + (d0 + i) * RB + v * N), av);
  }
  for (int t = 0; t < T; ++t) {
    VF p[kRv];
    for (int v = 0; v < kRv; ++v) p[v] = hn::Load(df, P + t * RB + v * N);
    const float* vt = V + static_cast<size_t>(t) * D + d0;
    for (int i = 0; i < DD; ++i) {
      const VF x = hn::Set(df, vt[i]);
      for (int v = 0; v < kRv; ++v) acc[i][v] = hn::MulAdd(x, p[v], acc[i][v]);
    }
  }
  for (int i = 0; i < DD; ++i) {
    for (int v = 0; v < kRv; ++v) hn::Store(acc[i][v], df, Ot + (d0 + i) * RB + v * N);
  }
}

// Online softmax over one tile's scores St[0..T) (row vectors): masks
// tokens past each row's visible count (when `masked`), turns St into
// P = exp(S - m'), updates m and l, and leaves the rescale factor in a.
void Softmax(float* HWY_RESTRICT St, int T, int64_t j0, bool masked, const int32_t* cnt, size_t RB,
             float* HWY_RESTRICT m, float* HWY_RESTRICT l, float* HWY_RESTRICT a) {
  const DF df;
  const DI di;
  const size_t N = hn::Lanes(df);
  const VF ninf = hn::Set(df, -std::numeric_limits<float>::infinity());
  // exp(-100) ~ 4e-44: as good as 0 next to exp(0) = 1, and keeps the
  // polynomial in range; masked entries are set to exactly 0.
  const VF lo = hn::Set(df, -100.0f), fmin = hn::Set(df, -std::numeric_limits<float>::max());
  for (size_t off = 0; off < RB; off += N) {
    VF mx = hn::Load(df, m + off);
    if (masked) {
      const auto c = hn::LoadU(di, cnt + off);
      for (int t = 0; t < T; ++t) {
        float* s = St + t * RB + off;
        const auto vis = hn::RebindMask(df, hn::Lt(hn::Set(di, static_cast<int32_t>(j0 + t)), c));
        const VF sv = hn::IfThenElse(vis, hn::Load(df, s), ninf);
        hn::Store(sv, df, s);
        mx = hn::Max(mx, sv);
      }
    } else {
      for (int t = 0; t < T; ++t) mx = hn::Max(mx, hn::Load(df, St + t * RB + off));
    }
    // Rows with nothing visible yet keep m = -inf; their exponent base is
    // the finite -FLT_MAX so no inf - inf appears.
    const VF base = hn::Max(mx, fmin);
    const VF alpha = hn::Exp(df, hn::Max(hn::Sub(hn::Load(df, m + off), base), lo));
    VF sum = hn::Zero(df);
    for (int t = 0; t < T; ++t) {
      float* s = St + t * RB + off;
      const VF sv = hn::Load(df, s);
      const VF p =
          hn::IfThenZeroElse(hn::Eq(sv, ninf), hn::Exp(df, hn::Max(hn::Sub(sv, base), lo)));
      hn::Store(p, df, s);
      sum = hn::Add(sum, p);
    }
    hn::Store(mx, df, m + off);
    hn::Store(hn::MulAdd(hn::Load(df, l + off), alpha, sum), df, l + off);
    hn::Store(alpha, df, a + off);
  }
}

// Column sums of one block (flash_attention.h): P holds every tile's
// numerators [tiles][TT][RB], mt[tiles][RB] the running max each tile's P was
// taken against, m / l the block's final max and sum; sel[r] = 1 for the
// summed rows, 0 for the others (and the padding). Adds
// sums[t] += sum_r P[t][r] exp(mt[r] - m[r]) / l[r] for t < tokens.
void AddColumnSums(const float* HWY_RESTRICT P, const float* HWY_RESTRICT mt, int64_t tokens,
                   int TT, const float* HWY_RESTRICT m, const float* HWY_RESTRICT l,
                   const float* HWY_RESTRICT sel, size_t RB, float* HWY_RESTRICT sums) {
  const DF df;
  const size_t N = hn::Lanes(df);
  const VF fmin = hn::Set(df, -std::numeric_limits<float>::max()), lo = hn::Set(df, -100.0f);
  const VF zero = hn::Zero(df);
  // 1 / l for the summed rows with something visible, else 0; the final max
  // as a finite exponent base (-inf rows have l = 0 and P = 0).
  VF inv[kRv], mf[kRv];
  for (int v = 0; v < kRv; ++v) {
    const VF lv = hn::Load(df, l + v * N);
    const auto pos = hn::Gt(lv, zero);
    inv[v] = hn::IfThenElseZero(
        pos, hn::Div(hn::Load(df, sel + v * N), hn::IfThenElse(pos, lv, hn::Set(df, 1.0f))));
    mf[v] = hn::Max(hn::Load(df, m + v * N), fmin);
  }
  for (int64_t j0 = 0, tile = 0; j0 < tokens; j0 += TT, ++tile) {
    const int T = static_cast<int>(std::min<int64_t>(TT, tokens - j0));
    VF f[kRv];
    for (int v = 0; v < kRv; ++v) {
      const VF mv = hn::Max(hn::Load(df, mt + tile * RB + v * N), fmin);
      f[v] = hn::Mul(hn::Exp(df, hn::Max(hn::Sub(mv, mf[v]), lo)), inv[v]);
    }
    const float* Pt = P + tile * TT * RB;
    for (int t = 0; t < T; ++t) {
      VF acc = hn::Mul(hn::Load(df, Pt + t * RB), f[0]);
      for (int v = 1; v < kRv; ++v) acc = hn::MulAdd(hn::Load(df, Pt + t * RB + v * N), f[v], acc);
      sums[j0 + t] += hn::GetLane(hn::SumOfLanes(df, acc));
    }
  }
}

}  // namespace

int AttendRowsBlockImpl() { return kRv * static_cast<int>(hn::Lanes(DF())); }

void AttendRowsImpl(const KvTiles& kv, const float* q, size_t q_stride, int R,
                    const int64_t* visible, float* out, size_t out_stride, const ColumnSums& cols) {
  const DF df;
  const size_t N = hn::Lanes(df), RB = kRv * N;
  const int D = kv.D, TT = kv.tile_tokens;
  thread_local Scratch s_qt, s_ot, s_st, s_kb, s_vb, s_state, s_pall, s_mt;
  thread_local std::vector<int32_t> cnt;
  float* Qt = s_qt.Get(static_cast<size_t>(D) * RB);
  float* Ot = s_ot.Get(static_cast<size_t>(D) * RB);
  float* St = s_st.Get(static_cast<size_t>(TT) * RB);
  float* Kb = s_kb.Get(static_cast<size_t>(TT) * D);
  float* Vb = s_vb.Get(static_cast<size_t>(TT) * D);
  float* m = s_state.Get(3 * RB);
  float* l = m + RB;
  float* a = l + RB;
  cnt.resize(RB);
  for (int r0 = 0; r0 < R; r0 += static_cast<int>(RB)) {
    const int rows = std::min<int>(static_cast<int>(RB), R - r0);
    int64_t min_vis = visible[r0], max_vis = 0;
    for (size_t r = 0; r < RB; ++r) {
      const bool real = static_cast<int>(r) < rows;
      const int64_t c = real ? visible[r0 + r] : 0;
      cnt[r] = static_cast<int32_t>(c);
      if (real) min_vis = std::min(min_vis, c);
      max_vis = std::max(max_vis, c);
      if (!real) {  // padding rows: zero queries, never written out
        for (int d = 0; d < D; ++d) Qt[d * RB + r] = 0.0f;
        continue;
      }
      const float* qr = q + (r0 + r) * q_stride;
      for (int d = 0; d < D; ++d) Qt[d * RB + r] = qr[d];
    }
    std::fill(Ot, Ot + static_cast<size_t>(D) * RB, 0.0f);
    std::fill(m, m + RB, -std::numeric_limits<float>::infinity());
    std::fill(l, l + RB, 0.0f);
    // Column sums: every tile's P and running max are kept for the block.
    const bool summed = cols.sums != nullptr && r0 + rows > cols.first_row;
    float *Pall = nullptr, *mt = nullptr;
    if (summed) {
      const size_t tiles = static_cast<size_t>((max_vis + TT - 1) / TT);
      Pall = s_pall.Get(std::max<size_t>(tiles, 1) * TT * RB);
      mt = s_mt.Get(std::max<size_t>(tiles, 1) * RB + RB);
    }
    for (int64_t j0 = 0; j0 < max_vis; j0 += TT) {
      const int T = static_cast<int>(std::min<int64_t>(TT, max_vis - j0));
      const size_t tile = static_cast<size_t>(j0 / TT);
      float* S = summed ? Pall + tile * TT * RB : St;
      const float* K = TileF32(kv, kv.k[tile], T, Kb);
      int t = 0;
      for (; t + kTb <= T; t += kTb) Scores<kTb>(K + t * D, D, Qt, RB, S + t * RB);
      for (; t < T; ++t) Scores<1>(K + t * D, D, Qt, RB, S + t * RB);
      Softmax(S, T, j0, j0 + T > min_vis, cnt.data(), RB, m, l, a);
      if (summed) std::copy(m, m + RB, mt + tile * RB);
      const float* V = TileF32(kv, kv.v[tile], T, Vb);
      int d = 0;
      for (; d + kDd <= D; d += kDd) Outputs<kDd>(V, D, d, T, S, a, RB, Ot);
      for (; d < D; ++d) Outputs<1>(V, D, d, T, S, a, RB, Ot);
    }
    if (summed) {
      float* sel = mt + ((max_vis + TT - 1) / TT) * RB;  // the extra RB floats
      for (size_t r = 0; r < RB; ++r) {
        const int64_t row = r0 + static_cast<int64_t>(r);
        sel[r] = (static_cast<int>(r) < rows && row >= cols.first_row) ? 1.0f : 0.0f;
      }
      AddColumnSums(Pall, mt, max_vis, TT, m, l, sel, RB, cols.sums);
    }
    for (int r = 0; r < rows; ++r) {
      const float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
      float* o = out + (r0 + r) * out_stride;
      for (int d = 0; d < D; ++d) o[d] = Ot[d * RB + r] * inv;
    }
  }
}

// This target's kernels, one table (exported below).
const FlashTable* FlashTableForTarget() {
  static constexpr FlashTable kTable{.rows_block = &AttendRowsBlockImpl,
                                     .attend_rows = &AttendRowsImpl};
  return &kTable;
}

}  // namespace HWY_NAMESPACE
}  // namespace hqekv::attn
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hqekv::attn {

HWY_EXPORT(FlashTableForTarget);

namespace {
// Looked up per call, not kept in a static: see QuantSimd() in quant/simd.cc.
const FlashTable& Flash() { return *HWY_DYNAMIC_DISPATCH(FlashTableForTarget)(); }
}  // namespace

int AttendRowsBlock() { return Flash().rows_block(); }

void AttendRows(const KvTiles& kv, const float* q, size_t q_stride, int R, const int64_t* visible,
                float* out, size_t out_stride, const ColumnSums& cols) {
  Flash().attend_rows(kv, q, q_stride, R, visible, out, out_stride, cols);
}

}  // namespace hqekv::attn
#endif  // HWY_ONCE
