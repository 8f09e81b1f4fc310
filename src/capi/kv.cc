// C API: a KV store without a model (append K/V rows, attend, stats).
#include <string>
#include <utility>

#include "capi/handles.h"
#include "core/finite.h"
#include "io/model_file.h"
#include "policy/factory.h"

using hqekv::capi::Fail;
using hqekv::capi::Guard;

namespace {

hqekv_status CheckLayerBatch(const char* fn, const hqekv_kv* kv, int layer, const int32_t* pos,
                             int n) {
  if (!kv) return Fail(HQEKV_ERR_INVALID_ARGUMENT, std::string(fn) + ": kv is NULL");
  const hqekv::KvGeometry& g = kv->cache->geometry();
  if (layer < 0 || layer >= g.n_layers) {
    return Fail(HQEKV_ERR_INVALID_ARGUMENT, std::string(fn) + ": layer " + std::to_string(layer) +
                                                " is outside [0, " + std::to_string(g.n_layers) +
                                                ")");
  }
  if (n <= 0)
    return Fail(HQEKV_ERR_INVALID_ARGUMENT,
                std::string(fn) + ": n must be > 0, got " + std::to_string(n));
  if (!pos) return Fail(HQEKV_ERR_INVALID_ARGUMENT, std::string(fn) + ": positions are NULL");
  for (int i = 0; i < n; ++i) {
    if (pos[i] < 0 || pos[i] >= g.max_ctx) {
      return Fail(HQEKV_ERR_INVALID_ARGUMENT,
                  std::string(fn) + ": position " + std::to_string(pos[i]) + " at index " +
                      std::to_string(i) + " is outside [0, " + std::to_string(g.max_ctx) + ")");
    }
  }
  return HQEKV_OK;
}

}  // namespace

extern "C" {

hqekv_status hqekv_kv_create(const char* spec, const hqekv_kv_geometry* geometry, hqekv_kv** out) {
  return Guard("hqekv_kv_create", [&] {
    if (!out) return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_kv_create: out is NULL");
    *out = nullptr;
    if (!geometry) return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_kv_create: geometry is NULL");
    const hqekv_kv_geometry& cg = *geometry;
    if (cg.n_layers <= 0 || cg.n_q_heads <= 0 || cg.n_kv_heads <= 0 || cg.head_dim <= 0 ||
        cg.max_ctx <= 0 || cg.n_q_heads % cg.n_kv_heads != 0) {
      return Fail(HQEKV_ERR_INVALID_ARGUMENT,
                  "hqekv_kv_create: geometry needs every field > 0 and n_q_heads a multiple of "
                  "n_kv_heads, got "
                  "n_layers=" +
                      std::to_string(cg.n_layers) + " n_q_heads=" + std::to_string(cg.n_q_heads) +
                      " n_kv_heads=" + std::to_string(cg.n_kv_heads) + " head_dim=" +
                      std::to_string(cg.head_dim) + " max_ctx=" + std::to_string(cg.max_ctx));
    }
    // The bound a model file's dimensions get: a store is never bigger than
    // a model could ask for (2^30 layers would allocate for minutes).
    for (const auto& [v, name] :
         {std::pair{cg.n_layers, "n_layers"}, std::pair{cg.n_q_heads, "n_q_heads"},
          std::pair{cg.n_kv_heads, "n_kv_heads"}, std::pair{cg.head_dim, "head_dim"},
          std::pair{cg.max_ctx, "max_ctx"}}) {
      if (v > hqekv::kMaxConfigDim) {
        return Fail(HQEKV_ERR_INVALID_ARGUMENT, std::string("hqekv_kv_create: ") + name + " " +
                                                    std::to_string(v) + " is more than " +
                                                    std::to_string(hqekv::kMaxConfigDim));
      }
    }
    hqekv::KvGeometry g;
    g.n_layers = cg.n_layers;
    g.n_q_heads = cg.n_q_heads;
    g.n_kv_heads = cg.n_kv_heads;
    g.head_dim = cg.head_dim;
    g.max_ctx = cg.max_ctx;
    auto cache = hqekv::MakeKvCache(spec ? spec : "fp16", g);
    if (!cache.ok()) return Fail(HQEKV_ERR_SPEC, "hqekv_kv_create: spec: " + cache.message());
    auto kv = std::make_unique<hqekv_kv>();
    kv->cache = std::move(*cache);
    kv->describe = kv->cache->Describe();
    kv->last_pos.assign(g.n_layers, -1);
    kv->pending.assign(g.n_layers, 0);
    *out = kv.release();
    return HQEKV_OK;
  });
}

void hqekv_kv_free(hqekv_kv* kv) { delete kv; }

const char* hqekv_kv_describe(const hqekv_kv* kv) { return kv ? kv->describe.c_str() : ""; }

hqekv_status hqekv_kv_append(hqekv_kv* kv, int layer, const float* k, const float* v,
                             const int32_t* pos, int n) {
  return Guard("hqekv_kv_append", [&] {
    const char* fn = "hqekv_kv_append";
    hqekv_status s = CheckLayerBatch(fn, kv, layer, pos, n);
    if (s != HQEKV_OK) return s;
    if (!k || !v) return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_kv_append: k or v is NULL");
    // A NaN or infinity stored in a cache poisons every later attention over it.
    const hqekv::KvGeometry& g = kv->cache->geometry();
    const size_t count = size_t(n) * size_t(g.n_kv_heads) * size_t(g.head_dim);
    for (const auto& [x, name] : {std::pair{k, "k"}, std::pair{v, "v"}}) {
      if (const size_t at = hqekv::FirstNonFinite(x, count); at < count) {
        return Fail(HQEKV_ERR_INVALID_ARGUMENT, std::string("hqekv_kv_append: ") + name +
                                                    " has a NaN or infinity at element " +
                                                    std::to_string(at));
      }
    }
    int32_t last = kv->last_pos[layer];
    for (int i = 0; i < n; ++i) {
      if (pos[i] <= last) {
        return Fail(HQEKV_ERR_INVALID_ARGUMENT,
                    "hqekv_kv_append: position " + std::to_string(pos[i]) + " at index " +
                        std::to_string(i) + " is not greater than the previous one (" +
                        std::to_string(last) + ")");
      }
      last = pos[i];
    }
    hqekv::Status st = kv->cache->Append(layer, k, v, pos, n);
    if (!st.ok()) return Fail(HQEKV_ERR_COMPUTE, "hqekv_kv_append: " + st.message());
    kv->last_pos[layer] = last;
    kv->pending[layer] += n;
    return HQEKV_OK;
  });
}

hqekv_status hqekv_kv_attend(hqekv_kv* kv, int layer, const float* q, const int32_t* q_pos, int n,
                             float* out) {
  return Guard("hqekv_kv_attend", [&] {
    hqekv_status s = CheckLayerBatch("hqekv_kv_attend", kv, layer, q_pos, n);
    if (s != HQEKV_OK) return s;
    if (!q || !out) return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_kv_attend: q or out is NULL");
    hqekv::Status st = kv->cache->Attend(layer, q, q_pos, n, out);
    if (!st.ok()) return Fail(HQEKV_ERR_COMPUTE, "hqekv_kv_attend: " + st.message());
    return HQEKV_OK;
  });
}

hqekv_status hqekv_kv_end_batch(hqekv_kv* kv, int n, int is_prefill) {
  return Guard("hqekv_kv_end_batch", [&] {
    if (!kv) return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_kv_end_batch: kv is NULL");
    if (n <= 0)
      return Fail(HQEKV_ERR_INVALID_ARGUMENT,
                  "hqekv_kv_end_batch: n must be > 0, got " + std::to_string(n));
    // Policies compress over whole batches: every layer must have the batch.
    for (size_t l = 0; l < kv->pending.size(); ++l) {
      if (kv->pending[l] != n) {
        return Fail(HQEKV_ERR_STATE, "hqekv_kv_end_batch: layer " + std::to_string(l) + " has " +
                                         std::to_string(kv->pending[l]) +
                                         " tokens appended since the last "
                                         "end_batch, not n = " +
                                         std::to_string(n));
      }
    }
    hqekv::Status st = kv->cache->EndBatch(n, is_prefill != 0);
    if (!st.ok()) return Fail(HQEKV_ERR_COMPUTE, "hqekv_kv_end_batch: " + st.message());
    kv->pending.assign(kv->pending.size(), 0);
    return HQEKV_OK;
  });
}

hqekv_status hqekv_kv_stats_get(const hqekv_kv* kv, hqekv_kv_stats* out) {
  return Guard("hqekv_kv_stats_get", [&] {
    if (!kv) return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_kv_stats_get: kv is NULL");
    if (!out) return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_kv_stats_get: out is NULL");
    hqekv::capi::FillStats(kv->cache->Stats(), out);
    return HQEKV_OK;
  });
}

hqekv_status hqekv_kv_report_json(const hqekv_kv* kv, char* buf, size_t cap, size_t* len) {
  return Guard("hqekv_kv_report_json", [&] {
    if (!kv) return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_kv_report_json: kv is NULL");
    return hqekv::capi::CopyOut("hqekv_kv_report_json",
                                hqekv::capi::StatsJson(kv->cache->Stats(), kv->describe), buf, cap,
                                len);
  });
}

hqekv_status hqekv_kv_reset(hqekv_kv* kv) {
  return Guard("hqekv_kv_reset", [&] {
    if (!kv) return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_kv_reset: kv is NULL");
    kv->cache->Reset();
    kv->last_pos.assign(kv->last_pos.size(), -1);
    kv->pending.assign(kv->pending.size(), 0);
    return HQEKV_OK;
  });
}

}  // extern "C"
