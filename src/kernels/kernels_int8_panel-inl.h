// Int8 GEMM over 16-row interleaved weight panels on AVX-512 VNNI (layout and
// blocking: the top of kernels_int8_hwy.cc).
// No include guard: kernels_int8_hwy.cc includes this once per Highway target,
// inside hqekv::kernels::HWY_NAMESPACE, under #if HQEKV_VNNI; it uses that
// file's macros (HQEKV_INT8_512, HQEKV_VNNI) and helpers defined before it.

// ---- GEMM panels (AVX-512 VNNI) ----
constexpr int kPanelRows = 16;      // weight rows per panel = int32 lanes
constexpr int kPanelActs = 8;       // activation rows per register tile
constexpr int64_t kPanelKc = 1024;  // k chunk

struct PanelBuf {
  std::vector<uint8_t> U, u;  // interleaved panel; one decoded row
  std::vector<float> Af, Bf, A, B;
};

// Decodes values [c0, c0 + kc) of weight rows r..r+rows (rows <= 16; the rest
// zero) into pb: U[t][r][4] = codes 4t..4t+3 of row r, Af/Bf[g][r].
void BuildPanel(TensorType t, const uint8_t* w, int64_t row_bytes, int64_t r, int rows, int64_t c0,
                int64_t kc, PanelBuf* pb) {
  const int G = Int8Group(t);
  const int64_t ng = kc / G;
  const uint8_t* base = w + r * row_bytes + c0 / BlockSize(t) * BlockBytes(t);
  for (int rr = 0; rr < kPanelRows; ++rr) {
    if (rr < rows) {
      DecodeRowInt8(t, base + rr * row_bytes, kc, pb->u.data(), pb->A.data(), pb->B.data());
    } else {
      std::fill_n(pb->u.data(), kc, uint8_t{0});
      std::fill_n(pb->A.data(), ng, 0.0f);
      std::fill_n(pb->B.data(), ng, 0.0f);
    }
    uint8_t* dst = pb->U.data() + 4 * rr;
    for (int64_t q4 = 0; q4 < kc / 4; ++q4) std::memcpy(dst + 64 * q4, pb->u.data() + 4 * q4, 4);
    for (int64_t g = 0; g < ng; ++g) {
      pb->Af[g * kPanelRows + rr] = pb->A[g];
      pb->Bf[g * kPanelRows + rr] = pb->B[g];
    }
  }
}

HWY_INLINE int32_t I32At(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// y[i * ldy + r] (+)= panel row r . activation row i over one k chunk, for
// i < MR, r < 16 (mask). q / d / sg: the activation chunk's codes, block
// scales and per-G sums, rows ldq / ldd / lds apart.
template <int MR, int G>
void PanelTile(const PanelBuf& pb, int64_t kc, const int8_t* q, int64_t ldq, const float* d,
               int64_t ldd, const float* sg, int64_t lds, float* y, int64_t ldy, __mmask16 mask,
               bool add) {
  __m512 facc[MR];
  for (int i = 0; i < MR; ++i) facc[i] = _mm512_setzero_ps();
  const uint8_t* U = pb.U.data();
  for (int64_t g = 0; g < kc / G; ++g) {
    __m512i iacc[MR];
    for (int i = 0; i < MR; ++i) iacc[i] = _mm512_setzero_si512();
    for (int t = 0; t < G / 4; ++t) {
      const __m512i wv = _mm512_loadu_si512(U + 64 * (g * (G / 4) + t));
      for (int i = 0; i < MR; ++i) {
        iacc[i] =
            _mm512_dpbusd_epi32(iacc[i], wv, _mm512_set1_epi32(I32At(q + i * ldq + g * G + 4 * t)));
      }
    }
    const __m512 av = _mm512_loadu_ps(pb.Af.data() + g * kPanelRows);
    const __m512 bv = _mm512_loadu_ps(pb.Bf.data() + g * kPanelRows);
    for (int i = 0; i < MR; ++i) {
      const __m512 sv = _mm512_mul_ps(av, _mm512_set1_ps(d[i * ldd + g * G / 32]));
      facc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(iacc[i]), sv, facc[i]);
      facc[i] = _mm512_fmadd_ps(bv, _mm512_set1_ps(sg[i * lds + g]), facc[i]);
    }
  }
  for (int i = 0; i < MR; ++i) {
    float* yi = y + i * ldy;
    const __m512 v = add ? _mm512_add_ps(_mm512_maskz_loadu_ps(mask, yi), facc[i]) : facc[i];
    _mm512_mask_storeu_ps(yi, mask, v);
  }
}

template <int G>
void PanelTileAny(int mr, const PanelBuf& pb, int64_t kc, const int8_t* q, int64_t ldq,
                  const float* d, int64_t ldd, const float* sg, int64_t lds, float* y, int64_t ldy,
                  __mmask16 mask, bool add) {
  switch (mr) {
#define HQEKV_TILE(n) \
  case n:             \
    return PanelTile<n, G>(pb, kc, q, ldq, d, ldd, sg, lds, y, ldy, mask, add);
    HQEKV_TILE(8)
    HQEKV_TILE(7)
    HQEKV_TILE(6)
    HQEKV_TILE(5)
    HQEKV_TILE(4)
    HQEKV_TILE(3)
    HQEKV_TILE(2)
    default:
      return PanelTile<1, G>(pb, kc, q, ldq, d, ldd, sg, lds, y, ldy, mask, add);
#undef HQEKV_TILE
  }
}

// The panel GEMM: y[(i - i0) * ldy + r] for r in [r0, r1), i in [i0, i1).
void PanelRange(TensorType t, const uint8_t* w, int64_t row_bytes, const Int8Acts& a, int64_t i0,
                int64_t i1, int64_t r0, int64_t r1, float* y, int64_t ldy) {
  const int G = Int8Group(t);
  const int64_t k = a.k;
  const float* sg = G == 32 ? a.s.data() : a.s16.data();
  const int64_t lds = k / G, ldd = k / 32;
  thread_local PanelBuf pb;
  const int64_t kc_max = std::min(kPanelKc, k);
  pb.U.resize(static_cast<size_t>(kPanelRows * kc_max));
  pb.u.resize(static_cast<size_t>(kc_max));
  pb.Af.resize(static_cast<size_t>(kPanelRows * kc_max / 16));
  pb.Bf.resize(pb.Af.size());
  pb.A.resize(static_cast<size_t>(kc_max / 16));
  pb.B.resize(pb.A.size());
  // Activation rows per block: the block's k chunk (<= 512 KiB) stays in L2
  // while every panel of this thread passes over it.
  const int64_t mb = std::max<int64_t>(kPanelActs, (512 << 10) / kc_max);
  for (int64_t ib = i0; ib < i1; ib += mb) {
    const int64_t ie = std::min(i1, ib + mb);
    for (int64_t c0 = 0; c0 < k; c0 += kPanelKc) {
      const int64_t kc = std::min(kPanelKc, k - c0);
      for (int64_t p = r0; p < r1; p += kPanelRows) {
        const int rows = static_cast<int>(std::min<int64_t>(kPanelRows, r1 - p));
        BuildPanel(t, w, row_bytes, p, rows, c0, kc, &pb);
        const auto mask = static_cast<__mmask16>((1u << rows) - 1);
        for (int64_t i = ib; i < ie; i += kPanelActs) {
          const int mr = static_cast<int>(std::min<int64_t>(kPanelActs, ie - i));
          const int8_t* q = a.q.data() + i * k + c0;
          const float* d = a.d.data() + i * ldd + c0 / 32;
          const float* s = sg + i * lds + c0 / G;
          float* yt = y + (i - i0) * ldy + p;
          if (G == 32) {
            PanelTileAny<32>(mr, pb, kc, q, k, d, ldd, s, lds, yt, ldy, mask, c0 > 0);
          } else {
            PanelTileAny<16>(mr, pb, kc, q, k, d, ldd, s, lds, yt, ldy, mask, c0 > 0);
          }
        }
      }
    }
  }
}
