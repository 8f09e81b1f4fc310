// C API: many sequences in one context, each with its own KV cache and
// policy, decoded together by hqekv_decode_batch through
// LlamaModel::ForwardMany (one read of the weights per step for all of
// them), per-position logits and top-k log-probabilities.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "cache/kv_state.h"
#include "capi/handles.h"
#include "core/log.h"
#include "lm/logprob.h"
#include "policy/factory.h"

using hqekv::capi::Fail;
using hqekv::capi::Guard;
using hqekv::capi::SeqRef;

namespace hqekv::capi {

SeqRef FindSeq(const hqekv_context* ctx, int32_t id) {
  auto* c = const_cast<hqekv_context*>(ctx);
  if (id == 0) return {c->cache.get(), &c->describe, &c->seq};
  auto it = c->extra.find(id);
  if (it == c->extra.end()) return {};
  return {it->second.cache.get(), &it->second.describe, &it->second.seq};
}

}  // namespace hqekv::capi

namespace {

hqekv_status UnknownSeq(const char* fn, int32_t id) {
  return Fail(HQEKV_ERR_INVALID_ARGUMENT,
              std::string(fn) + ": no sequence " + std::to_string(id) + " in this context");
}

// A new cache for ctx under `spec` (as hqekv_context_create makes one).
hqekv_status MakeCache(const char* fn, const hqekv_context* ctx, const char* spec,
                       hqekv_context::ExtraSeq* out) {
  const hqekv::ModelConfig& c = ctx->src->config;
  auto parsed = hqekv::policy::ParseSpec(spec);
  if (!parsed.ok()) return Fail(HQEKV_ERR_SPEC, std::string(fn) + ": kv spec: " + parsed.message());
  auto cache =
      hqekv::policy::CreateCache(*parsed, ctx->model->CacheGeometry(ctx->n_ctx),
                                 hqekv::policy::ForModel(c.name, ctx->src->identity, c.n_layers));
  if (!cache.ok()) return Fail(HQEKV_ERR_SPEC, std::string(fn) + ": kv spec: " + cache.message());
  out->cache = std::move(*cache);
  out->describe = out->cache->Describe();
  out->seq.logits.assign(c.vocab_size, 0.0f);
  return HQEKV_OK;
}

// Row i of the last batch (i < 0 from the end), or a failed status.
hqekv_status BatchRow(const char* fn, const hqekv_context* ctx, int i, const float** row) {
  if (!ctx) return Fail(HQEKV_ERR_INVALID_ARGUMENT, std::string(fn) + ": ctx is NULL");
  const int n = static_cast<int>(ctx->batch_row.size());
  const int j = i < 0 ? n + i : i;
  if (j < 0 || j >= n) {
    return Fail(HQEKV_ERR_INVALID_ARGUMENT, std::string(fn) + ": index " + std::to_string(i) +
                                                " is outside the last batch of " +
                                                std::to_string(n) + " tokens");
  }
  if (ctx->batch_row[j] < 0) {
    return Fail(HQEKV_ERR_STATE, std::string(fn) + ": the logits of token " + std::to_string(j) +
                                     " were not asked for (hqekv_decode_batch's logits[])");
  }
  *row = ctx->batch_logits.data() +
         static_cast<size_t>(ctx->batch_row[j]) * ctx->src->config.vocab_size;
  return HQEKV_OK;
}

// One sequence's part of a batch.
struct SeqPart {
  int32_t id = 0;
  SeqRef ref;
  std::vector<int32_t> tokens, pos, index;  // index: position in the caller's batch
  bool all_rows = false;                    // logits asked for a token before its last
  std::vector<float> rows;                  // [n][vocab] when all_rows, else [vocab]
  std::vector<float> embd;                  // [n][n_embd] when embeddings are on
};

}  // namespace

extern "C" {

hqekv_status hqekv_seq_add(hqekv_context* ctx, const char* kv_spec, hqekv_seq_id* out) {
  return Guard("hqekv_seq_add", [&] {
    if (!ctx) return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_seq_add: ctx is NULL");
    if (!out) return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_seq_add: out is NULL");
    hqekv_context::ExtraSeq s;
    const hqekv_status st =
        MakeCache("hqekv_seq_add", ctx, kv_spec ? kv_spec : ctx->describe.c_str(), &s);
    if (st != HQEKV_OK) return st;
    *out = ctx->next_seq_id++;
    if (hqekv::LogEnabled()) {
      hqekv::Log(hqekv::LogLevel::kInfo, "sequence " + std::to_string(*out) + ": kv " + s.describe);
    }
    ctx->extra.emplace(*out, std::move(s));
    return HQEKV_OK;
  });
}

hqekv_status hqekv_seq_remove(hqekv_context* ctx, hqekv_seq_id seq) {
  return Guard("hqekv_seq_remove", [&] {
    if (!ctx) return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_seq_remove: ctx is NULL");
    if (seq == 0) {
      ctx->cache->Reset();
      ctx->seq.Clear();
      return HQEKV_OK;
    }
    if (ctx->extra.erase(seq) == 0) return UnknownSeq("hqekv_seq_remove", seq);
    return HQEKV_OK;
  });
}

hqekv_status hqekv_seq_keep(hqekv_context* ctx, hqekv_seq_id seq) {
  return Guard("hqekv_seq_keep", [&] {
    if (!ctx) return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_seq_keep: ctx is NULL");
    if (!hqekv::capi::FindSeq(ctx, seq).seq) return UnknownSeq("hqekv_seq_keep", seq);
    for (auto it = ctx->extra.begin(); it != ctx->extra.end();) {
      it = it->first == seq ? std::next(it) : ctx->extra.erase(it);
    }
    if (seq != 0) {
      ctx->cache->Reset();
      ctx->seq.Clear();
    }
    return HQEKV_OK;
  });
}

hqekv_status hqekv_seq_truncate(hqekv_context* ctx, hqekv_seq_id seq, int n_keep) {
  return Guard("hqekv_seq_truncate", [&] {
    if (!ctx) return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_seq_truncate: ctx is NULL");
    const SeqRef s = hqekv::capi::FindSeq(ctx, seq);
    if (!s.seq) return UnknownSeq("hqekv_seq_truncate", seq);
    const int n = static_cast<int>(s.seq->window.size());
    if (n_keep < 0 || n_keep > n) {
      return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_seq_truncate: n_keep " +
                                                  std::to_string(n_keep) + " is outside [0, " +
                                                  std::to_string(n) + "]");
    }
    if (n_keep == n) return HQEKV_OK;
    // The history (repetition penalty) loses the dropped tokens too: a
    // rewind, as if they had never been decoded.
    const size_t dropped = static_cast<size_t>(n - n_keep);
    s.seq->window.resize(static_cast<size_t>(n_keep));
    s.seq->history.resize(s.seq->history.size() >= dropped ? s.seq->history.size() - dropped : 0);
    const hqekv::Status r = hqekv::RecomputeWindow(*ctx->model, *s.cache, *s.seq);
    if (!r.ok()) {
      s.cache->Reset();
      s.seq->Clear();
      return Fail(HQEKV_ERR_COMPUTE,
                  "hqekv_seq_truncate: " + r.message() + " (the sequence was cleared)");
    }
    return HQEKV_OK;
  });
}

hqekv_status hqekv_seq_copy(hqekv_context* ctx, hqekv_seq_id src, hqekv_seq_id* out) {
  return Guard("hqekv_seq_copy", [&] {
    if (!ctx) return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_seq_copy: ctx is NULL");
    if (!out) return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_seq_copy: out is NULL");
    const SeqRef from = hqekv::capi::FindSeq(ctx, src);
    if (!from.seq) return UnknownSeq("hqekv_seq_copy", src);
    hqekv_context::ExtraSeq s;
    hqekv_status st = MakeCache("hqekv_seq_copy", ctx, from.describe->c_str(), &s);
    if (st != HQEKV_OK) return st;
    if (!from.seq->window.empty()) {
      // Through the state format: the compressed cache is copied as it is.
      std::string bytes;
      st = hqekv::capi::EncodeSeqState("hqekv_seq_copy", ctx, from, &bytes);
      if (st != HQEKV_OK) return st;
      st = hqekv::capi::DecodeSeqState("hqekv_seq_copy", ctx,
                                       SeqRef{s.cache.get(), &s.describe, &s.seq}, bytes);
      if (st != HQEKV_OK) return st;
      s.seq.history = from.seq->history;
    }
    *out = ctx->next_seq_id++;
    if (hqekv::LogEnabled()) {
      hqekv::Log(hqekv::LogLevel::kInfo, "sequence " + std::to_string(*out) + ": kv " + s.describe);
    }
    ctx->extra.emplace(*out, std::move(s));
    return HQEKV_OK;
  });
}

int hqekv_seq_n_past(const hqekv_context* ctx, hqekv_seq_id seq) {
  if (!ctx) return -1;
  const SeqRef s = hqekv::capi::FindSeq(ctx, seq);
  return s.seq ? static_cast<int>(s.seq->window.size()) : -1;
}

const char* hqekv_seq_kv_describe(const hqekv_context* ctx, hqekv_seq_id seq) {
  if (!ctx) return "";
  const SeqRef s = hqekv::capi::FindSeq(ctx, seq);
  return s.describe ? s.describe->c_str() : "";
}

hqekv_status hqekv_seq_kv_stats(const hqekv_context* ctx, hqekv_seq_id seq, hqekv_kv_stats* out) {
  return Guard("hqekv_seq_kv_stats", [&] {
    if (!ctx || !out)
      return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_seq_kv_stats: ctx or out is NULL");
    const SeqRef s = hqekv::capi::FindSeq(ctx, seq);
    if (!s.cache) return UnknownSeq("hqekv_seq_kv_stats", seq);
    hqekv::capi::FillStats(s.cache->Stats(), out);
    return HQEKV_OK;
  });
}

hqekv_status hqekv_decode_batch(hqekv_context* ctx, const hqekv_seq_id* seq_ids,
                                const int32_t* tokens, const int8_t* logits, int n) {
  return Guard("hqekv_decode_batch", [&]() -> hqekv_status {
    const char* fn = "hqekv_decode_batch";
    if (!ctx) return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_decode_batch: ctx is NULL");
    if (!seq_ids || !tokens)
      return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_decode_batch: seq_ids or tokens is NULL");
    if (n <= 0)
      return Fail(HQEKV_ERR_INVALID_ARGUMENT,
                  "hqekv_decode_batch: n must be > 0, got " + std::to_string(n));
    const int vocab = ctx->src->config.vocab_size;
    if (const hqekv_status a = hqekv::capi::CheckAbort(fn, ctx); a != HQEKV_OK) return a;
    std::vector<SeqPart> parts;
    for (int i = 0; i < n; ++i) {
      if (tokens[i] < 0 || tokens[i] >= vocab) {
        return Fail(HQEKV_ERR_INVALID_ARGUMENT,
                    std::string(fn) + ": token " + std::to_string(tokens[i]) + " at index " +
                        std::to_string(i) + " is outside [0, " + std::to_string(vocab) + ")");
      }
      auto it = std::find_if(parts.begin(), parts.end(),
                             [&](const SeqPart& p) { return p.id == seq_ids[i]; });
      if (it == parts.end()) {
        SeqPart p;
        p.id = seq_ids[i];
        p.ref = hqekv::capi::FindSeq(ctx, p.id);
        if (!p.ref.seq) return UnknownSeq(fn, p.id);
        parts.push_back(std::move(p));
        it = parts.end() - 1;
      }
      it->pos.push_back(static_cast<int32_t>(it->ref.seq->window.size() + it->tokens.size()));
      it->tokens.push_back(tokens[i]);
      it->index.push_back(i);
    }
    for (SeqPart& p : parts) {
      if (p.pos.back() >= ctx->n_ctx) {
        return Fail(HQEKV_ERR_CONTEXT_FULL,
                    std::string(fn) + ": sequence " + std::to_string(p.id) + ": " +
                        std::to_string(p.tokens.size()) + " tokens after " +
                        std::to_string(p.ref.seq->window.size()) + " do not fit the context of " +
                        std::to_string(ctx->n_ctx));
      }
      if (logits) {
        for (size_t k = 0; k + 1 < p.index.size(); ++k) p.all_rows |= logits[p.index[k]] != 0;
      }
      const size_t rows = p.all_rows ? p.tokens.size() : 1;
      p.rows.assign(rows * static_cast<size_t>(vocab), 0.0f);
      if (ctx->embeddings_on)
        p.embd.assign(p.tokens.size() * static_cast<size_t>(ctx->src->config.d_model), 0.0f);
    }
    // The weights are read once for every sequence that needs only its last
    // logits; a sequence asking for earlier rows runs alone (all-rows mode).
    std::vector<hqekv::SeqBatch> many;
    for (SeqPart& p : parts) {
      if (p.all_rows) continue;
      hqekv::SeqBatch b;
      b.tokens = p.tokens.data();
      b.pos = p.pos.data();
      b.n = static_cast<int>(p.tokens.size());
      b.cache = p.ref.cache;
      b.logits = p.rows.data();
      b.is_prefill = p.ref.seq->window.empty();
      b.embeddings = p.embd.empty() ? nullptr : p.embd.data();
      many.push_back(b);
    }
    hqekv::Status st;
    auto rollback = [&]() -> std::string {
      std::string note;
      for (SeqPart& p : parts) {
        const std::vector<float> saved = p.ref.seq->logits;
        const bool had = p.ref.seq->has_logits;
        const hqekv::Status r = hqekv::RecomputeWindow(*ctx->model, *p.ref.cache, *p.ref.seq);
        if (r.ok()) {
          p.ref.seq->logits = saved;
          p.ref.seq->has_logits = had;
        } else {
          p.ref.cache->Reset();
          p.ref.seq->Clear();
          note += " (restoring sequence " + std::to_string(p.id) + " failed: " + r.message() +
                  "; it was cleared)";
        }
      }
      return note;
    };
    try {
      if (!many.empty()) st = ctx->model->ForwardMany(many.data(), static_cast<int>(many.size()));
      for (SeqPart& p : parts) {
        if (!st.ok()) break;
        if (!p.all_rows) continue;
        st = ctx->model->Forward(p.tokens.data(), p.pos.data(), static_cast<int>(p.tokens.size()),
                                 *p.ref.cache, hqekv::Logits::kAll, p.rows.data(),
                                 p.ref.seq->window.empty(),
                                 p.embd.empty() ? nullptr : p.embd.data());
      }
    } catch (...) {
      (void)rollback();
      throw;
    }
    if (!st.ok())
      return Fail(HQEKV_ERR_COMPUTE, std::string(fn) + ": " + st.message() + rollback());

    ctx->batch_row.assign(static_cast<size_t>(n), -1);
    ctx->batch_logits.clear();
    const size_t d_model = static_cast<size_t>(ctx->src->config.d_model);
    ctx->embd.assign(ctx->embeddings_on ? static_cast<size_t>(n) * d_model : 0, 0.0f);
    ctx->embd_seq.assign(ctx->embeddings_on ? static_cast<size_t>(n) : 0, 0);
    for (SeqPart& p : parts) {
      for (size_t k = 0; k < p.embd.size() / d_model; ++k) {
        std::copy_n(&p.embd[k * d_model], d_model, &ctx->embd[size_t(p.index[k]) * d_model]);
        ctx->embd_seq[size_t(p.index[k])] = p.id;
      }
      hqekv::capi::LogBudgetNote(ctx, *p.ref.cache, p.id);
      hqekv::Sequence& seq = *p.ref.seq;
      seq.window.insert(seq.window.end(), p.tokens.begin(), p.tokens.end());
      seq.history.insert(seq.history.end(), p.tokens.begin(), p.tokens.end());
      const size_t last = p.all_rows ? p.tokens.size() - 1 : 0;
      seq.logits.assign(p.rows.begin() + last * vocab, p.rows.begin() + (last + 1) * vocab);
      seq.has_logits = true;
      for (size_t k = 0; k < p.index.size(); ++k) {
        const bool is_last = k + 1 == p.index.size();
        const bool want = logits ? logits[p.index[k]] != 0 : is_last;
        if (!want) continue;
        const size_t row = p.all_rows ? k : 0;
        ctx->batch_row[p.index[k]] =
            static_cast<int32_t>(ctx->batch_logits.size() / static_cast<size_t>(vocab));
        ctx->batch_logits.insert(ctx->batch_logits.end(), p.rows.begin() + row * vocab,
                                 p.rows.begin() + (row + 1) * vocab);
      }
    }
    return HQEKV_OK;
  });
}

hqekv_status hqekv_get_logits_ith(const hqekv_context* ctx, int i, const float** logits,
                                  int* n_vocab) {
  return Guard("hqekv_get_logits_ith", [&] {
    if (!logits || !n_vocab)
      return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_get_logits_ith: logits or n_vocab is NULL");
    const hqekv_status st = BatchRow("hqekv_get_logits_ith", ctx, i, logits);
    if (st != HQEKV_OK) return st;
    *n_vocab = ctx->src->config.vocab_size;
    return HQEKV_OK;
  });
}

hqekv_status hqekv_get_top_logprobs_ith(const hqekv_context* ctx, int i, int k, int32_t* ids,
                                        float* logprobs) {
  return Guard("hqekv_get_top_logprobs_ith", [&] {
    const char* fn = "hqekv_get_top_logprobs_ith";
    if (!ids || !logprobs)
      return Fail(HQEKV_ERR_INVALID_ARGUMENT, std::string(fn) + ": ids or logprobs is NULL");
    const float* row = nullptr;
    const hqekv_status st = BatchRow(fn, ctx, i, &row);
    if (st != HQEKV_OK) return st;
    const int vocab = ctx->src->config.vocab_size;
    if (k <= 0 || k > vocab) {
      return Fail(HQEKV_ERR_INVALID_ARGUMENT, std::string(fn) + ": k " + std::to_string(k) +
                                                  " is outside [1, " + std::to_string(vocab) + "]");
    }
    const double lse = hqekv::lm::LogSumExp(row, vocab);
    const std::vector<int32_t> order = hqekv::lm::TopTokens(row, vocab, k);
    for (int t = 0; t < k; ++t) {
      ids[t] = order[static_cast<size_t>(t)];
      logprobs[t] = static_cast<float>(row[ids[t]] - lse);
    }
    return HQEKV_OK;
  });
}

hqekv_status hqekv_seq_sample(hqekv_sampler* sampler, const hqekv_context* ctx, hqekv_seq_id seq,
                              int32_t* token) {
  return Guard("hqekv_seq_sample", [&] {
    if (!sampler || !ctx || !token) {
      return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_seq_sample: sampler, ctx or token is NULL");
    }
    const SeqRef s = hqekv::capi::FindSeq(ctx, seq);
    if (!s.seq) return UnknownSeq("hqekv_seq_sample", seq);
    if (!s.seq->has_logits) {
      return Fail(HQEKV_ERR_STATE, "hqekv_seq_sample: sequence " + std::to_string(seq) +
                                       " has no logits yet (decode a batch first)");
    }
    *token = sampler->sampler.Sample(s.seq->logits.data(), static_cast<int>(s.seq->logits.size()),
                                     s.seq->history);
    return HQEKV_OK;
  });
}

hqekv_status hqekv_seq_state_get_data(const hqekv_context* ctx, hqekv_seq_id seq, uint8_t* buf,
                                      size_t cap, size_t* len) {
  return Guard("hqekv_seq_state_get_data", [&] {
    const char* fn = "hqekv_seq_state_get_data";
    if (!ctx || !len)
      return Fail(HQEKV_ERR_INVALID_ARGUMENT, std::string(fn) + ": ctx or len is NULL");
    const SeqRef s = hqekv::capi::FindSeq(ctx, seq);
    if (!s.seq) return UnknownSeq(fn, seq);
    std::string bytes;
    const hqekv_status st = hqekv::capi::EncodeSeqState(fn, ctx, s, &bytes);
    if (st != HQEKV_OK) return st;
    *len = bytes.size();
    if (cap < bytes.size()) {
      return Fail(HQEKV_ERR_BUFFER_TOO_SMALL, std::string(fn) + ": the state needs " +
                                                  std::to_string(bytes.size()) + " bytes, cap is " +
                                                  std::to_string(cap));
    }
    if (!buf) return Fail(HQEKV_ERR_INVALID_ARGUMENT, std::string(fn) + ": buf is NULL");
    std::memcpy(buf, bytes.data(), bytes.size());
    return HQEKV_OK;
  });
}

hqekv_status hqekv_seq_state_set_data(hqekv_context* ctx, hqekv_seq_id seq, const uint8_t* data,
                                      size_t len) {
  return Guard("hqekv_seq_state_set_data", [&] {
    const char* fn = "hqekv_seq_state_set_data";
    if (!ctx || !data)
      return Fail(HQEKV_ERR_INVALID_ARGUMENT, std::string(fn) + ": ctx or data is NULL");
    const SeqRef s = hqekv::capi::FindSeq(ctx, seq);
    if (!s.seq) return UnknownSeq(fn, seq);
    return hqekv::capi::DecodeSeqState(fn, ctx, s,
                                       std::string_view(reinterpret_cast<const char*>(data), len));
  });
}

}  // extern "C"
