#include "cache/window_cache.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/half.h"
#include "core/parallel.h"

namespace hqekv {
namespace {

// Dot product of two fp32 rows with eight partial sums (lets the compiler
// vectorize without reassociation flags).
float WindowDot(const float* a, const float* b, int n) {
  float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) s[j] += a[i + j] * b[i + j];
  }
  float t = 0;
  for (; i < n; ++i) t += a[i] * b[i];
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7])) + t;
}

// n values into `out` as fp16 or fp32 bytes, and back.
void WindowStore(const float* x, size_t n, bool fp32, uint8_t* out) {
  if (fp32) {
    std::memcpy(out, x, n * sizeof(float));
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    const f16_t h = F32ToF16(x[i]);
    std::memcpy(out + 2 * i, &h, 2);
  }
}

void WindowLoad(const uint8_t* in, size_t n, bool fp32, float* x) {
  if (fp32) {
    std::memcpy(x, in, n * sizeof(float));
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    f16_t h;
    std::memcpy(&h, in + 2 * i, 2);
    x[i] = F16ToF32(h);
  }
}

}  // namespace

KvGeometry WindowedKvCache::GlobalGeometry(const KvGeometry& g) {
  KvGeometry inner = g;
  inner.layer_window.clear();
  inner.n_layers = 0;
  for (int l = 0; l < g.n_layers; ++l) {
    if (static_cast<size_t>(l) >= g.layer_window.size() || g.layer_window[l] <= 0) ++inner.n_layers;
  }
  return inner;
}

Result<std::unique_ptr<WindowedKvCache>> WindowedKvCache::Create(const KvGeometry& g,
                                                                 std::unique_ptr<KvCache> inner,
                                                                 bool fp32) {
  HQEKV_RETURN_IF_ERROR(CheckGeometry(g));
  if (g.layer_window.size() != static_cast<size_t>(g.n_layers))
    return MakeError("sliding-window cache: " + std::to_string(g.layer_window.size()) +
                     " layer windows for " + std::to_string(g.n_layers) + " layers");
  const KvGeometry want = GlobalGeometry(g);
  if (g.attn_softcap > 0 && inner && inner->geometry().attn_softcap != g.attn_softcap)
    return MakeError(
        "sliding-window cache: the global layers' cache must apply the same "
        "attention soft-cap as the rings");
  if (want.n_layers == g.n_layers) return MakeError("sliding-window cache: no layer has a window");
  if ((want.n_layers > 0) != (inner != nullptr))
    return MakeError(
        "sliding-window cache: an inner cache is needed exactly when a layer is "
        "global");
  if (inner) {
    const KvGeometry& ig = inner->geometry();
    if (ig.n_layers != want.n_layers || ig.n_q_heads != g.n_q_heads ||
        ig.n_kv_heads != g.n_kv_heads || ig.head_dim != g.head_dim)
      return MakeError("sliding-window cache: the global layers' cache has another geometry");
  }
  std::unique_ptr<WindowedKvCache> c(new WindowedKvCache(g));
  c->inner_ = std::move(inner);
  c->fp32_ = fp32;
  c->row_bytes_ = static_cast<size_t>(g.n_kv_heads) * g.head_dim * (fp32 ? 4 : 2);
  c->rings_.resize(g.n_layers);
  c->inner_layer_.assign(g.n_layers, -1);
  for (int l = 0, gl = 0; l < g.n_layers; ++l) {
    if (g.layer_window[l] > 0) {
      c->rings_[l].window = g.layer_window[l];
    } else {
      c->inner_layer_[l] = gl++;
    }
  }
  return c;
}

std::string WindowedKvCache::Describe() const {
  int w = 0;
  for (int x : g_.layer_window) w = std::max(w, x);
  return (inner_ ? inner_->Describe() + "+" : std::string()) + "window" + std::to_string(w) +
         (fp32_ ? ":fp32" : ":fp16");
}

void WindowedKvCache::Reset() {
  if (inner_) inner_->Reset();
  for (Ring& r : rings_) {
    const int w = r.window;
    r = Ring{};
    r.window = w;
  }
}

Status WindowedKvCache::Append(int layer, const float* k, const float* v, const int32_t* pos,
                               int n) {
  if (layer < 0 || layer >= g_.n_layers || n <= 0)
    return MakeError("sliding-window cache: bad layer or token count in Append");
  if (inner_layer_[layer] >= 0) return inner_->Append(inner_layer_[layer], k, v, pos, n);
  Ring& r = rings_[layer];
  int32_t last = r.spos.empty() ? r.last_pos : r.spos.back();
  for (int i = 0; i < n; ++i) {
    if (pos[i] <= last || pos[i] >= g_.max_ctx)
      return MakeError("sliding-window cache: position " + std::to_string(pos[i]) + " not after " +
                       std::to_string(last) + " or outside the context");
    last = pos[i];
  }
  const size_t row = static_cast<size_t>(g_.n_kv_heads) * g_.head_dim;
  const size_t old = r.sk.size();
  r.sk.resize(old + n * row_bytes_);
  r.sv.resize(old + n * row_bytes_);
  WindowStore(k, n * row, fp32_, r.sk.data() + old);
  WindowStore(v, n * row, fp32_, r.sv.data() + old);
  r.spos.insert(r.spos.end(), pos, pos + n);
  return Status::Ok();
}

Status WindowedKvCache::Attend(int layer, const float* q, const int32_t* q_pos, int n, float* out) {
  if (layer < 0 || layer >= g_.n_layers || n <= 0)
    return MakeError("sliding-window cache: bad layer or token count in Attend");
  if (inner_layer_[layer] >= 0) return inner_->Attend(inner_layer_[layer], q, q_pos, n, out);
  const Ring& r = rings_[layer];
  const int H = g_.n_q_heads, KH = g_.n_kv_heads, D = g_.head_dim, group = H / KH;
  const size_t row = static_cast<size_t>(KH) * D;
  // The keys this batch can see, oldest first: the ring (in token order),
  // then the staged batch, widened to fp32 once for all queries.
  const int64_t held = std::min<int64_t>(r.count, r.window);
  const int64_t T = held + static_cast<int64_t>(r.spos.size());
  std::vector<float> kf(T * row), vf(T * row);
  std::vector<int32_t> tp(T);
  const size_t rb = row_bytes_;
  for (int64_t t = 0; t < T; ++t) {
    const uint8_t *ks, *vs;
    if (t < held) {
      const int64_t slot = (r.count - held + t) % r.window;
      ks = &r.k[slot * rb];
      vs = &r.v[slot * rb];
      tp[t] = r.pos[slot];
    } else {
      ks = &r.sk[(t - held) * rb];
      vs = &r.sv[(t - held) * rb];
      tp[t] = r.spos[t - held];
    }
    WindowLoad(ks, row, fp32_, &kf[t * row]);
    WindowLoad(vs, row, fp32_, &vf[t * row]);
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const int W = r.window;
  const float cap = g_.attn_softcap;
  ParallelFor(int64_t{n} * H, [&](int64_t begin, int64_t end) {
    std::vector<float> s;
    for (int64_t task = begin; task < end; ++task) {
      const int i = static_cast<int>(task / H), h = static_cast<int>(task % H), kh = h / group;
      const float* qh = q + (static_cast<size_t>(i) * H + h) * D;
      float* o = out + (static_cast<size_t>(i) * H + h) * D;
      std::fill(o, o + D, 0.0f);
      // Visible keys: a contiguous run [t0, t1) since positions increase.
      const int32_t p = q_pos[i];
      const int64_t t1 = std::upper_bound(tp.begin(), tp.end(), p) - tp.begin();
      const int64_t t0 = std::upper_bound(tp.begin(), tp.begin() + t1, p - W) - tp.begin();
      if (t1 <= t0) continue;
      s.resize(t1 - t0);
      float mx = -std::numeric_limits<float>::infinity();
      for (int64_t t = t0; t < t1; ++t) {
        float x = WindowDot(qh, &kf[t * row + kh * D], D) * scale;
        if (cap > 0) x = cap * std::tanh(x / cap);  // Gemma 2's attention soft-cap
        s[t - t0] = x;
        mx = std::max(mx, s[t - t0]);
      }
      float sum = 0;
      for (float& e : s) sum += (e = std::exp(e - mx));
      const float inv = 1.0f / sum;
      for (int64_t t = t0; t < t1; ++t) {
        const float w = s[t - t0] * inv;
        const float* vr = &vf[t * row + kh * D];
        for (int j = 0; j < D; ++j) o[j] += w * vr[j];
      }
    }
  });
  return Status::Ok();
}

void WindowedKvCache::Fold(Ring& r) const {
  const size_t row = row_bytes_;
  const int64_t n = static_cast<int64_t>(r.spos.size());
  if (n == 0) return;
  // Only the newest W staged tokens can survive the fold.
  const int64_t skip = std::max<int64_t>(0, n - r.window);
  const int64_t total = r.count + n;  // tokens after the fold
  const int64_t slots = std::min<int64_t>(total, r.window);
  if (static_cast<int64_t>(r.pos.size()) < slots) {
    // Slots grow only before the ring first wraps (count < W), so token t
    // stays at slot t % W. Capacity doubles (amortized O(1) a token) up to
    // W exactly, so a full ring holds W slots and no more.
    const int64_t cap = std::min<int64_t>(
        r.window, std::max<int64_t>(slots, 2 * static_cast<int64_t>(r.pos.capacity())));
    r.k.reserve(cap * row);
    r.v.reserve(cap * row);
    r.pos.reserve(cap);
    r.k.resize(slots * row);
    r.v.resize(slots * row);
    r.pos.resize(slots);
  }
  for (int64_t t = skip; t < n; ++t) {
    const int64_t slot = (r.count + t) % r.window;
    std::copy_n(&r.sk[t * row], row, &r.k[slot * row]);
    std::copy_n(&r.sv[t * row], row, &r.v[slot * row]);
    r.pos[slot] = r.spos[t];
  }
  r.count = total;
  r.last_pos = r.spos.back();
  std::vector<uint8_t>().swap(r.sk);
  std::vector<uint8_t>().swap(r.sv);
  std::vector<int32_t>().swap(r.spos);
}

Status WindowedKvCache::EndBatch(int n, bool is_prefill) {
  for (Ring& r : rings_) Fold(r);
  return inner_ ? inner_->EndBatch(n, is_prefill) : Status::Ok();
}

int64_t WindowedKvCache::WindowTokens(int layer) const {
  const Ring& r = rings_.at(layer);
  return std::min<int64_t>(r.count, r.window);
}

KvLayerStats WindowedKvCache::RingStats(const Ring& r) const {
  KvLayerStats s;
  s.bytes.payload =
      static_cast<int64_t>(r.k.capacity() + r.v.capacity() + r.sk.capacity() + r.sv.capacity());
  s.bytes.bookkeeping =
      static_cast<int64_t>((r.pos.capacity() + r.spos.capacity()) * sizeof(int32_t));
  const int64_t kept =
      (std::min<int64_t>(r.count, r.window) + static_cast<int64_t>(r.spos.size())) * g_.n_kv_heads;
  s.kept_tokens = kept;
  const char* tier = fp32_ ? "fp32" : "fp16";
  s.k_tiers[tier] = kept;
  s.v_tiers[tier] = kept;
  const int64_t gone = (r.count - std::min<int64_t>(r.count, r.window)) * g_.n_kv_heads;
  if (gone > 0) {
    s.k_tiers["evicted"] = gone;
    s.v_tiers["evicted"] = gone;
  }
  return s;
}

KvStats WindowedKvCache::Stats() const {
  KvStats out;
  KvStats in;
  if (inner_) in = inner_->Stats();
  out.layers.resize(g_.n_layers);
  const int64_t per_token = int64_t{2} * g_.n_kv_heads * g_.head_dim;
  for (int l = 0; l < g_.n_layers; ++l) {
    if (inner_layer_[l] >= 0) {
      if (static_cast<size_t>(inner_layer_[l]) < in.layers.size()) {
        out.layers[l] = in.layers[inner_layer_[l]];
      }
    } else {
      const Ring& r = rings_[l];
      out.layers[l] = RingStats(r);
      out.kept_elements += out.layers[l].kept_tokens * g_.head_dim * 2;
      out.original_elements += (r.count + static_cast<int64_t>(r.spos.size())) * per_token;
    }
    out.bytes += out.layers[l].bytes;
  }
  // The inner cache's element counts cover its (global) layers; its bytes
  // are summed per layer above (every byte is in some layer's stats).
  out.kept_elements += in.kept_elements;
  out.original_elements += in.original_elements;
  if (inner_) {
    // Bytes the inner cache holds outside any layer (shared pools) stay counted.
    KvBytes layered;
    for (const KvLayerStats& s : in.layers) layered += s.bytes;
    out.bytes.payload += in.bytes.payload - layered.payload;
    out.bytes.metadata += in.bytes.metadata - layered.metadata;
    out.bytes.bookkeeping += in.bytes.bookkeeping - layered.bookkeeping;
    out.bytes.residual += in.bytes.residual - layered.residual;
  }
  return out;
}

int64_t WindowedKvCache::LayerAllocatedBytes(int layer) const {
  if (layer < 0 || layer >= g_.n_layers) return -1;
  if (inner_layer_[layer] >= 0) return inner_->LayerAllocatedBytes(inner_layer_[layer]);
  return RingStats(rings_[layer]).bytes.total();
}

namespace {

constexpr char kWindowStateMagic[8] = {'H', 'Q', 'W', 'I', 'N', 'D', 'O', 'W'};

template <class T>
void PutWindowPod(std::string* out, const T& v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof v);
}

template <class T>
bool GetWindowPod(std::string_view* in, T* v) {
  if (in->size() < sizeof *v) return false;
  std::memcpy(v, in->data(), sizeof *v);
  in->remove_prefix(sizeof *v);
  return true;
}

}  // namespace

Status WindowedKvCache::SaveState(std::string* out) const {
  std::string s(kWindowStateMagic, sizeof kWindowStateMagic);
  PutWindowPod(&s, uint32_t{1});
  for (const Ring& r : rings_) {
    if (!r.spos.empty())
      return MakeError("sliding-window cache: state saved in the middle of a batch");
    if (r.window == 0) continue;
    PutWindowPod(&s, int64_t{r.count});
    PutWindowPod(&s, int32_t{r.last_pos});
    PutWindowPod(&s, static_cast<int64_t>(r.pos.size()));
    s.append(reinterpret_cast<const char*>(r.pos.data()), r.pos.size() * sizeof(int32_t));
    s.append(reinterpret_cast<const char*>(r.k.data()), r.k.size());
    s.append(reinterpret_cast<const char*>(r.v.data()), r.v.size());
  }
  std::string inner;
  if (inner_) HQEKV_RETURN_IF_ERROR(inner_->SaveState(&inner));
  PutWindowPod(&s, static_cast<uint64_t>(inner.size()));
  s += inner;
  *out = std::move(s);
  return Status::Ok();
}

Status WindowedKvCache::LoadState(std::string_view in) {
  auto bad = [](const std::string& why) {
    return MakeError("sliding-window cache state: " + why + " (nothing was changed)");
  };
  if (in.size() < sizeof kWindowStateMagic ||
      std::memcmp(in.data(), kWindowStateMagic, sizeof kWindowStateMagic) != 0)
    return bad("not a window-cache state");
  in.remove_prefix(sizeof kWindowStateMagic);
  uint32_t version = 0;
  if (!GetWindowPod(&in, &version) || version != 1) return bad("unknown version");
  std::vector<Ring> rings(rings_.size());
  for (size_t l = 0; l < rings_.size(); ++l) {
    Ring& r = rings[l];
    r.window = rings_[l].window;
    if (r.window == 0) continue;
    int64_t count = 0, slots = 0;
    int32_t last = -1;
    if (!GetWindowPod(&in, &count) || !GetWindowPod(&in, &last) || !GetWindowPod(&in, &slots))
      return bad("truncated");
    if (count < 0 || slots != std::min<int64_t>(count, r.window) || last >= g_.max_ctx ||
        (count > 0) != (last >= 0))
      return bad("layer " + std::to_string(l) + " has an inconsistent token count");
    const size_t pbytes = static_cast<size_t>(slots) * sizeof(int32_t);
    const size_t kv = static_cast<size_t>(slots) * row_bytes_;
    if (in.size() < pbytes + 2 * kv) return bad("truncated");
    r.count = count;
    r.last_pos = last;
    r.pos.resize(slots);
    std::memcpy(r.pos.data(), in.data(), pbytes);
    in.remove_prefix(pbytes);
    r.k.assign(in.begin(), in.begin() + kv);
    in.remove_prefix(kv);
    r.v.assign(in.begin(), in.begin() + kv);
    in.remove_prefix(kv);
    for (int32_t p : r.pos) {
      if (p < 0 || p > last) return bad("layer " + std::to_string(l) + " has a bad position");
    }
  }
  uint64_t inner_len = 0;
  if (!GetWindowPod(&in, &inner_len) || inner_len != in.size()) return bad("truncated");
  if ((inner_len > 0) != (inner_ != nullptr)) return bad("global-layer state does not match");
  if (inner_) HQEKV_RETURN_IF_ERROR(inner_->LoadState(in));
  rings_ = std::move(rings);
  return Status::Ok();
}

}  // namespace hqekv
