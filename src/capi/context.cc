// C API: contexts (a model + the KV cache of one sequence), sampling, and the
// generation loop of `hqekv run`.
#include <algorithm>
#include <string>
#include <vector>

#include "capi/handles.h"
#include "core/log.h"
#include "model/sampler.h"
#include "policy/factory.h"
#include "tokenizer/tokenizer.h"

using hqekv::capi::Fail;
using hqekv::capi::Guard;

namespace {

hqekv_sampler_params ParamsFrom(const hqekv::SamplerConfig& c) {
  hqekv_sampler_params p;
  p.temperature = c.temperature;
  p.top_k = c.top_k;
  p.top_p = c.top_p;
  p.min_p = c.min_p;
  p.repeat_penalty = c.repeat_penalty;
  p.repeat_last_n = c.repeat_last_n;
  p.seed = c.seed;
  return p;
}

// Decodes tokens[0..n) at the next positions (arguments already checked).
// A batch that fails part-way leaves the context as before the call: the
// cache, which may hold some layers of the batch, is rebuilt from the
// window, and the logits of the last token are restored. If rebuilding fails
// too, the context is reset to empty (and the message says so) rather than
// left inconsistent. An exception (out of memory) is rolled back the same
// way before Guard reports it.
hqekv_status DecodeChecked(hqekv_context* ctx, const int32_t* tokens, int n) {
  hqekv::Sequence& seq = ctx->seq;
  const std::vector<float> saved_logits = seq.logits;
  const bool had_logits = seq.has_logits;
  auto rollback = [&]() -> std::string {
    const hqekv::Status r = hqekv::RecomputeWindow(*ctx->model, *ctx->cache, seq);
    if (r.ok()) {
      seq.logits = saved_logits;
      seq.has_logits = had_logits;
      return "";
    }
    ctx->cache->Reset();
    seq.Clear();
    return " (restoring the context failed too: " + r.message() + "; the context was reset)";
  };
  hqekv::Status s;
  std::vector<float> embd;
  if (ctx->embeddings_on) embd.resize(static_cast<size_t>(n) * ctx->src->config.d_model);
  try {
    s = hqekv::DecodeTokens(*ctx->model, *ctx->cache, seq, tokens, n,
                            ctx->embeddings_on ? embd.data() : nullptr);
  } catch (...) {
    (void)rollback();  // the exception is what Guard reports
    throw;
  }
  if (s.ok()) {
    // The last batch is now this one (hqekv_get_*_ith index it): logits
    // rows belong to hqekv_decode_batch only.
    ctx->batch_row.clear();
    ctx->batch_logits.clear();
    ctx->embd = std::move(embd);
    ctx->embd_seq.assign(ctx->embd.empty() ? 0 : static_cast<size_t>(n), 0);
    hqekv::capi::LogBudgetNote(ctx, *ctx->cache, 0);
    return HQEKV_OK;
  }
  return Fail(HQEKV_ERR_COMPUTE, "hqekv_decode: " + s.message() + rollback());
}

hqekv_status CheckBatch(const char* fn, const hqekv_context* ctx, const int32_t* tokens, int n) {
  if (!ctx) return Fail(HQEKV_ERR_INVALID_ARGUMENT, std::string(fn) + ": ctx is NULL");
  if (!tokens) return Fail(HQEKV_ERR_INVALID_ARGUMENT, std::string(fn) + ": tokens is NULL");
  if (n <= 0)
    return Fail(HQEKV_ERR_INVALID_ARGUMENT,
                std::string(fn) + ": n must be > 0, got " + std::to_string(n));
  const int vocab = ctx->src->config.vocab_size;
  for (int i = 0; i < n; ++i) {
    if (tokens[i] < 0 || tokens[i] >= vocab) {
      return Fail(HQEKV_ERR_INVALID_ARGUMENT,
                  std::string(fn) + ": token " + std::to_string(tokens[i]) + " at index " +
                      std::to_string(i) + " is outside [0, " + std::to_string(vocab) + ")");
    }
  }
  const size_t n_past = ctx->seq.window.size();
  if (n_past + static_cast<size_t>(n) > static_cast<size_t>(ctx->n_ctx)) {
    return Fail(HQEKV_ERR_CONTEXT_FULL, std::string(fn) + ": " + std::to_string(n) +
                                            " tokens after " + std::to_string(n_past) +
                                            " do not fit the context of " +
                                            std::to_string(ctx->n_ctx));
  }
  return HQEKV_OK;
}

// Rebuilds the sampler from its config with `edit` applied (the random state
// restarts from the seed); the sampler is unchanged when the result is invalid.
template <class Edit>
hqekv_status ReconfigureSampler(const char* fn, hqekv_sampler* sampler, Edit&& edit) {
  if (!sampler) return Fail(HQEKV_ERR_INVALID_ARGUMENT, std::string(fn) + ": sampler is NULL");
  hqekv::SamplerConfig c = sampler->sampler.config();
  edit(c);
  auto s = hqekv::Sampler::Create(c);
  if (!s.ok()) return Fail(HQEKV_ERR_INVALID_ARGUMENT, std::string(fn) + ": " + s.message());
  sampler->sampler = std::move(*s);
  return HQEKV_OK;
}

}  // namespace

extern "C" {

hqekv_status hqekv_context_create(const hqekv_model* model, const char* kv_spec, int n_ctx,
                                  hqekv_context** out) {
  return Guard("hqekv_context_create", [&] {
    if (!out) return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_context_create: out is NULL");
    *out = nullptr;
    if (!model) return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_context_create: model is NULL");
    const hqekv::ModelConfig& c = model->src->config;
    auto ctx = std::make_unique<hqekv_context>();
    ctx->src = model->src;
    auto m = hqekv::LlamaModel::Create(*ctx->src);
    if (!m.ok()) return Fail(HQEKV_ERR_LOAD, "hqekv_context_create: " + m.message());
    ctx->model = std::move(*m);
    ctx->n_ctx = n_ctx > 0 ? n_ctx : std::min(c.max_ctx, 4096);  // as `hqekv run --ctx`
    auto spec = hqekv::policy::ParseSpec(kv_spec ? kv_spec : "fp16");
    if (!spec.ok()) return Fail(HQEKV_ERR_SPEC, "hqekv_context_create: kv spec: " + spec.message());
    // Created for this model: a calibration profile must have been made for it.
    auto cache =
        hqekv::policy::CreateCache(*spec, ctx->model->CacheGeometry(ctx->n_ctx),
                                   hqekv::policy::ForModel(c.name, ctx->src->identity, c.n_layers));
    if (!cache.ok())
      return Fail(HQEKV_ERR_SPEC, "hqekv_context_create: kv spec: " + cache.message());
    ctx->cache = std::move(*cache);
    ctx->describe = ctx->cache->Describe();
    ctx->seq.logits.assign(c.vocab_size, 0.0f);
    if (hqekv::LogEnabled()) {
      hqekv::Log(hqekv::LogLevel::kInfo, "context: kv " + ctx->describe + ", n_ctx " +
                                             std::to_string(ctx->n_ctx) + ", model " + c.name);
    }
    *out = ctx.release();
    return HQEKV_OK;
  });
}

void hqekv_context_free(hqekv_context* ctx) { delete ctx; }

int hqekv_context_n_ctx(const hqekv_context* ctx) { return ctx ? ctx->n_ctx : 0; }

int hqekv_context_n_past(const hqekv_context* ctx) {
  return ctx ? static_cast<int>(ctx->seq.window.size()) : 0;
}

const char* hqekv_context_kv_describe(const hqekv_context* ctx) {
  return ctx ? ctx->describe.c_str() : "";
}

hqekv_status hqekv_decode(hqekv_context* ctx, const int32_t* tokens, int n) {
  return Guard("hqekv_decode", [&] {
    hqekv_status s = CheckBatch("hqekv_decode", ctx, tokens, n);
    if (s == HQEKV_OK) s = hqekv::capi::CheckAbort("hqekv_decode", ctx);
    return s != HQEKV_OK ? s : DecodeChecked(ctx, tokens, n);
  });
}

hqekv_status hqekv_get_logits(const hqekv_context* ctx, const float** logits, int* n_vocab) {
  return Guard("hqekv_get_logits", [&] {
    if (!ctx) return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_get_logits: ctx is NULL");
    if (!logits) return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_get_logits: logits is NULL");
    if (!ctx->seq.has_logits) {
      return Fail(HQEKV_ERR_STATE, "hqekv_get_logits: no logits yet (decode a batch first)");
    }
    *logits = ctx->seq.logits.data();
    if (n_vocab) *n_vocab = static_cast<int>(ctx->seq.logits.size());
    return HQEKV_OK;
  });
}

hqekv_status hqekv_context_reset(hqekv_context* ctx) {
  return Guard("hqekv_context_reset", [&] {
    if (!ctx) return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_context_reset: ctx is NULL");
    ctx->cache->Reset();
    ctx->seq.Clear();
    ctx->batch_row.clear();
    ctx->batch_logits.clear();
    ctx->embd.clear();
    ctx->embd_seq.clear();
    return HQEKV_OK;
  });
}

hqekv_sampler_params hqekv_sampler_default_params(void) {
  return ParamsFrom(hqekv::kRunSamplerDefaults);
}

hqekv_sampler_params hqekv_sampler_greedy_params(void) {
  return ParamsFrom(hqekv::SamplerConfig{});  // temperature 0: greedy, every filter off
}

hqekv_status hqekv_sampler_create(const hqekv_sampler_params* params, hqekv_sampler** out) {
  return Guard("hqekv_sampler_create", [&] {
    if (!out) return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_sampler_create: out is NULL");
    *out = nullptr;
    if (!params) return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_sampler_create: params is NULL");
    hqekv::SamplerConfig c;
    c.temperature = params->temperature;
    c.top_k = params->top_k;
    c.top_p = params->top_p;
    c.min_p = params->min_p;
    c.repeat_penalty = params->repeat_penalty;
    c.repeat_last_n = params->repeat_last_n;
    c.seed = params->seed;
    auto s = hqekv::Sampler::Create(c);
    if (!s.ok()) return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_sampler_create: " + s.message());
    *out = new hqekv_sampler{std::move(*s)};
    return HQEKV_OK;
  });
}

void hqekv_sampler_free(hqekv_sampler* sampler) { delete sampler; }

hqekv_status hqekv_sampler_set_penalties(hqekv_sampler* sampler, float presence, float frequency) {
  return Guard("hqekv_sampler_set_penalties", [&] {
    return ReconfigureSampler("hqekv_sampler_set_penalties", sampler, [&](hqekv::SamplerConfig& c) {
      c.presence_penalty = presence;
      c.frequency_penalty = frequency;
    });
  });
}

hqekv_status hqekv_sampler_set_logit_bias(hqekv_sampler* sampler, const int32_t* tokens,
                                          const float* bias, size_t n) {
  return Guard("hqekv_sampler_set_logit_bias", [&] {
    if (n > 0 && (!tokens || !bias)) {
      return Fail(HQEKV_ERR_INVALID_ARGUMENT,
                  "hqekv_sampler_set_logit_bias: tokens or bias is NULL");
    }
    return ReconfigureSampler(
        "hqekv_sampler_set_logit_bias", sampler, [&](hqekv::SamplerConfig& c) {
          c.logit_bias.clear();
          for (size_t i = 0; i < n; ++i) {
            // -inf (or anything below the ban) bans: the finite ban value.
            const float b = bias[i] <= hqekv::kLogitBan ? hqekv::kLogitBan : bias[i];
            c.logit_bias.emplace_back(tokens[i], b);
          }
        });
  });
}

hqekv_status hqekv_context_set_abort_callback(hqekv_context* ctx, int (*abort_fn)(void*),
                                              void* user) {
  return Guard("hqekv_context_set_abort_callback", [&] {
    if (!ctx)
      return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_context_set_abort_callback: ctx is NULL");
    ctx->abort_fn = abort_fn;
    ctx->abort_user = user;
    return HQEKV_OK;
  });
}

hqekv_status hqekv_sampler_sample(hqekv_sampler* sampler, const hqekv_context* ctx,
                                  int32_t* token) {
  return Guard("hqekv_sampler_sample", [&] {
    if (!sampler) return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_sampler_sample: sampler is NULL");
    if (!ctx) return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_sampler_sample: ctx is NULL");
    if (!token) return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_sampler_sample: token is NULL");
    if (!ctx->seq.has_logits)
      return Fail(HQEKV_ERR_STATE, "hqekv_sampler_sample: no logits yet (decode a batch first)");
    *token = sampler->sampler.Sample(ctx->seq.logits.data(),
                                     static_cast<int>(ctx->seq.logits.size()), ctx->seq.history);
    return HQEKV_OK;
  });
}

hqekv_status hqekv_generate(hqekv_context* ctx, hqekv_sampler* sampler, int max_new, int32_t* out,
                            size_t cap, size_t* n_out) {
  return Guard("hqekv_generate", [&] {
    if (!ctx) return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_generate: ctx is NULL");
    if (!sampler) return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_generate: sampler is NULL");
    if (!n_out) return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_generate: n_out is NULL");
    *n_out = 0;
    if (max_new < 0) {
      return Fail(HQEKV_ERR_INVALID_ARGUMENT,
                  "hqekv_generate: max_new must be >= 0, got " + std::to_string(max_new));
    }
    if (cap < static_cast<size_t>(max_new) || (cap > 0 && !out)) {
      return Fail(HQEKV_ERR_INVALID_ARGUMENT,
                  "hqekv_generate: out must hold max_new = " + std::to_string(max_new) +
                      " tokens, cap is " + std::to_string(cap));
    }
    if (!ctx->seq.has_logits)
      return Fail(HQEKV_ERR_STATE, "hqekv_generate: decode the prompt first");
    const hqekv::Tokenizer& tok = *ctx->src->tokenizer;
    // The step `hqekv run` takes (model/generate_step.h); the context's n_ctx
    // is its cache's max_ctx: when it is full, generation shifts the context
    // (hqekv_context_set_shift) or stops.
    hqekv::StepOptions step;
    step.is_eog = [&tok](int32_t t) { return tok.IsEndOfGeneration(t); };
    step.context_shift = ctx->context_shift;
    step.n_keep = ctx->n_keep;
    for (int i = 0; i < max_new; ++i) {
      if (const hqekv_status a = hqekv::capi::CheckAbort("hqekv_generate", ctx); a != HQEKV_OK)
        return a;  // out[0..*n_out) stay emitted; the context holds them
      step.decode = i + 1 < max_new;
      auto r = hqekv::GenerateStep(*ctx->model, *ctx->cache, sampler->sampler, ctx->seq, step);
      if (!r.ok()) {
        // The cache may hold part of the failed token: rebuild it from the
        // window (the tokens already written to out stay decoded).
        (void)hqekv::RecomputeWindow(*ctx->model, *ctx->cache, ctx->seq);
        return Fail(HQEKV_ERR_COMPUTE, "hqekv_generate: " + r.message());
      }
      if (r->end == hqekv::StepEnd::kEndOfGeneration) break;
      out[(*n_out)++] = r->token;
      if (r->end == hqekv::StepEnd::kContextFull) break;
    }
    hqekv::capi::LogBudgetNote(ctx, *ctx->cache, 0);
    return HQEKV_OK;
  });
}

hqekv_status hqekv_context_set_shift(hqekv_context* ctx, int enable, int n_keep) {
  return Guard("hqekv_context_set_shift", [&] {
    if (!ctx) return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_context_set_shift: ctx is NULL");
    // A shift must drop at least one token: keep + 1 < n_ctx.
    if (n_keep < 0 || n_keep >= ctx->n_ctx - 1) {
      return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_context_set_shift: n_keep must be in [0, " +
                                                  std::to_string(ctx->n_ctx - 1) + "), got " +
                                                  std::to_string(n_keep));
    }
    ctx->context_shift = enable != 0;
    ctx->n_keep = n_keep;
    return HQEKV_OK;
  });
}

int hqekv_context_n_shifts(const hqekv_context* ctx) { return ctx ? ctx->seq.context_shifts : 0; }

hqekv_status hqekv_context_kv_stats(const hqekv_context* ctx, hqekv_kv_stats* out) {
  return Guard("hqekv_context_kv_stats", [&] {
    if (!ctx) return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_context_kv_stats: ctx is NULL");
    if (!out) return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_context_kv_stats: out is NULL");
    hqekv::capi::FillStats(ctx->cache->Stats(), out);
    return HQEKV_OK;
  });
}

hqekv_status hqekv_context_kv_report_json(const hqekv_context* ctx, char* buf, size_t cap,
                                          size_t* len) {
  return Guard("hqekv_context_kv_report_json", [&] {
    if (!ctx) return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_context_kv_report_json: ctx is NULL");
    return hqekv::capi::CopyOut("hqekv_context_kv_report_json",
                                hqekv::capi::StatsJson(ctx->cache->Stats(), ctx->describe), buf,
                                cap, len);
  });
}

}  // extern "C"
