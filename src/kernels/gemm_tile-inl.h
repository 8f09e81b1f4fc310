// Included by the GEMM micro-kernels inside a per-target namespace
// (hwy::HWY_NAMESPACE, with `hn` naming it): no include guard on purpose,
// each foreach_target pass compiles its own copy. One home for what the
// register-tiled Highway kernels (gemm_panel_hwy.cc: fp32 panels; the bf16
// kernel of gemm_bf16_avx512.cc has an AVX-512 copy of StoreTileRow) do around their k loop: write
// or add the accumulators back, and pick the kernel for a tile's row count. (The output prefetch
// before the k loop stays in each kernel: as an inlined helper it kept GCC
// 12 from moving the accumulators' stack copies out of the k loop.)

// yi[j] (+)= row j of a tile row, j < cols <= 2N (N = Lanes(d)): lo holds
// columns 0 .. N, hi N .. 2N. `add` adds to yi (every k block after the
// first); a partial row (the last panel of a matrix) goes through a stack
// copy. Vectors by value: with the accumulator arrays passed by pointer,
// GCC 12 kept them in memory through the whole k loop (2.5x slower).
template <class D>
HWY_INLINE void StoreTileRow(D d, hn::Vec<D> lo, hn::Vec<D> hi, float* HWY_RESTRICT yi,
                             int64_t cols, bool add) {
  const int64_t N = hn::Lanes(d);
  if (cols == 2 * N) {
    if (add) {
      lo = hn::Add(lo, hn::LoadU(d, yi));
      hi = hn::Add(hi, hn::LoadU(d, yi + N));
    }
    hn::StoreU(lo, d, yi);
    hn::StoreU(hi, d, yi + N);
    return;
  }
  HWY_ALIGN float tile[2 * hn::MaxLanes(d)];
  hn::Store(lo, d, tile);
  hn::Store(hi, d, tile + N);
  for (int64_t j = 0; j < cols; ++j) yi[j] = add ? yi[j] + tile[j] : tile[j];
}

// kernel.template operator()<R>() for R = rows, 1 <= rows <= kMaxRows <= 8:
// the row count of a tile as a template argument (the accumulators are
// arrays the compiler keeps in registers only at a constant size).
template <int kMaxRows, class Kernel>
HWY_INLINE void WithTileRows(int rows, const Kernel& kernel) {
  static_assert(kMaxRows >= 1 && kMaxRows <= 8);
  switch (rows) {
    case 8:
      if constexpr (kMaxRows >= 8) return kernel.template operator()<8>();
      break;
    case 7:
      if constexpr (kMaxRows >= 7) return kernel.template operator()<7>();
      break;
    case 6:
      if constexpr (kMaxRows >= 6) return kernel.template operator()<6>();
      break;
    case 5:
      if constexpr (kMaxRows >= 5) return kernel.template operator()<5>();
      break;
    case 4:
      if constexpr (kMaxRows >= 4) return kernel.template operator()<4>();
      break;
    case 3:
      if constexpr (kMaxRows >= 3) return kernel.template operator()<3>();
      break;
    case 2:
      if constexpr (kMaxRows >= 2) return kernel.template operator()<2>();
      break;
    case 1:
      return kernel.template operator()<1>();
  }
  HWY_ASSERT(false);
}
