// Language-model scoring of KV caches for `hqekv ppl`: one token sequence
// through the prefill-then-teacher-force protocol (lm/protocol.h) against a
// stored reference, and plain sliding-window perplexity.
//
// Protocol on token ids t[0..n) (lm::RunWindow on t[0..n-1), first scored
// position P-1):
//   1. Reset the cache; run t[0..P) as ONE batch (Forward with is_prefill =
//      true: the policy's compression event happens at its EndBatch); the
//      logits of position P-1 predict t[P].
//   2. Teacher-force t[P..n-1) one token at a time (is_prefill = false); the
//      logits of position i predict t[i+1].
// So n - P next-token predictions are scored, all made after compression.
// The reference pass (an uncompressed cache, normally fp16) runs the same
// protocol once; its next-token distributions are stored and any number of
// test caches is scored against them. Log-probabilities are lm/logprob.h's,
// stored as fp32.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cache/kv_cache.h"
#include "core/status.h"
#include "lm/kld_stats.h"
#include "model/llama.h"

namespace hqekv::lm {

// The stored reference distributions of one token sequence.
struct ReferenceScores {
  std::vector<int32_t> tokens;
  int prefill = 0;  // P
  int top_k = 0;    // entries kept per position (== vocab when exact)
  int vocab = 0;
  // Per scored position s = 0 .. n-P-1 (predicting tokens[P + s]):
  std::vector<float> target_logprob;  // log p_ref(tokens[P+s])
  std::vector<int32_t> argmax;        // ref top-1 token
  std::vector<int32_t> top_ids;       // [s][top_k] ids, by decreasing probability
  std::vector<float> top_logprobs;    // [s][top_k] log p_ref
  KvStats ref_stats;                  // reference cache at the end of the pass
  int positions() const { return static_cast<int>(target_logprob.size()); }
  double Perplexity() const;  // of the reference pass
};

struct LmScore {
  int scored = 0;  // predictions scored (n - P)
  double nll = 0;  // mean negative log-likelihood (nats / token)
  double ppl = 0;  // exp(nll)
  // Mean over positions of KL(ref || test) in nats. Exact when the reference
  // kept the whole vocabulary (top_k == vocab); otherwise the KL between the
  // two distributions coarsened to {the ref's top-k tokens, "everything
  // else"}, which is a lower bound of the exact KL.
  double kl = 0;
  double top1_agree = 0;  // fraction of positions where argmax test == argmax ref
  // Standard errors of kl and top1_agree over the scored positions
  // (sample standard deviation / sqrt(scored); positions treated as
  // independent, so a lower bound when errors are correlated in time).
  double kl_stderr = 0, top1_stderr = 0;
  // Per scored position: the nll of both runs, KL (clamped at 0, with the
  // top-k coarsening above), delta p and top-1 agreement (lm/kld_stats.h).
  std::vector<PositionScore> positions;
  KvStats stats_after_prefill;  // the test cache right after the compression event
  KvStats stats_end;            // and after the last token
  double seconds = 0;
};

// Runs the protocol with `ref_cache` (reset first) and stores the reference
// distributions. 1 <= prefill < tokens.size() <= the cache's max_ctx.
// top_k <= 0 or >= vocab keeps the whole vocabulary (exact KL).
Result<ReferenceScores> ComputeReference(LlamaModel& model, KvCache& ref_cache,
                                         const std::vector<int32_t>& tokens, int prefill,
                                         int top_k = 0);

// Runs the same protocol with `test_cache` (reset first) and scores it.
Result<LmScore> ScoreAgainstReference(LlamaModel& model, KvCache& test_cache,
                                      const ReferenceScores& ref);

// Plain perplexity of a token stream with sliding windows: windows of up to
// `ctx` tokens start every `stride` tokens (stride <= ctx); each window runs
// from an empty cache (positions from 0) as one batch, and scores the
// tokens not scored by an earlier window (the first window scores all but
// its first token). stride <= 0 means stride = ctx.
struct PplResult {
  int scored = 0;
  int windows = 0;
  double nll = 0;
  double ppl = 0;
  double seconds = 0;
};
// Per window (after each): on_window(window index, tokens scored so far,
// running mean NLL) -- progress lines; may be empty.
Result<PplResult> SlidingPerplexity(
    LlamaModel& model, KvCache& cache, const std::vector<int32_t>& tokens, int ctx, int stride,
    const std::function<void(int window, int scored, double mean_nll)>& on_window = {},
    std::vector<double>* token_nll = nullptr);

// Chunks of a token stream for chunked scoring (`hqekv ppl --kv`,
// --kl-divergence-base): consecutive, non-overlapping chunks of `ctx` tokens
// (the trailing tokens that do not fill a chunk are not used, as
// llama-perplexity does); a stream shorter than ctx is one chunk of its own
// length. In each chunk the first `prefill` tokens are the context and the
// remaining ctx - prefill tokens are scored (prefill default ctx / 2).
struct ChunkPlan {
  int ctx = 0;      // tokens per chunk
  int prefill = 0;  // P
  int chunks = 0;
  int scored_per_chunk() const { return ctx - prefill; }
};
// n_tokens: the stream's length; ctx >= 2; prefill 0 = ctx / 2; chunks 0 =
// all. Errors: a --chunks count beyond the text (naming both counts), a
// prefill that leaves nothing to score.
Result<ChunkPlan> PlanChunks(int64_t n_tokens, int ctx, int prefill, int chunks);

// The reference's top-k for a chunk plan when the user did not choose one:
// 0 (exact KL over the whole vocabulary) unless one chunk would store more
// than 64M log-probabilities (vocab x scored positions), then 256.
int DefaultRefTopK(int vocab, const ChunkPlan& plan);

// Chunk c of the token stream (plan.ctx tokens), its first token replaced by
// `bos` when bos >= 0 (as llama-perplexity does when the model file asks
// for a BOS; pass -1 otherwise).
std::vector<int32_t> ChunkTokens(const std::vector<int32_t>& ids, const ChunkPlan& plan, int c,
                                 int32_t bos);

}  // namespace hqekv::lm
