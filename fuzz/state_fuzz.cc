// libFuzzer target for KV state files (cache/kv_state.h: `hqekv serve` slot
// restores, `run --prompt-cache`, hqekv_context_load_state). The input is a
// file without its trailing checksum: the target appends the right FNV-1a 64,
// so the fuzzer gets past the checksum into the header, the token list, the
// logits and the cache state. When the header parses, a cache of its spec and
// (small) geometry is made and the state loaded into it, with the header's
// own identity expected. Any input must load or give an error; a loaded
// cache must hold what its token list says and stay usable (one more append
// and attend).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cache/kv_state.h"
#include "core/hash.h"
#include "policy/factory.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1u << 20)) return 0;
  std::string file(reinterpret_cast<const char*>(data), size);
  const uint64_t sum = hqekv::Fnv1a64(file.data(), file.size());
  for (int i = 0; i < 8; ++i) file.push_back(static_cast<char>((sum >> (8 * i)) & 0xff));
  auto header = hqekv::ReadKvStateHeader(file);
  if (!header.ok()) return 0;
  const hqekv::KvGeometry& g = header->geometry;
  // Geometries a test model has; bigger ones only cost allocation time.
  if (g.n_layers < 1 || g.n_layers > 8 || g.n_kv_heads < 1 || g.n_kv_heads > 4 || g.n_q_heads < 1 ||
      g.n_q_heads > 8 || g.head_dim < 2 || g.head_dim > 64 || g.max_ctx < 1 || g.max_ctx > 512 ||
      g.n_q_heads % g.n_kv_heads != 0)
    return 0;
  auto cache = hqekv::MakeKvCache(header->spec, g);
  if (!cache.ok()) return 0;
  hqekv::KvStateMeta expect;
  expect.model_identity = header->model_identity;
  expect.geometry = (*cache)->geometry();
  auto loaded = hqekv::LoadKvState(file, expect, **cache);
  if (!loaded.ok()) return 0;
  // Loaded: consistent with itself, and the cache keeps working.
  for (int32_t t : loaded->tokens)
    if (t < 0 || static_cast<size_t>(t) >= loaded->logits.size()) std::abort();
  const int32_t pos = static_cast<int32_t>(loaded->tokens.size());
  if (pos >= g.max_ctx) return 0;
  std::vector<float> kv(size_t(g.n_kv_heads) * g.head_dim, 0.5f),
      q(size_t(g.n_q_heads) * g.head_dim, 0.25f), out(q.size());
  for (int l = 0; l < g.n_layers; ++l) {
    if (!(*cache)->Append(l, kv.data(), kv.data(), &pos, 1).ok()) return 0;
    if (!(*cache)->Attend(l, q.data(), &pos, 1, out.data()).ok()) return 0;
  }
  (void)(*cache)->EndBatch(1, false);
  return 0;
}
