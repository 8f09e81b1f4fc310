// The shared KV tier: keys, the entry envelope (corrupt, truncated, foreign
// entries are refused), the dir: backend's atomic writes and byte-bounded
// LRU, and the redis:// backend's failure path (a store that is down fails
// fast and then backs off). The redis round trip runs in tests/scale_out.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "cache/kv_state.h"
#include "core/file.h"
#include "core/xoshiro.h"
#include "kvtier/entry.h"
#include "kvtier/tier.h"
#include "policy/factory.h"
#include "../temp_path.h"

namespace hqekv::kvtier {
namespace {

namespace fs = std::filesystem;

KvGeometry SmallGeometry() { return KvGeometry{2, 4, 2, 16, 256}; }

// A cache of `spec` holding n positions of random K/V, and its token list.
std::unique_ptr<KvCache> FilledCache(const std::string& spec, int n, uint64_t seed) {
  auto cache = MakeKvCache(spec, SmallGeometry());
  EXPECT_TRUE(cache.ok()) << cache.message();
  const KvGeometry g = SmallGeometry();
  Xoshiro256 rng(seed);
  const size_t kv = size_t(n) * g.n_kv_heads * g.head_dim, qn = size_t(g.n_q_heads) * g.head_dim;
  std::vector<float> k(kv), v(kv), q(qn), out(qn);
  std::vector<int32_t> pos(n);
  for (int i = 0; i < n; ++i) pos[i] = i;
  for (int l = 0; l < g.n_layers; ++l) {
    for (auto* a : {&k, &v, &q})
      for (float& x : *a) x = static_cast<float>(rng.Uniform() * 2.0 - 1.0);
    EXPECT_TRUE((*cache)->Append(l, k.data(), v.data(), pos.data(), n).ok());
    EXPECT_TRUE((*cache)->Attend(l, q.data(), &pos[n - 1], 1, out.data()).ok());
  }
  EXPECT_TRUE((*cache)->EndBatch(n, true).ok());
  return std::move(*cache);
}

struct EntryFixture {
  EntryIdentity id{"model-A", "hqekv:bits=3.4"};
  std::vector<int32_t> tokens;
  std::string key, entry;
  std::string saved;  // the cache's SaveState
};

EntryFixture MakeEntry(const std::string& spec, int n) {
  EntryFixture f;
  f.id.spec = spec;
  for (int i = 0; i < n; ++i) f.tokens.push_back((i * 7 + 3) % 100);
  auto cache = FilledCache(spec, n, 5);
  EXPECT_TRUE(cache->SaveState(&f.saved).ok());
  f.key = PrefixKeys(f.id, f.tokens.data(), f.tokens.size(), n).at(0);
  KvStateMeta meta;
  meta.model_identity = f.id.model_identity;
  meta.spec = spec;
  meta.geometry = SmallGeometry();
  meta.tokens = f.tokens;
  meta.logits.assign(100, 0.5f);
  auto e = EncodeEntry(*cache, meta, f.key);
  EXPECT_TRUE(e.ok()) << e.message();
  f.entry = *e;
  return f;
}

Result<KvStateMeta> Load(const EntryFixture& f, std::string_view entry, const EntryIdentity& id,
                         const std::vector<int32_t>& prompt, std::string* saved = nullptr) {
  auto cache = MakeKvCache(id.spec, SmallGeometry());
  if (!cache.ok()) return cache.error();
  auto m = LoadEntry(entry, id, SmallGeometry(), f.key, prompt.data(), f.tokens.size(), **cache);
  if (m.ok() && saved) {
    EXPECT_TRUE((*cache)->SaveState(saved).ok());
  }
  return m;
}

TEST(KvTierKeys, ChainExtendsAndDependsOnModelSpecAndTokens) {
  EntryIdentity id{"m1", "fp16"};
  std::vector<int32_t> t(1000);
  for (int i = 0; i < 1000; ++i) t[i] = i;
  const auto k = PrefixKeys(id, t.data(), t.size(), 256);
  ASSERT_EQ(k.size(), 3u);  // 256, 512, 768 (1000 is not a boundary)
  for (const auto& s : k) EXPECT_TRUE(ValidKey(s)) << s;
  EXPECT_EQ(k[0].size(), 32u);
  // A prompt sharing the first 512 tokens shares the first two keys only.
  auto t2 = t;
  t2[600] = 5;
  const auto k2 = PrefixKeys(id, t2.data(), t2.size(), 256);
  EXPECT_EQ(k2[0], k[0]);
  EXPECT_EQ(k2[1], k[1]);
  EXPECT_NE(k2[2], k[2]);
  EXPECT_NE(PrefixKeys({"m2", "fp16"}, t.data(), t.size(), 256)[0], k[0]);
  EXPECT_NE(PrefixKeys({"m1", "hqekv:bits=3"}, t.data(), t.size(), 256)[0], k[0]);
  EXPECT_NE(PrefixKeys(id, t.data(), t.size(), 128)[1], k[0]);  // block size is in the key
  EXPECT_TRUE(PrefixKeys(id, t.data(), 255, 256).empty());
  EXPECT_TRUE(PrefixKeys(id, t.data(), t.size(), 0).empty());
}

TEST(KvTierKeys, PublishedBlocksAreTheLastTwoAndPowersOfTwo) {
  std::vector<size_t> got;
  for (size_t k = 1; k <= 11; ++k)
    if (PublishBlock(k, 11)) got.push_back(k);
  EXPECT_EQ(got, (std::vector<size_t>{1, 2, 4, 8, 10, 11}));
  EXPECT_TRUE(PublishBlock(1, 1));
}

TEST(KvTierEntry, RoundTripRestoresTheSameCacheBytes) {
  for (const std::string spec : {"fp16", "hqekv:bits=3.4"}) {
    const EntryFixture f = MakeEntry(spec, 64);
    std::string saved;
    auto m = Load(f, f.entry, f.id, f.tokens, &saved);
    ASSERT_TRUE(m.ok()) << spec << ": " << m.message();
    EXPECT_EQ(m->tokens, f.tokens);
    EXPECT_EQ(saved, f.saved) << spec;
  }
}

TEST(KvTierEntry, CorruptTruncatedForeignAndCollidingEntriesAreRefused) {
  const EntryFixture f = MakeEntry("hqekv:bits=3.4", 64);
  // Every single flipped byte is caught (checksum, magic, or header checks).
  for (size_t at : {size_t(0), size_t(9), size_t(20), f.entry.size() / 2, f.entry.size() - 1}) {
    std::string bad = f.entry;
    bad[at] ^= 0x5a;
    EXPECT_FALSE(Load(f, bad, f.id, f.tokens).ok()) << "byte " << at;
  }
  for (size_t n : {size_t(0), size_t(10), f.entry.size() / 2, f.entry.size() - 1})
    EXPECT_FALSE(Load(f, f.entry.substr(0, n), f.id, f.tokens).ok()) << "truncated to " << n;
  auto foreign = Load(f, f.entry, EntryIdentity{"model-B", f.id.spec}, f.tokens);
  ASSERT_FALSE(foreign.ok());
  EXPECT_NE(foreign.message().find("another model"), std::string::npos) << foreign.message();
  EXPECT_FALSE(Load(f, f.entry, EntryIdentity{f.id.model_identity, "fp16"}, f.tokens).ok());
  // Same key and checksum, another prompt (what a hash collision would give).
  auto other = f.tokens;
  other[3] += 1;
  auto coll = Load(f, f.entry, f.id, other);
  ASSERT_FALSE(coll.ok());
  EXPECT_NE(coll.message().find("another token sequence"), std::string::npos);
  // An entry asked for under another key.
  auto cache = MakeKvCache(f.id.spec, SmallGeometry());
  ASSERT_TRUE(cache.ok());
  EXPECT_FALSE(LoadEntry(f.entry, f.id, SmallGeometry(), std::string(32, 'a'), f.tokens.data(),
                         f.tokens.size(), **cache)
                   .ok());
}

TEST(KvTierEntry, CompressedEntryIsSmallerThanFp16) {
  const EntryFixture a = MakeEntry("fp16", 200), b = MakeEntry("hqekv:bits=3.4", 200);
  EXPECT_LT(b.entry.size() * 3, a.entry.size()) << b.entry.size() << " vs " << a.entry.size();
}

TEST(KvTierDir, PutGetMissAndByteBoundedLru) {
  const std::string dir = test::TempPath("kvtier_dir");
  fs::remove_all(dir);
  TierOptions o;
  o.max_bytes = 2500;
  o.max_entry_bytes = 2000;
  auto tier = OpenKvTier("dir:" + dir, o);
  ASSERT_TRUE(tier.ok()) << tier.message();
  KvTier& t = **tier;
  EXPECT_EQ(t.Describe(), "dir:" + dir);
  auto miss = t.Get("00ff");
  ASSERT_TRUE(miss.ok());
  EXPECT_FALSE(miss->has_value());
  const std::string a(1000, 'a'), b(1000, 'b'), c(1000, 'c');
  ASSERT_TRUE(t.Put("0a", a).ok());
  ASSERT_TRUE(t.Put("0b", b).ok());
  // Make 0a the older one, then read it: the hit makes 0b the least recently used.
  fs::last_write_time(dir + "/0a.kv", fs::file_time_type::clock::now() - std::chrono::hours(2));
  fs::last_write_time(dir + "/0b.kv", fs::file_time_type::clock::now() - std::chrono::hours(1));
  auto hit = t.Get("0a");
  ASSERT_TRUE(hit.ok() && hit->has_value());
  EXPECT_EQ(**hit, a);
  ASSERT_TRUE(t.Put("0c", c).ok());  // 3000 bytes > 2500: the LRU one (0b) goes
  EXPECT_TRUE(fs::exists(dir + "/0a.kv"));
  EXPECT_FALSE(fs::exists(dir + "/0b.kv"));
  EXPECT_TRUE(fs::exists(dir + "/0c.kv"));
  EXPECT_FALSE(t.Put("0d", std::string(2001, 'd')).ok());  // over the entry limit
  EXPECT_FALSE(t.Get("not-hex").ok());                     // keys are never paths
  EXPECT_FALSE(t.Put("../x", a).ok());
  const TierStats s = t.Stats();
  EXPECT_EQ(s.hits, 1);
  EXPECT_EQ(s.misses, 1);
  EXPECT_EQ(s.bytes_in, 1000);
  EXPECT_EQ(s.bytes_out, 3000);
  EXPECT_EQ(s.put_errors, 1);
  // No temporary file is left behind by the atomic writes.
  int files = 0;
  for (auto& e : fs::directory_iterator(dir)) files += e.is_regular_file();
  EXPECT_EQ(files, 2);
  fs::remove_all(dir);
}

TEST(KvTierRedis, UrlErrorsAndAStoreThatIsDownFailsFastThenBacksOff) {
  TierOptions o;
  EXPECT_FALSE(OpenKvTier("memcached://x", o).ok());
  EXPECT_FALSE(OpenKvTier("redis://localhost", o).ok());
  EXPECT_FALSE(OpenKvTier("redis://localhost:99999", o).ok());
  EXPECT_FALSE(OpenKvTier("redis://localhost:6379/bad prefix", o).ok());
  EXPECT_FALSE(OpenKvTier("dir:", o).ok());
  o.timeout_ms = 200;
  o.backoff_ms = 60000;
  auto tier = OpenKvTier("redis://127.0.0.1:1/t", o);  // port 1: nothing listens
  if (!tier.ok()) {
    EXPECT_NE(tier.message().find("without hiredis"), std::string::npos) << tier.message();
    GTEST_SKIP() << tier.message();
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto r = (*tier)->Get("0abc");
  EXPECT_FALSE(r.ok());
  auto r2 = (*tier)->Get("0abc");  // backing off: no second connect
  ASSERT_FALSE(r2.ok());
  EXPECT_NE(r2.message().find("failed recently"), std::string::npos) << r2.message();
  EXPECT_FALSE((*tier)->Put("0abc", "x").ok());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  EXPECT_EQ((*tier)->Stats().errors, 2);
}

}  // namespace
}  // namespace hqekv::kvtier
