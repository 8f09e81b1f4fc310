#include "model/llama.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <tuple>

#include "core/finite.h"
#include "core/parallel.h"
#include "io/arch.h"
#include "kernels/elementwise.h"
#include "model/rope.h"

namespace hqekv {
namespace {

using kernels::RmsNorm;  // kernels/elementwise.h (SIMD)

kernels::WeightMatrix Matrix(const Tensor& t) {
  return kernels::WeightMatrix{t.type, t.data, t.rows(), t.ne[0]};
}

// The error of a non-finite value found in rows of `width` floats after
// `stage` (names the tensors that produced it), at the row's position/token.
Status NonFiniteError(const float* x, size_t at, int width, const char* stage, const int32_t* pos,
                      const int32_t* tokens, int row0) {
  const int row = row0 + static_cast<int>(at / width);
  const char* what = std::isnan(x[at]) ? "NaN" : "infinity";
  return MakeError(std::string("Forward: ") + what + " in the activations after " + stage +
                   " at position " + std::to_string(pos[row]) + " (token " +
                   std::to_string(tokens[row]) +
                   "): the model file's weights or its input are "
                   "not finite there; no result is computed from it");
}

// Rows [first, first + count) of w, as a matrix of its own (zero copy: rows
// of every weight type are whole blocks).
kernels::WeightMatrix RowsOf(const kernels::WeightMatrix& w, int64_t first, int64_t count) {
  return kernels::WeightMatrix{w.type, w.row(first), count, w.k};
}

// gate[i] = gelu(gate[i]) * up[i], GELU in its tanh form (ggml's, which
// llama.cpp's CPU backend evaluates through an fp16 table: 0.5 x (1 +
// tanh(sqrt(2/pi) (x + 0.044715 x^3)))). Scalar: the FFN matmuls dominate.
void GemmaGeGlu(float* gate, const float* up, size_t count) {
  constexpr float kSqrt2OverPi = 0.79788456080286535588f;
  for (size_t i = 0; i < count; ++i) {
    const float x = gate[i];
    gate[i] = 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + 0.044715f * x * x))) * up[i];
  }
}

// logits -> cap * tanh(logits / cap) (Gemma's final soft-cap).
void SoftCapLogits(float* logits, size_t count, float cap) {
  for (size_t i = 0; i < count; ++i) logits[i] = cap * std::tanh(logits[i] / cap);
}

}  // namespace

Result<std::unique_ptr<LlamaModel>> LlamaModel::Create(const ModelSource& src) {
  std::unique_ptr<LlamaModel> m(new LlamaModel(src));
  HQEKV_RETURN_IF_ERROR(m->Init());
  return m;
}

Status LlamaModel::Init() {
  const ModelConfig& c = src_.config;
  const std::string where = src_.path.empty() ? std::string("model") : src_.path;
  if (!FindArch(c.arch)) {
    return MakeError(where + ": unsupported architecture '" + c.arch +
                     "' (supported: " + SupportedArchNames() + ")");
  }
  if (c.n_layers <= 0 || c.d_model <= 0 || c.n_heads <= 0 || c.n_kv_heads <= 0 || c.head_dim <= 0 ||
      c.d_ff <= 0 || c.vocab_size <= 0 || c.n_heads % c.n_kv_heads != 0 || c.head_dim % 2 != 0) {
    return MakeError(where +
                     ": invalid model shape (layers, d_model, heads, head_dim even, d_ff, vocab)");
  }
  if (c.rope_dim < 0 || c.rope_dim > c.head_dim || c.rope_dim % 2 != 0) {
    return MakeError(where + ": rope dimension " + std::to_string(c.rope_dim) +
                     " must be even and at most head_dim " + std::to_string(c.head_dim));
  }
  // Looks a tensor up and checks its shape {in, out} and row length.
  auto get = [&](const std::string& name, int64_t in, int64_t out,
                 kernels::WeightMatrix* w) -> Status {
    const Tensor* t = src_.Find(name);
    if (!t) return MakeError(where + ": missing tensor " + name);
    if (t->ne.empty() || t->ne[0] != in || t->rows() != out) {
      return MakeError(where + ": tensor " + name + " has the wrong shape");
    }
    HQEKV_RETURN_IF_ERROR(kernels::CheckRowLength(t->type, in, where + ": tensor " + name));
    *w = Matrix(*t);
    return Status::Ok();
  };
  auto vec = [&](const std::string& name, int64_t len, const float** out) -> Status {
    const Tensor* t = src_.Find(name);
    if (!t) return MakeError(where + ": missing tensor " + name);
    if (t->type != TensorType::kF32 || t->elements() != len) {
      return MakeError(where + ": tensor " + name + " must be F32 with " + std::to_string(len) +
                       " values");
    }
    *out = t->f32();
    return Status::Ok();
  };
  HQEKV_RETURN_IF_ERROR(get("token_embd.weight", c.d_model, c.vocab_size, &embed_));
  if (src_.Find("output.weight")) {
    HQEKV_RETURN_IF_ERROR(get("output.weight", c.d_model, c.vocab_size, &output_));
  } else {
    output_ = embed_;  // tied
  }
  HQEKV_RETURN_IF_ERROR(vec("output_norm.weight", c.d_model, &output_norm_));
  layers_.resize(c.n_layers);
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    Layer& L = layers_[l];
    HQEKV_RETURN_IF_ERROR(vec(p + "attn_norm.weight", c.d_model, &L.attn_norm));
    HQEKV_RETURN_IF_ERROR(vec(p + "ffn_norm.weight", c.d_model, &L.ffn_norm));
    if (c.fused_qkv) {
      // Views into the fused matrix: rows [0, q), [q, q + kv), [q + kv, q + 2 kv).
      kernels::WeightMatrix qkv;
      HQEKV_RETURN_IF_ERROR(
          get(p + "attn_qkv.weight", c.d_model, c.q_dim() + 2 * c.kv_dim(), &qkv));
      L.wq = RowsOf(qkv, 0, c.q_dim());
      L.wk = RowsOf(qkv, c.q_dim(), c.kv_dim());
      L.wv = RowsOf(qkv, c.q_dim() + c.kv_dim(), c.kv_dim());
    } else {
      HQEKV_RETURN_IF_ERROR(get(p + "attn_q.weight", c.d_model, c.q_dim(), &L.wq));
      HQEKV_RETURN_IF_ERROR(get(p + "attn_k.weight", c.d_model, c.kv_dim(), &L.wk));
      HQEKV_RETURN_IF_ERROR(get(p + "attn_v.weight", c.d_model, c.kv_dim(), &L.wv));
    }
    HQEKV_RETURN_IF_ERROR(get(p + "attn_output.weight", c.q_dim(), c.d_model, &L.wo));
    if (c.fused_gate_up) {  // gate rows first, then up (ggml_swiglu of the halves)
      kernels::WeightMatrix gu;
      HQEKV_RETURN_IF_ERROR(get(p + "ffn_up.weight", c.d_model, 2 * int64_t{c.d_ff}, &gu));
      L.gate = RowsOf(gu, 0, c.d_ff);
      L.up = RowsOf(gu, c.d_ff, c.d_ff);
    } else {
      HQEKV_RETURN_IF_ERROR(get(p + "ffn_gate.weight", c.d_model, c.d_ff, &L.gate));
      HQEKV_RETURN_IF_ERROR(get(p + "ffn_up.weight", c.d_model, c.d_ff, &L.up));
    }
    HQEKV_RETURN_IF_ERROR(get(p + "ffn_down.weight", c.d_ff, c.d_model, &L.down));
    if (c.attn_bias) {
      HQEKV_RETURN_IF_ERROR(vec(p + "attn_q.bias", c.q_dim(), &L.bq));
      HQEKV_RETURN_IF_ERROR(vec(p + "attn_k.bias", c.kv_dim(), &L.bk));
      HQEKV_RETURN_IF_ERROR(vec(p + "attn_v.bias", c.kv_dim(), &L.bv));
    }
    if (c.qk_norm) {
      HQEKV_RETURN_IF_ERROR(vec(p + "attn_q_norm.weight", c.head_dim, &L.q_norm));
      HQEKV_RETURN_IF_ERROR(vec(p + "attn_k_norm.weight", c.head_dim, &L.k_norm));
    }
    if (c.gemma_block) {
      HQEKV_RETURN_IF_ERROR(vec(p + "post_attention_norm.weight", c.d_model, &L.post_attn_norm));
      HQEKV_RETURN_IF_ERROR(vec(p + "post_ffw_norm.weight", c.d_model, &L.post_ffn_norm));
    }
    L.local_rope = !c.layer_window.empty() && c.layer_window[l] > 0 && c.swa_own_rope;
  }
  if (!c.layer_window.empty() && c.layer_window.size() != static_cast<size_t>(c.n_layers))
    return MakeError(where + ": sliding-window layer list does not have one entry per layer");
  if (!c.layer_window.empty() && c.swa_own_rope) {
    // llama.cpp's Gemma window layers: their own base, frequency scale 1.
    ModelConfig local = c;
    local.rope_theta = c.rope_theta_swa;
    local.rope_scaling = RopeScaling::kNone;
    local.rope_factor = 0;
    inv_freq_swa_ = RopeInvFreq(local);
  }
  if (c.attn_scale > 0) q_scale_ = c.attn_scale * std::sqrt(static_cast<float>(c.head_dim));
  inv_freq_ = RopeInvFreq(c);
  rope_mscale_ = RopeAttentionScale(c);
  // llama.cpp's Llama 3.1 files store the rope scaling as per-frequency
  // divisors instead of config keys.
  if (src_.Find("rope_freqs.weight")) {
    const float* rf = nullptr;
    const int pairs = static_cast<int>(inv_freq_.size());  // RopeDims(c) / 2
    HQEKV_RETURN_IF_ERROR(vec("rope_freqs.weight", pairs, &rf));
    for (int i = 0; i < pairs; ++i) inv_freq_[i] /= rf[i];
  }
  if (c.longrope) {
    const int pairs = static_cast<int>(inv_freq_.size());
    const float *fl = nullptr, *fs = nullptr;
    HQEKV_RETURN_IF_ERROR(vec("rope_factors_long.weight", pairs, &fl));
    HQEKV_RETURN_IF_ERROR(vec("rope_factors_short.weight", pairs, &fs));
    inv_freq_long_ = inv_freq_short_ = inv_freq_;
    for (int i = 0; i < pairs; ++i) {
      inv_freq_long_[i] /= fl[i];
      inv_freq_short_[i] /= fs[i];
    }
  }
  return Status::Ok();
}

KvGeometry LlamaModel::CacheGeometry(int max_ctx) const {
  const ModelConfig& c = src_.config;
  return KvGeometry{
      c.n_layers,     c.n_heads,     c.n_kv_heads, c.head_dim, max_ctx > 0 ? max_ctx : c.max_ctx,
      c.layer_window, c.attn_softcap};
}

int64_t LlamaModel::WeightBytesPerToken() const {
  auto bytes = [](const kernels::WeightMatrix& w) { return w.n * kernels::RowBytes(w.type, w.k); };
  int64_t b = bytes(output_);
  for (const Layer& L : layers_) {
    b += bytes(L.wq) + bytes(L.wk) + bytes(L.wv) + bytes(L.wo) + bytes(L.gate) + bytes(L.up) +
         bytes(L.down);
  }
  return b;
}

int64_t LlamaModel::MatmulFlopsPerToken() const {
  auto macs = [](const kernels::WeightMatrix& w) { return w.n * w.k; };
  int64_t m = macs(output_);
  for (const Layer& L : layers_) {
    m += macs(L.wq) + macs(L.wk) + macs(L.wv) + macs(L.wo) + macs(L.gate) + macs(L.up) +
         macs(L.down);
  }
  return 2 * m;
}

void LlamaModel::Project(const kernels::WeightMatrix& w, const float* in, int n, float* out) const {
  kernels::MatMul(w, in, n, out);
}

Status LlamaModel::CheckSeq(const SeqBatch& s) const {
  const ModelConfig& c = src_.config;
  if (s.n <= 0 || !s.cache) return MakeError("Forward: empty batch");
  const KvGeometry& g = s.cache->geometry();
  if (g.n_layers != c.n_layers || g.n_kv_heads != c.n_kv_heads || g.head_dim != c.head_dim ||
      g.n_q_heads != c.n_heads) {
    return MakeError("Forward: the KV cache geometry does not match the model");
  }
  for (int i = 0; i < s.n; ++i) {
    if (s.tokens[i] < 0 || s.tokens[i] >= c.vocab_size) {
      return MakeError("Forward: token id " + std::to_string(s.tokens[i]) + " out of range [0, " +
                       std::to_string(c.vocab_size) + ")");
    }
    if (s.pos[i] < 0 || s.pos[i] >= g.max_ctx) {
      return MakeError("Forward: position " + std::to_string(s.pos[i]) +
                       " outside the context of " + std::to_string(g.max_ctx) + " tokens");
    }
  }
  return Status::Ok();
}

Status LlamaModel::Forward(const int32_t* tokens, const int32_t* pos, int n, KvCache& cache,
                           Logits which, float* logits, bool is_prefill, float* embeddings) {
  const SeqBatch s{tokens,     pos,       n, &cache, which == Logits::kNone ? nullptr : logits,
                   is_prefill, embeddings};
  return Run(&s, 1, which);
}

Status LlamaModel::ForwardMany(const SeqBatch* seqs, int count) {
  if (count <= 0) return MakeError("ForwardMany: no sequence");
  return Run(seqs, count, Logits::kLast);
}

Status LlamaModel::Run(const SeqBatch* seqs, int count, Logits which) {
  const ModelConfig& c = src_.config;
  int n = 0;
  for (int s = 0; s < count; ++s) {
    HQEKV_RETURN_IF_ERROR(CheckSeq(seqs[s]));
    for (int t = 0; t < s; ++t) {
      if (seqs[t].cache == seqs[s].cache) return MakeError("ForwardMany: a cache appears twice");
    }
    n += seqs[s].n;
  }
  tok_.clear();
  pos_.clear();
  for (int s = 0; s < count; ++s) {
    tok_.insert(tok_.end(), seqs[s].tokens, seqs[s].tokens + seqs[s].n);
    pos_.insert(pos_.end(), seqs[s].pos, seqs[s].pos + seqs[s].n);
  }
  const int32_t* tokens = tok_.data();
  // Each token's RoPE table: LongRoPE picks by its sequence's context.
  tok_inv_.clear();
  for (int s = 0; s < count; ++s) {
    const std::vector<float>* inv = &inv_freq_;
    if (c.longrope)
      inv =
          seqs[s].cache->geometry().max_ctx > c.rope_orig_ctx ? &inv_freq_long_ : &inv_freq_short_;
    tok_inv_.insert(tok_inv_.end(), seqs[s].n, inv);
  }
  const int D = c.d_model, QD = c.q_dim(), KD = c.kv_dim(), F = c.d_ff, HD = c.head_dim;
  const size_t N = static_cast<size_t>(n);
  x_.resize(N * D);
  h_.resize(N * D);
  q_.resize(N * QD);
  att_.resize(N * QD);
  k_.resize(N * KD);
  v_.resize(N * KD);
  g_.resize(N * F);
  u_.resize(N * F);
  for (int i = 0; i < n; ++i)
    kernels::DequantizeRow(embed_.type, embed_.row(tokens[i]), D, &x_[i * D]);
  if (c.gemma_block) {
    const float scale = std::sqrt(static_cast<float>(D));
    for (size_t j = 0; j < N * D; ++j) x_[j] *= scale;
  }
  // Non-finite values are caught where they first appear (residual stream
  // after the embedding and after each block, then the logits), so that no
  // NaN reaches a printed result and the error names the tensors at fault.
  if (const size_t at = FirstNonFinite(x_.data(), N * D); at < N * D)
    return NonFiniteError(x_.data(), at, D, "the token embedding (token_embd)", pos_.data(), tokens,
                          0);

  for (int l = 0; l < c.n_layers; ++l) {
    const Layer& L = layers_[l];
    for (int i = 0; i < n; ++i) RmsNorm(&x_[i * D], L.attn_norm, D, c.rms_eps, &h_[i * D]);
    if (n == 1) {  // decode: one pass over the three matrices
      const kernels::WeightMatrix* ws[3] = {&L.wq, &L.wk, &L.wv};
      float* ys[3] = {q_.data(), k_.data(), v_.data()};
      kernels::MatVecMany(ws, ys, 3, h_.data());
    } else {
      Project(L.wq, h_.data(), n, q_.data());
      Project(L.wk, h_.data(), n, k_.data());
      Project(L.wv, h_.data(), n, v_.data());
    }
    for (int i = 0; i < n; ++i) {
      float* q = &q_[i * QD];
      float* k = &k_[i * KD];
      float* v = &v_[i * KD];
      if (L.bq) {
        for (int j = 0; j < QD; ++j) q[j] += L.bq[j];
        for (int j = 0; j < KD; ++j) k[j] += L.bk[j];
        for (int j = 0; j < KD; ++j) v[j] += L.bv[j];
      }
      if (L.q_norm) {
        for (int h = 0; h < c.n_heads; ++h)
          RmsNorm(q + h * HD, L.q_norm, HD, c.rms_eps, q + h * HD);
        for (int h = 0; h < c.n_kv_heads; ++h)
          RmsNorm(k + h * HD, L.k_norm, HD, c.rms_eps, k + h * HD);
      }
      const std::vector<float>& inv = L.local_rope ? inv_freq_swa_ : *tok_inv_[i];
      ApplyRope(c.rope, inv, pos_[i], c.n_heads, HD, q);
      ApplyRope(c.rope, inv, pos_[i], c.n_kv_heads, HD, k);
      if (q_scale_ != 1.0f) {
        for (int j = 0; j < QD; ++j) q[j] *= q_scale_;
      }
      if (rope_mscale_ != 1.0f && !L.local_rope) {
        for (int j = 0; j < QD; ++j) q[j] *= rope_mscale_;
        for (int j = 0; j < KD; ++j) k[j] *= rope_mscale_;
      }
    }
    // Q, K and V before they reach a cache: a NaN in attn_q / attn_k would
    // otherwise be absorbed by a softmax (finite but wrong logits, every
    // cache but fp32), and one in K or V stored in a cache outlives the call.
    for (const auto& [buf, width, name] :
         {std::tuple{&q_, QD, "attn_q"}, std::tuple{&k_, KD, "attn_k"},
          std::tuple{&v_, KD, "attn_v"}}) {
      const size_t len = size_t(N) * size_t(width);
      if (const size_t at = FirstNonFinite(buf->data(), len); at < len) {
        const std::string stage = "layer " + std::to_string(l) + "'s " + name +
                                  " projection (blk." + std::to_string(l) + "." + name +
                                  ", its bias, norm or RoPE)";
        return NonFiniteError(buf->data(), at, width, stage.c_str(), pos_.data(), tokens, 0);
      }
    }
    // Each sequence appends to and attends over its own cache, rows [r, r + n_s).
    for (int s = 0, r = 0; s < count; r += seqs[s].n, ++s) {
      const SeqBatch& S = seqs[s];
      HQEKV_RETURN_IF_ERROR(
          S.cache->Append(l, &k_[size_t(r) * KD], &v_[size_t(r) * KD], S.pos, S.n));
      HQEKV_RETURN_IF_ERROR(
          S.cache->Attend(l, &q_[size_t(r) * QD], S.pos, S.n, &att_[size_t(r) * QD]));
    }
    Project(L.wo, att_.data(), n, h_.data());
    if (L.post_attn_norm) {
      for (int i = 0; i < n; ++i) RmsNorm(&h_[i * D], L.post_attn_norm, D, c.rms_eps, &h_[i * D]);
    }
    kernels::AddInto(x_.data(), h_.data(), N * D);  // the residual
    if (const size_t at = FirstNonFinite(x_.data(), N * D); at < N * D) {
      const std::string stage =
          "layer " + std::to_string(l) + "'s attention (blk." + std::to_string(l) + ".attn_*)";
      return NonFiniteError(x_.data(), at, D, stage.c_str(), pos_.data(), tokens, 0);
    }

    for (int i = 0; i < n; ++i) RmsNorm(&x_[i * D], L.ffn_norm, D, c.rms_eps, &h_[i * D]);
    if (n == 1) {
      const kernels::WeightMatrix* ws[2] = {&L.gate, &L.up};
      float* ys[2] = {g_.data(), u_.data()};
      kernels::MatVecMany(ws, ys, 2, h_.data());
    } else {
      Project(L.gate, h_.data(), n, g_.data());
      Project(L.up, h_.data(), n, u_.data());
    }
    if (c.gemma_block) {
      GemmaGeGlu(g_.data(), u_.data(), N * F);
    } else {
      kernels::SwiGlu(g_.data(), u_.data(), N * F);  // silu(gate) * up
    }
    Project(L.down, g_.data(), n, h_.data());
    if (L.post_ffn_norm) {
      for (int i = 0; i < n; ++i) RmsNorm(&h_[i * D], L.post_ffn_norm, D, c.rms_eps, &h_[i * D]);
    }
    kernels::AddInto(x_.data(), h_.data(), N * D);  // the residual
    if (const size_t at = FirstNonFinite(x_.data(), N * D); at < N * D) {
      const std::string stage =
          "layer " + std::to_string(l) + "'s feed-forward (blk." + std::to_string(l) + ".ffn_*)";
      return NonFiniteError(x_.data(), at, D, stage.c_str(), pos_.data(), tokens, 0);
    }
  }

  // Embeddings: every row of a sequence that asks, through the output norm.
  for (int s = 0, r = 0; s < count; r += seqs[s].n, ++s) {
    if (!seqs[s].embeddings) continue;
    for (int i = 0; i < seqs[s].n; ++i) {
      RmsNorm(&x_[size_t(r + i) * D], output_norm_, D, c.rms_eps,
              &seqs[s].embeddings[size_t(i) * D]);
    }
  }
  const size_t V = static_cast<size_t>(c.vocab_size);
  if (which == Logits::kAll) {  // one sequence (Forward)
    for (int i = 0; i < n; ++i) RmsNorm(&x_[i * D], output_norm_, D, c.rms_eps, &h_[i * D]);
    Project(output_, h_.data(), n, seqs[0].logits);
    if (c.final_softcap > 0) SoftCapLogits(seqs[0].logits, N * V, c.final_softcap);
    if (const size_t at = FirstNonFinite(seqs[0].logits, N * V); at < N * V) {
      return NonFiniteError(seqs[0].logits, at, c.vocab_size,
                            "the output head (output_norm, output)", pos_.data(), tokens, 0);
    }
  } else if (which == Logits::kLast) {
    // The last row of every sequence, through the output matrix together.
    int rows = 0;
    for (int s = 0, r = 0; s < count; ++s) {
      r += seqs[s].n;
      if (!seqs[s].logits) continue;
      RmsNorm(&x_[size_t(r - 1) * D], output_norm_, D, c.rms_eps, &h_[size_t(rows) * D]);
      ++rows;
    }
    if (count == 1 && rows == 1) {
      Project(output_, h_.data(), 1, seqs[0].logits);
    } else if (rows > 0) {
      logit_rows_.resize(size_t(rows) * V);
      Project(output_, h_.data(), rows, logit_rows_.data());
      for (int s = 0, row = 0; s < count; ++s) {
        if (!seqs[s].logits) continue;
        std::copy_n(&logit_rows_[size_t(row++) * V], V, seqs[s].logits);
      }
    }
    for (int s = 0, r = 0; s < count; ++s) {
      r += seqs[s].n;
      if (!seqs[s].logits) continue;
      if (c.final_softcap > 0) SoftCapLogits(seqs[s].logits, V, c.final_softcap);
      if (const size_t at = FirstNonFinite(seqs[s].logits, V); at < V) {
        return NonFiniteError(seqs[s].logits, at, c.vocab_size,
                              "the output head (output_norm, output)", pos_.data(), tokens, r - 1);
      }
    }
  }
  for (int s = 0; s < count; ++s)
    HQEKV_RETURN_IF_ERROR(seqs[s].cache->EndBatch(seqs[s].n, seqs[s].is_prefill));
  return Status::Ok();
}

}  // namespace hqekv
