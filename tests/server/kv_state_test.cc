// KV state files (cache/kv_state.h) on the bundled model: a saved and
// restored cache continues exactly like the original (identical next-token
// logits), and every bad file is refused without touching the cache.
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "cache/kv_state.h"
#include "io/model_source.h"
#include "model/llama.h"
#include "policy/factory.h"

namespace hqekv {
namespace {

struct StoriesModel {
  std::unique_ptr<ModelSource> src;
  std::unique_ptr<LlamaModel> model;
};

StoriesModel Load() {
  StoriesModel f;
  auto src = LoadModel(std::string(HQEKV_SOURCE_DIR) + "/models/stories260K.gguf");
  EXPECT_TRUE(src.ok()) << src.message();
  f.src = std::move(*src);
  auto m = LlamaModel::Create(*f.src);
  EXPECT_TRUE(m.ok());
  f.model = std::move(*m);
  return f;
}

// Prefills `prompt` into a new cache of `spec`; meta gets tokens and logits.
std::unique_ptr<KvCache> Prefill(StoriesModel& f, const std::string& spec,
                                 const std::vector<int32_t>& prompt, KvStateMeta* meta) {
  auto cache = MakeKvCache(spec, f.model->CacheGeometry(128));
  EXPECT_TRUE(cache.ok()) << cache.message();
  std::vector<int32_t> pos(prompt.size());
  for (size_t i = 0; i < pos.size(); ++i) pos[i] = static_cast<int32_t>(i);
  meta->logits.resize(f.model->vocab_size());
  EXPECT_TRUE(f.model
                  ->Forward(prompt.data(), pos.data(), static_cast<int>(prompt.size()), **cache,
                            Logits::kLast, meta->logits.data(), true)
                  .ok());
  meta->tokens = prompt;
  meta->spec = spec;
  meta->model_identity = f.src->identity;
  meta->geometry = (*cache)->geometry();
  return std::move(*cache);
}

std::vector<float> Step(StoriesModel& f, KvCache& cache, int32_t tok, int32_t pos) {
  std::vector<float> logits(f.model->vocab_size());
  EXPECT_TRUE(f.model->Forward(&tok, &pos, 1, cache, Logits::kLast, logits.data(), false).ok());
  return logits;
}

const std::vector<int32_t> kPrompt = {1,   403, 407, 261, 378, 286, 270, 379, 301, 262, 267, 1,
                                      99,  300, 301, 302, 303, 304, 305, 306, 307, 308, 309, 310,
                                      311, 312, 313, 314, 315, 316, 317, 318, 319, 320, 321};

TEST(KvState, RoundTripGivesIdenticalNextTokenLogits) {
  StoriesModel f = Load();
  for (const char* spec : {"fp16", "fp32"}) {
    KvStateMeta meta;
    auto a = Prefill(f, spec, kPrompt, &meta);
    auto file = EncodeKvState(*a, meta);
    ASSERT_TRUE(file.ok()) << file.message();
    // Size: the cache's true bytes plus header, tokens and logits (small).
    const int64_t held = a->Stats().bytes.total();
    const int64_t extra = static_cast<int64_t>(file->size()) - held;
    EXPECT_GT(extra, 0);
    EXPECT_LT(extra, 1024 + 4 * static_cast<int64_t>(kPrompt.size() + f.model->vocab_size()))
        << spec;
    auto b = MakeKvCache(spec, f.model->CacheGeometry(128));
    ASSERT_TRUE(b.ok());
    auto got = LoadKvState(*file, meta, **b);
    ASSERT_TRUE(got.ok()) << got.message();
    EXPECT_EQ(got->tokens, kPrompt);
    EXPECT_EQ(got->logits, meta.logits);
    EXPECT_EQ(got->spec, spec);
    EXPECT_EQ((*b)->Stats().bytes.total(), held);
    // Two more steps on both: bit-identical logits.
    const int32_t p = static_cast<int32_t>(kPrompt.size());
    EXPECT_EQ(Step(f, *a, 300, p), Step(f, **b, 300, p)) << spec;
    EXPECT_EQ(Step(f, *a, 42, p + 1), Step(f, **b, 42, p + 1)) << spec;
  }
}

TEST(KvState, BadFilesAreRefusedAndTheCacheIsUntouched) {
  StoriesModel f = Load();
  KvStateMeta meta;
  auto a = Prefill(f, "fp16", kPrompt, &meta);
  auto file = EncodeKvState(*a, meta);
  ASSERT_TRUE(file.ok());
  auto expect_refused = [&](const std::string& bytes, const KvStateMeta& want,
                            const std::string& words) {
    auto b = MakeKvCache("fp16", f.model->CacheGeometry(128));
    ASSERT_TRUE(b.ok());
    auto r = LoadKvState(bytes, want, **b);
    ASSERT_FALSE(r.ok()) << words;
    EXPECT_NE(r.message().find(words), std::string::npos) << r.message();
    EXPECT_EQ((*b)->Stats().kept_elements, 0) << words;
  };
  expect_refused(file->substr(0, file->size() - 100), meta, "checksum");  // truncated
  std::string corrupt = *file;
  corrupt[corrupt.size() / 2] ^= 0x5a;
  expect_refused(corrupt, meta, "checksum");
  std::string version = *file;
  version[8] = 9;
  expect_refused(version, meta, "version");
  expect_refused("not a state file at all", meta, "magic");
  KvStateMeta other = meta;
  other.model_identity = "another-model";
  expect_refused(*file, other, "another model");
  // Another geometry (context) than the file's.
  auto c = MakeKvCache("fp16", f.model->CacheGeometry(64));
  ASSERT_TRUE(c.ok());
  KvStateMeta g64 = meta;
  g64.geometry = (*c)->geometry();
  EXPECT_FALSE(LoadKvState(*file, g64, **c).ok());
}

// A file written with a valid checksum but contents that disagree with each
// other (the state loader's fuzz target recomputes the checksum the same
// way): token ids past the vocabulary, non-finite logits, a token list
// longer or shorter than what the cache holds. Each is refused and the cache
// is left empty.
TEST(KvState, InconsistentContentsWithAValidChecksumAreRefused) {
  StoriesModel f = Load();
  KvStateMeta meta;
  auto a = Prefill(f, "fp16", kPrompt, &meta);
  auto refused = [&](const KvStateMeta& m, const std::string& words) {
    auto file = EncodeKvState(*a, m);  // a correct checksum over the bad contents
    ASSERT_TRUE(file.ok()) << file.message();
    auto b = MakeKvCache("fp16", f.model->CacheGeometry(128));
    ASSERT_TRUE(b.ok());
    auto r = LoadKvState(*file, meta, **b);
    ASSERT_FALSE(r.ok()) << words << ": loaded";
    EXPECT_NE(r.message().find(words), std::string::npos) << r.message();
    EXPECT_EQ((*b)->Stats().kept_elements, 0) << words;
  };
  KvStateMeta bad = meta;
  bad.tokens[3] = f.model->vocab_size();
  refused(bad, "outside its vocabulary");
  bad = meta;
  bad.tokens[0] = -7;
  refused(bad, "outside its vocabulary");
  bad = meta;
  bad.logits[5] = std::numeric_limits<float>::quiet_NaN();
  refused(bad, "not finite");
  bad = meta;
  bad.logits[0] = -std::numeric_limits<float>::infinity();
  refused(bad, "not finite");
  bad = meta;
  bad.tokens.push_back(5);  // one more token than the cache holds
  refused(bad, "positions");
  bad = meta;
  bad.tokens.resize(bad.tokens.size() - 4);
  refused(bad, "positions");
}

// Every policy of the table saves its state (kv_state_policies_test.cc); a
// cache kind without a state format says so instead of writing a file.
TEST(KvState, CachesWithoutAStateFormatSaySo) {
  StoriesModel f = Load();
  KvStateMeta meta;
  auto a = Prefill(f, "fp16", kPrompt, &meta);
  struct NoState : KvCache {
    KvGeometry g;
    const KvGeometry& geometry() const override { return g; }
    std::string Describe() const override { return "no-state"; }
    void Reset() override {}
    Status Append(int, const float*, const float*, const int32_t*, int) override {
      return Status::Ok();
    }
    Status Attend(int, const float*, const int32_t*, int, float*) override { return Status::Ok(); }
    Status EndBatch(int, bool) override { return Status::Ok(); }
    KvStats Stats() const override { return {}; }
  } none;
  none.g = a->geometry();
  auto file = EncodeKvState(none, meta);
  ASSERT_FALSE(file.ok());
  EXPECT_NE(file.message().find("no state format"), std::string::npos) << file.message();
}

}  // namespace
}  // namespace hqekv
