// KV state files of every policy on the bundled model: prefill, save,
// restore into a fresh cache, decode: logits bit-identical to the
// uninterrupted cache at every step, the same bytes held before and after
// restoring and at every later step; bad files (corrupt, truncated, another
// model, another spec, damaged state with a valid checksum) are refused and
// leave the cache as it was.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cache/kv_state.h"
#include "core/hash.h"
#include "core/xoshiro.h"
#include "io/model_source.h"
#include "model/llama.h"
#include "policy/factory.h"

namespace hqekv {
namespace {

constexpr int kCtx = 256;

struct SharedStoriesModel {
  std::unique_ptr<ModelSource> src;
  std::unique_ptr<LlamaModel> model;
};

SharedStoriesModel& Model() {
  static SharedStoriesModel* f = [] {
    auto* f = new SharedStoriesModel;
    auto src = LoadModel(std::string(HQEKV_SOURCE_DIR) + "/models/stories260K.gguf");
    EXPECT_TRUE(src.ok()) << src.message();
    f->src = std::move(*src);
    auto m = LlamaModel::Create(*f->src);
    EXPECT_TRUE(m.ok());
    f->model = std::move(*m);
    return f;
  }();
  return *f;
}

std::vector<int32_t> Prompt(int n, uint64_t seed) {
  Xoshiro256 rng(seed);
  std::vector<int32_t> p(n);
  p[0] = 1;
  for (int i = 1; i < n; ++i) p[i] = 3 + static_cast<int32_t>(rng.Next() % 500);
  return p;
}

std::unique_ptr<KvCache> NewCache(const std::string& spec) {
  auto c = MakeKvCache(spec, Model().model->CacheGeometry(kCtx));
  EXPECT_TRUE(c.ok()) << spec << ": " << c.message();
  return c.ok() ? std::move(*c) : nullptr;
}

// Prefills `prompt` into a new cache of `spec`; meta gets what a file needs.
std::unique_ptr<KvCache> Prefill(const std::string& spec, const std::vector<int32_t>& prompt,
                                 KvStateMeta* meta) {
  SharedStoriesModel& f = Model();
  auto cache = NewCache(spec);
  std::vector<int32_t> pos(prompt.size());
  for (size_t i = 0; i < pos.size(); ++i) pos[i] = static_cast<int32_t>(i);
  meta->logits.resize(f.model->vocab_size());
  const Status st = f.model->Forward(prompt.data(), pos.data(), static_cast<int>(prompt.size()),
                                     *cache, Logits::kLast, meta->logits.data(), true);
  EXPECT_TRUE(st.ok()) << st.message();
  meta->tokens = prompt;
  meta->spec = spec;
  meta->model_identity = f.src->identity;
  meta->geometry = cache->geometry();
  return cache;
}

std::vector<float> Step(KvCache& cache, int32_t tok, int32_t pos) {
  std::vector<float> logits(Model().model->vocab_size());
  const Status st =
      Model().model->Forward(&tok, &pos, 1, cache, Logits::kLast, logits.data(), false);
  EXPECT_TRUE(st.ok()) << st.message();
  return logits;
}

int32_t Argmax(const std::vector<float>& v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

std::vector<int64_t> LayerBytes(const KvCache& c) {
  std::vector<int64_t> b;
  for (int l = 0; l < c.geometry().n_layers; ++l) b.push_back(c.LayerAllocatedBytes(l));
  return b;
}

// Every policy the bundled model (head_dim 8) can hold, with budgets that
// evict / downgrade during the prompt and again during the decode.
const char* const kSpecs[] = {
    "fp16",
    "fp32",
    "fp8",
    "int8",
    "kivi:nominal_bits=2",
    "kivi:nominal_bits=4,residual=64",
    "streaming:window=24",
    "streaming:keep=0.5",
    "h2o:keep=0.5",
    "h2o:heavy=12,recent=12",
    "snapkv:keep=0.5",
    "pyramid:keep=0.6",
    "hqekv:nominal_bits=2",
    "hqekv:nominal_bits=3.2,per_head=1",
    "hqekv:bits=4",
};

TEST(KvStatePolicies, RestoredCacheContinuesBitIdentically) {
  const std::vector<int32_t> prompt = Prompt(75, 7);
  const int kDecode = 40;  // crosses a 32-token compression event
  std::printf("%-34s %10s %10s %7s\n", "policy", "held B", "state B", "ratio");
  for (const char* spec : kSpecs) {
    SCOPED_TRACE(spec);
    KvStateMeta meta;
    auto a = Prefill(spec, prompt, &meta);
    ASSERT_TRUE(a);
    std::string state;
    ASSERT_TRUE(a->SaveState(&state).ok());
    auto file = EncodeKvState(*a, meta);
    ASSERT_TRUE(file.ok()) << file.message();
    const int64_t held = a->Stats().bytes.total();
    std::printf("%-34s %10lld %10zu %7.3f\n", spec, static_cast<long long>(held), state.size(),
                static_cast<double>(state.size()) / static_cast<double>(held));
    // The state is the bytes held plus array sizes: within 10% + 2 KiB.
    EXPECT_LE(static_cast<int64_t>(state.size()), held + held / 10 + 2048);
    auto b = NewCache(spec);
    ASSERT_TRUE(b);
    auto got = LoadKvState(*file, meta, *b);
    ASSERT_TRUE(got.ok()) << got.message();
    EXPECT_EQ(got->logits, meta.logits);
    EXPECT_EQ(b->Stats().bytes.total(), held);
    EXPECT_EQ(LayerBytes(*b), LayerBytes(*a));
    std::string again;
    ASSERT_TRUE(b->SaveState(&again).ok());
    EXPECT_TRUE(again == state) << "the restored cache saves other bytes";
    int32_t tok = Argmax(meta.logits);
    for (int i = 0; i < kDecode; ++i) {
      const int32_t pos = static_cast<int32_t>(prompt.size()) + i;
      const std::vector<float> la = Step(*a, tok, pos), lb = Step(*b, tok, pos);
      ASSERT_EQ(la, lb) << "step " << i;
      ASSERT_EQ(a->Stats().bytes.total(), b->Stats().bytes.total()) << "step " << i;
      ASSERT_EQ(a->BudgetNote(), b->BudgetNote());
      tok = Argmax(la);
    }
    EXPECT_EQ(LayerBytes(*a), LayerBytes(*b));
  }
}

// A cache that holds `prompt` and what SaveState says about it.
struct Snapshot {
  std::string state;
  int64_t bytes = 0;
};
Snapshot Snap(const KvCache& c) {
  Snapshot s;
  EXPECT_TRUE(c.SaveState(&s.state).ok());
  s.bytes = c.Stats().bytes.total();
  return s;
}

// Replaces the checksum so that only the structural checks can refuse.
void Reseal(std::string* file) {
  const uint64_t sum = Fnv1a64(file->data(), file->size() - 8);
  std::memcpy(file->data() + file->size() - 8, &sum, 8);
}

TEST(KvStatePolicies, BadFilesAreRefusedAndTheCacheIsUntouched) {
  const std::vector<int32_t> prompt = Prompt(75, 11), other = Prompt(70, 12);
  for (const char* spec :
       {"hqekv:nominal_bits=2", "h2o:keep=0.5", "snapkv:keep=0.5", "kivi:nominal_bits=2"}) {
    SCOPED_TRACE(spec);
    KvStateMeta meta, busy_meta;
    auto a = Prefill(spec, prompt, &meta);
    auto file = EncodeKvState(*a, meta);
    ASSERT_TRUE(file.ok()) << file.message();
    // The target already holds another sequence: a refused file keeps it.
    auto b = Prefill(spec, other, &busy_meta);
    const Snapshot before = Snap(*b);
    auto refused = [&](const std::string& bytes, const KvStateMeta& want,
                       const std::string& words) {
      auto r = LoadKvState(bytes, want, *b);
      ASSERT_FALSE(r.ok()) << words;
      EXPECT_NE(r.message().find(words), std::string::npos) << r.message();
      const Snapshot after = Snap(*b);
      EXPECT_EQ(after.bytes, before.bytes) << words;
      EXPECT_TRUE(after.state == before.state) << words;
    };
    std::string flip = *file;
    flip[flip.size() / 2] ^= 0x20;
    refused(flip, meta, "checksum");
    refused(file->substr(0, file->size() - 1000), meta, "checksum");
    std::string version = *file;
    version[8] = 7;
    refused(version, meta, "version");
    KvStateMeta m2 = meta;
    m2.model_identity = "another-model";
    refused(*file, m2, "another model");
    KvStateMeta m3 = meta;
    m3.spec = "hqekv:nominal_bits=3.2";
    refused(*file, m3, "KV policy");
    // A state of another policy in a file whose header is right.
    KvStateMeta fp16_meta;
    auto c = Prefill("fp16", prompt, &fp16_meta);
    auto fp16_file = EncodeKvState(*c, fp16_meta);
    ASSERT_TRUE(fp16_file.ok());
    KvStateMeta lie = meta;
    auto lying = EncodeKvState(*c, lie);  // header says `spec`, state is fp16's
    ASSERT_TRUE(lying.ok());
    refused(*lying, meta, "KV state of");
    // Damaged state bytes with a valid checksum: refused with a message, or
    // accepted when only values changed; never a crash (ASan run).
    const size_t state_at = file->size() - 8 - static_cast<size_t>(Snap(*a).state.size());
    Xoshiro256 rng(5);
    int errors = 0;
    for (int i = 0; i < 300; ++i) {
      std::string bad = *file;
      const size_t at = state_at + rng.Next() % (bad.size() - 8 - state_at);
      bad[at] ^= static_cast<char>(1u << (rng.Next() % 8));
      Reseal(&bad);
      auto fresh = NewCache(spec);
      const Snapshot empty = Snap(*fresh);
      auto r = LoadKvState(bad, meta, *fresh);
      if (!r.ok()) {
        ++errors;
        EXPECT_TRUE(Snap(*fresh).state == empty.state);
      }
    }
    EXPECT_GT(errors, 0);
  }
}

}  // namespace
}  // namespace hqekv
