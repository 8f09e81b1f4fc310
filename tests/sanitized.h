// Sizes for the sanitized tree (ASan + UBSan at -O1, scripts/test.sh): a few
// tests walk long contexts, which runs 10-20x slower there. They keep every
// step and assertion at a smaller size in that tree; the Release tree runs
// the full size. HQEKV_SANITIZED comes from CMake (HQEKV_SANITIZE=ON).
#pragma once

namespace hqekv::test {

#ifdef HQEKV_SANITIZED
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

// `full` in the Release tree, `sanitized` in the sanitized one.
template <class T>
constexpr T FullOrSanitized(T full, T sanitized) {
  return kSanitized ? sanitized : full;
}

}  // namespace hqekv::test
