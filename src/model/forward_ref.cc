#include "model/forward_ref.h"

#include <algorithm>
#include <cmath>

#include "kernels/kernels.h"
#include "model/llama.h"

namespace hqekv {
namespace {

void RmsNorm(const double* x, const std::vector<double>& w, int d, double eps, double* out) {
  double ss = 0;
  for (int i = 0; i < d; ++i) ss += x[i] * x[i];
  const double inv = 1.0 / std::sqrt(ss / d + eps);
  for (int i = 0; i < d; ++i) out[i] = w[i] * x[i] * inv;
}

// Inverse frequencies in double, with the Llama 3 rescaling.
std::vector<double> InvFreq(const ModelConfig& c) {
  const double kPi = 3.14159265358979323846;
  const int n_dims = c.rope_dim > 0 ? c.rope_dim : c.head_dim;  // partial rotary: fewer
  std::vector<double> f(n_dims / 2);
  for (int i = 0; i < n_dims / 2; ++i) {
    double freq = std::pow(static_cast<double>(c.rope_theta), -2.0 * i / n_dims);
    if (c.rope_scaling == RopeScaling::kLinear) {
      freq /= c.rope_factor;
    } else if (c.rope_scaling == RopeScaling::kYarn) {
      // ggml's rope_yarn: ramp 1 below the fast correction dim, 0 above the slow one.
      const double kTwoPi = 2 * kPi;
      auto corr = [&](double n_rot) {
        return n_dims * std::log(c.rope_orig_ctx / (n_rot * kTwoPi)) /
               (2 * std::log(static_cast<double>(c.rope_theta)));
      };
      const double lo = std::max(0.0, std::floor(corr(32))),
                   hi = std::min(n_dims - 1.0, std::ceil(corr(1)));
      const double ramp = 1 - std::min(1.0, std::max(0.0, (i - lo) / std::max(0.001, hi - lo)));
      freq *= ramp + (1 - ramp) / c.rope_factor;
    } else if (c.rope_scaling == RopeScaling::kLlama3) {
      const double wavelen = 2 * kPi / freq;
      const double lo = c.rope_orig_ctx / c.rope_low_freq_factor,
                   hi = c.rope_orig_ctx / c.rope_high_freq_factor;
      if (wavelen > lo) {
        freq /= c.rope_factor;
      } else if (wavelen >= hi) {
        const double s = (c.rope_orig_ctx / wavelen - c.rope_low_freq_factor) /
                         (c.rope_high_freq_factor - c.rope_low_freq_factor);
        freq = (1 - s) * freq / c.rope_factor + s * freq;
      }
    }
    f[i] = freq;
  }
  return f;  // rope_freqs.weight divisors are applied by the caller
}

void Rope(const ModelConfig& c, const std::vector<double>& inv, int32_t pos, int heads, double* x) {
  const int hd = c.head_dim, half = static_cast<int>(inv.size());  // rotated pairs
  for (int h = 0; h < heads; ++h) {
    double* v = x + h * hd;
    for (int i = 0; i < half; ++i) {
      const double a = pos * inv[i];
      const int i0 = c.rope == RopeStyle::kNormal ? 2 * i : i;
      const int i1 = c.rope == RopeStyle::kNormal ? 2 * i + 1 : i + half;
      const double x0 = v[i0], x1 = v[i1];
      v[i0] = x0 * std::cos(a) - x1 * std::sin(a);
      v[i1] = x0 * std::sin(a) + x1 * std::cos(a);
    }
  }
}

}  // namespace

std::vector<double> ReferenceForward::Matrix(const std::string& name, int64_t* in,
                                             int64_t* out) const {
  const Tensor* t = src_.Find(name);
  if (!t) return {};
  *in = t->ne[0];
  *out = t->rows();
  std::vector<float> row(*in);
  std::vector<double> w(*in * *out);
  const TensorType wt = t->type;
  for (int64_t r = 0; r < *out; ++r) {
    kernels::DequantizeRowRef(wt, t->data + r * kernels::RowBytes(wt, *in), *in, row.data());
    for (int64_t c = 0; c < *in; ++c) w[r * *in + c] = row[c];
  }
  return w;
}

std::vector<double> ReferenceForward::Vec(const std::string& name) const {
  const Tensor* t = src_.Find(name);
  if (!t) return {};
  return std::vector<double>(t->f32(), t->f32() + t->elements());
}

void ReferenceForward::MatVec(const std::vector<double>& w, int64_t in, int64_t out,
                              const double* x, double* y) {
  for (int64_t r = 0; r < out; ++r) {
    double s = 0;
    for (int64_t c = 0; c < in; ++c) s += w[r * in + c] * x[c];
    y[r] = s;
  }
}

Result<std::unique_ptr<ReferenceForward>> ReferenceForward::Create(const ModelSource& src) {
  // The fast model's checks (architecture, shapes, types) apply here too.
  HQEKV_ASSIGN_OR_RETURN(auto check, LlamaModel::Create(src));
  std::unique_ptr<ReferenceForward> m(new ReferenceForward(src));
  int64_t in, out;
  m->embed_ = m->Matrix("token_embd.weight", &in, &out);
  m->output_ = src.Find("output.weight") ? m->Matrix("output.weight", &in, &out) : m->embed_;
  m->output_norm_ = m->Vec("output_norm.weight");
  m->layers_.resize(src.config.n_layers);
  for (int l = 0; l < src.config.n_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    Layer& L = m->layers_[l];
    L.attn_norm = m->Vec(p + "attn_norm.weight");
    L.ffn_norm = m->Vec(p + "ffn_norm.weight");
    L.bq = m->Vec(p + "attn_q.bias");
    L.bk = m->Vec(p + "attn_k.bias");
    L.bv = m->Vec(p + "attn_v.bias");
    L.q_norm = m->Vec(p + "attn_q_norm.weight");
    L.k_norm = m->Vec(p + "attn_k_norm.weight");
    L.post_attn_norm = m->Vec(p + "post_attention_norm.weight");
    L.post_ffn_norm = m->Vec(p + "post_ffw_norm.weight");
    const ModelConfig& c = src.config;
    if (c.fused_qkv) {  // rows q, then k, then v
      const std::vector<double> qkv = m->Matrix(p + "attn_qkv.weight", &in, &out);
      const size_t q = size_t(c.q_dim()) * in, kv = size_t(c.kv_dim()) * in;
      L.wq.assign(qkv.begin(), qkv.begin() + q);
      L.wk.assign(qkv.begin() + q, qkv.begin() + q + kv);
      L.wv.assign(qkv.begin() + q + kv, qkv.begin() + q + 2 * kv);
    } else {
      L.wq = m->Matrix(p + "attn_q.weight", &in, &out);
      L.wk = m->Matrix(p + "attn_k.weight", &in, &out);
      L.wv = m->Matrix(p + "attn_v.weight", &in, &out);
    }
    L.wo = m->Matrix(p + "attn_output.weight", &in, &out);
    if (c.fused_gate_up) {  // rows gate, then up
      const std::vector<double> gu = m->Matrix(p + "ffn_up.weight", &in, &out);
      const size_t half = size_t(c.d_ff) * in;
      L.gate.assign(gu.begin(), gu.begin() + half);
      L.up.assign(gu.begin() + half, gu.end());
    } else {
      L.gate = m->Matrix(p + "ffn_gate.weight", &in, &out);
      L.up = m->Matrix(p + "ffn_up.weight", &in, &out);
    }
    L.down = m->Matrix(p + "ffn_down.weight", &in, &out);
  }
  return m;
}

void ReferenceForward::Reset() {
  for (Layer& L : layers_) {
    L.keys.clear();
    L.values.clear();
  }
  past_pos_.clear();
}

Result<std::vector<float>> ReferenceForward::Forward(const int32_t* tokens, const int32_t* pos,
                                                     int n) {
  const ModelConfig& c = src_.config;
  const int D = c.d_model, QD = c.q_dim(), KD = c.kv_dim(), F = c.d_ff, HD = c.head_dim;
  const int group = c.n_heads / c.n_kv_heads;
  std::vector<double> inv = InvFreq(c);
  if (const Tensor* rf = src_.Find("rope_freqs.weight")) {
    for (size_t i = 0; i < inv.size(); ++i) inv[i] /= rf->f32()[i];
  }
  if (c.longrope) {
    const int ctx = context_ > 0 ? context_ : c.max_ctx;
    const Tensor* lf =
        src_.Find(ctx > c.rope_orig_ctx ? "rope_factors_long.weight" : "rope_factors_short.weight");
    if (!lf) return MakeError("reference forward: LongRoPE factors missing");
    for (size_t i = 0; i < inv.size(); ++i) inv[i] /= lf->f32()[i];
  }
  std::vector<double> inv_swa;  // window layers: their own base, no scaling
  if (!c.layer_window.empty()) {
    ModelConfig local = c;
    local.rope_theta = c.rope_theta_swa;
    local.rope_scaling = RopeScaling::kNone;
    inv_swa = InvFreq(local);
  }
  const double q_scale = c.attn_scale > 0 ? c.attn_scale : 1.0 / std::sqrt(double(HD));
  std::vector<float> logits(static_cast<size_t>(n) * c.vocab_size);
  for (int i = 0; i < n; ++i) {
    if (tokens[i] < 0 || tokens[i] >= c.vocab_size)
      return MakeError("reference forward: bad token id");
    if (!past_pos_.empty() && pos[i] <= past_pos_.back())
      return MakeError("reference forward: bad position");
    // One token at a time: causal attention over every earlier token is the
    // same as a batched pass with a causal mask.
    std::vector<double> x(embed_.begin() + static_cast<int64_t>(tokens[i]) * D,
                          embed_.begin() + static_cast<int64_t>(tokens[i] + 1) * D);
    if (c.gemma_block) {
      for (double& e : x) e *= std::sqrt(static_cast<double>(D));
    }
    std::vector<double> h(D), q(QD), k(KD), v(KD), att(QD), o(D), g(F), u(F);
    for (size_t li = 0; li < layers_.size(); ++li) {
      Layer& L = layers_[li];
      const int window = c.layer_window.empty() ? 0 : c.layer_window[li];
      RmsNorm(x.data(), L.attn_norm, D, c.rms_eps, h.data());
      MatVec(L.wq, D, QD, h.data(), q.data());
      MatVec(L.wk, D, KD, h.data(), k.data());
      MatVec(L.wv, D, KD, h.data(), v.data());
      if (!L.bq.empty()) {
        for (int j = 0; j < QD; ++j) q[j] += L.bq[j];
        for (int j = 0; j < KD; ++j) k[j] += L.bk[j];
        for (int j = 0; j < KD; ++j) v[j] += L.bv[j];
      }
      if (!L.q_norm.empty()) {
        for (int hh = 0; hh < c.n_heads; ++hh)
          RmsNorm(&q[hh * HD], L.q_norm, HD, c.rms_eps, &q[hh * HD]);
        for (int hh = 0; hh < c.n_kv_heads; ++hh)
          RmsNorm(&k[hh * HD], L.k_norm, HD, c.rms_eps, &k[hh * HD]);
      }
      const bool local_rope = window > 0 && c.swa_own_rope;
      Rope(c, local_rope ? inv_swa : inv, pos[i], c.n_heads, q.data());
      Rope(c, local_rope ? inv_swa : inv, pos[i], c.n_kv_heads, k.data());
      if ((c.rope_scaling == RopeScaling::kYarn || c.longrope) && !local_rope) {
        // ggml's mscale on q and k (LongRoPE: the attn_factor alone)
        const double ms = c.longrope
                              ? double{c.rope_attn_factor}
                              : c.rope_attn_factor * (1 + 0.1 * std::log(double{c.rope_factor}));
        for (double& x : q) x *= ms;
        for (double& x : k) x *= ms;
      }
      L.keys.push_back(k);
      L.values.push_back(v);
      const size_t T = L.keys.size();
      for (int hh = 0; hh < c.n_heads; ++hh) {
        const int kvh = hh / group;
        std::vector<double> s(T);
        double mx = -1e300;
        // Key t's position: past_pos_[t], the current token last.
        auto visible = [&](size_t t) {
          return window == 0 || pos[i] - (t + 1 < T ? past_pos_[t] : pos[i]) < window;
        };
        for (size_t t = 0; t < T; ++t) {
          double d = 0;
          for (int j = 0; j < HD; ++j) d += q[hh * HD + j] * L.keys[t][kvh * HD + j];
          s[t] = d * q_scale;
          if (c.attn_softcap > 0) s[t] = c.attn_softcap * std::tanh(s[t] / c.attn_softcap);
          if (visible(t)) mx = std::max(mx, s[t]);
        }
        double sum = 0;
        for (size_t t = 0; t < T; ++t) sum += (s[t] = visible(t) ? std::exp(s[t] - mx) : 0.0);
        for (int j = 0; j < HD; ++j) {
          double a = 0;
          for (size_t t = 0; t < T; ++t) a += s[t] / sum * L.values[t][kvh * HD + j];
          att[hh * HD + j] = a;
        }
      }
      MatVec(L.wo, QD, D, att.data(), o.data());
      if (!L.post_attn_norm.empty()) RmsNorm(o.data(), L.post_attn_norm, D, c.rms_eps, o.data());
      for (int j = 0; j < D; ++j) x[j] += o[j];
      RmsNorm(x.data(), L.ffn_norm, D, c.rms_eps, h.data());
      MatVec(L.gate, D, F, h.data(), g.data());
      MatVec(L.up, D, F, h.data(), u.data());
      if (c.gemma_block) {  // GELU, tanh form
        const double kC = std::sqrt(2.0 / 3.14159265358979323846);
        for (int j = 0; j < F; ++j)
          g[j] = 0.5 * g[j] * (1 + std::tanh(kC * (g[j] + 0.044715 * g[j] * g[j] * g[j]))) * u[j];
      } else {
        for (int j = 0; j < F; ++j) g[j] = g[j] / (1 + std::exp(-g[j])) * u[j];
      }
      MatVec(L.down, F, D, g.data(), o.data());
      if (!L.post_ffn_norm.empty()) RmsNorm(o.data(), L.post_ffn_norm, D, c.rms_eps, o.data());
      for (int j = 0; j < D; ++j) x[j] += o[j];
    }
    past_pos_.push_back(pos[i]);
    RmsNorm(x.data(), output_norm_, D, c.rms_eps, h.data());
    std::vector<double> lg(c.vocab_size);
    MatVec(output_, D, c.vocab_size, h.data(), lg.data());
    if (c.final_softcap > 0) {
      for (double& e : lg) e = c.final_softcap * std::tanh(e / c.final_softcap);
    }
    for (int j = 0; j < c.vocab_size; ++j)
      logits[static_cast<size_t>(i) * c.vocab_size + j] = static_cast<float>(lg[j]);
  }
  return logits;
}

}  // namespace hqekv
