#include "policy/factory.h"

#include <algorithm>

#include "cache/layer_split_cache.h"
#include "cache/window_cache.h"
#include "core/file.h"
#include "policy/profile.h"
#include "policy/store_cache.h"

namespace hqekv {
namespace policy {

namespace {

// p's cache for g; with a soft-cap, only a cache that applies it (a
// store-backed one) is accepted.
Result<std::unique_ptr<KvCache>> CreateCappedAware(const PolicyInfo& p, const PolicySpec& spec,
                                                   const KvGeometry& g, const CacheContext& ctx) {
  HQEKV_ASSIGN_OR_RETURN(auto made, p.create(spec, g, ctx));
  if (g.attn_softcap > 0 && !dynamic_cast<const StoreBackedCache*>(made.get()))
    return MakeError("KV policy '" + spec.name +
                     "': this model soft-caps its attention scores (Gemma 2), which this cache "
                     "does not apply");
  return made;
}

// A spec with layer ranges: each range's policy gets the global layers of
// its range (window layers stay rings); every global layer must be in one.
Result<std::unique_ptr<KvCache>> CreateRangedCache(const PolicySpec& spec, const KvGeometry& g,
                                                   const CacheContext& ctx) {
  const int n = g.n_layers;
  for (const LayerRangeSpec& r : spec.ranges) {
    if (r.first >= n || r.last >= n)
      return MakeError("--kv layer range '" + r.text + "': the model has " + std::to_string(n) +
                       " layers (0-" + std::to_string(n - 1) + ")");
    if (r.spec.Has("profile"))
      return MakeError("--kv layer range '" + r.text +
                       "': profile= is made for every layer of a model, not for a range");
  }
  if (g.attn_softcap > 0) {
    // The plain caches do not apply the cap (see CreateCache): with them,
    // every layer is a ring of one precision.
    const std::string& first = spec.ranges.front().spec.name;
    const bool plain = first == "fp16" || first == "fp32";
    for (const LayerRangeSpec& r : spec.ranges) {
      const bool bad =
          plain ? r.spec.name != first : (r.spec.name == "fp16" || r.spec.name == "fp32");
      if (bad)
        return MakeError("--kv layer range '" + r.text +
                         "': this model soft-caps its attention scores (Gemma 2); an fp16 or fp32 "
                         "range must cover every layer (write 0-:fp16, or a compressing policy "
                         "per range)");
    }
    if (plain) return CreateCache(spec.ranges.front().spec, g, ctx);
  }
  std::vector<int> global;  // model index of each global layer
  for (int l = 0; l < n; ++l) {
    if (g.layer_window.empty() || g.layer_window[l] <= 0) global.push_back(l);
  }
  std::vector<LayerSplitKvCache::Part> parts;
  std::vector<bool> covered(global.size(), false);
  for (const LayerRangeSpec& r : spec.ranges) {
    const int last = r.last < 0 ? n - 1 : r.last;
    LayerSplitKvCache::Part part;
    for (size_t j = 0; j < global.size(); ++j) {
      if (global[j] >= r.first && global[j] <= last) {
        part.layers.push_back(static_cast<int>(j));  // index among the global layers
        covered[j] = true;
      }
    }
    if (part.layers.empty()) continue;  // only window layers in this range
    const PolicyInfo* p = FindPolicy(r.spec.name);
    if (!p || !p->create)
      return MakeError("--kv layer range '" + r.text + "': unknown KV policy '" + r.spec.name +
                       "'");
    KvGeometry sub = g;
    sub.layer_window.clear();
    sub.n_layers = static_cast<int>(part.layers.size());
    auto made = CreateCappedAware(*p, r.spec, sub, ctx);
    if (!made.ok()) return MakeError("--kv layer range '" + r.text + "': " + made.message());
    part.cache = std::move(*made);
    parts.push_back(std::move(part));
  }
  for (size_t j = 0; j < global.size(); ++j) {
    if (!covered[j])
      return MakeError("--kv layer ranges: layer " + std::to_string(global[j]) +
                       " is in no range (give every layer a spec, e.g. end with N-:SPEC)");
  }
  const KvGeometry global_g = WindowedKvCache::GlobalGeometry(g);
  std::unique_ptr<KvCache> split;
  if (!parts.empty()) {
    HQEKV_ASSIGN_OR_RETURN(split, LayerSplitKvCache::Create(global_g, std::move(parts)));
  }
  if (global.size() == static_cast<size_t>(n)) return split;
  HQEKV_ASSIGN_OR_RETURN(auto windowed, WindowedKvCache::Create(g, std::move(split)));
  return std::unique_ptr<KvCache>(std::move(windowed));
}

}  // namespace

Result<std::unique_ptr<KvCache>> CreateCache(const PolicySpec& spec, const KvGeometry& g,
                                             const CacheContext& ctx) {
  if (!spec.ranges.empty()) return CreateRangedCache(spec, g, ctx);
  const PolicyInfo* p = FindPolicy(spec.name);
  if (!p) return MakeError("unknown KV policy '" + spec.name + "'");
  if (!p->create)
    return MakeError("KV policy '" + spec.name + "' is listed but has no implementation");
  // Soft-capped attention (Gemma 2): the rings and the store-backed policies
  // apply the cap (cache/store_attention.h); the plain fp16 / fp32 caches do
  // not, so with those every layer is a ring, global ones as long as the context.
  if (g.attn_softcap > 0 && (spec.name == "fp16" || spec.name == "fp32")) {
    KvGeometry rings = g;
    rings.layer_window.resize(g.n_layers, 0);
    for (int& w : rings.layer_window) w = w > 0 ? w : g.max_ctx;
    HQEKV_ASSIGN_OR_RETURN(auto all, WindowedKvCache::Create(rings, nullptr, spec.name == "fp32"));
    return std::unique_ptr<KvCache>(std::move(all));
  }
  // Sliding-window layers keep their own fp16 rings; the policy gets the
  // global layers only (cache/window_cache.h).
  if (std::any_of(g.layer_window.begin(), g.layer_window.end(), [](int w) { return w > 0; })) {
    const KvGeometry global = WindowedKvCache::GlobalGeometry(g);
    std::unique_ptr<KvCache> inner;
    // Every layer a window (a Mistral-style file): a compressing policy
    // would have nothing to act on, so say so instead of running fp16 rings.
    if (global.n_layers == 0 && spec.name != "fp16" && spec.name != "fp32")
      return MakeError("KV policy '" + spec.name +
                       "': every layer of this model is a sliding-window layer, held as an fp16 "
                       "ring of its window; there is no global layer for the policy (use fp16)");
    if (global.n_layers > 0) {
      HQEKV_ASSIGN_OR_RETURN(inner, CreateCappedAware(*p, spec, global, ctx));
    }
    HQEKV_ASSIGN_OR_RETURN(auto windowed,
                           WindowedKvCache::Create(g, std::move(inner), spec.name == "fp32"));
    return std::unique_ptr<KvCache>(std::move(windowed));
  }
  return CreateCappedAware(*p, spec, g, ctx);
}

Status CheckSpecForModel(const PolicySpec& spec, const CacheContext& ctx) {
  if (!spec.Has("profile")) return Status::Ok();
  const int n_layers = ctx.model ? ctx.model->n_layers : 0;
  HQEKV_RETURN_IF_ERROR(LoadSpecProfile(spec, ctx, n_layers));
  return Status::Ok();
}

CacheContext ForModel(std::string name, std::string identity, int n_layers) {
  CacheContext ctx;
  ctx.model = ModelIdentity{std::move(name), std::move(identity), n_layers};
#ifdef HQEKV_SOURCE_DIR
  ctx.profiles_dir = FindBundled("profiles", HQEKV_SOURCE_DIR);
#else
  ctx.profiles_dir = FindBundled("profiles", "");
#endif
  return ctx;
}

}  // namespace policy

Result<std::unique_ptr<KvCache>> MakeKvCache(const std::string& text, const KvGeometry& g) {
  HQEKV_ASSIGN_OR_RETURN(const policy::PolicySpec spec, policy::ParseSpec(text));
  return policy::CreateCache(spec, g, policy::CacheContext{});
}

}  // namespace hqekv
