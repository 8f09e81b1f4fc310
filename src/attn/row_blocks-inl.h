// Query-row blocks of the multi-query kernels: a kernel keeps one set of
// accumulators per query row in registers, so its row count MB must be a
// compile-time constant. These turn a run-time row count into the
// instantiations MB = 1, 2, 3 and kMax (kMax >= 4: a block of more than
// three rows always takes kMax). One home for that switch; included inside
// each kernel file's per-target namespace (the toggle guard below, as
// quant/simd-inl.h), so the helpers carry the including target's attributes
// (and any `#pragma GCC target` in force there) and inline into it.

#if defined(HQEKV_QUANT_ROW_BLOCKS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef HQEKV_QUANT_ROW_BLOCKS_INL_H_
#undef HQEKV_QUANT_ROW_BLOCKS_INL_H_
#else
#define HQEKV_QUANT_ROW_BLOCKS_INL_H_
#endif

#include <algorithm>
#include <type_traits>

#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace hqekv::attn {
namespace HWY_NAMESPACE {
namespace {  // internal linkage: each kernel file compiles its own copy

// fn(std::integral_constant<int, MB>()) for MB = min(rows, kMax) (rows >= 1);
// returns what fn returns.
template <int kMax, class Fn>
HWY_INLINE decltype(auto) WithRowBlock(int rows, const Fn& fn) {
  static_assert(kMax >= 4, "blocks of 1, 2 and 3 rows have their own instances");
  switch (std::min(kMax, rows)) {
    case 1:
      return fn(std::integral_constant<int, 1>());
    case 2:
      return fn(std::integral_constant<int, 2>());
    case 3:
      return fn(std::integral_constant<int, 3>());
    default:
      return fn(std::integral_constant<int, kMax>());
  }
}

// fn(std::integral_constant<int, MB>(), h0) for the blocks of up to kMax rows
// of m, h0 = 0, kMax, 2·kMax, ... The switch is spelled out rather than
// routed through WithRowBlock: the extra lambda level changed GCC 12's
// inlining of the multi_query.cc kernels (objdump), this form keeps it.
template <int kMax, class Fn>
HWY_INLINE void ForRowBlocks(int m, const Fn& fn) {
  static_assert(kMax >= 4, "blocks of 1, 2 and 3 rows have their own instances");
  for (int h0 = 0; h0 < m; h0 += kMax) {
    switch (std::min(kMax, m - h0)) {
      case 1:
        fn(std::integral_constant<int, 1>(), h0);
        break;
      case 2:
        fn(std::integral_constant<int, 2>(), h0);
        break;
      case 3:
        fn(std::integral_constant<int, 3>(), h0);
        break;
      default:
        fn(std::integral_constant<int, kMax>(), h0);
        break;
    }
  }
}

}  // namespace
}  // namespace HWY_NAMESPACE
}  // namespace hqekv::attn
HWY_AFTER_NAMESPACE();

#endif  // HQEKV_QUANT_ROW_BLOCKS_INL_H_
