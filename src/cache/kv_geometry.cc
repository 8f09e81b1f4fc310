#include "cache/kv_cache.h"

#include <string>

namespace hqekv {

Status CheckGeometry(const KvGeometry& g) {
  if (g.n_layers <= 0 || g.n_q_heads <= 0 || g.n_kv_heads <= 0 || g.head_dim <= 0 ||
      g.max_ctx <= 0) {
    return MakeError("KV cache geometry: every size must be positive (layers " +
                     std::to_string(g.n_layers) + ", q heads " + std::to_string(g.n_q_heads) +
                     ", kv heads " + std::to_string(g.n_kv_heads) + ", head_dim " +
                     std::to_string(g.head_dim) + ", max_ctx " + std::to_string(g.max_ctx) + ")");
  }
  if (g.n_q_heads % g.n_kv_heads != 0) {
    return MakeError("KV cache geometry: n_q_heads " + std::to_string(g.n_q_heads) +
                     " is not a multiple of n_kv_heads " + std::to_string(g.n_kv_heads));
  }
  return Status::Ok();
}

}  // namespace hqekv
