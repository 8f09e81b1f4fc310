// `hqekv ppl`: perplexity of a text, and the quality of a KV cache against a
// reference, in llama-perplexity's terms.
//   Plain mode (no --kv, no --kl-divergence*): sliding windows of --ctx tokens
//     every --stride tokens, each window one batch through an fp16 cache;
//     progress "[i]ppl" after each window, the final estimate +- its standard
//     error over tokens.
//   Chunked modes: the tokens (at most --max-tokens) are cut into consecutive
//     chunks of --ctx tokens (lm::PlanChunks; a text shorter than --ctx is one
//     chunk); each chunk runs the prefill-then-teacher-force protocol
//     (lm/lm_compare.h): its first --prefill tokens (default half the chunk)
//     as one batch, then the rest one token at a time, every one of the
//     ctx - prefill predictions after the compression event scored (the
//     second half of the chunk, as llama-perplexity scores it; it starts at
//     token ctx/2 + 1, this protocol at ctx/2). When the vocabulary has a BOS
//     token it replaces the first token of every chunk (as llama-perplexity).
//     --kv SPEC: reference (--ref, in memory) and SPEC over every chunk, the
//       statistics block (lm/kld_stats.h), KL, top-1 agreement, true bits.
//     --kl-divergence-base FILE: the base run (the --kv cache, default fp16)
//       written to FILE (lm/kld_file.h: tokens + top-k distributions).
//     --kl-divergence FILE: the --kv cache (default fp16) scored against FILE.
#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "cache/kv_report.h"
#include "cli/kv_flags.h"
#include "cli/model_args.h"
#include "cli/registry.h"
#include "core/hash.h"
#include "lm/kld_file.h"
#include "lm/kld_stats.h"
#include "lm/lm_compare.h"
#include "model/llama.h"
#include "policy/factory.h"

namespace hqekv::cli::cmd_ppl {
namespace {

struct PplArgs {
  std::string model, text, tokenizer, kv, ref = "fp16", kld_base_out, kld_base_in;
  int ctx = 0, stride = 0, prefill = 0, threads = 0, ref_top_k = -1, chunks = 0;
  int64_t max_tokens = 0;
  bool kv_report = false, json = false, any_model = false;
  KvTypeFlags kv_types;  // -ctk / -ctv / --kv-cache-dtype instead of --kv
};

int Fail(const std::string& msg) {
  std::fprintf(stderr, "hqekv ppl: error: %s\n", msg.c_str());
  return 1;
}

// Perplexity exp(mean NLL) and its standard error ppl x se(NLL) (first-order).
lm::MeanSe PplOf(const std::vector<double>& nll) {
  const lm::MeanSe m = lm::MeanAndStandardError(nll);
  const double p = std::exp(m.mean);
  return {p, p * m.se};
}

nlohmann::json Json(const lm::MeanSe& m) { return {{"value", m.mean}, {"se", m.se}}; }

nlohmann::json Json(const lm::Quantiles& q) {
  return {{"max", q.max}, {"p99.9", q.p999},    {"p99", q.p99}, {"p95", q.p95}, {"p90", q.p90},
          {"p75", q.p75}, {"median", q.median}, {"p25", q.p25}, {"p10", q.p10}, {"p5", q.p5},
          {"p1", q.p1},   {"p0.1", q.p01},      {"min", q.min}};
}

nlohmann::json Json(const lm::KldSummary& s) {
  return {{"positions", s.n},
          {"ppl_test", Json(s.ppl_test)},
          {"ppl_base", Json(s.ppl_base)},
          {"ln_ppl_correlation", s.ln_ppl_correlation},
          {"ln_ppl_ratio", Json(s.ln_ppl_ratio)},
          {"ppl_ratio", Json(s.ppl_ratio)},
          {"ppl_diff", Json(s.ppl_diff)},
          {"kld", Json(s.kld)},
          {"kld_quantiles", Json(s.kld_q)},
          {"p_diff", Json(s.p_diff)},
          {"p_diff_quantiles", Json(s.p_diff_q)},
          {"p_diff_rms", Json(s.p_diff_rms)},
          {"same_top", Json(s.same_top)}};
}

nlohmann::json Json(const KvStats& s) {
  return {{"bytes", s.bytes.total()},
          {"bits_per_original_element", s.bits_per_original()},
          {"true_bits_per_kept_element", s.true_bits()}};
}

// Fingerprint of a tokenizer: its vocabulary (every piece, in id order) and
// special ids; a base file written with another tokenizer is refused.
std::string TokenizerFingerprint(const Tokenizer& t) {
  uint64_t h = Fnv1a64("hqekv-tokenizer-v1");
  const int32_t special[3] = {t.vocab_size(), t.bos(), t.eos()};
  h = Fnv1a64(special, sizeof special, h);
  for (int32_t i = 0; i < t.vocab_size(); ++i) {
    const std::string& p = t.Piece(i);
    const uint32_t len = static_cast<uint32_t>(p.size());
    h = Fnv1a64(&len, 4, h);
    h = Fnv1a64(p, h);
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

// Progress goes to stdout, or to stderr when stdout carries the JSON.
struct Out {
  bool json = false;
  FILE* progress() const { return json ? stderr : stdout; }
};

// The per-chunk line of the comparison modes (running values over the
// chunks so far, as llama-perplexity's table).
void ChunkLine(FILE* f, int chunk, const std::vector<lm::PositionScore>& so_far) {
  const lm::KldSummary s = lm::Summarize(so_far, /*quantiles=*/false);
  if (chunk == 0) {
    std::fprintf(f, "chunk  %21s  %25s  %25s  %19s  %19s\n", "PPL", "ln(PPL(Q)/PPL(base))",
                 "KL divergence", "delta p RMS", "same top p");
  }
  std::fprintf(
      f,
      "%5d  %9.4f ± %9.4f  %11.5f ± %11.5f  %11.5f ± %11.5f  %6.3f ± %6.3f %%  %6.3f ± %6.3f %%\n",
      chunk + 1, s.ppl_test.mean, s.ppl_test.se, s.ln_ppl_ratio.mean, s.ln_ppl_ratio.se, s.kld.mean,
      s.kld.se, 100 * s.p_diff_rms.mean, 100 * s.p_diff_rms.se, 100 * s.same_top.mean,
      100 * s.same_top.se);
  std::fflush(f);
}

// Scores `cache` against `chunks` references in turn (`next_ref(ch)` gives
// chunk ch's), appending every scored position to *pos and printing the
// running chunk line; *last is the last chunk's score (its cache stats).
template <typename NextRef>
Status ScoreChunks(LlamaModel& model, KvCache& cache, int chunks, NextRef next_ref, FILE* progress,
                   std::vector<lm::PositionScore>* pos, lm::LmScore* last) {
  for (int ch = 0; ch < chunks; ++ch) {
    auto ref = next_ref(ch);
    if (!ref.ok()) return ref.error();
    auto s = lm::ScoreAgainstReference(model, cache, *ref);
    if (!s.ok()) return s.error();
    pos->insert(pos->end(), s->positions.begin(), s->positions.end());
    *last = std::move(*s);
    ChunkLine(progress, ch, *pos);
  }
  return Status();
}

// The BOS that starts each chunk, or -1: only when the model file asks for
// one (tokenizer.ggml.add_bos_token; Qwen's files say false), as
// llama-perplexity does.
int32_t ChunkBos(const Tokenizer& t) { return t.add_bos() ? t.bos() : -1; }

struct Loaded {
  std::unique_ptr<ModelSource> src;
  std::unique_ptr<LlamaModel> model;
};

int Plain(const PplArgs& a, const Out& out, LlamaModel& model, const ModelConfig& c,
          std::vector<int32_t> ids, int ctx) {
  const int stride = a.stride > 0 ? a.stride : ctx;
  if (stride > ctx) return Fail("--stride must be <= --ctx");
  if (a.chunks > 0) {
    // Windows start at 0, stride, 2 stride, ...: N windows use tokens up to
    // (N - 1) stride + ctx.
    const int64_t n = static_cast<int64_t>(ids.size());
    const int64_t available = n <= ctx ? 1 : 1 + (n - ctx + stride - 1) / stride;
    if (a.chunks > available) {
      return Fail("--chunks " + std::to_string(a.chunks) + " is more than the " +
                  std::to_string(available) + " window(s) of " + std::to_string(ctx) +
                  " tokens (stride " + std::to_string(stride) + ") in the text's " +
                  std::to_string(n) + " tokens");
    }
    ids.resize(std::min<int64_t>(n, static_cast<int64_t>(a.chunks - 1) * stride + ctx));
  }
  auto cache = MakeKvCache("fp16", model.CacheGeometry(ctx));
  if (!cache.ok()) return Fail(cache.message());
  FILE* pf = out.progress();
  std::vector<double> nll;
  auto r = lm::SlidingPerplexity(
      model, **cache, ids, ctx, a.stride,
      [&](int w, int, double mean_nll) {
        std::fprintf(pf, "[%d]%.4f,", w + 1, std::exp(mean_nll));
        std::fflush(pf);
      },
      &nll);
  std::fprintf(pf, "\n");
  if (!r.ok()) return Fail(r.message());
  const lm::MeanSe p = PplOf(nll);
  if (out.json) {
    nlohmann::json j = {{"mode", "perplexity"},  {"model", c.name},      {"text", a.text},
                        {"tokens", ids.size()},  {"ctx", ctx},           {"stride", stride},
                        {"windows", r->windows}, {"scored", r->scored},  {"ppl", Json(p)},
                        {"mean_nll", r->nll},    {"seconds", r->seconds}};
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("model %s | text %s | %zu tokens | ctx %d stride %d | %d windows, %d tokens scored\n",
              c.name.c_str(), a.text.c_str(), ids.size(), ctx, stride, r->windows, r->scored);
  std::printf("perplexity %.4f (mean NLL %.4f nats/token, %.1f s, %.0f tok/s)\n", r->ppl, r->nll,
              r->seconds, r->seconds > 0 ? r->scored / r->seconds : 0.0);
  std::printf("Final estimate: PPL = %.4f +/- %.5f\n", p.mean, p.se);
  return 0;
}

// --kl-divergence-base FILE: the base run over every chunk, written to FILE.
int WriteBase(const PplArgs& a, const Out& out, Loaded& m, const std::vector<int32_t>& ids,
              const lm::ChunkPlan& plan) {
  const ModelConfig& c = m.src->config;
  const Tokenizer& tok = *m.src->tokenizer;
  const policy::CacheContext for_model = policy::ForModel(c.name, m.src->identity, c.n_layers);
  auto spec = policy::ParseSpec(a.kv.empty() ? "fp16" : a.kv);
  if (!spec.ok()) return Fail("--kv: " + spec.message());
  auto cache = policy::CreateCache(*spec, m.model->CacheGeometry(plan.ctx), for_model);
  if (!cache.ok()) return Fail("--kv: " + cache.message());
  lm::KldBaseInfo info;
  info.vocab = c.vocab_size;
  info.ctx = plan.ctx;
  info.prefill = plan.prefill;
  info.chunks = plan.chunks;
  // Top-k: 64 by default (measured on stories260K, 4 chunks, kivi:nominal_bits=2:
  // mean KL 0.133181 against 0.133396 exact, -0.16%; 0.53 MB per 512-token
  // chunk instead of 1.05 MB for the whole 512-token vocabulary).
  int k = a.ref_top_k;
  if (k <= 0) k = 64;
  info.top_k = std::min(k, c.vocab_size);
  info.model_name = c.name;
  info.model_identity = m.src->identity;
  info.tokenizer_fingerprint = TokenizerFingerprint(tok);
  info.base_cache = (*cache)->Describe();
  info.text = a.text;
  auto w = lm::KldBaseWriter::Create(a.kld_base_out, info);
  if (!w.ok()) return Fail(w.message());
  FILE* pf = out.progress();
  std::fprintf(pf, "base: %s | %d chunks of %d tokens (prefill %d, %d scored each) | top-%d%s\n",
               info.base_cache.c_str(), plan.chunks, plan.ctx, plan.prefill,
               plan.scored_per_chunk(), info.top_k, info.top_k == c.vocab_size ? " (exact)" : "");
  std::vector<double> nll;
  for (int ch = 0; ch < plan.chunks; ++ch) {
    auto ref = lm::ComputeReference(
        *m.model, **cache, lm::ChunkTokens(ids, plan, ch, ChunkBos(tok)), plan.prefill, info.top_k);
    if (!ref.ok()) return Fail(ref.message());
    for (float lp : ref->target_logprob) nll.push_back(-static_cast<double>(lp));
    if (Status st = w->Add(*ref); !st.ok()) return Fail(st.message());
    std::fprintf(pf, "[%d]%.4f,", ch + 1, PplOf(nll).mean);
    std::fflush(pf);
  }
  std::fprintf(pf, "\n");
  if (Status st = w->Commit(); !st.ok()) return Fail(st.message());
  const lm::MeanSe p = PplOf(nll);
  if (out.json) {
    nlohmann::json j = {{"mode", "kl-divergence-base"},
                        {"file", a.kld_base_out},
                        {"model", c.name},
                        {"base_cache", info.base_cache},
                        {"ctx", plan.ctx},
                        {"prefill", plan.prefill},
                        {"chunks", plan.chunks},
                        {"top_k", info.top_k},
                        {"scored", nll.size()},
                        {"ppl", Json(p)}};
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("wrote %s: %d chunks, %zu scored positions, top-%d of %d tokens\n",
              a.kld_base_out.c_str(), plan.chunks, nll.size(), info.top_k, c.vocab_size);
  std::printf("Final estimate: PPL = %.4f +/- %.5f\n", p.mean, p.se);
  return 0;
}

// The summary lines + block of the comparison modes.
int PrintComparison(const PplArgs& a, const Out& out, const std::string& mode,
                    const std::string& header, const std::vector<lm::PositionScore>& pos,
                    const lm::LmScore& last, const KvCache& test, bool top_k_bound,
                    nlohmann::json extra) {
  const lm::KldSummary s = lm::Summarize(pos);
  if (out.json) {
    extra["mode"] = mode;
    extra["test_cache"] = test.Describe();
    extra["statistics"] = Json(s);
    extra["kl_is_top_k_bound"] = top_k_bound;
    extra["kv_after_prefill"] = Json(last.stats_after_prefill);
    extra["kv_end"] = Json(last.stats_end);
    std::printf("%s\n", extra.dump(2).c_str());
    return 0;
  }
  std::printf("\n%s\n", header.c_str());
  std::printf(
      "ppl ref %.4f | ppl test %.4f | KL(ref||test) %.6f nats/token%s | top-1 agreement %.4f\n",
      s.ppl_base.mean, s.ppl_test.mean, s.kld.mean, top_k_bound ? " (top-k bound)" : "",
      s.same_top.mean);
  // Bits per original element (every byte held x 8 / K and V elements of
  // every token fed): the figure `calibrate` and `eval` report for the same
  // state; true bits per KEPT element in brackets. Of the last chunk.
  std::printf(
      "test KV after prefill: %s (%lld bytes, %.3f true bits per kept element) | "
      "at end: %s (%lld bytes, %.3f true bits per kept element)\n",
      MemorySummary(last.stats_after_prefill).c_str(),
      static_cast<long long>(last.stats_after_prefill.bytes.total()),
      last.stats_after_prefill.true_bits(), MemorySummary(last.stats_end).c_str(),
      static_cast<long long>(last.stats_end.bytes.total()), last.stats_end.true_bits());
  const std::string note = test.BudgetNote();
  if (!note.empty()) std::printf("note: %s\n", note.c_str());
  std::printf("\n%s", lm::FormatKldBlock(s).c_str());
  if (top_k_bound) {
    std::printf("(KL over the base's top-k tokens + one bucket for the rest: a lower bound)\n");
  }
  if (a.kv_report) {
    std::printf("after prefill (peak of the prefill):\n%s",
                FormatKvReport(last.stats_after_prefill).c_str());
    std::printf("at end:\n%s", FormatKvReport(last.stats_end).c_str());
  }
  return 0;
}

// --kv SPEC without a base file: reference and test over every chunk.
int Compare(const PplArgs& a, const Out& out, Loaded& m, const std::vector<int32_t>& ids,
            const lm::ChunkPlan& plan) {
  const ModelConfig& c = m.src->config;
  const Tokenizer& tok = *m.src->tokenizer;
  auto ref_spec = policy::ParseSpec(a.ref);
  if (!ref_spec.ok()) return Fail("--ref: " + ref_spec.message());
  auto kv_spec = policy::ParseSpec(a.kv);
  if (!kv_spec.ok()) return Fail("--kv: " + kv_spec.message());
  // Created for this model: calibration profiles must have been made for it.
  const policy::CacheContext for_model = policy::ForModel(c.name, m.src->identity, c.n_layers);
  auto ref_cache = policy::CreateCache(*ref_spec, m.model->CacheGeometry(plan.ctx), for_model);
  if (!ref_cache.ok()) return Fail("--ref: " + ref_cache.message());
  auto test_cache = policy::CreateCache(*kv_spec, m.model->CacheGeometry(plan.ctx), for_model);
  if (!test_cache.ok()) return Fail("--kv: " + test_cache.message());
  // Exact KL (whole vocabulary) unless one chunk would store > 64M values.
  int top_k = a.ref_top_k;
  if (top_k < 0) top_k = lm::DefaultRefTopK(c.vocab_size, plan);
  std::vector<lm::PositionScore> pos;
  lm::LmScore last;
  bool bound = false;
  auto next_ref = [&](int ch) {
    auto ref = lm::ComputeReference(
        *m.model, **ref_cache, lm::ChunkTokens(ids, plan, ch, ChunkBos(tok)), plan.prefill, top_k);
    if (ref.ok()) bound = ref->top_k < ref->vocab;
    return ref;
  };
  if (Status st =
          ScoreChunks(*m.model, **test_cache, plan.chunks, next_ref, out.progress(), &pos, &last);
      !st.ok())
    return Fail(st.message());
  char header[512];
  std::snprintf(header, sizeof header,
                "model %s | text %s | %lld tokens in %d chunk(s) of %d: prefill %d, scored %zu | "
                "ref %s, test %s",
                c.name.c_str(), a.text.c_str(), static_cast<long long>(plan.chunks) * plan.ctx,
                plan.chunks, plan.ctx, plan.prefill, pos.size(), (*ref_cache)->Describe().c_str(),
                (*test_cache)->Describe().c_str());
  nlohmann::json extra = {{"model", c.name},       {"text", a.text},
                          {"ctx", plan.ctx},       {"prefill", plan.prefill},
                          {"chunks", plan.chunks}, {"ref_cache", (*ref_cache)->Describe()}};
  return PrintComparison(a, out, "compare", header, pos, last, **test_cache, bound, extra);
}

// --kl-divergence FILE: the --kv cache against the stored base.
int AgainstBase(const PplArgs& a, const Out& out, Loaded& m) {
  const ModelConfig& c = m.src->config;
  auto rd = lm::KldBaseReader::Open(a.kld_base_in);
  if (!rd.ok()) return Fail(rd.message());
  const lm::KldBaseInfo& info = rd->info();
  const std::string where = "KL base file '" + a.kld_base_in + "'";
  lm::KldBaseInfo here;
  here.vocab = c.vocab_size;
  here.model_name = c.name;
  here.model_identity = m.src->identity;
  here.tokenizer_fingerprint = TokenizerFingerprint(*m.src->tokenizer);
  if (Status st = lm::CheckBaseFits(info, a.kld_base_in, here, c.max_ctx, a.any_model); !st.ok())
    return Fail(st.message());
  int chunks = info.chunks;
  if (a.chunks > 0) {
    if (a.chunks > info.chunks) {
      return Fail("--chunks " + std::to_string(a.chunks) + " is more than the " +
                  std::to_string(info.chunks) + " chunk(s) in " + where);
    }
    chunks = a.chunks;
  }
  auto spec = policy::ParseSpec(a.kv.empty() ? "fp16" : a.kv);
  if (!spec.ok()) return Fail("--kv: " + spec.message());
  const policy::CacheContext for_model = policy::ForModel(c.name, m.src->identity, c.n_layers);
  auto cache = policy::CreateCache(*spec, m.model->CacheGeometry(info.ctx), for_model);
  if (!cache.ok()) return Fail("--kv: " + cache.message());
  std::vector<lm::PositionScore> pos;
  lm::LmScore last;
  if (Status st = ScoreChunks(
          *m.model, **cache, chunks, [&](int) { return rd->Next(); }, out.progress(), &pos, &last);
      !st.ok())
    return Fail(st.message());
  char header[512];
  std::snprintf(header, sizeof header,
                "model %s | base %s (%s, text %s) | %d chunk(s) of %d: prefill %d, scored %zu | "
                "test %s",
                c.name.c_str(), a.kld_base_in.c_str(), info.base_cache.c_str(), info.text.c_str(),
                chunks, info.ctx, info.prefill, pos.size(), (*cache)->Describe().c_str());
  nlohmann::json extra = {
      {"model", c.name},    {"base_file", a.kld_base_in}, {"base_cache", info.base_cache},
      {"ctx", info.ctx},    {"prefill", info.prefill},    {"chunks", chunks},
      {"top_k", info.top_k}};
  return PrintComparison(a, out, "kl-divergence", header, pos, last, **cache,
                         info.top_k < info.vocab, extra);
}

int Ppl(const PplArgs& args) {
  auto kv = args.kv_types.Resolve(args.kv);
  if (!kv.ok()) return Fail(kv.message());
  PplArgs a = args;
  a.kv = *kv;
  if (Status st = ApplyThreads(a.threads); !st.ok()) return Fail(st.message());
  if (a.ctx < 0 || a.stride < 0 || a.prefill < 0 || a.max_tokens < 0 || a.chunks < 0) {
    return Fail("--ctx, --stride, --prefill, --chunks and --max-tokens must be >= 0");
  }
  if (!a.kld_base_in.empty() && !a.kld_base_out.empty()) {
    return Fail("--kl-divergence and --kl-divergence-base are two runs: give one of them");
  }
  const Out out{a.json};
  const std::string path = ModelPathOrDefault(a.model);
  auto src = LoadModel(path, a.tokenizer);
  if (!src.ok()) return Fail(src.message());
  auto model = LlamaModel::Create(**src);
  if (!model.ok()) return Fail(model.message());
  Loaded m{std::move(*src), std::move(*model)};
  const ModelConfig& c = m.src->config;
  if (!a.kld_base_in.empty()) return AgainstBase(a, out, m);
  if (a.text.empty()) return Fail("-f TEXT is required (except with --kl-divergence FILE)");
  auto text_or = ReadTextFile(a.text);
  if (!text_or.ok()) return Fail(text_or.message());
  if (Status st = CheckContext(a.ctx, c); !st.ok()) return Fail(st.message());
  if (!a.kld_base_out.empty()) {
    if (Status st = CheckWritable(a.kld_base_out); !st.ok()) return Fail(st.message());
  }
  const int ctx = a.ctx > 0 ? a.ctx : std::min(c.max_ctx, 512);
  const Tokenizer& tok = *m.src->tokenizer;
  std::vector<int32_t> ids = tok.Encode(*text_or, ChunkBos(tok) >= 0);
  if (a.max_tokens > 0 && static_cast<int64_t>(ids.size()) > a.max_tokens) ids.resize(a.max_tokens);
  if (ids.size() < 2) return Fail("'" + a.text + "' has fewer than 2 tokens");

  if (a.kv.empty() && a.kld_base_out.empty()) return Plain(a, out, *m.model, c, ids, ctx);

  auto plan = lm::PlanChunks(static_cast<int64_t>(ids.size()), ctx, a.prefill, a.chunks);
  if (!plan.ok()) return Fail(plan.message());
  if (!a.kld_base_out.empty()) return WriteBase(a, out, m, ids, *plan);
  return Compare(a, out, m, ids, *plan);
}

const CommandRegistrar kRegister(11, [](CLI::App& app, int* rc) {
  auto a = std::make_shared<PplArgs>();
  CLI::App* cmd = app.add_subcommand(
      "ppl", "Perplexity of a text; with --kv or --kl-divergence, a KV cache against a reference");
  cmd->add_option("-m,--model", a->model, kDefaultModelHelp);
  cmd->add_option("-f,--file", a->text, "Text file (not needed with --kl-divergence)");
  cmd->add_option("-c,--ctx,--ctx-size", a->ctx,
                  "Window / chunk length in tokens (default: min(model context, 512))");
  cmd->add_option("--stride", a->stride,
                  "Plain mode: window start every S tokens (default: --ctx)");
  cmd->add_option("--chunks", a->chunks,
                  "Score only the first N chunks (plain mode: windows); more than the text "
                  "holds is an error (default: all)");
  a->kv_types.Add(cmd, cmd->add_option("--kv", a->kv,
                                       "KV policy spec to score (compare mode; with "
                                       "--kl-divergence[-base]: the cache of that run, default "
                                       "fp16)"));
  cmd->add_option("--ref", a->ref, "Compare mode: reference KV spec")->capture_default_str();
  cmd->add_option("--prefill", a->prefill,
                  "Chunked modes: prefill length P of each chunk (default: half the chunk)");
  cmd->add_option("--ref-top-k", a->ref_top_k,
                  "Reference tokens kept per position (compare mode: 0 = all, default all "
                  "unless > 64M values per chunk; base file: default 64, the rest of the mass "
                  "kept as one bucket)");
  cmd->add_option("--kl-divergence-base", a->kld_base_out,
                  "Write the base run (tokens + top-k distributions of every chunk) to FILE");
  cmd->add_option("--kl-divergence", a->kld_base_in,
                  "Score the --kv cache against the base FILE: llama-perplexity's statistics");
  cmd->add_flag("--kl-any-model", a->any_model,
                "--kl-divergence: accept a base file of another model with the same tokenizer");
  cmd->add_option("--max-tokens", a->max_tokens,
                  "Use at most N tokens of the text (beyond --ctx: more chunks)");
  cmd->add_option("-t,--threads", a->threads, "Threads (0 = all cores)");
  cmd->add_flag("--json", a->json, "Print the result as one JSON object (progress on stderr)");
  cmd->add_flag(
      "--kv-report", a->kv_report,
      "Comparison modes: per-layer tiers and bytes of the test cache after prefill and at the end "
      "(of the last chunk)");
  cmd->add_option("--tokenizer", a->tokenizer,
                  "llama2.c tokenizer.bin (llama2.c checkpoints only)");
  cmd->callback([a, rc] { *rc = Ppl(*a); });
});

}  // namespace
}  // namespace hqekv::cli::cmd_ppl
