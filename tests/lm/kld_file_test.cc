// The KL base file (lm/kld_file.h): round trip, the statistics of a small
// file against a naive computation from the full distributions, and every
// kind of bad file (truncated, corrupt, another model / tokenizer).
#include "lm/kld_file.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "io/model_source.h"
#include "policy/factory.h"
#include "../temp_path.h"

namespace hqekv::lm {
namespace {

std::string KldTempPath(const std::string& name) {
  return hqekv::test::TempPath("hqekv_kld_" + name);
}

std::string ReadBytes(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

void WriteBytes(const std::string& p, const std::string& b) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << b;
}

class KldFile : public testing::Test {
 protected:
  void SetUp() override {
    auto src = LoadModel(std::string(HQEKV_SOURCE_DIR) + "/models/stories260K.gguf");
    ASSERT_TRUE(src.ok()) << src.message();
    src_ = std::move(src).value();
    model_ = LlamaModel::Create(*src_).value();
    tokens_ = src_->tokenizer->Encode(
        "Once upon a time, there was a little dog named Max. Max liked to run in the park with his "
        "friend Tom. One day, Tom found a big red ball under a tree. He was very happy and ran to "
        "show Max.",
        true);
    ASSERT_GE(tokens_.size(), 2u * kCtx);
  }
  std::unique_ptr<KvCache> Cache(const std::string& spec) {
    return MakeKvCache(spec, model_->CacheGeometry(kCtx)).value();
  }
  std::vector<int32_t> Chunk(int c) const {
    return {tokens_.begin() + c * kCtx, tokens_.begin() + (c + 1) * kCtx};
  }
  KldBaseInfo Info(int top_k) const {
    KldBaseInfo i;
    i.vocab = model_->vocab_size();
    i.ctx = kCtx;
    i.prefill = kPrefill;
    i.chunks = 2;
    i.top_k = top_k;
    i.model_name = "stories";
    i.model_identity = src_->identity;
    i.tokenizer_fingerprint = "tok-fp";
    i.base_cache = "fp16";
    i.text = "inline";
    return i;
  }
  // Writes the fp16 base of the two chunks to `path`.
  void WriteBase(const std::string& path, int top_k) {
    auto w = KldBaseWriter::Create(path, Info(top_k));
    ASSERT_TRUE(w.ok()) << w.message();
    auto cache = Cache("fp16");
    for (int c = 0; c < 2; ++c) {
      auto ref = ComputeReference(*model_, *cache, Chunk(c), kPrefill, top_k);
      ASSERT_TRUE(ref.ok()) << ref.message();
      ASSERT_TRUE(w->Add(*ref).ok());
    }
    ASSERT_TRUE(w->Commit().ok());
  }

  static constexpr int kCtx = 20, kPrefill = 8;
  std::unique_ptr<ModelSource> src_;
  std::unique_ptr<LlamaModel> model_;
  std::vector<int32_t> tokens_;
};

TEST_F(KldFile, StatisticsOfASmallFileMatchANaiveComputation) {
  const std::string path = KldTempPath("small.kld");
  const int V = model_->vocab_size();
  WriteBase(path, V);
  auto rd = KldBaseReader::Open(path);
  ASSERT_TRUE(rd.ok()) << rd.message();
  EXPECT_EQ(rd->info().chunks, 2);
  EXPECT_EQ(rd->info().model_identity, src_->identity);
  std::vector<PositionScore> pos;
  auto test = Cache("streaming:keep=0.3");
  for (int c = 0; c < 2; ++c) {
    auto ref = rd->Next();
    ASSERT_TRUE(ref.ok()) << ref.message();
    EXPECT_EQ(ref->tokens, Chunk(c));
    auto s = ScoreAgainstReference(*model_, *test, *ref);
    ASSERT_TRUE(s.ok()) << s.message();
    pos.insert(pos.end(), s->positions.begin(), s->positions.end());
  }
  EXPECT_FALSE(rd->Next().ok());  // only two chunks
  ASSERT_EQ(pos.size(), 2u * (kCtx - kPrefill));
  const KldSummary got = Summarize(pos);

  // Naive: the full distributions of both caches, KL by its definition.
  std::vector<double> kl, dp, nt, nb;
  int same = 0;
  auto base_cache = Cache("fp16");
  for (int c = 0; c < 2; ++c) {
    auto p = ComputeReference(*model_, *base_cache, Chunk(c), kPrefill, V);
    auto q = ComputeReference(*model_, *test, Chunk(c), kPrefill, V);
    ASSERT_TRUE(p.ok() && q.ok());
    for (int s = 0; s < p->positions(); ++s) {
      std::vector<double> lp(V), lq(V);
      for (int j = 0; j < V; ++j) {
        lp[p->top_ids[s * V + j]] = p->top_logprobs[s * V + j];
        lq[q->top_ids[s * V + j]] = q->top_logprobs[s * V + j];
      }
      double k = 0;
      for (int j = 0; j < V; ++j) k += std::exp(lp[j]) * (lp[j] - lq[j]);
      kl.push_back(std::max(0.0, k));
      const int32_t t = Chunk(c)[kPrefill + s];
      nb.push_back(-lp[t]);
      nt.push_back(-lq[t]);
      dp.push_back(std::exp(lq[t]) - std::exp(lp[t]));
      same += p->argmax[s] == q->argmax[s];
    }
  }
  const double n = static_cast<double>(kl.size());
  auto mean = [&](const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return s / n;
  };
  auto se = [&](const std::vector<double>& v) {
    const double m = mean(v);
    double s2 = 0;
    for (double x : v) s2 += x * x;
    return std::sqrt((s2 / n - m * m) / (n - 1));
  };
  EXPECT_GT(mean(kl), 1e-3);  // the eviction really changes the predictions
  EXPECT_NEAR(got.kld.mean, mean(kl), 1e-5 * mean(kl));
  EXPECT_NEAR(got.kld.se, se(kl), 1e-4 * se(kl));
  std::vector<double> sorted = kl;
  std::sort(sorted.begin(), sorted.end());
  const double r = 0.9 * (n - 1);
  const size_t lo = static_cast<size_t>(r);
  EXPECT_NEAR(got.kld_q.p90, sorted[lo] + (r - lo) * (sorted[lo + 1] - sorted[lo]), 1e-5);
  EXPECT_NEAR(got.kld_q.median, 0.5 * (sorted[11] + sorted[12]), 1e-5);  // 24 values
  EXPECT_NEAR(got.ppl_test.mean, std::exp(mean(nt)), 1e-5);
  EXPECT_NEAR(got.ppl_base.mean, std::exp(mean(nb)), 1e-5);
  EXPECT_NEAR(got.ppl_test.se, std::exp(mean(nt)) * se(nt), 1e-5);
  EXPECT_NEAR(got.p_diff.mean, mean(dp), 1e-6);
  EXPECT_NEAR(got.same_top.mean, same / n, 1e-12);
}

TEST_F(KldFile, TopKFileGivesALowerBoundOfTheExactKl) {
  const std::string exact = KldTempPath("exact.kld"), topk = KldTempPath("top8.kld");
  WriteBase(exact, model_->vocab_size());
  WriteBase(topk, 8);
  EXPECT_LT(std::filesystem::file_size(topk), std::filesystem::file_size(exact) / 10);
  double kl[2];
  int i = 0;
  for (const std::string& p : {exact, topk}) {
    auto rd = KldBaseReader::Open(p);
    ASSERT_TRUE(rd.ok()) << rd.message();
    auto test = Cache("streaming:keep=0.3");
    auto s = ScoreAgainstReference(*model_, *test, rd->Next().value());
    ASSERT_TRUE(s.ok());
    kl[i++] = s->kl;
  }
  EXPECT_LE(kl[1], kl[0] + 1e-9);
  EXPECT_GT(kl[1], 0.5 * kl[0]);
}

TEST_F(KldFile, RejectsTruncatedCorruptAndForeignFiles) {
  const std::string path = KldTempPath("good.kld");
  WriteBase(path, 8);
  const std::string good = ReadBytes(path);
  ASSERT_GT(good.size(), 200u);

  const std::string cut = KldTempPath("cut.kld");
  WriteBytes(cut, good.substr(0, good.size() - 100));
  auto r = KldBaseReader::Open(cut);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("is truncated"), std::string::npos) << r.message();
  WriteBytes(cut, good.substr(0, 30));  // inside the header
  r = KldBaseReader::Open(cut);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("truncated"), std::string::npos) << r.message();

  std::string bad = good;
  bad[good.size() / 2] ^= 0x40;
  const std::string flip = KldTempPath("flip.kld");
  WriteBytes(flip, bad);
  r = KldBaseReader::Open(flip);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("checksum mismatch"), std::string::npos) << r.message();

  bad = good;
  bad[0] = 'X';
  WriteBytes(flip, bad);
  r = KldBaseReader::Open(flip);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("not a KL base file"), std::string::npos) << r.message();

  bad = good;
  bad[8] = 9;  // version 9
  WriteBytes(flip, bad);
  r = KldBaseReader::Open(flip);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("format version 9"), std::string::npos) << r.message();

  // Another model, another tokenizer, chunks longer than the model's context.
  const KldBaseInfo base = Info(8);
  KldBaseInfo here = base;
  EXPECT_TRUE(CheckBaseFits(base, "b.kld", here, 512, false).ok());
  here.model_identity = "0123456789abcdef";
  Status st = CheckBaseFits(base, "b.kld", here, 512, false);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("--kl-any-model"), std::string::npos) << st.message();
  EXPECT_TRUE(CheckBaseFits(base, "b.kld", here, 512, true).ok());
  here = base;
  here.tokenizer_fingerprint = "other";
  st = CheckBaseFits(base, "b.kld", here, 512, true);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("another tokenizer"), std::string::npos) << st.message();
  here = base;
  here.vocab = 32000;
  st = CheckBaseFits(base, "b.kld", here, 512, true);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("vocabulary of 512"), std::string::npos) << st.message();
  st = CheckBaseFits(base, "b.kld", base, 16, false);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("context length 16"), std::string::npos) << st.message();
}

TEST(ChunkPlan, CountsChunksAndRejectsMoreThanTheText) {
  auto p = PlanChunks(1000, 256, 0, 0);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->chunks, 3);  // 1000 / 256, the tail unused
  EXPECT_EQ(p->prefill, 128);
  EXPECT_EQ(p->scored_per_chunk(), 128);
  p = PlanChunks(100, 256, 0, 0);  // shorter than ctx: one chunk of the text
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->ctx, 100);
  EXPECT_EQ(p->chunks, 1);
  auto bad = PlanChunks(1000, 256, 0, 4);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("--chunks 4 needs 1024 tokens"), std::string::npos) << bad.message();
  EXPECT_FALSE(PlanChunks(1000, 256, 256, 0).ok());  // nothing left to score
}

}  // namespace
}  // namespace hqekv::lm
