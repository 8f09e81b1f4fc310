// GGUF writer -> reader round trips, targeted malformed files, and model
// validation (architectures, required keys, tensor shapes) on tiny models.
#include "io/gguf.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <unistd.h>

#include "io/gguf_writer.h"
#include "io/mmap_file.h"
#include "io/model_source.h"

namespace hqekv {
namespace {

std::vector<uint8_t> RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> b(n);
  for (auto& x : b) x = static_cast<uint8_t>(rng());
  return b;
}

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// ---------------------------------------------------------------- round trip
TEST(GgufWriter, RoundTripsEveryValueAndTensorType) {
  for (uint32_t version : {2u, 3u}) {
    for (uint32_t alignment : {32u, 64u, 8u}) {
      GgufWriter w;
      w.set_version(version);
      w.set_alignment(alignment);
      w.SetU8("t.u8", 200);
      w.SetI8("t.i8", -100);
      w.SetU16("t.u16", 60000);
      w.SetI16("t.i16", -30000);
      w.SetU32("t.u32", 4000000000u);
      w.SetI32("t.i32", -2000000000);
      w.SetU64("t.u64", 1ull << 63);
      w.SetI64("t.i64", -(1ll << 62));
      w.SetF32("t.f32", 1.5f);
      w.SetF64("t.f64", -2.25e-300);
      w.SetBool("t.bool", true);
      w.SetString("t.str", std::string("h\xC3\xA9llo\0x", 8));
      w.SetStringArray("t.astr", {"a", "", "\xF0\x9F\x98\x80"});
      w.SetF32Array("t.af32", {0.5f, -1.0f});
      w.SetI32Array("t.ai32", {-1, 7});
      w.SetIntArray("t.au8", GgufType::kU8, {0, 255});
      w.SetIntArray("t.ai64", GgufType::kI64, {-5, 1ll << 40});
      w.SetIntArray("t.abool", GgufType::kBool, {1, 0, 1});
      w.SetFloatArray("t.af64", GgufType::kF64, {3.25});
      w.SetStringArray("t.empty", {});
      std::vector<std::vector<uint8_t>> payloads;
      const std::vector<std::pair<TensorType, std::vector<int64_t>>> tensors = {
          {TensorType::kF32, {3}},         {TensorType::kF16, {5, 2}},
          {TensorType::kBF16, {4, 1, 3}},  {TensorType::kQ8_0, {64, 3}},
          {TensorType::kQ4_0, {32, 2, 2}}, {TensorType::kQ4_K, {256, 2}},
          {TensorType::kQ6_K, {512, 1}},   {TensorType::kF32, {2, 2, 2, 2}}};
      for (size_t k = 0; k < tensors.size(); ++k) {
        const auto& [type, ne] = tensors[k];
        payloads.push_back(RandomBytes(*TensorBytes(type, ne), static_cast<uint32_t>(k)));
        ASSERT_TRUE(w.AddTensor("w" + std::to_string(k), type, ne, payloads.back()).ok());
      }
      const std::vector<uint8_t> img = w.Serialize();
      auto r = ParseGguf(img.data(), img.size(), "rt.gguf");
      ASSERT_TRUE(r.ok()) << r.message();
      const GgufFile& f = *r;
      EXPECT_EQ(f.version, version);
      EXPECT_EQ(f.alignment, alignment);
      EXPECT_EQ(f.data_offset % alignment, 0u);
      EXPECT_EQ(f.Find("t.u8")->u, 200u);
      EXPECT_EQ(f.Find("t.i8")->i, -100);
      EXPECT_EQ(f.Find("t.u16")->u, 60000u);
      EXPECT_EQ(f.Find("t.i16")->i, -30000);
      EXPECT_EQ(f.Find("t.u32")->u, 4000000000u);
      EXPECT_EQ(f.Find("t.i32")->i, -2000000000);
      EXPECT_EQ(f.Find("t.u64")->u, 1ull << 63);
      EXPECT_FALSE(f.GetInt("t.u64").ok());  // does not fit int64
      EXPECT_EQ(*f.GetInt("t.i64"), -(1ll << 62));
      EXPECT_EQ(f.Find("t.f32")->f, 1.5);
      EXPECT_EQ(*f.GetFloat("t.f64"), -2.25e-300);
      EXPECT_EQ(**f.GetOptionalBool("t.bool"), true);
      EXPECT_EQ(*f.GetString("t.str"), std::string("h\xC3\xA9llo\0x", 8));
      EXPECT_EQ(f.Find("t.astr")->strings, (std::vector<std::string>{"a", "", "\xF0\x9F\x98\x80"}));
      EXPECT_EQ(f.Find("t.af32")->floats, (std::vector<double>{0.5, -1.0}));
      EXPECT_EQ(f.Find("t.ai32")->ints, (std::vector<int64_t>{-1, 7}));
      EXPECT_EQ(f.Find("t.au8")->ints, (std::vector<int64_t>{0, 255}));
      EXPECT_EQ(f.Find("t.ai64")->ints, (std::vector<int64_t>{-5, 1ll << 40}));
      EXPECT_EQ(f.Find("t.abool")->ints, (std::vector<int64_t>{1, 0, 1}));
      EXPECT_EQ(f.Find("t.af64")->floats, (std::vector<double>{3.25}));
      EXPECT_EQ(f.Find("t.empty")->array_size(), 0u);
      EXPECT_EQ(f.Find("t.empty")->array_type, GgufType::kString);
      EXPECT_EQ(f.Find("nope"), nullptr);
      EXPECT_FALSE(f.GetString("nope").ok());
      EXPECT_FALSE(f.GetString("t.u8").ok());  // wrong type
      ASSERT_EQ(f.tensors.size(), tensors.size());
      for (size_t k = 0; k < tensors.size(); ++k) {
        const GgufTensorInfo& t = f.tensors[k];
        EXPECT_EQ(t.name, "w" + std::to_string(k));
        EXPECT_EQ(t.type, tensors[k].first);
        EXPECT_EQ(t.ne, tensors[k].second);
        ASSERT_EQ(t.nbytes, payloads[k].size());
        EXPECT_EQ(std::memcmp(t.data, payloads[k].data(), t.nbytes), 0);
        EXPECT_EQ(static_cast<size_t>(t.data - img.data()) % alignment, 0u);
        EXPECT_EQ(f.FindTensor(t.name), &t);
      }
      // Serializing what was read gives the same bytes (writer is deterministic).
      GgufWriter w2;
      w2.set_version(version);
      w2.set_alignment(alignment);
      for (const auto& [k, v] : f.metadata)
        if (k != "general.alignment") w2.Set(k, v);
      for (const auto& t : f.tensors)
        ASSERT_TRUE(w2.AddTensor(t.name, t.type, t.ne, t.data, t.nbytes).ok());
      EXPECT_EQ(w2.Serialize(), img);
    }
  }
}

TEST(GgufWriter, WriteFileFillerAndNoOverwrite) {
  char tmpl[] = "/tmp/hqekv_gguf_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string path = std::string(tmpl) + "/m.gguf";
  GgufWriter w;
  w.SetString("general.architecture", "test");
  const int64_t n = 3 * 1024 * 1024;  // > one 4 MiB piece in bytes (Q8_0: 34/32)
  ASSERT_TRUE(
      w.AddTensorFill("big", TensorType::kQ8_0, {n}, [](uint64_t off, uint8_t* dst, size_t cnt) {
         for (size_t k = 0; k < cnt; ++k)
           dst[k] = static_cast<uint8_t>((off + k) * 2654435761u >> 13);
       }).ok());
  ASSERT_TRUE(w.WriteFile(path).ok());
  auto again = w.WriteFile(path);
  ASSERT_FALSE(again.ok());
  EXPECT_TRUE(Contains(again.message(), path)) << again.message();
  ASSERT_TRUE(w.WriteFile(path, /*overwrite=*/true).ok());
  auto map = MappedFile::Open(path);
  ASSERT_TRUE(map.ok()) << map.message();
  EXPECT_EQ(std::vector<uint8_t>((*map)->data(), (*map)->data() + (*map)->size()), w.Serialize());
  auto f = ParseGguf((*map)->data(), (*map)->size(), path);
  ASSERT_TRUE(f.ok()) << f.message();
  const GgufTensorInfo& t = f->tensors.at(0);
  ASSERT_EQ(t.nbytes, static_cast<uint64_t>(n / 32 * 34));
  for (uint64_t k : {uint64_t{0}, uint64_t{12345}, t.nbytes - 1})
    EXPECT_EQ(t.data[k], static_cast<uint8_t>(k * 2654435761u >> 13)) << k;
  std::remove(path.c_str());
  rmdir(tmpl);
}

TEST(GgufWriter, RejectsBadTensors) {
  GgufWriter w;
  EXPECT_FALSE(w.AddTensor("a", TensorType::kQ8_0, {33}, std::vector<uint8_t>(34))
                   .ok());  // not a block multiple
  EXPECT_FALSE(
      w.AddTensor("a", TensorType::kF32, {4}, std::vector<uint8_t>(15)).ok());  // size mismatch
  EXPECT_TRUE(w.AddTensor("a", TensorType::kF32, {4}, std::vector<uint8_t>(16)).ok());
  EXPECT_FALSE(
      w.AddTensor("a", TensorType::kF32, {4}, std::vector<uint8_t>(16)).ok());  // duplicate
}

TEST(GgufTypes, GeometryAndNames) {
  EXPECT_EQ(*TensorTypeFromGgml(0), TensorType::kF32);
  EXPECT_EQ(*TensorTypeFromGgml(30), TensorType::kBF16);
  EXPECT_EQ(*TensorTypeFromGgml(14), TensorType::kQ6_K);
  EXPECT_FALSE(TensorTypeFromGgml(4).has_value());   // Q4_2: removed from ggml
  EXPECT_FALSE(TensorTypeFromGgml(16).has_value());  // IQ2_XXS: not supported
  // ggml ids of the legacy, K and IQ4 types (ggml.h enum ggml_type).
  EXPECT_EQ(*TensorTypeFromGgml(3), TensorType::kQ4_1);
  EXPECT_EQ(*TensorTypeFromGgml(6), TensorType::kQ5_0);
  EXPECT_EQ(*TensorTypeFromGgml(7), TensorType::kQ5_1);
  EXPECT_EQ(*TensorTypeFromGgml(10), TensorType::kQ2_K);
  EXPECT_EQ(*TensorTypeFromGgml(11), TensorType::kQ3_K);
  EXPECT_EQ(*TensorTypeFromGgml(13), TensorType::kQ5_K);
  EXPECT_EQ(*TensorTypeFromGgml(20), TensorType::kIQ4_NL);
  EXPECT_EQ(*TensorTypeFromGgml(23), TensorType::kIQ4_XS);
  EXPECT_EQ(*TensorBytes(TensorType::kQ5_0, {896, 2}), 2u * 28 * 22);  // n_embd 896: 28 blocks
  EXPECT_EQ(*TensorBytes(TensorType::kIQ4_XS, {512}), 272u);
  EXPECT_EQ(GgmlTypeId(TensorType::kQ4_K), 12u);
  EXPECT_EQ(*TensorTypeFromName("q8_0"), TensorType::kQ8_0);
  EXPECT_EQ(*TensorBytes(TensorType::kQ4_K, {512, 3}), 2u * 144 * 3);
  EXPECT_EQ(*TensorBytes(TensorType::kQ6_K, {256}), 210u);
  EXPECT_EQ(*TensorBytes(TensorType::kQ4_0, {64}), 36u);
  EXPECT_FALSE(TensorBytes(TensorType::kF32, {1ll << 40, 1ll << 40}).has_value());  // overflow
  EXPECT_FALSE(TensorBytes(TensorType::kF32, {-1}).has_value());
  EXPECT_FALSE(TensorBytes(TensorType::kF32, {1ll << 62}).has_value());  // 2^64 bytes wraps to 0
  EXPECT_FALSE(TensorBytes(TensorType::kQ8_0, {1ll << 62}).has_value());
}

// ---------------------------------------------------------------- tiny models
struct TinySpec {
  std::string arch = "llama";
  TensorType wtype = TensorType::kF32;
  bool tied = false;
  int d = 32, heads = 4, kv_heads = 2, ff = 64, layers = 2;
};

// A valid small model with a SentencePiece vocab (byte tokens + a few pieces).
GgufWriter TinyModel(const TinySpec& s) {
  GgufWriter w;
  const std::string a = s.arch + ".";
  w.SetString("general.architecture", s.arch);
  w.SetString("general.name", "tiny");
  w.SetU32(a + "block_count", s.layers);
  w.SetU32(a + "embedding_length", s.d);
  w.SetU32(a + "feed_forward_length", s.ff);
  w.SetU32(a + "attention.head_count", s.heads);
  w.SetU32(a + "attention.head_count_kv", s.kv_heads);
  w.SetU32(a + "context_length", 128);
  w.SetF32(a + "attention.layer_norm_rms_epsilon", 1e-6f);
  w.SetF32(a + "rope.freq_base", 500000.0f);
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<int32_t> types = {kTokUnknown, kTokControl, kTokControl};
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    tokens.push_back(buf);
    types.push_back(kTokByte);
  }
  for (const char* p : {"\xE2\x96\x81", "a", "b",
                        "\xE2\x96\x81"
                        "a"}) {
    tokens.push_back(p);
    types.push_back(kTokNormal);
  }
  std::vector<float> scores(tokens.size(), 0.0f);
  w.SetString("tokenizer.ggml.model", "llama");
  w.SetStringArray("tokenizer.ggml.tokens", tokens);
  w.SetF32Array("tokenizer.ggml.scores", scores);
  w.SetI32Array("tokenizer.ggml.token_type", types);
  w.SetU32("tokenizer.ggml.bos_token_id", 1);
  w.SetU32("tokenizer.ggml.eos_token_id", 2);
  const int64_t vocab = static_cast<int64_t>(tokens.size());
  const int64_t hd = s.d / s.heads, q = s.heads * hd, kv = s.kv_heads * hd;
  uint32_t seed = 1;
  auto add = [&](const std::string& name, TensorType t, std::vector<int64_t> ne) {
    EXPECT_TRUE(w.AddTensor(name, t, ne, RandomBytes(*TensorBytes(t, ne), seed++)).ok()) << name;
  };
  add("token_embd.weight", s.wtype, {s.d, vocab});
  add("output_norm.weight", TensorType::kF32, {s.d});
  if (!s.tied) add("output.weight", s.wtype, {s.d, vocab});
  for (int l = 0; l < s.layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    add(b + "attn_norm.weight", TensorType::kF32, {s.d});
    add(b + "attn_q.weight", s.wtype, {s.d, q});
    add(b + "attn_k.weight", s.wtype, {s.d, kv});
    add(b + "attn_v.weight", s.wtype, {s.d, kv});
    add(b + "attn_output.weight", s.wtype, {q, s.d});
    add(b + "ffn_norm.weight", TensorType::kF32, {s.d});
    add(b + "ffn_gate.weight", s.wtype, {s.d, s.ff});
    add(b + "ffn_up.weight", s.wtype, {s.d, s.ff});
    add(b + "ffn_down.weight", s.wtype, {s.ff, s.d});
    if (s.arch == "qwen2") {
      add(b + "attn_q.bias", TensorType::kF32, {q});
      add(b + "attn_k.bias", TensorType::kF32, {kv});
      add(b + "attn_v.bias", TensorType::kF32, {kv});
    }
    if (s.arch == "qwen3") {
      add(b + "attn_q_norm.weight", TensorType::kF32, {hd});
      add(b + "attn_k_norm.weight", TensorType::kF32, {hd});
    }
  }
  return w;
}

TEST(TinyModel, LoadsEveryArchitectureAndWeightType) {
  for (const char* arch : {"llama", "qwen2", "qwen3"}) {
    for (const auto& info : kTensorTypes) {
      const TensorType t = info.type;
      TinySpec s;
      s.arch = arch;
      s.wtype = t;
      if (BlockSize(t) == 256) s.d = s.ff = 256;
      s.tied = t == TensorType::kQ8_0;
      const auto img = TinyModel(s).Serialize();
      auto m = LoadGgufImage(img.data(), img.size(), "tiny.gguf");
      ASSERT_TRUE(m.ok()) << arch << " " << TensorTypeName(t) << ": " << m.message();
      const ModelConfig& c = (*m)->config;
      EXPECT_EQ(c.arch, arch);
      EXPECT_EQ(c.rope, std::string(arch) == "llama" ? RopeStyle::kNormal : RopeStyle::kNeoX);
      EXPECT_EQ(c.qk_norm, std::string(arch) == "qwen3");
      EXPECT_EQ(c.attn_bias, std::string(arch) == "qwen2");
      EXPECT_EQ(c.tied_output, s.tied);
      EXPECT_EQ(c.head_dim, s.d / 4);
      EXPECT_EQ(c.vocab_size, 263);
      EXPECT_FLOAT_EQ(c.rope_theta, 500000.0f);
      EXPECT_FLOAT_EQ(c.rms_eps, 1e-6f);
      EXPECT_EQ((*m)->Get("blk.1.ffn_down.weight").type, t);
      EXPECT_EQ((*m)->Output().name, s.tied ? "token_embd.weight" : "output.weight");
      EXPECT_EQ((*m)->tokenizer->Encode("a", true), (std::vector<int32_t>{1, 262}));
    }
  }
}

TEST(TinyModel, IdentityDependsOnLayout) {
  const auto a = TinyModel({}).Serialize();
  TinySpec s2;
  s2.wtype = TensorType::kQ8_0;
  const auto b = TinyModel(s2).Serialize();
  auto ma = LoadGgufImage(a.data(), a.size(), "a.gguf");
  auto ma2 = LoadGgufImage(a.data(), a.size(), "other-name.gguf");
  auto mb = LoadGgufImage(b.data(), b.size(), "b.gguf");
  ASSERT_TRUE(ma.ok() && ma2.ok() && mb.ok());
  EXPECT_EQ((*ma)->identity, (*ma2)->identity);
  EXPECT_NE((*ma)->identity, (*mb)->identity);
}

// RoPE scaling keys as llama.cpp reads them (llama.cpp llama-model.cpp:
// a missing rope.scaling.type means linear; the factor comes from
// rope.scaling.factor, else the older rope.scale_linear).
TEST(TinyModel, RopeScalingKeys) {
  auto load = [](GgufWriter& w) {
    auto img = w.Serialize();
    return LoadGgufImage(img.data(), img.size(), "rs.gguf");
  };
  {  // typed llama3, with its keys
    GgufWriter w = TinyModel({});
    w.SetString("llama.rope.scaling.type", "llama3");
    w.SetF32("llama.rope.scaling.factor", 8.0f);
    w.SetF32("llama.rope.scaling.low_freq_factor", 1.0f);
    w.SetF32("llama.rope.scaling.high_freq_factor", 4.0f);
    w.SetU32("llama.rope.scaling.original_context_length", 8192);
    auto m = load(w);
    ASSERT_TRUE(m.ok()) << m.message();
    EXPECT_EQ((*m)->config.rope_scaling, RopeScaling::kLlama3);
    EXPECT_FLOAT_EQ((*m)->config.rope_factor, 8.0f);
    EXPECT_EQ((*m)->config.rope_orig_ctx, 8192);
  }
  {  // untyped with a factor: linear (was read as llama3 before)
    GgufWriter w = TinyModel({});
    w.SetF32("llama.rope.scaling.factor", 8.0f);
    auto m = load(w);
    ASSERT_TRUE(m.ok()) << m.message();
    EXPECT_EQ((*m)->config.rope_scaling, RopeScaling::kLinear);
    EXPECT_FLOAT_EQ((*m)->config.rope_factor, 8.0f);
  }
  {  // the old key
    GgufWriter w = TinyModel({});
    w.SetF32("llama.rope.scale_linear", 2.0f);
    auto m = load(w);
    ASSERT_TRUE(m.ok()) << m.message();
    EXPECT_EQ((*m)->config.rope_scaling, RopeScaling::kLinear);
    EXPECT_FLOAT_EQ((*m)->config.rope_factor, 2.0f);
  }
  {  // "none" ignores a factor; linear with factor 1 is no scaling
    GgufWriter w = TinyModel({});
    w.SetString("llama.rope.scaling.type", "none");
    w.SetF32("llama.rope.scaling.factor", 8.0f);
    auto m = load(w);
    ASSERT_TRUE(m.ok()) << m.message();
    EXPECT_EQ((*m)->config.rope_scaling, RopeScaling::kNone);
    w.SetString("llama.rope.scaling.type", "linear");
    w.SetF32("llama.rope.scaling.factor", 1.0f);
    m = load(w);
    ASSERT_TRUE(m.ok()) << m.message();
    EXPECT_EQ((*m)->config.rope_scaling, RopeScaling::kNone);
  }
  {  // yarn: original context defaults to the model's
    GgufWriter w = TinyModel({});
    w.SetString("llama.rope.scaling.type", "yarn");
    w.SetF32("llama.rope.scaling.factor", 4.0f);
    auto m = load(w);
    ASSERT_TRUE(m.ok()) << m.message();
    EXPECT_EQ((*m)->config.rope_scaling, RopeScaling::kYarn);
    EXPECT_EQ((*m)->config.rope_orig_ctx, (*m)->config.max_ctx);
    EXPECT_FLOAT_EQ((*m)->config.rope_attn_factor, 1.0f);
    w.SetU32("llama.rope.scaling.original_context_length", 32);
    w.SetF32("llama.rope.scaling.attn_factor", 0.5f);
    m = load(w);
    ASSERT_TRUE(m.ok()) << m.message();
    EXPECT_EQ((*m)->config.rope_orig_ctx, 32);
    EXPECT_FLOAT_EQ((*m)->config.rope_attn_factor, 0.5f);
    w.SetU32("llama.rope.scaling.original_context_length", 0);
    m = load(w);
    ASSERT_FALSE(m.ok());
    EXPECT_TRUE(Contains(m.message(), "yarn")) << m.message();
  }
  {  // malformed: an unknown type names the key; a negative factor
    GgufWriter w = TinyModel({});
    w.SetString("llama.rope.scaling.type", "longrope");
    w.SetF32("llama.rope.scaling.factor", 4.0f);
    auto m = load(w);
    ASSERT_FALSE(m.ok());
    EXPECT_TRUE(Contains(m.message(), "'longrope' in llama.rope.scaling.type")) << m.message();
    w.SetString("llama.rope.scaling.type", "linear");
    w.SetF32("llama.rope.scaling.factor", -2.0f);
    m = load(w);
    ASSERT_FALSE(m.ok());
    EXPECT_TRUE(Contains(m.message(), "must be positive")) << m.message();
  }
}

// Each mutation of a valid tiny model must give an error naming the problem.
TEST(TinyModel, MetadataAndShapeErrors) {
  struct Case {
    std::string what;
    std::function<void(GgufWriter&)> mutate;
    std::string expect;  // substring of the message
  };
  const std::vector<Case> cases = {
      {"arch", [](GgufWriter& w) { w.SetString("general.architecture", "gpt-neox"); },
       "unsupported architecture 'gpt-neox'"},
      {"missing key",
       [](GgufWriter& w) {
         w.Set("llama.block_count", [] {
           GgufValue v;
           v.type = GgufType::kString;
           v.str = "x";
           return v;
         }());
       },
       "llama.block_count"},
      {"heads", [](GgufWriter& w) { w.SetU32("llama.attention.head_count_kv", 3); }, "n_kv_heads"},
      {"shape", [](GgufWriter& w) { w.SetU32("llama.feed_forward_length", 65); },
       "blk.0.ffn_gate.weight"},
      {"layers", [](GgufWriter& w) { w.SetU32("llama.block_count", 3); }, "blk.2.attn_norm.weight"},
      {"eps type",
       [](GgufWriter& w) { w.SetString("llama.attention.layer_norm_rms_epsilon", "small"); },
       "layer_norm_rms_epsilon"},
      {"tokenizer", [](GgufWriter& w) { w.SetString("tokenizer.ggml.model", "bert"); }, "bert"},
      {"bos", [](GgufWriter& w) { w.SetU32("tokenizer.ggml.bos_token_id", 9999); }, "out of range"},
      {"rope dim", [](GgufWriter& w) { w.SetU32("llama.rope.dimension_count", 7); },
       "rope.dimension_count"},  // odd (partial rotary itself is supported)
      {"zero", [](GgufWriter& w) { w.SetU32("llama.embedding_length", 0); }, "d_model"},
  };
  for (const Case& c : cases) {
    GgufWriter w = TinyModel({});
    c.mutate(w);
    const auto img = w.Serialize();
    auto m = LoadGgufImage(img.data(), img.size(), "tiny.gguf");
    ASSERT_FALSE(m.ok()) << c.what;
    EXPECT_TRUE(Contains(m.message(), c.expect)) << c.what << ": " << m.message();
    EXPECT_TRUE(Contains(m.message(), "tiny.gguf")) << c.what << ": " << m.message();
  }
  // A norm stored as F16 is rejected (norms must be F32).
  GgufWriter w;
  w.SetString("general.architecture", "llama");
  auto img = TinyModel({}).Serialize();
  auto f = ParseGguf(img.data(), img.size(), "x");
  ASSERT_TRUE(f.ok());
  for (const auto& [k, v] : f->metadata) w.Set(k, v);
  for (const auto& t : f->tensors) {
    if (t.name == "blk.1.ffn_norm.weight") {
      ASSERT_TRUE(
          w.AddTensor(t.name, TensorType::kF16, t.ne, std::vector<uint8_t>(t.nbytes / 2)).ok());
    } else {
      ASSERT_TRUE(w.AddTensor(t.name, t.type, t.ne, t.data, t.nbytes).ok());
    }
  }
  img = w.Serialize();
  auto m = LoadGgufImage(img.data(), img.size(), "tiny.gguf");
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(Contains(m.message(), "blk.1.ffn_norm.weight")) << m.message();
}

// ---------------------------------------------------------------- raw patches
// Offsets inside a small hand-checked image: header fields are at fixed places.
class RawGguf : public ::testing::Test {
 protected:
  void SetUp() override {
    GgufWriter w;
    w.SetString("k", "v");                         // key 0
    w.SetIntArray("arr", GgufType::kI32, {1, 2});  // key 1
    EXPECT_TRUE(w.AddTensor("t0", TensorType::kF32, {8}, RandomBytes(32, 1)).ok());
    EXPECT_TRUE(w.AddTensor("t1", TensorType::kF32, {8}, RandomBytes(32, 2)).ok());
    img_ = w.Serialize();
    // Layout: 24-byte header; "k": 8+1 +4 + 8+1; "arr": 8+3 +4 +4+8+8; then tensor infos.
    key1_ = 24 + 9 + 4 + 9;
    arr_count_ = key1_ + 11 + 4 + 4;
    t0_ = arr_count_ + 8 + 8;  // tensor info 0: name, n_dims, ne[0], type, offset
    t1_ = t0_ + 10 + 4 + 8 + 4 + 8;
  }
  Result<GgufFile> Parse(const std::vector<uint8_t>& b) {
    return ParseGguf(b.data(), b.size(), "raw.gguf");
  }
  template <class T>
  std::vector<uint8_t> Patch(size_t off, T v) {
    std::vector<uint8_t> b = img_;
    std::memcpy(b.data() + off, &v, sizeof v);
    return b;
  }
  void ExpectError(const std::vector<uint8_t>& b, const std::string& part) {
    auto r = Parse(b);
    ASSERT_FALSE(r.ok()) << part;
    EXPECT_TRUE(Contains(r.message(), part)) << r.message();
    EXPECT_TRUE(Contains(r.message(), "raw.gguf")) << r.message();
  }
  std::vector<uint8_t> img_;
  size_t key1_, arr_count_, t0_, t1_;
};

TEST_F(RawGguf, LayoutAssumptionsHold) {
  auto r = Parse(img_);
  ASSERT_TRUE(r.ok()) << r.message();
  uint64_t count;
  std::memcpy(&count, img_.data() + arr_count_, 8);
  EXPECT_EQ(count, 2u);
  EXPECT_EQ(std::memcmp(img_.data() + t0_ + 8, "t0", 2), 0);
  EXPECT_EQ(std::memcmp(img_.data() + t1_ + 8, "t1", 2), 0);
}

TEST_F(RawGguf, HeaderErrors) {
  ExpectError(Patch<uint32_t>(0, 0x46554747u ^ 1), "bad magic");
  ExpectError(Patch<uint32_t>(4, 1), "unsupported GGUF version 1");
  ExpectError(Patch<uint32_t>(4, 4), "unsupported GGUF version 4");
  ExpectError(Patch<uint64_t>(8, ~0ull), "tensor count");
  ExpectError(Patch<uint64_t>(16, 1ull << 40), "metadata count");
  ExpectError(Patch<uint64_t>(16, 3),
              "raw.gguf");  // one key more than present: reads tensor infos as keys
  ExpectError(std::vector<uint8_t>(img_.begin(), img_.begin() + 3), "too small");
  ExpectError({}, "too small");
}

TEST_F(RawGguf, MetadataErrors) {
  ExpectError(Patch<uint64_t>(24, ~0ull >> 1), "metadata key length");
  ExpectError(Patch<uint64_t>(24, 0), "empty");
  ExpectError(Patch<uint32_t>(24 + 9, 13), "unknown value type 13");
  ExpectError(Patch<uint64_t>(24 + 13, 1ull << 50), "length");
  ExpectError(Patch<uint64_t>(arr_count_, 1ull << 60), "claims");
  ExpectError(Patch<uint32_t>(arr_count_ - 4, 9), "nested");
  ExpectError(Patch<uint32_t>(arr_count_ - 4, 77), "unknown element type");
  // Duplicate key: rename "arr" to "k\0\0"? Keys are length-prefixed: make key 1 "k" + 2 bytes of
  // "arr".
  auto dup = Patch<uint64_t>(key1_, 1);
  ExpectError(dup, "raw.gguf");  // "k" then garbage: some error, never a crash
}

TEST_F(RawGguf, TensorInfoErrors) {
  ExpectError(Patch<uint32_t>(t0_ + 10, 0), "dimensions");
  ExpectError(Patch<uint32_t>(t0_ + 10, 5), "dimensions");
  ExpectError(Patch<uint32_t>(t0_ + 22, 4), "unsupported ggml type 4");  // Q4_2, removed from ggml
  ExpectError(Patch<uint32_t>(t0_ + 22, 9), "unsupported ggml type 9");  // Q8_1: activations only
  ExpectError(Patch<uint32_t>(t0_ + 22, 8), "invalid shape");            // Q8_0 with ne[0] = 8
  ExpectError(Patch<uint64_t>(t0_ + 14, 1ull << 62),
              "invalid shape");  // 2^62 floats: 2^64 bytes overflow
  ExpectError(Patch<uint64_t>(t0_ + 14, 1ull << 40), "past the end");  // huge but representable
  ExpectError(Patch<uint64_t>(t0_ + 14, ~0ull), "out of range");
  ExpectError(Patch<uint64_t>(t0_ + 26, 4), "not a multiple of the alignment");
  ExpectError(Patch<uint64_t>(t0_ + 26, 1ull << 40), "past the end");
  ExpectError(Patch<uint64_t>(t1_ + 26, 0), "overlap");
  auto dup = Patch<uint8_t>(t1_ + 9, '0');  // "t1" -> "t0"
  ExpectError(dup, "duplicate tensor name 't0'");
  // Truncated data section.
  ExpectError(std::vector<uint8_t>(img_.begin(), img_.end() - 1), "past the end");
}

TEST_F(RawGguf, AlignmentKey) {
  GgufWriter w;
  w.SetU32("general.alignment", 48);
  auto img = w.Serialize();
  ExpectError(img, "general.alignment");
  w.SetString("general.alignment", "x");
  img = w.Serialize();
  ExpectError(img, "general.alignment");
}

}  // namespace
}  // namespace hqekv
