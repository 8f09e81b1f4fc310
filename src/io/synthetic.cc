#include "io/synthetic.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "core/half.h"
#include "core/splitmix64.h"
#include "io/arch.h"
#include "io/gguf_writer.h"

namespace hqekv {
namespace {

// A stateless counter hash (SplitMix64's output function).
uint64_t Mix(uint64_t x) { return SplitMix64Hash(x); }

uint64_t NameSeed(const std::string& name, uint64_t seed) {
  uint64_t h = Mix(seed);
  for (unsigned char c : name) h = Mix(h ^ c);
  return h;
}

// Uniform in [-1, 1) from element index e.
float UnitAt(uint64_t seed, uint64_t e) {
  return static_cast<float>(
      static_cast<double>(Mix(seed ^ (e * 0xD6E8FEB86659FD93ull)) >> 11) * 0x1.0p-52 - 1.0);
}

uint8_t ByteAt(uint64_t seed, uint64_t pos) {
  return static_cast<uint8_t>(Mix(seed ^ ((pos >> 3) * 0xD6E8FEB86659FD93ull)) >> (8 * (pos & 7)));
}

// Filler for a matrix of the given type whose values have standard deviation
// about `sd`: random payload bytes, with every scale field set so that.
GgufWriter::Filler MatrixFiller(TensorType t, uint64_t seed, float sd) {
  return [t, seed, sd](uint64_t off, uint8_t* dst, size_t count) {
    const float kUniformSd = 0.57735f;  // sd of U[-1, 1)
    for (size_t i = 0; i < count; ++i) {
      const uint64_t pos = off + i;
      uint8_t b = ByteAt(seed, pos);
      switch (t) {
        case TensorType::kF32: {
          const float v = UnitAt(seed, pos / 4) * sd / kUniformSd;
          uint8_t bytes[4];
          std::memcpy(bytes, &v, 4);
          b = bytes[pos % 4];
          break;
        }
        case TensorType::kF16:
        case TensorType::kBF16: {
          const float v = UnitAt(seed, pos / 2) * sd / kUniformSd;
          uint16_t h;
          if (t == TensorType::kF16) {
            h = F32ToF16(v);
          } else {
            uint32_t bits;
            std::memcpy(&bits, &v, 4);
            h = static_cast<uint16_t>(bits >> 16);
          }
          b = static_cast<uint8_t>(h >> (8 * (pos % 2)));
          break;
        }
        case TensorType::kQ8_0:
        case TensorType::kQ4_0: {
          const uint64_t in = pos % (t == TensorType::kQ8_0 ? 34 : 18);
          // q uniform: int8 sd ~ 73.9, (nibble - 8) sd ~ 4.61.
          const f16_t d = F32ToF16(sd / (t == TensorType::kQ8_0 ? 73.9f : 4.61f));
          if (in < 2) b = static_cast<uint8_t>(d >> (8 * in));
          break;
        }
        case TensorType::kQ4_K: {
          // Every sub-block scale and min = 32 (bytes 0..7 = 0xA0, 8..11 = 0);
          // dmin = 7.5 d centres the values; sd = d * 32 * 4.61.
          const uint64_t in = pos % 144;
          const float d = sd / (32 * 4.61f);
          if (in < 2)
            b = static_cast<uint8_t>(F32ToF16(d) >> (8 * in));
          else if (in < 4)
            b = static_cast<uint8_t>(F32ToF16(7.5f * d) >> (8 * (in - 2)));
          else if (in < 12)
            b = 0xA0;
          else if (in < 16)
            b = 0;
          break;
        }
        case TensorType::kQ4_1:
        case TensorType::kQ5_1: {
          // d, then m = -(q mean) d centres the values; q uniform on 0..15 (sd
          // 4.61) or 0..31 (sd 9.23).
          const bool five = t == TensorType::kQ5_1;
          const uint64_t in = pos % (five ? 24 : 20);
          const float d = sd / (five ? 9.23f : 4.61f);
          if (in < 2)
            b = static_cast<uint8_t>(F32ToF16(d) >> (8 * in));
          else if (in < 4)
            b = static_cast<uint8_t>(F32ToF16((five ? -15.5f : -7.5f) * d) >> (8 * (in - 2)));
          break;
        }
        case TensorType::kQ5_0:
        case TensorType::kIQ4_NL: {
          // q - 16 uniform on -16..15 (sd 9.23); IQ4_NL table values sd ~ 66.
          const bool nl = t == TensorType::kIQ4_NL;
          const uint64_t in = pos % (nl ? 18 : 22);
          if (in < 2) b = static_cast<uint8_t>(F32ToF16(sd / (nl ? 66.f : 9.23f)) >> (8 * in));
          break;
        }
        case TensorType::kQ5_K: {
          // As Q4_K (every scale and min 32), q uniform on 0..31: dmin = 15.5 d.
          const uint64_t in = pos % 176;
          const float d = sd / (32 * 9.23f);
          if (in < 2)
            b = static_cast<uint8_t>(F32ToF16(d) >> (8 * in));
          else if (in < 4)
            b = static_cast<uint8_t>(F32ToF16(15.5f * d) >> (8 * (in - 2)));
          else if (in < 12)
            b = 0xA0;
          else if (in < 16)
            b = 0;
          break;
        }
        case TensorType::kQ2_K: {
          // Every scale and min 8 (bytes 0..15 = 0x88); q uniform on 0..3 (mean
          // 1.5, sd 1.118): dmin = 1.5 d.
          const uint64_t in = pos % 84;
          const float d = sd / (8 * 1.118f);
          if (in < 16)
            b = 0x88;
          else if (in >= 80 && in < 82)
            b = static_cast<uint8_t>(F32ToF16(d) >> (8 * (in - 80)));
          else if (in >= 82)
            b = static_cast<uint8_t>(F32ToF16(1.5f * d) >> (8 * (in - 82)));
          break;
        }
        case TensorType::kQ3_K: {
          // Random 6-bit scales (sd ~ 18.5 after - 32), q - 4*bit uniform on
          // -4..3 (sd 2.29).
          const uint64_t in = pos % 110;
          if (in >= 108)
            b = static_cast<uint8_t>(F32ToF16(sd / (18.5f * 2.29f)) >> (8 * (in - 108)));
          break;
        }
        case TensorType::kIQ4_XS: {
          // Random 6-bit scales (sd ~ 18.5 after - 32), table values sd ~ 66.
          const uint64_t in = pos % 136;
          if (in < 2) b = static_cast<uint8_t>(F32ToF16(sd / (18.5f * 66.f)) >> (8 * in));
          break;
        }
        case TensorType::kQ6_K: {
          // Scales 8..15 (mean 11.5); q - 32 has sd ~ 18.5.
          const uint64_t in = pos % 210;
          if (in >= 192 && in < 208)
            b = static_cast<uint8_t>(8 + (b & 7));
          else if (in >= 208)
            b = static_cast<uint8_t>(F32ToF16(sd / (11.5f * 18.5f)) >> (8 * (in - 208)));
          break;
        }
      }
      dst[i] = b;
    }
  };
}

std::vector<uint8_t> F32Bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// Norm weights 1 + 0.2 u, biases 0.1 u.
std::vector<float> VecAround(uint64_t seed, int n, float centre, float spread) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = centre + spread * UnitAt(seed, i);
  return v;
}

// llama.cpp's quantizer (llama-quant.cpp) falls back to these when a row is
// not a multiple of 256.
TensorType FallbackType(TensorType t) {
  switch (t) {
    case TensorType::kQ2_K:
    case TensorType::kQ3_K:
    case TensorType::kIQ4_XS:
      return TensorType::kIQ4_NL;
    case TensorType::kQ4_K:
      return TensorType::kQ5_0;
    case TensorType::kQ5_K:
      return TensorType::kQ5_1;
    case TensorType::kQ6_K:
      return TensorType::kQ8_0;
    default:
      return t;
  }
}

int HeadDim(const SyntheticSpec& s) { return s.head_dim > 0 ? s.head_dim : s.d_model / s.n_heads; }

}  // namespace

Result<TensorType> SyntheticMatrixType(const SyntheticSpec& s, const std::string& name,
                                       int64_t row_length) {
  std::string base = name;
  if (base.rfind("blk.", 0) == 0) base = base.substr(base.find('.', 4) + 1);
  if (base.size() > 7 && base.compare(base.size() - 7, 7, ".weight") == 0)
    base.resize(base.size() - 7);
  TensorType t = s.type;
  for (const auto& [n, type] : s.type_overrides)
    if (n == base) t = type;
  if (row_length % BlockSize(t) != 0) t = FallbackType(t);
  if (row_length % BlockSize(t) != 0) {
    return MakeError("synthetic model: " + name + " has rows of " + std::to_string(row_length) +
                     " values, not a multiple of the " + TensorTypeName(t) + " block");
  }
  return t;
}

uint64_t SyntheticWeightBytes(const SyntheticSpec& s) {
  const ArchTraits* arch = FindArch(s.arch);
  const int hd = HeadDim(s);
  const int64_t q = int64_t(s.n_heads) * hd, kv = int64_t(s.n_kv_heads) * hd;
  auto mat = [&](const std::string& name, int64_t in, int64_t out) -> uint64_t {
    auto t = SyntheticMatrixType(s, name, in);
    return t.ok() ? *TensorBytes(*t, {in, out}) : 0;
  };
  uint64_t b = mat("token_embd", s.d_model, s.vocab) +
               (s.tied_output ? 0 : mat("output", s.d_model, s.vocab)) + 4ull * s.d_model;
  const uint64_t layer =
      mat("attn_q", s.d_model, q) + mat("attn_k", s.d_model, kv) + mat("attn_v", s.d_model, kv) +
      mat("attn_output", q, s.d_model) + mat("ffn_gate", s.d_model, s.d_ff) +
      mat("ffn_up", s.d_model, s.d_ff) + mat("ffn_down", s.d_ff, s.d_model) + 8ull * s.d_model +
      (arch && arch->gemma_block ? 8ull * s.d_model : 0) + (arch && arch->qk_norm ? 8ull * hd : 0) +
      (arch && arch->qkv_bias ? 4ull * (q + 2 * kv) : 0);
  return b + layer * s.n_layers;
}

Status WriteSyntheticGguf(const SyntheticSpec& s, const std::string& path, bool overwrite) {
  const ArchTraits* arch = FindArch(s.arch);
  if (!arch) {
    return MakeError("synthetic model: unknown architecture '" + s.arch +
                     "' (supported: " + SupportedArchNames() + ")");
  }
  if (s.vocab < 259 || s.n_layers <= 0 || s.d_model <= 0 || s.n_heads <= 0 || s.n_kv_heads <= 0 ||
      s.n_heads % s.n_kv_heads != 0 || s.d_ff <= 0 || s.max_ctx <= 0) {
    return MakeError(
        "synthetic model: invalid shape (vocab >= 259, heads divisible by kv heads, sizes > 0)");
  }
  const int hd = HeadDim(s);
  const int q = s.n_heads * hd, kv = s.n_kv_heads * hd;
  GgufWriter w;
  const std::string a = s.arch + ".";
  w.SetString("general.architecture", s.arch);
  w.SetString("general.name", s.name.empty() ? "synthetic-" + s.arch : s.name);
  w.SetU32(a + "block_count", s.n_layers);
  w.SetU32(a + "embedding_length", s.d_model);
  w.SetU32(a + "feed_forward_length", s.d_ff);
  w.SetU32(a + "attention.head_count", s.n_heads);
  w.SetU32(a + "attention.head_count_kv", s.n_kv_heads);
  w.SetU32(a + "attention.key_length", hd);
  w.SetU32(a + "attention.value_length", hd);
  w.SetU32(a + "rope.dimension_count", s.rope_dim > 0 ? s.rope_dim : hd);
  w.SetU32(a + "context_length", s.max_ctx);
  w.SetF32(a + "attention.layer_norm_rms_epsilon", 1e-5f);
  w.SetF32(a + "rope.freq_base", s.rope_theta);
  if (s.sliding_window > 0) w.SetU32(a + "attention.sliding_window", s.sliding_window);
  if (s.rope_theta_swa > 0) w.SetF32(a + "rope.freq_base_swa", s.rope_theta_swa);
  if (s.final_softcap > 0) w.SetF32(a + "final_logit_softcapping", s.final_softcap);
  if (s.attn_softcap > 0) w.SetF32(a + "attn_logit_softcapping", s.attn_softcap);
  if (s.rope_factor > 0) {
    w.SetString(a + "rope.scaling.type", s.rope_scaling_type);
    w.SetF32(a + "rope.scaling.factor", s.rope_factor);
    if (s.rope_scaling_type == "llama3") {
      w.SetF32(a + "rope.scaling.low_freq_factor", 1.0f);
      w.SetF32(a + "rope.scaling.high_freq_factor", 4.0f);
    }
    w.SetU32(a + "rope.scaling.original_context_length", s.rope_orig_ctx);
  }
  if (s.longrope) {
    if (s.rope_factor > 0) return MakeError("synthetic model: LongRoPE and rope scaling together");
    if (s.rope_orig_ctx < 2 || s.max_ctx <= s.rope_orig_ctx)
      return MakeError("synthetic model: LongRoPE needs 2 <= rope_orig_ctx < max_ctx");
    const double scale = double(s.max_ctx) / s.rope_orig_ctx;
    w.SetU32(a + "rope.scaling.original_context_length", s.rope_orig_ctx);
    w.SetF32(
        a + "rope.scaling.attn_factor",
        static_cast<float>(std::sqrt(1 + std::log(scale) / std::log(double(s.rope_orig_ctx)))));
  }
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<float> scores = {0, 0, 0};
  std::vector<int32_t> types = {2, 3, 3};
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    tokens.push_back(buf);
    scores.push_back(0);
    types.push_back(6);
  }
  for (int i = static_cast<int>(tokens.size()); i < s.vocab; ++i) {
    tokens.push_back("\xE2\x96\x81t" + std::to_string(i));
    scores.push_back(-static_cast<float>(i));
    types.push_back(1);
  }
  w.SetString("tokenizer.ggml.model", "llama");
  w.SetStringArray("tokenizer.ggml.tokens", tokens);
  w.SetF32Array("tokenizer.ggml.scores", scores);
  w.SetI32Array("tokenizer.ggml.token_type", types);
  w.SetU32("tokenizer.ggml.bos_token_id", 1);
  w.SetU32("tokenizer.ggml.eos_token_id", 2);
  w.SetU32("tokenizer.ggml.unknown_token_id", 0);

  auto seed = [&](const std::string& n) { return NameSeed(n, s.seed); };
  auto matrix = [&](const std::string& n, int64_t in, int64_t out, float sd) -> Status {
    HQEKV_ASSIGN_OR_RETURN(const TensorType t, SyntheticMatrixType(s, n, in));
    return w.AddTensorFill(n, t, {in, out}, MatrixFiller(t, seed(n), sd));
  };
  auto vec = [&](const std::string& n, int len, float centre, float spread) {
    return w.AddTensor(n, TensorType::kF32, {len},
                       F32Bytes(VecAround(seed(n), len, centre, spread)));
  };
  // Gemma multiplies the embedding by sqrt(d_model) (and ties the output to
  // it): values of sd 1/sqrt(d_model) keep the residual stream O(1) and the
  // logits a few nats wide, as in the real models, so that attention (and a
  // sliding-window mask) visibly moves the next-token distribution.
  const float embd_sd = arch->gemma_block ? 1.0f / std::sqrt(static_cast<float>(s.d_model)) : 1.0f;
  HQEKV_RETURN_IF_ERROR(matrix("token_embd.weight", s.d_model, s.vocab, embd_sd));
  if (s.longrope) {
    const int pairs = (s.rope_dim > 0 ? s.rope_dim : hd) / 2;
    HQEKV_RETURN_IF_ERROR(vec("rope_factors_long.weight", pairs, 8.5f, 7.5f));
    HQEKV_RETURN_IF_ERROR(vec("rope_factors_short.weight", pairs, 1.1f, 0.1f));
  }
  for (int l = 0; l < s.n_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    const float in_sd = 1.0f / std::sqrt(static_cast<float>(s.d_model));
    HQEKV_RETURN_IF_ERROR(vec(p + "attn_norm.weight", s.d_model, 1.0f, 0.2f));
    if (arch->fused) {
      HQEKV_RETURN_IF_ERROR(matrix(p + "attn_qkv.weight", s.d_model, q + 2 * kv, in_sd));
    } else {
      HQEKV_RETURN_IF_ERROR(matrix(p + "attn_q.weight", s.d_model, q, in_sd));
      HQEKV_RETURN_IF_ERROR(matrix(p + "attn_k.weight", s.d_model, kv, in_sd));
      HQEKV_RETURN_IF_ERROR(matrix(p + "attn_v.weight", s.d_model, kv, in_sd));
    }
    if (arch->qkv_bias) {
      HQEKV_RETURN_IF_ERROR(vec(p + "attn_q.bias", q, 0.0f, 0.1f));
      HQEKV_RETURN_IF_ERROR(vec(p + "attn_k.bias", kv, 0.0f, 0.1f));
      HQEKV_RETURN_IF_ERROR(vec(p + "attn_v.bias", kv, 0.0f, 0.1f));
    }
    if (arch->qk_norm) {
      HQEKV_RETURN_IF_ERROR(vec(p + "attn_q_norm.weight", hd, 1.0f, 0.2f));
      HQEKV_RETURN_IF_ERROR(vec(p + "attn_k_norm.weight", hd, 1.0f, 0.2f));
    }
    HQEKV_RETURN_IF_ERROR(
        matrix(p + "attn_output.weight", q, s.d_model, 1.0f / std::sqrt(float(q))));
    if (arch->gemma_block)
      HQEKV_RETURN_IF_ERROR(vec(p + "post_attention_norm.weight", s.d_model, 1.0f, 0.2f));
    HQEKV_RETURN_IF_ERROR(vec(p + "ffn_norm.weight", s.d_model, 1.0f, 0.2f));
    if (arch->fused) {  // gate rows, then up rows
      HQEKV_RETURN_IF_ERROR(matrix(p + "ffn_up.weight", s.d_model, 2 * int64_t{s.d_ff}, in_sd));
    } else {
      HQEKV_RETURN_IF_ERROR(matrix(p + "ffn_gate.weight", s.d_model, s.d_ff, in_sd));
      HQEKV_RETURN_IF_ERROR(matrix(p + "ffn_up.weight", s.d_model, s.d_ff, in_sd));
    }
    HQEKV_RETURN_IF_ERROR(
        matrix(p + "ffn_down.weight", s.d_ff, s.d_model, 1.0f / std::sqrt(float(s.d_ff))));
    if (arch->gemma_block)
      HQEKV_RETURN_IF_ERROR(vec(p + "post_ffw_norm.weight", s.d_model, 1.0f, 0.2f));
  }
  HQEKV_RETURN_IF_ERROR(vec("output_norm.weight", s.d_model, 1.0f, 0.2f));
  if (!s.tied_output) {
    HQEKV_RETURN_IF_ERROR(
        matrix("output.weight", s.d_model, s.vocab, 1.0f / std::sqrt(float(s.d_model))));
  }
  return w.WriteFile(path, overwrite);
}

}  // namespace hqekv
