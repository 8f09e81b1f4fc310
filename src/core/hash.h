// The one non-cryptographic hash of the project: FNV-1a 64-bit. Stable across
// platforms and releases, because stored artifacts depend on its values:
// eval cell cache keys (eval/harness CellHash), model identities in
// calibration profiles (model/model_source), weight-file fingerprints
// (eval/engine_model) and calibration text hashes (calib/profile). Changing
// the algorithm or its constants invalidates all of them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace hqekv {

inline constexpr uint64_t kFnv1a64Offset = 0xCBF29CE484222325ull;  // offset basis
inline constexpr uint64_t kFnv1a64Prime = 0x100000001B3ull;

// FNV-1a 64 of data[0..n), continuing from `h` (the offset basis for a fresh
// hash; pass a previous result to hash a concatenation piecewise; the model
// layout identity of io/model_source.cc starts from its own value).
inline uint64_t Fnv1a64(const void* data, size_t n, uint64_t h = kFnv1a64Offset) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= kFnv1a64Prime;
  }
  return h;
}

inline uint64_t Fnv1a64(std::string_view s, uint64_t h = kFnv1a64Offset) {
  return Fnv1a64(s.data(), s.size(), h);
}

}  // namespace hqekv
