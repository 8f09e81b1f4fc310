#include "io/model_source.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <limits>

#include "core/hash.h"
#include "io/arch.h"
#include "io/gguf.h"
#include "io/llama2c.h"
#include "io/mmap_file.h"
#include "io/tokenizer_gguf.h"

namespace hqekv {
namespace {

std::string Stem(const std::string& path) {
  size_t slash = path.find_last_of('/');
  std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  size_t dot = base.find_last_of('.');
  return dot == std::string::npos || dot == 0 ? base : base.substr(0, dot);
}

std::string ShapeString(const std::vector<int64_t>& ne) {
  std::string s = "{";
  for (size_t k = 0; k < ne.size(); ++k) s += (k ? ", " : "") + std::to_string(ne[k]);
  return s + "}";
}

// FNV-1a 64 (core/hash.h) over a list of strings, each followed by a 0xFF
// separator byte: enough to key calibration profiles to a model layout.
// The start value is NOT the FNV offset basis 14695981039346656037 but that
// number with its last digit lost, as this hash was first written; model
// identities stored in calibration profiles depend on it, so it stays.
struct LayoutHash {
  static constexpr uint64_t kStart = 1469598103934665603ull;
  uint64_t h = kStart;
  void Add(const std::string& s) {
    static constexpr unsigned char kSeparator = 0xFF;
    h = Fnv1a64(&kSeparator, 1, Fnv1a64(s, h));
  }
};

Result<int> ConfigInt(const GgufFile& f, const std::string& key, std::optional<int> def) {
  HQEKV_ASSIGN_OR_RETURN(auto v, f.GetOptionalInt(key));
  if (!v.has_value()) {
    if (def) return *def;
    return MakeError("GGUF file '" + f.path + "': required key '" + key + "' is missing");
  }
  const int64_t x = *v;
  if (x < 0 || x > std::numeric_limits<int32_t>::max())
    return MakeError("GGUF file '" + f.path + "': key '" + key + "' = " + std::to_string(x) +
                     " is out of range");
  return static_cast<int>(x);
}

Result<float> ConfigFloat(const GgufFile& f, const std::string& key, std::optional<float> def) {
  // A float key must hold a float (as llama.cpp requires): an epsilon
  // written as u32 (its bit pattern, or a rounded 0) would be used as a
  // wildly wrong number and give degenerate output with exit 0.
  if (const GgufValue* g = f.Find(key); g && !g->is_float())
    return MakeError("GGUF file '" + f.path + "': key '" + key + "' has type " +
                     GgufTypeName(g->type) + ", expected a float");
  HQEKV_ASSIGN_OR_RETURN(auto v, f.GetOptionalFloat(key));
  if (!v.has_value()) {
    if (def) return *def;
    return MakeError("GGUF file '" + f.path + "': required key '" + key + "' is missing");
  }
  if (!std::isfinite(*v))
    return MakeError("GGUF file '" + f.path + "': key '" + key + "' is not a finite number");
  return static_cast<float>(*v);
}

// RoPE scaling keys as llama.cpp reads them (model_file.h ModelConfig).
// `a` is "<arch>."; c.max_ctx is read already (yarn's default original
// context).
Status ReadRopeScaling(const GgufFile& f, const std::string& a, const std::string& where,
                       ModelConfig* c) {
  const std::string type_key = a + "rope.scaling.type";
  HQEKV_ASSIGN_OR_RETURN(auto scaling, f.GetOptionalString(type_key));
  float factor = 0;
  HQEKV_ASSIGN_OR_RETURN(factor, ConfigFloat(f, a + "rope.scaling.factor", 0.0f));
  if (factor == 0) {
    HQEKV_ASSIGN_OR_RETURN(factor, ConfigFloat(f, a + "rope.scale_linear", 0.0f));
  }
  if (factor < 0) {
    return MakeError(where + "rope scaling factor " + std::to_string(factor) + " (" + a +
                     "rope.scaling.factor / rope.scale_linear) must be positive");
  }
  const std::string stype = scaling.value_or("linear");  // llama.cpp's default
  if (stype == "none") return Status::Ok();
  if (stype == "linear") {
    if (factor > 0 && factor != 1) {
      c->rope_scaling = RopeScaling::kLinear;
      c->rope_factor = factor;
    }
    return Status::Ok();
  }
  if (stype == "yarn") {
    if (factor == 0) return Status::Ok();  // factor 1: no stretch, no magnitude change
    c->rope_scaling = RopeScaling::kYarn;
    c->rope_factor = factor;
    HQEKV_ASSIGN_OR_RETURN(c->rope_orig_ctx,
                           ConfigInt(f, a + "rope.scaling.original_context_length", c->max_ctx));
    HQEKV_ASSIGN_OR_RETURN(c->rope_attn_factor,
                           ConfigFloat(f, a + "rope.scaling.attn_factor", 1.0f));
    return Status::Ok();
  }
  if (stype == "llama3") {
    if (factor == 0) return Status::Ok();
    c->rope_scaling = RopeScaling::kLlama3;
    c->rope_factor = factor;
    HQEKV_ASSIGN_OR_RETURN(c->rope_low_freq_factor,
                           ConfigFloat(f, a + "rope.scaling.low_freq_factor", 1.0f));
    HQEKV_ASSIGN_OR_RETURN(c->rope_high_freq_factor,
                           ConfigFloat(f, a + "rope.scaling.high_freq_factor", 4.0f));
    HQEKV_ASSIGN_OR_RETURN(c->rope_orig_ctx,
                           ConfigInt(f, a + "rope.scaling.original_context_length", 8192));
    return Status::Ok();
  }
  return MakeError(where + "unsupported rope scaling type '" + stype + "' in " + type_key +
                   " (supported: none, linear, yarn, llama3)");
}

Status ReadWindowLayers(const GgufFile& f, const std::string& a, const std::string& where,
                        const ArchTraits& arch, ModelConfig* c);

// Gemma-family keys as llama.cpp reads them (ModelConfig): the sliding
// window and which layers use it, the window layers' RoPE base, the final
// logit soft-cap, and the query scale llama.cpp derives from the model size.
Status ReadGemmaKeys(const GgufFile& f, const std::string& a, const std::string& where,
                     const ArchTraits& arch, ModelConfig* c) {
  HQEKV_ASSIGN_OR_RETURN(c->sliding_window,
                         ConfigInt(f, a + "attention.sliding_window", arch.default_window));
  HQEKV_ASSIGN_OR_RETURN(
      c->rope_theta_swa,
      ConfigFloat(f, a + "rope.freq_base_swa",
                  arch.default_rope_theta_swa > 0 ? arch.default_rope_theta_swa : c->rope_theta));
  HQEKV_ASSIGN_OR_RETURN(c->final_softcap,
                         ConfigFloat(f, a + "final_logit_softcapping", arch.default_final_softcap));
  HQEKV_ASSIGN_OR_RETURN(c->attn_softcap,
                         ConfigFloat(f, a + "attn_logit_softcapping", arch.default_attn_softcap));
  if (c->final_softcap < 0 || c->attn_softcap < 0)
    return MakeError(where + a +
                     "final_logit_softcapping and attn_logit_softcapping must not be "
                     "negative");
  // llama.cpp: 1/sqrt(d_model / heads) for the 27B sizes (62 layers in
  // Gemma 3, 46 in Gemma 2), 1/sqrt(head_dim) otherwise (it does not read
  // query_pre_attn_scalar, whose value equals that in the released models).
  const bool big = c->n_layers == (arch.swa_period == 2 ? 46 : 62);
  const int per_head = big && c->n_heads > 0 ? c->d_model / c->n_heads : c->head_dim;
  if (per_head > 0) c->attn_scale = 1.0f / std::sqrt(static_cast<float>(per_head));
  c->swa_own_rope = true;
  return ReadWindowLayers(f, a, where, arch, c);
}

// Which layers are window layers once c->sliding_window is known:
// attention.sliding_window_pattern as a bool per layer or a period, else the
// row's default period (0: every layer).
Status ReadWindowLayers(const GgufFile& f, const std::string& a, const std::string& where,
                        const ArchTraits& arch, ModelConfig* c) {
  if (c->sliding_window <= 0) return Status::Ok();
  if (c->n_layers <= 0 || c->n_layers > kMaxConfigDim) return Status::Ok();  // validation says why
  const std::string pkey = a + "attention.sliding_window_pattern";
  c->layer_window.assign(c->n_layers, 0);
  if (const GgufValue* pv = f.Find(pkey); pv && pv->type == GgufType::kArray) {
    if (pv->ints.size() != static_cast<size_t>(c->n_layers))
      return MakeError(where + pkey + " has " + std::to_string(pv->array_size()) +
                       " entries, expected one per layer (" + std::to_string(c->n_layers) + ")");
    for (int l = 0; l < c->n_layers; ++l) c->layer_window[l] = pv->ints[l] ? c->sliding_window : 0;
    return Status::Ok();
  }
  int period = 0;
  HQEKV_ASSIGN_OR_RETURN(period, ConfigInt(f, pkey, arch.swa_period));
  for (int l = 0; l < c->n_layers; ++l)
    c->layer_window[l] = period == 0 || l % period < period - 1 ? c->sliding_window : 0;
  return Status::Ok();
}

Result<std::unique_ptr<ModelSource>> LoadGguf(const uint8_t* data, size_t size,
                                              const std::string& path,
                                              std::shared_ptr<const MappedFile> map) {
  HQEKV_ASSIGN_OR_RETURN(auto parsed, ParseGguf(data, size, path));
  auto gguf = std::make_shared<GgufFile>(std::move(parsed));
  const GgufFile& f = *gguf;
  const std::string where = "GGUF file '" + f.path + "': ";

  auto m = std::make_unique<ModelSource>();
  m->path = path;
  m->tokenizer_path = path;
  m->format = "gguf";
  m->gguf_version = f.version;
  m->file_bytes = size;
  ModelConfig& c = m->config;
  HQEKV_ASSIGN_OR_RETURN(c.arch, f.GetString("general.architecture"));
  const ArchTraits* arch = FindArch(c.arch);
  if (!arch)
    return MakeError(where + "unsupported architecture '" + c.arch +
                     "' (supported: " + SupportedArchNames() + ")");
  HQEKV_ASSIGN_OR_RETURN(auto name, f.GetOptionalString("general.name"));
  c.name = name.value_or(Stem(f.path));
  const std::string a = c.arch + ".";
  if (const GgufValue* kv = f.Find(a + "attention.head_count_kv");
      kv && kv->type == GgufType::kArray)
    return MakeError(where + "per-layer " + a + "attention.head_count_kv arrays are not supported");
  HQEKV_ASSIGN_OR_RETURN(c.n_layers, ConfigInt(f, a + "block_count", std::nullopt));
  HQEKV_ASSIGN_OR_RETURN(c.d_model, ConfigInt(f, a + "embedding_length", std::nullopt));
  HQEKV_ASSIGN_OR_RETURN(c.d_ff, ConfigInt(f, a + "feed_forward_length", std::nullopt));
  HQEKV_ASSIGN_OR_RETURN(c.n_heads, ConfigInt(f, a + "attention.head_count", std::nullopt));
  HQEKV_ASSIGN_OR_RETURN(c.n_kv_heads, ConfigInt(f, a + "attention.head_count_kv", c.n_heads));
  HQEKV_ASSIGN_OR_RETURN(c.max_ctx, ConfigInt(f, a + "context_length", std::nullopt));
  HQEKV_ASSIGN_OR_RETURN(c.rms_eps,
                         ConfigFloat(f, a + "attention.layer_norm_rms_epsilon", std::nullopt));
  HQEKV_ASSIGN_OR_RETURN(c.rope_theta, ConfigFloat(f, a + "rope.freq_base", 10000.0f));
  const int default_head_dim = c.n_heads > 0 ? c.d_model / c.n_heads : 0;
  HQEKV_ASSIGN_OR_RETURN(c.head_dim, ConfigInt(f, a + "attention.key_length", default_head_dim));
  int value_length = 0;
  HQEKV_ASSIGN_OR_RETURN(value_length, ConfigInt(f, a + "attention.value_length", c.head_dim));
  if (value_length != c.head_dim)
    return MakeError(where + "attention.value_length " + std::to_string(value_length) +
                     " differs from key_length " + std::to_string(c.head_dim) + " (not supported)");
  HQEKV_ASSIGN_OR_RETURN(c.rope_dim, ConfigInt(f, a + "rope.dimension_count", c.head_dim));
  c.rope = arch->rope;
  c.qk_norm = arch->qk_norm;
  c.gemma_block = arch->gemma_block;
  c.fused_qkv = arch->fused;
  c.fused_gate_up = arch->fused;
  if (arch->gemma_block) HQEKV_RETURN_IF_ERROR(ReadGemmaKeys(f, a, where, *arch, &c));
  if (arch->plain_window) {
    // Mistral-style: every layer (or the file's pattern) attends over the
    // last W tokens, with the model's own RoPE.
    HQEKV_ASSIGN_OR_RETURN(c.sliding_window, ConfigInt(f, a + "attention.sliding_window", 0));
    c.rope_theta_swa = c.rope_theta;
    HQEKV_RETURN_IF_ERROR(ReadWindowLayers(f, a, where, *arch, &c));
  }

  HQEKV_RETURN_IF_ERROR(ReadRopeScaling(f, a, where, &c));

  for (const auto& ti : f.tensors) {
    Tensor t;
    t.name = ti.name;
    t.type = ti.type;
    t.ne = ti.ne;
    t.data = ti.data;
    t.nbytes = static_cast<size_t>(ti.nbytes);
    m->tensors.emplace(t.name, std::move(t));
  }
  if (m->Find("rope_factors_long.weight") || m->Find("rope_factors_short.weight")) {
    c.longrope = true;
    HQEKV_ASSIGN_OR_RETURN(c.rope_orig_ctx,
                           ConfigInt(f, a + "rope.scaling.original_context_length", c.max_ctx));
    HQEKV_ASSIGN_OR_RETURN(c.rope_attn_factor,
                           ConfigFloat(f, a + "rope.scaling.attn_factor", 1.0f));
  }
  if (m->Find("rope_freqs.weight") && c.rope_scaling == RopeScaling::kLlama3) {
    c.rope_scaling = RopeScaling::kNone;  // the tensor already holds the scaling
    c.rope_factor = 0;
  }
  c.tied_output = m->Find("output.weight") == nullptr;
  c.attn_bias = m->Find("blk.0.attn_q.bias") != nullptr;
  if (const Tensor* emb = m->Find("token_embd.weight");
      emb && emb->ne.size() == 2 && emb->ne[1] <= std::numeric_limits<int32_t>::max())
    c.vocab_size = static_cast<int>(emb->ne[1]);

  HQEKV_ASSIGN_OR_RETURN(auto tok, TokenizerFromGguf(f));
  m->tokenizer = std::move(tok);
  m->gguf = gguf;
  m->mapping = std::move(map);
  HQEKV_RETURN_IF_ERROR(ValidateModel(*m));
  return m;
}

}  // namespace

Status ValidateModel(ModelSource& m) {
  ModelConfig& c = m.config;
  const std::string where = "model '" + m.path + "': ";
  auto positive = [&](const char* what, int v) -> Status {
    if (v <= 0 || v > kMaxConfigDim)
      return MakeError(where + what + " = " + std::to_string(v) + " is out of range (1.." +
                       std::to_string(kMaxConfigDim) + ")");
    return Status::Ok();
  };
  HQEKV_RETURN_IF_ERROR(positive("n_layers", c.n_layers));
  HQEKV_RETURN_IF_ERROR(positive("d_model", c.d_model));
  HQEKV_RETURN_IF_ERROR(positive("n_heads", c.n_heads));
  HQEKV_RETURN_IF_ERROR(positive("n_kv_heads", c.n_kv_heads));
  HQEKV_RETURN_IF_ERROR(positive("head_dim", c.head_dim));
  HQEKV_RETURN_IF_ERROR(positive("d_ff", c.d_ff));
  HQEKV_RETURN_IF_ERROR(positive("max_ctx", c.max_ctx));
  if (c.vocab_size <= 0)
    return MakeError(where +
                     "token_embd.weight missing or not 2-D: cannot determine the vocabulary size");
  if (c.n_heads % c.n_kv_heads != 0)
    return MakeError(where + "n_heads " + std::to_string(c.n_heads) +
                     " is not a multiple of n_kv_heads " + std::to_string(c.n_kv_heads));
  if (c.head_dim % 2 != 0)
    return MakeError(where + "head_dim " + std::to_string(c.head_dim) +
                     " is odd (RoPE needs pairs)");
  // Partial rotary (Phi-4-mini: 96 of 128): the first rope_dim dimensions turn.
  if (c.rope_dim < 2 || c.rope_dim > c.head_dim || c.rope_dim % 2 != 0)
    return MakeError(where + "rope.dimension_count " + std::to_string(c.rope_dim) +
                     " must be even and in [2, head_dim " + std::to_string(c.head_dim) + "]");
  if (!(c.rms_eps > 0) || !(c.rope_theta > 0))
    return MakeError(where + "rms_eps and rope_theta must be positive");
  // RMSNorm divides by sqrt(mean(x^2) + eps): an eps of 1 or more swamps the
  // activations' own scale (real models use 1e-6 .. 1e-5).
  if (!(c.rms_eps < 1))
    return MakeError(where + "layer_norm_rms_epsilon " + std::to_string(c.rms_eps) +
                     " is not below 1");
  if (!c.layer_window.empty() &&
      (c.layer_window.size() != static_cast<size_t>(c.n_layers) || !(c.rope_theta_swa > 0)))
    return MakeError(where +
                     "sliding-window layers need one entry per layer and a positive "
                     "rope.freq_base_swa");
  if (c.rope_scaling != RopeScaling::kNone && !(c.rope_factor > 0))
    return MakeError(where + "rope scaling factor " + std::to_string(c.rope_factor) +
                     " must be positive");
  if (c.rope_scaling == RopeScaling::kLlama3 &&
      (c.rope_orig_ctx <= 0 || c.rope_high_freq_factor <= c.rope_low_freq_factor))
    return MakeError(where + "invalid llama3 rope scaling parameters");
  if (c.rope_scaling == RopeScaling::kYarn && (c.rope_orig_ctx <= 0 || !(c.rope_attn_factor > 0)))
    return MakeError(where + "invalid yarn rope scaling parameters (original_context_length " +
                     std::to_string(c.rope_orig_ctx) + ", attn_factor " +
                     std::to_string(c.rope_attn_factor) + ")");
  if (!m.tokenizer) return MakeError(where + "no tokenizer");
  // One row per token, as llama.cpp requires: more tokens would index past
  // the embedding, fewer would let the model sample ids no token decodes.
  if (m.tokenizer->vocab_size() != c.vocab_size)
    return MakeError(where + "tokenizer has " + std::to_string(m.tokenizer->vocab_size()) +
                     " tokens but token_embd.weight has " + std::to_string(c.vocab_size) +
                     " rows (model and tokenizer must share one vocabulary)");

  // block_count against the tensors present, before building per-layer
  // expectations: every layer has >= 9 tensors, so 1M declared layers in a
  // small file is refused at once instead of after seconds and gigabytes.
  const size_t per_layer = 9 + (c.attn_bias ? 3 : 0) + (c.qk_norm ? 2 : 0) +
                           (c.gemma_block ? 2 : 0) - (c.fused_qkv ? 2 : 0) -
                           (c.fused_gate_up ? 1 : 0);
  if (m.tensors.size() < per_layer * static_cast<size_t>(c.n_layers)) {
    // Name the first missing layer; the scan is bounded by the tensors present.
    const int scan =
        static_cast<int>(std::min<size_t>(c.n_layers, m.tensors.size() / per_layer + 1));
    int l = 0;
    while (l < scan && m.Find("blk." + std::to_string(l) + ".attn_norm.weight")) ++l;
    const std::string first =
        l < scan ? "required tensor 'blk." + std::to_string(l) + ".attn_norm.weight' is missing: "
                 : "";
    return MakeError(where + first + "n_layers (block_count) = " + std::to_string(c.n_layers) +
                     " needs at least " +
                     std::to_string(per_layer * static_cast<size_t>(c.n_layers)) +
                     " tensors, the file has " + std::to_string(m.tensors.size()));
  }
  const int64_t d = c.d_model, q = c.q_dim(), kv = c.kv_dim(), ff = c.d_ff, V = c.vocab_size;
  // (name, expected shape, must be F32)
  struct Want {
    std::string name;
    std::vector<int64_t> ne;
    bool f32;
  };
  std::vector<Want> want = {{"token_embd.weight", {d, V}, false},
                            {"output_norm.weight", {d}, true}};
  if (!c.tied_output) want.push_back({"output.weight", {d, V}, false});
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    want.push_back({b + "attn_norm.weight", {d}, true});
    if (c.fused_qkv) {
      want.push_back({b + "attn_qkv.weight", {d, q + 2 * kv}, false});
    } else {
      want.push_back({b + "attn_q.weight", {d, q}, false});
      want.push_back({b + "attn_k.weight", {d, kv}, false});
      want.push_back({b + "attn_v.weight", {d, kv}, false});
    }
    want.push_back({b + "attn_output.weight", {q, d}, false});
    want.push_back({b + "ffn_norm.weight", {d}, true});
    if (c.fused_gate_up) {
      want.push_back({b + "ffn_up.weight", {d, 2 * ff}, false});
    } else {
      want.push_back({b + "ffn_gate.weight", {d, ff}, false});
      want.push_back({b + "ffn_up.weight", {d, ff}, false});
    }
    want.push_back({b + "ffn_down.weight", {ff, d}, false});
    if (c.attn_bias) {
      want.push_back({b + "attn_q.bias", {q}, true});
      want.push_back({b + "attn_k.bias", {kv}, true});
      want.push_back({b + "attn_v.bias", {kv}, true});
    }
    if (c.qk_norm) {
      want.push_back({b + "attn_q_norm.weight", {c.head_dim}, true});
      want.push_back({b + "attn_k_norm.weight", {c.head_dim}, true});
    }
    if (c.gemma_block) {
      want.push_back({b + "post_attention_norm.weight", {d}, true});
      want.push_back({b + "post_ffw_norm.weight", {d}, true});
    }
  }
  // LongRoPE: both factor tensors, f32, one divisor per rotated pair.
  if (c.longrope) {
    const int pairs = c.rope_dim / 2;
    for (const char* name : {"rope_factors_long.weight", "rope_factors_short.weight"}) {
      const Tensor* t = m.Find(name);
      if (!t || t->type != TensorType::kF32 || t->ne.size() != 1 || t->ne[0] != pairs)
        return MakeError(where + "LongRoPE needs " + name + " as " + std::to_string(pairs) +
                         " f32 values (rope.dimension_count / 2)");
      for (int i = 0; i < pairs; ++i) {
        if (!(t->f32()[i] > 0) || !std::isfinite(t->f32()[i]))
          return MakeError(where + name + " value " + std::to_string(i) +
                           " is not a positive finite number");
      }
    }
    if (c.rope_orig_ctx <= 0 || !(c.rope_attn_factor > 0))
      return MakeError(where + "invalid LongRoPE original_context_length / attn_factor");
  } else if (m.Find("blk.0.rope_factors_long.weight")) {
    return MakeError(where + "per-layer LongRoPE factors (blk.N.rope_factors_*) are not supported");
  }
  if (m.Find("rope_freqs.weight")) want.push_back({"rope_freqs.weight", {c.head_dim / 2}, true});
  for (const Want& w : want) {
    const Tensor* t = m.Find(w.name);
    if (!t) return MakeError(where + "required tensor '" + w.name + "' is missing");
    if (t->ne != w.ne)
      return MakeError(where + "tensor '" + w.name + "' has shape " + ShapeString(t->ne) +
                       ", expected " + ShapeString(w.ne) + " from the config");
    if (w.f32 && t->type != TensorType::kF32)
      return MakeError(where + "tensor '" + w.name + "' has type " + TensorTypeName(t->type) +
                       ", expected F32");
    auto bytes = TensorBytes(t->type, t->ne);
    if (!bytes || *bytes != t->nbytes || (t->nbytes > 0 && t->data == nullptr))
      return MakeError(where + "tensor '" + w.name + "' has inconsistent size");
  }

  LayoutHash h;
  h.Add(c.arch);
  for (int v : {c.n_layers, c.d_model, c.n_heads, c.n_kv_heads, c.head_dim, c.d_ff, c.vocab_size})
    h.Add(std::to_string(v));
  // Window layers change what the KV cache holds; files without one keep
  // the identity they always had.
  for (int w : c.layer_window) h.Add("w" + std::to_string(w));
  for (const auto& [name, t] : m.tensors)
    h.Add(name + ":" + TensorTypeName(t.type) + ShapeString(t.ne));
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h.h));
  m.identity = hex;
  return Status::Ok();
}

Result<std::unique_ptr<ModelSource>> LoadModel(const std::string& path,
                                               const std::string& tokenizer_path) {
  HQEKV_ASSIGN_OR_RETURN(auto map, MappedFile::Open(path, Residence::kPrivateCopy));
  std::shared_ptr<MappedFile> shared = std::move(map);
  if (shared->size() >= 4 && std::memcmp(shared->data(), "GGUF", 4) == 0)
    return LoadGguf(shared->data(), shared->size(), path, shared);
  HQEKV_ASSIGN_OR_RETURN(auto m, LoadLlama2c(std::move(shared), path, tokenizer_path));
  HQEKV_RETURN_IF_ERROR(ValidateModel(*m));
  return m;
}

}  // namespace hqekv

namespace hqekv {

Result<std::unique_ptr<ModelSource>> LoadGgufImage(const uint8_t* data, size_t size,
                                                   const std::string& name) {
  return LoadGguf(data, size, name, nullptr);
}

}  // namespace hqekv
