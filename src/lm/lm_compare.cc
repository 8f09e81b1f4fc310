#include "lm/lm_compare.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <numeric>

#include "lm/logprob.h"
#include "lm/protocol.h"

namespace hqekv::lm {
namespace {

using Clock = std::chrono::steady_clock;

Status CheckProtocol(const KvCache& cache, size_t n, int prefill) {
  if (prefill < 1 || static_cast<size_t>(prefill) >= n) {
    return MakeError("compare: prefill length " + std::to_string(prefill) + " must be in [1, " +
                     std::to_string(n) + ") for " + std::to_string(n) + " tokens");
  }
  if (n > static_cast<size_t>(cache.geometry().max_ctx)) {
    return MakeError("compare: " + std::to_string(n) + " tokens exceed the cache context of " +
                     std::to_string(cache.geometry().max_ctx));
  }
  return Status::Ok();
}

// The protocol of this file: t[0..n-1) through lm::RunWindow, scoring the
// logits of positions P-1 .. n-2; on_logits(s, logits) gets scored position
// s = 0 .. n-P-1 (predicting tokens[P + s]), logits fp32 [vocab], writable.
template <class OnLogits>
Status RunProtocol(LlamaModel& model, KvCache& cache, const std::vector<int32_t>& tokens,
                   int prefill, OnLogits on_logits, std::function<void()> after_prefill = {}) {
  LlamaStep step(model);
  const Window w{tokens.data(), static_cast<int>(tokens.size()) - 1, prefill, prefill - 1};
  WindowHooks hooks;
  hooks.after_prefill = std::move(after_prefill);
  hooks.on_logits = [&](int pos, float* logits) {
    on_logits(pos - (prefill - 1), logits);
    return Status::Ok();
  };
  return RunWindow(step, cache, w, hooks);
}

}  // namespace

double ReferenceScores::Perplexity() const {
  double nll = 0;
  for (float lp : target_logprob) nll -= lp;
  return positions() ? std::exp(nll / positions()) : 0.0;
}

Result<ReferenceScores> ComputeReference(LlamaModel& model, KvCache& ref_cache,
                                         const std::vector<int32_t>& tokens, int prefill,
                                         int top_k) {
  HQEKV_RETURN_IF_ERROR(CheckProtocol(ref_cache, tokens.size(), prefill));
  ReferenceScores r;
  r.tokens = tokens;
  r.prefill = prefill;
  r.vocab = model.vocab_size();
  r.top_k = top_k <= 0 || top_k >= r.vocab ? r.vocab : top_k;
  const int S = static_cast<int>(tokens.size()) - prefill;
  r.target_logprob.resize(S);
  r.argmax.resize(S);
  r.top_ids.resize(static_cast<size_t>(S) * r.top_k);
  r.top_logprobs.resize(static_cast<size_t>(S) * r.top_k);
  std::vector<int32_t> order(r.vocab);
  HQEKV_RETURN_IF_ERROR(RunProtocol(model, ref_cache, tokens, prefill, [&](int s, float* logits) {
    LogSoftmax(logits, r.vocab, logits);
    r.target_logprob[s] = logits[tokens[prefill + s]];
    r.argmax[s] = Argmax(logits, r.vocab);
    std::iota(order.begin(), order.end(), 0);
    auto by_prob = [&](int32_t a, int32_t b) {
      return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
    };
    if (r.top_k < r.vocab) {
      std::partial_sort(order.begin(), order.begin() + r.top_k, order.end(), by_prob);
    } else {
      std::sort(order.begin(), order.end(), by_prob);
    }
    for (int j = 0; j < r.top_k; ++j) {
      r.top_ids[static_cast<size_t>(s) * r.top_k + j] = order[j];
      r.top_logprobs[static_cast<size_t>(s) * r.top_k + j] = logits[order[j]];
    }
  }));
  r.ref_stats = ref_cache.Stats();
  return r;
}

Result<LmScore> ScoreAgainstReference(LlamaModel& model, KvCache& test_cache,
                                      const ReferenceScores& ref) {
  HQEKV_RETURN_IF_ERROR(CheckProtocol(test_cache, ref.tokens.size(), ref.prefill));
  if (ref.vocab != model.vocab_size())
    return MakeError("compare: the reference was computed with another model");
  const auto t0 = Clock::now();
  LmScore sc;
  double nll = 0, kl = 0, kl_sq = 0;
  int agree = 0;
  HQEKV_RETURN_IF_ERROR(RunProtocol(
      model, test_cache, ref.tokens, ref.prefill,
      [&](int s, float* logits) {
        LogSoftmax(logits, ref.vocab, logits);
        nll -= logits[ref.tokens[ref.prefill + s]];
        const bool same_top = Argmax(logits, ref.vocab) == ref.argmax[s];
        agree += same_top;
        const int32_t target = ref.tokens[ref.prefill + s];
        const int32_t* ids = &ref.top_ids[static_cast<size_t>(s) * ref.top_k];
        const float* lp = &ref.top_logprobs[static_cast<size_t>(s) * ref.top_k];
        double k = KlSum(lp, logits, ref.top_k, ids);
        if (ref.top_k < ref.vocab) {  // the "everything else" bucket
          double p_ref_in = 0, p_test_in = 0;
          for (int j = 0; j < ref.top_k; ++j) {
            p_ref_in += std::exp(static_cast<double>(lp[j]));
            p_test_in += std::exp(static_cast<double>(logits[ids[j]]));
          }
          const double pr = std::max(0.0, 1.0 - p_ref_in), pt = std::max(1e-30, 1.0 - p_test_in);
          if (pr > 0) k += pr * (std::log(pr) - std::log(pt));
        }
        k = std::max(0.0, k);  // rounding can make an exact zero slightly negative
        kl += k;
        kl_sq += k * k;
        PositionScore ps;
        ps.nll_test = -static_cast<double>(logits[target]);
        ps.nll_base = -static_cast<double>(ref.target_logprob[s]);
        ps.kld = k;
        ps.p_diff = std::exp(-ps.nll_test) - std::exp(-ps.nll_base);
        ps.same_top = same_top;
        sc.positions.push_back(ps);
      },
      [&] { sc.stats_after_prefill = test_cache.Stats(); }));
  sc.scored = ref.positions();
  sc.nll = nll / sc.scored;
  sc.ppl = std::exp(sc.nll);
  sc.kl = kl / sc.scored;
  sc.top1_agree = static_cast<double>(agree) / sc.scored;
  if (sc.scored > 1) {
    const double n = sc.scored;
    const double var_kl = std::max(0.0, (kl_sq - kl * kl / n) / (n - 1));
    sc.kl_stderr = std::sqrt(var_kl / n);
    const double p = sc.top1_agree;
    sc.top1_stderr = std::sqrt(p * (1 - p) / (n - 1));
  }
  sc.stats_end = test_cache.Stats();
  sc.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return sc;
}

Result<PplResult> SlidingPerplexity(
    LlamaModel& model, KvCache& cache, const std::vector<int32_t>& tokens, int ctx, int stride,
    const std::function<void(int window, int scored, double mean_nll)>& on_window,
    std::vector<double>* token_nll) {
  const int n = static_cast<int>(tokens.size());
  if (n < 2) return MakeError("perplexity: the text has fewer than 2 tokens");
  if (ctx < 2) return MakeError("perplexity: --ctx must be >= 2, got " + std::to_string(ctx));
  if (ctx > cache.geometry().max_ctx) {
    return MakeError("perplexity: --ctx " + std::to_string(ctx) + " exceeds the cache context of " +
                     std::to_string(cache.geometry().max_ctx));
  }
  if (stride <= 0) stride = ctx;
  if (stride > ctx) return MakeError("perplexity: --stride must be <= --ctx");
  const auto t0 = Clock::now();
  PplResult r;
  const int V = model.vocab_size();
  std::vector<float> logits;
  std::vector<int32_t> pos(ctx);
  std::iota(pos.begin(), pos.end(), 0);
  int scored_until = 1;  // first target index not yet scored
  double nll = 0;
  for (int b = 0;; b += stride) {
    const int e = std::min(b + ctx, n);
    const int len = e - b;
    if (len < 2) break;
    cache.Reset();
    logits.resize(static_cast<size_t>(len) * V);
    HQEKV_RETURN_IF_ERROR(
        model.Forward(&tokens[b], pos.data(), len, cache, Logits::kAll, logits.data(), true));
    for (int j = std::max(b + 1, scored_until); j < e; ++j) {
      const float* l = &logits[static_cast<size_t>(j - 1 - b) * V];  // row j-1 predicts token j
      const double v = Nll<float>(l, V, tokens[j]);  // fp32 log-probs, as ComputeReference stores
      nll += v;
      if (token_nll) token_nll->push_back(v);
      ++r.scored;
    }
    scored_until = e;
    ++r.windows;
    if (on_window) on_window(r.windows - 1, r.scored, nll / r.scored);
    if (e == n) break;
  }
  r.nll = nll / r.scored;
  r.ppl = std::exp(r.nll);
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return r;
}

Result<ChunkPlan> PlanChunks(int64_t n_tokens, int ctx, int prefill, int chunks) {
  if (ctx < 2) return MakeError("--ctx must be >= 2, got " + std::to_string(ctx));
  if (n_tokens < 2) return MakeError("the text has fewer than 2 tokens");
  if (chunks < 0)
    return MakeError("--chunks must be >= 0 (0 = all), got " + std::to_string(chunks));
  ChunkPlan p;
  p.ctx = static_cast<int>(std::min<int64_t>(ctx, n_tokens));
  const int64_t available = n_tokens / p.ctx;
  if (chunks > available) {
    return MakeError("--chunks " + std::to_string(chunks) + " needs " +
                     std::to_string(static_cast<int64_t>(chunks) * p.ctx) + " tokens (" +
                     std::to_string(chunks) + " x " + std::to_string(p.ctx) + "), the text has " +
                     std::to_string(n_tokens) + " tokens: " + std::to_string(available) +
                     " chunk(s) of " + std::to_string(p.ctx));
  }
  p.chunks = chunks > 0 ? chunks : static_cast<int>(std::min<int64_t>(available, 1 << 30));
  p.prefill = prefill > 0 ? prefill : p.ctx / 2;
  if (p.prefill >= p.ctx) {
    return MakeError("--prefill " + std::to_string(p.prefill) + " leaves nothing to score in a " +
                     std::to_string(p.ctx) +
                     "-token chunk (--ctx, or the text cut to --max-tokens)");
  }
  return p;
}

int DefaultRefTopK(int vocab, const ChunkPlan& plan) {
  return static_cast<int64_t>(vocab) * plan.scored_per_chunk() <= (int64_t{64} << 20) ? 0 : 256;
}

std::vector<int32_t> ChunkTokens(const std::vector<int32_t>& ids, const ChunkPlan& plan, int c,
                                 int32_t bos) {
  std::vector<int32_t> t(ids.begin() + static_cast<size_t>(c) * plan.ctx,
                         ids.begin() + static_cast<size_t>(c + 1) * plan.ctx);
  if (bos >= 0) t[0] = bos;
  return t;
}

}  // namespace hqekv::lm
