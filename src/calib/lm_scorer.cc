#include "calib/lm_scorer.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <mutex>

#include "core/parallel.h"
#include "lm/logprob.h"
#include "lm/protocol.h"
#include "policy/factory.h"

namespace hqekv::calib {

TrialCache HqeKvTrialCache(const CacheChoice& c, const std::string& kv_options) {
  if (c.per_layer.empty()) {
    const std::string extra = kv_options.empty() ? "" : "," + kv_options;
    return {"hqekv:ratios=" + RatiosText(c.global) + extra, {}};
  }
  return {kv_options.empty() ? "hqekv" : "hqekv:" + kv_options, c.per_layer};
}

Result<std::unique_ptr<LmScorer>> LmScorer::Create(const ModelSource& src, const std::string& text,
                                                   const LmScorerOptions& opt) {
  std::unique_ptr<LmScorer> s(new LmScorer(src));
  s->opt_ = opt;
  const int ctx = src.config.max_ctx > 0 ? src.config.max_ctx : 512;
  s->window_ = opt.window > 0 ? opt.window : std::min(512, ctx);
  if (s->window_ > ctx) {
    return MakeError("--window " + std::to_string(s->window_) + " exceeds the model's context of " +
                     std::to_string(ctx) + " positions");
  }
  if (s->window_ < 8) return MakeError("--window must be >= 8 tokens");
  s->prefill_ = opt.prefill > 0 ? opt.prefill : s->window_ / 2;
  if (s->prefill_ >= s->window_) {
    return MakeError("--prefill " + std::to_string(s->prefill_) + " must be below the window (" +
                     std::to_string(s->window_) + ")");
  }
  if (!src.tokenizer) return MakeError("model " + src.path + " has no tokenizer");
  const int32_t bos = src.tokenizer->bos();
  const int per_window = s->window_ - (bos >= 0 ? 1 : 0);
  const int64_t wanted_windows = std::max<int64_t>(opt.tokens / s->window_, 1);
  // Tokenize only a prefix long enough (cut at a line end), doubling it
  // until it holds the wanted windows: the bundled texts are megabytes.
  std::vector<int32_t> ids;
  for (size_t chars = static_cast<size_t>(wanted_windows * per_window) * 6;; chars *= 2) {
    size_t cut = std::min(chars, text.size());
    if (cut < text.size()) {
      const size_t nl = text.find('\n', cut);
      cut = nl == std::string::npos ? text.size() : nl + 1;
    }
    ids = src.tokenizer->Encode(std::string_view(text).substr(0, cut), /*add_bos=*/false);
    if (cut == text.size() || static_cast<int64_t>(ids.size()) >= wanted_windows * per_window)
      break;
  }
  const int64_t n_windows =
      std::min<int64_t>(static_cast<int64_t>(ids.size()) / per_window, wanted_windows);
  if (n_windows < 1) {
    return MakeError("calibration text has " + std::to_string(ids.size()) +
                     " tokens, fewer than one window of " + std::to_string(s->window_));
  }
  for (int64_t w = 0; w < n_windows; ++w) {
    std::vector<int32_t> win;
    if (bos >= 0) win.push_back(bos);
    win.insert(win.end(), ids.begin() + w * per_window, ids.begin() + (w + 1) * per_window);
    s->windows_.push_back(std::move(win));
  }
  s->cache_of = [raw = s.get()](const CacheChoice& c) {
    return HqeKvTrialCache(c, raw->opt_.kv_options);
  };
  Result<TrialScore> ref = s->Run({opt.reference, {}}, /*record_reference=*/true);
  if (!ref.ok()) return ref.error();
  return s;
}

int64_t LmScorer::scored_positions() const {
  return static_cast<int64_t>(windows_.size()) * (window_ - prefill_);
}

Result<TrialScore> LmScorer::Score(const CacheChoice& choice) {
  return Run(cache_of(choice), false);
}

Result<TrialScore> LmScorer::ScoreSpec(const std::string& spec) { return Run({spec, {}}, false); }

Result<TrialScore> LmScorer::Run(const TrialCache& trial, bool record_reference) {
  HQEKV_ASSIGN_OR_RETURN(const policy::PolicySpec spec, policy::ParseSpec(trial.spec));
  policy::CacheContext context =
      policy::ForModel(src_.config.name, src_.identity, src_.config.n_layers);
  context.layer_ratios = trial.layer_ratios;
  const int vocab = src_.config.vocab_size;
  const int n_windows = static_cast<int>(windows_.size());
  const int n_tf = window_ - prefill_;
  if (record_reference) ref_logp_.assign(static_cast<size_t>(n_windows) * n_tf * vocab, 0.0f);

  std::vector<double> kl_sum(n_windows, 0.0);
  std::vector<int64_t> bytes(n_windows, 0), elements(n_windows, 0);
  std::mutex err_mu;
  std::string first_error;
  auto fail = [&](const std::string& m) {
    std::lock_guard<std::mutex> lock(err_mu);
    if (first_error.empty()) first_error = m;
  };

  ParallelFor(n_windows, [&](int64_t begin, int64_t end) {
    auto model = LlamaModel::Create(src_);
    if (!model.ok()) return fail(model.message());
    lm::LlamaStep step(**model);
    const KvGeometry g = (*model)->CacheGeometry(window_);
    std::vector<float> logq(vocab);
    for (int64_t w = begin; w < end; ++w) {
      auto cache = policy::CreateCache(spec, g, context);
      if (!cache.ok()) return fail(cache.message());
      lm::WindowHooks hooks;
      // Memory is measured where `hqekv ppl` and `eval` measure it: after
      // the window's first n - 1 tokens (they feed the window without its
      // last token). Measuring after the last one too would report a
      // different point of a residual cycle (e.g. KIVI just after sealing,
      // with an empty residual) for the same text.
      KvStats stats_at_ppl_end;
      hooks.after_prefill = [&] {
        if (prefill_ >= window_ - 1) stats_at_ppl_end = (*cache)->Stats();
      };
      hooks.on_logits = [&](int t, float* logits) {
        if (t == window_ - 2) stats_at_ppl_end = (*cache)->Stats();
        float* ref = &ref_logp_[(static_cast<size_t>(w) * n_tf + (t - prefill_)) * vocab];
        if (record_reference) {
          lm::LogSoftmax(logits, vocab, ref);
        } else {
          lm::LogSoftmax(logits, vocab, logq.data());
          kl_sum[w] += lm::Kl(ref, logq.data(), vocab);
        }
        return Status::Ok();
      };
      // The whole window; scored after each teacher-forced token t = P..window-1.
      const lm::Window win{windows_[w].data(), window_, prefill_, /*first_scored=*/prefill_};
      Status st = lm::RunWindow(step, **cache, win, hooks);
      if (!st.ok()) return fail(st.message());
      bytes[w] = stats_at_ppl_end.bytes.total();
      elements[w] = stats_at_ppl_end.original_elements;
    }
  });
  if (!first_error.empty()) return MakeError(first_error);

  TrialScore score;
  double kl = 0;
  int64_t b = 0, e = 0;
  for (int w = 0; w < n_windows; ++w) {
    kl += kl_sum[w];
    b += bytes[w];
    e += elements[w];
  }
  score.kl = kl / (static_cast<double>(n_windows) * n_tf);
  score.true_bits = e > 0 ? 8.0 * static_cast<double>(b) / e : 0.0;
  return score;
}

}  // namespace hqekv::calib
