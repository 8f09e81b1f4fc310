// Pooling of per-token hidden states (LlamaModel's embeddings output) into
// one vector: the one home for the C API's hqekv_get_embeddings_seq and the
// server's /v1/embeddings.
#pragma once

#include <cmath>
#include <cstddef>
#include <vector>

namespace hqekv {

// out[d] = the mean of base[rows[i] * d .. + d) over i < n_rows (double
// accumulation), L2-normalised when `normalize` (a zero vector stays zero).
// Pass one row to take that token's state as it is.
inline void PoolEmbedding(const float* base, size_t d, const size_t* rows, size_t n_rows,
                          bool normalize, float* out) {
  std::vector<double> acc(d, 0.0);
  for (size_t i = 0; i < n_rows; ++i)
    for (size_t c = 0; c < d; ++c) acc[c] += base[rows[i] * d + c];
  double norm2 = 0.0;
  for (double& a : acc) {
    a /= static_cast<double>(n_rows);
    norm2 += a * a;
  }
  const double scale = !normalize ? 1.0 : norm2 > 0.0 ? 1.0 / std::sqrt(norm2) : 0.0;
  for (size_t c = 0; c < d; ++c) out[c] = static_cast<float>(acc[c] * scale);
}

}  // namespace hqekv
