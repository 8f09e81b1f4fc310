// C API: the quality of a KV policy against a reference cache, by the
// protocol of `hqekv ppl --kv SPEC --ref REF` (lm/lm_compare.h), so that a
// program (or the Python package's Model.perplexity / pareto) gets the same
// figures as the CLI without parsing its output.
#include <algorithm>
#include <string>
#include <vector>

#include "capi/handles.h"
#include "lm/kld_stats.h"
#include "lm/lm_compare.h"
#include "model/llama.h"
#include "policy/factory.h"

using hqekv::capi::Fail;
using hqekv::capi::Guard;

extern "C" {

hqekv_compare_params hqekv_compare_default_params(void) {
  hqekv_compare_params p;
  p.n_ctx = 0;
  p.n_prefill = 0;
  p.n_chunks = 0;
  p.ref_top_k = -1;
  return p;
}

hqekv_status hqekv_compare(const hqekv_model* model, const int32_t* tokens, size_t n,
                           const char* kv_spec, const char* ref_spec,
                           const hqekv_compare_params* params, hqekv_compare_result* out) {
  return Guard("hqekv_compare", [&]() -> hqekv_status {
    if (!out) return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_compare: out is NULL");
    *out = hqekv_compare_result{};
    if (!model) return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_compare: model is NULL");
    if (!tokens && n > 0) return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_compare: tokens is NULL");
    if (!kv_spec) return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_compare: kv_spec is NULL");
    const hqekv_compare_params p = params ? *params : hqekv_compare_default_params();
    const hqekv::ModelConfig& c = model->src->config;
    for (size_t i = 0; i < n; ++i) {
      if (tokens[i] < 0 || tokens[i] >= c.vocab_size) {
        return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_compare: token " +
                                                    std::to_string(tokens[i]) + " at index " +
                                                    std::to_string(i) + " is outside [0, " +
                                                    std::to_string(c.vocab_size) + ")");
      }
    }
    if (p.n_ctx < 0 || p.n_prefill < 0 || p.n_chunks < 0 || p.ref_top_k < -1) {
      return Fail(HQEKV_ERR_INVALID_ARGUMENT,
                  "hqekv_compare: params n_ctx, n_prefill, n_chunks must be >= 0 and ref_top_k "
                  ">= -1");
    }
    const std::vector<int32_t> ids(tokens, tokens + n);
    const int64_t n_tokens = static_cast<int64_t>(n);
    const int ctx = p.n_ctx > 0 ? p.n_ctx : static_cast<int>(std::min<int64_t>(512, n_tokens));
    if (ctx > c.max_ctx) {
      return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_compare: n_ctx " + std::to_string(ctx) +
                                                  " is more than the model's " +
                                                  std::to_string(c.max_ctx));
    }
    auto plan = hqekv::lm::PlanChunks(n_tokens, ctx, p.n_prefill, p.n_chunks);
    if (!plan.ok()) return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_compare: " + plan.message());

    auto test_spec = hqekv::policy::ParseSpec(kv_spec);
    if (!test_spec.ok())
      return Fail(HQEKV_ERR_SPEC, "hqekv_compare: kv_spec: " + test_spec.message());
    auto base_spec = hqekv::policy::ParseSpec(ref_spec ? ref_spec : "fp16");
    if (!base_spec.ok())
      return Fail(HQEKV_ERR_SPEC, "hqekv_compare: ref_spec: " + base_spec.message());
    auto m = hqekv::LlamaModel::Create(*model->src);
    if (!m.ok()) return Fail(HQEKV_ERR_LOAD, "hqekv_compare: " + m.message());
    const auto geometry = (*m)->CacheGeometry(plan->ctx);
    const auto for_model = hqekv::policy::ForModel(c.name, model->src->identity, c.n_layers);
    auto test_cache = hqekv::policy::CreateCache(*test_spec, geometry, for_model);
    if (!test_cache.ok())
      return Fail(HQEKV_ERR_SPEC, "hqekv_compare: kv_spec: " + test_cache.message());
    auto ref_cache = hqekv::policy::CreateCache(*base_spec, geometry, for_model);
    if (!ref_cache.ok())
      return Fail(HQEKV_ERR_SPEC, "hqekv_compare: ref_spec: " + ref_cache.message());

    const int top_k =
        p.ref_top_k >= 0 ? p.ref_top_k : hqekv::lm::DefaultRefTopK(c.vocab_size, *plan);
    const hqekv::Tokenizer& tok = *model->src->tokenizer;
    const int32_t bos = tok.add_bos() ? tok.bos() : -1;
    std::vector<hqekv::lm::PositionScore> positions;
    hqekv::lm::LmScore last;
    bool bound = false;
    hqekv::KvStats ref_end;
    for (int ch = 0; ch < plan->chunks; ++ch) {
      auto ref = hqekv::lm::ComputeReference(
          **m, **ref_cache, hqekv::lm::ChunkTokens(ids, *plan, ch, bos), plan->prefill, top_k);
      if (!ref.ok()) return Fail(HQEKV_ERR_COMPUTE, "hqekv_compare: reference: " + ref.message());
      bound = ref->top_k < ref->vocab;
      ref_end = ref->ref_stats;
      auto s = hqekv::lm::ScoreAgainstReference(**m, **test_cache, *ref);
      if (!s.ok()) return Fail(HQEKV_ERR_COMPUTE, "hqekv_compare: " + s.message());
      positions.insert(positions.end(), s->positions.begin(), s->positions.end());
      last = std::move(*s);
    }
    const hqekv::lm::KldSummary sum = hqekv::lm::Summarize(positions);
    out->n_chunks = plan->chunks;
    out->n_ctx = plan->ctx;
    out->n_prefill = plan->prefill;
    out->n_scored = sum.n;
    out->ppl_ref = sum.ppl_base.mean;
    out->ppl_test = sum.ppl_test.mean;
    out->kl_mean = sum.kld.mean;
    out->kl_stderr = sum.kld.se;
    out->kl_p99 = sum.kld_q.p99;
    out->kl_max = sum.kld_q.max;
    out->top1_agree = sum.same_top.mean;
    out->top1_stderr = sum.same_top.se;
    out->kl_is_top_k_bound = bound ? 1 : 0;
    hqekv::capi::FillStats(last.stats_after_prefill, &out->kv_after_prefill);
    hqekv::capi::FillStats(last.stats_end, &out->kv_end);
    hqekv::capi::FillStats(ref_end, &out->ref_kv_end);
    return HQEKV_OK;
  });
}

}  // extern "C"
